"""Values of fluxion.numpy's elementwise functions against NumPy, jit against eager, errors."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

UNARY = {
    "negative": np.negative, "positive": np.positive, "absolute": np.absolute,
    "sign": np.sign, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "fix": np.fix,
    "rint": np.rint, "round": np.round, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "cbrt": np.cbrt, "square": np.square, "reciprocal": np.reciprocal, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos,
    "arctan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "arcsinh": np.arcsinh, "arccosh": np.arccosh, "arctanh": np.arctanh,
    "deg2rad": np.deg2rad, "rad2deg": np.rad2deg, "isnan": np.isnan, "isinf": np.isinf,
    "isfinite": np.isfinite, "isposinf": np.isposinf, "isneginf": np.isneginf,
    "signbit": np.signbit, "real": np.real, "imag": np.imag, "conj": np.conj,
    "angle": np.angle, "logical_not": np.logical_not, "invert": np.invert,
    "nan_to_num": np.nan_to_num, "sinc": np.sinc,
}
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "floor_divide": np.floor_divide, "remainder": np.remainder, "fmod": np.fmod,
    "power": np.power, "float_power": np.float_power, "arctan2": np.arctan2,
    "hypot": np.hypot, "logaddexp": np.logaddexp, "logaddexp2": np.logaddexp2,
    "maximum": np.maximum, "minimum": np.minimum, "fmax": np.fmax, "fmin": np.fmin,
    "copysign": np.copysign, "heaviside": np.heaviside, "logical_and": np.logical_and,
    "logical_or": np.logical_or, "logical_xor": np.logical_xor,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor, "left_shift": np.left_shift,
    "right_shift": np.right_shift, "equal": np.equal, "not_equal": np.not_equal,
    "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "isclose": np.isclose,
}
# Exponents and shift amounts must be non-negative for integers; integer division by zero
# is undefined (XLA and NumPy differ).
NONNEGATIVE_Y = {"power", "left_shift", "right_shift"}
NONZERO_Y = {"floor_divide", "remainder", "fmod", "divide"}
# Complex operands fluxion's lax does not support yet, and ops NumPy orders differently.
SKIP = {("arctan2", "c"), ("logaddexp", "c"), ("logaddexp2", "c"), ("maximum", "c"),
        ("minimum", "c"), ("fmax", "c"), ("fmin", "c")}

DTYPES = ["bool", "int8", "uint8", "int32", "float16", "bfloat16", "float32", "complex64"]
TOLERANCE = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 2e-5, "complex64": 2e-5}


def _dtype(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _operands(name, shape, rng):
    dt = _dtype(name)
    if dt == np.bool_:
        return rng.random(shape) > 0.5, rng.random(shape) > 0.3
    if dt.kind == "u":
        return (rng.integers(0, 11, shape).astype(dt), rng.integers(1, 5, shape).astype(dt))
    if dt.kind == "i":
        sign = np.where(rng.random(shape) > 0.5, 1, -1)
        return (rng.integers(-6, 7, shape).astype(dt), (sign * rng.integers(1, 5, shape)).astype(dt))
    if dt.kind == "c":
        return tuple((rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(dt)
                     for _ in range(2))
    return tuple(rng.uniform(-3, 3, shape).astype(dt) for _ in range(2))


def _applicable(name, arity, dtype_name):
    """Ops JAX accepts for this dtype (fluxion must match those), minus known gaps."""
    if (name, _dtype(dtype_name).kind) in SKIP:
        return False
    spec = jax.ShapeDtypeStruct((2,), _dtype(dtype_name))
    try:
        # jnp.fix was removed from JAX; fluxion keeps NumPy's alias of trunc.
        jax.eval_shape(getattr(jnp, "trunc" if name == "fix" else name), *[spec] * arity)
    except (TypeError, ValueError):
        return False
    return True


# XLA compiles each output as its own kernel, so every dtype checks a focused set of ops
# (float32 and int32 check everything that applies).
FOCUS = {
    "bool": None,
    "int8": {"negative", "absolute", "sign", "square", "floor", "invert", "floor_divide",
             "remainder", "fmod", "power", "left_shift", "right_shift", "maximum", "less",
             "bitwise_xor", "divide", "add", "multiply"},
    "float16": {"exp", "log", "sin", "sqrt", "tanh", "floor", "round", "rint", "reciprocal",
                "signbit", "sinc", "divide", "floor_divide", "remainder", "arctan2", "hypot",
                "logaddexp", "copysign", "power", "maximum", "isnan"},
    "complex64": {"negative", "absolute", "sign", "exp", "log", "log2", "log10", "expm1", "log1p",
                  "sqrt", "sin", "cos", "tan", "tanh", "arcsinh", "arccosh", "arctan", "square",
                  "reciprocal", "real", "imag", "conj", "angle", "isinf", "isfinite", "rint",
                  "round", "nan_to_num", "add", "multiply", "divide", "power", "equal", "less",
                  "greater_equal", "isclose", "logical_and"},
}
FOCUS["uint8"] = FOCUS["int8"]
FOCUS["bfloat16"] = FOCUS["float16"]


def _ops(dtype_name):
    focus = FOCUS.get(dtype_name)
    unary = [n for n in UNARY if (focus is None or n in focus) and _applicable(n, 1, dtype_name)]
    binary = [n for n in BINARY if (focus is None or n in focus) and _applicable(n, 2, dtype_name)]
    return unary, binary


def _second_operands(dtype_name, y):
    """y, |y| (for exponents and shifts) and y without zeros (for integer division)."""
    if _dtype(dtype_name).kind not in "biu":
        return y, y, y
    nonneg = np.abs(y) if _dtype(dtype_name).kind != "b" else y
    return y, nonneg, np.where(y == 0, np.ones_like(y), y)


def _pick(name, ys):
    y, nonneg, nonzero = ys
    return nonneg if name in NONNEGATIVE_Y else nonzero if name in NONZERO_Y else y


def _all_ops(unary, binary):
    def run(x, ys):
        out = {n: getattr(fnp, n)(x) for n in unary}
        out.update({n: getattr(fnp, n)(x, _pick(n, ys)) for n in binary})
        return out
    return run


def _reference(np_fn, out_dtype, *args):
    """NumPy's result, computed in double precision when the result is inexact."""
    if np.dtype(out_dtype).kind in "fcV" or out_dtype == ml_dtypes.bfloat16:
        wide = np.complex128 if any(np.iscomplexobj(a) for a in args) else np.float64
        args = [np.asarray(a).astype(wide) for a in args]
    with np.errstate(all="ignore"):
        try:
            ref = np_fn(*args)
        except TypeError:
            # NumPy has no boolean loop for some ops (positive, ...): compute on integers.
            ref = np_fn(*[np.asarray(a).astype(np.int32) for a in args])
    return np.asarray(ref).astype(out_dtype)


