"""Elementwise lax primitives and convert_element_type.

Values are checked against NumPy/SciPy; the dtypes each op accepts, result dtypes, weak types
and XLA-defined edge cases (integer division by zero, over-wide shifts, float to int
saturation) against JAX. To keep compiles few, each value test jits one function that applies
every op accepting a dtype.
"""
import math
import warnings

import jax
import ml_dtypes
import numpy as np
import pytest
import scipy.special

import fluxion
from fluxion import lax
from fluxion._src.core import ShapedArray
from fluxion._src.lax import elementwise
from jax._src.lax import lax as jax_internal_lax  # for _convert_element_type(weak_type=True)

BOOL = np.dtype(np.bool_)
BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
SIGNED = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)]
UNSIGNED = [np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64)]
INTS = SIGNED + UNSIGNED
FLOATS = [F16, BF16, F32, F64]
COMPLEXES = [C64, C128]
ALL_DTYPES = [BOOL] + INTS + FLOATS + COMPLEXES
_64_BIT = {np.dtype(np.int64), np.dtype(np.uint64), F64, C128}

# Relative tolerance of each dtype, about a few units in the last place.
_RTOL = {F16: 2e-3, BF16: 1.6e-2, F32: 4e-6, F64: 1e-13, C64: 4e-6, C128: 1e-13}


def _ids(dtypes):
    return [d.name for d in dtypes]


def _is_complex(dtype):
    return np.dtype(dtype).kind == "c"


def _mode(dtype):
    """x64 on exactly when the dtype needs it."""
    return fluxion.enable_x64(np.dtype(dtype) in _64_BIT)


def _check_close(name, got, want, dtype, factor=1.0):
    """`got` (from fluxion) against a float64/complex128 reference, rounded to got's dtype
    (so that it overflows where got must), with a tolerance in units of dtype's rtol."""
    got = np.asarray(got)
    tol = _RTOL[np.dtype(dtype)] * factor
    wide = np.complex128 if np.iscomplexobj(got) else np.float64
    want = want.astype(got.dtype).astype(wide)
    np.testing.assert_allclose(got.astype(wide), want, rtol=tol, atol=tol,
                               equal_nan=True, err_msg=f"{name} on {np.dtype(dtype).name}")


def _run_all(ops, inputs):
    """Apply every op to its inputs in one jitted function."""
    return fluxion.jit(lambda args: {name: ops[name](*args[name]) for name in args})(inputs)


# ---------------------------------------------------------------------------------------------
# Unary ops on floating and complex inputs, against NumPy/SciPy

_ANY = [-0.0, 0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -2.5, 2.5, 3.7, -3.7, 10.0, -10.0,
        np.inf, -np.inf, np.nan]
_SMALL = [-4.0, -1.5, -0.5, -1e-3, 0.0, 1e-3, 0.3, 1.0, 2.5, 4.0, np.nan]
_POSITIVE = [0.0, 1e-3, 0.25, 0.5, 1.0, 2.0, 3.5, 10.0, 100.0, np.inf, -1.0, np.nan]
_UNIT = [-0.99, -0.5, -0.1, 0.0, 0.1, 0.5, 0.9, 0.99, 1.0, -1.0, 1.5, np.nan]
_AT_LEAST_ONE = [1.0, 1.5, 2.0, 10.0, 100.0, np.inf, 0.5, np.nan]
_GAMMA = [0.1, 0.5, 1.5, 2.5, 3.0, 5.0, 10.0, -0.5, -1.5, -2.5, np.inf, np.nan]
_TAN = [-1.2, -0.5, 0.0, 0.3, 0.7, 1.0, 1.2, 3.0, -3.0, np.nan]
_GAMMA_INPUTS = {"lgamma", "digamma"}


