"""Elementwise functions of fluxion.numpy, with NumPy's promotion and broadcasting."""
from __future__ import annotations

import math
import operator
from functools import partial

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.export.shape_poly import (DimExpr, InconclusiveDimensionOperation,
                                            is_symbolic_shape)
from fluxion._src.custom_derivatives import custom_jvp
from fluxion._src.lax import lax
from fluxion._src.lax import structural
from fluxion._src.numpy import util
from fluxion._src.numpy.util import (ensure_arraylike, promote_args, promote_args_inexact,
                                     promote_args_numeric, promote_dtypes_inexact,
                                     promote_dtypes_numeric, lax_const, scalar_like, select,
                                     to_bool)


def _dtype(x) -> np.dtype:
    return core.get_aval(x).dtype


def _is_int_or_bool(x) -> bool:
    dt = _dtype(x)
    return dtypes.is_integer(dt) or dt == dtypes.bool_


def _strong_const(x, value):
    """A scalar of x's dtype that is not weakly typed (so the result is not weak either)."""
    return lax._convert_element_type(value, _dtype(x), False)


def _full_like_bool(x, value: bool):
    return lax.broadcast_in_dim(lax._convert_element_type(value, dtypes.bool_, False),
                                core.get_aval(x).shape, ())


def _named(name, fn, doc):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _binary(name, lax_fn, promote=promote_args):
    def fn(x1, x2, /):
        return lax_fn(*promote(name, x1, x2))
    return _named(name, fn, f"Elementwise `{name}` with NumPy broadcasting and type promotion.")


def _unary_inexact(name, lax_fn):
    def fn(x, /):
        return lax_fn(*promote_args_inexact(name, x))
    return _named(name, fn, f"Elementwise `{name}`; integer and boolean inputs become floats.")


# ---------------------------------------------------------------------------------------------
# Arithmetic

def add(x1, x2, /):
    """Elementwise x1 + x2 (logical or for booleans)."""
    x1, x2 = promote_args("add", x1, x2)
    return lax.bitwise_or(x1, x2) if _dtype(x1) == dtypes.bool_ else lax.add(x1, x2)


def multiply(x1, x2, /):
    """Elementwise x1 * x2 (logical and for booleans)."""
    x1, x2 = promote_args("multiply", x1, x2)
    return lax.bitwise_and(x1, x2) if _dtype(x1) == dtypes.bool_ else lax.mul(x1, x2)


subtract = _binary("subtract", lax.sub)
true_divide = _binary("true_divide", lax.div, promote_args_inexact)
maximum = _binary("maximum", lax.max)
minimum = _binary("minimum", lax.min)
float_power = _binary("float_power", lax.pow, promote_args_inexact)


def divide(x1, x2, /):
    """Elementwise true division x1 / x2 (integers become floats)."""
    return true_divide(x1, x2)


def negative(x, /):
    """Elementwise -x."""
    return lax.neg(*promote_args("negative", x))


def positive(x, /):
    """Elementwise +x (the input as an array)."""
    return promote_args("positive", x)[0]


def absolute(x, /):
    """Elementwise |x| (the magnitude, a real number, for complex x)."""
    x = ensure_arraylike("absolute", x)
    return x if _dtype(x).kind in "ub" else lax.abs(x)


abs = absolute


def sign(x, /):
    """Elementwise sign: -1, 0 or 1 (x / |x| for complex x)."""
    return lax.sign(*promote_args("sign", x))


def _float_divmod(x1, x2):
    """Python's floored division and modulo for floats (NumPy's npy_divmod)."""
    x1, x2 = util.broadcast_arrays(x1, x2)
    mod = lax.rem(x1, x2)
    zero = scalar_like(x1, 0)
    div = lax.div(lax.sub(x1, mod), x2)
    # Shift toward -inf when the truncated remainder's sign differs from the divisor's.
    fix = lax.bitwise_and(lax.ne(mod, zero), lax.ne(lax.lt(x2, zero), lax.lt(mod, zero)))
    mod = select(fix, lax.add(mod, x2), mod)
    div = select(fix, lax.sub(div, scalar_like(div, 1)), div)
    # The quotient is very nearly an integer; snap it to the nearest one.
    floordiv = lax.floor(div)
    floordiv = select(lax.gt(lax.sub(div, floordiv), scalar_like(div, 0.5)),
                      lax.add(floordiv, scalar_like(div, 1)), floordiv)
    signed_zero = copysign(zero, lax.div(x1, x2))
    floordiv = select(lax.eq(div, zero), signed_zero, floordiv)
    mod = select(lax.eq(mod, zero), copysign(zero, x2), mod)
    by_zero = lax.eq(x2, zero)
    return select(by_zero, lax.div(x1, x2), floordiv), select(by_zero, lax.rem(x1, x2), mod)


