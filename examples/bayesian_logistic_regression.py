"""Bayesian logistic regression on the breast cancer data, fitted by variational inference.

A mean-field Gaussian posterior over the weights is fitted by maximizing the ELBO with the
reparameterization trick: jax.scipy.stats.norm for the prior and the variational density,
jax.nn.log_sigmoid for the likelihood, optimizers.adam for the steps. Written as a JAX user
writes it; only the imports name fluxion. Data: scikit-learn's bundled breast cancer set.
Usage: python examples/bayesian_logistic_regression.py [steps] [--json]
"""
import json
import sys

import numpy as np
from sklearn.datasets import load_breast_cancer

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import random
from fluxion.example_libraries import optimizers
from fluxion.scipy.stats import norm

SAMPLES = 8  # Monte Carlo samples of the weights per step


def data(seed=0):
    x, y = load_breast_cancer(return_X_y=True)
    x = (x - x.mean(0)) / x.std(0)
    x = np.hstack([x, np.ones((len(x), 1))]).astype(np.float32)  # a bias feature
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order].astype(np.float32)
    return (x[100:], y[100:]), (x[:100], y[:100])


def log_joint(w, x, y):
    """log p(w) + log p(y | x, w) with a standard normal prior on each weight."""
    logits = x @ w
    likelihood = jnp.sum(y * jax.nn.log_sigmoid(logits) + (1 - y) * jax.nn.log_sigmoid(-logits))
    return jnp.sum(norm.logpdf(w, 0.0, 1.0)) + likelihood


def negative_elbo(params, key, x, y):
    mean, log_std = params
    eps = random.normal(key, (SAMPLES,) + mean.shape)
    w = mean + jnp.exp(log_std) * eps
    log_q = jnp.sum(norm.logpdf(w, mean, jnp.exp(log_std)), axis=1)
    log_p = jax.vmap(log_joint, in_axes=(0, None, None))(w, x, y)
    return -jnp.mean(log_p - log_q)


def main(steps=300, report=print):
    (x, y), (x_test, y_test) = data()
    dim = x.shape[1]
    opt_init, opt_update, get_params = optimizers.adam(0.05)
    state = opt_init((jnp.zeros(dim), jnp.full(dim, -2.0)))

    @jax.jit
    def step(i, state, key):
        value, grads = jax.value_and_grad(negative_elbo)(get_params(state), key, x, y)
        return value, opt_update(i, grads, state)

    key = random.PRNGKey(0)
    losses = []
    for i in range(steps):
        key, sub = random.split(key)
        value, state = step(i, state, sub)
        losses.append(float(value))
        if i % 100 == 0 or i == steps - 1:
            report(f"step {i:4d}  negative ELBO {losses[-1]:.2f}")
    mean, log_std = get_params(state)
    accuracy = float(jnp.mean(((x_test @ mean) > 0) == (y_test > 0.5)))
    report(f"test accuracy of the posterior mean: {accuracy:.3f}; "
           f"mean posterior std {float(jnp.mean(jnp.exp(log_std))):.3f}")
    return losses, accuracy, (mean, log_std)


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 300
    if "--json" in sys.argv:
        losses, accuracy, params = main(steps, report=lambda *a: None)
        print(json.dumps({"losses": losses, "accuracy": accuracy,
                          "params": [np.asarray(p).ravel()[:20].tolist() for p in params]}))
    else:
        main(steps)
