"""BCOO arithmetic and sparsify messages where JAX 0.10.2's sparsify_test found fluxion
lacking: division by a dense array, ``**``, and the NotImplementedError of a primitive whose
result would be dense. JAX (the oracle) runs the same program."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental import sparse as jsparse

import fluxion
import fluxion.numpy as jnp
from fluxion.experimental import sparse

_LAYOUTS = [((5,), 0, 0, "float32"), ((3, 4), 1, 0, "float32"), ((3, 4, 2), 1, 1, "int32"),
            ((3, 4), 0, 1, "complex64"), ((3, 4), 0, 0, "int32")]


def _operands(shape, dtype):
    rng = np.random.default_rng(0)
    dense = (rng.integers(-3, 4, shape) * (rng.random(shape) > 0.4)).astype(dtype)
    divisor = rng.integers(1, 5, shape).astype(dtype)
    return dense, divisor


def _check_same_bcoo(got, want):
    assert type(got).__name__ == "BCOO" and got.dtype == want.dtype
    assert got.data.shape == want.data.shape
    np.testing.assert_allclose(np.asarray(got.todense()), np.asarray(want.todense()),
                               rtol=1e-6)


@pytest.mark.parametrize("shape,n_batch,n_dense,dtype", _LAYOUTS)
@pytest.mark.parametrize("which", ["array", "scalar", "broadcast row"])
def test_bcoo_divided_by_dense(shape, n_batch, n_dense, dtype, which):
    dense, divisor = _operands(shape, dtype)
    divisor = {"array": divisor, "scalar": 2, "broadcast row": divisor[-1:]}[which]
    want = jsparse.BCOO.fromdense(dense, n_batch=n_batch, n_dense=n_dense) / divisor
    x = sparse.BCOO.fromdense(dense, n_batch=n_batch, n_dense=n_dense)
    _check_same_bcoo(x / divisor, want)
    _check_same_bcoo(fluxion.jit(lambda a, b: a / b)(x, divisor), want)


@pytest.mark.parametrize("exponent", [1, 2, 3, np.int32(2)])
def test_bcoo_power(exponent):
    for dtype in ("float32", "int32"):
        dense = np.arange(20).reshape(4, 5).astype(dtype)
        want = jsparse.BCOO.fromdense(dense) ** exponent
        _check_same_bcoo(sparse.BCOO.fromdense(dense) ** exponent, want)
    x = sparse.BCOO.fromdense(np.arange(6.0))
    np.testing.assert_allclose(fluxion.jit(lambda a: (a ** exponent).todense())(x),
                               np.arange(6.0) ** exponent)


@pytest.mark.parametrize("exponent", [0, -1, 2.5])
def test_bcoo_power_that_would_be_dense_raises_as_jax(exponent):
    with pytest.raises(NotImplementedError) as want:
        jsparse.BCOO.fromdense(jjnp.arange(5.0)) ** exponent
    with pytest.raises(NotImplementedError) as got:
        sparse.BCOO.fromdense(jnp.arange(5.0)) ** exponent
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("name", ["cos", "exp", "gt", "complex"])
def test_sparsify_not_implemented_messages(name):
    def program(api, np_, sp):
        fun = {"cos": api.lax.cos, "exp": np_.exp, "gt": lambda a: a > 1,
               "complex": lambda a: api.lax.complex(a, a)}[name]
        return sp.sparsify(fun)(sp.BCOO.fromdense(np_.arange(5.0)))
    with pytest.raises(NotImplementedError) as want:
        program(jax, jjnp, jsparse)
    with pytest.raises(NotImplementedError) as got:
        program(fluxion, jnp, sparse)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("fmt", ["BCOO", "BCSR"])
@pytest.mark.parametrize("jit", [False, True])
def test_todense_inside_sparsify_densifies(fmt, jit):
    """`sparse.todense` of a value that is sparse only under sparsify (a dense stand-in while
    tracing) gives the dense array there, so dense operations may follow."""
    M = np.arange(4).reshape(2, 2)
    func = sparse.sparsify(lambda m: sparse.todense(m) + 1)
    func = fluxion.jit(func) if jit else func
    cls = getattr(sparse, fmt)
    np.testing.assert_array_equal(func(M), M + 1)
    np.testing.assert_array_equal(func(cls.fromdense(M)), M + 1)


def test_todense_of_a_dense_array_is_the_identity_under_transforms():
    f = lambda x: (sparse.todense(x) * 2.).sum()
    x = np.arange(3.)
    np.testing.assert_allclose(fluxion.grad(f)(x), 2 * np.ones(3))
    np.testing.assert_allclose(fluxion.vmap(lambda v: sparse.todense(v) + 1)(x), x + 1)
    np.testing.assert_allclose(fluxion.jit(f)(x), 6.)
    _, t = fluxion.jvp(sparse.todense, (x,), (np.ones(3),))
    np.testing.assert_allclose(t, np.ones(3))


@pytest.mark.parametrize("order", ["sparse first", "dense first"])
@pytest.mark.parametrize("how", ["sparsify", "operator"])
def test_sparse_plus_dense_is_dense(order, how):
    """As JAX: BCOO + dense array of the result's shape is the dense sum."""
    def program(api, np_, sp):
        x = sp.BCOO.fromdense(np_.arange(6.)).reshape(2, 3)
        a, b = (x, np_.ones((2, 3))) if order == "sparse first" else (np_.ones((2, 3)), x)
        add = sp.sparsify(lambda u, v: u + v) if how == "sparsify" else (lambda u, v: u + v)
        return add(a, b)
    want = program(jax, jjnp, jsparse)
    got = program(fluxion, jnp, sparse)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    x = sparse.BCOO.fromdense(jnp.arange(6.)).reshape(2, 3)
    np.testing.assert_array_equal(
        np.asarray(fluxion.jit(lambda u, v: u + v)(x, jnp.ones((2, 3)))), np.asarray(want))


