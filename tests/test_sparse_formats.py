"""COO, CSR and CSC matrices, `random_bcoo`, the format-generic `empty`/`eye`/`todense`, and
sparse `jacfwd`/`jacrev`, against dense NumPy and JAX."""
import jax
import jax.experimental.sparse as jsparse
import jax.numpy as jax_jnp
import numpy as np
import pytest

import fluxion
import fluxion.experimental.sparse as sparse
import fluxion.numpy as jnp

M = np.array([[0., 2, 0, 1], [0, 0, 0, 0], [3, 0, 4, 0]], np.float32)
V = np.arange(4, dtype=np.float32)
B = np.arange(12, dtype=np.float32).reshape(4, 3)
FORMATS = ["COO", "CSR", "CSC"]


def _buffers(x):
    return [np.asarray(b) for b in jax.tree_util.tree_leaves(x)]


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("nse", [None, 6])
def test_fromdense_buffers_and_repr_match_jax(name, nse):
    ours = getattr(sparse, name).fromdense(M, nse=nse)
    theirs = getattr(jsparse, name).fromdense(jax_jnp.asarray(M), nse=nse)
    assert repr(ours) == repr(theirs)
    for a, b in zip(fluxion.tree_util.tree_leaves(ours), _buffers(theirs)):
        np.testing.assert_array_equal(np.asarray(a), b)
        assert np.asarray(a).dtype == b.dtype
    np.testing.assert_array_equal(ours.todense(), M)
    np.testing.assert_array_equal(ours.T.todense(), M.T)
    np.testing.assert_array_equal(sparse.todense(ours), M)


@pytest.mark.parametrize("name", FORMATS)
def test_products_under_jit_and_vmap(name):
    mat = getattr(sparse, name).fromdense(M, nse=5)
    np.testing.assert_allclose(mat @ V, M @ V)
    np.testing.assert_allclose(mat @ B, M @ B)
    np.testing.assert_allclose(mat.T @ np.ones(3, np.float32), M.T @ np.ones(3))
    np.testing.assert_allclose(fluxion.jit(lambda m, x: m @ x)(mat, V), M @ V)
    np.testing.assert_allclose(mat @ np.arange(4), M @ np.arange(4))  # promoted
    # JAX has no batching rule for these products; fluxion's are gathers and scatters.
    np.testing.assert_allclose(fluxion.vmap(lambda x: mat @ x)(B.T), (M @ B).T)
    with pytest.raises(NotImplementedError, match="two sparse"):
        mat @ mat.T
    with pytest.raises(NotImplementedError):
        mat + 1


@pytest.mark.parametrize("name", FORMATS)
def test_gradient_is_taken_on_the_stored_values(name):
    mat = getattr(sparse, name).fromdense(M)
    g = sparse.grad(lambda m: (m @ V).sum())(mat)
    assert type(g) is type(mat)
    dense_gradient = np.broadcast_to(V, M.shape)  # d/dM of sum(M @ v)
    np.testing.assert_allclose(g.todense(), np.where(M != 0, dense_gradient, 0))
    if name != "CSC":  # JAX 0.10.2's CSC gradient is wrong (it returns the row indices)
        theirs = jsparse.grad(lambda m: (m @ jax_jnp.asarray(V)).sum())(
            getattr(jsparse, name).fromdense(jax_jnp.asarray(M)))
        np.testing.assert_allclose(g.data, theirs.data)


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc", "bcoo"])
@pytest.mark.parametrize("k", [-2, 0, 1, 5])
def test_eye_and_empty_in_every_format(fmt, k):
    np.testing.assert_array_equal(sparse.eye(3, 4, k, sparse_format=fmt).todense(),
                                  np.eye(3, 4, k))
    empty = sparse.empty((2, 3), sparse_format=fmt)
    assert empty.nse == 0 and empty.shape == (2, 3)
    np.testing.assert_array_equal(empty.todense(), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="not recognized"):
        sparse.empty((2, 3), sparse_format="dok")


def test_bcsr_empty_and_todense():
    np.testing.assert_array_equal(sparse.todense(sparse.BCSR.fromdense(M)), M)
    assert sparse.empty((2, 3), sparse_format="bcsr").todense().shape == (2, 3)


def test_fromdense_under_jit_needs_nse():
    f = fluxion.jit(lambda m: sparse.COO.fromdense(m, nse=4).todense())
    np.testing.assert_array_equal(f(M), M)
    with pytest.raises(fluxion.errors.ConcretizationTypeError):
        fluxion.jit(lambda m: sparse.CSR.fromdense(m).todense())(M)


@pytest.mark.parametrize("kwargs", [
    dict(shape=(3, 4)),
    dict(shape=(2, 5, 3), n_batch=1, n_dense=1, nse=3, sorted_indices=True,
         dtype=np.float16),
    dict(shape=(6,), nse=4, unique_indices=False, indices_dtype=np.int8),
])
def test_random_bcoo_is_jaxs_bit_for_bit(kwargs):
    ours = sparse.random_bcoo(fluxion.random.key(3), **kwargs)
    theirs = jsparse.random_bcoo(jax.random.key(3), **{
        **kwargs, "dtype": kwargs.get("dtype", np.float32)})
    assert repr(ours) == repr(theirs)
    np.testing.assert_array_equal(ours.data, theirs.data)
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    with pytest.raises(ValueError, match="between 0 and"):
        sparse.random_bcoo(fluxion.random.key(0), (2, 2), nse=4)


def test_jacobians_of_a_bcoo_argument():
    X = sparse.BCOO.fromdense(M)
    jX = jsparse.BCOO.fromdense(jax_jnp.asarray(M))
    for ours, theirs in [(sparse.jacfwd, jsparse.jacfwd), (sparse.jacrev, jsparse.jacrev),
                         (sparse.jacobian, jsparse.jacobian)]:
        jac = ours(lambda m, x: m @ x)(X, V)
        expected = theirs(lambda m, x: m @ x)(jX, jax_jnp.asarray(V))
        assert isinstance(jac, sparse.BCOO) and jac.shape == expected.shape
        np.testing.assert_allclose(jac.todense(), expected.todense())
    both = sparse.jacrev(lambda m, x: m @ x, argnums=(0, 1))(X, V)
    np.testing.assert_allclose(both[1], M)
    tree = sparse.grad(lambda t: (t["m"] @ t["x"]).sum())({"m": X, "x": V})
    assert isinstance(tree["m"], sparse.BCOO)
    np.testing.assert_allclose(tree["x"], M.sum(0))
    value, g = sparse.value_and_grad(lambda m: ((m @ V).sum(), 1.0), has_aux=True)(X)
    assert float(value[0]) == float((M @ V).sum()) and isinstance(g, sparse.BCOO)


def test_submodules_are_attributes():
    for name in ["ad", "api", "bcoo", "bcsr", "coo", "csr", "random", "transform", "linalg"]:
        assert hasattr(sparse, name), name
    assert sparse.coo.COO is sparse.COO and sparse.csr.CSC is sparse.CSC
