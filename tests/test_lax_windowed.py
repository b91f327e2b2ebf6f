"""lax.reduce, lax.reduce_window (generic and monoid) and the cumulative reductions, against
NumPy and jax.lax."""
import ml_dtypes
import numpy as np
import pytest

import fluxion
from fluxion import lax
from jax import lax as jlax

BF16 = np.dtype(ml_dtypes.bfloat16)


def _random(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -9, 10, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _primitive_names(f, *args):
    return [e.primitive.name for e in fluxion.make_jaxpr(f)(*args).eqns]


def _assert_matches(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype.kind in "iub":
        np.testing.assert_array_equal(actual, expected)
    else:
        tol = 1e-2 if actual.dtype in (BF16, np.float16) else 1e-5
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------------
# reduce_window

WINDOWS = [  # (shape, window_dimensions, strides, padding, base_dilation, window_dilation)
    ((7,), (3,), (1,), "VALID", None, None),
    ((7,), (2,), (2,), "SAME", None, None),
    ((4, 6), (2, 3), (1, 2), "SAME_LOWER", None, None),
    ((4, 6), (2, 2), (2, 1), [(1, 0), (2, 1)], (2, 1), (1, 2)),
    ((3, 2, 5), (1, 2, 2), (1, 1, 3), [(0, 0), (0, 1), (-1, 2)], None, (1, 1, 2)),
]
MONOIDS = [("add", lax.add, jlax.add, 0, "reduce_window_sum"),
           ("max", lax.max, jlax.max, -np.inf, "reduce_window_max"),
           ("min", lax.min, jlax.min, np.inf, "reduce_window_min")]


@pytest.mark.parametrize("window", WINDOWS, ids=["1d", "1d-same", "2d-same-lower",
                                                 "2d-dilated", "3d-negative-pad"])
@pytest.mark.parametrize("kind,op,jax_op,init,prim_name", MONOIDS, ids=[m[0] for m in MONOIDS])
def test_monoid_reduce_window_matches_jax(rng, window, kind, op, jax_op, init, prim_name):
    shape, dims, strides, padding, base, win = window
    x = _random(rng, shape, np.float32)
    f = lambda a: lax.reduce_window(a, init, op, dims, strides, padding, base, win)
    expected = jlax.reduce_window(x, init, jax_op, dims, strides, padding, base, win)
    _assert_matches(f(x), expected)
    assert _primitive_names(f, x) == [prim_name]


def _identity(kind, dtype):
    dtype = np.dtype(dtype)
    if kind == "add":
        return np.zeros((), dtype)
    if dtype == np.bool_:
        return np.array(kind == "min")
    if dtype.kind in "iu":
        return np.array(np.iinfo(dtype).min if kind == "max" else np.iinfo(dtype).max, dtype)
    return np.array(-np.inf if kind == "max" else np.inf, dtype)


@pytest.mark.parametrize("dtype,kind", [(np.int32, "add"), (np.uint8, "max"), (BF16, "add"),
                                        (np.bool_, "max"), (np.int8, "min"), (np.float16, "max")])
def test_monoid_reduce_window_dtypes(rng, dtype, kind):
    x = _random(rng, (3, 6), dtype)
    op, jax_op = {"add": (lax.add, jlax.add), "max": (lax.max, jlax.max),
                  "min": (lax.min, jlax.min)}[kind]
    init = _identity(kind, dtype)
    _assert_matches(lax.reduce_window(x, init, op, (2, 2), (1, 2), "SAME"),
                    jlax.reduce_window(x, init, jax_op, (2, 2), (1, 2), "SAME"))


@pytest.mark.parametrize("window", WINDOWS[:4], ids=["1d", "1d-same", "2d-same-lower",
                                                     "2d-dilated"])
def test_generic_reduce_window_matches_jax(rng, window):
    shape, dims, strides, padding, base, win = window
    x = _random(rng, shape, np.float32)
    init = np.float32(1)
    f = lambda a: lax.reduce_window(a, init, lax.mul, dims, strides, padding, base, win)
    _assert_matches(f(x), jlax.reduce_window(x, init, jlax.mul, dims, strides, padding, base,
                                             win))
    assert _primitive_names(f, x) == ["reduce_window"]
    np.testing.assert_array_equal(np.asarray(fluxion.jit(f)(x)), np.asarray(f(x)))


def test_reduce_window_with_a_pytree_operand(rng):
    """A windowed argmax: (value, index) pairs reduced by a Python computation."""
    x = _random(rng, (9,), np.float32)
    index = np.arange(9, dtype=np.int32)

    def windowed_argmax(lax_module):
        def computation(a, b):
            take_a = lax_module.ge(a[0], b[0])
            return lax_module.select(take_a, a[0], b[0]), lax_module.select(take_a, a[1], b[1])
        return lax_module.reduce_window((x, index), (np.float32(-np.inf), np.int32(-1)),
                                        computation, (3,), (2,), "VALID")
    values, indices = windowed_argmax(lax)
    expected_values, expected_indices = windowed_argmax(jlax)
    _assert_matches(values, expected_values)
    _assert_matches(indices, expected_indices)


def test_reduce_window_traced_computation_is_reused(rng):
    x = _random(rng, (5,), np.float32)
    add = lambda a, b: a + b
    f = lambda a: lax.reduce_window(a, np.float32(0), add, (2,), (1,), "VALID")
    first, second = fluxion.make_jaxpr(f)(x), fluxion.make_jaxpr(f)(x)
    assert first.eqns[0].params["jaxpr"] is second.eqns[0].params["jaxpr"]


def test_reduce_window_scalar_and_empty_operands():
    _assert_matches(lax.reduce_window(np.float32(3), 0.0, lax.add, (), (), "VALID"),
                    jlax.reduce_window(np.float32(3), 0.0, jlax.add, (), (), "VALID"))
    empty = np.zeros((0, 4), np.float32)
    _assert_matches(lax.reduce_window(empty, -np.inf, lax.max, (1, 2), (1, 1), "SAME"),
                    jlax.reduce_window(empty, -np.inf, jlax.max, (1, 2), (1, 1), "SAME"))
    _assert_matches(lax.reduce_window(np.ones(3, np.float32), 0.0, lax.add, (5,), (1,), "VALID"),
                    np.zeros((0,), np.float32))


def test_reduce_window_shape_tuple_matches_jax():
    args = ((4, 6), (2, 3), (1, 2), ((1, 0), (2, 1)), (2, 1), (1, 2))
    assert lax.reduce_window_shape_tuple(*args) == tuple(jlax.reduce_window_shape_tuple(*args))


REDUCE_WINDOW_ERRORS = [
    ("init dtype", dict(init=0, computation=lambda a, b: a + b), TypeError, "inconsistent dtypes"),
    ("window rank", dict(dims=(2, 2)), TypeError, "wrong number of window_dimensions"),
    ("zero window", dict(dims=(0,)), TypeError, "strictly positive"),
    ("bool sum", dict(x=np.ones(4, bool), init=False), TypeError, "must have a number dtype"),
    ("tree mismatch", dict(init=(np.float32(0), np.float32(0))), ValueError, "tree structure"),
    ("padding string", dict(padding="FULL"), RuntimeError, "Unrecognized padding type"),
]


@pytest.mark.parametrize("what,changes,error,message", REDUCE_WINDOW_ERRORS,
                         ids=[c[0] for c in REDUCE_WINDOW_ERRORS])
def test_reduce_window_errors_match_jax(what, changes, error, message):
    args = dict(x=np.ones(4, np.float32), init=np.float32(0), computation=None, dims=(2,),
                padding="VALID")
    args.update(changes)
    for module in (jlax, lax):
        with pytest.raises(error, match=message if module is lax else None):
            module.reduce_window(args["x"], args["init"], args["computation"] or module.add,
                                 args["dims"], (1,) * len(args["dims"]), args["padding"])


# ---------------------------------------------------------------------------------------------
# reduce

def test_monoid_reduce_binds_the_reduction_primitive(rng):
    x = _random(rng, (3, 4), np.float32)
    for op, init, name in [(lax.add, 0.0, "reduce_sum"), (lax.max, -np.inf, "reduce_max"),
                           (lax.mul, 1, "reduce_prod")]:
        f = lambda a: lax.reduce(a, init, op, (1,))
        assert _primitive_names(f, x) == [name]
    b = _random(rng, (3, 4), np.bool_)
    or_reduce = lambda a: lax.reduce(a, False, lax.bitwise_or, (0,))
    assert _primitive_names(or_reduce, b) == ["reduce_or"]
    _assert_matches(lax.reduce(x, 0.0, lax.add, (0, 1)), np.float32(x.astype(np.float64).sum()))
    ours = fluxion.eval_shape(lambda: lax.reduce(x, 0.0, lax.add, (1,)))
    assert ours.dtype == np.float32 and not ours.weak_type


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8])
def test_generic_reduce_matches_numpy(rng, dtype):
    x = _random(rng, (3, 4, 5), dtype)
    # XLA may combine partial results in any tree (XLA:GPU does), so the body must be
    # associative and commutative: max + min is u + v, in a body no monoid matcher knows.
    body = lambda u, v: lax.add(lax.max(u, v), lax.min(u, v))  # noqa: E731
    f = lambda a: lax.reduce(a, np.array(0, dtype), body, (0, 2))  # noqa: E731
    expected = x.astype(np.int64 if np.dtype(dtype).kind == "i" else np.float64).sum((0, 2))
    _assert_matches(f(x), expected.astype(dtype))
    assert _primitive_names(f, x) == ["reduce"]
    np.testing.assert_array_equal(np.asarray(fluxion.jit(f)(x)), np.asarray(f(x)))