def _assert_close(got, want, dtype_name, what):
    got = np.asarray(got)
    assert got.shape == want.shape, what
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        tol = TOLERANCE.get(dtype_name, 2e-5)
        np.testing.assert_allclose(got.astype(np.complex128 if got.dtype.kind == "c" else
                                              np.float64),
                                   want.astype(np.complex128 if want.dtype.kind == "c" else
                                               np.float64),
                                   rtol=tol, atol=tol, equal_nan=True, err_msg=what)


def _check_against_numpy(dtype_name, x, y, unary, binary):
    ys = _second_operands(dtype_name, y)
    outs = fluxion.jit(_all_ops(unary, binary))(x, ys)
    for name in unary:
        _assert_close(outs[name], _reference(UNARY[name], outs[name].dtype, x), dtype_name, name)
    for name in binary:
        _assert_close(outs[name], _reference(BINARY[name], outs[name].dtype, x, _pick(name, ys)),
                      dtype_name, name)


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_values_match_numpy(dtype_name):
    x, y = _operands(dtype_name, (3, 4), np.random.default_rng(0))
    _check_against_numpy(dtype_name, x, y, *_ops(dtype_name))


EDGE_OPS = (["sign", "floor", "sqrt", "sinc", "signbit", "nan_to_num", "round"],
            ["add", "floor_divide", "remainder", "power", "hypot", "heaviside", "copysign"])


