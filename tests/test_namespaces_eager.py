"""Eager calls of jax.scipy (special, stats, linalg, fft, the signal convolutions, ndimage) and
jax.nn functions run as one cached executable per signature (static arguments selecting the program), with the
values, dtypes and weak types of op-by-op evaluation and of JAX."""
import jax
import jax.scipy.special as jsp
import jax.numpy as jjnp
import jax.scipy.fft  # noqa: F401
import jax.scipy.ndimage  # noqa: F401
import jax.scipy.signal  # noqa: F401
import jax.scipy.stats as jst
import numpy as np
import pytest
import scipy.special

import fluxion
import fluxion.numpy as fnp
import fluxion.scipy.fft  # noqa: F401
import fluxion.scipy.ndimage  # noqa: F401
import fluxion.scipy.signal  # noqa: F401
import fluxion.scipy.special as fsp
import fluxion.scipy.stats as fst
from fluxion._src.numpy import eager

RNG = np.random.default_rng(0)
X = RNG.uniform(0.1, 3.0, (3, 4)).astype(np.float32)
SPD = np.array([[2.0, 0.5], [0.5, 1.0]], np.float32)

@pytest.fixture(autouse=True)
def _no_budget_flush(monkeypatch):
    """Counts of cached signatures below assume no process-wide flush in between."""
    monkeypatch.setattr(eager, "MAX_EAGER_EXECUTABLES", 10 ** 6)


CALLS = [
    ("gammaln", lambda sp, st, x: sp.special.gammaln(x)),
    ("gammaln_python_scalar", lambda sp, st, x: sp.special.gammaln(2.5)),
    ("betainc", lambda sp, st, x: sp.special.betainc(2.0, 3.0, x / 4)),
    ("logsumexp_axis_keepdims", lambda sp, st, x: sp.special.logsumexp(x, axis=1, keepdims=True)),
    ("logsumexp_b_return_sign",
     lambda sp, st, x: sp.special.logsumexp(x, 0, b=-x, return_sign=True)),
    ("softmax_axis", lambda sp, st, x: sp.special.softmax(x, axis=0)),
    ("multigammaln_d", lambda sp, st, x: sp.special.multigammaln(x + 2, 3)),
    ("log_ndtr_series_order", lambda sp, st, x: sp.special.log_ndtr(-x * 10, series_order=2)),
    ("xlogy", lambda sp, st, x: sp.special.xlogy(x, x + 1)),
    ("norm_logpdf", lambda sp, st, x: st.norm.logpdf(x, 0.5, 2.0)),
    ("norm_cdf_keywords", lambda sp, st, x: st.norm.cdf(x, loc=1.0, scale=x)),
    ("gamma_pdf", lambda sp, st, x: st.gamma.pdf(x, 2.0)),
    ("poisson_entropy", lambda sp, st, x: st.poisson.entropy(x)),
    ("t_logpdf", lambda sp, st, x: st.t.logpdf(x, 3.0)),
    ("multivariate_normal", lambda sp, st, x: st.multivariate_normal.logpdf(
        x[:, :2], np.zeros(2, np.float32), SPD)),
    ("sem_axis_ddof", lambda sp, st, x: st.sem(x, axis=1, ddof=0)),
    ("rankdata_method", lambda sp, st, x: st.rankdata(x.round(), method="min", axis=0)),
    ("mode_keepdims", lambda sp, st, x: st.mode(x.round(), axis=0, keepdims=True)),
    ("linalg_expm", lambda sp, st, x: sp.linalg.expm(x[:, :3] / 4)),
    ("linalg_solve_pos", lambda sp, st, x: sp.linalg.solve(SPD, x[:2], assume_a="pos")),
    ("linalg_lu", lambda sp, st, x: sp.linalg.lu(x)),
    ("linalg_svd_thin", lambda sp, st, x: sp.linalg.svd(x, full_matrices=False,
                                                         compute_uv=False)),
    ("linalg_hadamard_static_only", lambda sp, st, x: sp.linalg.hadamard(4, np.float32)),
    ("linalg_funm_callable", lambda sp, st, x: sp.linalg.funm(SPD, np.cos)),
    ("linalg_solve_triangular", lambda sp, st, x: sp.linalg.solve_triangular(
        np.tril(x[:, :3]) + 3 * np.eye(3, dtype=np.float32), x[:, 1:], lower=True)),
    ("fft_dct_ortho", lambda sp, st, x: sp.fft.dct(x, norm="ortho", axis=0)),
    ("numpy_fft_ortho", lambda sp, st, x: (fnp if sp is fluxion.scipy else jjnp).fft.rfft2(
        x, s=(4, 6), norm="ortho")),
    ("numpy_fftshift", lambda sp, st, x: (fnp if sp is fluxion.scipy else jjnp).fft.fftshift(
        x, axes=1)),
    ("signal_convolve_same", lambda sp, st, x: sp.signal.convolve(x[0], x[1], mode="same")),
    ("signal_correlate2d_valid", lambda sp, st, x: sp.signal.correlate2d(x, x[:2, :2], "valid")),
    ("ndimage_map_coordinates", lambda sp, st, x: sp.ndimage.map_coordinates(
        x, [x[0, :3] % 3, x[1, :3]], order=1, mode="nearest")),
]

