"""fluxion.numpy statistics against jax.numpy (dtypes, weak types, errors) and NumPy."""
import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore:All-NaN slice")

import fluxion
import fluxion.numpy as fnp
from fluxion.test_util import check_grads

from _jnp_oracle_a import agree, jit_agrees, vmap_agrees

R = np.random.RandomState(0)
X = R.randn(3, 4, 5).astype(np.float32)
XN = X.copy()
XN[0, 1, 2] = np.nan
XN[1, :, 3] = np.nan
Q = np.array([0.1, 0.5, 0.9], np.float32)
METHODS = ["linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf"]


@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median(name):
    for axis in (None, 0, (0, 2)):
        agree(name, XN, axis=axis, keepdims=axis == 0)
    agree(name, np.arange(7))
    agree(name, 3)
    agree(name, X.astype(np.float16), axis=-1)
    agree(name, X, x64=True)
    np.testing.assert_allclose(np.asarray(getattr(fnp, name)(XN, axis=1)),
                               getattr(np, name)(XN, axis=1), rtol=1e-6)


@pytest.mark.parametrize("name", ["median", "nanmedian", "quantile", "percentile"])
def test_empty_reductions_are_nan(name):
    # NumPy's median of nothing is NaN (its quantile raises IndexError, JAX's gather errors);
    # a gather from an empty axis gave 0 here, a silent wrong answer.
    empty = np.zeros((0, 3), np.float32)
    args = () if "median" in name else (np.float32(0.5),)
    methods = ["midpoint"] if "median" in name else METHODS
    for method in methods:
        kw = {} if "median" in name else {"method": method}
        got = getattr(fnp, name)(empty, *args, axis=0, **kw)
        assert got.shape == (3,) and got.dtype == np.float32 and np.isnan(got).all()
        assert np.isnan(fluxion.jit(lambda e: getattr(fnp, name)(e, *args, **kw))(empty))
        assert getattr(fnp, name)(empty, *args, axis=1, **kw).shape == (0,)
    if "median" in name:
        with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
            want = getattr(np, name)(empty, axis=0)
        np.testing.assert_array_equal(np.asarray(getattr(fnp, name)(empty, axis=0)), want)


@pytest.mark.parametrize("name", ["quantile", "nanquantile", "percentile", "nanpercentile"])
def test_quantile_methods(name):
    q = Q if "quantile" in name else 100 * Q
    for method in METHODS:
        agree(name, XN, q, axis=1, method=method)
        if method in ("nearest", "inverted_cdf"):
            continue  # JAX's tie and NaN rules differ from NumPy's here; JAX is the reference
        np.testing.assert_allclose(np.asarray(getattr(fnp, name)(XN, q, axis=1, method=method)),
                                   getattr(np, name)(XN, q, axis=1, method=method), rtol=1e-5)
    agree(name, X, q[1], axis=(0, 2), keepdims=True)
    agree(name, np.arange(10), q, x64=True)
    agree(name, X, q, axis=1, method="inverted_cdf", weights=np.abs(X[0, :, 0]))
    agree(name, X, q, axis=1, weights=np.abs(X))  # NotImplementedError: linear has no weights
    agree(name, X, q, method="bad")
    agree(name, X.astype(np.complex64), q)
    agree(name, X, q.reshape(3, 1))


@pytest.mark.parametrize("name", ["nanvar", "nanstd"])
def test_nanvar_nanstd(name):
    for axis in (None, 0, (1, 2)):
        agree(name, XN, axis=axis, ddof=1, keepdims=True)
    agree(name, np.arange(5))
    agree(name, XN.astype(np.float16), axis=0)
    agree(name, XN.astype(np.complex64), axis=0)
    agree(name, XN, axis=1, ddof=4)
    agree(name, XN, axis=0, x64=True)
    np.testing.assert_allclose(np.asarray(getattr(fnp, name)(XN, axis=2)),
                               getattr(np, name)(XN, axis=2), rtol=1e-5)


@pytest.mark.parametrize("name", ["nanargmax", "nanargmin"])
def test_nanarg(name):
    agree(name, XN)
    agree(name, XN, axis=1)
    agree(name, XN, axis=2, keepdims=True)
    agree(name, np.arange(4))
    agree(name, np.array([np.nan, np.nan]))
    np.testing.assert_array_equal(np.asarray(getattr(fnp, name)(XN, axis=2)),
                                  getattr(np, name)(XN, axis=2))


