"""lax special functions against scipy.special (f32 and f64), JAX's derivatives and dtypes."""
import jax
import numpy as np
import pytest
import scipy.special as sp

import fluxion
from fluxion import lax
from fluxion.test_util import check_grads

A = np.array([0.1, 0.5, 1.0, 1.0, 2.5, 10.0, 50.0, 300.0, 3.0, 0.7])
X = np.array([0.05, 0.3, 2.0, 1.99, 2.5, 8.0, 60.0, 290.0, 30.0, 1e-3])
BA = np.array([0.4, 1.1, 2.0, 5.0, 0.8, 20.0, 100.0, 3.0])
BB = np.array([0.3, 1.0, 2.0, 5.0, 0.7, 20.0, 100.0, 0.5])
BX = np.array([0.1, 0.5, 0.9, 0.3, 0.99, 0.5, 0.6, 0.01])
XS = np.array([-40.0, -7.5, -1.0, -1e-3, 0.0, 0.3, 2.0, 8.0, 19.9, 20.1, 55.0, 700.0])


def _cases():
    return [
        ("igamma", lambda m: m.igamma, (A, X), sp.gammainc),
        ("igammac", lambda m: m.igammac, (A, X), sp.gammaincc),
        ("betainc", lambda m: m.betainc, (BA, BB, BX), sp.betainc),
        ("bessel_i0e", lambda m: m.bessel_i0e, (XS,), sp.i0e),
        ("bessel_i1e", lambda m: m.bessel_i1e, (XS,), sp.i1e),
        ("zeta", lambda m: m.zeta, (np.array([1.5, 2.0, 3.5, 7.0]), np.array([0.5, 1.0, 2.0, 9.0])),
         sp.zeta),
    ]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_values_against_scipy_f64(case, x64):
    _, fn, args, ref = case
    got = fn(lax)(*args)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref(*args), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fluxion.jit(fn(lax))(*args), got, rtol=1e-14)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_values_against_scipy_f32(case):
    _, fn, args, ref = case
    args32 = [a.astype(np.float32) for a in args]
    got = fn(lax)(*args32)
    assert got.dtype == np.float32
    want = ref(*[a.astype(np.float64) for a in args32])
    # a*log(x) - lgamma(a) loses about a*eps32 for large a, as in JAX.
    np.testing.assert_allclose(got, want, rtol=3e-4, atol=1e-6)
    theirs = np.asarray(fn(jax.lax)(*args32))
    np.testing.assert_allclose(got, theirs, rtol=3e-4, atol=1e-6)


def test_half_precision_and_edge_values():
    out = lax.igamma(np.float16(2.0), np.float16(1.5))
    assert out.dtype == np.float16
    np.testing.assert_allclose(float(out), sp.gammainc(2.0, 1.5), rtol=2e-3)
    edge = lax.igamma(np.array([1.0, 1.0, -1.0, 1.0, np.nan], np.float32),
                      np.array([0.0, np.inf, 1.0, -1.0, 1.0], np.float32))
    np.testing.assert_array_equal(edge, [0.0, 1.0, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(
        lax.betainc(np.float32(2), np.float32(3), np.array([0.0, 1.0, 1.5], np.float32)),
        [0.0, 1.0, np.nan])
    with pytest.raises(TypeError):
        lax.igamma(np.int32(1), np.int32(2))
    with fluxion.enable_x64(True), pytest.raises(TypeError):
        lax.igamma(np.float32(1), np.float64(2))


def test_igamma_grad_a_and_random_gamma_grad_match_jax(x64):
    jax.config.update("jax_enable_x64", True)
    try:
        np.testing.assert_allclose(lax.igamma_grad_a(A, X), np.asarray(jax.lax.igamma_grad_a(A, X)),
                                   rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(lax.random_gamma_grad(A, X),
                                   np.asarray(jax.lax.random_gamma_grad(A, X)), rtol=1e-10)
    finally:
        jax.config.update("jax_enable_x64", False)
    h = 1e-6
    fd = (sp.gammainc(A + h, X) - sp.gammainc(A - h, X)) / (2 * h)
    np.testing.assert_allclose(lax.igamma_grad_a(A, X), fd, rtol=1e-6, atol=1e-9)


def test_gradients(x64):
    # float64 needs a smaller step than the default 1e-4 here (as it would in JAX)
    check_grads(lax.igamma, (A, X), order=1, modes=["fwd", "rev"], eps=1e-6)
    check_grads(lax.igammac, (A, X), order=1, modes=["fwd", "rev"], eps=1e-6)
    check_grads(lambda x: lax.betainc(2.0, 3.0, x), (BX,), order=2, modes=["fwd", "rev"])
    smooth = np.array([-7.5, -1.0, 0.3, 2.0, 8.0, 19.9, 20.1, 55.0])  # away from the kink at 0
    check_grads(lax.bessel_i0e, (smooth,), order=2, modes=["fwd", "rev"])
    check_grads(lax.bessel_i1e, (smooth,), order=2, modes=["fwd", "rev"])
    with pytest.raises(ValueError, match="Betainc gradient"):
        fluxion.grad(lambda a: lax.betainc(a, 2.0, 0.5))(1.0)


def test_vmap_against_loop():
    a, x = A.astype(np.float32), X.astype(np.float32)
    for f in (lax.igamma, lax.igammac, lax.igamma_grad_a, lax.random_gamma_grad):
        got = fluxion.vmap(f, in_axes=(0, None))(a[:2], x)
        want = np.stack([f(a[i], x) for i in range(2)])
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7)
    got = fluxion.vmap(lax.betainc, in_axes=(None, 0, 0))(np.float32(2), BB.astype(np.float32),
                                                          BX.astype(np.float32))
    np.testing.assert_allclose(got, sp.betainc(2.0, BB, BX), rtol=1e-4)


def test_primitives_are_what_the_functions_bind():
    jaxpr = fluxion.make_jaxpr(lambda a, x: lax.igamma(a, x) + lax.zeta(a, x)
                               + lax.bessel_i0e(x) + lax.betainc(a, a, x))(1.0, 0.5)
    prims = {e.primitive for e in jaxpr.jaxpr.eqns}
    assert {lax.igamma_p, lax.zeta_p, lax.bessel_i0e_p,
            lax.regularized_incomplete_beta_p} <= prims


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_igamma_at_a_zero_is_the_limit(dtype, x64):
    # P(0, x) = 1 and Q(0, x) = 0 for x > 0 (SciPy; JAX agrees for x >= 1); (0, 0) is NaN.
    x = np.array([0.0, 0.1, 0.5, 1.0, 2.0, np.inf], dtype)
    a = np.zeros_like(x)
    np.testing.assert_array_equal(np.asarray(lax.igamma(a, x)), sp.gammainc(a, x))
    np.testing.assert_array_equal(np.asarray(lax.igammac(a, x)), sp.gammaincc(a, x))
    assert np.isnan(np.asarray(lax.igamma(-a - 1, x))).all()
