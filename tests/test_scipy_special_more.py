"""The scipy.special functions built on series, continued fractions and Weideman's Faddeeva
approximation: values against SciPy (float64 and float32, edge arguments), dtypes and weak
types against JAX, gradients against finite differences, jit and vmap."""
import itertools
import warnings

import jax
import jax.scipy.special as jsp
import numpy as np
import pytest
import scipy.special as ssp

import fluxion
import fluxion.scipy.special as sp
from fluxion.test_util import check_grads

RNG = np.random.default_rng(0)
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan]
REALS = np.concatenate([-np.logspace(-6, 2, 15), np.logspace(-9, 2.8, 40), [1.0, 2.0, 40.0],
                        EDGES])
NONNEG = REALS[REALS >= 0]


def _scipy(name, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return getattr(ssp, name)(*args)


def _close(got, want, rtol, atol=0.0):
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol, equal_nan=True)


UNARY = [("erfcx", REALS, 1e-12), ("dawsn", REALS, 1e-12), ("exp1", REALS, 1e-13),
         ("expi", REALS, 1e-13), ("spence", REALS, 1e-13), ("sici", REALS, 1e-13),
         ("fresnel", np.concatenate([REALS, np.logspace(2.8, 5, 10)]), 1e-9)]
# float32 cannot hold pi x^2 / 2 precisely enough for the Fresnel phase far out
F32_LIMIT = {"fresnel": 100.0}


@pytest.mark.parametrize("name,x,rtol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_match_scipy_f64(x64, name, x, rtol):
    got = getattr(sp, name)(x)
    _close(got, _scipy(name, x), rtol, atol=1e-300)
    leaves = got if isinstance(got, tuple) else (got,)
    assert all(v.dtype == np.float64 for v in leaves)


@pytest.mark.parametrize("name,x,rtol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_f32_dtypes_and_weak_types_match_jax(name, x, rtol):
    x32 = x[~(np.abs(x) > F32_LIMIT.get(name, np.inf))].astype(np.float32)
    with np.errstate(over="ignore"):
        want64 = _scipy(name, x32.astype(np.float64))
        # rounded to float32, where large values overflow to inf as they must
        want = (tuple(w.astype(np.float32) for w in want64) if isinstance(want64, tuple)
                else want64.astype(np.float32))
    got = getattr(sp, name)(x32)
    _close(got, want, rtol=2e-5, atol=1e-30)
    arguments = [x32, 1.5] if name == "spence" else [x32, np.int32(2), 1.5, np.float16(0.5)]
    for arg in arguments:
        # JAX is asked for types only: its exp1 on float16 never returns (its loop cannot
        # converge in half precision), which hangs every later JAX call in the process.
        g = getattr(sp, name)(arg)
        w = jax.eval_shape(getattr(jsp, name), arg)
        for gv, wv in zip(g if isinstance(g, tuple) else (g,), w if isinstance(w, tuple) else (w,)):
            assert gv.dtype == wv.dtype, arg
            assert gv.aval.weak_type == wv.weak_type, arg


EXPN_X = np.array([0.0, 1e-6, 0.3, 1.0, 1.0001, 2.5, 20.0, 200.0, np.inf, -1.0, np.nan])


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 30])
def test_expn_matches_scipy(x64, n):
    _close(sp.expn(n, EXPN_X), _scipy("expn", n, EXPN_X), 1e-13, atol=1e-300)


def test_expn_edges_and_jax_differences():
    # E_n(0) = 1/(n-1) (SciPy; JAX gives 1/n), negative and non-integer n: NaN (as JAX).
    np.testing.assert_allclose(sp.expn(np.array([2, 3, 5]), 0.0), [1.0, 0.5, 0.25])
    assert np.isnan(sp.expn(-1, 1.0)) and np.isnan(sp.expn(1.5, 1.0))
    assert np.isnan(jsp.expn(1.5, 1.0))
    assert sp.expn(1, 0.0) == np.inf
    assert sp.expn(2, np.float32(1)).dtype == jsp.expn(2, np.float32(1)).dtype


