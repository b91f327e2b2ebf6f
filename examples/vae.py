"""A variational autoencoder on the 8x8 digits: stax encoder and decoder, the
reparameterization trick with jax.random, a Bernoulli likelihood, and optimizers.adam.

Written as a JAX user writes it; only the imports name fluxion.
Usage: python examples/vae.py [steps] [--json]
"""
import json
import sys

import numpy as np
from sklearn.datasets import load_digits

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import random
from fluxion.example_libraries import optimizers, stax

LATENT = 4

encoder_init, encode = stax.serial(
    stax.Dense(64), stax.Softplus,
    stax.FanOut(2), stax.parallel(stax.Dense(LATENT), stax.serial(stax.Dense(LATENT),
                                                                   stax.Softplus)))
decoder_init, decode = stax.serial(stax.Dense(64), stax.Softplus, stax.Dense(64))


def binarized_digits():
    x = load_digits().data.astype(np.float32) / 16.0
    return (x > 0.5).astype(np.float32)


def elbo(params, key, x):
    """One-sample estimate of the evidence lower bound, averaged over the batch."""
    enc_params, dec_params = params
    mean, stddev = encode(enc_params, x)
    z = mean + stddev * random.normal(key, mean.shape)
    logits = decode(dec_params, z)
    log_likelihood = -jnp.sum(jnp.logaddexp(0.0, jnp.where(x > 0, -logits, logits)), axis=1)
    kl = 0.5 * jnp.sum(mean ** 2 + stddev ** 2 - 1.0 - 2.0 * jnp.log(stddev), axis=1)
    return jnp.mean(log_likelihood - kl)


def main(steps=400, batch=64, report=print):
    data = binarized_digits()
    key = random.PRNGKey(0)
    enc_key, dec_key, key = random.split(key, 3)
    _, enc_params = encoder_init(enc_key, (-1, 64))
    _, dec_params = decoder_init(dec_key, (-1, LATENT))
    opt_init, opt_update, get_params = optimizers.adam(2e-3)

    @jax.jit
    def step(i, state, key, x):
        value, grads = jax.value_and_grad(lambda p: -elbo(p, key, x))(get_params(state))
        return value, opt_update(i, grads, state)

    state = opt_init((enc_params, dec_params))
    rng = np.random.default_rng(1)
    losses = []
    for i in range(steps):
        key, step_key = random.split(key)
        value, state = step(i, state, step_key, data[rng.choice(len(data), batch)])
        losses.append(float(value))
        if i % 100 == 0 or i == steps - 1:
            report(f"step {i:4d}  negative ELBO {losses[-1]:.3f} nats")
    final = float(-elbo(get_params(state), random.PRNGKey(7), data))
    report(f"negative ELBO on all digits: {final:.3f} nats")
    return losses, final, get_params(state)


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 400
    if "--json" in sys.argv:
        losses, final, params = main(steps, report=lambda *a: None)
        print(json.dumps({"losses": losses, "final": final,
                          "params": [np.asarray(p).ravel()[:20].tolist()
                                     for p in jax.tree.leaves(params)]}))
    else:
        main(steps)
