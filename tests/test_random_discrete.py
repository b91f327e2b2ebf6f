"""Discrete samplers of fluxion.random against jax.random, bit for bit: randint, bernoulli,
categorical, choice, permutation, geometric, poisson, binomial, multinomial; plus moment checks
of the rejection samplers."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
import fluxion.random as fr

jax = pytest.importorskip("jax")
jr = jax.random
jnp = jax.numpy


def assert_same(fn, seed=0):
    """fn(random module, numpy module, key) gives the same array in fluxion and JAX."""
    ours = np.asarray(fn(fr, fnp, fr.PRNGKey(seed)))
    theirs = np.asarray(fn(jr, jnp, jr.PRNGKey(seed)))
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (ours, theirs)
    np.testing.assert_array_equal(ours, theirs)


def assert_same_jitted(draws, seed=0):
    """Several draws in one jitted function (one compilation per library)."""
    ours = fluxion.jit(lambda k: draws(fr, fnp, k))(fr.PRNGKey(seed))
    theirs = jax.jit(lambda k: draws(jr, jnp, k))(jr.PRNGKey(seed))
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# randint

@pytest.mark.parametrize("args", [((3, 5), -100, 100, None), ((9,), 0, 2**31 - 1, "uint32")],
                         ids=str)
def test_randint(args):
    shape, lo, hi, dtype = args
    assert_same(lambda r, n, k: r.randint(k, shape, lo, hi, dtype), seed=13)


def test_randint_bounds_broadcast_clip_and_cross():
    def draws(r, n, k):
        return (r.randint(k, (2, 3), n.array([0, 5, 10]), n.array([[3], [20]])),
                r.randint(k, (3,), 7, n.array([3, 7, 9])),  # maxval <= minval gives minval
                r.randint(k, (4,), -300, 300, n.int8),      # bounds clipped to int8
                r.randint(k, (), 1.5, 9.7))
    assert_same_jitted(draws, seed=1)


# ---------------------------------------------------------------------------------------------
# bernoulli, categorical

@pytest.mark.parametrize("shape,p,mode", [((11,), 0.3, "high"), (None, [0.1, 0.5, 0.9], "low")])
def test_bernoulli(shape, p, mode):
    assert_same(lambda r, n, k: r.bernoulli(k, n.array(p) if isinstance(p, list) else p, shape,
                                            mode), seed=4)


@pytest.mark.parametrize("kwargs", [{}, {"axis": 0, "shape": (4, 3)}], ids=str)
def test_categorical(kwargs):
    logits = np.array([[0.1, 2.0, 0.3], [1.0, 1.0, 1.0]], np.float32)
    assert_same(lambda r, n, k: r.categorical(k, logits, **kwargs), seed=6)


def test_categorical_without_replacement():
    logits = np.log(np.arange(1, 8, dtype=np.float32))
    assert_same(lambda r, n, k: r.categorical(k, np.stack([logits, -logits]), shape=(3, 2),
                                              replace=False))


# ---------------------------------------------------------------------------------------------
# choice and permutation

@pytest.mark.parametrize("call", [
    lambda r, n, k: r.choice(k, 10, (5,)),
    lambda r, n, k: r.choice(k, 10, (2, 2), p=n.arange(10.0) / 45),
    lambda r, n, k: r.choice(k, n.arange(20).reshape(10, 2) * 1.5, (2, 3), replace=False,
                             p=n.arange(1, 11.0) / 55),
    lambda r, n, k: r.choice(k, 4, (0,)),
])
def test_choice(call):
    assert_same(call, seed=8)


@pytest.mark.parametrize("call", [
    lambda r, n, k: r.permutation(k, 10),
    lambda r, n, k: r.permutation(k, n.arange(12).reshape(3, 4), axis=1),
    lambda r, n, k: r.permutation(k, n.arange(12.0).reshape(3, 4), axis=-1, independent=True),
])
def test_permutation(call):
    assert_same(call, seed=9)


def test_permutation_is_a_permutation():
    out = np.asarray(fr.permutation(fr.key(0), 1000))
    np.testing.assert_array_equal(np.sort(out), np.arange(1000))
    assert not np.array_equal(out, np.arange(1000))


# ---------------------------------------------------------------------------------------------
# geometric, poisson, binomial, multinomial

def test_geometric():
    assert_same(lambda r, n, k: r.geometric(k, n.array([0.05, 0.3, 0.9]), (2, 3)))


def test_poisson_matches_and_has_poisson_moments():
    # Rates below 10 take Knuth's algorithm, the others transformed rejection; 0 gives 0.
    lam = np.array([0.5, 7.0, 40.0, 0.0, 1e4], np.float32)
    n = 4000
    ours = np.asarray(fr.poisson(fr.PRNGKey(2), lam, (n, 5)))
    np.testing.assert_array_equal(ours, jr.poisson(jr.PRNGKey(2), lam, (n, 5)))
    # The same draws as a sample: means within 5 standard errors, variances within 10%.
    np.testing.assert_allclose(ours.mean(0), lam, atol=5 * np.sqrt(lam.max() / n))
    np.testing.assert_allclose(ours.var(0)[[0, 1, 2, 4]], lam[[0, 1, 2, 4]], rtol=0.1)
    assert (ours[:, 3] == 0).all()


def test_binomial_matches_and_has_binomial_moments():
    # Small means take inversion, large ones BTRS; invalid parameters give NaN, n = inf gives inf.
    count = np.array([5.0, 50.0, 1000.0, -1.0, np.inf, 20.0], np.float32)
    prob = np.array([0.3, 0.7, 0.05, 0.5, 0.5, 0.99], np.float32)
    n = 2000
    ours = np.asarray(fr.binomial(fr.PRNGKey(3), count, prob, (n, 6)))
    np.testing.assert_array_equal(ours, jr.binomial(jr.PRNGKey(3), count, prob, (n, 6)))
    valid = [0, 1, 2, 5]
    mean, var = count[valid] * prob[valid], count[valid] * prob[valid] * (1 - prob[valid])
    np.testing.assert_allclose(ours[:, valid].mean(0), mean, atol=5 * np.sqrt(var.max() / n))
    assert np.isnan(ours[:, 3]).all() and np.isinf(ours[:, 4]).all()


def test_multinomial():
    assert_same(lambda r, n, k: r.multinomial(k, n.array([10.0, 100.0]),
                                              n.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]),
                                              dtype=n.int32))


def test_discrete_errors_like_jax():
    bad = [lambda r, n, k: r.randint(k, (3,), 0, 10, "float32"),
           lambda r, n, k: r.randint(k, (3,), n.zeros(4, "int32"), 10),
           lambda r, n, k: r.bernoulli(k, 1, (3,)),
           lambda r, n, k: r.bernoulli(k, n.array([0.1, 0.2]), (3,)),
           lambda r, n, k: r.bernoulli(k, 0.5, (3,), mode="mid"),
           lambda r, n, k: r.choice(k, 5, 3),
           lambda r, n, k: r.choice(k, 3, (5,), replace=False),
           lambda r, n, k: r.choice(k, 0, (2,)),
           lambda r, n, k: r.choice(k, 5, (2,), p=n.ones(4) / 4),
           lambda r, n, k: r.permutation(k, 2.5),
           lambda r, n, k: r.categorical(k, n.zeros((3, 4)), shape=(5,)),
           lambda r, n, k: r.categorical(k, n.zeros(3), shape=(5,), replace=False),
           lambda r, n, k: r.geometric(k, 0.5, dtype=n.float32),
           lambda r, n, k: r.poisson(k, 3.0, (2,), dtype=n.float32),
           lambda r, n, k: r.binomial(k, 3.0, 0.5, dtype=n.int32)]
    for call in bad:
        with pytest.raises(Exception) as theirs:
            call(jr, jnp, jr.PRNGKey(0))
        with pytest.raises(theirs.type):
            call(fr, fnp, fr.PRNGKey(0))
