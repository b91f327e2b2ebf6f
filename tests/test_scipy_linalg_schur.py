"""scipy.linalg schur, hessenberg, rsf2csf, sqrtm, funm, solve_sylvester against SciPy (values,
reconstruction identities), JAX as the oracle for dtypes, jit against eager, batches."""
import numpy as np
import pytest
import scipy.linalg as sl

import fluxion
import fluxion.numpy as fnp
import fluxion.scipy.linalg as fsl

from _linalg_helpers import conj_transpose, random_matrix, rng_for, tolerance

jax = pytest.importorskip("jax")
jsl = jax.scipy.linalg

rng = np.random.default_rng(1)


@pytest.fixture(autouse=True)
def _fresh_rng(request):
    global rng
    rng = rng_for(request)


def _rand(shape, dtype):
    return random_matrix(rng, shape, dtype)


def _tol(dtype):
    return tolerance(dtype, double=1e-10)


_H = conj_transpose


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("output", ["real", "complex"])
def test_schur_and_rsf2csf(x64_both, dtype, output):
    a = _rand((2, 5, 5), dtype)
    t, z = fsl.schur(a, output=output)
    jt, jz = jsl.schur(a, output=output)
    assert t.dtype == jt.dtype and z.dtype == jz.dtype
    t, z = np.asarray(t), np.asarray(z)
    np.testing.assert_allclose(z @ t @ _H(z), a, atol=_tol(dtype) * 10)
    st, _ = sl.schur(a[0], output=output)
    np.testing.assert_allclose(t[0], st, atol=_tol(dtype) * 10)
    if output == "real" and not np.iscomplexobj(a):
        tc, zc = fsl.rsf2csf(t, z)
        jtc, jzc = jsl.rsf2csf(t, z)
        assert tc.dtype == jtc.dtype
        tc, zc = np.asarray(tc), np.asarray(zc)
        assert np.all(np.tril(tc, -1) == 0)
        np.testing.assert_allclose(zc @ tc @ _H(zc), a, atol=_tol(dtype) * 10)
        stc, szc = sl.rsf2csf(t[1], z[1])
        np.testing.assert_allclose(tc[1], stc, atol=_tol(dtype) * 10)
        np.testing.assert_allclose(zc[1], szc, atol=_tol(dtype) * 10)
        jit = fluxion.jit(fsl.rsf2csf)(t, z)
        np.testing.assert_allclose(jit[0], tc, atol=_tol(dtype))


