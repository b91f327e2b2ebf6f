"""Continuous samplers of fluxion.random against jax.random, bit for bit: the transforms of
uniform and normal draws (gamma and its family are in test_random_gamma.py)."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
import fluxion.random as fr

jax = pytest.importorskip("jax")
jr = jax.random
jnp = jax.numpy


def assert_same_jitted(draws, seed=0, exact=True):
    """Draws made in one jitted function per library (one compilation each) agree."""
    ours = fluxion.jit(lambda k: draws(fr, fnp, k))(fr.key(seed))
    theirs = jax.jit(lambda k: draws(jr, jnp, k))(jr.key(seed))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.dtype == b.dtype and a.shape == b.shape, i
        if exact:
            np.testing.assert_array_equal(a, b, err_msg=f"draw {i}")
        else:
            np.testing.assert_allclose(a, b, rtol=2e-6, err_msg=f"draw {i}")
    return ours


def test_uniform_transforms():
    def draws(r, n, k):
        ks = r.split(k, 6)
        return (r.exponential(ks[0], (7,)), r.laplace(ks[1], (2, 3), n.float16),
                r.logistic(ks[2], (5,)), r.cauchy(ks[3], (), n.bfloat16),
                r.pareto(ks[4], n.array([1.0, 3.0]), (3, 2)),
                r.weibull_min(ks[5], 2.0, 1.5, (4,)))
    assert_same_jitted(draws)


def test_more_uniform_transforms():
    def draws(r, n, k):
        ks = r.split(k, 5)
        return (r.rayleigh(ks[0], n.array([0.5, 2.0]), (3, 2)),
                r.triangular(ks[1], 0.0, 0.3, 1.0, (6,)),
                r.geometric(ks[2], 0.25, (5,)),
                r.rademacher(ks[3], (7,)),
                r.wald(ks[4], 2.0, (5,)))
    assert_same_jitted(draws, seed=1)


def test_normal_transforms():
    def draws(r, n, k):
        ks = r.split(k, 5)
        return (r.truncated_normal(ks[0], n.array([-1.0, 0.5]), 2.0, (3, 2)),
                r.lognormal(ks[1], 0.5, (5,)),
                r.maxwell(ks[2], (9,)),
                r.double_sided_maxwell(ks[3], 1.0, n.array([2.0, 3.0]), (4,)),
                r.truncated_normal(ks[4], -0.5, 0.5, (4,), n.bfloat16))
    assert_same_jitted(draws, seed=2)


def test_gumbel_modes():
    def draws(r, n, k):
        return (r.gumbel(k, (9,)), r.gumbel(k, (9,), mode="high"),
                r.gumbel(k, (2, 5), mode="highest"), r.gumbel(k, (3,), n.float16, mode="high"))
    assert_same_jitted(draws, seed=3)


def test_truncated_normal_stays_inside_bounds():
    out = np.asarray(fr.truncated_normal(fr.key(0), 1.0, 1.0001, (1000,)))
    assert (out > 1.0).all() and (out < 1.0001).all()


# ---------------------------------------------------------------------------------------------
# Errors and what is not there yet

def test_continuous_errors_like_jax():
    bad = [lambda r, n, k: r.gamma(k, 1.0, dtype=n.int32),
           lambda r, n, k: r.gamma(k, n.ones(3), (2,)),
           lambda r, n, k: r.beta(k, 1.0, n.ones(3), (2,)),
           lambda r, n, k: r.dirichlet(k, 1.0),
           lambda r, n, k: r.exponential(k, (2,), n.int32),
           lambda r, n, k: r.t(k, 2.0, (3,), n.int32),
           lambda r, n, k: r.pareto(k, n.ones(2), (3,)),
           lambda r, n, k: r.truncated_normal(k, n.zeros(2), 1.0, (3,))]
    for call in bad:
        with pytest.raises(Exception) as theirs:
            call(jr, jnp, jr.PRNGKey(0))
        with pytest.raises(theirs.type):
            call(fr, fnp, fr.PRNGKey(0))


def test_unsafe_parameter_cast_raises(x64):
    with jax.enable_x64(True), pytest.raises(jax.dtypes.TypePromotionError):
        jr.pareto(jr.key(0), np.float64(2.0), dtype=np.float32)
    with pytest.raises(fluxion.dtypes.TypePromotionError):
        fr.pareto(fr.key(0), np.float64(2.0), dtype=np.float32)


def test_linear_algebra_sampler_errors():
    # Values against jax.random are in tests/test_linalg.py.
    with pytest.raises(ValueError, match="method"):
        fr.multivariate_normal(fr.key(0), np.zeros(2), np.eye(2), method="lu")
    with pytest.raises(ValueError, match="cov.shape"):
        fr.multivariate_normal(fr.key(0), np.zeros(2), np.eye(3))