def test_reduce_with_pytree_operands_and_constants(rng):
    x = _random(rng, (4, 6), np.float32)
    index = np.broadcast_to(np.arange(6, dtype=np.int32), (4, 6))
    scale = np.float32(2.0)

    def keep_max(a, b):  # a closed-over NumPy constant is fine
        take_a = lax.ge(lax.mul(a["v"], scale), lax.mul(b["v"], scale))
        return {"v": lax.max(a["v"], b["v"]),
                "i": lax.add(lax.mul(lax.convert_element_type(take_a, np.int32), a["i"]),
                             lax.mul(lax.convert_element_type(lax.lt(a["v"], b["v"]), np.int32),
                                     b["i"]))}
    out = lax.reduce({"v": x, "i": index}, {"v": np.float32(-np.inf), "i": np.int32(0)},
                     keep_max, (1,))
    _assert_matches(out["v"], x.max(1))
    _assert_matches(out["i"], x.argmax(1).astype(np.int32))


def test_reduce_computation_closing_over_a_tracer_is_rejected(rng):
    x = _random(rng, (3,), np.float32)

    def f(a, s):
        return lax.reduce(a, np.float32(0), lambda u, v: lax.add(u, lax.mul(v, s)), (0,))
    np.testing.assert_allclose(np.asarray(f(x, np.float32(2))), 2 * x.sum(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="closes over a traced value"):
        fluxion.jit(f)(x, np.float32(2))


REDUCE_ERRORS = [
    ("init dtype", dict(init=0), TypeError, "should match corresponding initial value dtypes"),
    ("init shape", dict(init=np.zeros(2, np.float32)), ValueError, "non-scalar initial value"),
    ("tree mismatch", dict(init=(np.float32(0), np.float32(0))), ValueError, "tree structure"),
]


@pytest.mark.parametrize("what,changes,error,message", REDUCE_ERRORS,
                         ids=[c[0] for c in REDUCE_ERRORS])
def test_reduce_errors_match_jax(what, changes, error, message):
    args = dict(init=np.float32(0))
    args.update(changes)
    x = np.ones((2, 3), np.float32)
    for module in (jlax, lax):
        with pytest.raises(error, match=message if module is lax else None):
            module.reduce(x, args["init"], lambda a, b: a + b, (1,))


def test_reduce_bad_computation_and_dimensions():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="output must have the same tree structure as the operands"):
        lax.reduce(x, np.float32(0), lambda a, b: (a, b), (1,))
    with pytest.raises(ValueError, match="must return scalars of its operands' types"):
        lax.reduce(x, np.float32(0), lambda a, b: lax.convert_element_type(a, np.int32), (1,))
    with pytest.raises(ValueError, match="reduce dimensions must be distinct and in range"):
        lax.reduce(x, np.float32(0), lambda a, b: lax.add(a, b), (2,))


