"""lax.linalg on LAPACK and numpy.linalg: values against NumPy, JAX as the oracle for dtypes,
finite-difference gradients, vmap against a Python loop, NaN for failed factorizations,
random.multivariate_normal / orthogonal bit-for-bit against jax.random."""
import subprocess
import sys

import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
import fluxion.random as fr
from fluxion import lax
from fluxion.lax import linalg as fl
from fluxion._src.test_util import numerical_jvp
from fluxion.test_util import check_grads

jax = pytest.importorskip("jax")
jnp = jax.numpy

rng = np.random.default_rng(0)


def _spd(n, batch=(), dtype=np.float64, complex_=False):
    a = rng.standard_normal(batch + (n, n))
    if complex_:
        a = a + 1j * rng.standard_normal(batch + (n, n))
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def test_import_does_not_load_scipy_or_lapack():
    code = ("import sys; import fluxion, fluxion.numpy as jnp, fluxion.lax.linalg; "
            "print('scipy' in sys.modules, 'jaxlib.cpu._lapack' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_decompositions_match_numpy(x64_both, dtype):
    cplx = np.issubdtype(dtype, np.complexfloating)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    spd = _spd(4, (2,), dtype, cplx)
    np.testing.assert_allclose(fl.cholesky(spd), np.linalg.cholesky(spd), atol=tol * 10)
    v, w = fl.eigh(spd)
    assert np.asarray(w).dtype == np.finfo(dtype).dtype
    np.testing.assert_allclose(w, np.linalg.eigvalsh(spd), rtol=tol)
    np.testing.assert_allclose(np.asarray(v) @ (np.asarray(w)[..., None] * np.conj(
        np.swapaxes(np.asarray(v), -1, -2))), spd, atol=tol * 100)
    a = rng.standard_normal((2, 5, 3)).astype(dtype)
    u, s, vt = fl.svd(a, full_matrices=False)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=tol * 10)
    np.testing.assert_allclose(np.asarray(u) * np.asarray(s)[..., None, :] @ vt, a,
                               atol=tol * 10)
    q, r = fl.qr(a, full_matrices=False)
    np.testing.assert_allclose(np.asarray(q) @ r, a, atol=tol * 10)
    assert np.allclose(np.tril(r, -1), 0)
    lu, piv, perm = fl.lu(a)
    jlu, jpiv, jperm = jax.lax.linalg.lu(a)
    np.testing.assert_array_equal(piv, jpiv)
    np.testing.assert_array_equal(perm, jperm)
    np.testing.assert_allclose(lu, jlu, atol=tol)
    t = np.tril(spd[0])
    b = rng.standard_normal((4, 3)).astype(dtype)
    for kw in [dict(left_side=True, lower=True), dict(left_side=True, lower=True,
                                                      transpose_a=True, conjugate_a=True),
               dict(left_side=False, lower=True, transpose_a=True),
               dict(left_side=True, lower=True, conjugate_a=True, unit_diagonal=True)]:
        rhs = b if kw["left_side"] else b.T
        ours = fl.triangular_solve(t, rhs, **kw)
        theirs = jax.lax.linalg.triangular_solve(t, rhs, **kw)
        np.testing.assert_allclose(ours, theirs, atol=tol * 10)


def test_failures_give_nan_and_bad_input_errors(x64_both):
    failed = np.asarray(fl.cholesky(-_spd(3, (2,))))
    lower = np.tril(np.ones((3, 3), bool))
    assert np.isnan(failed[..., lower]).all() and (failed[..., ~lower] == 0).all()  # as JAX
    singular = np.ones((3, 3))
    assert not np.isfinite(np.asarray(fnp.linalg.inv(singular))).all()
    assert np.isnan(np.asarray(fnp.linalg.eigvalsh(np.full((3, 3), np.nan)))).all()
    assert float(fnp.linalg.det(singular)) == 0.0
    with pytest.raises(ValueError, match="square"):
        fl.cholesky(np.ones((2, 3)))
    for f in (fl.eigh, fl.cholesky, fl.qr, fl.svd, fl.lu, fl.schur):  # TypeError, as JAX
        with pytest.raises(TypeError, match="at least 2"):
            f(np.ones(3))
        with pytest.raises(TypeError):
            getattr(jax.lax.linalg, f.__name__)(np.ones(3))
    with pytest.raises(TypeError, match="float32"):
        fl.lu(np.ones((3, 3), np.int32))
    with pytest.raises(ValueError):
        fnp.linalg.solve(np.eye(3), np.ones(4))


