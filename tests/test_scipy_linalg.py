"""scipy.linalg decompositions and solvers against SciPy, gradients, batching."""
import warnings
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg as sl

import fluxion
import fluxion.scipy.linalg as fl
from fluxion.test_util import check_grads

RNG = np.random.default_rng(0)
_Q = RNG.standard_normal((4, 4))
SPD = _Q @ _Q.T + 4 * np.eye(4)
GEN = RNG.standard_normal((4, 4)) + 2 * np.eye(4)
B = RNG.standard_normal((4, 2))


def test_cholesky_family(x64):
    np.testing.assert_allclose(fl.cholesky(SPD), sl.cholesky(SPD), atol=1e-12)
    np.testing.assert_allclose(fl.cholesky(SPD, lower=True), sl.cholesky(SPD, lower=True),
                               atol=1e-12)
    for lower in (False, True):
        c = fl.cho_factor(SPD, lower=lower)
        assert c[1] == lower
        np.testing.assert_allclose(fl.cho_solve(c, B), np.linalg.solve(SPD, B), atol=1e-10)
        np.testing.assert_allclose(fl.cho_solve(c, B[:, 0]), np.linalg.solve(SPD, B[:, 0]),
                                   atol=1e-10)
    np.testing.assert_allclose(fl.solve(SPD, B, assume_a="pos"), np.linalg.solve(SPD, B),
                               atol=1e-10)


@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("lower", [False, True])
def test_solve_triangular(trans, lower, x64):
    a = np.triu(GEN + 1j * GEN.T) if not lower else np.tril(GEN + 1j * GEN.T)
    got = fl.solve_triangular(a, B, trans=trans, lower=lower)
    np.testing.assert_allclose(got, sl.solve_triangular(a, B, trans=trans, lower=lower),
                               atol=1e-10)


def test_lu_family_and_solve(x64):
    p, l, u = fl.lu(GEN)
    sp, sl_, su = sl.lu(GEN)
    np.testing.assert_allclose(p, sp, atol=1e-12)
    np.testing.assert_allclose(l, sl_, atol=1e-12)
    np.testing.assert_allclose(u, su, atol=1e-12)
    pl, u2 = fl.lu(GEN[:, :3], permute_l=True)
    np.testing.assert_allclose(pl @ u2, GEN[:, :3], atol=1e-12)
    factor = fl.lu_factor(GEN)
    for trans in (0, 1, 2):
        np.testing.assert_allclose(fl.lu_solve(factor, B, trans=trans),
                                   sl.lu_solve(sl.lu_factor(GEN), B, trans=trans), atol=1e-10)
    np.testing.assert_allclose(fl.solve(GEN, B), np.linalg.solve(GEN, B), atol=1e-10)
    np.testing.assert_allclose(fl.det(GEN), np.linalg.det(GEN), rtol=1e-10)
    np.testing.assert_allclose(fl.inv(GEN), np.linalg.inv(GEN), atol=1e-10)


def test_qr_svd_eigh_polar(x64):
    a = RNG.standard_normal((5, 3))
    for mode in ("full", "economic"):
        q, r = fl.qr(a, mode=mode)
        np.testing.assert_allclose(q @ r, a, atol=1e-12)
        assert q.shape == sl.qr(a, mode=mode)[0].shape
    (r,) = fl.qr(a, mode="r")
    np.testing.assert_allclose(np.abs(r), np.abs(sl.qr(a, mode="r")[0]), atol=1e-12)
    cq, r = fl.qr_multiply(a, np.eye(5)[:2], mode="right")
    want_cq, _ = sl.qr_multiply(a, np.eye(5)[:2], mode="right")
    np.testing.assert_allclose(np.abs(cq), np.abs(want_cq), atol=1e-12)
    np.testing.assert_allclose(fl.svd(a, compute_uv=False), sl.svd(a, compute_uv=False),
                               atol=1e-12)
    w, v = fl.eigh(SPD)
    np.testing.assert_allclose(w, sl.eigh(SPD, eigvals_only=True), atol=1e-10)
    np.testing.assert_allclose(SPD @ v, v * w, atol=1e-10)
    # A non-Hermitian input is symmetrized first, as by JAX (SciPy reads one triangle).
    for lower in (True, False):
        np.testing.assert_allclose(fl.eigh(np.tril(SPD), lower=lower, eigvals_only=True),
                                   jsl.eigh(np.tril(SPD), lower=lower, eigvals_only=True),
                                   atol=1e-5)
    d, e = np.array([2.0, 3.0, 1.0, 4.0]), np.array([0.5, -1.0, 0.3])
    np.testing.assert_allclose(fl.eigh_tridiagonal(d, e, eigvals_only=True),
                               sl.eigh_tridiagonal(d, e, eigvals_only=True), atol=1e-10)
    for side in ("right", "left"):
        u, p = fl.polar(GEN, side=side)
        su, sp = sl.polar(GEN, side=side)
        np.testing.assert_allclose(u, su, atol=1e-10)
        np.testing.assert_allclose(p, sp, atol=1e-10)


@pytest.mark.parametrize("scale", [1e-3, 0.5, 3.0, 40.0])
def test_expm_matches_scipy_and_jax(scale, x64):
    a = GEN * scale
    np.testing.assert_allclose(fl.expm(a), sl.expm(a), rtol=1e-7, atol=1e-12)
    a32 = a.astype(np.float32)
    np.testing.assert_allclose(fl.expm(a32), jsl.expm(a32), rtol=2e-5, atol=1e-5)


