"""lax.linalg schur, hessenberg, tridiagonal, ormqr, qr(pivoting=True), cholesky_update, qdwh:
reconstruction identities and SciPy values, JAX as the oracle (values, dtypes, errors), jit
against eager, vmap against a Python loop, finite-difference gradients."""
import numpy as np
import pytest
import scipy.linalg

import fluxion
import fluxion.numpy as fnp
from fluxion.lax import linalg as fl
from fluxion.test_util import check_grads

from _linalg_helpers import conj_transpose, random_matrix, rng_for, tolerance

jax = pytest.importorskip("jax")

rng = np.random.default_rng(0)
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture(autouse=True)
def _fresh_rng(request):
    global rng
    rng = rng_for(request)


def _rand(shape, dtype):
    return random_matrix(rng, shape, dtype)


def _tol(dtype):
    return tolerance(dtype)


_H = conj_transpose


@pytest.mark.parametrize("dtype", DTYPES)
def test_schur(x64_both, dtype):
    a = _rand((3, 5, 5), dtype)
    t, q = fl.schur(a)
    t, q = np.asarray(t), np.asarray(q)
    assert t.dtype == q.dtype == dtype
    np.testing.assert_allclose(q @ t @ _H(q), a, atol=_tol(dtype) * 10)
    np.testing.assert_allclose(_H(q) @ q, np.broadcast_to(np.eye(5), a.shape),
                               atol=_tol(dtype) * 10)
    below = -2 if dtype in (np.float32, np.float64) else -1  # real: 2x2 blocks
    assert np.all(np.tril(t, below) == 0)
    jt, jq = jax.lax.linalg.schur(a)
    np.testing.assert_allclose(t, jt, atol=_tol(dtype))
    st, _ = scipy.linalg.schur(a[1])
    np.testing.assert_allclose(t[1], st, atol=_tol(dtype) * 10)
    t_only = fl.schur(a, compute_schur_vectors=False)
    np.testing.assert_allclose(t_only, t, atol=_tol(dtype))
    np.testing.assert_allclose(fluxion.jit(fl.schur)(a)[0], t, atol=_tol(dtype))
    vm = fluxion.vmap(fl.schur)(a)
    for i in range(3):
        np.testing.assert_allclose(vm[0][i], fl.schur(a[i])[0], atol=_tol(dtype))