def _int_floor_divide(x1, x2):
    quotient = lax.div(x1, x2)
    if _dtype(x1).kind == "u":
        return quotient
    zero = scalar_like(x1, 0)
    # Signs compared with sign(), not < 0, so a zero divisor gives JAX's value (x // 0 is
    # -2 for x > 0: XLA's x / 0 = -1, then the floor adjustment).
    inexact = lax.bitwise_and(lax.ne(lax.sign(x1), lax.sign(x2)),
                              lax.ne(lax.rem(x1, x2), zero))
    return select(inexact, lax.sub(quotient, scalar_like(quotient, 1)), quotient)


def _int_remainder(x1, x2):
    zero = scalar_like(x1, 0)
    x2 = select(lax.eq(x2, zero), scalar_like(x2, 1), x2)
    mod = lax.rem(x1, x2)
    if _dtype(x1).kind == "u":
        return mod
    wrong_sign = lax.bitwise_and(lax.ne(mod, zero), lax.ne(lax.lt(mod, zero), lax.lt(x2, zero)))
    return select(wrong_sign, lax.add(mod, x2), mod)


def _check_not_complex(name, x):
    if dtypes.is_complex(_dtype(x)):
        raise TypeError(f"{name} does not support complex-valued inputs")


def floor_divide(x1, x2, /):
    """Elementwise x1 // x2, rounding toward -inf (Python semantics)."""
    x1, x2 = promote_args_numeric("floor_divide", x1, x2)
    _check_not_complex("floor_divide", x1)
    if dtypes.is_integer(_dtype(x1)):
        return _int_floor_divide(x1, x2)
    return _float_divmod(x1, x2)[0]


def remainder(x1, x2, /):
    """Elementwise x1 % x2, with the sign of the divisor (Python semantics)."""
    x1, x2 = promote_args_numeric("remainder", x1, x2)
    _check_not_complex("remainder", x1)
    if dtypes.is_integer(_dtype(x1)):
        return _int_remainder(x1, x2)
    return _float_divmod(x1, x2)[1]


mod = _named("mod", lambda x1, x2, /: remainder(x1, x2), remainder.__doc__)


def divmod(x1, x2, /):
    """(floor_divide(x1, x2), remainder(x1, x2))."""
    x1, x2 = promote_args_numeric("divmod", x1, x2)
    _check_not_complex("divmod", x1)
    if dtypes.is_integer(_dtype(x1)):
        return _int_floor_divide(x1, x2), _int_remainder(x1, x2)
    return _float_divmod(x1, x2)


def fmod(x1, x2, /):
    """Elementwise remainder with the sign of the dividend (C's fmod)."""
    x1, x2 = promote_args_numeric("fmod", x1, x2)
    _check_not_complex("fmod", x1)
    if dtypes.is_integer(_dtype(x2)):
        x2 = select(lax.eq(x2, scalar_like(x2, 0)), scalar_like(x2, 1), x2)
    return lax.rem(x1, x2)


def _int_power(base, exponent):
    """Integer ** non-negative integer by squaring, over every bit of the exponent."""
    base, exponent = util.broadcast_arrays(base, exponent)
    zero, one = _strong_const(exponent, 0), _strong_const(exponent, 1)
    result = lax.broadcast_in_dim(_strong_const(base, 1), core.get_aval(base).shape, ())
    for _ in range(_dtype(exponent).itemsize * 8):
        odd = lax.ne(lax.bitwise_and(exponent, one), zero)
        result = select(odd, lax.mul(result, base), result)
        base = lax.mul(base, base)
        exponent = lax.shift_right_logical(exponent, one)
    return result


def power(x1, x2, /):
    """Elementwise x1 ** x2.

    A concrete integer exponent uses repeated multiplication (exact, and x1's dtype is kept);
    integer ** integer is exact for non-negative exponents.
    """
    util.check_arraylike("power", x1, x2)
    if core.is_concrete(x2) and np.ndim(x2) == 0:
        try:
            exponent = operator.index(x2)
        except TypeError:
            pass
        else:
            (x1,) = promote_dtypes_numeric(x1)
            return lax.integer_pow(x1, exponent)
    original_x2 = util.as_array(x2)
    x1, x2 = promote_args_numeric("power", x1, x2)
    if _is_int_or_bool(x1):
        return _int_power(x1, x2)
    if dtypes.is_integer(_dtype(original_x2)):
        original_x2 = util.broadcast_arrays_for_op("power", x1, original_x2)[1]
        return lax.pow(x1, original_x2)
    return lax.pow(x1, x2)


