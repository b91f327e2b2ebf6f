"""Number functions of fluxion.numpy: gcd/lcm, float decomposition (frexp, ldexp, modf),
spacing and nextafter, the Bessel function i0, bit counts, and the Array API trig names."""
from __future__ import annotations

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.custom_derivatives import custom_jvp
from fluxion._src.lax import lax, structural
from fluxion._src.numpy import ufuncs, util
from fluxion._src.numpy.util import (ensure_arraylike, promote_args_inexact, promote_args_numeric,
                                     promote_dtypes_inexact, scalar_like, select)

# Array API spellings of the inverse trigonometric functions.
acos = ufuncs._named("acos", lambda x, /: ufuncs.arccos(x), ufuncs.arccos.__doc__)
acosh = ufuncs._named("acosh", lambda x, /: ufuncs.arccosh(x), ufuncs.arccosh.__doc__)
asin = ufuncs._named("asin", lambda x, /: ufuncs.arcsin(x), ufuncs.arcsin.__doc__)
asinh = ufuncs._named("asinh", lambda x, /: ufuncs.arcsinh(x), ufuncs.arcsinh.__doc__)
atan = ufuncs._named("atan", lambda x, /: ufuncs.arctan(x), ufuncs.arctan.__doc__)
atanh = ufuncs._named("atanh", lambda x, /: ufuncs.arctanh(x), ufuncs.arctanh.__doc__)
atan2 = ufuncs._named("atan2", lambda x1, x2, /: ufuncs.arctan2(x1, x2), ufuncs.arctan2.__doc__)


def _dtype(x):
    return core.get_aval(x).dtype


# ---------------------------------------------------------------------------------------------
# gcd / lcm

def _check_integer(name, x):
    if not dtypes.is_integer(_dtype(x)):
        raise ValueError(f"Arguments to jax.numpy.{name} must be integers.")


def gcd(x1, x2):
    """Greatest common divisor of |x1| and |x2|, elementwise (integers only)."""
    x1, x2 = ensure_arraylike("gcd", x1, x2)
    x1, x2 = util.promote_dtypes(x1, x2)
    _check_integer("gcd", x1)
    from fluxion._src.lax.control_flow import while_loop
    aval = core.get_aval(x1)
    # Euclid on the magnitudes as unsigned integers: the most negative value's magnitude does
    # not fit its own type (|-2**31| is -2**31 in int32), and the loop would never end.
    x1, x2 = util.broadcast_arrays(_unsigned_magnitude(x1), _unsigned_magnitude(x2))
    zero = scalar_like(x2, 0)

    def keep_going(state):
        from fluxion._src.numpy.reductions import any as any_
        return any_(lax.ne(state[1], zero))

    def euclid_step(state):
        a, b = state
        nonzero = lax.ne(b, zero)
        safe_b = select(nonzero, b, scalar_like(b, 1))
        a, b = select(nonzero, b, a), select(nonzero, lax.rem(a, safe_b), zero)
        swap = lax.lt(a, b)
        return select(swap, b, a), select(swap, a, b)

    divisor = while_loop(keep_going, euclid_step, (x1, x2))[0]
    # 2**31 wraps to -2**31, as in NumPy; Python ints in give a weakly typed result.
    return lax._convert_element_type(divisor, aval.dtype, weak_type=aval.weak_type)


def _unsigned_magnitude(x):
    """|x| in the unsigned integer type of x's width: exact for every value of x."""
    dtype = _dtype(x)
    if not dtypes.issubdtype(dtype, np.signedinteger):
        return x
    bits = lax.convert_element_type(x, _UINT_OF_WIDTH[dtype.itemsize])  # two's complement
    return select(lax.lt(x, scalar_like(x, 0)), lax.sub(scalar_like(bits, 0), bits), bits)


