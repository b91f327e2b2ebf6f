"""scipy.stats distributions against SciPy (values) and JAX (dtypes, conventions)."""
import jax.scipy.stats as jst
import numpy as np
import pytest
import scipy.stats as sst

import fluxion.scipy.stats as st
from fluxion.test_util import check_grads

X = np.array([-4.0, -1.2, -0.1, 0.0, 0.4, 1.0, 2.5, 7.0])
Q = np.array([0.001, 0.1, 0.5, 0.77, 0.999])
LOC_SCALE = ["norm", "logistic", "laplace", "cauchy", "uniform", "expon", "gumbel_l", "gumbel_r"]
FUNCS = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def _pairs():
    for dist in LOC_SCALE:
        for fn in FUNCS:
            if hasattr(getattr(jst, dist), fn):
                yield dist, fn


@pytest.mark.parametrize("dist,fn", list(_pairs()))
def test_location_scale_families(dist, fn, x64):
    ours, theirs = getattr(getattr(st, dist), fn), getattr(getattr(sst, dist), fn)
    args = Q if fn in ("ppf", "isf") else X
    for loc, scale in [(0.0, 1.0), (0.7, 2.5)]:
        np.testing.assert_allclose(ours(args, loc, scale), theirs(args, loc, scale), rtol=1e-6,
                                   atol=1e-12)
    got32 = ours(args.astype(np.float32))
    assert got32.dtype == np.float32


def test_every_jax_function_of_these_distributions_exists():
    for dist in LOC_SCALE + ["pareto", "t", "bernoulli", "geom", "binom", "nbinom", "betabinom",
                             "multinomial", "dirichlet", "wrapcauchy"]:
        missing = {f for f in dir(getattr(jst, dist)) if not f.startswith("_")} - set(
            dir(getattr(st, dist)))
        assert not missing, (dist, missing)


def test_shape_families(x64):
    x = np.array([0.5, 1.0, 1.7, 4.0, 9.0])
    for fn in ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]:
        np.testing.assert_allclose(getattr(st.pareto, fn)(x, 2.5, 0.1, 1.2),
                                   getattr(sst.pareto, fn)(x, 2.5, 0.1, 1.2), rtol=1e-7)
    np.testing.assert_allclose(st.pareto.ppf(Q, 2.5), sst.pareto.ppf(Q, 2.5), rtol=1e-7)
    np.testing.assert_allclose(st.t.logpdf(X, 3.5, 0.2, 1.5), sst.t.logpdf(X, 3.5, 0.2, 1.5),
                               rtol=1e-7)
    angles = np.array([-1.0, 0.5, 3.0, 6.0, 7.0])
    np.testing.assert_allclose(st.wrapcauchy.logpdf(angles, 0.4),
                               jst.wrapcauchy.logpdf(angles, 0.4), rtol=1e-6)


def test_discrete_distributions(x64):
    k = np.arange(-1.0, 8.0)
    cases = [(st.bernoulli, sst.bernoulli, (0.3,)), (st.geom, sst.geom, (0.3,)),
             (st.binom, sst.binom, (6, 0.35)), (st.nbinom, sst.nbinom, (3.5, 0.4)),
             (st.betabinom, sst.betabinom, (6, 2.0, 3.5))]
    for ours, theirs, params in cases:
        # betabinom's betaln takes JAX's asymptotic series for arguments >= 8 (JAX: 1.3e-6 off)
        np.testing.assert_allclose(ours.logpmf(k, *params), theirs.logpmf(k, *params),
                                   rtol=2e-6, atol=1e-12)
        np.testing.assert_allclose(ours.pmf(k, *params), theirs.pmf(k, *params), rtol=2e-6,
                                   atol=1e-12)
    np.testing.assert_allclose(st.bernoulli.cdf(k, 0.3), sst.bernoulli.cdf(k, 0.3))
    np.testing.assert_allclose(st.bernoulli.ppf(Q, 0.3), sst.bernoulli.ppf(Q, 0.3))
    counts, p = np.array([[1, 2, 3], [0, 0, 6]]), np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(st.multinomial.logpmf(counts, 6, p),
                               sst.multinomial.logpmf(counts, 6, p), rtol=1e-7)