def _round_away_from_zero(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _logistic(x):
    return 1 / (1 + np.exp(-x))


def _sign(x):
    if np.iscomplexobj(x):
        return np.where(x == 0, 0, x / np.where(x == 0, 1, np.abs(x)))
    return np.sign(x)


# name: (fluxion op, reference on float64/complex128, real inputs, accepts complex,
#        tolerance factor)
UNARY_INEXACT = {
    "neg": (lax.neg, np.negative, _ANY, True, 1),
    "sign": (lax.sign, _sign, _ANY, True, 1),
    "abs": (lax.abs, np.abs, _ANY, True, 1),
    "floor": (lax.floor, np.floor, _ANY, False, 1),
    "ceil": (lax.ceil, np.ceil, _ANY, False, 1),
    "round_afz": (lax.round, _round_away_from_zero, _ANY, False, 1),
    "round_even": (lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), np.rint, _ANY,
                   False, 1),
    "is_finite": (lax.is_finite, np.isfinite, _ANY, False, 1),
    "exp": (lax.exp, np.exp, _SMALL, True, 2),
    "exp2": (lax.exp2, np.exp2, _SMALL, True, 4),
    "expm1": (lax.expm1, np.expm1, _SMALL, True, 2),
    "log": (lax.log, np.log, _POSITIVE, True, 2),
    "log1p": (lax.log1p, np.log1p, _POSITIVE, True, 2),
    "tanh": (lax.tanh, np.tanh, _ANY, True, 2),
    "logistic": (lax.logistic, _logistic, _ANY, True, 2),
    "sin": (lax.sin, np.sin, _ANY, True, 2),
    "cos": (lax.cos, np.cos, _ANY, True, 2),
    "tan": (lax.tan, np.tan, _TAN, True, 4),
    "asin": (lax.asin, np.arcsin, _UNIT, True, 2),
    "acos": (lax.acos, np.arccos, _UNIT, True, 2),
    "atan": (lax.atan, np.arctan, _ANY, True, 2),
    "sinh": (lax.sinh, np.sinh, _SMALL, True, 2),
    "cosh": (lax.cosh, np.cosh, _SMALL, True, 2),
    "asinh": (lax.asinh, np.arcsinh, _ANY, True, 2),
    "acosh": (lax.acosh, np.arccosh, _AT_LEAST_ONE, True, 2),
    "atanh": (lax.atanh, np.arctanh, _UNIT, True, 2),
    "sqrt": (lax.sqrt, np.sqrt, _POSITIVE, True, 1),
    "rsqrt": (lax.rsqrt, lambda x: 1 / np.sqrt(x), _POSITIVE, True, 2),
    "cbrt": (lax.cbrt, np.cbrt, _ANY, False, 2),
    "erf": (lax.erf, scipy.special.erf, _ANY, False, 2),
    "erfc": (lax.erfc, scipy.special.erfc, _SMALL, False, 4),
    "erf_inv": (lax.erf_inv, scipy.special.erfinv, _UNIT, False, 4),
    "lgamma": (lax.lgamma, scipy.special.gammaln, _GAMMA, False, 8),
    "digamma": (lax.digamma, scipy.special.psi, _GAMMA, False, 8),
    "square": (lax.square, np.square, _ANY, True, 1),
    "reciprocal": (lax.reciprocal, np.reciprocal, _ANY, True, 1),
    "integer_pow_0": (lambda x: lax.integer_pow(x, 0), lambda x: np.ones_like(x), _ANY, True, 1),
    "integer_pow_3": (lambda x: lax.integer_pow(x, 3), lambda x: x * x * x, _SMALL, True, 3),
    "integer_pow_-2": (lambda x: lax.integer_pow(x, -2), lambda x: 1 / (x * x), _SMALL, True, 3),
}

# A grid away from the branch cuts, plus points where naive formulas lose accuracy.
_COMPLEX_INPUTS = np.array(
    [complex(re, im) for re in (-2.0, -0.5, 0.0, 0.3, 1.5) for im in (-1.5, -0.2, 0.2, 1.0)]
    + [1 + 1e-6j, 0.5 + 1e-5j, 1e-3 + 1e-3j, 1j])


def _unary_inputs(dtype):
    ops, inputs = {}, {}
    for name, (op, _, real_inputs, accepts_complex, _) in UNARY_INEXACT.items():
        if _is_complex(dtype):
            if not accepts_complex:
                continue
            inputs[name] = (_COMPLEX_INPUTS.astype(dtype),)
        else:
            inputs[name] = (np.array(real_inputs).astype(dtype),)
        ops[name] = op
    return ops, inputs


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", FLOATS + COMPLEXES, ids=_ids(FLOATS + COMPLEXES))
def test_unary_inexact_ops_match_numpy(dtype):
    ops, inputs = _unary_inputs(dtype)
    with _mode(dtype):
        outs = _run_all(ops, inputs)
    for name, out in outs.items():
        _, reference, _, _, factor = UNARY_INEXACT[name]
        (x,) = inputs[name]
        wide = x.astype(np.complex128 if _is_complex(dtype) else np.float64)
        want = np.asarray(reference(wide))
        expected_dtype = (BOOL if name == "is_finite" else
                          np.dtype(x.real.dtype) if name == "abs" else np.dtype(dtype))
        assert out.dtype == expected_dtype, name
        _check_close(name, out, want, dtype, factor)