def lcm(x1, x2):
    """Least common multiple of |x1| and |x2|, elementwise (integers only; 0 if either is 0)."""
    x1, x2 = ensure_arraylike("lcm", x1, x2)
    x1, x2 = util.promote_dtypes(x1, x2)
    _check_integer("lcm", x1)
    x1, x2 = ufuncs.absolute(x1), ufuncs.absolute(x2)
    d = gcd(x1, x2)
    zero = scalar_like(d, 0)
    d_is_zero = lax.eq(d, zero)
    safe_d = select(d_is_zero, scalar_like(d, 1), d)
    x1, x2 = util.broadcast_arrays(x1, x2)
    out = ufuncs.multiply(x1, ufuncs.floor_divide(x2, safe_d))
    return select(d_is_zero, zero, out)


# ---------------------------------------------------------------------------------------------
# Floating point decomposition

_UINT_OF_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _frexp_exponent(x):
    """The int32 exponent e of frexp: x == m * 2**e with 0.5 <= |m| < 1 (0 for 0, inf, NaN)."""
    dt = _dtype(x)
    info = dtypes.finfo(dt)
    nmant, nexp = int(info.nmant), int(info.nexp)
    udt = np.dtype(_UINT_OF_WIDTH[dt.itemsize])
    int32 = np.dtype(np.int32)
    # Subnormals: scale into the normal range first, and take the scale off the exponent.
    subnormal = lax.lt(lax.abs(x), lax._convert_element_type(float(info.smallest_normal), dt, False))
    scaled = select(subnormal, lax.mul(x, lax._convert_element_type(2.0 ** nmant, dt, False)), x)
    shift = select(subnormal, lax._convert_element_type(nmant, int32, False),
                   lax._convert_element_type(0, int32, False))
    bits = lax.bitcast_convert_type(scaled, udt)
    field = lax.bitwise_and(lax.shift_right_logical(bits, lax._convert_element_type(nmant, udt, False)),
                            lax._convert_element_type((1 << nexp) - 1, udt, False))
    exponent = lax.sub(lax._convert_element_type(field, int32, False),
                       lax._convert_element_type(int(info.maxexp) - 2, int32, False))
    exponent = lax.sub(exponent, shift)
    special = lax.bitwise_or(lax.bitwise_not(lax.is_finite(x)), lax.eq(x, scalar_like(x, 0)))
    return select(special, lax._convert_element_type(0, int32, False), exponent)


def _times_power_of_two(x, k):
    """x * 2**k for int32 k within twice the normal exponent range, as two exact factors."""
    dt = _dtype(x)
    half = lax.shift_right_arithmetic(k, scalar_like(k, 1))
    return lax.mul(lax.mul(x, _exact_power_of_two(half, dt)),
                   _exact_power_of_two(lax.sub(k, half), dt))


def frexp(x, /):
    """Split x into a mantissa in [0.5, 1) (in magnitude) and an int32 exponent:
    x == m * 2**e."""
    x = ensure_arraylike("frexp", x)
    (x,) = promote_dtypes_inexact(x)
    if dtypes.is_complex(_dtype(x)):
        raise TypeError("frexp does not support complex-valued inputs")
    e = _frexp_exponent(x)
    # Scaling by an exact power of two gives the mantissa, and its derivative 2**-e.
    special = lax.bitwise_or(lax.bitwise_not(lax.is_finite(x)), lax.eq(x, scalar_like(x, 0)))
    return select(special, x, _times_power_of_two(x, lax.neg(e))), e


def _exact_power_of_two(k, dt):
    """2.0**k in dtype `dt`, exactly, for int32 k in the normal exponent range, from its bits."""
    info = dtypes.finfo(dt)
    udt = np.dtype(_UINT_OF_WIDTH[dt.itemsize])
    biased = lax._convert_element_type(lax.add(k, scalar_like(k, int(info.maxexp) - 1)), udt, False)
    return lax.bitcast_convert_type(
        lax.shift_left(biased, lax._convert_element_type(int(info.nmant), udt, False)), dt)