def test_jit_equals_eager_and_batch_in_one_call(x64_both):
    spd = _spd(5, (3, 2))
    np.testing.assert_allclose(fluxion.jit(fl.cholesky)(spd), fl.cholesky(spd), rtol=1e-14)
    text = fluxion.jit(lambda x: fl.eigh(x)[1]).lower(spd).as_text()
    kernel = "lapack_dsyevd_ffi" if fluxion.default_backend() == "cpu" else "cusolver_syevd_ffi"
    assert text.count(kernel) == 1


CASES = {
    "solve": (lambda a, b: fnp.linalg.solve(a, b), np.linalg.solve),
    "inv": (lambda a, b: fnp.linalg.inv(a), lambda a, b: np.linalg.inv(a)),
    "det": (lambda a, b: fnp.linalg.det(a), lambda a, b: np.linalg.det(a)),
    "slogdet": (lambda a, b: fnp.linalg.slogdet(a)[1], lambda a, b: np.linalg.slogdet(a)[1]),
    "pinv": (lambda a, b: fnp.linalg.pinv(a), lambda a, b: np.linalg.pinv(a)),
    "matrix_rank": (lambda a, b: fnp.linalg.matrix_rank(a), lambda a, b: np.linalg.matrix_rank(a)),
    "cond": (lambda a, b: fnp.linalg.cond(a), lambda a, b: np.linalg.cond(a)),
    "cond_inf": (lambda a, b: fnp.linalg.cond(a, np.inf), lambda a, b: np.linalg.cond(a, np.inf)),
    "svdvals": (lambda a, b: fnp.linalg.svdvals(a),
                lambda a, b: np.linalg.svd(a, compute_uv=False)),
    "matrix_power": (lambda a, b: fnp.linalg.matrix_power(a, -3),
                     lambda a, b: np.linalg.matrix_power(a, -3)),
    "qr_r": (lambda a, b: fnp.abs(fnp.linalg.qr(a, "r")), lambda a, b: np.abs(np.linalg.qr(a, "r"))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_linalg_values(x64_both, name):
    ours, ref = CASES[name]
    a = rng.standard_normal((3, 4, 4))
    b = rng.standard_normal((3, 4, 2))
    np.testing.assert_allclose(np.asarray(ours(a, b)), ref(a, b), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("ord", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norms(x64_both, ord):
    a = rng.standard_normal((3, 4, 5))
    np.testing.assert_allclose(fnp.linalg.norm(a, ord, axis=(1, 2)),
                               np.linalg.norm(a, ord, axis=(1, 2)), rtol=1e-12)


@pytest.mark.parametrize("ord", [None, 0, 1, 2, 3, 0.5, np.inf, -np.inf])
def test_vector_norms(x64_both, ord):
    a = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    np.testing.assert_allclose(fnp.linalg.norm(a, ord, axis=1), np.linalg.norm(a, ord, axis=1),
                               rtol=1e-12)


def test_dtypes_and_names_like_jax():
    ours = {n for n in dir(fnp.linalg) if not n.startswith("_")}
    theirs = {n for n in dir(jnp.linalg) if not n.startswith("_")}
    assert theirs <= ours, theirs - ours
    lax_missing = {n for n in dir(jax.lax.linalg) if not n.startswith("_")} - set(dir(fl))
    # Not implemented yet (named in docs/linalg.md).
    assert lax_missing <= {"cholesky_update", "cholesky_update_p", "hessenberg", "hessenberg_p",
                           "ormqr", "ormqr_p", "qdwh", "schur", "schur_p", "tridiagonal", "tridiagonal_p"}, lax_missing
    # x64 off: JAX is the oracle. x64 on: JAX 0.10.2 maps int32 to float32 here, while
    # fluxion's whole numpy maps ints to the default float (as jnp.sin does in fluxion), so
    # the linalg functions must agree with fluxion's own promotion.
    for x64_on in (False, True):
        with fluxion.enable_x64(x64_on), jax.enable_x64(x64_on):
            for dt in (np.int32, np.float32, np.complex64):
                m = np.eye(3, dtype=dt) * 2
                for f in ["inv", "det", "svdvals", "pinv", "cholesky", "eigvalsh", "norm"]:
                    o, t = getattr(fnp.linalg, f)(m), getattr(jnp.linalg, f)(m)
                    want = fnp.sin(m).dtype if (x64_on and dt == np.int32) else t.dtype
                    if f in ("svdvals", "eigvalsh", "norm"):
                        want = np.finfo(want).dtype
                    assert o.dtype == want and o.shape == t.shape, (f, dt, x64_on)


def test_lstsq_and_tensor_functions(x64_both):
    a, b = rng.standard_normal((6, 3)), rng.standard_normal(6)
    x, res, rank, s = fnp.linalg.lstsq(a, b)
    rx, rres, rrank, rs = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(x, rx, rtol=1e-10)
    np.testing.assert_allclose(s, rs, rtol=1e-10)
    assert int(rank) == rrank
    t = rng.standard_normal((2, 3, 6))
    np.testing.assert_allclose(fnp.linalg.tensorinv(t, 2), np.linalg.tensorinv(t, 2), rtol=1e-9)
    tb = rng.standard_normal((2, 3))
    np.testing.assert_allclose(fnp.linalg.tensorsolve(t, tb), np.linalg.tensorsolve(t, tb),
                               rtol=1e-9)
    ms = [rng.standard_normal(s) for s in [(3,), (3, 4), (4, 2)]]
    np.testing.assert_allclose(fnp.linalg.multi_dot(ms), np.linalg.multi_dot(ms), rtol=1e-12)
    v1, v2 = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    np.testing.assert_allclose(fnp.linalg.cross(v1, v2), np.cross(v1, v2), rtol=1e-12)


# ---- derivatives

def _sym(f):
    return lambda a: f(a + np.swapaxes(a, -1, -2).conj() if False else a)


def test_grads(x64_both):
    a = rng.standard_normal((3, 3))
    spd = _spd(3)
    check_grads(lambda x: fl.cholesky(x @ x.T + 3 * fnp.eye(3)), (a,), 1)
    check_grads(lambda x: fnp.linalg.det(x), (a,), 1)
    check_grads(lambda x: fnp.linalg.solve(x, fnp.ones(3)), (a,), 1)
    check_grads(lambda x: fnp.linalg.inv(x), (a,), 1)
    check_grads(lambda x: fnp.linalg.slogdet(x)[1], (a,), 1)
    check_grads(lambda x: fl.qr(x, full_matrices=False), (rng.standard_normal((4, 3)),), 1)
    check_grads(lambda x: fl.eigh(x)[1], (spd,), 1)
    check_grads(lambda x: fnp.abs(fl.eigh(x)[0]), (spd,), 1)
    check_grads(lambda x: fl.svd(x, compute_uv=False), (rng.standard_normal((4, 3)),), 1)
    check_grads(lambda x: fnp.abs(fl.svd(x, full_matrices=False)[0]),
                (rng.standard_normal((3, 4)),), 1)
    check_grads(lambda x: fnp.linalg.pinv(x), (rng.standard_normal((4, 3)),), 1)
    t = np.tril(spd)
    b = rng.standard_normal((3, 2))
    for kw in [dict(left_side=True, lower=True), dict(left_side=False, lower=True,
                                                      transpose_a=True)]:
        rhs = b if kw["left_side"] else b.T
        check_grads(lambda x, y: fl.triangular_solve(x, y, **kw), (t, rhs), 1)


def test_grads_complex_hermitian_match_jax(x64_both):
    # eigh/cholesky symmetrize their input, so they are not holomorphic: compare jvp and
    # grad of a real part with JAX's instead of finite differences of complex functions.
    h = _spd(3, dtype=np.complex128, complex_=True)
    t = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    c = rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3))
    pairs = [(lambda x: fl.eigh(x)[1], lambda x: jax.lax.linalg.eigh(x)[1], h),
             (lambda x: fnp.abs(fl.eigh(x)[0]), lambda x: jnp.abs(jax.lax.linalg.eigh(x)[0]), h),
             (fl.cholesky, jax.lax.linalg.cholesky, h),
             (lambda x: fl.svd(x, compute_uv=False),
              lambda x: jax.lax.linalg.svd(x, compute_uv=False), c),
             (lambda x: fl.qr(x, full_matrices=False)[0],
              lambda x: jax.lax.linalg.qr(x, full_matrices=False)[0], c),
             (fnp.linalg.inv, jnp.linalg.inv, h)]
    for ours, theirs, x in pairs:
        tx = t if x.shape == t.shape else c[::-1]
        # JAX compiled once per program (its op-by-op eager AD costs a compile per primitive)
        np.testing.assert_allclose(
            fluxion.jvp(ours, (x,), (tx,))[1],
            jax.jit(lambda x, tx: jax.jvp(theirs, (x,), (tx,))[1])(x, tx), rtol=1e-9, atol=1e-12)
        theirs_sum = jax.grad(lambda x: jnp.real(theirs(x)).sum() + jnp.imag(theirs(x)).sum())
        np.testing.assert_allclose(
            fluxion.grad(lambda x: fnp.real(ours(x)).sum() + fnp.imag(ours(x)).sum())(x),
            jax.jit(theirs_sum)(x), rtol=1e-9, atol=1e-12)
    check_grads(lambda x: fnp.linalg.solve(x[:3], fnp.ones(3, x.dtype)), (c,), 1)


def test_grads_match_jax_including_degenerate(x64_both):
    a = np.diag([1.0, 2.0, 2.0])  # degenerate eigenvalues: JAX's convention (inf/nan) for v
    g = fluxion.grad(lambda x: fl.eigh(x)[1].sum())(a)
    jg = jax.grad(lambda x: jax.lax.linalg.eigh(x)[1].sum())(a)
    np.testing.assert_allclose(g, jg, rtol=1e-12)
    m = rng.standard_normal((4, 3))
    g = fluxion.grad(lambda x: fl.svd(x, full_matrices=False)[0].sum())(m)
    jg = jax.grad(lambda x: jax.lax.linalg.svd(x, full_matrices=False)[0].sum())(m)
    np.testing.assert_allclose(g, jg, rtol=1e-9)
    s = rng.standard_normal((4, 4))
    g = fluxion.grad(lambda x: fnp.linalg.det(x))(s)
    jg = jax.grad(lambda x: jnp.linalg.det(x))(s)
    np.testing.assert_allclose(g, jg, rtol=1e-9)


SINGULAR = {
    "rank1_last_pivot": [[1.0, 2.0], [2.0, 4.0]],
    "rank2_of_3": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],
    "zero_first_pivot": [[0.0, 1.0], [0.0, 0.0]],
    "shift": [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]],
    "zeros": [[0.0] * 3] * 3,
    "identity": np.eye(3).tolist(),
}