def test_dirichlet(x64):
    alpha = np.array([1.5, 2.0, 3.0])
    x = np.array([[0.2, 0.3], [0.5, 0.3], [0.3, 0.4]])
    np.testing.assert_allclose(st.dirichlet.logpdf(x, alpha), sst.dirichlet.logpdf(x, alpha),
                               rtol=1e-7)
    np.testing.assert_allclose(st.dirichlet.pdf(x[:2], alpha), sst.dirichlet.pdf(x, alpha),
                               rtol=1e-7)
    assert float(st.dirichlet.logpdf(np.array([0.5, 0.6, 0.1]), alpha)) == -np.inf
    with pytest.raises(ValueError, match="one-dimensional"):
        st.dirichlet.logpdf(x, alpha[None])


def test_sem_and_gradients(x64):
    data = np.random.default_rng(0).standard_normal((5, 4))
    np.testing.assert_allclose(st.sem(data), sst.sem(data), rtol=1e-10)
    np.testing.assert_allclose(st.sem(data, axis=None, ddof=0), sst.sem(data, axis=None, ddof=0))
    check_grads(lambda x, m, s: st.norm.logcdf(x, m, s), (X[:4], 0.3, 1.7), order=1,
                modes=["fwd", "rev"])
    check_grads(lambda x: st.logistic.logpdf(x, 0.2, 0.9), (X,), order=2, modes=["rev"])


@pytest.mark.parametrize("fn", ["logpdf", "pdf", "logcdf", "cdf", "logsf", "sf"])
@pytest.mark.parametrize("a,b", [(-1.0, 2.0), (3.0, 9.0), (-9.0, -4.0), (-0.5, 0.5)])
def test_truncnorm(fn, a, b, x64):
    x = np.linspace(-10, 10, 21)
    np.testing.assert_allclose(getattr(st.truncnorm, fn)(x, a, b, 0.3, 1.2),
                               getattr(sst.truncnorm, fn)(x, a, b, 0.3, 1.2), rtol=1e-6,
                               atol=1e-300)
    assert np.isnan(np.asarray(st.truncnorm.logpdf(0.0, 1.0, 1.0)))


@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
def test_rankdata(method):
    x = np.array([3.0, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5])
    got, want = st.rankdata(x, method), jst.rankdata(x, method)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, sst.rankdata(x, method))
    y = x[:10].reshape(2, 5)
    np.testing.assert_array_equal(st.rankdata(y, method, axis=1),
                                  sst.rankdata(y, method, axis=1))
    with pytest.raises(ValueError, match="unknown method"):
        st.rankdata(x, "mean")


def test_gamma_family_densities(x64):
    x = np.array([-1.0, 0.0, 0.3, 1.0, 2.5, 7.0])
    u = np.array([-0.1, 0.0, 0.2, 0.5, 0.9, 1.0, 1.2])
    for ours, theirs, args, points in [
            (st.gamma, sst.gamma, (2.5, 0.1, 1.3), x), (st.chi2, sst.chi2, (3.0,), x),
            (st.beta, sst.beta, (2.0, 3.5), u), (st.gennorm, sst.gennorm, (1.5, 0.2, 2.0), x)]:
        np.testing.assert_allclose(ours.logpdf(points, *args), theirs.logpdf(points, *args),
                                   rtol=1e-8)
        np.testing.assert_allclose(ours.pdf(points, *args), theirs.pdf(points, *args), rtol=1e-8)
    k = np.arange(-1.0, 9.0)
    np.testing.assert_allclose(st.poisson.logpmf(k, 3.2), sst.poisson.logpmf(k, 3.2), rtol=1e-8)
    np.testing.assert_allclose(st.poisson.pmf(k, 3.2), sst.poisson.pmf(k, 3.2), rtol=1e-8)