def test_complex_sin_and_cos_are_accurate_for_small_imaginary_parts():
    x = np.array([1 + 1e-6j, 2 - 3e-7j, 1e-4j], np.complex64)
    for op, reference in ((lax.sin, np.sin), (lax.cos, np.cos)):
        got = np.asarray(fluxion.jit(op)(x))
        want = reference(x.astype(np.complex128))
        np.testing.assert_allclose(got.imag, want.imag, rtol=1e-5, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Unary ops on integers and booleans: exact, with wrap-around


def _int_samples(dtype):
    info = np.iinfo(dtype)
    values = [0, 1, 2, 5, 100, info.max, info.max - 1, info.min]
    if dtype.kind == "i":
        values += [-1, -7, -100, info.min + 1]
    return np.array(values, dtype=dtype)


def _clz(x):
    bits = x.dtype.itemsize * 8
    unsigned = x.view(f"u{x.dtype.itemsize}")
    return np.array([bits - int(v).bit_length() for v in unsigned], dtype=x.dtype)


def _popcount(x):
    return np.bitwise_count(x.view(f"u{x.dtype.itemsize}")).astype(x.dtype)


UNARY_INT = {
    "neg": (lax.neg, np.negative),
    "sign": (lax.sign, np.sign),
    "abs": (lax.abs, np.abs),
    "bitwise_not": (lax.bitwise_not, np.invert),
    "population_count": (lax.population_count, _popcount),
    "clz": (lax.clz, _clz),
    "square": (lax.square, lambda x: x * x),
    "integer_pow_3": (lambda x: lax.integer_pow(x, 3), lambda x: x * x * x),
    "integer_pow_0": (lambda x: lax.integer_pow(x, 0), np.ones_like),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", INTS, ids=_ids(INTS))
def test_unary_integer_ops_match_numpy(dtype):
    names = [n for n in UNARY_INT if not (n == "abs" and dtype.kind == "u")]
    x = _int_samples(dtype)
    with _mode(dtype):
        outs = _run_all({n: UNARY_INT[n][0] for n in names}, {n: (x,) for n in names})
    for name in names:
        want = UNARY_INT[name][1](x)
        assert outs[name].dtype == dtype, name
        np.testing.assert_array_equal(np.asarray(outs[name]), want, err_msg=name)


def test_bitwise_not_of_bool_is_logical_not():
    x = np.array([True, False])
    np.testing.assert_array_equal(np.asarray(lax.bitwise_not(x)), [False, True])


# ---------------------------------------------------------------------------------------------
# Binary ops, against NumPy

_X = np.array([0.0, -0.0, 1.0, -1.5, 2.5, 3.0, -7.25, 10.0, 0.1, np.inf, -np.inf, np.nan, 5.0])
_Y = np.array([1.0, 2.0, 0.0, 2.0, -0.5, 3.0, 2.0, -3.0, np.nan, 2.0, np.inf, 1.0, -np.inf])
_FINITE_X, _FINITE_Y = _X[np.isfinite(_X) & np.isfinite(_Y)], _Y[np.isfinite(_X) & np.isfinite(_Y)]
_POSITIVE_X = np.array([0.5, 1.0, 2.0, 3.5, 10.0, 0.0, np.inf, 0.25])
_POW_Y = np.array([2.0, -1.0, 0.5, 3.0, -2.0, 2.0, -1.0, 0.0])

BINARY_INEXACT = {
    "add": (lax.add, np.add, True),
    "sub": (lax.sub, np.subtract, True),
    "mul": (lax.mul, np.multiply, True),
    "div": (lax.div, np.divide, True),
    "rem": (lax.rem, np.fmod, False),
    "pow": (lax.pow, np.power, True),
    "max": (lax.max, np.maximum, False),
    "min": (lax.min, np.minimum, False),
    "atan2": (lax.atan2, np.arctan2, False),
    "nextafter": (lax.nextafter, np.nextafter, False),
    "eq": (lax.eq, np.equal, True),
    "ne": (lax.ne, np.not_equal, True),
    "lt": (lax.lt, np.less, False),
    "le": (lax.le, np.less_equal, False),
    "gt": (lax.gt, np.greater, False),
    "ge": (lax.ge, np.greater_equal, False),
}


def _binary_inexact_inputs(dtype):
    inputs = {}
    for name, (_, _, accepts_complex) in BINARY_INEXACT.items():
        if _is_complex(dtype):
            # Finite values only: implementations of complex arithmetic treat infinities
            # differently (NumPy's x / (0 - inf j) is NaN, XLA's is 0).
            if not accepts_complex:
                continue
            x = (_FINITE_X + 1j * _FINITE_X[::-1]) if name != "pow" else _POSITIVE_X[:6] + 0.5j
            y = (_FINITE_Y - 1j * _FINITE_Y[::-1]) if name != "pow" else _POW_Y[:6] - 0.25j
        else:
            x, y = (_POSITIVE_X, _POW_Y) if name == "pow" else (_X, _Y)
        inputs[name] = (x.astype(dtype), y.astype(dtype))
    return inputs


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", FLOATS + COMPLEXES, ids=_ids(FLOATS + COMPLEXES))
def test_binary_inexact_ops_match_numpy(dtype):
    inputs = _binary_inexact_inputs(dtype)
    with _mode(dtype):
        outs = _run_all({n: BINARY_INEXACT[n][0] for n in inputs}, inputs)
    for name, out in outs.items():
        x, y = inputs[name]
        if name == "nextafter":  # exact, and computed by NumPy in the dtype itself
            np.testing.assert_array_equal(np.asarray(out).astype(np.float64),
                                          np.nextafter(x, y).astype(np.float64))
            continue
        wide = np.complex128 if _is_complex(dtype) else np.float64
        want = np.asarray(BINARY_INEXACT[name][1](x.astype(wide), y.astype(wide)))
        if want.dtype == BOOL:
            assert out.dtype == BOOL
            np.testing.assert_array_equal(np.asarray(out), want, err_msg=name)
        else:
            assert out.dtype == dtype, name
            _check_close(name, out, want, dtype, factor=4 if name == "pow" else 1)


def test_complex_builds_from_float32_and_float64_parts():
    re, im = np.array([1.0, -2.0], np.float32), np.array([0.5, 3.0], np.float32)
    out = lax.complex(re, im)
    assert out.dtype == C64
    np.testing.assert_array_equal(np.asarray(out), re + 1j * im)
    with fluxion.enable_x64():
        assert lax.complex(re.astype(F64), im.astype(F64)).dtype == C128


def test_pow_with_integer_exponent_array():
    x = np.array([2.0, -1.5, 0.5, 3.0], np.float32)
    y = np.array([3, 2, -2, 0], np.int32)
    out = fluxion.jit(lax.pow)(x, y)
    assert out.dtype == F32
    np.testing.assert_allclose(np.asarray(out), x.astype(np.float64) ** y, rtol=1e-6)


def _truncating_div(x, y):
    """C integer division (truncates toward zero), wrapping like the dtype."""
    q = [abs(int(a)) // abs(int(b)) * (1 if (a < 0) == (b < 0) else -1) for a, b in zip(x, y)]
    return np.array(q, dtype=object).astype(np.int64 if x.dtype.kind == "i" else np.uint64
                                            ).astype(x.dtype)


def _int_pairs(dtype):
    """Operand pairs with nonzero divisors, negative operands of both signs where signed."""
    x = _int_samples(dtype)
    y = np.array([1, 3, -2, 7, -1, 2, 5, 100, 3, -3, 9, 2][:x.size] if dtype.kind == "i"
                 else [1, 3, 2, 7, 200, 2, 5, 100][:x.size], dtype=object)
    return x, np.array(y).astype(dtype)


BINARY_INT = {
    "add": (lax.add, np.add),
    "sub": (lax.sub, np.subtract),
    "mul": (lax.mul, np.multiply),
    "div": (lax.div, _truncating_div),
    "rem": (lax.rem, np.fmod),
    "max": (lax.max, np.maximum),
    "min": (lax.min, np.minimum),
    "bitwise_and": (lax.bitwise_and, np.bitwise_and),
    "bitwise_or": (lax.bitwise_or, np.bitwise_or),
    "bitwise_xor": (lax.bitwise_xor, np.bitwise_xor),
    "eq": (lax.eq, np.equal),
    "ne": (lax.ne, np.not_equal),
    "lt": (lax.lt, np.less),
    "le": (lax.le, np.less_equal),
    "gt": (lax.gt, np.greater),
    "ge": (lax.ge, np.greater_equal),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", INTS, ids=_ids(INTS))
def test_binary_integer_ops_match_numpy(dtype):
    x, y = _int_pairs(dtype)
    with _mode(dtype):
        outs = _run_all({n: op for n, (op, _) in BINARY_INT.items()},
                        {n: (x, y) for n in BINARY_INT})
    for name, (_, reference) in BINARY_INT.items():
        want = reference(x, y)
        assert outs[name].dtype == want.dtype, name
        np.testing.assert_array_equal(np.asarray(outs[name]), want, err_msg=name)


def test_integer_division_truncates_toward_zero():
    x = np.array([7, -7, 7, -7, 1, -1], np.int32)
    y = np.array([2, 2, -2, -2, 3, 3], np.int32)
    np.testing.assert_array_equal(np.asarray(lax.div(x, y)), [3, -3, -3, 3, 0, 0])
    np.testing.assert_array_equal(np.asarray(lax.rem(x, y)), [1, -1, 1, -1, 1, -1])


@pytest.mark.parametrize("op", [lax.bitwise_and, lax.bitwise_or, lax.bitwise_xor, lax.eq,
                                lax.ne, lax.lt, lax.le, lax.gt, lax.ge, lax.max, lax.min],
                         ids=lambda f: f.__name__)
def test_binary_ops_on_booleans(op):
    x = np.array([False, False, True, True])
    y = np.array([False, True, False, True])
    reference = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
                 "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                 "gt": np.greater, "ge": np.greater_equal, "max": np.maximum,
                 "min": np.minimum}[op.__name__]
    out = fluxion.jit(op)(x, y)
    assert out.dtype == BOOL
    np.testing.assert_array_equal(np.asarray(out), reference(x, y))


def test_complex_max_min_and_equality_compare_both_parts():
    x = np.array([1 + 2j, 1 + 2j, 3 - 1j, 2 + 0j], np.complex64)
    y = np.array([1 + 3j, 0 + 5j, 3 - 1j, 2 + 1e-3j], np.complex64)
    out = fluxion.jit(lambda a, b: (lax.max(a, b), lax.min(a, b), lax.eq(a, b), lax.ne(a, b)))(x, y)
    np.testing.assert_array_equal(np.asarray(out[0]), np.where([0, 1, 1, 0], x, y))
    np.testing.assert_array_equal(np.asarray(out[1]), np.where([1, 0, 1, 1], x, y))
    np.testing.assert_array_equal(np.asarray(out[2]), [False, False, True, False])
    np.testing.assert_array_equal(np.asarray(out[3]), [True, True, False, True])


# ---------------------------------------------------------------------------------------------
# XLA-defined edge cases, against JAX: integer division by zero and overflow, shifts by
# negative or too-large amounts, float to integer conversion out of range. Operands are passed
# as arguments: JAX's XLA crashes (SIGFPE) constant-folding an integer division by zero.


def _int_edge_inputs(dtypes):
    inputs = {}
    for dt in dtypes:
        info = np.iinfo(dt)
        bits = 8 * dt.itemsize
        inputs[f"div {dt.name}"] = (
            np.array([5, 0, info.max, info.min, info.min, 7, 1, info.max], dt),
            np.array([0, 0, 0, 0, -1 if dt.kind == "i" else 1, 3, 1, 1], dt))
        amounts = [0, 1, bits - 1, bits, bits + 1, 2 * bits, min(100, int(info.max))]
        if dt.kind == "i":
            amounts += [-1, -bits, int(info.min)]
        base = np.array([1, -3 if dt.kind == "i" else 3, info.max, info.min], dt)
        inputs[f"shift {dt.name}"] = (np.tile(base, len(amounts)),
                                      np.repeat(np.array(amounts, dt), base.size))
    return inputs


def _float_to_int_inputs(pairs):
    values = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 2.7, -2.7, 255.5, 256.0, -0.5,
                       -1.0, 3e9, 65504.0, 127.9, -128.9, 4.3e19])
    return {f"{src.name}->{dst.name}": values.astype(src) for src, dst in pairs}


def _edge_case_fn(lib_lax):
    def f(int_inputs, float_inputs):
        out = {}
        for key, (x, y) in int_inputs.items():
            if key.startswith("div"):
                out[key] = (lib_lax.div(x, y), lib_lax.rem(x, y))
            else:
                out[key] = (lib_lax.shift_left(x, y), lib_lax.shift_right_logical(x, y),
                            lib_lax.shift_right_arithmetic(x, y))
        for key, x in float_inputs.items():
            out[key] = (lib_lax.convert_element_type(x, np.dtype(key.split("->")[1])),)
        return out
    return f


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_xla_edge_cases_match_jax(x64):
    # With x64 on, only what needs it: 64-bit types, and conversions from or to them.
    def uses_64_bit(*dtypes):
        return bool(set(dtypes) & _64_BIT)

    float_to_int = [(src, dst) for src in FLOATS for dst in INTS + [BOOL]
                    if uses_64_bit(src, dst) == x64]
    args = (_int_edge_inputs([d for d in INTS if uses_64_bit(d) == x64]),
            _float_to_int_inputs(float_to_int))
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    try:
        with fluxion.enable_x64(x64):
            ours = fluxion.jit(_edge_case_fn(lax))(*args)
        theirs = jax.jit(_edge_case_fn(jax.lax))(*args)
    finally:
        jax.config.update("jax_enable_x64", old)
    assert ours.keys() == theirs.keys()
    for key in ours:
        for o, t in zip(ours[key], theirs[key]):
            assert o.dtype == t.dtype, key
            np.testing.assert_array_equal(np.asarray(o), np.asarray(t), err_msg=key)


def test_integer_division_by_a_constant_zero_compiles():
    # Both operands are literals here, which XLA would fold if the lowering let it.
    out = fluxion.jit(lambda: (lax.div(np.int32(5), np.int32(0)), lax.rem(np.int32(5), np.int32(0)),
                               lax.div(np.uint8(5), np.uint8(0))))()
    assert [int(v) for v in out] == [-1, 5, 255]


def test_float_to_int_conversion_saturates_and_maps_nan_to_zero():
    x = np.array([np.nan, np.inf, -np.inf, 300.0, -300.0, 2.9, -2.9], np.float32)
    np.testing.assert_array_equal(np.asarray(lax.convert_element_type(x, np.int8)),
                                  [0, 127, -128, 127, -128, 2, -2])
    np.testing.assert_array_equal(np.asarray(lax.convert_element_type(x, np.uint8)),
                                  [0, 255, 0, 255, 0, 2, 0])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 1e10, -3.5, 2.5, 1 + 2j, True, 7],
                         ids=repr)
