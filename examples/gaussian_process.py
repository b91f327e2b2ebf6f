"""Gaussian process regression on the diabetes data: an RBF kernel whose hyperparameters are
fitted by maximizing the marginal likelihood with scipy.optimize.minimize (BFGS), solves with
scipy.linalg.cho_factor/cho_solve. Written as a JAX user writes it; only the imports name
fluxion. Data: scikit-learn's bundled diabetes set (BMI against disease progression).
Usage: python examples/gaussian_process.py [points] [--json]
"""
import json
import sys

import numpy as np
from sklearn.datasets import load_diabetes

import fluxion as jax
import fluxion.numpy as jnp
from fluxion.scipy.linalg import cho_factor, cho_solve
from fluxion.scipy.optimize import minimize

jax.config.update("jax_enable_x64", True)


def data(points):
    x, y = load_diabetes(return_X_y=True)
    x = x[:, 2:3]  # body mass index
    order = np.random.default_rng(0).permutation(len(x))[:points]
    x, y = x[order], y[order]
    return (x - x.mean()) / x.std(), (y - y.mean()) / y.std()


def kernel(params, a, b):
    log_length, log_amplitude, _ = params
    sq = jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)
    return jnp.exp(2 * log_amplitude) * jnp.exp(-0.5 * sq / jnp.exp(2 * log_length))


def negative_log_marginal_likelihood(params, x, y):
    noise = jnp.exp(2 * params[2])
    k = kernel(params, x, x) + (noise + 1e-6) * jnp.eye(x.shape[0])
    factor = cho_factor(k, lower=True)
    alpha = cho_solve(factor, y)
    log_det = 2 * jnp.sum(jnp.log(jnp.diagonal(factor[0])))
    return 0.5 * y @ alpha + 0.5 * log_det + 0.5 * x.shape[0] * jnp.log(2 * jnp.pi)


def predict(params, x, y, x_new):
    noise = jnp.exp(2 * params[2])
    factor = cho_factor(kernel(params, x, x) + (noise + 1e-6) * jnp.eye(x.shape[0]), lower=True)
    k_new = kernel(params, x_new, x)
    mean = k_new @ cho_solve(factor, y)
    var = jnp.exp(2 * params[1]) - jnp.sum(k_new * cho_solve(factor, k_new.T).T, axis=1)
    return mean, var


def main(points=150, report=print):
    x, y = data(points)
    fit = jax.jit(lambda p0: minimize(negative_log_marginal_likelihood, p0, args=(x, y),
                                      method="BFGS"))
    start = jnp.zeros(3)
    report(f"negative log marginal likelihood at the start: "
           f"{float(negative_log_marginal_likelihood(start, x, y)):.4f}")
    result = fit(start)
    report(f"after {int(result.nit)} BFGS iterations: {float(result.fun):.4f} "
           f"(success={bool(result.success)})")
    length, amplitude, noise = np.exp(np.asarray(result.x))
    report(f"length scale {length:.3f}, amplitude {amplitude:.3f}, noise {noise:.3f}")
    grid = jnp.linspace(-2.0, 3.0, 6)[:, None]
    mean, var = predict(result.x, x, y, grid)
    for g, m, v in zip(np.asarray(grid[:, 0]), np.asarray(mean), np.asarray(var)):
        report(f"  bmi {g:+.1f} sd: predicted progression {m:+.3f} +- {np.sqrt(v):.3f} sd")
    return float(result.fun), np.asarray(result.x), int(result.nit), np.asarray(mean)


if __name__ == "__main__":
    points = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 150
    if "--json" in sys.argv:
        fun, x, nit, mean = main(points, report=lambda *a: None)
        print(json.dumps({"losses": [fun], "params": [x.tolist(), mean.tolist()],
                          "iterations": nit}))
    else:
        main(points)
