"""scipy.special against SciPy (values, float32 and float64), JAX (dtypes), gradients."""
import warnings

import jax
import jax.scipy.special as jsp
import numpy as np
import pytest
import scipy.special as ssp

import fluxion
import fluxion.scipy.special as sp
from fluxion.test_util import check_grads

X = np.array([-30, -12, -9.5, -3, -0.5, 0, 0.3, 2, 5.5, 9, 40.0])
P = np.array([0, 1e-300, 1e-20, 1e-5, 0.01, 0.135, 0.3, 0.5, 0.7, 0.9999, 1 - 1e-12, 1])
POS = np.array([0.1, 0.5, 1, 2.5, 7, 30.0])
A, B = POS, POS[::-1]
CASES = [
    ("ndtr", (X,)), ("log_ndtr", (X,)), ("ndtri", (P,)), ("erf", (X,)), ("erfc", (X,)),
    ("erfinv", (np.linspace(-0.99, 0.99, 7),)), ("expit", (X,)), ("logit", (P[3:-3],)),
    ("gamma", (X[2:],)), ("gammaln", (POS,)), ("gammasgn", (X,)), ("digamma", (POS,)),
    ("beta", (A, B)), ("betaln", (A, B)), ("poch", (A, B)), ("xlogy", (np.array([0., 1, 2]), np.array([0., 3, 4]))),
    ("xlog1py", (np.array([0., 1, 2]), np.array([-1., 3, 4]))),
    ("entr", (np.array([-1.0, 0, 0.5, 2]),)), ("rel_entr", (np.array([0.0, 1, 2, -1]), np.array([0.0, 3, 0, 1]))),
    ("kl_div", (A, B)), ("boxcox", (POS, 0.3)), ("boxcox1p", (POS, 0.0)),
    ("loggamma", (np.array([-0.5, 0.5, 3.0]),)),
]


@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_values_match_scipy_in_float64(name, args, x64):
    got = getattr(sp, name)(*args)
    want = getattr(ssp, name)(*args)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-300, equal_nan=True)


@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_float32_values_and_dtypes_match_jax(name, args):
    args32 = [np.asarray(a, np.float32) for a in args]
    got = getattr(sp, name)(*args32)
    want = getattr(jsp, name)(*args32)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-30, equal_nan=True)


@pytest.mark.parametrize("name,low,high", [("ndtri", 0.0, 1.0), ("erfinv", -1.0, 1.0),
                                           ("gammaln", 0.1, 20.0)])
def test_jitted_float32_values_equal_jax_bit_for_bit(name, low, high):
    u = np.random.default_rng(1).uniform(low, high, 50_000).astype(np.float32)
    got = np.asarray(fluxion.jit(getattr(sp, name))(u))
    want = np.asarray(jax.jit(getattr(jsp, name))(u))
    np.testing.assert_array_equal(got, want)


def test_integer_and_extra_arguments():
    np.testing.assert_allclose(sp.multigammaln(POS + 3, 3), ssp.multigammaln(POS + 3, 3), rtol=1e-5)
    np.testing.assert_allclose(sp.factorial(np.array([-1.0, 0, 3.5, 5])),
                               ssp.factorial(np.array([-1.0, 0, 3.5, 5])), rtol=1e-5)
    np.testing.assert_allclose(sp.comb(np.array([5.0, 10.5, 3]), np.array([2.0, 3, 4])),
                               ssp.comb(np.array([5.0, 10.5, 3]), np.array([2.0, 3, 4])), rtol=1e-5)
    np.testing.assert_allclose(sp.comb(4.0, 2.0, repetition=True), 10.0, rtol=1e-5)
    np.testing.assert_allclose(sp.polygamma(np.array([1, 2, 3]), np.array([0.5, 2.0, 4])),
                               ssp.polygamma(np.array([1, 2, 3]), np.array([0.5, 2.0, 4])), rtol=1e-4)
    with pytest.raises(ValueError, match="series_order"):
        sp.log_ndtr(1.0, series_order=-1)
    with pytest.raises(TypeError, match="not supported"):
        sp.ndtri(np.float16(0.3))
    with pytest.raises(ValueError, match="complex"):
        sp.entr(np.array([1j]))


