"""Result dtypes, weak types, shapes and error classes of fluxion.numpy against jax.numpy.

Everything here runs under eval_shape on both sides: tracing only, nothing compiles.
"""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

# JAX's traceback filtering makes each expected error slow; the classes are all we compare.
jax.config.update("jax_traceback_filtering", "off")
# JAX warns when a sum of complex values is asked for a real dtype.
pytestmark = pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")

DTYPES = ["bool", "int8", "uint8", "int16", "int32", "uint32", "float16", "bfloat16", "float32",
          "complex64"]


def _np_dtype(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _spec(name, shape=(2, 3), weak=False):
    return (jax.ShapeDtypeStruct(shape, _np_dtype(name), weak_type=weak),
            fluxion.ShapeDtypeStruct(shape, _np_dtype(name), weak_type=weak))


# Argument kinds: strongly typed arrays, Python scalars, and weakly typed rank-0 arrays.
INPUTS = {name: _spec(name) for name in DTYPES}
INPUTS.update({"py_bool": (True, True), "py_int": (3, 3), "py_float": (1.5, 1.5),
               "py_complex": (1j, 1j), "weak_f32": _spec("float32", (), True),
               "weak_i32": _spec("int32", (), True)})


def _summary(eval_shape, fn, *args):
    """(dtype, weak_type, shape) of fn's first output, or the class of the error it raised.

    Booleans' weak flag is ignored: it never affects promotion."""
    try:
        out = eval_shape(fn, *args)
    except (TypeError, ValueError, NotImplementedError, OverflowError) as e:
        if isinstance(e, np.exceptions.AxisError):
            return "ValueError"  # fluxion's axis errors are AxisError, a ValueError subclass
        return type(e).__name__
    if isinstance(out, (tuple, list)):
        out = out[0]
    weak = bool(out.weak_type) and out.dtype != np.bool_
    return np.dtype(out.dtype).name, weak, tuple(out.shape)


def _check(fn_of_module, *arg_pairs):
    expected = _summary(jax.eval_shape, fn_of_module(jnp), *(a for a, _ in arg_pairs))
    got = _summary(fluxion.eval_shape, fn_of_module(fnp), *(b for _, b in arg_pairs))
    assert got == expected


UNARY = ["negative", "positive", "absolute", "sign", "floor", "ceil", "round", "rint", "trunc",
         "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "square",
         "reciprocal", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
         "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "degrees", "radians", "isnan",
         "isinf", "isfinite", "isposinf", "isneginf", "signbit", "real", "imag", "conj",
         "conjugate", "angle", "logical_not", "invert", "bitwise_not", "nan_to_num", "sinc"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_result_types(name):
    for arg in INPUTS.values():
        _check(lambda m: getattr(m, name), arg)


BINARY = ["add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "remainder",
          "mod", "fmod", "power", "float_power", "arctan2", "hypot", "logaddexp", "logaddexp2",
          "maximum", "minimum", "fmax", "fmin", "copysign", "heaviside", "logical_and",
          "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
          "right_shift", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
          "isclose", "divmod"]
# Complex inputs that fluxion's lax does not support yet (JAX accepts them).
COMPLEX_GAPS = {"arctan2", "logaddexp", "logaddexp2"}
PAIR_KINDS = ["bool", "int8", "uint8", "bfloat16", "float32", "complex64", "py_int", "py_float",
              "weak_f32"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_result_types(name):
    for k1 in PAIR_KINDS:
        for k2 in PAIR_KINDS:
            if name in COMPLEX_GAPS and "complex" in k1 + k2:
                continue
            _check(lambda m: getattr(m, name), INPUTS[k1], INPUTS[k2])


def test_binary_broadcasting_and_shape_errors():
    a, b, c = _spec("float32", (3, 1)), _spec("float32", (4,)), _spec("float32", (5,))
    _check(lambda m: m.add, a, b)
    _check(lambda m: m.add, b, c)          # TypeError, as lax's
    _check(lambda m: m.remainder, a, b)
    _check(lambda m: lambda x, y: m.where(x > 0, x, y), a, b)
    _check(lambda m: lambda x, y: m.where(x > 0, x, y), b, c)  # ValueError


@pytest.mark.parametrize("case", [
    lambda m, x: m.clip(x, 0, 2.5), lambda m, x: m.clip(x, max=3),
    lambda m, x: m.where(x, 1, 2.0), lambda m, x: m.where(x, x, 0),
    lambda m, x: m.round(x, 2), lambda m, x: m.angle(x, deg=True),
    lambda m, x: m.power(x, 2), lambda m, x: m.power(x, 2.5), lambda m, x: m.power(2, x),
    lambda m, x: m.allclose(x, x), lambda m, x: m.array_equal(x, x),
    lambda m, x: m.isclose(x, 1, equal_nan=True), lambda m, x: m.nan_to_num(x, nan=1.0),
], ids=lambda c: None)
def test_misc_elementwise_result_types(case):
    for kind in ["bool", "int8", "uint8", "int32", "float16", "float32", "py_int", "py_float",
                 "weak_f32"]:
        _check(lambda m: lambda x: case(m, x), INPUTS[kind])


REDUCTIONS = [
    lambda m, x: m.sum(x), lambda m, x: m.sum(x, axis=0, keepdims=True),
    lambda m, x: m.sum(x, dtype="float32"), lambda m, x: m.sum(x, promote_integers=False),
    lambda m, x: m.sum(x, axis=(0, 1), initial=2), lambda m, x: m.prod(x, axis=-1),
    lambda m, x: m.max(x, axis=1), lambda m, x: m.min(x, keepdims=True),
    lambda m, x: m.amax(x), lambda m, x: m.all(x, axis=0), lambda m, x: m.any(x),
    lambda m, x: m.mean(x), lambda m, x: m.mean(x, axis=0, dtype="float32"),
    lambda m, x: m.var(x, axis=1, ddof=1), lambda m, x: m.std(x, keepdims=True),
    lambda m, x: m.cumsum(x), lambda m, x: m.cumsum(x, axis=1, dtype="int32"),
    lambda m, x: m.cumprod(x, axis=0), lambda m, x: m.ptp(x, axis=0),
    lambda m, x: m.count_nonzero(x, axis=1), lambda m, x: m.nansum(x),
    lambda m, x: m.nanmean(x, axis=0), lambda m, x: m.nanmax(x), lambda m, x: m.nanmin(x, 1),
    lambda m, x: m.average(x, axis=1), lambda m, x: m.trace(x),
    lambda m, x: m.sum(x, where=x > 0), lambda m, x: m.max(x, where=x > 0, initial=0),
]


@pytest.mark.parametrize("case", REDUCTIONS, ids=lambda c: None)
def test_reduction_result_types(case):
    for kind in ["bool", "int8", "uint8", "int16", "uint32", "float16", "bfloat16", "float32",
                 "complex64"]:
        _check(lambda m: lambda x: case(m, x), INPUTS[kind])
    _check(lambda m: lambda x: case(m, x), _spec("float32", (2, 3), True))


@pytest.mark.parametrize("case", [lambda m, x: m.argmax(x),
                                  lambda m, x: m.argmin(x, axis=1, keepdims=True)],
                         ids=lambda c: None)
def test_arg_reduction_result_types(case):
    # fluxion's lax.argmax does not take complex operands yet.
    for kind in ["bool", "int8", "uint8", "float16", "bfloat16", "float32"]:
        _check(lambda m: lambda x: case(m, x), INPUTS[kind])


@pytest.mark.parametrize("case", [lambda m, x: m.sum(x), lambda m, x: m.mean(x),
                                  lambda m, x: m.max(x), lambda m, x: m.var(x),
                                  lambda m, x: m.cumsum(x), lambda m, x: m.argmax(x)],
                         ids=lambda c: None)
def test_reduction_of_scalars_result_types(case):
    for kind in ["py_bool", "py_int", "py_float", "weak_f32", "weak_i32"]:
        _check(lambda m: lambda x: case(m, x), INPUTS[kind])


@pytest.mark.parametrize("case", [
    lambda m: m.array(1), lambda m: m.array(1.5), lambda m: m.array([1, 2]),
    lambda m: m.array([1, 2.5]), lambda m: m.array([True, 2]), lambda m: m.array([]),
    lambda m: m.array([[1, 2], [3, 4]], dtype="int8", ndmin=3),
    lambda m: m.asarray(np.float64(2)), lambda m: m.asarray(np.arange(3)),
    lambda m: m.array([1.0, np.float16(2)]), lambda m: m.array(1.0, dtype="float32"),
    lambda m: m.zeros(3), lambda m: m.zeros((2, 0), "int8"), lambda m: m.ones((), bool),
    lambda m: m.empty(2, "float16"), lambda m: m.full(3, 1), lambda m: m.full((2,), 1.5),
    lambda m: m.full((2,), np.int8(1)), lambda m: m.full((2, 2), [1, 2]),
    lambda m: m.zeros_like(3), lambda m: m.ones_like(np.ones(2, "uint8")),
    lambda m: m.full_like(np.ones(2), 3, shape=(4,)), lambda m: m.arange(5),
    lambda m: m.arange(5.0), lambda m: m.arange(1, 7, 2), lambda m: m.arange(0, 1, 0.25),
    lambda m: m.arange(np.int8(4)), lambda m: m.arange(3, dtype="float16"),
    lambda m: m.arange(-3), lambda m: m.linspace(0, 1, 5), lambda m: m.linspace(0, 10, 4, dtype=int),
    lambda m: m.linspace(np.zeros(2), 1, 3, axis=-1), lambda m: m.linspace(0, 1, 0),
    lambda m: m.logspace(0, 2, 3), lambda m: m.eye(3), lambda m: m.eye(2, 3, 1, dtype=int),
    lambda m: m.identity(2, bool), lambda m: m.tri(3, 2), lambda m: m.float32(3),
    lambda m: m.int8(300), lambda m: m.bool_(2), lambda m: m.zeros(-1),
    lambda m: m.zeros(2.5), lambda m: m.linspace(0, 1, -1), lambda m: m.eye(-1),
], ids=lambda c: None)
def test_creation_result_types(case):
    _check(lambda m: lambda: case(m))


@pytest.mark.parametrize("case", [
    lambda m, x: m.reshape(x, (3, -1)), lambda m, x: m.reshape(x, 6, order="F"),
    lambda m, x: m.reshape(x, (4, -1)), lambda m, x: m.reshape(x, (5,)),
    lambda m, x: m.ravel(x), lambda m, x: m.transpose(x), lambda m, x: m.swapaxes(x, 0, 1),
    lambda m, x: m.moveaxis(x, 0, -1), lambda m, x: m.moveaxis(x, (0, 1), (0,)),
    lambda m, x: m.expand_dims(x, (0, 3)), lambda m, x: m.expand_dims(x, 4),
    lambda m, x: m.squeeze(m.expand_dims(x, 1)), lambda m, x: m.squeeze(x, 0),
    lambda m, x: m.concatenate([x, x], axis=1), lambda m, x: m.concatenate([x, 1.0 * x]),
    lambda m, x: m.concatenate([x, x], axis=None), lambda m, x: m.concatenate([x, x[0]]),
    lambda m, x: m.stack([x, x], -1), lambda m, x: m.stack([x, x[0]]),
    lambda m, x: m.vstack([x, x]), lambda m, x: m.hstack([x, x]), lambda m, x: m.dstack([x, x]),
    lambda m, x: m.column_stack([x, x]), lambda m, x: m.split(x, 3, axis=1)[0],
    lambda m, x: m.split(x, 2, axis=1), lambda m, x: m.array_split(x, 2, axis=1)[1],
    lambda m, x: m.tile(x, 2), lambda m, x: m.tile(x, (2, 1, 1)), lambda m, x: m.repeat(x, 2),
    lambda m, x: m.repeat(x, 3, axis=1), lambda m, x: m.flip(x), lambda m, x: m.fliplr(x),
    lambda m, x: m.roll(x, 1), lambda m, x: m.roll(x, (1, 2), (0, 1)),
    lambda m, x: m.broadcast_to(x, (4, 2, 3)), lambda m, x: m.broadcast_to(x, (3,)),
    lambda m, x: m.atleast_3d(x), lambda m, x: m.pad(x, 1), lambda m, x: m.pad(x, ((1, 2), (0, 1)), mode="edge"),
    lambda m, x: m.pad(x, -1), lambda m, x: m.sort(x), lambda m, x: m.argsort(x, axis=0),
    lambda m, x: m.outer(x, x), lambda m, x: m.kron(x, x), lambda m, x: m.tril(x),
    lambda m, x: m.triu(x, -1), lambda m, x: m.diagonal(x), lambda m, x: m.diag(x, 1),
    lambda m, x: m.dot(x, x.T), lambda m, x: m.dot(x, x), lambda m, x: m.vdot(x, x),
    lambda m, x: m.matmul(x, x.T), lambda m, x: m.matmul(x, x), lambda m, x: x @ x[0],
    lambda m, x: m.inner(x, x), lambda m, x: m.tensordot(x, x, ((0, 1), (0, 1))),
    lambda m, x: m.tensordot(x, x, [[0], [0, 1]]), lambda m, x: m.einsum("ij,kj->ik", x, x),
    lambda m, x: m.einsum("ij,ij", x, x), lambda m, x: m.einsum("ij,jk", x, x),
], ids=lambda c: None)
def test_shape_function_result_types(case):
    for kind in ["bool", "int8", "uint8", "float16", "float32", "complex64", "weak_f32"]:
        x_jax, x_flux = INPUTS[kind] if kind != "weak_f32" else _spec("float32", (2, 3), True)
        _check(lambda m: lambda x: case(m, x), (x_jax, x_flux))


def test_dtype_helpers_match_jax():
    names = ["bool_", "int8", "uint8", "int32", "uint32", "bfloat16", "float16", "float32",
             "complex64", "int_", "float_", "complex_", "uint"]
    for name in names:
        assert np.dtype(getattr(fnp, name)) == np.dtype(getattr(jnp, name)), name
        assert fnp.dtype(getattr(fnp, name)) == jnp.dtype(getattr(jnp, name))
    for a in ["int8", "uint8", "bfloat16", "float16", "float32", "complex64", int, float]:
        for b in ["bool", "int16", "uint32", "bfloat16", "float32", complex]:
            a_f = getattr(fnp, a) if isinstance(a, str) else a
            b_f = getattr(fnp, b if b != "bool" else "bool_") if isinstance(b, str) else b
            a_j = getattr(jnp, a) if isinstance(a, str) else a
            b_j = getattr(jnp, b if b != "bool" else "bool_") if isinstance(b, str) else b
            assert fnp.promote_types(a_f, b_f) == jnp.promote_types(a_j, b_j)
            assert fnp.result_type(a_f, b_f) == jnp.result_type(a_j, b_j)
            assert fnp.can_cast(a_f, b_f) == jnp.can_cast(a_j, b_j)
    for dt in ["bfloat16", "float16", "float32", "int8", "uint32", "complex64"]:
        for category in ["floating", "integer", "inexact", "number", "signedinteger",
                         "complexfloating", "bfloat16", "float16"]:
            assert fnp.issubdtype(getattr(fnp, dt), getattr(fnp, category)) == \
                jnp.issubdtype(getattr(jnp, dt), getattr(jnp, category)), (dt, category)
        for kind in ["bool", "signed integer", "unsigned integer", "integral", "real floating",
                     "complex floating", "numeric", ("bool", "real floating")]:
            assert fnp.isdtype(getattr(fnp, dt), kind) == jnp.isdtype(getattr(jnp, dt), kind)
    assert fnp.finfo(fnp.bfloat16).eps == jnp.finfo(jnp.bfloat16).eps
    assert fnp.iinfo(fnp.int8).min == -128
    assert fnp.float32 == np.float32 and hash(fnp.float32) == hash(np.float32)
    assert isinstance(np.float32(1), fnp.float32)
    assert (fnp.pi, fnp.e, fnp.newaxis) == (np.pi, np.e, None)
    assert np.isinf(fnp.inf) and np.isnan(fnp.nan)
    with pytest.raises(ValueError):
        fnp.isdtype(fnp.int8, "no such kind")


def test_explicit_64_bit_dtypes_warn_without_x64_as_jax():
    """An explicit 64-bit dtype with x64 disabled warns (JAX's UserWarning, pointing at the
    caller's line) and is narrowed; Python types and x64 never warn."""
    import warnings

    from fluxion import lax as flax

    def caught(call):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            call()
        return [w for w in seen if "Explicitly requested dtype" in str(w.message)]

    for make in (lambda m, lax: m.zeros(2, np.float64), lambda m, lax: m.arange(3, dtype="int64"),
                 lambda m, lax: m.ones((2, 2)).astype(np.float64),
                 lambda m, lax: m.ones((2, 2)).sum(dtype=np.float64),
                 lambda m, lax: m.asarray([1.0], np.float64),
                 lambda m, lax: lax.convert_element_type(m.ones(2), np.float64)):
        ours, theirs = caught(lambda: make(fnp, flax)), caught(lambda: make(jnp, jax.lax))
        assert len(ours) == 1 and theirs  # (JAX warns twice for some)
        assert ours[0].category is UserWarning and ours[0].filename == __file__
        assert "truncated to dtype" in str(ours[0].message)
    named = [str(caught(call)[0].message) for call in (lambda: fnp.zeros(2, np.float64),
                                                        lambda: fnp.ones(2).sum(dtype="int64"))]
    assert "requested in zeros" in named[0] and "requested in sum" in named[1]
    assert not caught(lambda: fnp.zeros(2, float))
    with fluxion.enable_x64(True):
        assert not caught(lambda: fnp.zeros(2, np.float64))