def test_wofz_matches_scipy(x64):
    z = (RNG.standard_normal((300, 2)) * 6) @ np.array([1, 1j])
    z = np.concatenate([z, [0j, 1e-9 + 0j, 3j, -3j, 30 + 0.1j, -30 - 0.1j, 1e3 + 1e3j, 5 - 0j]])
    got = sp.wofz(z)
    assert got.dtype == np.complex128
    _close(got, ssp.wofz(z), 1e-12)
    _close(sp.erfcx(z), ssp.erfcx(z), 1e-12)
    assert sp.wofz(np.float32(1)).dtype == jsp.wofz(np.float32(1)).dtype == np.complex64
    assert sp.wofz(np.float16(1)).dtype == np.complex64  # as JAX: no half-precision complex
    small = z[np.abs(ssp.wofz(z)) < 1e30]  # the rest overflows complex64
    _close(sp.wofz(small.astype(np.complex64)), ssp.wofz(small), 2e-5)


def test_erfcx_extremes():
    with fluxion.enable_x64(True):
        assert sp.erfcx(np.inf) == 0 and sp.erfcx(-np.inf) == np.inf
        assert sp.erfcx(-30.0) == np.inf
        np.testing.assert_allclose(sp.erfcx(1e300), ssp.erfcx(1e300), rtol=1e-14)
    assert sp.erfcx(np.float32(1e30)) > 0


def _grid(*axes):
    return [np.asarray(v, np.float64) for v in np.array(list(itertools.product(*axes))).T]


def test_hyp1f1_matches_scipy(x64):
    a, b, x = _grid([-3.0, -1.5, -0.5, 0.0, 0.3, 1.0, 2.5, 7.0], [-2.5, 0.5, 1.0, 3.2, 10.0],
                    [-150.0, -30.0, -5.0, -0.5, 0.0, 0.1, 1.0, 4.0, 20.0, 60.0, 99.0, 101.0,
                     200.0])
    _close(sp.hyp1f1(a, b, x), _scipy("hyp1f1", a, b, x), 1e-10, atol=1e-300)
    assert sp.hyp1f1(1.0, 0.0, 1.0) == np.inf == jsp.hyp1f1(1.0, 0.0, 1.0)


def test_hyp2f1_matches_scipy(x64):
    a, b, c, x = _grid([-3.0, -1.5, 0.0, 0.3, 1.0, 2.5], [-3.0, -1.5, 0.0, 0.3, 1.0, 2.5],
                       [-2.5, 0.5, 1.0, 3.2, 10.0],
                       [-20.0, -3.0, -0.9, -0.5, 0.0, 0.3, 0.7, 0.9, 0.95, 0.999, 1.0])
    _close(sp.hyp2f1(a, b, c, x), _scipy("hyp2f1", a, b, c, x), 1e-7, atol=1e-15)
    # integer c - a - b near 1: the logarithmic case
    for args in [(1.0, 1.0, 2.0, 0.999), (0.5, 1.5, 4.0, 0.97), (1.5, 2.5, 2.0, 0.99),
                 (0.7, 1.2, 2.9, 0.95)]:  # the last: c - a - b is 1 only up to rounding
        _close(sp.hyp2f1(*args), _scipy("hyp2f1", *args), 1e-9)
    # above 1: SciPy's inf, or the real closed forms (1 - x)^-b where c == a
    for args in [(1.0, 1.0, 3.0, 1.5), (0.45, 0.7, 0.45, 1.5), (1.0, 1.0, 1.0, 1.5),
                 (2.0, 3.0, 3.0, 3.0), (3.0, 2.0, 3.0, 1.5), (-2.0, 1.5, 2.5, 3.0)]:
        _close(sp.hyp2f1(*args), _scipy("hyp2f1", *args), 1e-9)
    assert sp.hyp2f1(1.0, 1.0, -2.0, 0.5) == np.inf


def test_hyp_f32_and_dtypes_match_jax():
    args = (np.float32(1.5), np.float32(2.5), np.float32(0.4))
    for name, a in [("hyp1f1", args), ("hyp2f1", (np.float32(0.5),) + args)]:
        got, want = getattr(sp, name)(*a), getattr(jsp, name)(*a)
        assert got.dtype == want.dtype == np.float32
        assert got.aval.weak_type == want.weak_type
        np.testing.assert_allclose(got, want, rtol=1e-5)
    with pytest.raises(ValueError, match="complex"):
        sp.hyp1f1(1j, 1.0, 1.0)