def test_schur_errors():
    with pytest.raises(ValueError, match="output"):
        fsl.schur(np.eye(2), output="other")
    with pytest.raises(ValueError, match="square"):
        fsl.schur(np.ones((2, 3)))
    with pytest.raises(ValueError, match="must match"):
        fsl.rsf2csf(np.eye(2), np.eye(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_hessenberg(x64_both, dtype):
    a = _rand((3, 5, 5), dtype)
    h, q = fsl.hessenberg(a, calc_q=True)
    jh, jq = jsl.hessenberg(a, calc_q=True)
    assert h.dtype == jh.dtype and q.dtype == jq.dtype
    h, q = np.asarray(h), np.asarray(q)
    assert np.all(np.tril(h, -2) == 0)
    np.testing.assert_allclose(q @ h @ _H(q), a, atol=_tol(dtype) * 10)
    sh, sq = sl.hessenberg(a[2], calc_q=True)
    np.testing.assert_allclose(h[2], sh, atol=_tol(dtype) * 10)
    np.testing.assert_allclose(q[2], sq, atol=_tol(dtype) * 10)
    np.testing.assert_allclose(fsl.hessenberg(a), h, atol=_tol(dtype))
    assert fsl.hessenberg(np.ones((0, 0), np.float32)).shape == (0, 0)
    h1 = fsl.hessenberg(np.full((1, 1), 3.0, dtype))
    np.testing.assert_allclose(h1, [[3.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_sqrtm(x64_both, dtype):
    a = _rand((5, 5), dtype)
    s = fsl.sqrtm(a)
    js = jsl.sqrtm(a)
    assert s.dtype == js.dtype
    s = np.asarray(s)
    np.testing.assert_allclose(s @ s, a, atol=_tol(dtype) * 100)
    np.testing.assert_allclose(s, sl.sqrtm(a.astype(np.complex128)), atol=_tol(dtype) * 100)
    spd = a @ _H(a) + 5 * np.eye(5)
    np.testing.assert_allclose(fluxion.jit(fsl.sqrtm)(spd), sl.sqrtm(spd),
                               atol=_tol(dtype) * 100)
    with pytest.raises(NotImplementedError):
        fsl.sqrtm(a, blocksize=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_funm(x64_both, dtype):
    a = _rand((5, 5), dtype)
    f = fsl.funm(a, fnp.exp)
    assert f.dtype == jsl.funm(a, jax.numpy.exp).dtype
    np.testing.assert_allclose(f, sl.expm(a), atol=_tol(dtype) * 100)
    F, err = fsl.funm(a, lambda x: fnp.sin(x) + 2 * fnp.cos(x), disp=False)
    sF, serr = sl.funm(a, lambda x: np.sin(x) + 2 * np.cos(x), disp=False)
    np.testing.assert_allclose(F, sF, atol=_tol(dtype) * 100)
    jF, jerr = jsl.funm(a, lambda x: jax.numpy.sin(x) + 2 * jax.numpy.cos(x), disp=False)
    np.testing.assert_allclose(err, jerr, rtol=1e-3)
    with pytest.raises(ValueError, match="square"):
        fsl.funm(np.ones((2, 3)), fnp.exp)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("method", ["schur", "eigen"])
def test_solve_sylvester(x64_both, dtype, method):
    a, b, c = _rand((4, 4), dtype), _rand((3, 3), dtype), _rand((4, 3), dtype)
    x = fsl.solve_sylvester(a, b, c, method=method)
    jx = jsl.solve_sylvester(a, b, c, method=method)
    assert x.dtype == jx.dtype
    x = np.asarray(x)
    np.testing.assert_allclose(a @ x + x @ b, c, atol=_tol(dtype) * 100)
    want = sl.solve_sylvester(a, b, c)
    np.testing.assert_allclose(x, want, atol=_tol(dtype) * 100 * max(1.0, np.abs(want).max()))
    batch = fsl.solve_sylvester(np.stack([a, 2 * a]), b, c, method=method)
    np.testing.assert_allclose(batch[0], x, atol=_tol(dtype) * 10)
    x2 = np.asarray(batch[1])
    np.testing.assert_allclose(2 * a @ x2 + x2 @ b, c, atol=_tol(dtype) * 100)
    np.testing.assert_allclose(fluxion.jit(fsl.solve_sylvester)(a, b, c), x,
                               atol=_tol(dtype) * 10)


def test_solve_sylvester_singular_and_errors():
    out = fsl.solve_sylvester(np.eye(2), -np.eye(2), np.ones((2, 2)))  # a_i + b_j = 0
    assert np.isnan(np.asarray(out)).all()
    with pytest.raises(ValueError, match="Incompatible shapes"):
        fsl.solve_sylvester(np.eye(3), np.eye(2), np.ones((2, 2)))
    with pytest.raises(ValueError, match="method"):
        fsl.solve_sylvester(np.eye(2), np.eye(2), np.ones((2, 2)), method="qr")


@pytest.mark.parametrize("shape,side", [((5, 3), "right"), ((3, 5), "left"), ((2, 4, 4), "right"),
                                        ((3, 5), "right"), ((5, 3), "left")])
def test_polar_qdwh(x64_both, shape, side):
    a = _rand(shape, np.float64)
    u, p = fsl.polar(a, side=side)
    u, p = np.asarray(u), np.asarray(p)
    np.testing.assert_allclose(u @ p if side == "right" else p @ u, a, atol=1e-10)
    if len(shape) == 2:
        su, sp = sl.polar(a, side=side)
        np.testing.assert_allclose(u, su, atol=1e-10)
        np.testing.assert_allclose(p, sp, atol=1e-10)
    if (shape[-2] >= shape[-1]) == (side == "right"):  # where JAX runs QDWH
        ju, jp = jsl.polar(a, side=side)
        np.testing.assert_allclose(u, ju, atol=1e-12)
        np.testing.assert_allclose(p, jp, atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_qr_pivoting_and_qr_multiply(x64_both, shape, dtype):
    a = _rand(shape, dtype)
    for mode in ("full", "economic", "r"):
        ours = fsl.qr(a, mode=mode, pivoting=True)
        theirs = jsl.qr(a, mode=mode, pivoting=True)
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            np.testing.assert_allclose(o, t, atol=1e-10)
    if len(shape) == 2:
        q, r, p = sl.qr(a, pivoting=True, mode="economic")
        np.testing.assert_array_equal(fsl.qr(a, pivoting=True, mode="economic")[2], p)
    m, n = shape[-2:]
    k = min(m, n)
    for mode, cshape in (("left", (k, 2)), ("right", (2, m)), ("left", (k,)), ("right", (m,))):
        c = _rand(cshape, dtype)
        for pivoting in (False, True):
            for conjugate in (False, True):
                ours = fsl.qr_multiply(a, c, mode=mode, pivoting=pivoting, conjugate=conjugate)
                theirs = jsl.qr_multiply(a, c, mode=mode, pivoting=pivoting,
                                         conjugate=conjugate)
                for o, t in zip(ours, theirs):
                    np.testing.assert_allclose(o, t, atol=1e-10)
    with pytest.raises(ValueError, match="not compatible"):
        fsl.qr_multiply(a, np.ones((m + 1, 2)), mode="right")
    with pytest.raises(ValueError, match="mode"):
        fsl.qr(a, mode="raw")


@pytest.mark.parametrize("call", [
    lambda m: fsl.schur(m), lambda m: fsl.hessenberg(m), lambda m: fsl.hessenberg(m, calc_q=True),
    lambda m: fsl.funm(m, np.exp)])
@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_integer_input_raises_type_error_like_jax(call, dtype):
    with pytest.raises(TypeError):
        call(np.eye(3, dtype=dtype))


def test_complex_schur_and_sqrtm_still_take_integers():
    a = np.array([[4, 1], [0, 9]], dtype=np.int32)
    np.testing.assert_allclose(fsl.sqrtm(a), [[2, 0.2], [0, 3]], atol=1e-5)
    t, z = fsl.schur(a, output="complex")
    np.testing.assert_allclose(z @ t @ z.conj().T, a, atol=1e-5)
