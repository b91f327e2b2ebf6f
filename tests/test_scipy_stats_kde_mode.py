"""scipy.stats.gaussian_kde, mode and poisson.entropy against SciPy, with JAX for dtypes,
shapes and random draws."""
import jax
import jax.scipy.stats
import numpy as np
import pytest
import scipy.stats

import fluxion
import fluxion.scipy.stats as fstats
from fluxion.test_util import check_grads

RNG = np.random.default_rng(0)


def _entropy_reference(mu):
    """sum -p log p over mu +- 60 sd, in float64."""
    k = np.arange(max(0, int(mu - 60 * np.sqrt(mu) - 30)), int(mu + 60 * np.sqrt(mu) + 60))
    logp = scipy.stats.poisson.logpmf(k, mu)
    return -np.sum(np.exp(logp) * logp)


def test_poisson_entropy_matches_scipy(x64):
    mu = np.array([-1.0, 0.0, 1e-6, 1e-3, 0.5, 1.0, 5.0, 9.99, 10.0, 50.0, 99.9, 100.0, 150.0,
                   1e3, 1e4, 1e6])
    got = fstats.poisson.entropy(mu)
    assert got.dtype == np.float64
    want = np.array([np.nan, 0.0] + [_entropy_reference(m) for m in mu[2:]])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[:12], scipy.stats.poisson.entropy(mu[:12]), rtol=1e-9)
    loc = np.array([[0.0], [3.0]])
    assert fstats.poisson.entropy(mu, loc).shape == (2, len(mu))


def test_poisson_entropy_f32_jit_vmap_grad():
    mu = np.array([0.0, 0.3, 4.0, 40.0, 400.0], np.float32)
    got = fluxion.jit(fstats.poisson.entropy)(mu)
    want = jax.scipy.stats.poisson.entropy(mu)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, scipy.stats.poisson.entropy(mu.astype(np.float64)),
                               rtol=2e-5)
    np.testing.assert_allclose(fluxion.vmap(fstats.poisson.entropy)(mu), got, rtol=1e-6)
    assert fstats.poisson.entropy(2).dtype == jax.scipy.stats.poisson.entropy(2).dtype
    with fluxion.enable_x64(True):
        for m in [0.7, 30.0, 300.0]:
            check_grads(fstats.poisson.entropy, (m,), order=1, modes=["fwd", "rev"])


MODE_CASES = [
    (np.array([[1, 2, 2], [3, 3, 1]]), {"axis": 1}),
    (np.array([1.0, np.nan, np.nan, 2.0]), {}),
    (np.array([3.0, 1.0, 1.0, 3.0]), {}),
    (np.array(5), {}),
    (np.ones((2, 3)), {"axis": None, "keepdims": True}),
    (np.zeros((0, 3)), {"axis": 0}),
    (np.zeros((3, 0)), {"axis": 0}),
    (RNG.integers(0, 4, (5, 6, 7)), {"axis": 1, "keepdims": True}),
    (RNG.integers(0, 4, (5, 6, 7)), {"axis": -1}),
    (RNG.integers(0, 3, (4, 9)).astype(np.float32), {"axis": None}),
]


@pytest.mark.parametrize("a,kwargs", MODE_CASES)
def test_mode_matches_jax_and_scipy(a, kwargs):
    got = fstats.mode(a, **kwargs)
    want = jax.scipy.stats.mode(a, **kwargs)
    assert type(got).__name__ == "ModeResult" and got._fields == ("mode", "count")
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    if a.size and not np.isnan(a).any():
        ref = scipy.stats.mode(a, **kwargs)
        np.testing.assert_array_equal(got.mode, ref.mode)
        np.testing.assert_array_equal(got.count, ref.count)


def test_mode_jit_vmap_and_errors():
    a = RNG.integers(0, 5, (6, 20))
    got = fluxion.vmap(lambda r: fstats.mode(r).mode)(a)
    np.testing.assert_array_equal(got, scipy.stats.mode(a, axis=1).mode)
    jitted = fluxion.jit(lambda v: fstats.mode(v, axis=0))(a)
    np.testing.assert_array_equal(jitted.count, scipy.stats.mode(a, axis=0).count)
    with pytest.raises(ValueError, match="nan_policy"):
        fstats.mode(a, nan_policy="ignore")
    with pytest.raises(NotImplementedError):
        fstats.mode(a, nan_policy="omit")
    with pytest.raises(TypeError):
        fstats.mode([1, 2])


KDE_OPTIONS = [{}, {"bw_method": "silverman"}, {"bw_method": 0.3},
               {"bw_method": lambda kde: 0.5}, {"weights": RNG.uniform(size=30)}]