def ldexp(x1, x2, /):
    """x1 * 2**x2 elementwise (x2 must be an integer), without intermediate overflow."""
    x1, x2 = ensure_arraylike("ldexp", x1, x2)
    dt1, dt2 = _dtype(x1), _dtype(x2)
    if dtypes.is_complex(dt1) or dtypes.is_inexact(dt2):
        raise ValueError(f"ldexp not supported for input types {(dt1, dt2)}")
    (x1,) = promote_args_inexact("ldexp", x1)
    dt = _dtype(x1)
    info = dtypes.finfo(dt)
    low, high = 2 * int(info.minexp), 2 * (int(info.maxexp) - 1)
    if dt2 == dtypes.bool_:
        x2 = lax._convert_element_type(x2, np.int32, False)
    # Beyond [low, high] every finite x1 over- or underflows: clamping changes nothing.
    x2 = structural.clamp(lax._convert_element_type(max(low - 64, int(dtypes.iinfo(_dtype(x2)).min)),
                                             _dtype(x2), False), x2,
                   lax._convert_element_type(min(high + 64, int(dtypes.iinfo(_dtype(x2)).max)),
                                             _dtype(x2), False))
    x1, x2 = util.broadcast_arrays(x1, lax._convert_element_type(x2, np.int32, False))
    m, e = frexp(x1)
    e = structural.clamp(lax._convert_element_type(low, np.int32, False), lax.add(e, x2),
                  lax._convert_element_type(high, np.int32, False))
    out = _times_power_of_two(m, e)
    keep = lax.bitwise_or(lax.bitwise_not(lax.is_finite(x1)), lax.eq(x1, scalar_like(x1, 0)))
    return select(keep, x1, out)


def modf(x, /, out=None):
    """(fractional part, integral part) of x, both with x's sign."""
    x = ensure_arraylike("modf", x)
    (x,) = promote_dtypes_inexact(x)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.modf is not supported.")
    whole = select(lax.ge(x, scalar_like(x, 0)), lax.floor(x), lax.ceil(x))
    return lax.sub(x, whole), whole


def nextafter(x, y, /):
    """The next representable floating point value after x in the direction of y."""
    return lax.nextafter(*promote_args_inexact("nextafter", x, y))


def spacing(x, /):
    """The distance from x to the adjacent representable number away from zero."""
    (x,) = promote_args_inexact("spacing", x)
    dt = _dtype(x)
    if dtypes.is_complex(dt):
        raise ValueError("jnp.spacing is not defined for complex inputs.")
    inf = util.lax_const(x, np.inf)
    if dt == np.float16:  # NumPy's float16 spacing always steps toward +inf
        return lax.sub(lax.nextafter(x, lax.broadcast_in_dim(inf, core.get_aval(x).shape, ())), x)
    toward = ufuncs.copysign(inf, x)
    step = lax.sub(lax.nextafter(x, util.broadcast_arrays(toward, x)[0]), x)
    tiny = ufuncs.copysign(util.lax_const(x, float(dtypes.finfo(dt).smallest_subnormal)), x)
    out = select(lax.eq(step, scalar_like(step, 0)), tiny, step)
    return lax._convert_element_type(out, dt, False)


def fabs(x, /):
    """|x| as a float, for real x."""
    x = ensure_arraylike("fabs", x)
    if dtypes.is_complex(_dtype(x)):
        raise TypeError("ufunc 'fabs' does not support complex dtypes")
    (x,) = promote_dtypes_inexact(x)
    return lax.abs(x)


def bitwise_count(x, /):
    """Number of 1 bits in |x| (integers and booleans), as uint8."""
    (x,) = promote_args_numeric("bitwise_count", x)
    if not dtypes.is_integer(_dtype(x)):
        raise TypeError(f"population_count does not accept dtype {_dtype(x)}. Accepted dtypes "
                        "are subtypes of integer.")
    return lax._convert_element_type(lax.population_count(ufuncs.absolute(x)), np.uint8, False)