pow = _named("pow", lambda x1, x2, /: power(x1, x2), power.__doc__)


def square(x, /):
    """Elementwise x * x (booleans become integers)."""
    (x,) = promote_dtypes_numeric(ensure_arraylike("square", x))
    return lax.square(x)


def reciprocal(x, /):
    """Elementwise 1 / x (integers become floats)."""
    (x,) = promote_dtypes_inexact(ensure_arraylike("reciprocal", x))
    return lax.reciprocal(x)


# ---------------------------------------------------------------------------------------------
# Rounding

def floor(x, /):
    """Elementwise floor (integers and booleans are returned unchanged)."""
    x = ensure_arraylike("floor", x)
    return x if _is_int_or_bool(x) else lax.floor(x)


def ceil(x, /):
    """Elementwise ceiling (integers and booleans are returned unchanged)."""
    x = ensure_arraylike("ceil", x)
    return x if _is_int_or_bool(x) else lax.ceil(x)


def trunc(x, /):
    """Elementwise rounding toward zero."""
    x = ensure_arraylike("trunc", x)
    if _is_int_or_bool(x):
        return x
    return select(lax.lt(x, scalar_like(x, 0)), lax.ceil(x), lax.floor(x))


fix = _named("fix", lambda x, /: trunc(x), "Elementwise rounding toward zero (same as trunc).")


def rint(x, /):
    """Round to the nearest integer, ties to even; integers become floats."""
    x = ensure_arraylike("rint", x)
    if _is_int_or_bool(x):
        return lax._convert_element_type(x, dtypes.default_float_dtype(), False)
    if dtypes.is_complex(_dtype(x)):
        return lax.complex(rint(lax.real(x)), rint(lax.imag(x)))
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


def round(a, decimals: int = 0, out=None):
    """Round to `decimals` decimal places, ties to even (integers unchanged for decimals >= 0)."""
    a = ensure_arraylike("round", a)
    decimals = util.static_int(decimals, "'decimals' argument of jnp.round")
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.round is not supported.")
    dtype = _dtype(a)
    if dtype == dtypes.bool_:
        raise ValueError("jnp.round does not support boolean inputs")
    if dtypes.is_integer(dtype):
        if decimals < 0:
            raise NotImplementedError("integer np.round not implemented for decimals < 0")
        return a
    if decimals > np.log10(float(dtypes.finfo(dtype).max)):
        return a

    def round_real(x):
        if decimals == 0:
            return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
        work = util.convert(x, np.float32) if dtype == dtypes.float16 else x
        factor = lax_const(work, 10.0 ** decimals)
        scaled = lax.round(lax.mul(work, factor), lax.RoundingMethod.TO_NEAREST_EVEN)
        return lax._convert_element_type(lax.div(scaled, factor), _dtype(x),
                                         core.get_aval(x).weak_type)

    if dtypes.is_complex(dtype):
        return lax.complex(round_real(lax.real(a)), round_real(lax.imag(a)))
    return round_real(a)


around = _named("around", lambda a, decimals=0, out=None: round(a, decimals, out), round.__doc__)


# ---------------------------------------------------------------------------------------------
# Exponentials, logarithms, trigonometry

exp = _unary_inexact("exp", lax.exp)
exp2 = _unary_inexact("exp2", lax.exp2)
expm1 = _unary_inexact("expm1", lax.expm1)
log = _unary_inexact("log", lax.log)
log1p = _unary_inexact("log1p", lax.log1p)
sqrt = _unary_inexact("sqrt", lax.sqrt)
cbrt = _unary_inexact("cbrt", lax.cbrt)
sin = _unary_inexact("sin", lax.sin)
cos = _unary_inexact("cos", lax.cos)
tan = _unary_inexact("tan", lax.tan)
arcsin = _unary_inexact("arcsin", lax.asin)
arccos = _unary_inexact("arccos", lax.acos)
arctan = _unary_inexact("arctan", lax.atan)
sinh = _unary_inexact("sinh", lax.sinh)
cosh = _unary_inexact("cosh", lax.cosh)
tanh = _unary_inexact("tanh", lax.tanh)
arcsinh = _unary_inexact("arcsinh", lax.asinh)
arctanh = _unary_inexact("arctanh", lax.atanh)
arctan2 = _binary("arctan2", lax.atan2, promote_args_inexact)