@pytest.mark.parametrize("new_dtype", [np.int8, np.uint8, np.int32, np.uint32, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_host_values_convert_like_device_arrays(value, new_dtype):
    on_host = lax.convert_element_type(value, new_dtype)
    on_device = lax.convert_element_type(fluxion.device_put(value), new_dtype)
    assert on_host.dtype == on_device.dtype == np.dtype(new_dtype)
    np.testing.assert_array_equal(np.asarray(on_host), np.asarray(on_device))


# ---------------------------------------------------------------------------------------------
# convert_element_type between all dtypes, against NumPy


def _conversion_sources(dtype):
    if dtype == BOOL:
        return np.array([True, False])
    if dtype.kind in "iu":
        return _int_samples(dtype)
    values = np.array([0.0, -0.0, 1.0, -1.0, 2.75, -2.75, 100.5, 1e-3, 0.1])
    if dtype.kind == "c":
        return (values + 1j * values[::-1]).astype(dtype)
    return values.astype(dtype)


def _numpy_convert(x, dst):
    if x.dtype.kind == "c" and dst.kind != "c":
        x = x.real
    if x.dtype.kind == "f" or x.dtype == BF16:
        if dst.kind in "iu":  # sources are in range of every target except for negatives
            return np.trunc(x.astype(np.float64)).astype(np.int64).astype(dst)
    return x.astype(dst)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("src", ALL_DTYPES, ids=_ids(ALL_DTYPES))
def test_convert_element_type_to_every_dtype(src):
    x = _conversion_sources(src)
    with fluxion.enable_x64():
        outs = fluxion.jit(lambda v: {d.name: lax.convert_element_type(v, d)
                                      for d in ALL_DTYPES})(x)
    for dst in ALL_DTYPES:
        out = outs[dst.name]
        assert out.dtype == dst and not out.weak_type
        if dst.kind in "u" and x.dtype.kind in "fc" or (dst.kind == "u" and x.dtype == BF16):
            keep = np.real(x) >= 0  # negative floats saturate to 0 (see the JAX comparison)
        else:
            keep = np.ones(x.shape, bool)
        np.testing.assert_array_equal(np.asarray(out)[keep], _numpy_convert(x, dst)[keep],
                                      err_msg=f"{src.name} -> {dst.name}")


def test_convert_narrows_64_bit_types_without_x64():
    out = lax.convert_element_type(np.array([1.5, 2.5], np.float32), np.float64)
    assert out.dtype == F32
    assert lax.convert_element_type(np.array([1, 2], np.int32), np.int64).dtype == np.int32


def test_convert_element_type_requires_a_dtype():
    with pytest.raises(ValueError, match="must be specified"):
        lax.convert_element_type(np.float32(1), None)
    with pytest.raises(TypeError):
        lax.convert_element_type(np.float32(1), np.dtype("U3"))


def test_convert_to_same_type_returns_the_operand():
    x = lax.add(np.float32(1), np.float32(2))
    assert lax.convert_element_type(x, np.float32) is x


def test_weak_type_conversion_keeps_value():
    x = lax._convert_element_type(np.array([1.5, 2.5], np.float32), np.float32, weak_type=True)
    assert x.weak_type and x.dtype == F32
    y = fluxion.jit(lambda v: lax._convert_element_type(v, np.float32, weak_type=True))(
        np.array([1.5], np.float32))
    assert y.weak_type


# ---------------------------------------------------------------------------------------------
# Shapes: rank-0 operands and size-1 dimensions broadcast; jit and eager agree

_SHAPE_PAIRS = [((), ()), ((0,), (0,)), ((3,), (3,)), ((2, 3), (2, 3)), ((), (2, 3)),
                ((2, 3), ()), ((1, 3), (2, 3)), ((2, 1), (1, 3)), ((0, 3), ()), ((1,), (0,))]


@pytest.mark.parametrize("shapes", _SHAPE_PAIRS, ids=str)
def test_broadcasting_of_binary_ops(shapes, rng):
    x = rng.standard_normal(shapes[0]).astype(np.float32)
    y = rng.standard_normal(shapes[1]).astype(np.float32)

    def f(a, b):
        return lax.add(a, b), lax.lt(a, b)

    want = (x + y, x < y)
    for got in (f(x, y), fluxion.jit(f)(x, y)):
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_array_equal(np.asarray(g), w)


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3)], ids=str)
def test_unary_ops_keep_shape(shape, rng):
    x = rng.uniform(0.5, 2.0, shape).astype(np.float32)
    for got in (lax.log(x), fluxion.jit(lax.log)(x)):
        assert got.shape == shape
        np.testing.assert_allclose(np.asarray(got), np.log(x), rtol=1e-6)