@pytest.mark.parametrize("name", SINGULAR)
def test_det_gradient_is_the_adjugate_at_singular_matrices(name):
    # d det(a)/da = adj(a)^T, finite at singular matrices (JAX's cofactor rule agrees).
    a = np.array(SINGULAR[name], np.float32)
    g = fluxion.grad(fnp.linalg.det)(a)
    jg = jax.grad(jnp.linalg.det)(a)
    np.testing.assert_allclose(g, jg, atol=1e-5)
    jitted = fluxion.jit(fluxion.grad(fnp.linalg.det))(a)
    np.testing.assert_allclose(jitted, jg, atol=1e-5)


def test_det_jvp_complex_batched():
    c = (rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))).astype(np.complex64)
    c[1, 2] = c[1, 0]  # singular
    f = lambda m: fluxion.jvp(fnp.linalg.det, (m,), (m * 0.5j + 1,))[1]  # noqa: E731
    jf = lambda m: jax.jvp(jnp.linalg.det, (m,), (m * 0.5j + 1,))[1]  # noqa: E731
    np.testing.assert_allclose(fluxion.vmap(f)(c), jax.vmap(jf)(c), rtol=2e-5, atol=2e-5)


def test_vmap_against_loop(x64_both):
    spd = _spd(4, (5,))
    a = rng.standard_normal((5, 4, 4))
    for f in [fl.cholesky, lambda x: fl.eigh(x)[1], lambda x: fl.svd(x)[1],
              lambda x: fl.qr(x)[1], lambda x: fl.lu(x)[0], fnp.linalg.inv, fnp.linalg.det]:
        for arg in (spd, a):
            try:
                loop = np.stack([np.asarray(f(m)) for m in arg])
            except Exception:
                continue
            np.testing.assert_allclose(fluxion.vmap(f)(arg), loop, rtol=1e-10, atol=1e-10)
    b = rng.standard_normal((4, 2))
    out = fluxion.vmap(lambda x: fl.triangular_solve(x, b, left_side=True, lower=True))(spd)
    loop = np.stack([np.asarray(fl.triangular_solve(m, b, left_side=True, lower=True))
                     for m in spd])
    np.testing.assert_allclose(out, loop, rtol=1e-12)
    np.testing.assert_allclose(fluxion.vmap(fluxion.grad(lambda x: fnp.linalg.det(x)))(a),
                               np.stack([fluxion.grad(fnp.linalg.det)(m) for m in a]),
                               rtol=1e-10)