def arccosh(x, /):
    """Elementwise inverse hyperbolic cosine (principal branch for complex x)."""
    (x,) = promote_args_inexact("arccosh", x)
    result = lax.acosh(x)
    if dtypes.is_complex(_dtype(result)):
        result = select(lax.lt(lax.real(result), scalar_like(lax.real(result), 0)),
                        lax.neg(result), result)
    return result


def _log_base(name, x, inverse_log_base: float):
    """log(x) * inverse_log_base, the logarithm in the base whose 1/ln(base) is given.

    The caller passes np.log10(np.e)-style constants: 1 / np.log(10) is one ulp low in
    float64, which made log10 of exact powers of ten miss (and geomspace's integer results).
    """
    (x,) = promote_args_inexact(name, x)
    if dtypes.is_complex(_dtype(x)):
        r = lax.log(x)
        re, im = lax.real(r), lax.imag(r)
        scale = _strong_const(re, inverse_log_base)
        return lax.complex(lax.mul(re, scale), lax.mul(im, scale))
    return lax.mul(lax.log(x), _strong_const(x, inverse_log_base))  # as JAX: not a division


def log2(x, /):
    """Elementwise base-2 logarithm."""
    return _log_base("log2", x, np.log2(np.e))


def log10(x, /):
    """Elementwise base-10 logarithm."""
    return _log_base("log10", x, np.log10(np.e))


def deg2rad(x, /):
    """Degrees to radians."""
    (x,) = promote_args_inexact("deg2rad", x)
    return lax.mul(x, lax_const(x, np.pi / 180))


def rad2deg(x, /):
    """Radians to degrees."""
    (x,) = promote_args_inexact("rad2deg", x)
    return lax.mul(x, lax_const(x, 180 / np.pi))


radians = _named("radians", lambda x, /: deg2rad(x), deg2rad.__doc__)
degrees = _named("degrees", lambda x, /: rad2deg(x), rad2deg.__doc__)


def hypot(x1, x2, /):
    """sqrt(x1**2 + x2**2) without intermediate overflow."""
    x1, x2 = promote_args_inexact("hypot", x1, x2)
    if dtypes.is_complex(_dtype(x1)):
        raise ValueError("jnp.hypot is not well defined for complex-valued inputs. Please convert "
                         "to real values first, such as by using abs(x)")
    x1, x2 = lax.abs(x1), lax.abs(x2)
    big, small = lax.max(x1, x2), lax.min(x1, x2)
    inf = lax_const(big, np.inf)
    either_inf = lax.bitwise_or(lax.eq(x1, inf), lax.eq(x2, inf))
    big_is_zero = lax.eq(big, scalar_like(big, 0))
    ratio = lax.div(small, select(big_is_zero, scalar_like(big, 1), big))
    out = lax.mul(big, lax.sqrt(lax.add(scalar_like(big, 1), lax.mul(ratio, ratio))))
    return select(either_inf, inf, select(big_is_zero, big, out))


def logaddexp(x1, x2, /):
    """log(exp(x1) + exp(x2)), computed without overflow."""
    x1, x2 = promote_args_inexact("logaddexp", x1, x2)
    if dtypes.is_complex(_dtype(x1)):
        return _complex_logaddexp(x1, x2, lax.exp, 1.0)
    from fluxion._src.lax.windowed import _logaddexp as logaddexp_with_jvp
    return logaddexp_with_jvp(x1, x2)


def logaddexp2(x1, x2, /):
    """log2(2**x1 + 2**x2), computed without overflow."""
    x1, x2 = promote_args_inexact("logaddexp2", x1, x2)
    return _logaddexp(x1, x2, lax.exp2, 1 / np.log(2))


def _complex_logaddexp(x1, x2, exp_fn, log_scale):
    """The complex log-add-exp: the larger operand (in XLA's order: real part, then
    imaginary) plus log1p(exp(smaller - larger)), its phase wrapped to [-pi, pi] (scaled)."""
    re1, re2, im1, im2 = lax.real(x1), lax.real(x2), lax.imag(x1), lax.imag(x2)
    first_larger = lax.bitwise_or(lax.gt(re1, re2), lax.bitwise_and(lax.eq(re1, re2),
                                                                   lax.ge(im1, im2)))
    larger, smaller = select(first_larger, x1, x2), select(first_larger, x2, x1)
    tail = lax.log1p(exp_fn(lax.sub(smaller, larger)))
    if log_scale != 1.0:
        tail = lax.mul(lax_const(tail, log_scale), tail)
    out = lax.add(larger, tail)
    half_turn = np.pi * log_scale
    phase = lax.rem(lax.add(lax.imag(out), lax_const(re1, half_turn)),
                    lax_const(re1, 2 * half_turn))
    phase = select(lax.lt(phase, lax_const(re1, 0)), lax.add(phase, lax_const(re1, 2 * half_turn)),
                   phase)
    return lax.complex(lax.real(out), lax.sub(phase, lax_const(re1, half_turn)))