@pytest.mark.parametrize("options", KDE_OPTIONS, ids=lambda o: "-".join(sorted(o)) or "default")
@pytest.mark.parametrize("d", [1, 2, 3])
def test_kde_matches_scipy(options, d):
    data = RNG.standard_normal((d, 30))
    points = RNG.standard_normal((d, 7))
    got = fstats.gaussian_kde(data.astype(np.float32), **options)
    want = scipy.stats.gaussian_kde(data, **options)
    np.testing.assert_allclose(got.neff, want.neff, rtol=1e-5)
    np.testing.assert_allclose(got.covariance, want.covariance, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.evaluate(points), want.evaluate(points), rtol=2e-5)
    np.testing.assert_allclose(got.pdf(points), want.pdf(points), rtol=2e-5)
    np.testing.assert_allclose(got(points), want(points), rtol=2e-5)
    np.testing.assert_allclose(got.logpdf(points), want.logpdf(points), rtol=2e-5)
    np.testing.assert_allclose(got.logpdf(points * 40), want.logpdf(points * 40), rtol=1e-4)
    mean, cov = RNG.standard_normal(d), np.eye(d) * 0.7
    np.testing.assert_allclose(got.integrate_gaussian(mean, cov),
                               want.integrate_gaussian(mean, cov), rtol=2e-5)
    other = RNG.standard_normal((d, 12))
    np.testing.assert_allclose(got.integrate_kde(fstats.gaussian_kde(other)),
                               want.integrate_kde(scipy.stats.gaussian_kde(other)), rtol=2e-5)
    if d == 1:
        np.testing.assert_allclose(got.integrate_box_1d(-0.4, 1.2),
                                   want.integrate_box_1d(-0.4, 1.2), rtol=2e-5)
        np.testing.assert_allclose(got(0.3), want(0.3), rtol=2e-5)


def test_kde_pytree_jit_vmap_grad_and_dtypes(x64):
    data = RNG.standard_normal((2, 20))
    kde = fstats.gaussian_kde(data)
    assert kde.dataset.dtype == np.float64 and kde.d == 2 and kde.n == 20
    leaves, tree = fluxion.tree_util.tree_flatten(kde)
    assert len(leaves) == 5
    points = RNG.standard_normal((2, 4))
    got = fluxion.jit(lambda k, p: k.evaluate(p))(kde, points)
    np.testing.assert_allclose(got, scipy.stats.gaussian_kde(data)(points), rtol=1e-12)
    rows = fluxion.vmap(lambda p: kde.logpdf(p[:, None])[0], in_axes=1)(points)
    np.testing.assert_allclose(rows, scipy.stats.gaussian_kde(data).logpdf(points), rtol=1e-12)
    check_grads(lambda p: fstats.gaussian_kde(data).logpdf(p), (points,), order=2,
                modes=["fwd", "rev"])
    check_grads(lambda x: fstats.gaussian_kde(x).evaluate(points), (data,), order=1,
                modes=["fwd", "rev"], atol=1e-4, rtol=1e-4)
    with pytest.raises(AttributeError):
        kde.neff = 3


def test_kde_resample_matches_jax_bits():
    data = RNG.standard_normal((2, 25)).astype(np.float32)
    weights = RNG.uniform(size=25).astype(np.float32)
    for shape in [(), (5,)]:
        got = fstats.gaussian_kde(data, weights=weights).resample(fluxion.random.key(3), shape)
        want = jax.scipy.stats.gaussian_kde(data, weights=weights).resample(
            jax.random.key(3), shape)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    many = fstats.gaussian_kde(data).resample(fluxion.random.key(0), (4, 6))
    assert many.shape == (2, 4, 6)


def test_kde_errors_match_jax():
    data = np.ones((2, 5), np.float32) + np.arange(10).reshape(2, 5)
    for mod in (fstats, jax.scipy.stats):
        with pytest.raises(ValueError, match="multiple elements"):
            mod.gaussian_kde(np.ones(1))
        with pytest.raises(NotImplementedError, match="complex"):
            mod.gaussian_kde(data + 1j)
        with pytest.raises(ValueError, match="bw_method"):
            mod.gaussian_kde(data, bw_method="wide")
        with pytest.raises(ValueError, match="length n"):
            mod.gaussian_kde(data, weights=np.ones(4))
        kde = mod.gaussian_kde(data)
        with pytest.raises(ValueError, match="dimension"):
            kde.evaluate(np.ones((3, 2)))
        with pytest.raises(ValueError, match="1D"):
            kde.integrate_box_1d(0.0, 1.0)
        with pytest.raises(NotImplementedError):
            kde.integrate_box(np.zeros(2), np.ones(2))
        with pytest.raises(NotImplementedError):
            kde.set_bandwidth("scott")
        with pytest.raises(ValueError, match="mean"):
            kde.integrate_gaussian(np.zeros(3), np.eye(2))