# ---------------------------------------------------------------------------------------------
# Cumulative reductions

def _numpy_cumulative(name, x, axis, reverse):
    x = np.flip(x, axis) if reverse else x
    accumulate = {"cumsum": np.add.accumulate, "cumprod": np.multiply.accumulate,
                  "cummax": np.maximum.accumulate,
                  "cummin": np.minimum.accumulate, "cumlogsumexp": np.logaddexp.accumulate}[name]
    out = accumulate(x, axis=axis, dtype=x.dtype)
    return np.flip(out, axis) if reverse else out


CUMULATIVE = ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"]


@pytest.mark.parametrize("name", CUMULATIVE)
@pytest.mark.parametrize("axis,reverse", [(0, False), (1, True), (2, False)])
def test_cumulative_matches_numpy(rng, name, axis, reverse):
    x = rng.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    out = getattr(lax, name)(x, axis=axis, reverse=reverse)
    _assert_matches(out, _numpy_cumulative(name, x.astype(np.float64), axis, reverse)
                    .astype(np.float32))


@pytest.mark.parametrize("name,dtype", [("cumsum", np.int32), ("cumprod", np.int32),
                                        ("cumsum", np.int8), ("cummax", np.uint8),
                                        ("cummin", np.int16), ("cumsum", BF16)])
