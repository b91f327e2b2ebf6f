"""fluxion.experimental.sparse (BCOO) against JAX's jax.experimental.sparse and NumPy."""
import jax
import jax.experimental.sparse as jsparse
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion.experimental import sparse

_rng = np.random.default_rng(0)


def _sparse_array(shape, density=0.4, dtype=np.float32):
    x = _rng.normal(size=shape).astype(dtype)
    return np.where(_rng.random(shape) < density, x, 0).astype(dtype)


X = _sparse_array((3, 4))
X3 = _sparse_array((2, 3, 4))
LAYOUTS = [(X, 0, 0), (X3, 0, 0), (X3, 1, 0), (X3, 0, 1), (X3, 1, 1), (X3, 2, 0)]


def _j(m):
    """The JAX BCOO array with our buffers (cheaper than JAX's eager fromdense)."""
    return jsparse.BCOO((np.asarray(m.data), np.asarray(m.indices)), shape=m.shape)


def _nse(x, n_batch, n_dense):
    mask = (x != 0).any(tuple(range(x.ndim - n_dense, x.ndim))) if n_dense else x != 0
    return int(mask.reshape(mask.shape[:n_batch] + (-1,)).sum(-1).max())


def _raises_like(jax_fn, flux_fn):
    """fluxion raises an exception of the class JAX raises (JAX's own error classes are
    matched by name: fluxion.errors mirrors them)."""
    with pytest.raises(Exception) as jax_err:
        jax_fn()
    with pytest.raises(Exception) as flux_err:
        flux_fn()
    names = {c.__name__ for c in flux_err.type.__mro__}
    assert jax_err.type.__name__ in names, (jax_err.value, flux_err.value)


@pytest.mark.parametrize("x,n_batch,n_dense", [LAYOUTS[2], LAYOUTS[4], LAYOUTS[5]])
def test_fromdense_matches_jax_buffers(x, n_batch, n_dense):
    theirs = jax.jit(jsparse.bcoo_fromdense, static_argnames=("nse", "n_batch", "n_dense"))(
        x, nse=_nse(x, n_batch, n_dense), n_batch=n_batch,
        n_dense=n_dense)
    ours = fluxion.jit(lambda x: sparse.BCOO.fromdense(x, nse=theirs.nse, n_batch=n_batch,
                                                       n_dense=n_dense))(x)
    assert (ours.shape, ours.nse, ours.n_batch, ours.n_dense, ours.dtype) == (
        theirs.shape, theirs.nse, theirs.n_batch, theirs.n_dense, theirs.dtype)
    np.testing.assert_array_equal(ours.data, theirs.data)
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    np.testing.assert_array_equal(fluxion.jit(sparse.bcoo_todense)(ours), x)
    assert repr(ours) == repr(theirs)


def test_fromdense_with_padding_and_jit():
    ours = fluxion.jit(lambda x: sparse.bcoo_fromdense(x, nse=8))(X)
    theirs = jsparse.bcoo_fromdense(X, nse=8)
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    np.testing.assert_array_equal(ours.data, theirs.data)
    np.testing.assert_array_equal(fluxion.jit(sparse.todense)(ours), X)
    _raises_like(lambda: jax.jit(jsparse.bcoo_fromdense)(X),
                 lambda: fluxion.jit(sparse.bcoo_fromdense)(X))


def test_empty_eye():
    for args in [(3,), (3, 4, 1), (4, 3, -2), (2, 2, 5)]:
        np.testing.assert_array_equal(fluxion.jit(lambda: sparse.eye(*args).todense())(),
                                      jax.jit(lambda: jsparse.eye(*args).todense())())
    e = sparse.empty((2, 3), dtype=np.int32)
    assert e.nse == 0 and e.dtype == np.int32
    np.testing.assert_array_equal(e.todense(), np.zeros((2, 3)))