# A representative subset, run op by op (eager) and jitted.
_EAGER_CASES = {
    "add_f16": (lax.add, np.array([1.5, -2.0], F16), np.array([0.25, 4.0], F16)),
    "div_i32": (lax.div, np.array([7, -7], np.int32), np.array([2, 2], np.int32)),
    "rem_f32": (lax.rem, np.array([7.5, -7.5], F32), np.array([2.0, 2.0], F32)),
    "sin_bf16": (lax.sin, np.array([0.5, -1.0], BF16)),
    "exp_c64": (lax.exp, np.array([1 + 1j, -0.5j], C64)),
    "abs_c64": (lax.abs, np.array([3 + 4j, -1j], C64)),
    "round_even": (lambda x: lax.round(x, 1), np.array([0.5, 1.5, 2.5], F32)),
    "shift_u8": (lax.shift_right_logical, np.array([255, 16], np.uint8), np.array([1, 9], np.uint8)),
    "eq_bool": (lax.eq, np.array([True, False]), np.array([True, True])),
    "pow_int_exp": (lax.pow, np.array([2.0, 3.0], F32), np.array([3, -1], np.int32)),
    "integer_pow": (lambda x: lax.integer_pow(x, 5), np.array([1.5, -2.0], F32)),
    "erf_inv": (lax.erf_inv, np.array([0.5, -0.25], F32)),
    "convert": (lambda x: lax.convert_element_type(x, np.int16), np.array([2.5, -300.0], F32)),
    "rank0_with_rank2": (lax.mul, np.float32(2.0), np.ones((2, 2), F32)),
    "conj_f32": (lax.conj, np.array([1.0, -2.0], F32)),
    "population_count": (lax.population_count, np.array([7, -1], np.int16)),
}