@pytest.mark.parametrize("name,point", [
    ("log_ndtr", np.array([-15.0, -3.0, 0.5, 6.0])), ("ndtr", np.array([-2.0, 0.1, 3.0])),
    ("ndtri", np.array([1e-3, 0.2, 0.9])), ("expit", np.array([-3.0, 0.0, 2.0])),
    ("gammaln", np.array([0.3, 2.0, 9.0])), ("entr", np.array([0.2, 1.5])),
])
def test_gradients(name, point, x64):
    check_grads(getattr(sp, name), (point,), order=1, modes=["fwd", "rev"], eps=1e-6)


def test_xlogy_gradient_at_zero(x64):
    g = fluxion.grad(lambda y: sp.xlogy(0.0, y))(0.0)
    assert float(g) == 0.0
    gx = fluxion.grad(lambda x: sp.xlogy(x, 2.0))(0.0)
    np.testing.assert_allclose(gx, np.log(2.0))


def test_incomplete_functions_zeta_and_bessel(x64):
    a, x = np.array([0.5, 1.0, 3.0, 10.0]), np.array([0.2, 1.5, 2.0, 12.0])
    np.testing.assert_allclose(sp.gammainc(a, x), ssp.gammainc(a, x), rtol=1e-10)
    np.testing.assert_allclose(sp.gammaincc(a, x), ssp.gammaincc(a, x), rtol=1e-10)
    u = np.array([0.1, 0.5, 0.9, 0.99])
    np.testing.assert_allclose(sp.betainc(a, a[::-1], u), ssp.betainc(a, a[::-1], u), rtol=1e-10)
    np.testing.assert_allclose(sp.zeta(np.array([2.0, 3.5]), np.array([1.0, 2.0])),
                               ssp.zeta(np.array([2.0, 3.5]), np.array([1.0, 2.0])), rtol=1e-10)
    z = np.array([-30.0, -2.0, 0.0, 0.7, 5.0, 40.0])
    for name in ("i0", "i0e", "i1", "i1e"):
        np.testing.assert_allclose(getattr(sp, name)(z), getattr(ssp, name)(z), rtol=1e-10)
    with pytest.raises(NotImplementedError, match="Hurwitz"):
        sp.zeta(2.0)


LOGSUMEXP_CASES = [dict(), dict(axis=0), dict(axis=-1), dict(axis=(0, 2)),
                   dict(axis=1, keepdims=True), dict(keepdims=True), dict(axis=2, b="b"),
                   dict(axis=(1, 2), b="b", return_sign=True),
                   dict(axis=-1, keepdims=True, return_sign=True, b="-b"), dict(axis=1, b="-b")]


@pytest.mark.parametrize("with_infinities", [False, True], ids=["finite", "infinite"])
@pytest.mark.parametrize("kwargs", LOGSUMEXP_CASES, ids=[str(i) for i in range(len(LOGSUMEXP_CASES))])
def test_logsumexp_matches_scipy_eager_and_jitted(kwargs, with_infinities, x64):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4, 5))
    if with_infinities:
        a[0, 0, :] = -np.inf
        a[1, 1, 1] = np.inf
    b = rng.standard_normal((4, 5))
    kwargs = dict(kwargs)
    if "b" in kwargs:
        kwargs["b"] = -b if kwargs["b"] == "-b" else b
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy warns where a negative sum gives nan
        want = ssp.logsumexp(a, **kwargs)
    got = sp.logsumexp(a, **kwargs)
    jitted = fluxion.jit(lambda x: sp.logsumexp(x, **kwargs))(a)
    want, got, jitted = ((r if isinstance(r, tuple) else (r,)) for r in (want, got, jitted))
    for w, g, j in zip(want, got, jitted):
        assert np.shape(g) == np.shape(w) == np.shape(j)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, equal_nan=True)
        np.testing.assert_allclose(j, w, rtol=1e-12, atol=1e-14, equal_nan=True)


def test_logsumexp_where_and_dtypes_match_jax():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    got = sp.logsumexp(a, axis=1, where=a > 0)
    want = jsp.logsumexp(a, axis=1, where=a > 0)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert sp.logsumexp(np.arange(3)).dtype == jsp.logsumexp(np.arange(3)).dtype