def test_cumulative_integer_results_are_exact(rng, name, dtype):
    if np.dtype(dtype).kind in "iu":  # large enough to wrap around, as NumPy does
        x = rng.integers(0 if np.dtype(dtype).kind == "u" else -100, 100, (2, 40)).astype(dtype)
    else:
        x = rng.integers(-3, 4, (2, 40)).astype(dtype)  # small integers are exact in bf16
    out = getattr(lax, name)(x, axis=1, reverse=True)
    expected = _numpy_cumulative(name, x.astype(np.float32) if dtype == BF16 else x, 1, True)
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64),
                                  np.asarray(expected).astype(dtype).astype(np.float64))
    assert out.dtype == np.dtype(dtype)


def test_cumulative_nan_and_infinities_match_jax():
    x = np.array([1.0, np.nan, 2.0, -np.inf, np.inf, 0.5], np.float32)
    for name in CUMULATIVE:
        _assert_matches(getattr(lax, name)(x), getattr(jlax, name)(x))
    y = np.array([-np.inf, -np.inf, np.inf, np.inf], np.float32)
    _assert_matches(lax.cumlogsumexp(y), jlax.cumlogsumexp(y))


@pytest.mark.parametrize("name", CUMULATIVE)
def test_cumulative_jit_matches_eager_and_jaxpr(rng, name):
    x = _random(rng, (4, 7), np.float32)
    f = lambda a: getattr(lax, name)(a, axis=1, reverse=True)
    np.testing.assert_array_equal(np.asarray(fluxion.jit(f)(x)), np.asarray(f(x)))
    eqn, = fluxion.make_jaxpr(f)(x).eqns
    assert (eqn.primitive.name, eqn.params) == (name, {"axis": 1, "reverse": True})


def test_cumulative_empty_and_size_one():
    _assert_matches(lax.cumsum(np.zeros((0, 3), np.float32), axis=0), np.zeros((0, 3), np.float32))
    _assert_matches(lax.cumprod(np.full((3, 1), 2, np.int32), axis=1), np.full((3, 1), 2, np.int32))


@pytest.mark.parametrize("name,x,axis,error,message", [
    ("cumsum", np.ones(3, bool), 0, TypeError, "cumsum does not accept dtype bool"),
    ("cummax", np.ones(3, np.float32), -1, ValueError, "negative axes"),
    ("cumprod", np.ones(3, np.float32), 1, ValueError, "out of bounds"),
    ("cumsum", np.float32(1), 0, ValueError, "out of bounds"),
])
def test_cumulative_errors_match_jax(name, x, axis, error, message):
    with pytest.raises(error):
        getattr(jlax, name)(x, axis=axis)
    with pytest.raises(error, match=message):
        getattr(lax, name)(x, axis=axis)


def test_cumlogsumexp_needs_floats():
    with pytest.raises(TypeError, match="cumlogsumexp does not accept dtype int32"):
        lax.cumlogsumexp(np.ones(3, np.int32))