@pytest.mark.parametrize("case", list(_EAGER_CASES), ids=str)
def test_jit_matches_eager(case):
    op, *args = _EAGER_CASES[case]
    eager, jitted = op(*args), fluxion.jit(op)(*args)
    assert (eager.dtype, eager.shape, eager.weak_type) == (jitted.dtype, jitted.shape,
                                                           jitted.weak_type)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))


def test_python_scalar_operands_are_weak():
    out = lax.sin(2.0)
    assert out.dtype == F32 and out.weak_type
    np.testing.assert_allclose(float(out), math.sin(2.0), rtol=1e-6)
    mixed = lax.add(np.float32(1.0), 2.0)
    assert mixed.dtype == F32 and not mixed.weak_type
    assert float(mixed) == 3.0


# ---------------------------------------------------------------------------------------------
# Accepted dtypes, result dtypes and weak types of every op, against JAX (abstract only)

_UNARY_NAMES = ["neg", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2", "expm1",
                "log", "log1p", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos", "atan",
                "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "abs", "erf",
                "erfc", "erf_inv", "lgamma", "digamma", "real", "imag", "conj", "bitwise_not",
                "population_count", "clz", "square", "reciprocal"]
_BINARY_NAMES = ["add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter",
                 "complex", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",
                 "shift_right_logical", "shift_right_arithmetic", "eq", "ne", "lt", "le", "gt",
                 "ge"]