def test_betaln_and_beta_keep_their_digits_for_large_arguments():
    a = np.array([0.1, 1.0, 2.5, 0.5, 1e3], np.float32)
    b = np.array([200.0, 1e10, 1e6, 1e30, 1e8], np.float32)
    want = ssp.betaln(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(sp.betaln(a, b), want, rtol=2e-6)
    np.testing.assert_allclose(sp.betaln(b, a), want, rtol=2e-6)
    np.testing.assert_allclose(sp.beta(a[:2], b[:2]), ssp.beta(a[:2], b[:2]), rtol=2e-6)
    np.testing.assert_allclose(sp.betaln(a, b), jsp.betaln(a, b), rtol=2e-6)


def test_betainc_limits_and_rank_broadcasting_match_jax():
    a = np.array([0.0, 0.5, 2.0, np.inf, np.nan], np.float32)
    x = np.array([0.0, 0.3, 1.0], np.float32)
    got = sp.betainc(a[:, None, None], a[:, None], x)
    want = jsp.betainc(a[:, None, None], a[:, None], x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=0, equal_nan=True)
    assert float(sp.betainc(0.0, 1.0, 0.5)) == ssp.betainc(0.0, 1.0, 0.5) == 1.0
    # operands of different ranks broadcast as in JAX
    got = sp.betainc(np.full((6, 1, 1), 2.0), np.full((1, 4, 1), 3.0), np.full(5, 0.5))
    assert got.shape == (6, 4, 5)
    np.testing.assert_allclose(got, ssp.betainc(2.0, 3.0, 0.5), rtol=1e-5)


def test_boxcox_of_tiny_x_and_comb_weak_type():
    x = np.float32(1e-30)
    np.testing.assert_allclose(sp.boxcox(x, np.float32(0.0)), np.log(1e-30), rtol=1e-6)
    np.testing.assert_allclose(sp.boxcox(x, np.float32(0.5)), ssp.boxcox(1e-30, 0.5), rtol=1e-6)
    assert sp.comb(2, 0.5).weak_type == jsp.comb(2, 0.5).weak_type
    assert sp.comb(np.float32(5), 2).weak_type is False


def test_log_ndtr_under_jit_and_its_gradient():
    x = np.array([-40.0, -12.0, -3.0, 0.0, 2.0, 9.0], np.float32)
    got = fluxion.jit(sp.log_ndtr)(x)
    np.testing.assert_allclose(got, ssp.log_ndtr(x.astype(np.float64)), rtol=1e-5)
    grads = fluxion.jit(fluxion.vmap(fluxion.grad(sp.log_ndtr)))(x)
    np.testing.assert_allclose(grads, jax.vmap(jax.grad(jsp.log_ndtr))(x), rtol=1e-4)


@pytest.mark.parametrize("name", ["ndtr", "ndtri", "log_ndtr"])
@pytest.mark.parametrize("value", [2, np.int32(1), True])
def test_ndtr_family_rejects_integer_input_like_jax(name, value):
    import jax.scipy.special as jsp
    with pytest.raises(TypeError):
        getattr(jsp, name)(value)
    with pytest.raises(TypeError):
        getattr(fluxion.scipy.special, name)(value)


def test_polygamma_keeps_weak_type_of_python_scalar_x():
    from fluxion.core import get_aval
    for n, x in ((2, 0.5), (np.int32(1), 0.5), (2, np.float32(0.5))):
        ours, ref = sp.polygamma(n, x), jsp.polygamma(n, x)
        assert get_aval(ours).weak_type == ref.weak_type and ours.dtype == ref.dtype
        np.testing.assert_allclose(float(ours), float(ref), rtol=1e-5)


def test_factorial_multigammaln_ndtri_types_match_jax():
    from fluxion._src import core
    for n in (0.5, 2, np.float16(3), np.array([-1.0, 3.0], np.float32)):
        got, want = sp.factorial(n), jsp.factorial(n)
        assert (got.dtype, core.get_aval(got).weak_type) == (want.dtype, want.weak_type)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    for d in (2, 0.5, 3.0, np.float32(2)):  # d is truncated to an int, as JAX does
        np.testing.assert_allclose(sp.multigammaln(2.5, d), jsp.multigammaln(2.5, d), rtol=1e-6)
    assert not core.get_aval(sp.ndtri(0.5)).weak_type and not jsp.ndtri(0.5).weak_type