# ---------------------------------------------------------------------------------------------
# i0: exp(|x|) * i0e(|x|), with i0e and i1e as Chebyshev series. The coefficients were fitted
# for this module to scipy.special.i0e/i1e at Chebyshev nodes: on [0, 8] in t = x/4 - 1 (i1e as
# i1e(x)/x), and on [8, inf) in t = 16/x - 1 of sqrt(x) * i0e(x) and sqrt(x) * i1e(x).

_I0E_SMALL = (
    0.3383976372047381,
    -0.30468267234319846,
    0.1716209015222088,
    -0.09490109704804774,
    0.04930528423967057,
    -0.02373741480589958,
    0.010546460394594944,
    -0.004324309995050569,
    0.0016394756169412503,
    -0.0005763755745385274,
    0.00018850288509578177,
    -5.754195010081497e-05,
    1.6448448070738437e-05,
    -4.4167383583849985e-06,
    1.1173875390639795e-06,
    -2.6707938536758474e-07,
    6.046995022366536e-08,
    -1.3000250079028074e-08,
    2.6598236555614686e-09,
    -5.189794808873675e-10,
    9.675804680429408e-11,
    -1.7268185694097538e-11,
    2.955042399668108e-12,
    -4.856442264461691e-13,
    7.676467044043188e-14,
    -1.1595464998892894e-14,
    1.717846666502651e-15,
    -1.698617039638815e-16,
    2.5639502485114194e-17,
    2.0030861316495463e-17,
    -8.973825869789968e-17,
)

_I1E_SMALL = (
    0.12629359322181682,
    -0.17641651835783415,
    0.10264365868984707,
    -0.052945981208095017,
    0.024726449030626464,
    -0.010564084894626255,
    0.004156422944312863,
    -0.0015135724506312382,
    0.0005122859561685028,
    -0.00016176081582588804,
    4.781565107544254e-05,
    -1.3273163656029907e-05,
    3.4702513081246943e-06,
    -8.568720264226411e-07,
    2.0032947530865348e-07,
    -4.445059127585187e-08,
    9.381537384643436e-09,
    -1.8872497422633603e-09,
    3.625589936507319e-10,
    -6.663484954246403e-11,
    1.173614894902871e-11,
    -1.9839542553889345e-12,
    3.223526449940981e-13,
    -5.0442516201651527e-14,
    7.563653233108686e-15,
    -1.0704492287535175e-15,
    1.5383701491068516e-16,
    2.003086131649546e-17,
    -2.5639502485114194e-17,
    -2.4037033579794557e-18,
    -3.204937810639274e-17,
)

_I0E_LARGE = (
    0.40224520550705445,
    0.003369116478255696,
    6.889758346916953e-05,
    2.891370520835105e-06,
    2.048918589459895e-07,
    2.2666689905909156e-08,
    3.396232024698554e-09,
    4.940602374613853e-10,
    1.1889146568810277e-11,
    -3.149916556444555e-11,
    -1.321581603375782e-11,
    -1.7941766529055777e-12,
    7.180111741646129e-13,
    3.8527991777682004e-13,
    1.54020045218394e-14,
    -4.1503608454642584e-14,
    -9.551741426104564e-15,
    3.810996558346489e-15,
    1.7731318437361777e-15,
    -3.4038693020887184e-16,
    -2.8403761346790557e-16,
    3.497889157393019e-17,
    4.526974657527974e-17,
    -3.505400730386705e-18,
    -8.813578979258003e-18,
    -1.2018516789897278e-18,
    6.009258394948639e-19,
)