_UNARY_EXTRA = {"integer_pow_2": lambda L: lambda x: L.integer_pow(x, 2),
                "integer_pow_-1": lambda L: lambda x: L.integer_pow(x, -1),
                "round_even": lambda L: lambda x: L.round(x, L.RoundingMethod.TO_NEAREST_EVEN)}


def _unary_fn(L, name):
    return _UNARY_EXTRA[name](L) if name in _UNARY_EXTRA else getattr(L, name)


def _outcome(fn, args):
    """(dtype, shape, weak_type) of fn(*args), or the class of the error it raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*args)
        return np.dtype(out.dtype).name, tuple(out.shape), bool(out.aval.weak_type)
    except Exception as e:  # the class of error is part of what is compared
        return type(e).__name__


def _is_python_scalar(spec):
    return isinstance(spec, (bool, int, float, complex))


def _outcomes(lib, internal_lax, cases):
    """The outcome of each case (label, fn, operand specs), all traced in one function of
    `lib`. A spec is a Python scalar or (shape, dtype, weak_type)."""
    arrays = sorted({(s[0], s[1]) for _, _, specs in cases for s in specs
                     if not _is_python_scalar(s)}, key=str)
    results = []

    def body(*xs):
        by_key = dict(zip(arrays, xs))
        for _, fn, specs in cases:
            args = [s if _is_python_scalar(s) else
                    internal_lax._convert_element_type(by_key[s[:2]], s[1], weak_type=s[2])
                    for s in specs]
            results.append(_outcome(fn, args))
        return xs

    lib.make_jaxpr(body)(*[np.zeros(shape, dt) for shape, dt in arrays])
    return results


def _canonical(dtypes):
    return list(dict.fromkeys(fluxion.dtypes.canonicalize_dtype(d) for d in dtypes))


def _compare(cases):
    """Cases whose outcome differs between fluxion and JAX; a case is (label, fluxion fn,
    jax fn, operand specs)."""
    ours = _outcomes(fluxion, lax, [(label, f, specs) for label, f, _, specs in cases])
    theirs = _outcomes(jax, jax_internal_lax, [(label, f, specs) for label, _, f, specs in cases])
    return [(label, specs, o, t) for (label, _, _, specs), o, t in zip(cases, ours, theirs)
            if o != t]


def test_unary_ops_accept_and_type_like_jax(x64_mode):
    cases = []
    for name in _UNARY_NAMES + list(_UNARY_EXTRA):
        for dt in _canonical(ALL_DTYPES):
            for weak in (False, True):
                cases.append((name, _unary_fn(lax, name), _unary_fn(jax.lax, name),
                              [((2, 3), dt, weak)]))
    assert _compare(cases) == []


def test_binary_ops_accept_and_type_like_jax(x64_mode):
    cases = []
    dts = _canonical(ALL_DTYPES)
    for name in _BINARY_NAMES:
        for a in dts:
            for b in dts:
                cases.append((name, getattr(lax, name), getattr(jax.lax, name),
                              [((3,), a, False), ((3,), b, False)]))
    assert _compare(cases) == []


@pytest.mark.parametrize("name", _BINARY_NAMES)
def test_binary_shapes_and_weak_types_like_jax(name):
    dt = np.dtype(np.int32) if "shift" in name or "bitwise" in name else F32
    shape_pairs = _SHAPE_PAIRS + [((3,), (2, 3)), ((2, 3), (3, 2)), ((2,), (3,))]
    cases = []
    for s1, s2 in shape_pairs:
        for w1, w2 in ((False, False), (True, False), (True, True)):
            cases.append((name, getattr(lax, name), getattr(jax.lax, name),
                          [(s1, dt, w1), (s2, dt, w2)]))
    py = {F32: 2.0, np.dtype(np.int32): 2}[dt]
    cases.append((name, getattr(lax, name), getattr(jax.lax, name), [py, ((2,), dt, False)]))
    cases.append((name, getattr(lax, name), getattr(jax.lax, name), [py, py]))
    assert _compare(cases) == []


@pytest.mark.parametrize("value", [True, 3, 2.5, 1 + 2j], ids=repr)
def test_unary_ops_on_python_scalars_like_jax(value):
    cases = [(name, _unary_fn(lax, name), _unary_fn(jax.lax, name), [value])
             for name in _UNARY_NAMES + list(_UNARY_EXTRA)]
    assert _compare(cases) == []


# ---------------------------------------------------------------------------------------------
# Error messages


@pytest.mark.parametrize("fn, args, match", [
    (lax.add, (np.float16(1), np.float32(1)), "lax.add requires arguments to have the same dtypes"),
    (lax.add, (np.int8(1), 2), "got int8, int32"),
    (lax.sin, (np.int32(1),), "sin does not accept dtype int32"),
    (lax.shift_left, (np.float32(1), np.float32(1)),
     "shift_left does not accept dtype float32 at position 0"),
    (lax.add, (np.zeros(3, F32), np.zeros(4, F32)), "incompatible shapes for broadcasting"),
    (lax.add, (np.zeros(3, F32), np.zeros((2, 3), F32)), "same number of dimensions"),
    (lambda x: lax.integer_pow(x, -1), (np.int32(2),), "Integers cannot be raised to negative"),
    (lambda x: lax.integer_pow(x, 1.5), (np.float32(2),), "integer exponent"),
    (lax.pow, (np.float32(2), np.float16(2)), "the first argument to pow"),
    (lax.pow, (np.int32(2), np.int32(2)), "pow does not accept dtype int32 at position 0"),
    (lax.complex, (np.float16(1), np.float16(1)), "complex does not accept dtype float16"),
    (lax.conj, (np.int32(1),), "conj does not accept dtype int32"),
    (lax.rem, (np.complex64(1), np.complex64(1)), "rem does not accept dtype complex64"),
    (lax.abs, (np.uint8(1),), "abs does not accept dtype uint8"),
    (lax.lt, (np.complex64(1), np.complex64(1)), "lt does not accept dtype complex64"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_type_errors(fn, args, match):
    with pytest.raises(TypeError, match=match):
        fluxion.eval_shape(fn, *args)


def test_float0_operands_are_rejected():
    float0 = ShapedArray((2,), fluxion.dtypes.float0)
    with pytest.raises(TypeError, match="Called neg with a float0 array"):
        elementwise.neg_p.abstract_eval(float0)
    with pytest.raises(TypeError, match="Called add with a float0 array at position 1"):
        elementwise.add_p.abstract_eval(ShapedArray((2,), F32), float0)


def test_accuracy_other_than_default_is_unsupported():
    assert float(lax.exp(np.float32(0), accuracy=None)) == 1.0
    with pytest.raises(NotImplementedError, match="accuracy"):
        lax.exp(np.float32(0), accuracy="highest")


# ---------------------------------------------------------------------------------------------
# Jaxprs print like JAX's (primitive names and params)


def test_jaxpr_matches_jax():
    def f(lib_lax, x, i):
        return (lib_lax.square(x), lib_lax.reciprocal(x), lib_lax.exp2(x), lib_lax.conj(x),
                lib_lax.round(x), lib_lax.round(x, 1), lib_lax.integer_pow(x, 3),
                lib_lax.sign(i), lib_lax.convert_element_type(x, np.int8),
                lib_lax.complex(x, x), lib_lax.is_finite(x), lib_lax.nextafter(x, x))
    args = (np.float32(1), np.int32(2))
    ours = fluxion.make_jaxpr(lambda x, i: f(lax, x, i))(*args)
    theirs = jax.make_jaxpr(lambda x, i: f(jax.lax, x, i))(*args)
    assert str(ours) == str(theirs)


# JAX 0.10.2's lax.mul(x, y, out_dtype=...): both operands converted to out_dtype first.
_MUL_OUT_DTYPE_CASES = [
    (np.int8(100), np.int8(100), np.int16),       # would wrap around in int8
    (np.int8(3), np.float32(2.5), np.float32),    # mixed operand dtypes are allowed
    (np.float32(3.7), np.float32(2.0), np.int32),  # float -> int truncates before the product
    (ml_dtypes.bfloat16(1.5), ml_dtypes.bfloat16(3.0), np.float32),
    (np.complex64(1 + 2j), np.complex64(3 - 1j), np.complex64),
    (3.0, 2.0, np.float32),                       # two weak operands give a weak result
]


@pytest.mark.parametrize("x, y, out_dtype", _MUL_OUT_DTYPE_CASES)
def test_mul_out_dtype_matches_jax(x, y, out_dtype):
    want = jax.lax.mul(x, y, out_dtype=out_dtype)
    for fn in (lax.mul, fluxion.jit(lax.mul, static_argnames="out_dtype")):
        got = fn(x, y, out_dtype=out_dtype)
        assert got.dtype == want.dtype and got.weak_type == want.weak_type
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_mul_out_dtype_grad_and_vmap_match_jax():
    def f(lib):
        return lambda x: lib.lax.mul(x, 3.0, out_dtype=np.float32)
    x = ml_dtypes.bfloat16(2.0)
    got, want = fluxion.grad(f(fluxion))(x), jax.grad(f(jax))(x)
    assert got.dtype == want.dtype == BF16 and float(got) == float(want)
    xs = np.arange(4, dtype=np.int8)
    np.testing.assert_array_equal(fluxion.vmap(f(fluxion))(xs), jax.vmap(f(jax))(xs))