def test_cov_corrcoef():
    m, y = R.randn(3, 6), R.randn(6)
    fw, aw = np.array([1, 2, 1, 1, 3, 1]), np.abs(y)
    for kw in ({}, dict(rowvar=False), dict(bias=True), dict(ddof=2), dict(fweights=fw),
               dict(aweights=aw), dict(fweights=fw, aweights=aw)):
        agree("cov", m, **kw)
        np.testing.assert_allclose(np.asarray(fnp.cov(m, **kw)), np.cov(m, **kw), rtol=1e-5)
    agree("cov", m, y)
    agree("cov", m[0])
    agree("cov", np.arange(5), x64=True)
    agree("cov", np.zeros((2, 2, 2)))
    agree("cov", m.astype(np.complex64))
    agree("cov", m, fweights=np.ones(5))
    agree("cov", m, fweights=np.ones(6) * 0.5)
    for empty in (np.zeros(0), np.zeros((3, 0)), np.zeros((0, 3)), np.zeros((1, 0))):
        agree("cov", empty.astype(np.float32))  # NaN without observations, (0, 0) without rows
        agree("corrcoef", empty.astype(np.float32))
    agree("cov", np.zeros((3, 0)), np.zeros((2, 0)))
    agree("cov", m, aweights=-aw)  # JAX takes absolute weights (numpy raises)
    agree("cov", m, ddof=9)  # negative degrees of freedom: JAX divides by them
    for row in (m[:1], m[:1].T):  # NumPy >= 2.2: a (1, n) m with rowvar=False is n variables
        for rowvar in (True, False):
            agree("cov", row, rowvar=rowvar, ddof=0)
            np.testing.assert_allclose(np.asarray(fnp.cov(row, rowvar=rowvar, ddof=0)),
                                       np.cov(row, rowvar=rowvar, ddof=0), rtol=1e-5)
            agree("cov", row, m[:1], rowvar=rowvar)  # y keeps the old rule (NumPy, JAX)
    agree("cov", m, dtype=np.int32)
    agree("corrcoef", m)
    agree("corrcoef", m, y)
    agree("corrcoef", m.astype(np.complex64))
    np.testing.assert_allclose(np.asarray(fnp.corrcoef(m, y)), np.corrcoef(m, y), rtol=1e-5)


def test_histograms():
    d = R.randn(50).astype(np.float32)
    for kw in ({}, dict(bins=5, range=(-1, 1)), dict(bins=np.array([-2, 0, .5, 3.])),
               dict(density=True), dict(weights=np.abs(d))):
        agree("histogram", d, **kw)
        counts, edges = fnp.histogram(d, **kw)
        e_counts, e_edges = np.histogram(d, **kw)
        np.testing.assert_allclose(np.asarray(counts), e_counts, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(edges), e_edges, rtol=1e-5)
    agree("histogram", np.arange(10), x64=True)
    agree("histogram", np.ones(4))
    agree("histogram", d, bins="auto")
    agree("histogram", d, weights=np.ones(3))
    agree("histogram_bin_edges", d, 4)
    agree("histogram_bin_edges", np.arange(5), 3, range=(0, 10))
    s = R.randn(40, 3)
    agree("histogramdd", s, bins=[2, 3, 4])
    agree("histogramdd", s, bins=3, density=True, weights=np.abs(s[:, 0]))
    agree("histogramdd", s, bins=[2, 3])
    agree("histogram2d", s[:, 0], s[:, 1], bins=[3, 4], density=True)
    agree("histogram2d", s[:, 0], s[:, 1], bins=np.array([-1, 0, 1, 2.]),
          range=[(-1, 1), (0, 2)])
    h, ex, ey = fnp.histogram2d(s[:, 0], s[:, 1], bins=4)
    e_h, e_ex, e_ey = np.histogram2d(s[:, 0], s[:, 1], bins=4)
    np.testing.assert_allclose(np.asarray(h), e_h)
    jit_agrees(lambda a: fnp.histogram(a, bins=4, range=(-1.0, 1.0)), d)


def test_bincount_digitize():
    x = np.array([0, 1, 1, 5])
    for kw in ({}, dict(minlength=9), dict(length=3), dict(weights=np.array([.5, 1, 2, 3]))):
        agree("bincount", x, **kw)
    np.testing.assert_array_equal(np.asarray(fnp.bincount(x, minlength=9)),
                                  np.bincount(x, minlength=9))
    agree("bincount", np.array([True, False]))
    agree("bincount", np.array([1., 2]))
    agree("bincount", np.ones((2, 2), int))
    agree("bincount", np.array([], np.int32))
    agree("bincount", x, x64=True)
    with pytest.raises(fluxion.errors.ConcretizationTypeError):
        fluxion.jit(fnp.bincount)(x)
    jit_agrees(lambda v: fnp.bincount(v, length=7), x)
    bins = np.array([0., 1, 2.5, 4])
    xs = np.array([-1, 0, 0.5, 1, 3, 4, 5.])
    for right in (False, True):
        agree("digitize", xs, bins, right=right)
        agree("digitize", xs, bins[::-1], right=right)
        agree("digitize", xs.astype(int), bins, right=right, method="compare_all")
        np.testing.assert_array_equal(np.asarray(fnp.digitize(xs, bins[::-1], right=right)),
                                      np.digitize(xs, bins[::-1], right=right))
    agree("digitize", xs, np.array([]))
    agree("digitize", xs, np.ones((2, 2)))


def test_jit_vmap_grads():
    x = R.randn(4, 6)
    jit_agrees(lambda a: fnp.quantile(a, Q.astype(np.float64), axis=1), x.astype(np.float32))
    jit_agrees(lambda a: (fnp.nanmedian(a, axis=0), fnp.nanstd(a)), XN[0])
    vmap_agrees(lambda a: fnp.percentile(a, 30.0), x.astype(np.float32))
    vmap_agrees(lambda a: fnp.nanvar(a), XN[0])
    x32 = R.randn(7)
    with fluxion.enable_x64(True):
        check_grads(lambda a: fnp.median(a), (x32,), order=1)
        check_grads(lambda a: fnp.quantile(a, 0.3), (x32,), order=1)
        check_grads(lambda a: fnp.nanvar(a), (x32,), order=1)
        check_grads(lambda a: fnp.cov(a.reshape(2, 3)), (R.randn(6),), order=1)
        check_grads(lambda a: fnp.corrcoef(a.reshape(2, 3)), (R.randn(6),), order=1)