NN_CALLS = [
    ("gelu_exact", lambda nn, x: nn.gelu(x, approximate=False)),
    ("softmax_axis_where", lambda nn, x: nn.softmax(x, axis=0, where=x > 1)),
    ("one_hot", lambda nn, x: nn.one_hot(x.round().astype(np.int32), 4, axis=0)),
    ("standardize", lambda nn, x: nn.standardize(x, axis=1, epsilon=1e-3)),
    ("celu_python_alpha", lambda nn, x: nn.celu(-x, 0.5)),
    ("dot_product_attention", lambda nn, x: nn.dot_product_attention(
        x[None, :, None, :], x[None, :, None, :], x[None, :, None, :], is_causal=True)),
]


def _leaves(out):
    return jax.tree_util.tree_leaves(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
def test_eager_equals_op_by_op_and_jax(name, call):
    want = call(jax.scipy, jst, X)
    got = call(fluxion.scipy, fst, X)
    with fluxion.disable_jit():
        op_by_op = call(fluxion.scipy, fst, X)
    for ours in (got, op_by_op):
        for g, w in zip(_leaves(ours), _leaves(want), strict=True):
            assert (g.dtype, g.shape, g.weak_type) == (w.dtype, w.shape, w.weak_type)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name,call", NN_CALLS, ids=[c[0] for c in NN_CALLS])
def test_nn_eager_equals_op_by_op_and_jax(name, call):
    want = call(jax.nn, jjnp.asarray(X))
    got = call(fluxion.nn, fnp.asarray(X))
    with fluxion.disable_jit():
        op_by_op = call(fluxion.nn, fnp.asarray(X))
    for ours in (got, op_by_op):
        assert (ours.dtype, ours.shape, ours.weak_type) == (want.dtype, want.shape,
                                                            want.weak_type)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(want), rtol=2e-5, atol=1e-6)
    assert hasattr(fluxion.nn.gelu, "eager_cache")


def test_cho_factor_keeps_lower_a_python_bool():
    c = fluxion.scipy.linalg.cho_factor(SPD, lower=True)
    assert c[1] is True
    np.testing.assert_allclose(np.asarray(fluxion.scipy.linalg.cho_solve(c, SPD)), np.eye(2),
                               atol=1e-5)


def test_public_functions_are_compiled_once_per_signature():
    assert hasattr(fnp.fft.irfftn, "eager_cache") and not hasattr(fnp.fft.fftfreq, "eager_cache")
    special = [n for n in dir(fsp) if not n.startswith("_") and callable(getattr(fsp, n))]
    assert [n for n in special if not hasattr(getattr(fsp, n), "eager_cache")] == ["sph_harm_y"]
    for family in (fst.norm, fst.gamma, fst.multivariate_normal, fst.dirichlet, fst.poisson):
        assert all(hasattr(f, "eager_cache") for n, f in vars(family).items()
                   if not n.startswith("_") and callable(f))
    logpdf = fst.norm.logpdf
    logpdf.clear_cache()
    x = fnp.asarray(X)
    for loc in (0.0, 1.0, 2.5):  # Python scalars are weak and dynamic: one program
        np.testing.assert_allclose(np.asarray(logpdf(x, loc, 2.0)),
                                   np.asarray(jst.norm.logpdf(X, loc, 2.0)), rtol=1e-6)
    logpdf(x[0], 0.0, 2.0)  # a new shape: a second one
    assert len(logpdf.eager_cache) == 2
    # Static arguments select the program; calls with other static values stay right.
    for axis in (0, 1, None):
        np.testing.assert_allclose(np.asarray(fsp.logsumexp(x, axis=axis)),
                                   np.asarray(jsp.logsumexp(X, axis=axis)), rtol=1e-6)


def test_bessel_jn_static_order_eager_and_op_by_op():
    # (JAX 0.10.2's float32 bessel_jn is NaN on these points; SciPy is the reference.)
    want = scipy.special.jv(np.arange(3)[:, None, None], X.astype(np.float64))
    eager = fsp.bessel_jn(X, v=2)
    with fluxion.disable_jit():  # the recurrence's loop index is then a Python int
        op_by_op = fsp.bessel_jn(X, v=2)
    for got in (eager, op_by_op):
        assert got.dtype == np.float32 and got.shape == (3, 3, 4)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-6)


def test_sph_harm_y_reads_n_max_from_values_outside_jit():
    n, m = np.array([0, 1, 2, 3]), np.array([0, 1, -2, 3])
    theta, phi = np.float32(0.7), np.float32(1.3)
    np.testing.assert_allclose(np.asarray(fsp.sph_harm_y(n, m, theta, phi)),
                               np.asarray(jsp.sph_harm_y(n, m, theta, phi)), rtol=1e-5)


def test_debug_nans_checks_the_function_outputs():
    # entr(-1) takes log(-1) inside and masks it to -inf: not an error. A NaN result is one,
    # named by the primitive that made it when the function is re-run op by op.
    with fluxion.debug_nans(True):
        assert float(fsp.entr(-1.0)) == -np.inf
        assert float(fst.gamma.logpdf(-1.0, 2.0)) == -np.inf
        with pytest.raises(FloatingPointError):
            fsp.gammaln(fnp.asarray([np.nan]))
        with pytest.raises(FloatingPointError):
            fst.norm.logpdf(fnp.asarray([1.0]), 0.0, -1.0)