def test_incomplete_function_cdfs_and_vonmises(x64):
    x = np.array([-1.0, 0.0, 0.3, 1.0, 2.5, 7.0])
    u = np.array([-0.1, 0.0, 0.2, 0.5, 0.9, 1.0, 1.2])
    for ours, theirs, args, points in [
            (st.gamma, sst.gamma, (2.5, 0.1, 1.3), x), (st.chi2, sst.chi2, (3.0,), x),
            (st.beta, sst.beta, (2.0, 3.5), u)]:
        for fn in ("cdf", "sf", "logcdf", "logsf"):
            np.testing.assert_allclose(getattr(ours, fn)(points, *args),
                                       getattr(theirs, fn)(points, *args), rtol=1e-8)
    np.testing.assert_allclose(st.gennorm.cdf(x, 1.5, 0.2, 2.0), sst.gennorm.cdf(x, 1.5, 0.2, 2.0),
                               rtol=1e-8)
    k = np.arange(-1.0, 9.0)
    np.testing.assert_allclose(st.poisson.cdf(k, 3.2), sst.poisson.cdf(k, 3.2), rtol=1e-8)
    angles = np.array([-2.0, 0.0, 1.0, 3.0])
    np.testing.assert_allclose(st.vonmises.logpdf(angles, 1.7), sst.vonmises.logpdf(angles, 1.7),
                               rtol=1e-8)


def test_multivariate_normal(x64):
    rng = np.random.default_rng(3)
    q = rng.standard_normal((3, 3))
    cov = q @ q.T + np.eye(3)
    mean = np.array([0.5, -1.0, 2.0])
    x = rng.standard_normal((5, 3))
    np.testing.assert_allclose(st.multivariate_normal.logpdf(x, mean, cov),
                               sst.multivariate_normal.logpdf(x, mean, cov), rtol=1e-10)
    np.testing.assert_allclose(st.multivariate_normal.pdf(x[0], mean, cov),
                               sst.multivariate_normal.pdf(x[0], mean, cov), rtol=1e-10)
    np.testing.assert_allclose(st.multivariate_normal.logpdf(x, mean, 2.0),
                               sst.multivariate_normal.logpdf(x, mean, 2.0 * np.eye(3)),
                               rtol=1e-10)
    np.testing.assert_allclose(st.multivariate_normal.logpdf(0.3, 0.1, 2.0),
                               sst.norm.logpdf(0.3, 0.1, np.sqrt(2.0)), rtol=1e-10)
    with pytest.raises(ValueError, match="incompatible shapes"):
        st.multivariate_normal.logpdf(x, mean, np.eye(2))


@pytest.mark.parametrize("dist,fn,params", [
    ("expon", "cdf", ()), ("expon", "logpdf", ()), ("pareto", "sf", (2.0,)),
    ("pareto", "logpdf", (2.0,)), ("gumbel_r", "cdf", ()), ("bernoulli", "pmf", (0.3,)),
    ("bernoulli", "cdf", (0.3,)), ("nbinom", "logpmf", (5.0, 0.3)), ("beta", "pdf", (2.0, 3.0)),
])
def test_nan_arguments_and_invalid_parameters_give_nan_as_scipy_and_jax(dist, fn, params):
    ours, ref, jref = (getattr(getattr(m, dist), fn) for m in (st, sst, jst))
    x = np.array([np.nan, 0.5, 1.0, 2.0], np.float32)
    np.testing.assert_array_equal(np.isnan(ours(x, *params)), np.isnan(jref(x, *params)))
    assert np.isnan(ours(x, *params)[0]) and np.isnan(ref(np.nan, *params))
    if params:  # a NaN or out-of-range first parameter
        for bad in (np.nan, -1.0):
            got = ours(x[1:], bad, *params[1:])
            assert np.isnan(got).all(), got
            assert np.isnan(ref(x[1:].astype(np.float64), bad, *params[1:])).all()
    if dist in ("expon", "pareto", "gumbel_r", "beta"):  # a scale that is not positive
        for scale in (0.0, -1.0):
            assert np.isnan(ours(x[1:], *params, scale=scale)).all()
            assert np.isnan(ref(x[1:].astype(np.float64), *params, scale=scale)).all()


def test_betabinom_is_zero_at_non_integer_counts_as_scipy():
    k = np.array([2.5, 3.0, 0.5], np.float32)
    got = st.betabinom.logpmf(k, 5.0, 2.0, 3.5)
    want = sst.betabinom.logpmf(k.astype(np.float64), 5.0, 2.0, 3.5)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_uniform_cdf_of_python_scalar_is_strong_like_jax():
    import jax.scipy.stats as jst
    from fluxion.core import get_aval
    for x in (0.5, 2, 1.5):
        ours, ref = st.uniform.cdf(x), jst.uniform.cdf(x)
        assert get_aval(ours).weak_type == ref.weak_type == False  # noqa: E712
        assert ours.dtype == ref.dtype and float(ours) == float(ref)