@pytest.mark.parametrize("x,n_batch,n_dense", [LAYOUTS[0], LAYOUTS[4], LAYOUTS[5]])
def test_matmul_both_sides(x, n_batch, n_dense):
    m = sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    y = _rng.normal(size=(4, 5)).astype(np.float32)
    z = _rng.normal(size=(5, 3) if x.ndim == 2 else (2, 5, 3)).astype(np.float32)
    got = fluxion.jit(lambda m, y, z: (m @ y, m @ y[:, 0], z @ m))(m, y, z)
    for g, w in zip(got, (x @ y, x @ y[:, 0], np.matmul(z, x))):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


DNS = [((3, 4), (4, 5), (((1,), (0,)), ((), ()))),
       ((3, 4), (5, 3), (((0,), (1,)), ((), ()))),
       ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
       ((2, 3, 4), (4, 3), (((1, 2), (1, 0)), ((), ()))),
       ((2, 3, 4), (5, 2), (((0,), (1,)), ((), ())))]


@pytest.mark.parametrize("lshape,rshape,dn,n_batch", [d + (i % 2,) for i, d in enumerate(DNS)])
def test_dot_general_against_jax(lshape, rshape, dn, n_batch):
    x = _sparse_array(lshape)
    y = _rng.normal(size=rshape).astype(np.float32)
    m = sparse.BCOO.fromdense(x, n_batch=n_batch)
    want = jax.lax.dot_general(x, y, dn)
    got = fluxion.jit(lambda m, y: sparse.bcoo_dot_general(m, y, dimension_numbers=dn))(m, y)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # dense @ sparse: swap the roles.
    (lc, rc), (lb, rb) = dn
    got = fluxion.jit(lambda y, m: sparse.bcoo_dot_general(
        y, m, dimension_numbers=((rc, lc), (rb, lb))))(y, m)
    np.testing.assert_allclose(got, jax.lax.dot_general(y, x, ((rc, lc), (rb, lb))),
                               rtol=1e-5, atol=1e-5)
    # sparse @ sparse
    ms = sparse.BCOO.fromdense(y)
    got = fluxion.jit(lambda m, ms: sparse.bcoo_dot_general(m, ms, dimension_numbers=dn))(m, ms)
    assert isinstance(got, sparse.BCOO)
    np.testing.assert_allclose(fluxion.jit(sparse.todense)(got), want, rtol=1e-5, atol=1e-5)


def test_dot_general_bad_shapes_raise_like_jax():
    m = sparse.BCOO.fromdense(X)
    jm = _j(m)
    y = np.ones((5, 2), np.float32)
    _raises_like(lambda: jm @ y, lambda: m @ y)
    dn = (((1,), (0,)), ((), ()))
    _raises_like(lambda: jsparse.bcoo_dot_general(jm, y, dimension_numbers=dn),
                 lambda: sparse.bcoo_dot_general(m, y, dimension_numbers=dn))


def test_grad_wrt_data_and_dense_operand():
    m = sparse.BCOO.fromdense(X)
    jm = _j(m)
    y = _rng.normal(size=(4, 2)).astype(np.float32)

    def ours(d, y):
        return jnp.sin(sparse.BCOO((d, m.indices), shape=m.shape) @ y).sum()

    def theirs(d, y):
        return jax.numpy.sin(jsparse.BCOO((d, jm.indices), shape=jm.shape) @ y).sum()

    g = fluxion.jit(fluxion.grad(ours, argnums=(0, 1)))(m.data, y)
    want = jax.jit(jax.grad(theirs, argnums=(0, 1)))(jm.data, y)
    for a, b in zip(g, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)

    def ours_sp(d):  # sparse @ sparse and reductions are differentiable too
        a = sparse.BCOO((d, m.indices), shape=m.shape)
        return (sparse.bcoo_spdot_general(a, a.T, dimension_numbers=(((1,), (0,)), ((), ())))
                .todense() ** 2).sum() + sparse.bcoo_reduce_sum(a * 3.0, axes=(0,)).todense()[1]

    def dense_version(d):
        a = jnp.zeros(X.shape).at[m.indices[:, 0], m.indices[:, 1]].add(d)
        return ((a @ a.T) ** 2).sum() + (3 * a).sum(0)[1]

    np.testing.assert_allclose(fluxion.grad(ours_sp)(m.data), fluxion.grad(dense_version)(m.data),
                               rtol=1e-5)