def test_owens_t_matches_scipy(x64):
    h, a = _grid([0.0, 0.1, 1.0, -2.0, 5.0, 10.0, np.inf, 0.5, 3.0, 30.0],
                 [0.0, 0.5, 1.0, 2.0, -3.0, 0.3, np.inf, -np.inf, 100.0, 1e-8])
    # SciPy loses ~1e-9 relative accuracy at tiny a and large h: there the truth is
    # (1 / 2 pi) integral_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx from mpmath (40 digits).
    scipy_ok = ~((a == 1e-8) & (np.abs(h) >= 5) & np.isfinite(h))
    _close(sp.owens_t(h[scipy_ok], a[scipy_ok]), _scipy("owens_t", h[scipy_ok], a[scipy_ok]),
           1e-12, atol=1e-300)
    _close(sp.owens_t(np.array([5.0, 10.0, 30.0]), 1e-8),
           [5.9311527352541186e-15, 3.069700722911986e-31, 5.878997495532176e-205], 1e-13)
    got = sp.owens_t(np.float32(0.7), np.float32(2.0))
    assert got.dtype == jsp.owens_t(np.float32(0.7), np.float32(2.0)).dtype
    np.testing.assert_allclose(got, ssp.owens_t(0.7, 2.0), rtol=1e-6)
    assert np.isnan(sp.owens_t(np.nan, 1.0))


def test_bernoulli_matches_scipy():
    with fluxion.enable_x64(True):
        # fluxion's are exact fractions rounded once; SciPy's own carry ~1e-12 error
        np.testing.assert_allclose(sp.bernoulli(40), ssp.bernoulli(40), rtol=1e-11)
    got, want = sp.bernoulli(5), jsp.bernoulli(5)
    assert got.dtype == want.dtype and got.shape == want.shape == (6,)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert sp.bernoulli(0).shape == (1,)
    with pytest.raises(ValueError, match="non-negative"):
        sp.bernoulli(-1)


def test_bessel_jn_matches_scipy(x64):
    z = np.array([0.0, 1e-3, 0.1, 1.0, 5.0, 10.0, -3.0, 20.0])  # |z| well below n_iter = 50
    got = sp.bessel_jn(z, v=6)
    assert got.shape == (7, 8)
    np.testing.assert_allclose(got, [ssp.jv(k, z) for k in range(7)], atol=1e-14)
    got32 = sp.bessel_jn(z[:6].astype(np.float32), v=3)  # JAX's overflows to NaN here
    np.testing.assert_allclose(got32, [ssp.jv(k, z[:6]) for k in range(4)], atol=2e-6)
    assert got32.dtype == np.float32
    grid = RNG.uniform(0.5, 8, (2, 3))
    np.testing.assert_allclose(sp.bessel_jn(grid, v=2, n_iter=60),
                               [ssp.jv(k, grid) for k in range(3)], atol=1e-13)
    with pytest.raises(ValueError, match="complex"):
        sp.bessel_jn(1j, v=1)


def test_sph_harm_y_matches_scipy(x64):
    n = np.array([0, 1, 1, 2, 3, 5, 7, 7, 4, 10, 10, 2])
    m = np.array([0, 1, -1, 2, -2, 3, 0, -7, 5, 10, -9, 3])
    theta = np.linspace(0.05, 3.1, 12)
    phi = np.linspace(-2, 5, 12)
    _close(sp.sph_harm_y(n, m, theta, phi), ssp.sph_harm_y(n, m, theta, phi), 1e-12,
           atol=1e-15)
    got = sp.sph_harm_y(n[:9], m[:9], theta[:9], phi[:9], n_max=12)
    _close(got, ssp.sph_harm_y(n[:9], m[:9], theta[:9], phi[:9]), 1e-12, atol=1e-15)


def test_sph_harm_y_f32_matches_jax():
    n, m = np.array([0, 1, 2, 3, 4]), np.array([0, -1, 2, 1, -3])
    theta, phi = np.linspace(0.2, 2.9, 5, dtype=np.float32), np.linspace(-1, 4, 5,
                                                                          dtype=np.float32)
    got, want = sp.sph_harm_y(n, m, theta, phi), jsp.sph_harm_y(n, m, theta, phi)
    assert got.dtype == want.dtype == np.complex64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="diff_n"):
        sp.sph_harm_y(n, m, theta, phi, diff_n=1)
    jitted = fluxion.jit(lambda t: sp.sph_harm_y(n, m, t, phi, n_max=4))(theta)
    np.testing.assert_allclose(jitted, got, rtol=1e-6)