@pytest.mark.parametrize("case", ["sparse + scalar", "sparse - dense", "dense - sparse"])
def test_sparse_dense_sums_jax_refuses(case):
    def program(api, np_, sp):
        x = sp.BCOO.fromdense(np_.arange(6.)).reshape(2, 3)
        y = np_.ones((2, 3))
        return {"sparse + scalar": lambda: x + 1.0, "sparse - dense": lambda: x - y,
                "dense - sparse": lambda: y - x}[case]()
    with pytest.raises(NotImplementedError) as want:
        program(jax, jjnp, jsparse)
    with pytest.raises(NotImplementedError) as got:
        program(fluxion, jnp, sparse)
    assert str(got.value) == str(want.value)


_STATIC_INDICES = [np.index_exp[None], np.index_exp[:, None, :, None], np.index_exp[0],
                   np.index_exp[-1, 1:3], np.index_exp[..., 2], np.index_exp[::2],
                   np.index_exp[:, ::-1]]


@pytest.mark.parametrize("idx", _STATIC_INDICES, ids=str)
def test_bcoo_static_indexing(idx, shape=(3, 4, 5)):
    """`bcoo[idx]` with ints, slices (reversed too), None and Ellipsis: JAX's values, shapes
    and dtype; a BCOO result. Under jit too."""
    rng = np.random.default_rng(1)
    dense = (rng.integers(-3, 4, shape) * (rng.random(shape) > 0.5)).astype("float32")
    for n_batch in (0, 1):
        want = jsparse.BCOO.fromdense(dense, n_batch=n_batch)[idx]
        x = sparse.BCOO.fromdense(dense, n_batch=n_batch)
        got = x[idx]
        assert type(got).__name__ == "BCOO" and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got.todense()), np.asarray(want.todense()))
        if n_batch:
            np.testing.assert_array_equal(np.asarray(fluxion.jit(lambda m: m[idx].todense())(x)),
                                          np.asarray(want.todense()))


def test_bcoo_indexing_gradient():
    dense = np.arange(12.0).reshape(3, 4) * (np.arange(12).reshape(3, 4) % 3 == 0)
    f = lambda d: sparse.BCOO.fromdense(d, nse=4)[1:, ::-1].todense().sum()
    want = np.zeros((3, 4))
    want[1:] = dense[1:] != 0
    np.testing.assert_array_equal(np.asarray(fluxion.grad(f)(dense)), want)


def test_sparsify_through_custom_jvp():
    """A custom_jvp function under sparsify runs its primal with the sparse rules (its
    gradient too), as in JAX."""
    def program(api, np_, sp):
        square = api.custom_jvp(lambda x: x ** 2)
        square.defjvp(lambda p, t: (p[0] ** 2, 2 * t[0] * p[0]))
        x = sp.BCOO.fromdense(np_.arange(5.0))
        out = sp.sparsify(square)(x)
        grad = sp.sparsify(api.grad(lambda v: square(v).sum()))(x)
        return out.indices, out.data, grad.todense()
    for got, want in zip(program(fluxion, jnp, sparse), program(jax, jjnp, jsparse)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want))


def test_bcoo_times_bcoo_with_duplicate_indices():
    """`bcoo * bcoo` is the elementwise product of the dense arrays (duplicates summed first;
    JAX issue 8888), eagerly and under jit."""
    indices = np.array([[0, 1, 0, 0, 1, 1], [1, 0, 1, 2, 0, 2]]).T
    data = np.array([1, 2, 3, 4, 5, 6])
    want = (jsparse.BCOO((data, indices), shape=(3, 3)) ** 1).todense() ** 2
    mat = sparse.BCOO((jnp.asarray(data), jnp.asarray(indices)), shape=(3, 3))
    got = mat * mat
    assert type(got).__name__ == "BCOO" and got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got.todense()), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(fluxion.jit(lambda a: (a * a).todense())(mat)),
                                  np.asarray(want))


def test_repr_of_a_bcoo_with_invalid_buffers():
    m = sparse.BCOO.fromdense(jnp.arange(6, dtype="float32").reshape(2, 3))
    m.indices = jnp.array([])
    assert repr(m) == "BCOO(<invalid>)"
    assert repr(sparse.BCOO.fromdense(jnp.arange(6.).reshape(2, 3), n_batch=1)) == (
        "BCOO(float32[2, 3], nse=3, n_batch=1)")


@pytest.mark.parametrize("fmt", ["BCOO", "BCSR"])
def test_sparse_arrays_are_unhashable_and_have_a_length(fmt):
    m = getattr(sparse, fmt).fromdense(jnp.arange(6.).reshape(2, 3))
    with pytest.raises(TypeError):
        hash(m)
    assert len(m) == len(getattr(jsparse, fmt).fromdense(jjnp.arange(6.).reshape(2, 3))) == 2


@pytest.mark.parametrize("case", ["by a sparse array", "by a dense array that broadcasts"])
def test_bcoo_divisions_jax_refuses(case):
    def program(np_, sp):
        x = sp.BCOO.fromdense(np_.arange(6.0).reshape(2, 3))
        return x / x if case == "by a sparse array" else x / np_.ones((4, 2, 3))
    with pytest.raises(NotImplementedError):
        program(jjnp, jsparse)
    with pytest.raises(NotImplementedError, match=f"division {case}"):
        program(jnp, sparse)