_I1E_LARGE = (
    0.38928811750914,
    -0.009761097491361476,
    -0.00011058893876263362,
    -3.882564808882292e-06,
    -2.51223623792386e-07,
    -2.6314688474457694e-08,
    -3.835380391338363e-09,
    -5.589743514484072e-10,
    -1.8974965105781456e-11,
    3.2526029606346264e-11,
    1.412580300000653e-11,
    2.035623435233814e-12,
    -7.198572276183903e-13,
    -4.083599733664916e-13,
    -2.102249134326364e-14,
    4.2718241764579105e-14,
    1.0417547961881302e-14,
    -3.818382938456946e-15,
    -1.882500346524243e-15,
    3.2655311661216716e-16,
    2.9245057522083367e-16,
    -3.715724774209907e-17,
    -5.4083325554537743e-17,
    0.0,
    5.6086411686187284e-18,
    6.009258394948639e-19,
    -5.60864116861873e-18,
)


def _chebyshev_series(t, coefficients):
    """sum_k c_k T_k(t) by Clenshaw's recurrence."""
    b1 = b2 = scalar_like(t, 0)
    two_t = lax.mul(t, scalar_like(t, 2))
    for c in coefficients[:0:-1]:
        b1, b2 = lax.add(lax.sub(lax.mul(two_t, b1), b2), scalar_like(t, c)), b1
    return lax.add(lax.sub(lax.mul(t, b1), b2), scalar_like(t, coefficients[0]))


def _i0e(ax):
    """exp(-x) I0(x) for x >= 0."""
    eight = scalar_like(ax, 8)
    x_small, x_large = lax.min(ax, eight), lax.max(ax, eight)
    small = _chebyshev_series(lax.sub(lax.div(x_small, scalar_like(ax, 4)), scalar_like(ax, 1)),
                              _I0E_SMALL)
    large = lax.div(_chebyshev_series(lax.sub(lax.div(scalar_like(ax, 16), x_large),
                                              scalar_like(ax, 1)), _I0E_LARGE), lax.sqrt(x_large))
    return select(lax.le(ax, eight), small, large)


def _i1e_over_x(ax):
    """exp(-x) I1(x) / x for x >= 0: even and smooth at 0, so x * this is I1's odd extension."""
    eight = scalar_like(ax, 8)
    x_small, x_large = lax.min(ax, eight), lax.max(ax, eight)
    small = _chebyshev_series(lax.sub(lax.div(x_small, scalar_like(ax, 4)), scalar_like(ax, 1)),
                              _I1E_SMALL)
    large = lax.div(_chebyshev_series(lax.sub(lax.div(scalar_like(ax, 16), x_large),
                                              scalar_like(ax, 1)), _I1E_LARGE),
                    lax.mul(lax.sqrt(x_large), x_large))
    return select(lax.le(ax, eight), small, large)


@custom_jvp
def _i0(x):
    ax = lax.abs(x)
    return lax.mul(lax.exp(ax), _i0e(ax))


@_i0.defjvp
def _i0_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    ax = lax.abs(x)
    # d/dx I0(x) = I1(x) = x exp(|x|) (i1e(|x|) / |x|), written so that it differentiates again.
    i1 = lax.mul(x, lax.mul(lax.exp(ax), _i1e_over_x(ax)))
    return _i0(x), lax.mul(t, i1)


def i0(x):
    """The modified Bessel function of the first kind, order 0 (real input)."""
    (x,) = promote_args_inexact("i0", x)
    if not dtypes.is_float(_dtype(x)):
        raise ValueError(f"Unsupported input type to jax.numpy.i0: {_dtype(x)}")
    dtype = _dtype(x)
    if dtype in (dtypes.float16, dtypes.bfloat16):
        # The Chebyshev sums lose several ulps when summed in 8 or 11 bits: sum in float32.
        return lax.convert_element_type(_i0(lax.convert_element_type(x, np.float32)), dtype)
    return _i0(x)


def _compile_eager_calls():  # as in manipulation.py
    from fluxion._src.numpy.eager import compile_eagerly
    compile_eagerly(globals(), names=("gcd", "lcm", "frexp", "ldexp", "modf", "nextafter",
                                      "spacing", "fabs", "bitwise_count", "i0"),
                    static_parameters=frozenset({"out"}))


_compile_eager_calls()