def _logaddexp(x1, x2, exp_fn, log_scale):
    if dtypes.is_complex(_dtype(x1)):
        return _complex_logaddexp(x1, x2, exp_fn, log_scale)
    larger = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    tail = lax.log1p(exp_fn(lax.neg(lax.abs(delta))))
    if log_scale != 1.0:
        tail = lax.mul(lax_const(larger, log_scale), tail)
    # delta is NaN when both are infinite of one sign (or an input is NaN): x1 + x2 is right.
    return select(lax.ne(delta, delta), lax.add(x1, x2), lax.add(larger, tail))


def sinc(x, /):
    """sin(pi x) / (pi x), with sinc(0) = 1."""
    (x,) = promote_dtypes_inexact(ensure_arraylike("sinc", x))
    is_zero = lax.eq(x, lax_const(x, 0))
    pi_x = lax.mul(lax_const(x, np.pi), x)
    safe = select(is_zero, lax_const(x, 1), pi_x)
    return select(is_zero, _sin_over_x_at_zero(0, pi_x), lax.div(lax.sin(safe), safe))


# Derivatives of the 0/0 branch at x = 0 come from the series, to any order (a constant there
# made every derivative of sinc at 0 vanish).
@partial(custom_jvp, nondiff_argnums=(0,))
def _sin_over_x_at_zero(k, x):
    """The k-th derivative of sin(x)/x at x = 0, shaped like x: its Taylor series is
    sum (-1)^j x^(2j) / (2j+1)!, so (-1)^(k/2) / (k+1) for even k and 0 for odd k."""
    value = (-1) ** (k // 2) / (k + 1) if k % 2 == 0 else 0.0
    return structural.full_like(x, value)


@_sin_over_x_at_zero.defjvp
def _sin_over_x_at_zero_jvp(k, primals, tangents):
    (x,), (t,) = primals, tangents
    return _sin_over_x_at_zero(k, x), lax.mul(_sin_over_x_at_zero(k + 1, x), t)


# ---------------------------------------------------------------------------------------------
# Extremes and clipping

def fmax(x1, x2):
    """Elementwise maximum that ignores NaNs (NaN only if both are NaN)."""
    x1, x2 = promote_args("fmax", x1, x2)
    return select(lax.bitwise_or(greater(x1, x2), isnan(x2)), x1, x2)


def fmin(x1, x2):
    """Elementwise minimum that ignores NaNs (NaN only if both are NaN)."""
    x1, x2 = promote_args("fmin", x1, x2)
    return select(lax.bitwise_or(less(x1, x2), isnan(x2)), x1, x2)


def _is_complex_arg(x) -> bool:
    return x is not None and dtypes.is_complex(core.get_aval(util.as_array(x)).dtype)


def clip(arr=None, /, min=None, max=None):
    """Limit values to [min, max] (either bound may be None)."""
    if arr is None:
        raise ValueError("No input was provided to the clip function.")
    util.check_arraylike("clip", arr)
    if any(_is_complex_arg(t) for t in (arr, min, max)):
        raise ValueError("Clip received a complex value either through the input or the min/max "
                         "keywords. Complex values have no ordering and cannot be clipped.")
    if min is not None:
        arr = maximum(min, arr)
    if max is not None:
        arr = minimum(max, arr)
    return util.as_array(arr)


# ---------------------------------------------------------------------------------------------
# Classification and signs

def isnan(x, /):
    """Elementwise test for NaN."""
    x = ensure_arraylike("isnan", x)
    return lax.ne(x, x)


def isinf(x, /):
    """Elementwise test for positive or negative infinity."""
    x = ensure_arraylike("isinf", x)
    dt = _dtype(x)
    if dtypes.is_float(dt):
        return lax.eq(lax.abs(x), _strong_const(x, np.inf))
    if dtypes.is_complex(dt):
        return lax.bitwise_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    return _full_like_bool(x, False)


def isfinite(x, /):
    """Elementwise test for finiteness (not infinite and not NaN)."""
    x = ensure_arraylike("isfinite", x)
    dt = _dtype(x)
    if dtypes.is_float(dt):
        return lax.is_finite(x)
    if dtypes.is_complex(dt):
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return _full_like_bool(x, True)


def _is_signed_inf(name, x, value):
    x = ensure_arraylike(name, x)
    dt = _dtype(x)
    if dtypes.is_float(dt):
        return lax.eq(x, _strong_const(x, value))
    if dtypes.is_complex(dt):
        raise ValueError("isposinf/isneginf are not well defined for complex types")
    return _full_like_bool(x, False)


def isposinf(x, /):
    """Elementwise test for +inf."""
    return _is_signed_inf("isposinf", x, np.inf)


def isneginf(x, /):
    """Elementwise test for -inf."""
    return _is_signed_inf("isneginf", x, -np.inf)


_INT_OF_WIDTH = {2: np.int16, 4: np.int32, 8: np.int64}


def signbit(x, /):
    """Elementwise test of the sign bit (true for -0.0 and negative NaNs)."""
    (x,) = promote_args("signbit", x)
    dt = _dtype(x)
    if dtypes.is_integer(dt):
        return lax.lt(x, scalar_like(x, 0))
    if dt == dtypes.bool_:
        return _full_like_bool(x, False)
    if not dtypes.is_float(dt):
        raise ValueError(f"jax.numpy.signbit is not well defined for {dt}")
    bits = lax.bitcast_convert_type(x, np.dtype(_INT_OF_WIDTH[dt.itemsize]))
    return lax.lt(bits, scalar_like(bits, 0))


def copysign(x1, x2, /):
    """|x1| with the sign of x2."""
    x1, x2 = promote_args_inexact("copysign", x1, x2)
    if dtypes.is_complex(_dtype(x1)):
        raise TypeError("copysign does not support complex-valued inputs")
    magnitude = lax.abs(x1)
    return select(signbit(x2), lax.neg(magnitude), magnitude)


def heaviside(x1, x2, /):
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0 (NaN stays NaN)."""
    x1, x2 = promote_args_inexact("heaviside", x1, x2)
    zero, one = lax_const(x1, 0), lax_const(x1, 1)
    at_zero_or_nan = select(isnan(x1), x1, x2)
    return select(lax.lt(x1, zero), zero, select(lax.gt(x1, zero), one, at_zero_or_nan))


def nan_to_num(x, copy: bool = True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN by `nan` and infinities by `posinf`/`neginf` (default: the finite extremes)."""
    x = ensure_arraylike("nan_to_num", x)
    dt = _dtype(x)
    if not dtypes.is_inexact(dt):
        return x
    if dtypes.is_complex(dt):
        return lax.complex(nan_to_num(lax.real(x), nan=nan, posinf=posinf, neginf=neginf),
                           nan_to_num(lax.imag(x), nan=nan, posinf=posinf, neginf=neginf))
    info = dtypes.finfo(dt)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = util.where(isnan(x), util.convert(nan, dt), x)
    out = util.where(isposinf(out), util.convert(posinf, dt), out)
    return util.where(isneginf(out), util.convert(neginf, dt), out)


# ---------------------------------------------------------------------------------------------
# Complex numbers

def _is_complex_value(x) -> bool:
    return dtypes.is_complex(_dtype(x))


def real(val, /):
    """Elementwise real part."""
    val = ensure_arraylike("real", val)
    return lax.real(val) if _is_complex_value(val) else val


def imag(val, /):
    """Elementwise imaginary part (zeros for real input)."""
    val = ensure_arraylike("imag", val)
    if _is_complex_value(val):
        return lax.imag(val)
    return lax.broadcast_in_dim(util.scalar_like(val, 0), core.get_aval(val).shape, ())


def conjugate(x, /):
    """Elementwise complex conjugate (real input is returned unchanged)."""
    x = ensure_arraylike("conjugate", x)
    return lax.conj(x) if _is_complex_value(x) else x


conj = _named("conj", lambda x, /: conjugate(x), conjugate.__doc__)


def angle(z, deg: bool = False):
    """The argument of complex z, in radians (or degrees)."""
    z = ensure_arraylike("angle", z)
    re, im = real(z), imag(z)
    dt = _dtype(re)
    if not dtypes.is_inexact(dt) or (dtypes.is_float(_dtype(z)) and core.get_aval(z).ndim == 0):
        re = lax._convert_element_type(re, dtypes.default_float_dtype(), False)
        im = lax._convert_element_type(im, dtypes.default_float_dtype(), False)
    result = lax.atan2(im, re)
    return rad2deg(result) if deg else result


# ---------------------------------------------------------------------------------------------
# Logic and bits

def _logical(name, lax_fn):
    def fn(x1, x2, /):
        return lax_fn(*(to_bool(x) for x in promote_args(name, x1, x2)))
    return _named(name, fn, f"Elementwise `{name}` of the truth values.")


logical_and = _logical("logical_and", lax.bitwise_and)
logical_or = _logical("logical_or", lax.bitwise_or)
logical_xor = _logical("logical_xor", lax.bitwise_xor)


def logical_not(x, /):
    """Elementwise logical negation."""
    return lax.bitwise_not(to_bool(promote_args("logical_not", x)[0]))


bitwise_and = _binary("bitwise_and", lax.bitwise_and)
bitwise_or = _binary("bitwise_or", lax.bitwise_or)
bitwise_xor = _binary("bitwise_xor", lax.bitwise_xor)


def bitwise_not(x, /):
    """Elementwise bitwise inversion (logical not for booleans)."""
    return lax.bitwise_not(*promote_args("bitwise_not", x))


invert = _named("invert", lambda x, /: bitwise_not(x), bitwise_not.__doc__)
bitwise_invert = _named("bitwise_invert", lambda x, /: bitwise_not(x), bitwise_not.__doc__)


def left_shift(x1, x2, /):
    """Elementwise x1 << x2."""
    return lax.shift_left(*promote_args_numeric("left_shift", x1, x2))


def right_shift(x1, x2, /):
    """Elementwise x1 >> x2 (arithmetic for signed, logical for unsigned integers)."""
    x1, x2 = promote_args_numeric("right_shift", x1, x2)
    if _dtype(x1).kind == "u":
        return lax.shift_right_logical(x1, x2)
    return lax.shift_right_arithmetic(x1, x2)


bitwise_left_shift = _named("bitwise_left_shift", lambda x1, x2, /: left_shift(x1, x2),
                            left_shift.__doc__)
bitwise_right_shift = _named("bitwise_right_shift", lambda x1, x2, /: right_shift(x1, x2),
                             right_shift.__doc__)


# ---------------------------------------------------------------------------------------------
# Comparisons

equal = _binary("equal", lax.eq)
not_equal = _binary("not_equal", lax.ne)


def _ordered_comparison(name, lax_fn):
    def fn(x1, x2, /):
        x1, x2 = promote_args(name, x1, x2)
        if _is_complex_value(x1):
            # Complex numbers order lexicographically: by real part, then imaginary part.
            re1, re2 = lax.real(x1), lax.real(x2)
            return select(lax.eq(re1, re2), lax_fn(lax.imag(x1), lax.imag(x2)), lax_fn(re1, re2))
        return lax_fn(x1, x2)
    return _named(name, fn, f"Elementwise `{name}` (complex numbers compare lexicographically).")


less = _ordered_comparison("less", lax.lt)
less_equal = _ordered_comparison("less_equal", lax.le)
greater = _ordered_comparison("greater", lax.gt)
greater_equal = _ordered_comparison("greater_equal", lax.ge)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """|a - b| <= atol + rtol * |b| elementwise (infinities must match exactly)."""
    a, b = promote_args_inexact("isclose", a, b)
    dt = _dtype(a)
    tol_dtype = dtypes.finfo(dt).dtype if dtypes.is_complex(dt) else dt
    rtol = lax._convert_element_type(rtol, tol_dtype, False)
    atol = lax._convert_element_type(atol, tol_dtype, False)
    in_range = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol, lax.mul(rtol, lax.abs(b))))
    out = lax.bitwise_or(lax.eq(a, b), lax.bitwise_and(isfinite(b), in_range))
    if equal_nan:
        out = lax.bitwise_or(out, lax.bitwise_and(isnan(a), isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """True if every element of a is close to b (see isclose)."""
    from fluxion._src.numpy.reductions import all as all_
    util.check_arraylike("allclose", a, b)
    return all_(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan: bool = False):
    """True if the arrays have one shape and equal elements."""
    from fluxion._src.numpy.creation import asarray
    from fluxion._src.numpy.reductions import all as all_
    a1, a2 = asarray(a1), asarray(a2)  # lists too, as in NumPy and JAX
    if core.get_aval(a1).shape != core.get_aval(a2).shape:
        return lax._convert_element_type(False, dtypes.bool_, False)
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return all_(eq)


# ---------------------------------------------------------------------------------------------
# where / nonzero

def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """where(condition, x, y) selects elementwise; where(condition) is nonzero(condition)."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if size is not None or fill_value is not None:
        raise ValueError("size and fill_value arguments cannot be used in three-term where "
                         "function.")
    if x is None or y is None:
        raise ValueError(f"Either both or neither of the x and y arguments should be provided "
                         f"to jax.numpy.where, got {x} and {y}.")
    if core.current_trace() is core.eval_trace:
        # Eagerly, run promotion, broadcasting and select as one executable, not several.
        util.check_arraylike("where", condition, x, y)
        return _where_eager(condition, x, y)
    return util.where(condition, x, y)


def nonzero(a, *, size=None, fill_value=None) -> tuple:
    """Indices of the nonzero elements, one array per axis.

    Under a transformation the number of results is not known: pass `size` (results are
    truncated or padded with `fill_value`, default 0).
    """
    a = ensure_arraylike("nonzero", a)
    ndim = core.get_aval(a).ndim
    if ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use jnp.atleast_1d(scalar) "
                         "instead.")
    if size is None:
        value = core.concrete_or_error(a, "The size argument of jnp.nonzero must be statically "
                                          "specified to use jnp.nonzero within JAX "
                                          "transformations.")
        indices = np.nonzero(np.asarray(value))
        return tuple(lax._convert_element_type(i.astype(np.int64), dtypes.default_int_dtype(), False)
                     for i in indices)
    if type(size) is not DimExpr:  # (a symbolic dimension is a static size too)
        size = util.static_int(size, "'size' argument of jnp.nonzero")
    return _nonzero_sized(a, size, fill_value)


def _nonzero_sized(a, size, fill_value):
    from fluxion._src.numpy.manipulation import argsort, ravel
    from fluxion._src.numpy.reductions import sum as sum_
    shape = core.get_aval(a).shape
    mask = ravel(to_bool(a))
    index_dtype = dtypes.default_int_dtype()
    # A stable sort on "is zero" brings the nonzero positions first, in order.
    order = argsort(lax._convert_element_type(lax.bitwise_not(mask), index_dtype, False))
    flat = _take_prefix(order, size)
    valid = lax.lt(_positions(size), sum_(mask, dtype=index_dtype))
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * len(shape)
    if len(fills) != len(shape):
        raise ValueError(f"fill_value must be a scalar or a tuple of length {len(shape)}; got "
                         f"{fill_value}")
    outs = []
    for axis_size, stride, fill in zip(shape, _strides(shape), fills):
        index = remainder(floor_divide(flat, stride), axis_size) if axis_size else flat
        outs.append(util.where(valid, index, util.convert(0 if fill is None else fill, index_dtype)))
    return tuple(outs)


def _strides(shape) -> list:
    if is_symbolic_shape(shape):
        return [math.prod(shape[i + 1:]) for i in range(len(shape))]
    return [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]


def _take_prefix(x, size):
    n = core.get_aval(x).shape[0]
    try:
        shorter = size <= n
    except InconclusiveDimensionOperation:  # symbolic sizes: x padded by size, then cut
        padded = structural.concatenate(
            [x, structural.full((size,), util.scalar_like(x, 0), core.get_aval(x).dtype)], 0)
        return structural.slice(padded, (0,), (size,))
    if shorter:
        return structural.slice(x, (0,), (size,))
    return structural.pad(x, util.scalar_like(x, 0), ((0, size - n, 0),))


def _positions(n: int):
    from fluxion._src.numpy.creation import iota
    return iota(dtypes.default_int_dtype(), (n,), 0)


# ---------------------------------------------------------------------------------------------
# Outside any transformation, each elementwise function runs as one compiled executable per
# signature (numpy/eager.py) instead of one executable per primitive it binds, as JAX jits its
# jnp functions. Excluded: functions whose result depends on values (nonzero, where's one-
# argument form, array_equal's shape check) and power, which treats a Python integer exponent
# as a static integer power.

def _compile_eager_calls():
    from fluxion._src.numpy.eager import eager_compiled
    static = {"angle": ("deg",), "around": ("decimals", "out"), "round": ("decimals", "out"),
              "isclose": ("equal_nan",), "allclose": ("equal_nan",), "nan_to_num": ("copy",)}
    excluded = {"where", "nonzero", "power", "pow", "array_equal"}
    namespace = globals()
    for name, fn in list(namespace.items()):
        if (name.startswith("_") or name in excluded or not callable(fn)
                or getattr(fn, "__module__", None) != __name__ or isinstance(fn, type)):
            continue
        namespace[name] = eager_compiled(static_argnames=static.get(name, ()))(fn)
    namespace["_where_eager"] = eager_compiled()(util.where)  # (the three-argument form)


_compile_eager_calls()