def test_schur_errors():
    with pytest.raises(ValueError, match="square"):
        fl.schur(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError):
        fl.schur(np.ones((2, 2), np.int32))
    with pytest.raises(NotImplementedError, match="sort"):
        fl.schur(np.ones((2, 2), np.float32), sort_eig_vals=True)
    t, q = fl.schur(np.full((3, 3), np.nan, np.float32))  # failure gives NaN, not a crash
    assert np.isnan(np.asarray(t)).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_hessenberg(x64_both, dtype):
    a = _rand((2, 5, 5), dtype)
    h, taus = fl.hessenberg(a)
    assert h.dtype == taus.dtype == dtype and taus.shape == (2, 4)
    jh, jtaus = jax.lax.linalg.hessenberg(a)
    np.testing.assert_allclose(h, jh, atol=_tol(dtype))
    np.testing.assert_allclose(taus, jtaus, atol=_tol(dtype))
    hh = np.triu(np.asarray(h), -1)
    for i in range(2):
        sh, sq = scipy.linalg.hessenberg(a[i], calc_q=True)
        np.testing.assert_allclose(hh[i], sh, atol=_tol(dtype) * 10)
    # Q from the reflectors below the first subdiagonal: a = Q H Q^H.
    q = np.zeros(a.shape, dtype)
    q[..., 0, 0] = 1
    q[..., 1:, 1:] = fl.householder_product(np.asarray(h)[..., 1:, :-1], taus)
    np.testing.assert_allclose(q @ hh @ _H(q), a, atol=_tol(dtype) * 10)
    vm = fluxion.vmap(fl.hessenberg)(a)
    np.testing.assert_allclose(vm[0], h, atol=_tol(dtype))
    np.testing.assert_allclose(fluxion.jit(fl.hessenberg)(a)[1], taus, atol=_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal(x64_both, dtype, lower):
    a = _rand((2, 5, 5), dtype)
    a = a + _H(a)
    arr, d, e, taus = fl.tridiagonal(a, lower=lower)
    real = np.finfo(dtype).dtype
    assert (arr.dtype, d.dtype, e.dtype, taus.dtype) == (dtype, real, real, dtype)
    assert d.shape == (2, 5) and e.shape == (2, 4) and taus.shape == (2, 4)
    for ours, theirs in zip((arr, d, e, taus), jax.lax.linalg.tridiagonal(a, lower=lower)):
        np.testing.assert_allclose(ours, theirs, atol=_tol(dtype))
    for i in range(2):  # the tridiagonal matrix has the eigenvalues of a
        w = scipy.linalg.eigvalsh_tridiagonal(np.asarray(d[i], np.float64),
                                              np.asarray(e[i], np.float64))
        np.testing.assert_allclose(w, np.linalg.eigvalsh(a[i]), atol=_tol(dtype) * 100)
    vm = fluxion.vmap(lambda x: fl.tridiagonal(x, lower=lower))(a)
    np.testing.assert_allclose(vm[1], d, atol=_tol(dtype))
    with pytest.raises(ValueError, match="square"):
        fl.tridiagonal(np.ones((0, 0), np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ormqr(x64_both, dtype):
    a = _rand((2, 6, 4), dtype)
    h, taus = fl.geqrf(a)
    q = np.asarray(fl.householder_product(np.asarray(h), taus))  # thin q (6, 4) ...
    qfull = np.asarray(fl.qr(a)[0])  # ... and the square one
    c = _rand((2, 6, 3), dtype)
    cases = [(True, False, c, lambda c: qfull @ c), (True, True, c, lambda c: _H(qfull) @ c),
             (False, False, _H(c), lambda c: c @ qfull),
             (False, True, _H(c), lambda c: c @ _H(qfull))]
    for left, transpose, cc, want in cases:
        out = fl.ormqr(h, taus, cc, left=left, transpose=transpose)
        np.testing.assert_allclose(out, want(cc), atol=_tol(dtype) * 10)
        np.testing.assert_allclose(out, jax.lax.linalg.ormqr(np.asarray(h), np.asarray(taus),
                                                             cc, left=left,
                                                             transpose=transpose),
                                   atol=_tol(dtype))
    assert np.allclose(q, qfull[..., :4], atol=_tol(dtype) * 10)
    vm = fluxion.vmap(lambda c: fl.ormqr(h, taus, c))(np.stack([c, c]))
    np.testing.assert_allclose(vm[1], qfull @ c, atol=_tol(dtype) * 10)
    with pytest.raises(ValueError, match="same number of rows"):
        fl.ormqr(h, taus, c[..., :5, :])


def test_ormqr_grad_in_c(x64_both):
    a = rng.standard_normal((5, 3))
    h, taus = fl.geqrf(a)
    for left, transpose in [(True, False), (False, True)]:
        c = rng.standard_normal((5, 2) if left else (2, 5))
        check_grads(lambda c: fl.ormqr(h, taus, c, left=left, transpose=transpose), (c,), 1)
    hc, tc = fl.geqrf(_rand((4, 3), np.complex128))
    qfull = np.asarray(fl.householder_product(fnp.pad(hc, [(0, 0), (0, 1)]), tc))
    c, ct = _rand((4, 2), np.complex128), _rand((4, 2), np.complex128)
    got = fluxion.vjp(lambda c: fl.ormqr(hc, tc, c), c)[1](ct)[0]
    np.testing.assert_allclose(got, qfull.T @ ct, atol=1e-12)  # the transpose, as JAX's vjp
    with pytest.raises(NotImplementedError, match="reflectors"):
        fluxion.jvp(lambda h: fl.ormqr(h, taus, np.ones((5, 2))), (h,), (h,))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 6, 4), (4, 4), (2, 3, 5)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_qr_pivoting(x64_both, dtype, shape, full_matrices):
    a = _rand(shape, dtype)
    q, r, p = fl.qr(a, pivoting=True, full_matrices=full_matrices)
    jq, jr, jp = jax.lax.linalg.qr(a, pivoting=True, full_matrices=full_matrices)
    assert p.dtype == np.int32 and q.shape == jq.shape and r.shape == jr.shape
    np.testing.assert_array_equal(p, jp)
    np.testing.assert_allclose(r, jr, atol=_tol(dtype) * 10)
    ap = np.take_along_axis(a, np.broadcast_to(np.asarray(p)[..., None, :], a.shape), -1)
    np.testing.assert_allclose(np.asarray(q) @ r, ap, atol=_tol(dtype) * 10)
    diag = np.abs(np.diagonal(np.asarray(r), axis1=-2, axis2=-1))
    assert np.all(np.diff(diag, axis=-1) <= _tol(dtype) * 10)
    if len(shape) == 3:
        vm = fluxion.vmap(lambda x: fl.qr(x, pivoting=True, full_matrices=full_matrices))(a)
        np.testing.assert_array_equal(vm[2], p)
        np.testing.assert_allclose(vm[1], r, atol=_tol(dtype))
    jit = fluxion.jit(lambda x: fl.qr(x, pivoting=True, full_matrices=full_matrices))(a)
    np.testing.assert_array_equal(jit[2], p)


def test_qr_grads(x64_both):
    for shape in [(5, 3), (3, 3), (3, 5)]:
        a = rng.standard_normal(shape)
        check_grads(lambda x: fl.qr(x, pivoting=True, full_matrices=False)[:2], (a,), 1)
        check_grads(lambda x: fl.qr(x, full_matrices=False), (a,), 1)
    check_grads(lambda x: fl.qr(x, full_matrices=True), (rng.standard_normal((5, 3)),), 1)
    for shape in [(3, 5), (5, 3)]:  # wide, and tall with a square q
        c, t = _rand(shape, np.complex128), _rand(shape, np.complex128)
        for pivoting in [False, True]:
            ours = fluxion.jvp(lambda x: fl.qr(x, pivoting=pivoting)[:2], (c,), (t,))[1]
            theirs = jax.jit(lambda x, t: jax.jvp(
                lambda x: jax.lax.linalg.qr(x, pivoting=pivoting)[:2], (x,), (t,))[1])(c, t)
            for o, th in zip(ours, theirs):
                if not (pivoting and shape == (3, 5)):  # JAX's dR2 there uses unpermuted x
                    np.testing.assert_allclose(o, th, atol=1e-10)
    # batched pivoted QR (JAX's rule indexes with batched pivots and fails): finite differences
    a, t = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 3))
    f = lambda x: fl.qr(x, pivoting=True)[1]  # noqa: E731
    fd = (np.asarray(f(a + 1e-6 * t)) - np.asarray(f(a - 1e-6 * t))) / 2e-6
    np.testing.assert_allclose(fluxion.jvp(f, (a,), (t,))[1], fd, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_update(x64_both, dtype):
    n = 5
    m = rng.standard_normal((n, n))
    a = m @ m.T + n * np.eye(n)
    r = np.linalg.cholesky(a).T.astype(dtype)
    w = rng.standard_normal(n).astype(dtype)
    out = np.asarray(fl.cholesky_update(r, w))
    assert out.dtype == dtype
    np.testing.assert_allclose(out.T @ out, a + np.outer(w, w), rtol=_tol(dtype) * 10)
    np.testing.assert_allclose(out, np.linalg.cholesky(a + np.outer(w, w)).T,
                               atol=_tol(dtype) * 10)
    np.testing.assert_allclose(out, jax.lax.linalg.cholesky_update(r, w), atol=_tol(dtype))
    np.testing.assert_allclose(fluxion.jit(fl.cholesky_update)(r, w), out, atol=_tol(dtype))
    rs, ws = np.stack([r, 2 * r]), np.stack([w, np.zeros_like(w)])
    vm = np.asarray(fluxion.vmap(fl.cholesky_update)(rs, ws))
    np.testing.assert_allclose(vm[0], out, atol=_tol(dtype))
    np.testing.assert_allclose(vm[1], 2 * r, atol=_tol(dtype))  # w = 0: unchanged


def test_cholesky_update_errors():
    with pytest.raises(ValueError, match="same size"):
        fl.cholesky_update(np.eye(3, dtype=np.float32), np.ones(2, np.float32))
    with pytest.raises(TypeError):
        fl.cholesky_update(np.eye(2, dtype=np.complex64), np.ones(2, np.complex64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_qdwh(x64_both, dtype):
    x = _rand((6, 4), dtype)
    u, h, k, ok = fl.qdwh(x)
    ju, jh, jk, jok = jax.lax.linalg.qdwh(x)
    assert u.dtype == h.dtype == dtype
    assert bool(ok) and int(k) == int(jk) and np.asarray(k).dtype == jk.dtype
    u, h = np.asarray(u), np.asarray(h)
    np.testing.assert_allclose(u @ h, x, atol=_tol(dtype) * 10)
    np.testing.assert_allclose(_H(u) @ u, np.eye(4), atol=_tol(dtype) * 10)
    su, sh = scipy.linalg.polar(x.astype(np.complex128 if np.iscomplexobj(x) else np.float64))
    np.testing.assert_allclose(u, su, atol=_tol(dtype) * 10)
    np.testing.assert_allclose(h, sh, atol=_tol(dtype) * 10)
    np.testing.assert_allclose(u, ju, atol=_tol(dtype))
    pu, ph, _, _ = fluxion.jit(lambda x: fl.qdwh(x, dynamic_shape=(4, 3)))(x)
    jpu, jph, _, _ = jax.lax.linalg.qdwh(x, dynamic_shape=(4, 3))
    np.testing.assert_allclose(pu, jpu, atol=_tol(dtype))
    np.testing.assert_allclose(ph, jph, atol=_tol(dtype))
    with pytest.raises(ValueError, match="M >= N"):
        fl.qdwh(x.T)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eigh_svd_subset_by_index(x64_both, dtype):
    a = _rand((2, 5, 5), dtype)
    h = a + _H(a)
    v, w = fl.eigh(h, subset_by_index=(1, 4))
    assert v.shape == (2, 5, 3) and w.shape == (2, 3)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h)[..., 1:4], atol=1e-10)
    np.testing.assert_allclose(h @ np.asarray(v), np.asarray(v) * np.asarray(w)[..., None, :],
                               atol=1e-10)
    sw = scipy.linalg.eigh(h[0], subset_by_index=[1, 3], eigvals_only=True)
    np.testing.assert_allclose(w[0], sw, atol=1e-10)
    vm = fluxion.vmap(lambda x: fl.eigh(x, subset_by_index=(3, 5))[1])(h)
    np.testing.assert_allclose(vm, np.linalg.eigvalsh(h)[..., 3:], atol=1e-10)
    x = _rand((2, 6, 4), dtype)
    u, s, vt = fl.svd(x, full_matrices=False, subset_by_index=(1, 3))
    fu, fs, fvt = np.linalg.svd(x, full_matrices=False)
    assert u.shape == (2, 6, 2) and vt.shape == (2, 2, 4)
    np.testing.assert_allclose(s, fs[..., 1:3], atol=1e-10)
    np.testing.assert_allclose(np.asarray(u) * np.asarray(s)[..., None, :] @ vt,
                               fu[..., :, 1:3] * fs[..., None, 1:3] @ fvt[..., 1:3, :],
                               atol=1e-10)
    np.testing.assert_allclose(
        fl.svd(x, full_matrices=False, compute_uv=False, subset_by_index=(0, 2)),
        fs[..., :2], atol=1e-10)
    with pytest.raises(ValueError, match="full_matrices and subset_by_index"):
        fl.svd(x, subset_by_index=(0, 2))
    with pytest.raises(ValueError, match="subset_by_index"):
        fl.eigh(h, subset_by_index=(2, 7))
    with pytest.raises(NotImplementedError, match="partial eigen"):
        fluxion.jvp(lambda x: fl.eigh(x, subset_by_index=(0, 2)), (h,), (h,))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eig_eigenvector_derivatives(x64_both, dtype):
    a, t = _rand((2, 4, 4), dtype), _rand((2, 4, 4), dtype)
    f = lambda x: fl.eig(x, enable_eigvec_derivs=True)  # noqa: E731
    g = lambda x: jax.lax.linalg.eig(x, enable_eigvec_derivs=True)  # noqa: E731
    for ours, theirs in zip(fluxion.jvp(f, (a,), (t,))[1], jax.jvp(g, (a,), (t,))[1]):
        np.testing.assert_allclose(ours, theirs, atol=1e-10)
    # The derivative of A v = v diag(w) (gauge free, unlike finite differences of v, whose
    # normalization can turn under the perturbation): t v + a dv = dv diag(w) + v diag(dw).
    (w, _, v), (dw, _, dv) = fluxion.jvp(f, (a,), (t,))
    w, v, dw, dv = map(np.asarray, (w, v, dw, dv))
    residual = t @ v + a @ dv - dv * w[..., None, :] - v * dw[..., None, :]
    np.testing.assert_allclose(residual, 0, atol=1e-9)
    eps = 1e-6  # eigenvalues are smooth: finite differences
    fd = (np.asarray(f(a + eps * t)[0]) - np.asarray(f(a - eps * t)[0])) / (2 * eps)
    np.testing.assert_allclose(dw, fd, atol=1e-6)
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs"):
        fluxion.jvp(fl.eig, (a,), (t,))
