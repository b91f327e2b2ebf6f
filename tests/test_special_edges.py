"""Edge values of fluxion.scipy.special found by a sweep against JAX 0.10.2 and SciPy: NaN
propagation, SciPy's softmax axis default, complex and weighted logsumexp, tail derivatives,
far-out Fresnel integrals, the derivative of zeta."""
import jax
import jax.scipy.special as jsp
import numpy as np
import pytest
import scipy.special as ssp

import fluxion
import fluxion.scipy.special as sp


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_nan_y_propagates_where_x_is_zero(name):
    x = np.float32([0.0, -0.0, 0.0, 1.0])
    y = np.float32([np.nan, np.nan, 0.0 if name == "xlogy" else -1.0, np.nan])
    got = getattr(sp, name)(x, y)
    np.testing.assert_array_equal(got, getattr(jsp, name)(x, y))
    np.testing.assert_array_equal(got, getattr(ssp, name)(x, y))
    np.testing.assert_array_equal(fluxion.jit(getattr(sp, name))(x, y), got)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_reduces_over_all_axes_by_default(name):
    x = np.float32([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
    ours, theirs = getattr(sp, name), getattr(jsp, name)
    np.testing.assert_allclose(ours(x), getattr(ssp, name)(x), rtol=1e-6)
    np.testing.assert_allclose(ours(x, axis=0), theirs(x, axis=0), rtol=1e-6)
    np.testing.assert_allclose(ours(2.0), theirs(2.0))  # a scalar has no axis -1
    with pytest.raises(TypeError):
        ours(x, where=x > 0)  # as JAX's scipy version: no `where`
    with pytest.raises(TypeError):
        ours(x, 0)  # axis is keyword-only


def test_logsumexp_complex_keeps_the_phase():
    a = np.complex64([1 + 1j, -2 + 0.5j])
    np.testing.assert_allclose(sp.logsumexp(a), np.log(np.exp(a.astype(np.complex128)).sum()),
                               rtol=1e-6)
    out, sign = sp.logsumexp(a, return_sign=True)
    want_out, want_sign = jsp.logsumexp(a, return_sign=True)
    np.testing.assert_allclose(out, want_out, rtol=1e-6)
    np.testing.assert_allclose(sign, want_sign, rtol=1e-6)


def test_logsumexp_weights():
    # a zero weight removes its term even at a = inf; an integer b takes a's float type
    a = np.float32([np.inf, 1.0])
    assert float(sp.logsumexp(a, b=np.float32([0.0, 1.0]))) == 1.0
    got = sp.logsumexp(np.float32([1.0, 2.0]), b=np.int32([1, 2]))
    want = jsp.logsumexp(np.float32([1.0, 2.0]), b=np.int32([1, 2]))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_log_ndtr_derivative_in_the_lower_tail():
    x = np.float32([-30.0, -12.0, -3.0, 0.4, 6.0])
    got = fluxion.vmap(fluxion.grad(sp.log_ndtr))(x)
    x64 = x.astype(np.float64)
    want = np.exp(-0.5 * x64 ** 2 - 0.5 * np.log(2 * np.pi) - ssp.log_ndtr(x64))  # pdf / cdf
    # (the 3-term tail series of log_ndtr itself is off by 2e-5 at -30, as JAX's)
    np.testing.assert_allclose(got, want, rtol=5e-5)


def test_fresnel_far_out():
    x = np.float32([1e3, 1234.567, 1e4, 33333.3, 1e6, 1e8, 1e30, -1e30])
    s, c = sp.fresnel(x)
    want_s, want_c = ssp.fresnel(x.astype(np.float64))
    np.testing.assert_allclose(s, want_s, rtol=2e-7)
    np.testing.assert_allclose(c, want_c, rtol=2e-7)


def test_fresnel_derivative_exact_at_integer_squares():
    x = np.float32([1.0, 7.0, 2.5, -1.5])
    ds = fluxion.vmap(fluxion.grad(lambda v: sp.fresnel(v)[0]))(x)
    dc = fluxion.vmap(fluxion.grad(lambda v: sp.fresnel(v)[1]))(x)
    np.testing.assert_allclose(ds, np.sin(0.5 * np.pi * x.astype(np.float64) ** 2), atol=1e-7)
    np.testing.assert_allclose(dc, np.cos(0.5 * np.pi * x.astype(np.float64) ** 2), atol=1e-7)
    assert dc[0] == 0 and dc[1] == 0


def test_zeta_derivatives():
    x, q = np.float32([2.0, 3.0, 4.5]), np.float32([1.5, 2.0, 0.7])
    dq = fluxion.vmap(fluxion.grad(sp.zeta, 1))(x, q)
    np.testing.assert_allclose(dq, -x * ssp.zeta(x + 1.0, q), rtol=1e-5)  # -x zeta(x + 1, q)
    dx = fluxion.vmap(fluxion.grad(sp.zeta, 0))(x, q)
    # d/dx zeta(x, q) = -sum_k log(k + q) (k + q)^-x, from mpmath
    np.testing.assert_allclose(dx, [-1.0245078426159016, -0.19812624288563685,
                                    1.7086570570005437], rtol=1e-5)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_int32_input_gives_float32_with_x64(name):
    x = np.int32([1, 2, 3])
    with fluxion.enable_x64(True), jax.enable_x64(True):
        got, want = getattr(sp, name)(x), getattr(jsp, name)(x)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_hyp1f1_and_hyp2f1_limits():
    a, b = np.float32([1.0, 2.0, 0.5, 2.0]), np.float32([2.0, 1.0, 1.5, 1.0])
    got = sp.hyp1f1(a, b, np.float32([-np.inf, -np.inf, -np.inf, -30.0]))
    np.testing.assert_array_equal(got[:3], [0.0, 0.0, 0.0])
    # 1F1(2; 1; -30) = -29 exp(-30) (JAX 0.10.2 returns 3e6 here)
    np.testing.assert_allclose(got[3], -29 * np.exp(-30.0), rtol=1e-5)
    # a polynomial stays real above 1; 2F1 ~ (-x)^-min(a, b) at -inf
    got = sp.hyp2f1(np.float32([-2.0, 1.0, 0.5, 1.0]), np.float32([1.0, 1.0, 1.0, 1.0]),
                    np.float32([1.0, 2.0, 2.0, 2.0]), np.float32([3.0, -np.inf, -np.inf, 1.5]))
    np.testing.assert_array_equal(got[:3], [4.0, 0.0, 0.0])
    assert got[3] == ssp.hyp2f1(1.0, 1.0, 2.0, 1.5) == np.inf  # (SciPy's inf above 1)


def test_grad_of_wofz_on_real_input():
    # the transpose of lax.complex(x, constant zeros) needs the constant's shape
    x = np.float32([0.3, 1.5, -2.0])
    got = fluxion.vmap(fluxion.grad(lambda z: fluxion.numpy.real(sp.wofz(z))))(x)
    want = -2 * x * np.real(ssp.wofz(x.astype(np.float64)))  # Re(-2 z w(z) + 2i / sqrt(pi))
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_sph_harm_y_dtype_meets_the_default_float():
    n, m = np.array([1, 2]), np.array([0, 1])
    for angles, x64 in ((np.float32([0.5, 1.0]), True), (np.int32([1, 2]), False)):
        with fluxion.enable_x64(x64), jax.enable_x64(x64):
            got = sp.sph_harm_y(n, m, angles, angles)
            want = jsp.sph_harm_y(n, m, angles, angles)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def _complex_grid():
    rng = np.random.default_rng(1)
    scale = rng.choice([1.0, 1e-3, 1e-8, 0.0], 400)
    z = rng.uniform(-40, 40, 400) + 1j * rng.uniform(-40, 40, 400) * scale
    extra = [-2.5 + 0j, -3.2 + 0j, 0.3 + 0j, -1e3 + 0.5j, 1e30 + 1j, 5 + 300j, -5 - 300j,
             1 + 1j, 1e-30 + 0j, -1 + 0j, 0j, complex(np.nan, 0)]
    return np.concatenate([z, extra])


def test_complex_loggamma_principal_branch():
    z = _complex_grid()
    want = ssp.loggamma(z)
    with fluxion.enable_x64(True):
        np.testing.assert_allclose(sp.loggamma(z), want, rtol=1e-12, atol=1e-12)
    scale = np.maximum(1, np.abs(want))
    got32 = np.asarray(sp.loggamma(z.astype(np.complex64)), np.complex128)
    want32 = ssp.loggamma(z.astype(np.complex64).astype(np.complex128))
    np.testing.assert_allclose(got32 / scale, want32 / scale, rtol=0, atol=1e-5)


def test_complex_gamma():
    z = np.complex64([1 + 1j, -2.5 + 0.5j, 3 - 2j, -2 + 0j, 0.5 + 10j])
    got = sp.gamma(z)
    assert got.dtype == np.complex64  # as JAX
    np.testing.assert_allclose(got, ssp.gamma(z.astype(np.complex128)), rtol=1e-5)
    np.testing.assert_allclose(fluxion.jit(sp.gamma)(z), got, rtol=1e-6)


def test_half_precision_and_error_classes():
    half = np.float16([0.5])
    np.testing.assert_allclose(sp.hyp2f1(half, np.float16([1.0]), np.float16([1.5]), half),
                               ssp.hyp2f1(0.5, 1.0, 1.5, 0.5), rtol=1e-3)
    assert sp.hyp2f1(half, half, np.float16([1.5]), half).dtype == np.float16
    with pytest.raises(TypeError):
        sp.ndtr(np.float16([1.0]))  # as JAX: float32 and float64 only
    with pytest.raises(NotImplementedError):
        sp.fresnel(np.complex64([1j]))


def test_gammaincc_small_a_without_cancellation():
    a = np.float32([1e-5, 1e-5, 1e-3, 0.1, 0.2, 1e-8, 0.01])
    x = np.float32([1.0, 0.5, 1.9, 0.01, 1.5, 1e-3, 1.99])
    want = ssp.gammaincc(a.astype(np.float64), x.astype(np.float64))
    np.testing.assert_allclose(sp.gammaincc(a, x), want, rtol=5e-6)
    np.testing.assert_allclose(sp.gammainc(a, x), 1 - want, rtol=1e-6)


@pytest.mark.parametrize("name", ["rel_entr", "kl_div"])
def test_rel_entr_jit_agrees_with_eager_far_out(name):
    p = np.float32([1e-30, 1e30, 2.0, 1e30, 1e-30, 0.5])
    q = np.float32([1e-30, 1e30, 3.0, 1e-30, 1e30, 0.5])
    eager = getattr(sp, name)(p, q)
    np.testing.assert_array_equal(fluxion.jit(getattr(sp, name))(p, q), eager)
    want = getattr(ssp, name)(p.astype(np.float64), q.astype(np.float64))
    np.testing.assert_allclose(eager, want, rtol=1e-6)
    a, b = np.float32([0.5, 2.0]), np.float32([1.5, 0.3])
    grads = fluxion.grad(lambda a, b: getattr(sp, name)(a, b).sum(), (0, 1))(a, b)
    extra = 0.0 if name == "kl_div" else 1.0  # kl_div adds q - p
    np.testing.assert_allclose(grads[0], np.log(a / b) + extra, rtol=1e-6)
    np.testing.assert_allclose(grads[1], -a / b + (1 - extra), rtol=1e-6)
