"""jnp.ufunc, frompyfunc and the built-in ufuncs' methods against jax.numpy and NumPy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion.test_util import check_grads

from fluxion._src.numpy import ufuncs
from _jnp_oracle import assert_matches, check_fn, check_fn_error

BUILTIN = [n for n in dir(jnp) if isinstance(getattr(jnp, n), jnp.ufunc)]
BINARY = [n for n in BUILTIN if getattr(jnp, n).nin == 2]
rng = np.random.default_rng(0)
INTS = rng.integers(-4, 5, (3, 4)).astype(np.int32)
FLOATS = rng.standard_normal((3, 4)).astype(np.float32)
BOOLS = rng.random((3, 4)) > 0.5


def _operand(name):
    if name.startswith("bitwise"):
        return INTS
    if name.startswith("logical"):
        return BOOLS
    return FLOATS


def test_builtin_ufuncs_are_ufuncs():
    assert len(BUILTIN) >= 14
    for name in BUILTIN:
        f, j = getattr(fnp, name), getattr(jnp, name)
        assert isinstance(f, fnp.ufunc), name
        assert (f.nin, f.nout, f.nargs, f.__name__) == (j.nin, j.nout, j.nargs, j.__name__)
        assert f.identity == j.identity, name
        assert f is getattr(ufuncs, name)  # the plain function: calls cost nothing extra
    assert fnp.add == fnp.add and hash(fnp.add) == hash(fnp.add) and fnp.add != fnp.multiply
    assert not isinstance(fnp.sin, fnp.ufunc) and not isinstance(len, fnp.ufunc)
    u = fnp.frompyfunc(lambda a, b: a + b, 2, 1)
    assert isinstance(u, fnp.ufunc) and repr(u) == "<jnp.ufunc '<lambda>'>"
    assert u == fnp.ufunc(u._func, 2, 1) and hash(u) == hash(fnp.ufunc(u._func, 2, 1))


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce(name, axis, keepdims):
    x = _operand(name)
    check_fn(lambda m, a: getattr(m, name).reduce(a, axis=axis, keepdims=keepdims), x,
             rtol=1e-5)


@pytest.mark.parametrize("name", BINARY)
def test_reduce_initial_where_dtype(name):
    x = _operand(name)
    mask = rng.random(x.shape) > 0.3
    initial = {np.dtype(np.int32): 3, np.dtype(bool): True}.get(x.dtype, 0.5)
    check_fn(lambda m, a: getattr(m, name).reduce(a, axis=1, initial=initial), x, rtol=1e-5)
    check_fn(lambda m, a, w: getattr(m, name).reduce(a, axis=0, initial=initial, where=w),
             x, mask, rtol=1e-5)
    if getattr(jnp, name).identity is None:
        check_fn_error(lambda m: getattr(m, name).reduce(x, where=mask))
    check_fn_error(lambda m: getattr(m, name).reduce(x, where=mask.astype(int), initial=initial))
    check_fn(lambda m, a: getattr(m, name).reduce(a[:, :0], axis=1), x, rtol=1e-5) \
        if getattr(jnp, name).identity is not None else \
        check_fn_error(lambda m: getattr(m, name).reduce(x[:0], axis=0))


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum", "subtract",
                                  "logaddexp", "bitwise_or", "logical_and"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_accumulate(name, axis):
    x = _operand(name)
    check_fn(lambda m, a: getattr(m, name).accumulate(a, axis=axis), x, rtol=1e-5)
    check_fn(lambda m, a: getattr(m, name).accumulate(a[:0], axis=axis), x)


def test_accumulate_values_vs_numpy():
    for name in ("add", "multiply", "maximum", "minimum", "subtract"):
        np.testing.assert_allclose(getattr(fnp, name).accumulate(FLOATS, axis=1),
                                   getattr(np, name).accumulate(FLOATS, axis=1), rtol=1e-5)
        np.testing.assert_allclose(getattr(fnp, name).reduce(FLOATS, axis=0),
                                   getattr(np, name).reduce(FLOATS, axis=0), rtol=1e-5)
    check_fn(lambda m, a: m.add.accumulate(a, dtype=np.float32), INTS)
    check_fn(lambda m, a: m.add.accumulate(a, axis=None), FLOATS, rtol=1e-5)
    check_fn_error(lambda m: m.subtract.accumulate(FLOATS, axis=None))


@pytest.mark.parametrize("name", BINARY)
def test_outer(name):
    x = _operand(name)
    check_fn(lambda m, a, b: getattr(m, name).outer(a, b), x[0], x[1:, :2], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(getattr(fnp, name).outer(x[0], x[1]), np.float64),
                               getattr(np, name).outer(x[0], x[1]).astype(np.float64),
                               rtol=1e-5)


@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "maximum", "bitwise_or",
                                  "logical_and"])
def test_at(name):
    x = _operand(name)
    idx = np.array([0, 2, 0, 1])
    check_fn(lambda m, a, b: getattr(m, name).at(a, idx, b, inplace=False), x[0], x[1], rtol=1e-5)
    check_fn(lambda m, a, b: getattr(m, name).at(a, (idx, 1), b[:4], inplace=False), x, x[2],
             rtol=1e-5)
    check_fn(lambda m, a: getattr(m, name).at(a, 1, x[0, 0], inplace=False), x[0], rtol=1e-5)
    expected = x[0].copy()
    getattr(np, name).at(expected, idx, x[1])
    np.testing.assert_allclose(np.asarray(getattr(fnp, name).at(x[0], idx, x[1], inplace=False),
                                          np.float64), expected.astype(np.float64), rtol=1e-5)
    check_fn_error(lambda m: getattr(m, name).at(x[0], idx, x[1]))


def test_add_at_bool_and_negative_at():
    check_fn(lambda m, a: m.add.at(a, np.array([0, 0, 1]), True, inplace=False),
             np.array([False, True, False]))
    check_fn(lambda m, a: m.negative.at(a, np.array([0, 0, 1]), inplace=False),
             np.arange(4.0, dtype=np.float32))


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "bitwise_xor"])
def test_reduceat(name):
    x = _operand(name) if name != "add" else np.arange(8.0, dtype=np.float32)
    indices = np.array([0, 2, 1, 3]) if x.ndim == 2 else np.array([0, 4, 1, 5, 7])
    axis = 1 if x.ndim == 2 else 0
    check_fn(lambda m, a: getattr(m, name).reduceat(a, indices, axis=axis), x, rtol=1e-5)
    np.testing.assert_allclose(getattr(fnp, name).reduceat(x, indices, axis=axis),
                               getattr(np, name).reduceat(x, indices, axis=axis), rtol=1e-5)
    check_fn_error(lambda m: getattr(m, name).reduceat(x, indices[:, None]))


def test_frompyfunc():
    def f(a, b):
        return a * 2 + b
    check_fn(lambda m, a: m.frompyfunc(f, 2, 1)(a, 1), np.arange(4.0, dtype=np.float32))
    check_fn(lambda m, a: m.frompyfunc(f, 2, 1, identity=0).reduce(a), np.arange(4))
    check_fn(lambda m, a: m.frompyfunc(f, 2, 1).reduce(a, axis=1, keepdims=True), INTS)
    check_fn(lambda m, a: m.frompyfunc(f, 2, 1).accumulate(a, axis=1), INTS)
    check_fn(lambda m, a: m.frompyfunc(f, 2, 1).outer(a, a[:2]), np.arange(3))
    check_fn(lambda m, a: m.frompyfunc(f, 2, 1).at(a, np.array([0, 0, 2]), 1, inplace=False),
             np.zeros(3, np.int32))
    check_fn(lambda m, a: m.frompyfunc(f, 2, 1).reduceat(a, np.array([0, 3])), np.arange(6))
    npf = np.frompyfunc(f, 2, 1)
    np.testing.assert_array_equal(fnp.frompyfunc(f, 2, 1).accumulate(INTS, axis=1),
                                  npf.accumulate(INTS, axis=1).astype(np.int32))
    np.testing.assert_array_equal(fnp.frompyfunc(f, 2, 1).reduce(INTS, axis=0),
                                  npf.reduce(INTS, axis=0).astype(np.int32))
    g = fnp.frompyfunc(lambda x: x + 1, 1, 1)
    assert g.nin == 1 and g.identity is None and g.__name__ == "<lambda>"
    with pytest.raises(ValueError):
        g.reduce(np.arange(3))
    with pytest.raises(NotImplementedError):
        g(np.arange(3), out=np.arange(3))
    with pytest.raises(ValueError):
        fnp.frompyfunc(f, 2, 1).reduce(np.zeros((0,)))


def test_frompyfunc_two_outputs():
    divmod_ = fnp.frompyfunc(lambda a, b: (a // b, a % b), 2, 2)
    q, r = divmod_(np.arange(5), 2)
    np.testing.assert_array_equal(q, np.arange(5) // 2)
    with pytest.raises(ValueError):
        divmod_.reduce(np.arange(4))


def test_ufunc_methods_grad_vmap(x64):
    x = rng.standard_normal((3, 4))
    check_grads(lambda a: fnp.multiply.reduce(a, axis=1), (x,), order=1, modes=["fwd", "rev"])
    check_grads(lambda a: fnp.logaddexp.reduce(a, axis=0), (x,), order=1, modes=["fwd", "rev"])
    check_grads(lambda a: fnp.add.outer(a[0], a[1]), (x,), order=1, modes=["fwd", "rev"])
    check_grads(lambda a: fnp.add.at(a[0], np.array([0, 0]), a[1, :2], inplace=False), (x,),
                order=1, modes=["fwd", "rev"])
    f = fnp.frompyfunc(lambda a, b: a * b + b, 2, 1)
    check_grads(lambda a: f.accumulate(a, axis=1), (x,), order=1, modes=["fwd", "rev"])
    out = fluxion.vmap(lambda r: fnp.maximum.accumulate(r))(x)
    np.testing.assert_allclose(out, np.stack([np.maximum.accumulate(r) for r in x]))
    out = fluxion.vmap(lambda r: f.reduce(r))(x)
    np.testing.assert_allclose(out, [np.frompyfunc(lambda a, b: a * b + b, 2, 1).reduce(r)
                                     for r in x])


def test_call_matches_function_and_jit():
    for name in BUILTIN:
        args = (_operand(name),) * getattr(jnp, name).nin
        assert_matches(getattr(jnp, name)(*args), getattr(fnp, name)(*args), rtol=1e-6)
        assert_matches(getattr(jnp, name)(*args), fluxion.jit(getattr(fnp, name))(*args),
                       rtol=1e-6)
