import os
import sys

import numpy as np

import fluxion as jax
import fluxion.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "kernels"))
import attention_layernorm as ka  # noqa: E402

rng = np.random.default_rng(1)


def test_flash_attention_forward_nondividing_queries():
    q = rng.standard_normal((37, 8)).astype(np.float32)
    k = rng.standard_normal((32, 8)).astype(np.float32)
    v = rng.standard_normal((32, 8)).astype(np.float32)
    out = jax.jit(ka.flash_attention)(q, k, v)
    s = q @ k.T / np.sqrt(8)
    p = np.exp(s - s.max(1, keepdims=True))
    want = (p / p.sum(1, keepdims=True)) @ v
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-4, atol=1e-5)


def _ln_ref(x):
    mu = x.mean(1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-5)


def test_layer_norm_forward_and_backward():
    x = rng.standard_normal((19, 12)).astype(np.float32)
    w = rng.standard_normal((19, 12)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(ka.layer_norm(x)), _ln_ref(x), rtol=1e-4, atol=1e-5)
    g = jax.grad(lambda a: jnp.sum(ka.layer_norm(a) * w))(x)

    def ref_loss(a):
        mu = a.mean(1, keepdims=True)
        return jnp.sum((a - mu) / jnp.sqrt(((a - mu) ** 2).mean(1, keepdims=True) + 1e-5) * w)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(ref_loss)(x)),
                               rtol=1e-3, atol=1e-4)