def test_spence_rejects_other_dtypes_as_jax():
    for arg in [np.int32(2), np.float16(0.5)]:
        for mod in (sp, jsp):
            with pytest.raises(TypeError, match="not supported"):
                mod.spence(arg)


def test_complex_inputs_rejected():
    for name in ["dawsn", "exp1", "expi", "sici"]:  # fresnel: NotImplementedError, as JAX
        with pytest.raises(ValueError, match="complex"):
            getattr(sp, name)(np.complex64(1 + 1j))
    with pytest.raises(ValueError, match="complex"):
        sp.owens_t(1j, 1.0)


GRAD_CASES = [
    ("erfcx", lambda x: sp.erfcx(x), [-1.3, 0.2, 2.0, 7.0]),
    ("dawsn", lambda x: sp.dawsn(x), [-2.0, 0.1, 0.7, 9.0]),
    ("exp1", lambda x: sp.exp1(x), [0.3, 1.5, 7.0]),
    ("expi", lambda x: sp.expi(x), [-2.0, 0.4, 3.0, 45.0]),
    ("expn", lambda x: sp.expn(3, x), [0.5, 2.0]),
    ("si", lambda x: sp.sici(x)[0], [-1.0, 0.5, 3.0]),
    ("ci", lambda x: sp.sici(x)[1], [0.5, 3.0, -2.5]),
    ("fresnel_s", lambda x: sp.fresnel(x)[0], [-0.7, 1.2, 2.5]),
    ("fresnel_c", lambda x: sp.fresnel(x)[1], [0.4, 3.3]),
    ("spence", lambda x: sp.spence(x), [0.2, 0.9, 1.0, 3.0]),
    ("owens_t_h", lambda h: sp.owens_t(h, 0.7), [0.3, -1.5, 2.0]),
    ("owens_t_a", lambda a: sp.owens_t(0.8, a), [0.5, -2.0, 3.0]),
    ("hyp1f1_x", lambda x: sp.hyp1f1(0.7, 1.9, x), [-3.0, 0.5, 12.0]),
    ("hyp1f1_a", lambda a: sp.hyp1f1(a, 1.9, 2.0), [0.4, 1.7]),
    ("hyp1f1_b", lambda b: sp.hyp1f1(0.7, b, -2.0), [1.3, 2.5]),
    ("hyp2f1_x", lambda x: sp.hyp2f1(0.7, 1.2, 2.9, x), [-2.0, 0.3, 0.95]),
    ("hyp2f1_c", lambda c: sp.hyp2f1(0.7, 1.2, c, 0.4), [1.6, 3.1]),
    ("bessel_jn", lambda z: sp.bessel_jn(z, v=3), [0.5, 4.0]),
]


@pytest.mark.parametrize("name,fn,points", GRAD_CASES, ids=[g[0] for g in GRAD_CASES])
def test_gradients(x64, name, fn, points):
    check_grads(fn, (np.asarray(points),), order=1, modes=["fwd", "rev"], atol=1e-6,
                rtol=1e-6)


def test_wofz_gradient_is_holomorphic(x64):
    z = np.array([0.3 + 0.4j, -1.2 + 2.0j, 0.5 - 0.7j])
    out, tangent = fluxion.jvp(sp.wofz, (z,), (np.ones_like(z),))
    h = 1e-6
    np.testing.assert_allclose(tangent, (ssp.wofz(z + h) - ssp.wofz(z - h)) / (2 * h),
                               rtol=1e-7)


def test_jit_and_vmap():
    x = np.linspace(0.1, 5, 12, dtype=np.float32).reshape(3, 4)
    for fn in [sp.erfcx, sp.dawsn, sp.exp1, sp.expi, sp.spence,
               lambda v: sp.sici(v)[1], lambda v: sp.fresnel(v)[0],
               lambda v: sp.hyp1f1(0.5, 1.5, v), lambda v: sp.owens_t(v, 0.5),
               lambda v: sp.hyp2f1(0.5, 1.5, 2.5, -v), lambda v: sp.expn(2, v)]:
        want = fn(x)
        np.testing.assert_allclose(fluxion.jit(fn)(x), want, rtol=1e-6)
        np.testing.assert_allclose(fluxion.vmap(fn)(x), want, rtol=1e-6)
    np.testing.assert_allclose(fluxion.vmap(lambda v: sp.bessel_jn(v, v=2))(x[0]),
                               sp.bessel_jn(x[0], v=2).T, rtol=1e-6)
