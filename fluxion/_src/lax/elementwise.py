"""Elementwise primitives: arithmetic, transcendental, bitwise, comparison and complex parts.

Operands of an n-ary op have one dtype and one shape, except that rank-0 operands broadcast.
Autodiff and batching rules for these primitives live beside them as those layers land.
"""
from __future__ import annotations

import enum

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.core import ShapedArray
from fluxion._src.lax.base import (ANY, COMPLEX, FLOAT, INEXACT, INT, INT_OR_BOOL, NUMBER,
                                   ORDERED, REAL, SIGNED_OR_FLOAT, broadcast_operands, binop,
                                   check_dtype, naryop, standard_primitive, unop)

# ---------------------------------------------------------------------------------------------
# Arithmetic

add_p = binop("add", NUMBER, "stablehlo.add")
sub_p = binop("sub", NUMBER, "stablehlo.subtract")
mul_p = binop("mul", NUMBER, "stablehlo.multiply")
div_p = binop("div", NUMBER, "stablehlo.divide")
rem_p = binop("rem", NUMBER, "stablehlo.remainder")
max_p = binop("max", ANY, "stablehlo.maximum")
min_p = binop("min", ANY, "stablehlo.minimum")
neg_p = unop("neg", NUMBER, "stablehlo.negate")
atan2_p = binop("atan2", FLOAT, "stablehlo.atan2")
nextafter_p = binop("nextafter", FLOAT, "chlo.next_after")


def _sign_lowering(ctx, x):
    if x.dtype.kind == "u":
        nonzero = ctx.compare(x, ctx.constant(0, x.dtype, x.shape), "NE")
        return ctx.convert(nonzero, x.dtype)
    return ctx.op1("stablehlo.sign", [x], ctx.avals_out[0])


sign_p = unop("sign", NUMBER, _sign_lowering)


def _pow_abstract_eval(x, y):
    check_dtype("pow", x, INEXACT, 0)
    if not (y.dtype == x.dtype or dtypes.is_integer(y.dtype)):
        raise TypeError(f"lax.pow requires the exponent to have the base's dtype or an integer "
                        f"dtype, got {x.dtype.name}, {y.dtype.name}.")
    from fluxion._src.lax.base import broadcasting_shape
    return ShapedArray(broadcasting_shape("pow", [x, y]), x.dtype, x.weak_type and y.weak_type)


def _pow_lowering(ctx, x, y):
    x, y = broadcast_operands(ctx, [x, y])
    if y.dtype != x.dtype:
        y = ctx.convert(y, x.dtype)
    return ctx.op1("stablehlo.power", [x, y], ctx.avals_out[0])


pow_p = standard_primitive("pow", _pow_abstract_eval, _pow_lowering)


def _integer_pow_abstract_eval(x, *, y):
    check_dtype("integer_pow", x, NUMBER)
    if not isinstance(y, (int, np.integer)):
        raise TypeError(f"integer_pow requires an integer exponent, got {y!r}")
    if y < 0 and dtypes.is_integer(x.dtype):
        raise TypeError(f"Integers cannot be raised to negative powers, got integer_pow(x, {y})")
    return x


def _integer_pow_lowering(ctx, x, *, y):
    # Exponentiation by squaring, as a chain of multiplies XLA can fuse.
    if y == 0:
        return ctx.constant(1, x.dtype, x.shape)
    result, base, n = None, x, abs(y)
    while n:
        if n & 1:
            result = base if result is None else ctx.mul(result, base)
        n >>= 1
        if n:
            base = ctx.mul(base, base)
    if y < 0:
        result = ctx.div(ctx.constant(1, x.dtype, x.shape), result)
    return result


integer_pow_p = standard_primitive("integer_pow", _integer_pow_abstract_eval, _integer_pow_lowering)

# ---------------------------------------------------------------------------------------------
# Rounding and classification


class RoundingMethod(enum.IntEnum):
    """How `round` breaks ties: away from zero (default) or to the nearest even value."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1

    def __repr__(self):
        return f"RoundingMethod.{self.name}"

    __str__ = __repr__


floor_p = unop("floor", FLOAT, "stablehlo.floor")
ceil_p = unop("ceil", FLOAT, "stablehlo.ceil")


def _round_abstract_eval(x, *, rounding_method):
    check_dtype("round", x, FLOAT)
    return x


def _round_lowering(ctx, x, *, rounding_method):
    name = ("stablehlo.round_nearest_even" if rounding_method == RoundingMethod.TO_NEAREST_EVEN
            else "stablehlo.round_nearest_afz")
    return ctx.op1(name, [x], ctx.avals_out[0])


round_p = standard_primitive("round", _round_abstract_eval, _round_lowering)
is_finite_p = unop("is_finite", FLOAT, "stablehlo.is_finite", result_dtype=lambda x: dtypes.bool_)

# ---------------------------------------------------------------------------------------------
# Exponentials, logarithms, trigonometry, special functions

exp_p = unop("exp", INEXACT, "stablehlo.exponential")
expm1_p = unop("expm1", INEXACT, "stablehlo.exponential_minus_one")
log_p = unop("log", INEXACT, "stablehlo.log")
log1p_p = unop("log1p", INEXACT, "stablehlo.log_plus_one")
tanh_p = unop("tanh", INEXACT, "stablehlo.tanh")
logistic_p = unop("logistic", INEXACT, "stablehlo.logistic")
sin_p = unop("sin", INEXACT, "stablehlo.sine")
cos_p = unop("cos", INEXACT, "stablehlo.cosine")
tan_p = unop("tan", INEXACT, "chlo.tan")
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
    return ctx.exp(ctx.mul(x, ctx.constant(np.log(2), x.dtype, x.shape)))


exp2_p = unop("exp2", INEXACT, _exp2_lowering)

# ---------------------------------------------------------------------------------------------
# Absolute value and complex numbers


def _real_dtype(x):
    return np.dtype(np.float32) if x.dtype == dtypes.complex64 else (
        np.dtype(np.float64) if x.dtype == dtypes.complex128 else x.dtype)


abs_p = unop("abs", SIGNED_OR_FLOAT, "stablehlo.abs", result_dtype=_real_dtype)
real_p = unop("real", COMPLEX, "stablehlo.real", result_dtype=_real_dtype)
imag_p = unop("imag", COMPLEX, "stablehlo.imag", result_dtype=_real_dtype)


def _conj_lowering(ctx, x):
    if not dtypes.is_complex(x.dtype):
        return ctx.convert(x, ctx.avals_out[0].dtype)
    re = ctx.op1("stablehlo.real", [x], x.aval.update(dtype=_real_dtype(x)))
    im = ctx.op1("stablehlo.imag", [x], x.aval.update(dtype=_real_dtype(x)))
    return ctx.op1("stablehlo.complex", [re, ctx.neg(im)], ctx.avals_out[0])


def _conj_abstract_eval(x, *, input_dtype=None):
    check_dtype("conj", x, NUMBER)
    dt = x.dtype if dtypes.is_complex(x.dtype) else dtypes.canonicalize_dtype(dtypes.complex64)
    return x.update(dtype=dt)


conj_p = standard_primitive("conj", _conj_abstract_eval,
                            lambda ctx, x, input_dtype=None: _conj_lowering(ctx, x))


def _complex_dtype(x, y):
    return np.dtype(np.complex64) if x.dtype == dtypes.float32 else np.dtype(np.complex128)


complex_p = naryop("complex", [FLOAT, FLOAT], "stablehlo.complex", result_dtype=_complex_dtype)

# ---------------------------------------------------------------------------------------------
# Bitwise

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
# Comparisons


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
