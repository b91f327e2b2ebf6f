"""Gradients of whole models match JAX's: an MLP with softmax cross-entropy, an RNN written
with a Python loop, logsumexp, a custom_jvp-stabilized function, and per-example gradients."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp

jax = pytest.importorskip("jax")
jjnp = jax.numpy

rng = np.random.default_rng(0)


def mlp_loss(np_like, nn_logsumexp):
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = np_like.tanh(h @ w + b)
        w, b = params[-1]
        logits = h @ w + b
        log_probs = logits - nn_logsumexp(logits, axis=1, keepdims=True)
        return -np_like.mean(np_like.sum(y * log_probs, axis=1))
    return loss


def mlp_params(sizes):
    return [(rng.standard_normal((a, b)).astype(np.float32) * 0.3,
             rng.standard_normal(b).astype(np.float32) * 0.1) for a, b in zip(sizes[:-1], sizes[1:])]


def test_mlp_softmax_cross_entropy_grads():
    params = mlp_params([5, 8, 8, 3])
    x = rng.standard_normal((6, 5)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 6)]
    ours = fluxion.jit(fluxion.grad(mlp_loss(jnp, fluxion.nn.logsumexp)))(params, x, y)
    theirs = jax.grad(mlp_loss(jjnp, jax.nn.logsumexp))(params, x, y)
    for (gw, gb), (tw, tb) in zip(ours, theirs):
        np.testing.assert_allclose(gw, tw, rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(gb, tb, rtol=2e-5, atol=1e-6)


def rnn_loss(np_like):
    def loss(params, xs):
        w_h, w_x, w_o = params
        h = np_like.zeros(w_h.shape[0], np.float32)
        total = 0.0
        for x in xs:  # a Python loop: unrolled into the trace
            h = np_like.tanh(h @ w_h + x @ w_x)
            total = total + np_like.sum((h @ w_o) ** 2)
        return total
    return loss


def test_rnn_with_python_loop_grads():
    params = (rng.standard_normal((4, 4)).astype(np.float32) * 0.5,
              rng.standard_normal((3, 4)).astype(np.float32) * 0.5,
              rng.standard_normal((4, 2)).astype(np.float32) * 0.5)
    xs = rng.standard_normal((5, 3)).astype(np.float32)
    ours = fluxion.grad(rnn_loss(jnp))(params, xs)
    theirs = jax.grad(rnn_loss(jjnp))(params, xs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-5)


def test_logsumexp_value_and_grad():
    x = rng.standard_normal((3, 4)).astype(np.float32) * 10
    np.testing.assert_allclose(fluxion.nn.logsumexp(x, axis=1), jax.nn.logsumexp(x, axis=1), rtol=1e-6)
    ours = fluxion.grad(lambda x: jnp.sum(fluxion.nn.logsumexp(x, axis=0)))(x)
    theirs = jax.grad(lambda x: jjnp.sum(jax.nn.logsumexp(x, axis=0)))(x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)
    big = np.array([1000.0, 1000.0], np.float32)
    np.testing.assert_allclose(fluxion.grad(fluxion.nn.logsumexp)(big), [0.5, 0.5])


def test_custom_jvp_stabilized_softplus_matches_jax():
    def make(custom_jvp, np_like):
        @custom_jvp
        def softplus(x):
            return np_like.log1p(np_like.exp(x))

        @softplus.defjvp
        def _jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return softplus(x), t / (1.0 + np_like.exp(-x))
        return softplus

    ours, theirs = make(fluxion.custom_jvp, jnp), make(jax.custom_jvp, jjnp)
    x = np.array([-50.0, -1.0, 0.0, 2.0, 80.0], np.float32)
    g_ours = fluxion.vmap(fluxion.grad(ours))(x)
    g_theirs = jax.vmap(jax.grad(theirs))(x)
    np.testing.assert_allclose(g_ours, g_theirs, rtol=1e-6)
    assert np.all(np.isfinite(np.asarray(g_ours)))
    np.testing.assert_allclose(fluxion.grad(fluxion.grad(ours))(0.5), jax.grad(jax.grad(theirs))(0.5), rtol=1e-5)


def test_per_example_gradients_match_loop():
    params = mlp_params([5, 8, 3])
    x = rng.standard_normal((7, 5)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 7)]
    loss = mlp_loss(jnp, fluxion.nn.logsumexp)
    single = lambda p, xi, yi: loss(p, xi[None], yi[None])
    batched = fluxion.jit(fluxion.vmap(fluxion.grad(single), in_axes=(None, 0, 0)))(params, x, y)
    for i in range(len(x)):
        expected = fluxion.grad(single)(params, x[i], y[i])
        for (bw, bb), (ew, eb) in zip(batched, expected):
            np.testing.assert_allclose(bw[i], ew, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(bb[i], eb, rtol=1e-5, atol=1e-6)
