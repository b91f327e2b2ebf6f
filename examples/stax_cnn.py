"""A convolutional digit classifier built from stax layers and trained with optimizers.adam.

Written as a JAX user writes it; only the imports name fluxion. Data: scikit-learn's bundled
8x8 digits. Usage: python examples/stax_cnn.py [steps] [--json]
"""
import json
import sys

import numpy as np
from sklearn.datasets import load_digits

import fluxion as jax
import fluxion.numpy as jnp
from fluxion.example_libraries import optimizers, stax


def digits(seed=0):
    data = load_digits()
    x = (data.images.astype(np.float32) / 16.0)[..., None]  # N, 8, 8, 1
    y = data.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    return (x[360:], y[360:]), (x[:360], y[:360])


init_fn, apply_fn = stax.serial(
    stax.Conv(16, (3, 3), padding="SAME"), stax.Relu,
    stax.Conv(16, (3, 3), padding="SAME"), stax.Relu,
    stax.MaxPool((2, 2), strides=(2, 2)), stax.Flatten,
    stax.Dense(64), stax.Relu, stax.Dense(10), stax.LogSoftmax)


def loss(params, x, y):
    log_probs = apply_fn(params, x)
    return -jnp.mean(jnp.take_along_axis(log_probs, y[:, None], axis=1))


def accuracy(params, x, y):
    return jnp.mean(jnp.argmax(apply_fn(params, x), axis=1) == y)


def main(steps=300, batch=128, report=print):
    (x_train, y_train), (x_test, y_test) = digits()
    _, params = init_fn(jax.random.PRNGKey(0), (-1, 8, 8, 1))
    opt_init, opt_update, get_params = optimizers.adam(1e-3)

    @jax.jit
    def step(i, state, x, y):
        value, grads = jax.value_and_grad(loss)(get_params(state), x, y)
        return value, opt_update(i, grads, state)

    state = opt_init(params)
    order = np.random.default_rng(1)
    losses = []
    for i in range(steps):
        idx = order.choice(len(x_train), batch, replace=False)
        value, state = step(i, state, x_train[idx], y_train[idx])
        losses.append(float(value))
        if i % 50 == 0 or i == steps - 1:
            report(f"step {i:4d}  loss {losses[-1]:.4f}")
    acc = float(accuracy(get_params(state), x_test, y_test))
    report(f"test accuracy {acc:.3f}")
    return losses, acc, get_params(state)


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 300
    if "--json" in sys.argv:
        losses, acc, params = main(steps, report=lambda *a: None)
        print(json.dumps({"losses": losses, "accuracy": acc,
                          "params": [np.asarray(p).ravel()[:20].tolist()
                                     for p in jax.tree.leaves(params)]}))
    else:
        main(steps)