def test_vmap_over_batch_dimension():
    m = sparse.BCOO.fromdense(X3, n_batch=1)
    y = _rng.normal(size=(4, 2)).astype(np.float32)
    got = fluxion.vmap(lambda a: a @ y)(m)
    np.testing.assert_allclose(got, np.stack([X3[i] @ y for i in range(2)]), rtol=1e-5)
    scaled = fluxion.vmap(lambda a: -(a * 2.0))(m)
    assert isinstance(scaled, sparse.BCOO) and scaled.shape == (2, 3, 4)
    np.testing.assert_allclose(scaled.todense(), -2 * X3)
    dense = fluxion.vmap(sparse.todense)(m)
    np.testing.assert_array_equal(dense, X3)
    with pytest.raises(ValueError):
        fluxion.vmap(sparse.todense)(sparse.BCOO.fromdense(X))


@pytest.mark.parametrize("x,n_batch,n_dense", LAYOUTS[1:4])
@pytest.mark.parametrize("axes", [(0,), (2,), (0, 1, 2)])
def test_reduce_sum(x, n_batch, n_dense, axes):
    m = sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    got = fluxion.jit(lambda m: sparse.bcoo_reduce_sum(m, axes=axes))(m)
    assert isinstance(got, sparse.BCOO) and got.shape == x.sum(axes).shape
    np.testing.assert_allclose(got.todense(), x.sum(axes), rtol=1e-5, atol=1e-6)


def test_reduce_sum_method_matches_jax():
    m = sparse.BCOO.fromdense(X3, n_batch=1)
    want = _j(m).sum(1).todense()
    np.testing.assert_allclose(m.sum(1).todense(), want, rtol=1e-6)


def test_multiply_and_negate():
    m = sparse.BCOO.fromdense(X3, n_batch=1)
    v = _rng.normal(size=(4,)).astype(np.float32)
    jm = _j(m)
    np.testing.assert_allclose(sparse.bcoo_multiply_dense(m, v), jsparse.bcoo_multiply_dense(jm, v))
    np.testing.assert_allclose((m * v).todense(), X3 * v)
    np.testing.assert_allclose((2.5 * m).todense(), 2.5 * X3)
    np.testing.assert_allclose((-m).todense(), -X3)
    np.testing.assert_allclose((m / 2).todense(), X3 / 2)


def test_sum_duplicates_and_sort_match_jax():
    data = np.array([1., 2., 3., 4., 5.], np.float32)
    idx = np.array([[2, 1], [0, 3], [2, 1], [0, 0], [3, 4]], np.int32)  # last one is padding
    m = sparse.BCOO((data, idx), shape=(3, 4))
    jm = jsparse.BCOO((data, idx), shape=(3, 4))
    jsum = jax.jit(jsparse.bcoo_sum_duplicates, static_argnames="nse")
    for ours, theirs in [(sparse.bcoo_sum_duplicates(m), jsum(jm, nse=3)),
                         (fluxion.jit(lambda a: sparse.bcoo_sum_duplicates(a, nse=5))(m),
                          jsum(jm, nse=5)),
                         (fluxion.jit(sparse.bcoo_sort_indices)(m),
                          jax.jit(jsparse.bcoo_sort_indices)(jm))]:
        np.testing.assert_array_equal(ours.indices, theirs.indices)
        np.testing.assert_array_equal(ours.data, theirs.data)
        assert ours.indices_sorted
    s = fluxion.jit(lambda a: sparse.bcoo_sum_duplicates(a, nse=a.nse))(
        sparse.BCOO.fromdense(X3, n_batch=1, n_dense=1))
    np.testing.assert_array_equal(s.todense(), X3)
    z = sparse.BCOO((np.array([0., 1.], np.float32), np.array([[0, 0], [1, 1]], np.int32)),
                    shape=(2, 2)).sum_duplicates()
    assert z.nse == 1


