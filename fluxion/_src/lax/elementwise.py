"""Elementwise primitives: arithmetic, transcendental, bitwise, comparison and complex parts.

Operands of an n-ary op have one dtype; their shapes are equal, except that rank-0 operands
and size-1 dimensions broadcast. The result is weakly typed if every operand is.
Autodiff and batching rules for these primitives live beside them as those layers land.
"""
from __future__ import annotations

import enum

import numpy as np

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.core import ShapedArray
from fluxion._src.lax.base import (ANY, COMPLEX, COMPLEX_OR_PARTS, COMPLEX_PARTS, FLOAT, INEXACT,
                                   INT, INT_OR_BOOL, NUMBER, ORDERED, REAL, SIGNED_OR_INEXACT,
                                   binop, broadcast_operands, check_dtype, naryop,
                                   standard_primitive, unop)


def _real_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of the real and imaginary parts of a complex dtype (others map to themselves)."""
    return {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}.get(dtype, dtype)


def _complex_dtype(dtype: np.dtype) -> np.dtype:
    """The complex dtype with parts of `dtype` (complex dtypes map to themselves)."""
    return dtypes.complex128 if dtype in (dtypes.float64, dtypes.complex128) else dtypes.complex64


def _const(ctx, value, like):
    """A constant with the dtype and shape of the HLO value `like`."""
    return ctx.constant(value, like.dtype, like.shape)

# ---------------------------------------------------------------------------------------------
# Arithmetic


add_p = binop("add", NUMBER, "stablehlo.add")
sub_p = binop("sub", NUMBER, "stablehlo.subtract")
mul_p = binop("mul", NUMBER, "stablehlo.multiply")


def _integer_division_lowering(hlo_op: str, zero_divisor_result):
    """Integer division truncates toward zero and the remainder takes the dividend's sign (C
    semantics). XLA defines x / 0 as all bits set and x % 0 as x; those results are selected
    explicitly because XLA's constant folder divides natively and kills the process (SIGFPE)
    on a zero divisor known at compile time."""
    def rule(ctx, x, y):
        x, y = broadcast_operands(ctx, [x, y])
        if not dtypes.is_integer(x.dtype):
            return ctx.op1(hlo_op, [x, y], ctx.avals_out[0])
        is_zero = ctx.compare(y, _const(ctx, 0, y), "EQ")
        quotient = ctx.op1(hlo_op, [x, ctx.select(is_zero, _const(ctx, 1, y), y)], ctx.avals_out[0])
        return ctx.select(is_zero, zero_divisor_result(ctx, x), quotient)
    return rule


def _all_bits_set(ctx, x):
    return _const(ctx, -1 if x.dtype.kind == "i" else dtypes.iinfo(x.dtype).max, x)


div_p = binop("div", NUMBER, _integer_division_lowering("stablehlo.divide", _all_bits_set))
rem_p = binop("rem", REAL, _integer_division_lowering("stablehlo.remainder", lambda ctx, x: x))


def emit_max_min(ops, x, y, kind: str):
    """`max` or `min` of two values of the same shape in any block (reductions' bodies too).

    Complex numbers are ordered lexicographically, by real then imaginary part, as NumPy's;
    XLA's maximum/minimum of complex numbers compares only the real parts (XLA:CPU) or does
    not compile (elementwise)."""
    if not dtypes.is_complex(x.dtype):
        return ops.op1(f"stablehlo.{kind}imum", [x, y], x.aval)
    direction = "GT" if kind == "max" else "LT"
    part = ShapedArray(x.shape, _real_dtype(x.dtype))
    x_re, y_re = ops.op1("stablehlo.real", [x], part), ops.op1("stablehlo.real", [y], part)
    x_im, y_im = ops.op1("stablehlo.imag", [x], part), ops.op1("stablehlo.imag", [y], part)
    pick_x = ops.select(ops.compare(x_re, y_re, "EQ"), ops.compare(x_im, y_im, direction),
                        ops.compare(x_re, y_re, direction))
    return ops.select(pick_x, x, y)


def _minmax_lowering(kind: str):
    def rule(ctx, x, y):
        return emit_max_min(ctx, *broadcast_operands(ctx, [x, y]), kind)
    return rule


max_p = binop("max", ANY, _minmax_lowering("max"))
min_p = binop("min", ANY, _minmax_lowering("min"))
neg_p = unop("neg", NUMBER, "stablehlo.negate")
atan2_p = binop("atan2", INEXACT, "stablehlo.atan2")
nextafter_p = binop("nextafter", FLOAT, "chlo.next_after")


def _sign_lowering(ctx, x):
    if dtypes._kind(x.dtype) == "u":
        return ctx.convert(ctx.compare(x, _const(ctx, 0, x), "NE"), x.dtype)
    return ctx.op1("stablehlo.sign", [x], ctx.avals_out[0])


sign_p = unop("sign", NUMBER, _sign_lowering)


def _pow_result_dtype(x, y):
    if y.dtype == x.dtype or dtypes.is_integer(y.dtype):
        return x.dtype
    raise TypeError("the first argument to pow must have an inexact dtype (float or complex), "
                    "and the second argument must have an inexact or integer dtype, and two "
                    f"inexact dtypes must match, but got {x.dtype.name} and {y.dtype.name} "
                    "respectively.")


def _pow_lowering(ctx, x, y):
    x, y = broadcast_operands(ctx, [x, y])
    return ctx.op1("stablehlo.power", [x, ctx.convert(y, x.dtype)], ctx.avals_out[0])


pow_p = naryop("pow", [INEXACT, NUMBER], _pow_lowering, result_dtype=_pow_result_dtype,
               same_dtypes=False)


def _integer_pow_abstract_eval(x, *, y):
    check_dtype("integer_pow", x, NUMBER)
    if y < 0 and dtypes.is_integer(x.dtype):
        raise TypeError(f"Integers cannot be raised to negative powers, got "
                        f"integer_pow({x.str_short()}, {y})")
    return x


def _integer_pow_lowering(ctx, x, *, y):
    # Exponentiation by squaring, as a chain of multiplies XLA can fuse.
    if y == 0:
        return _const(ctx, 1, x)
    result, base, n = None, x, abs(y)
    while n:
        if n & 1:
            result = base if result is None else ctx.mul(result, base)
        n >>= 1
        if n:
            base = ctx.mul(base, base)
    return ctx.div(_const(ctx, 1, x), result) if y < 0 else result


integer_pow_p = standard_primitive("integer_pow", _integer_pow_abstract_eval, _integer_pow_lowering)


def _square_lowering(ctx, x):
    if dtypes.is_integer(x.dtype):
        return ctx.mul(x, x)
    # CHLO's square of a complex number avoids the cancellation in re*re - im*im.
    return ctx.op1("chlo.square", [x], ctx.avals_out[0])


square_p = unop("square", NUMBER, _square_lowering)

# ---------------------------------------------------------------------------------------------
# Rounding and classification


class RoundingMethod(enum.IntEnum):
    """How `round` breaks ties: away from zero (default) or to the nearest even value."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


floor_p = unop("floor", FLOAT, "stablehlo.floor")
ceil_p = unop("ceil", FLOAT, "stablehlo.ceil")


def _round_lowering(ctx, x, *, rounding_method):
    name = ("stablehlo.round_nearest_even" if rounding_method == RoundingMethod.TO_NEAREST_EVEN
            else "stablehlo.round_nearest_afz")
    return ctx.op1(name, [x], ctx.avals_out[0])


round_p = unop("round", FLOAT, _round_lowering)
is_finite_p = unop("is_finite", FLOAT, "stablehlo.is_finite", result_dtype=lambda x: dtypes.bool_)

# ---------------------------------------------------------------------------------------------
# Exponentials, logarithms, trigonometry, special functions

exp_p = unop("exp", INEXACT, "stablehlo.exponential")
expm1_p = unop("expm1", INEXACT, "stablehlo.exponential_minus_one")
log_p = unop("log", INEXACT, "stablehlo.log")
log1p_p = unop("log1p", INEXACT, "stablehlo.log_plus_one")
tanh_p = unop("tanh", INEXACT, "stablehlo.tanh")
tan_p = unop("tan", INEXACT, "stablehlo.tan")
asin_p = unop("asin", INEXACT, "chlo.asin")
acos_p = unop("acos", INEXACT, "chlo.acos")
atan_p = unop("atan", INEXACT, "chlo.atan")
sinh_p = unop("sinh", INEXACT, "chlo.sinh")
cosh_p = unop("cosh", INEXACT, "chlo.cosh")
asinh_p = unop("asinh", INEXACT, "chlo.asinh")
acosh_p = unop("acosh", INEXACT, "chlo.acosh")
atanh_p = unop("atanh", INEXACT, "chlo.atanh")
sqrt_p = unop("sqrt", INEXACT, "stablehlo.sqrt")
rsqrt_p = unop("rsqrt", INEXACT, "stablehlo.rsqrt")
cbrt_p = unop("cbrt", FLOAT, "stablehlo.cbrt")
erf_p = unop("erf", FLOAT, "chlo.erf")
erfc_p = unop("erfc", FLOAT, "chlo.erfc")
erf_inv_p = unop("erf_inv", FLOAT, "chlo.erf_inv")
lgamma_p = unop("lgamma", FLOAT, "chlo.lgamma")
digamma_p = unop("digamma", FLOAT, "chlo.digamma")


def _exp2_lowering(ctx, x):
    return ctx.exp(ctx.mul(x, _const(ctx, np.log(2), x)))


exp2_p = unop("exp2", INEXACT, _exp2_lowering)


def _logistic_lowering(ctx, x):
    # 1 / (1 + exp(-x)), as JAX computes it, rather than stablehlo.logistic.
    one = _const(ctx, 1, x)
    return ctx.div(one, ctx.add(one, ctx.exp(ctx.neg(x))))


logistic_p = unop("logistic", INEXACT, _logistic_lowering)


def _complex_sin_cos_terms(ctx, x):
    """sin, cos of the real part and sinh, cosh of the imaginary part of complex `x`, with the
    hyperbolic functions built from expm1 so that they stay accurate for small arguments."""
    part = ShapedArray(x.shape, _real_dtype(x.dtype))
    re = ctx.op1("stablehlo.real", [x], part)
    im = ctx.op1("stablehlo.imag", [x], part)
    sin_re = ctx.op1("stablehlo.sine", [re], part)
    cos_re = ctx.op1("stablehlo.cosine", [re], part)
    up, down = ctx.expm1(im), ctx.expm1(ctx.neg(im))
    two = _const(ctx, 2, re)
    sinh_im = ctx.div(ctx.sub(up, down), two)
    cosh_im = ctx.div(ctx.add(ctx.add(up, down), two), two)
    re_is_zero = ctx.compare(re, _const(ctx, 0, re), "EQ")
    return re_is_zero, sin_re, cos_re, sinh_im, cosh_im


def _sin_lowering(ctx, x):
    if not dtypes.is_complex(x.dtype):
        return ctx.op1("stablehlo.sine", [x], ctx.avals_out[0])
    re_is_zero, sin_re, cos_re, sinh_im, cosh_im = _complex_sin_cos_terms(ctx, x)
    # A zero real part gives a zero real result even where cosh(im) overflows.
    out_re = ctx.select(re_is_zero, _const(ctx, 0, sin_re), ctx.mul(sin_re, cosh_im))
    return ctx.op1("stablehlo.complex", [out_re, ctx.mul(cos_re, sinh_im)], ctx.avals_out[0])


def _cos_lowering(ctx, x):
    if not dtypes.is_complex(x.dtype):
        return ctx.op1("stablehlo.cosine", [x], ctx.avals_out[0])
    re_is_zero, sin_re, cos_re, sinh_im, cosh_im = _complex_sin_cos_terms(ctx, x)
    out_im = ctx.select(re_is_zero, _const(ctx, 0, sin_re), ctx.neg(ctx.mul(sin_re, sinh_im)))
    return ctx.op1("stablehlo.complex", [ctx.mul(cos_re, cosh_im), out_im], ctx.avals_out[0])


sin_p = unop("sin", INEXACT, _sin_lowering)
cos_p = unop("cos", INEXACT, _cos_lowering)

# ---------------------------------------------------------------------------------------------
# Absolute value and complex numbers


def _real_result(x):
    return _real_dtype(x.dtype)


abs_p = unop("abs", SIGNED_OR_INEXACT, "stablehlo.abs", result_dtype=_real_result)
real_p = unop("real", COMPLEX, "stablehlo.real", result_dtype=_real_result)
imag_p = unop("imag", COMPLEX, "stablehlo.imag", result_dtype=_real_result)
complex_p = naryop("complex", [COMPLEX_PARTS, COMPLEX_PARTS], "stablehlo.complex",
                   result_dtype=lambda x, y: _complex_dtype(x.dtype))


def _conj_lowering(ctx, x, *, input_dtype):
    if not dtypes.is_complex(x.dtype):
        return ctx.convert(x, ctx.avals_out[0].dtype)
    part = ShapedArray(x.shape, _real_dtype(x.dtype))
    re = ctx.op1("stablehlo.real", [x], part)
    im = ctx.op1("stablehlo.imag", [x], part)
    return ctx.op1("stablehlo.complex", [re, ctx.neg(im)], ctx.avals_out[0])


conj_p = unop("conj", COMPLEX_OR_PARTS, _conj_lowering,
              result_dtype=lambda x, *, input_dtype: _complex_dtype(x.dtype))

# ---------------------------------------------------------------------------------------------
# Bitwise. Shifts by a negative amount or by at least the bit width give XLA's results: 0 for
# left and logical right shifts, the sign fill for arithmetic right shifts.

and_p = binop("and", INT_OR_BOOL, "stablehlo.and")
or_p = binop("or", INT_OR_BOOL, "stablehlo.or")
xor_p = binop("xor", INT_OR_BOOL, "stablehlo.xor")
not_p = unop("not", INT_OR_BOOL, "stablehlo.not")
shift_left_p = binop("shift_left", INT, "stablehlo.shift_left")
shift_right_logical_p = binop("shift_right_logical", INT, "stablehlo.shift_right_logical")
shift_right_arithmetic_p = binop("shift_right_arithmetic", INT, "stablehlo.shift_right_arithmetic")
population_count_p = unop("population_count", INT, "stablehlo.popcnt")
clz_p = unop("clz", INT, "stablehlo.count_leading_zeros")

# ---------------------------------------------------------------------------------------------
# Comparisons (floating-point ones are IEEE: NaN compares unequal to everything)


def _compare_lowering(direction):
    def rule(ctx, x, y):
        x, y = broadcast_operands(ctx, [x, y])
        return ctx.compare(x, y, direction)
    return rule


def _bool_result(*avals):
    return dtypes.bool_


eq_p = binop("eq", ANY, _compare_lowering("EQ"), result_dtype=_bool_result)
ne_p = binop("ne", ANY, _compare_lowering("NE"), result_dtype=_bool_result)
lt_p = binop("lt", ORDERED, _compare_lowering("LT"), result_dtype=_bool_result)
le_p = binop("le", ORDERED, _compare_lowering("LE"), result_dtype=_bool_result)
gt_p = binop("gt", ORDERED, _compare_lowering("GT"), result_dtype=_bool_result)
ge_p = binop("ge", ORDERED, _compare_lowering("GE"), result_dtype=_bool_result)


# polygamma(m, x): the m-th derivative of digamma (m a non-negative integer-valued float).
polygamma_p = binop("polygamma", FLOAT, "chlo.polygamma")


# =============================================================================================
# Differentiation and batching rules.
#
# A JVP term fn(g, ans, *primals) gives one argument's contribution to the output tangent; terms
# are broadcast to the output's shape, since operands may be rank-0 or have size-1 dimensions.
# Transposes sum a cotangent back down to the operand's shape.

def _lax():
    from fluxion._src.lax import lax
    return lax


class _LazyLax:
    """fluxion._src.lax.lax, looked up when a rule runs (that module imports this one)."""

    def __getattr__(self, name):
        return getattr(_lax(), name)


_LAX = _LazyLax()


def _select(pred, on_true, on_false):
    from fluxion._src.lax import structural
    return structural.select(pred, on_true, on_false)


def _full_like(x, value):
    lax = _lax()
    aval = core.get_aval(x)
    # x's weak type, as JAX's full_like: a derivative of a weakly typed value stays weak
    value = lax._convert_element_type(value, aval.dtype, aval.weak_type)
    return lax.broadcast_in_dim(value, aval.shape, ())


def _strong_zeros_like(x):
    aval = core.get_aval(x)
    return _full_like(x, 0) if not aval.weak_type else _lax().broadcast_in_dim(
        _lax()._convert_element_type(0, aval.dtype, False), aval.shape, ())


def _broadcast_to(x, shape):
    aval = core.get_aval(x)
    if aval.shape == shape:
        return x
    dims = () if aval.ndim == 0 else tuple(range(aval.ndim))
    return _lax().broadcast_in_dim(x, shape, dims)


def _aval(operand):
    """The abstract value of an operand of a transpose rule: an undefined primal's, or a
    constant's."""
    return operand.aval if hasattr(operand, "aval") else core.get_aval(operand)


def unbroadcast(aval, ct):
    """Sum `ct` (of the output's shape) down to `aval`'s shape (rank-0 or size-1 dimensions)."""
    lax = _lax()
    ct_shape = core.get_aval(ct).shape
    if ct_shape == aval.shape:
        return ct
    if aval.ndim == 0:
        return lax.reduce_sum(ct, tuple(range(len(ct_shape))))
    axes = tuple(i for i, (a, c) in enumerate(zip(aval.shape, ct_shape)) if a == 1 and c != 1)
    return lax.reshape(lax.reduce_sum(ct, axes), aval.shape)


def _polygamma_order_tangent(g, ans, m, x):
    """polygamma is defined only at integer orders m, so it has no derivative in m."""
    raise ValueError("polygamma gradient with respect to m is not supported (as in JAX): the "
                     "order m takes integer values only")


def _defjvp(prim, *term_fns, pass_params: bool = False):
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        shape = core.get_aval(ans).shape
        total = None
        extra = params if pass_params else {}
        for fn, t in zip(term_fns, tangents):
            if fn is None or type(t) is ad.Zero:
                continue
            term = _broadcast_to(fn(t, ans, *primals, **extra), shape)
            total = term if total is None else ad.add_tangents(total, term)
        return ans, ad.Zero.from_primal_value(ans) if total is None else total
    ad.primitive_jvps[prim] = rule


def _linear_transpose(*ct_fns):
    """Transpose rule of an op linear in each argument separately: ct_fns[i](ct, *args)."""
    def rule(ct, *args, **params):
        if type(ct) is ad.Zero:
            return [None] * len(args)
        return [unbroadcast(a.aval, fn(ct, *args)) if ad.is_undefined_primal(a) else None
                for a, fn in zip(args, ct_fns)]
    return rule


def _balanced_eq(x, z, y):
    """1 where x == z != y, 0.5 where x == y == z, 0 elsewhere (ties share the tangent)."""
    lax = _lax()
    one, half, zero = (_full_like(z, v) for v in (1.0, 0.5, 0.0))
    x, y = _broadcast_to(x, core.get_aval(z).shape), _broadcast_to(y, core.get_aval(z).shape)
    return _select(lax.eq(x, z), _select(lax.eq(y, z), half, one), zero)


def _bcast_all(ans, *xs):
    shape = core.get_aval(ans).shape
    return [_broadcast_to(x, shape) for x in xs]


def _pow_lhs(g, ans, x, y):
    lax = _lax()
    x, y = _bcast_all(ans, x, y)
    y_as_x = lax._convert_element_type(y, core.get_aval(x).dtype, False) if dtypes.is_integer(
        core.get_aval(y).dtype) else y
    one = _full_like(y, 1)
    jac = lax.mul(y_as_x, lax.pow(x, lax.sub(y, one)))
    if not dtypes.is_integer(core.get_aval(y).dtype):
        return lax.mul(g, jac)  # as JAX: 0 * 0 ** -1 is nan at x = y = 0
    return lax.mul(g, _select(lax.eq(y, _full_like(y, 0)), _full_like(jac, 0), jac))


def _pow_rhs(g, ans, x, y):
    lax = _lax()
    x, = _bcast_all(ans, x)
    safe_x = _select(lax.eq(x, _full_like(x, 0)), _full_like(x, 1), x)
    return lax.mul(g, lax.mul(lax.log(safe_x), ans))


def _integer_pow_jvp(g, ans, x, *, y):
    lax = _lax()
    if y == 0:
        return _full_like(g, 0)
    coeff = lax._convert_element_type(y, core.get_aval(x).dtype, core.get_aval(x).weak_type)
    return lax.mul(g, lax.mul(coeff, x if y == 2 else lax.integer_pow(x, y - 1)) if y != 1 else coeff)


def _abs_jvp(g, ans, x):
    lax = _lax()
    if not dtypes.is_complex(core.get_aval(x).dtype):
        return _select(lax.ge(x, _full_like(x, 0)), g, lax.neg(g))  # slope 1 at 0, as in JAX
    safe = _select(lax.eq(ans, _full_like(ans, 0)), _full_like(ans, 1), ans)
    contribution = lax.div(lax.real(lax.mul(lax.conj(x), g)), safe)
    return _select(lax.eq(ans, _full_like(ans, 0)), _full_like(ans, 0), contribution)


def _register_rules():
    lax = _LAX

    def mul(a, b): return lax.mul(a, b)
    def div(a, b): return lax.div(a, b)
    def add(a, b): return lax.add(a, b)
    def sub(a, b): return lax.sub(a, b)
    def neg(a): return lax.neg(a)

    def c(x, value):
        aval = core.get_aval(x)
        return lax._convert_element_type(value, aval.dtype, aval.weak_type)

    _defjvp(add_p, lambda g, ans, x, y: g, lambda g, ans, x, y: g)
    _defjvp(sub_p, lambda g, ans, x, y: g, lambda g, ans, x, y: neg(g))
    _defjvp(mul_p, lambda g, ans, x, y: mul(g, y), lambda g, ans, x, y: mul(x, g))
    _defjvp(div_p, lambda g, ans, x, y: div(g, y), lambda g, ans, x, y: neg(mul(g, div(ans, y))))
    _defjvp(rem_p, lambda g, ans, x, y: g, lambda g, ans, x, y: mul(
        neg(g), mul(lax.sign(div(x, y)), lax.floor(lax.abs(div(x, y))))))
    _defjvp(max_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
            lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
    _defjvp(min_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
            lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
    _defjvp(atan2_p, lambda g, ans, x, y: mul(g, div(y, add(mul(x, x), mul(y, y)))),
            lambda g, ans, x, y: mul(g, div(neg(x), add(mul(x, x), mul(y, y)))))
    _defjvp(pow_p, _pow_lhs, _pow_rhs)
    _defjvp(integer_pow_p, _integer_pow_jvp, pass_params=True)
    _defjvp(square_p, lambda g, ans, x: mul(g, mul(c(x, 2), x)))
    _defjvp(exp_p, lambda g, ans, x: mul(g, ans))
    _defjvp(exp2_p, lambda g, ans, x: mul(g, mul(ans, c(x, np.log(2)))))
    _defjvp(expm1_p, lambda g, ans, x: mul(g, add(ans, c(x, 1))))
    _defjvp(log_p, lambda g, ans, x: div(g, x))
    _defjvp(log1p_p, lambda g, ans, x: div(g, add(x, c(x, 1))))
    _defjvp(tanh_p, lambda g, ans, x: mul(g, sub(c(x, 1), mul(ans, ans))))
    _defjvp(logistic_p, lambda g, ans, x: mul(g, mul(ans, sub(c(x, 1), ans))))
    _defjvp(sin_p, lambda g, ans, x: mul(g, lax.cos(x)))
    _defjvp(cos_p, lambda g, ans, x: neg(mul(g, lax.sin(x))))
    _defjvp(tan_p, lambda g, ans, x: mul(g, add(c(x, 1), mul(ans, ans))))
    _defjvp(asin_p, lambda g, ans, x: mul(g, lax.rsqrt(sub(c(x, 1), mul(x, x)))))
    _defjvp(acos_p, lambda g, ans, x: neg(mul(g, lax.rsqrt(sub(c(x, 1), mul(x, x))))))
    _defjvp(atan_p, lambda g, ans, x: div(g, add(c(x, 1), mul(x, x))))
    _defjvp(sinh_p, lambda g, ans, x: mul(g, lax.cosh(x)))
    _defjvp(cosh_p, lambda g, ans, x: mul(g, lax.sinh(x)))
    _defjvp(asinh_p, lambda g, ans, x: mul(g, lax.rsqrt(add(mul(x, x), c(x, 1)))))
    _defjvp(acosh_p, lambda g, ans, x: mul(g, lax.rsqrt(mul(sub(x, c(x, 1)), add(x, c(x, 1))))))
    _defjvp(atanh_p, lambda g, ans, x: div(div(g, sub(c(x, 1), x)), add(c(x, 1), x)))
    _defjvp(sqrt_p, lambda g, ans, x: mul(g, div(c(x, 0.5), ans)))
    _defjvp(rsqrt_p, lambda g, ans, x: mul(g, mul(c(x, -0.5), div(ans, x))))
    _defjvp(cbrt_p, lambda g, ans, x: mul(g, mul(c(x, 1 / 3), lax.integer_pow(ans, -2))))
    _defjvp(erf_p, lambda g, ans, x: mul(g, mul(c(x, 2 / np.sqrt(np.pi)), lax.exp(neg(mul(x, x))))))
    _defjvp(erfc_p, lambda g, ans, x: mul(g, mul(c(x, -2 / np.sqrt(np.pi)), lax.exp(neg(mul(x, x))))))
    _defjvp(erf_inv_p, lambda g, ans, x: mul(g, mul(c(x, np.sqrt(np.pi) / 2), lax.exp(mul(ans, ans)))))
    _defjvp(lgamma_p, lambda g, ans, x: mul(g, lax.digamma(x)))
    _defjvp(digamma_p, lambda g, ans, x: mul(g, lax.polygamma(c(x, 1), x)))
    _defjvp(polygamma_p, _polygamma_order_tangent,
            lambda g, ans, m, x: mul(g, lax.polygamma(add(m, c(m, 1)), x)))
    _defjvp(abs_p, _abs_jvp)
    for prim in (sign_p, floor_p, ceil_p, round_p, is_finite_p, nextafter_p, and_p, or_p, xor_p,
                 not_p, shift_left_p, shift_right_logical_p, shift_right_arithmetic_p,
                 population_count_p, clz_p, eq_p, ne_p, lt_p, le_p, gt_p, ge_p):
        ad.defjvp_zero(prim)

    # Linear primitives.
    for prim, cts in ((add_p, (lambda ct, x, y: ct, lambda ct, x, y: ct)),
                      (sub_p, (lambda ct, x, y: ct, lambda ct, x, y: neg(ct))),
                      (mul_p, (lambda ct, x, y: mul(ct, y), lambda ct, x, y: mul(x, ct))),
                      (div_p, (lambda ct, x, y: div(ct, y), None))):
        ad.primitive_transposes[prim] = _linear_transpose(*cts)
    ad.deflinear(neg_p, lambda ct, x: [neg(ct)])
    # The zero part is strongly typed, as in JAX: the cotangent of a complex value is never weak.
    ad.deflinear(real_p, lambda ct, x: [lax.complex(ct, _strong_zeros_like(ct))])
    ad.deflinear(imag_p, lambda ct, x: [lax.complex(_strong_zeros_like(ct), neg(ct))])
    # One operand may be a constant (a NumPy scalar: lax.complex(x, zeros)), without .aval.
    ad.deflinear(complex_p, lambda ct, x, y: [unbroadcast(_aval(x), lax.real(ct)),
                                             unbroadcast(_aval(y), neg(lax.imag(ct)))])
    ad.deflinear(conj_p, lambda ct, x, *, input_dtype: [
        lax.conj(ct) if dtypes.is_complex(input_dtype) else lax.real(ct)])

    # Batching: n-ary ops broadcast, unary ones pass the batch dimension through.
    for prim in (add_p, sub_p, mul_p, div_p, rem_p, max_p, min_p, atan2_p, nextafter_p, pow_p,
                 complex_p, and_p, or_p, xor_p, shift_left_p, shift_right_logical_p,
                 shift_right_arithmetic_p, eq_p, ne_p, lt_p, le_p, gt_p, ge_p, polygamma_p):
        batching.defbroadcasting(prim)
    for prim in (neg_p, sign_p, integer_pow_p, square_p, floor_p, ceil_p, round_p, is_finite_p,
                 exp_p, exp2_p, expm1_p, log_p, log1p_p, tanh_p, logistic_p, sin_p, cos_p, tan_p,
                 asin_p, acos_p, atan_p, sinh_p, cosh_p, asinh_p, acosh_p, atanh_p, sqrt_p,
                 rsqrt_p, cbrt_p, erf_p, erfc_p, erf_inv_p, lgamma_p, digamma_p, abs_p, real_p,
                 imag_p, conj_p, not_p, population_count_p, clz_p):
        batching.defvectorized(prim)


_register_rules()