def test_expm_batched_frechet_and_gradients(x64):
    a = np.stack([GEN * 0.3, SPD * 0.1])
    np.testing.assert_allclose(fl.expm(a), np.stack([sl.expm(m) for m in a]), rtol=1e-9)
    e = RNG.standard_normal((4, 4))
    value, frechet = fl.expm_frechet(GEN * 0.3, e)
    want_value, want_frechet = sl.expm_frechet(GEN * 0.3, e)
    np.testing.assert_allclose(value, want_value, rtol=1e-9)
    np.testing.assert_allclose(frechet, want_frechet, rtol=1e-8, atol=1e-10)
    check_grads(lambda m: fl.expm(m), (GEN * 0.3,), order=1, modes=["fwd", "rev"])
    # cho_factor reads one triangle, and its derivative (JAX's) assumes a symmetric tangent.
    check_grads(lambda m: fl.cho_solve(fl.cho_factor(m + m.T), B), (SPD / 2,), order=1,
                modes=["fwd", "rev"])


@pytest.mark.parametrize("permute_l", [False, True])
def test_lu_permutation_is_real_for_complex_input(permute_l, x64_both):
    a = GEN + 1j * GEN.T
    got = fl.lu(a, permute_l=permute_l)
    want = jsl.lu(a, permute_l=permute_l)
    assert [g.dtype for g in got] == [w.dtype for w in want]
    assert got[0].dtype == (np.float64 if permute_l is False else np.complex128)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-10)


def test_eigh_tridiagonal_rejects_integer_input_like_jax():
    with pytest.raises(TypeError):
        fl.eigh_tridiagonal(np.array([1, 2, 3], np.int32), np.array([1, 1], np.int32),
                            eigvals_only=True)
    got = fl.eigh_tridiagonal(np.array([1.0, 2, 3], np.float32), np.array([0.5, 0.5], np.float32),
                              eigvals_only=True)
    np.testing.assert_allclose(got, sl.eigh_tridiagonal([1.0, 2, 3], [0.5, 0.5],
                                                        eigvals_only=True), atol=1e-5)


def test_cholesky_reads_one_triangle_and_its_gradient_goes_there():
    """scipy.linalg.cholesky/cho_factor read only the triangle `lower` names (SciPy's values
    on a matrix whose other triangle is junk), so the gradient is zero on the other triangle
    and equals finite differences (JAX 0.11's; 0.10.2 gave the other triangle a share)."""
    import scipy.linalg
    from fluxion._src.test_util import numerical_jvp
    from fluxion.scipy import linalg as fsl
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 4))
    spd = (a @ a.T + 4 * np.eye(4)).astype(np.float32)
    junk = spd + np.triu(np.full((4, 4), 5.0, np.float32), 1) - np.tril(np.ones((4, 4)), -1) * 3
    w = rng.standard_normal((4, 4))
    for lower in (True, False):
        x = spd + (np.triu(junk - spd, 1) if lower else np.tril(junk - spd, -1))
        np.testing.assert_allclose(np.asarray(fsl.cholesky(x, lower=lower)),
                                   scipy.linalg.cholesky(x, lower=lower), rtol=1e-5, atol=1e-5)
        with fluxion.enable_x64(True):
            def loss(m):
                return (fsl.cho_factor(m, lower=lower)[0] * w).sum()
            at = spd.astype(np.float64)
            got = np.asarray(fluxion.grad(loss)(at))
            want = np.reshape([numerical_jvp(loss, (at,), (unit.reshape(4, 4),), 1e-6)
                               for unit in np.eye(16)], (4, 4))
        np.testing.assert_allclose(got, want, atol=1e-7)
        other = np.triu(got, 1) if lower else np.tril(got, -1)
        assert not other.any()
    # Complex Hermitian input: forward mode against finite differences (the diagonal's
    # imaginary part is not read either).
    c = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    with fluxion.enable_x64(True):
        fluxion.test_util.check_grads(lambda m: fsl.cholesky(m, lower=True),
                                      (c @ c.conj().T + 3 * np.eye(3),), 2, modes=("fwd",))


@pytest.mark.parametrize("a_shape,b_shape", [((3, 4, 4), (3, 4, 2)), ((3, 4, 4), (4, 2)),
                                             ((2, 1, 4, 4), (3, 4, 2)), ((4, 4), (2, 4, 3)),
                                             ((3, 4, 4), (3, 4))])
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_solve_batched_as_jax(a_shape, b_shape, trans):
    """Batches of factorizations broadcast against b as in JAX (b one dimension short of the
    factorization and matching its size is a batch of vectors, with JAX's FutureWarning)."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        want = jsl.lu_solve(jsl.lu_factor(a), b, trans=trans)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        got = fl.lu_solve(fl.lu_factor(a), b, trans=trans)
    assert [w.category for w in ours if w.category is FutureWarning] == \
        [w.category for w in theirs if w.category is FutureWarning]
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    vector = len(b_shape) == len(a_shape) - 1 and b_shape[-1] == a_shape[-1]
    op = np.swapaxes(a, -1, -2) if trans else a  # (a is real: trans 2 is trans 1)
    expected = np.linalg.solve(op, b[..., None] if vector else b)
    np.testing.assert_allclose(np.asarray(got), expected[..., 0] if vector else expected,
                               rtol=1e-4, atol=1e-4)  # float32 when x64 is off
