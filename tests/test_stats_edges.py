"""scipy.stats at the edges, against SciPy in float64 (where JAX 0.10.2 is inaccurate) and
against JAX (NaN propagation in rankdata)."""
import jax.scipy.stats as jstats
import numpy as np
import pytest
import scipy.stats

import fluxion
import fluxion.scipy.stats as stats

P = np.array([0, 1e-30, 1e-10, 1e-4, 0.1, 0.3, 0.5, 0.7, 0.9, 1 - 1e-4, 1 - 1e-7, 1],
             np.float32)


@pytest.mark.parametrize("fn", ["ppf", "isf"])
def test_cauchy_quantiles_are_accurate_in_the_tails(fn):
    got = getattr(stats.cauchy, fn)(P, 0.5, 2.0)
    want = getattr(scipy.stats.cauchy, fn)(P.astype(np.float64), 0.5, 2.0)
    np.testing.assert_allclose(got, want, rtol=2e-6)  # JAX: 14% off at 1 - 1e-7
    assert np.isnan(getattr(stats.cauchy, fn)(np.array([-0.1, 1.5, np.nan], np.float32))).all()
    np.testing.assert_allclose(fluxion.jit(getattr(stats.cauchy, fn))(P), getattr(
        scipy.stats.cauchy, fn)(P.astype(np.float64)), rtol=2e-6)


def test_expon_logcdf_is_accurate_for_small_and_large_arguments():
    x = np.array([0, 1e-6, 1e-3, 0.3, 0.69, 0.7, 1, 9, 20, 40, 100, np.inf, -1], np.float32)
    want = scipy.stats.expon.logcdf(x.astype(np.float64))
    np.testing.assert_allclose(stats.expon.logcdf(x), want, rtol=2e-6, atol=1e-37)  # subnormals
    g = fluxion.grad(lambda v: stats.expon.logcdf(v))(np.float32(2.0))
    np.testing.assert_allclose(g, 1 / np.expm1(2.0), rtol=1e-6)


def test_rankdata_propagates_nan_per_ranked_slice():
    a = np.array([[3.0, 1.0, np.nan], [2.0, 2.0, 1.0]], np.float32)
    for method in ("average", "ordinal", "dense", "min", "max"):
        for axis in (None, 0, 1):
            got = stats.rankdata(a, method=method, axis=axis)
            want = jstats.rankdata(a, method=method, axis=axis)
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype
    np.testing.assert_array_equal(stats.rankdata(np.array([2, 1, 2])), [2.5, 1, 2.5])


@pytest.mark.parametrize("dist,args", [("gamma", (2.5,)), ("uniform", (-1.0, 3.0)),
                                       ("truncnorm", (-1.0, 2.0)), ("norm", ())])
def test_nan_arguments_give_nan(dist, args):
    """SciPy's answer; JAX 0.10.2 returns numbers here (gamma.pdf(nan) = 0,
    truncnorm.cdf(nan) = 1)."""
    for fn in ("pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"):
        f = getattr(getattr(stats, dist), fn, None)
        if f is not None:
            assert np.isnan(f(np.float32(np.nan), *args)), (dist, fn)


def test_normal_isf_of_tiny_probabilities():
    p = np.array([1e-30, 1e-10, 1e-4], np.float32)
    np.testing.assert_allclose(stats.norm.isf(p), scipy.stats.norm.isf(p.astype(np.float64)),
                               rtol=1e-5)


def test_discrete_log_pmfs_exact_where_the_binomial_coefficient_is_one():
    """log C(n, 0) = log C(n, n) = 0 exactly (XLA's lgamma(1) is 5e-7 in float32): binom at
    k = 0 or n, nbinom and betabinom at k = 0 give SciPy's value to the last bit."""
    import scipy.stats
    from fluxion.scipy import stats as fstats
    cases = [(fstats.binom.logpmf, scipy.stats.binom.logpmf, (0.0, 0.0, 0.3)),
             (fstats.binom.logpmf, scipy.stats.binom.logpmf, (3.0, 3.0, 0.5)),
             (fstats.binom.logpmf, scipy.stats.binom.logpmf, (0.0, 2.0, 0.5)),
             (fstats.nbinom.logpmf, scipy.stats.nbinom.logpmf, (0.0, 2.0, 0.5)),
             (fstats.betabinom.logpmf, scipy.stats.betabinom.logpmf, (0.0, 0.0, 2.0, 3.0))]
    for ours, theirs, args in cases:
        assert float(ours(*np.float32(args))) == np.float32(theirs(*args)), (ours, args)