@pytest.mark.parametrize("x,n_batch,n_dense", LAYOUTS[1:])
def test_update_layout(x, n_batch, n_dense):
    m = sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    for nb in range(n_batch + 1):
        for nd in range(n_dense + 1):
            out = sparse.bcoo_update_layout(m, n_batch=nb, n_dense=nd)
            assert (out.n_batch, out.n_dense) == (nb, nd)
            np.testing.assert_array_equal(out.todense(), x)
    if n_batch == 0:
        jm = _j(m)
        _raises_like(lambda: jsparse.bcoo_update_layout(jm, n_batch=1),
                     lambda: sparse.bcoo_update_layout(m, n_batch=1))
        out = sparse.bcoo_update_layout(m, n_batch=1, on_inefficient=None)
        np.testing.assert_array_equal(out.todense(), x)


@pytest.mark.parametrize("x,n_batch,n_dense", [LAYOUTS[2], LAYOUTS[4]])
def test_structural_ops(x, n_batch, n_dense):
    m = sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)

    @fluxion.jit
    def ops(m, m2):
        sl = sparse.bcoo_slice(m, start_indices=(1, 0, 1), limit_indices=(2, 3, 4),
                               strides=(1, 2, 2))
        one = sparse.bcoo_slice(m, start_indices=(1, 0, 0), limit_indices=(2, 3, 4))
        outs = [sparse.bcoo_reshape(m, new_sizes=(4, 6)), m.reshape(6, -1),
                sparse.bcoo_reshape(m, new_sizes=(12, 2), dimensions=(2, 1, 0)), sl,
                sparse.bcoo_concatenate([m, m2], dimension=1),
                sparse.bcoo_broadcast_in_dim(m, shape=(2, 2, 3, 4), broadcast_dimensions=(1, 2, 3)),
                sparse.bcoo_squeeze(one, dimensions=(0,)), sparse.bcoo_extract(m, 10 * x)]
        return [o.todense() for o in outs], outs[-1].data

    dense, ext_data = ops(m, sparse.BCOO.fromdense(2 * x))
    wants = [x.reshape(4, 6), x.reshape(6, 4), x.transpose(2, 1, 0).reshape(12, 2),
             x[1:2, 0:3:2, 1:4:2], np.concatenate([x, 2 * x], axis=1),
             np.broadcast_to(x, (2, 2, 3, 4)), x[1], 10 * x]
    for got, want in zip(dense, wants):
        np.testing.assert_array_equal(got, want)
    jm = _j(m)
    np.testing.assert_array_equal(ext_data, jsparse.bcoo_extract(jm, 10 * x).data)


def test_transpose():
    m = sparse.BCOO.fromdense(X3, n_batch=1)
    np.testing.assert_array_equal(m.transpose((0, 2, 1)).todense(), X3.transpose(0, 2, 1))
    np.testing.assert_array_equal(sparse.BCOO.fromdense(X).T.todense(), X.T)
    jm = _j(m)
    _raises_like(lambda: jm.transpose((1, 0, 2)), lambda: m.transpose((1, 0, 2)))
    with pytest.raises(ValueError):
        m.transpose((0, 0, 1))


def test_structural_ops_under_jit_and_grad():
    m = sparse.BCOO.fromdense(X3, n_batch=1)

    def f(d):
        a = sparse.BCOO((d, m.indices), shape=m.shape)
        a = sparse.bcoo_reshape(a, new_sizes=(6, 4))
        a = sparse.bcoo_concatenate([a, a * 2.0], dimension=0)
        a = sparse.bcoo_slice(a, start_indices=(1, 0), limit_indices=(11, 4), strides=(2, 1))
        return (sparse.bcoo_reduce_sum(a, axes=(0,)).todense() * np.arange(4)).sum()

    def f_dense(x):
        a = x.reshape(6, 4)
        a = jnp.concatenate([a, a * 2.0])[1:11:2]
        return (a.sum(0) * np.arange(4)).sum()

    def to_dense(d):
        return sparse.BCOO((d, m.indices), shape=m.shape).todense()

    want = fluxion.grad(lambda d: f_dense(to_dense(d)))(m.data)
    np.testing.assert_allclose(fluxion.jit(fluxion.grad(f))(m.data), want, rtol=1e-6)
    np.testing.assert_allclose(fluxion.jit(f)(m.data), f_dense(X3), rtol=1e-5)