@pytest.mark.parametrize("shapes", [((), ()), ((0,), (0,)), ((3, 1), (4,)), ((), (2, 3)),
                                    ((2, 0, 1), (3,))])
def test_rank0_empty_and_broadcast_operands(shapes):
    rng = np.random.default_rng(2)
    x = _operands("float32", shapes[0], rng)[0]
    y = _operands("float32", shapes[1], rng)[1]
    _check_against_numpy("float32", x, y, *EDGE_OPS)


@pytest.mark.parametrize("dtype_name, unary, binary", [
    ("float32", ["sinc", "signbit", "round", "arccosh"],
     ["floor_divide", "remainder", "hypot", "heaviside", "copysign", "logaddexp", "fmax"]),
    ("int32", ["sign", "absolute"], ["floor_divide", "remainder", "power", "right_shift"]),
])
def test_eager_matches_jit(dtype_name, unary, binary):
    rng = np.random.default_rng(1)
    x, y = _operands(dtype_name, (5,), rng)
    ys = _second_operands(dtype_name, y)
    run = _all_ops(unary, binary)
    eager, jitted = run(x, ys), fluxion.jit(run)(x, ys)
    for name in eager:
        assert eager[name].dtype == jitted[name].dtype, name
        np.testing.assert_allclose(np.asarray(eager[name]), np.asarray(jitted[name]), rtol=1e-6,
                                   err_msg=name)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.5, -0.5, 3.0],
                   np.float32)


def _special_cases():
    x = SPECIAL[:, None]
    y = SPECIAL[None, :]
    return x, y


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod", "copysign", "heaviside",
                                  "fmax", "fmin", "maximum", "minimum", "logaddexp", "hypot",
                                  "arctan2", "power", "divide"])
def test_special_values_binary(name):
    x, y = _special_cases()
    got = np.asarray(fluxion.jit(getattr(fnp, name))(x, y))
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x, y)
    # Infinities and NaNs must match exactly; XLA's arithmetic may differ by an ulp.
    np.testing.assert_allclose(got, want, rtol=3e-7)
    if name in ("floor_divide", "remainder", "copysign"):
        # NumPy's signed zeros: floor division and remainder follow Python's rules. A NaN's
        # sign means nothing (x86 makes -NaN, XLA:GPU +NaN), so NaNs are left out.
        numbers = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got)[numbers], np.signbit(want)[numbers])


def test_special_values_unary():
    names = ["floor", "ceil", "trunc", "rint", "round", "sign", "isnan", "isinf", "isfinite",
             "isposinf", "isneginf", "signbit", "nan_to_num", "sinc", "exp", "log", "sqrt",
             "square", "absolute", "reciprocal", "cbrt", "tanh"]
    outs = fluxion.jit(lambda x: {n: getattr(fnp, n)(x) for n in names})(SPECIAL)
    for n in names:
        with np.errstate(all="ignore"):
            want = getattr(np, n)(SPECIAL)
        np.testing.assert_allclose(np.asarray(outs[n]), want, rtol=1e-6, err_msg=n)
    np.testing.assert_array_equal(np.asarray(outs["signbit"]), np.signbit(SPECIAL))


