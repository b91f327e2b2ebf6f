"""Gamma samples of fluxion.random and the distributions built on them, against jax.random
bit for bit; gamma's implicit-differentiation gradient against JAX's and against finite
differences of the inverse CDF; sample moments."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
import fluxion.random as fr

jax = pytest.importorskip("jax")
jr = jax.random
jnp = jax.numpy

# Each case compiles a rejection sampler (nested while loops) once per library, which takes
# seconds; the cases are few and chosen to cover distinct code paths.


def assert_same(fn, seed=0):
    ours = np.asarray(fn(fr, fnp, fr.key(seed)))
    theirs = np.asarray(fn(jr, jnp, jr.key(seed)))
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)


def test_gamma_samples_and_moments():
    # alpha < 1 (boosted), = 1 and > 1.
    alpha = np.array([0.1, 0.6, 1.0, 3.0, 30.0], np.float32)
    n = 2000
    ours = np.asarray(fr.gamma(fr.PRNGKey(4), alpha, (n, 5)))
    np.testing.assert_array_equal(ours, jr.gamma(jr.PRNGKey(4), alpha, (n, 5)))
    # The same draws as a sample: mean alpha (5 standard errors) and variance alpha.
    np.testing.assert_allclose(ours.mean(0), alpha, rtol=5 / np.sqrt(alpha.min() * n))
    np.testing.assert_allclose(ours.var(0)[2:], alpha[2:], rtol=0.15)


@pytest.mark.parametrize("call", [
    lambda r, n, k: r.loggamma(k, n.array([0.01, 0.5, 4.0])),
    lambda r, n, k: r.dirichlet(k, n.array([0.5, 1.0, 2.0]), (2,)),
    lambda r, n, k: r.t(k, n.array([1.0, 5.0]), (3, 2)),
], ids=["loggamma", "dirichlet", "t"])
def test_gamma_family(call):
    assert_same(call, seed=5)


def test_gamma_under_vmap_matches_jax():
    alpha = np.array([0.5, 1.0, 2.0, 9.0], np.float32)
    ours = fluxion.vmap(lambda k, a: fr.gamma(k, a, (3,)))(fr.split(fr.key(7), 4), alpha)
    theirs = jax.vmap(lambda k, a: jr.gamma(k, a, (3,)))(jr.split(jr.key(7), 4), alpha)
    np.testing.assert_array_equal(ours, theirs)


def test_gamma_grad_matches_jax():
    alpha = np.array([0.2, 1.7, 5.0, 30.0], np.float32)
    ours = fluxion.grad(lambda a: fr.gamma(fr.key(8), a).sum())(alpha)
    theirs = jax.grad(lambda a: jr.gamma(jr.key(8), a).sum())(alpha)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)


def test_gamma_grad_is_the_implicit_derivative():
    # d(sample)/d(alpha) at a fixed CDF value, by central differences of the inverse CDF;
    # loggamma's is that divided by the sample.
    from scipy import special
    alpha = np.array([0.5, 2.0, 8.0])
    samples, grads = fluxion.jvp(lambda a: fr.gamma(fr.key(9), a), (alpha.astype(np.float32),),
                                 (np.ones(3, np.float32),))
    x = np.asarray(samples, np.float64)
    u = special.gammainc(alpha, x)
    h = 1e-5
    numeric = (special.gammaincinv(alpha + h, u) - special.gammaincinv(alpha - h, u)) / (2 * h)
    np.testing.assert_allclose(grads, numeric, rtol=1e-3)
    log_samples, log_grads = fluxion.jvp(lambda a: fr.loggamma(fr.key(9), a),
                                         (alpha.astype(np.float32),), (np.ones(3, np.float32),))
    np.testing.assert_allclose(np.exp(log_samples), x, rtol=1e-5)
    np.testing.assert_allclose(log_grads, numeric / x, rtol=1e-3)