def test_bad_construction_raises():
    with pytest.raises(ValueError):
        sparse.BCOO((np.zeros(3), np.zeros((4, 2), np.int32)), shape=(3, 4))
    with pytest.raises(TypeError):
        sparse.BCOO((np.zeros(3), np.zeros((3, 2))), shape=(3, 4))
    with pytest.raises(TypeError):
        sparse.bcoo_reshape(sparse.BCOO.fromdense(X), new_sizes=(5,))


def test_sparsify_against_dense_and_jax():
    y = _rng.normal(size=(4, 2)).astype(np.float32)

    def f(a, y):
        b = jnp.sin(2.0 * a) + a * a.dtype.type(3) - (-a)
        return (b @ y).sum(0), b.T.reshape(2, 6).sum(1), jnp.tanh(a)[1:3, ::2]

    m = sparse.BCOO.fromdense(X)
    got = sparse.sparsify(f)(m, y)
    want = f(jnp.asarray(X), y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.todense() if isinstance(g, sparse.BCOO) else g, w,
                                   rtol=1e-5, atol=1e-6)
    assert isinstance(got[1], sparse.BCOO) and isinstance(got[2], sparse.BCOO)
    jgot = jsparse.sparsify(lambda a, y: (jax.numpy.sin(2.0 * a) @ y).sum(0))(
        _j(m), y)
    np.testing.assert_allclose(
        sparse.sparsify(lambda a, y: (jnp.sin(2.0 * a) @ y).sum(0))(m, y), jgot, rtol=1e-5)
    csr = sparse.BCSR.fromdense(X)
    np.testing.assert_allclose(sparse.sparsify(lambda a: (a * 2.0).sum(0))(csr).todense(),
                               2 * X.sum(0), rtol=1e-6)
    # through jit and grad of the stored values
    g = fluxion.grad(lambda d: sparse.sparsify(lambda a: (fluxion.jit(jnp.sin)(a) @ y).sum())(
        sparse.BCOO((d, m.indices), shape=m.shape)))(m.data)
    gj = jax.grad(lambda d: jsparse.sparsify(lambda a: (jax.numpy.sin(a) @ y).sum())(
        jsparse.BCOO((d, np.asarray(m.indices)), shape=m.shape)))(np.asarray(m.data))
    np.testing.assert_allclose(g, gj, rtol=1e-5)
    for name in ("exp", "cos"):
        _raises_like(lambda: jsparse.sparsify(getattr(jax.numpy, name))(_j(m)),
                     lambda: sparse.sparsify(getattr(jnp, name))(m))
    _raises_like(lambda: jsparse.sparsify(lambda a: a + 1.0)(_j(m)),
                 lambda: sparse.sparsify(lambda a: a + 1.0)(m))


def test_add_sub():
    a = sparse.BCOO.fromdense(X3, n_batch=1)
    b = sparse.BCOO.fromdense(2 * X3[::-1], n_dense=1)
    np.testing.assert_allclose((a + b).todense(), X3 + 2 * X3[::-1], rtol=1e-6)
    np.testing.assert_allclose((a - a).todense(), np.zeros_like(X3))
    np.testing.assert_allclose(a + X3, 2 * X3, rtol=1e-6)  # dense, as in JAX
    with pytest.raises(NotImplementedError):
        a - X3