def test_divmod_and_round_decimals():
    x = np.array([-7.5, -3.25, 0.0, 2.675, 5.5, 1234.5678], np.float32)
    q, r = fnp.divmod(x, np.float32(2.5))
    wq, wr = np.divmod(x, np.float32(2.5))
    np.testing.assert_array_equal(np.asarray(q), wq)
    np.testing.assert_allclose(np.asarray(r), wr, rtol=1e-6)
    qi, ri = fnp.divmod(np.array([-7, 7, -8], np.int32), np.array([2, -2, -3], np.int32))
    np.testing.assert_array_equal(np.asarray(qi), [-4, -4, 2])
    np.testing.assert_array_equal(np.asarray(ri), [1, -1, -2])
    for decimals in (-2, 1, 2):
        np.testing.assert_allclose(np.asarray(fnp.round(x, decimals)), np.round(x, decimals),
                                   rtol=1e-6)
    half = np.array([0.5, 1.5, 2.5, -0.5, -1.5], np.float32)
    np.testing.assert_array_equal(np.asarray(fnp.around(half)), [0, 2, 2, -0, -2])
    np.testing.assert_array_equal(np.asarray(fnp.round(np.array([15, 25], np.int32), 1)), [15, 25])


def test_integer_power_is_exact():
    base = np.array([3, -3, 7, 0, 1, -1, 2], np.int32)
    exponent = np.array([19, 19, 11, 0, 100, 101, 30], np.int32)
    np.testing.assert_array_equal(np.asarray(fnp.power(base, exponent)), base ** exponent)
    np.testing.assert_array_equal(np.asarray(fnp.power(base, 3)), base ** 3)
    x = np.float32(1.1)
    assert np.asarray(fnp.power(x, 2)) == x * x
    assert fnp.power(np.int8(3), np.int32(2)).dtype == np.int8
    with pytest.raises(TypeError):
        fnp.power(base, -1)


def test_where_clip_nan_to_num_isclose():
    x = np.array([[1.0, np.nan, -np.inf], [np.inf, -2.0, 0.5]], np.float32)
    np.testing.assert_array_equal(np.asarray(fnp.where(x > 0, x, -x)), np.where(x > 0, x, -x))
    np.testing.assert_array_equal(np.asarray(fnp.where(True, 1, x)), np.where(True, 1, x))
    np.testing.assert_array_equal(np.asarray(fnp.clip(x, -1, 1)), np.clip(x, -1, 1))
    np.testing.assert_array_equal(np.asarray(fnp.clip(x, max=0)), np.minimum(x, 0))
    np.testing.assert_array_equal(np.asarray(fnp.nan_to_num(x, nan=7.0, posinf=9.0)),
                                  np.nan_to_num(x, nan=7.0, posinf=9.0))
    y = x + np.float32(1e-6)
    np.testing.assert_array_equal(np.asarray(fnp.isclose(x, y, equal_nan=True)),
                                  np.isclose(x, y, equal_nan=True))
    assert bool(fnp.allclose(x, x, equal_nan=True)) and not bool(fnp.allclose(x, x))
    assert bool(fnp.array_equal(x, x, equal_nan=True)) and not bool(fnp.array_equal(x, x[0]))
    z = np.array([1 + 2j, 1 + 3j, 2 - 1j], np.complex64)
    np.testing.assert_array_equal(np.asarray(fnp.less(z, z[::-1])), [True, False, False])
    np.testing.assert_allclose(np.asarray(fnp.angle(z, deg=True)), np.angle(z, deg=True), rtol=1e-6)


def test_nonzero():
    x = np.array([[0, 3, 0], [4, 0, 5]], np.int32)
    for got, want in zip(fnp.nonzero(x), np.nonzero(x)):
        np.testing.assert_array_equal(np.asarray(got), want)
    rows, cols = fluxion.jit(lambda a: fnp.where(a, size=4, fill_value=-1))(x)
    np.testing.assert_array_equal(np.asarray(rows), [0, 1, 1, -1])
    np.testing.assert_array_equal(np.asarray(cols), [1, 0, 2, -1])
    with pytest.raises(fluxion.errors.ConcretizationTypeError):
        fluxion.jit(fnp.nonzero)(x)
    with pytest.raises(ValueError):
        fnp.nonzero(np.int32(1))