# ---- random

@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_equals_jax(x64_both, method):
    cov = _spd(3)
    mean = rng.standard_normal(3)
    ours = fr.multivariate_normal(fr.PRNGKey(3), mean, cov, (5,), method=method)
    theirs = jax.random.multivariate_normal(jax.random.PRNGKey(3), mean, cov, (5,),
                                            method=method)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n,m,shape", [(3, None, ()), (4, 2, (2,)), (2, 5, ())])
def test_orthogonal_equals_jax(n, m, shape):
    ours = fr.orthogonal(fr.PRNGKey(1), n, shape, m=m)
    theirs = jax.random.orthogonal(jax.random.PRNGKey(1), n, shape, m=m)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_eig_matches_jax(x64_both):
    a = rng.standard_normal((2, 4, 4))
    for dt in (np.float64, np.complex64):
        w, v = fnp.linalg.eig(a.astype(dt))
        jw, jv = jnp.linalg.eig(a.astype(dt))
        assert w.dtype == jw.dtype and v.dtype == jv.dtype
        np.testing.assert_allclose(w, jw, rtol=1e-5)
        np.testing.assert_allclose(v, jv, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(fnp.linalg.eigvals(a.astype(dt)), jw, rtol=1e-5)
    w, vl, vr = fl.eig(a[0])
    jw, jvl, jvr = jax.lax.linalg.eig(a[0])
    np.testing.assert_allclose(vl, jvl, rtol=1e-9, atol=1e-12)
    g = fluxion.grad(lambda x: fnp.real(fnp.linalg.eigvals(x)).sum() +
                     fnp.imag(fnp.linalg.eigvals(x)).sum())(a[0])
    jg = jax.grad(lambda x: jnp.real(jnp.linalg.eigvals(x)).sum() +
                  jnp.imag(jnp.linalg.eigvals(x)).sum())(a[0])
    np.testing.assert_allclose(g, jg, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fluxion.vmap(fnp.linalg.eigvals)(a),
                               np.stack([np.asarray(fnp.linalg.eigvals(m)) for m in a]),
                               rtol=1e-12)


def test_symmetric_product_and_platform_error(x64_both):
    a, c = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 3))
    for sym in (False, True):
        ours = fl.symmetric_product(a, c, alpha=2.0, beta=0.5, symmetrize_output=sym)
        theirs = jax.lax.linalg.symmetric_product(a, c, alpha=2.0, beta=0.5,
                                                  symmetrize_output=sym)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    check_grads(lambda x, y: fl.symmetric_product(x, y, alpha=2.0, beta=0.5), (a[0], c[0]), 1)
    # A platform without a kernel rule gets a clear error naming the primitive.
    from fluxion._src.compiler import lowering
    with pytest.raises(NotImplementedError, match="cholesky.*rocm"):
        lowering.get_lowering(fl.cholesky_p, "rocm")