def test_multiply_sparse_rev_and_sparse_grad():
    a = sparse.BCOO.fromdense(X3, n_batch=1)
    b = sparse.BCOO.fromdense(X3[::-1] + X3)
    np.testing.assert_allclose(sparse.bcoo_multiply_sparse(a, b).todense(), X3 * (X3[::-1] + X3),
                               rtol=1e-6)
    np.testing.assert_array_equal(sparse.bcoo_rev(a, (0, 2)).todense(), X3[::-1, :, ::-1])
    y = _rng.normal(size=(4,)).astype(np.float32)
    m = sparse.BCOO.fromdense(X)
    jm = _j(m)
    g = sparse.grad(lambda m, y: jnp.sum((m @ y) ** 2), argnums=(0, 1))(m, y)
    gj = jsparse.grad(lambda m, y: jax.numpy.sum((m @ y) ** 2), argnums=(0, 1))(jm, y)
    assert isinstance(g[0], sparse.BCOO)
    np.testing.assert_allclose(g[0].data, gj[0].data, rtol=1e-5)
    np.testing.assert_array_equal(g[0].indices, gj[0].indices)
    np.testing.assert_allclose(g[1], gj[1], rtol=1e-5)
    v, g0 = sparse.value_and_grad(lambda m: m.sum().todense())(m)
    np.testing.assert_allclose(v, X.sum(), rtol=1e-6)
    np.testing.assert_allclose(g0.data, np.ones(m.nse))


@pytest.mark.parametrize("x,n_batch,nse", [(X, 0, 9), (X3, 1, None)])
def test_bcsr_against_jax(x, n_batch, nse):
    theirs = jsparse.BCSR.fromdense(x, n_batch=n_batch, nse=nse)
    ours = sparse.BCSR.fromdense(x, n_batch=n_batch, nse=nse)
    for a, b in zip(ours._bufs, theirs._bufs):
        np.testing.assert_array_equal(a, b)
    assert repr(ours) == repr(theirs)
    np.testing.assert_array_equal(fluxion.jit(sparse.bcsr_todense)(ours), x)
    y = _rng.normal(size=(4, 2)).astype(np.float32)
    np.testing.assert_allclose(fluxion.jit(lambda m, y: m @ y)(ours, y), x @ y, rtol=1e-5, atol=1e-6)
    dn = (((x.ndim - 1,), (0,)), ((), ()))
    np.testing.assert_allclose(sparse.bcsr_dot_general(ours, y, dimension_numbers=dn),
                               jax.lax.dot_general(x, y, dn), rtol=1e-5, atol=1e-6)
    g = fluxion.grad(lambda d: (sparse.BCSR((d, ours.indices, ours.indptr), shape=x.shape) @ y)
                     .sum())(ours.data)
    gj = jax.grad(lambda d: (jsparse.BCSR((d, theirs.indices, theirs.indptr), shape=x.shape) @ y)
                  .sum())(theirs.data)
    np.testing.assert_allclose(g, gj, rtol=1e-5)
    np.testing.assert_array_equal(sparse.BCSR.from_bcoo(sparse.BCOO.fromdense(x, n_batch=n_batch))
                                  .todense(), x)


def test_spsolve_values_and_grads():
    a = (_sparse_array((5, 5), 0.3) + 4 * np.eye(5)).astype(np.float32)
    b = _rng.normal(size=5).astype(np.float32)
    m = sparse.BCSR.fromdense(a)
    x = sparse.linalg.spsolve(m.data, m.indices, m.indptr, b)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-5, atol=1e-6)

    def loss(d, b):
        return jnp.sum(sparse.linalg.spsolve(d, m.indices, m.indptr, b) ** 2)

    def loss_dense(d, b):
        dense = sparse.BCSR((d, m.indices, m.indptr), shape=a.shape).todense()
        return jnp.sum(jnp.linalg.solve(dense, b) ** 2)

    g = fluxion.jit(fluxion.grad(loss, argnums=(0, 1)))(m.data, b)
    want = fluxion.grad(loss_dense, argnums=(0, 1))(m.data, b)
    for u, v in zip(g, want):
        np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-5)
    t = np.ones(m.data.shape, np.float32)
    _, jv = fluxion.jvp(lambda d: sparse.linalg.spsolve(d, m.indices, m.indptr, b), (m.data,), (t,))
    _, jv_dense = fluxion.jvp(lambda d: jnp.linalg.solve(
        sparse.BCSR((d, m.indices, m.indptr), shape=a.shape).todense(), b), (m.data,), (t,))
    np.testing.assert_allclose(jv, jv_dense, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError):
        sparse.linalg.spsolve(m.data, m.indices, m.indptr, b.astype(np.int32))