@pytest.mark.parametrize("call, error", [
    (lambda: fnp.add(np.ones(3), np.ones(4)), TypeError),
    (lambda: fnp.add([1, 2], 1), TypeError),
    (lambda: fnp.subtract(True, False), TypeError),
    (lambda: fnp.bitwise_and(1.5, 2), TypeError),
    (lambda: fnp.floor_divide(1 + 1j, 2), TypeError),
    (lambda: fnp.clip(np.ones(2, np.complex64), 0, 1), ValueError),
    (lambda: fnp.hypot(1j, 2), ValueError),
    (lambda: fnp.where(np.ones(3) > 0, np.ones(2), 1), ValueError),
    (lambda: fnp.where(np.ones(3) > 0, np.ones(3)), ValueError),
    (lambda: fnp.round(True), ValueError),
    (lambda: fnp.int32(2) + 2 ** 40, OverflowError),
])
def test_errors(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_complex_logaddexp_against_jax(name):
    """Complex log-add-exp: the larger operand plus log1p(exp(difference)), its phase
    wrapped into [-pi, pi] (in units of log 2 for logaddexp2); gradients as JAX's rule."""
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(8) * 3 + 1j * rng.standard_normal(8) * 4).astype(np.complex64)
    y = (rng.standard_normal(8) * 3 + 1j * rng.standard_normal(8) * 4).astype(np.complex64)
    x[0] = y[0]
    x[1] = y[1].real + 1j * (y[1].imag + 1)  # equal real parts: the imaginary part decides
    for args in ((x, y), (x, 2.0), (1.5, y)):
        got = getattr(fnp, name)(*args)
        want = getattr(jnp, name)(*args)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    if name == "logaddexp":
        np.testing.assert_allclose(np.exp(np.asarray(fnp.logaddexp(x, y))), np.exp(x) + np.exp(y),
                                   rtol=1e-4)
    g = fluxion.grad(lambda u: getattr(fnp, name)(u, y).real.sum())(x)
    w = jax.grad(lambda u: getattr(jnp, name)(u, y).real.sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("order, want", [(1, 0.0), (2, -np.pi ** 2 / 3), (3, 0.0),
                                         (4, np.pi ** 4 / 5)])
def test_sinc_derivatives_at_zero(order, want):
    # The 0/0 branch was a constant, so every derivative of sinc at 0 was 0.
    def nth(lib, np_, use_jvp):
        f = np_.sinc
        for i in range(order):
            if use_jvp and i % 2 == 0:
                f = (lambda g: lambda x: lib.jvp(g, (x,), (1.0,))[1])(f)
            else:
                f = lib.grad(f)
        return f
    for use_jvp in (False, True):
        got = nth(fluxion, fnp, use_jvp)
        np.testing.assert_allclose(got(0.0), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(fluxion.jit(got)(0.0), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(nth(jax, jnp, use_jvp)(0.0), want, rtol=1e-5, atol=1e-6)
    x = np.array([0.0, 0.5, -1.25], np.float32)
    np.testing.assert_allclose(fluxion.vmap(nth(fluxion, fnp, False))(x),
                               jax.vmap(nth(jax, jnp, False))(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("a1, a2", [([1, 2], [1, 2]), ([1, 2], [1, 2, 3]), ([1, 2], [1, 4]),
                                    ((1.0, np.nan), [1.0, np.nan])])
def test_array_equal_takes_lists(a1, a2):
    # Lists raised TypeError (JAX and NumPy take them).
    for equal_nan in (False, True):
        want = jnp.array_equal(a1, a2, equal_nan=equal_nan)
        got = fnp.array_equal(a1, a2, equal_nan=equal_nan)
        assert bool(got) == bool(want) == np.array_equal(a1, a2, equal_nan=equal_nan)
        assert got.dtype == want.dtype