@pytest.mark.parametrize("name,shape", [("orthogonal", (4, 6)), ("orthogonal", (6, 4)),
                                        ("delta_orthogonal", (3, 3, 4, 4))])
def test_orthogonal_initializers_equal_jax(name, shape):
    ours = getattr(fluxion.nn.initializers, name)()(fr.PRNGKey(2), shape)
    theirs = getattr(jax.nn.initializers, name)()(jax.random.PRNGKey(2), shape)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_tridiagonal_solve(x64_both):
    n = 5
    dl, d, du = rng.standard_normal((2, n)), rng.standard_normal((2, n)) + 4, \
        rng.standard_normal((2, n))
    dl[:, 0] = 0
    du[:, -1] = 0
    b = rng.standard_normal((2, n, 3))
    for perturb in (False, True):
        np.testing.assert_allclose(
            fl.tridiagonal_solve(dl, d, du, b, perturb_singular=perturb),
            jax.lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=perturb),
            rtol=1e-12)
    check_grads(fl.tridiagonal_solve, (dl[0], d[0], du[0], b[0]), 1)
    np.testing.assert_allclose(fluxion.vmap(fl.tridiagonal_solve)(dl, d, du, b),
                               fl.tridiagonal_solve(dl, d, du, b), rtol=1e-12)


def test_matrix_rank_thresholds_and_hermitian_against_jax():
    """JAX compares singular values with `rtol` itself (not rtol * max(s) as NumPy does);
    `tol` is its other name; `hermitian` ranks from eigenvalue magnitudes."""
    import jax.numpy as jnp
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 4, 5)).astype(np.float32)
    h = a[:, :4, :4] + a[:, :4, :4].transpose(0, 2, 1)
    h[0, 3], h[0, :, 3] = h[0, 2], h[0, :, 2]  # rank 3
    for args, kwargs in [((a,), {}), ((a, 0.5), {}), ((a,), dict(tol=np.array([0.5, 1.0]))),
                         ((h,), dict(hermitian=True)), ((h, 0.3), dict(hermitian=True)),
                         ((np.zeros((3, 3), np.float32),), {}), ((a[0, 0],), {})]:
        got = fnp.linalg.matrix_rank(*args, **kwargs)
        want = jnp.linalg.matrix_rank(*args, **kwargs)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(fnp.linalg.matrix_rank(h, hermitian=True)), [3, 4])
    with pytest.raises(ValueError, match="only one of tol or rtol"):
        fnp.linalg.matrix_rank(a, 0.1, tol=0.1)


@pytest.mark.parametrize("shapes", [[(2, 3, 3), (3, 3)], [(3, 3), (2, 3, 3), (3,)],
                                    [(3, 4), (3, 2)]])
def test_multi_dot_shape_errors_as_jax(shapes):
    arrays = [np.ones(s, np.float32) for s in shapes]
    with pytest.raises(ValueError) as theirs:
        jax.numpy.linalg.multi_dot(arrays)
    with pytest.raises(ValueError) as ours:
        fnp.linalg.multi_dot(arrays)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("lower", [True, False])
def test_eigh_without_symmetrizing_differentiates_the_triangle_it_reads(lower):
    """eigh(symmetrize_input=False) reads one triangle, so its gradient is zero on the other
    and equals finite differences (JAX 0.10.2 spreads it over both); with symmetrized input
    the gradient is JAX's."""
    a = np.random.default_rng(5).standard_normal((4, 4))
    sym = a + a.T
    weights = np.arange(1.0, 5.0)

    def loss(m, symmetrize=False):
        v, w = fl.eigh(m, lower=lower, symmetrize_input=symmetrize)
        return ((v ** 2) @ weights).sum() + (w * weights).sum()

    with fluxion.enable_x64(True):
        got = np.asarray(fluxion.grad(loss)(sym))
        want = np.reshape([numerical_jvp(loss, (sym,), (unit.reshape(4, 4),), 1e-6)
                           for unit in np.eye(16)], (4, 4))
        np.testing.assert_allclose(got, want, atol=1e-7)
        assert not (np.triu(got, 1) if lower else np.tril(got, -1)).any()
        # Symmetrized, the gradient is the symmetric part: both triangles share it.
        both = np.asarray(fluxion.grad(lambda m: loss(m, True))(sym))
        np.testing.assert_allclose(both, (got + got.T) / 2, atol=1e-9)
