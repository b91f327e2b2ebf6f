"""fluxion's main demo: train an MLP classifier on handwritten digits, end to end.

Data: scikit-learn's bundled 8x8 digits (1,797 images, no network needed). Model: a 64-256-256-10
ReLU network trained with softmax cross-entropy and Adam, one jitted step per minibatch
(fluxion.jit of fluxion.value_and_grad). Prints a progress bar with loss and examples/s, the
test accuracy, and writes a loss-curve plot whose path it prints.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

import fluxion as jax
import fluxion.numpy as jnp


def load_digits(seed: int = 0):
    from sklearn.datasets import load_digits as sk_load_digits
    data = sk_load_digits()
    x = data.data.astype(np.float32) / 16.0
    y = data.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_test = len(x) // 5
    mean, std = x[n_test:].mean(0), x[n_test:].std(0) + 1e-3
    x = (x - mean) / std
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test])


def init_params(sizes, seed: int = 0):
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        w = rng.standard_normal((n_in, n_out)).astype(np.float32) * np.sqrt(2.0 / n_in)
        params.append({"w": jnp.asarray(w), "b": jnp.zeros(n_out, jnp.float32)})
    return params


def predict(params, x):
    for layer in params[:-1]:
        x = jnp.maximum(x @ layer["w"] + layer["b"], 0.0)
    last = params[-1]
    return x @ last["w"] + last["b"]


def loss_fn(params, x, y):
    logits = predict(params, x)
    shifted = logits - jnp.max(logits, axis=1, keepdims=True)
    log_probs = shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=1, keepdims=True))
    one_hot = (y[:, None] == jnp.arange(10)[None, :]).astype(jnp.float32)
    return -jnp.mean(jnp.sum(one_hot * log_probs, axis=1))


def adam_init(params):
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    return {"m": zeros, "v": zeros, "t": jnp.zeros((), jnp.float32)}


@jax.jit
def train_step(params, opt_state, x, y, learning_rate=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    t = opt_state["t"] + 1.0
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt_state["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt_state["v"], grads)
    scale = learning_rate * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    params = jax.tree_util.tree_map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + eps),
                                    params, m, v)
    return params, {"m": m, "v": v, "t": t}, loss


@jax.jit
def accuracy(params, x, y):
    return jnp.mean((jnp.argmax(predict(params, x), axis=1) == y).astype(jnp.float32))


def progress_bar(epoch, epochs, loss, rate, width=30):
    filled = int(width * epoch / epochs)
    bar = "#" * filled + "-" * (width - filled)
    sys.stdout.write(f"\r[{bar}] epoch {epoch:3d}/{epochs}  loss {loss:.4f}  {rate:9.0f} examples/s")
    sys.stdout.flush()


def save_loss_curve(losses, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(np.arange(1, len(losses) + 1), losses)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (softmax cross-entropy)")
    ax.set_yscale("log")
    ax.set_title("fluxion: MLP on sklearn digits")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(epochs: int = 40, batch_size: int = 64):
    (x_train, y_train), (x_test, y_test) = load_digits()
    print(f"digits: {len(x_train)} training and {len(x_test)} test images, "
          f"device {jax.devices()[0]}")
    params = init_params([64, 256, 256, 10])
    opt_state = adam_init(params)
    rng = np.random.default_rng(1)
    steps_per_epoch = len(x_train) // batch_size
    losses = []
    start = time.perf_counter()
    seen = 0
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(x_train))
        for i in range(steps_per_epoch):
            idx = order[i * batch_size:(i + 1) * batch_size]
            params, opt_state, loss = train_step(params, opt_state, x_train[idx], y_train[idx])
            losses.append(loss)
            seen += batch_size
        last = float(losses[-1])
        progress_bar(epoch, epochs, last, seen / (time.perf_counter() - start))
    print()
    losses = [float(l) for l in losses]
    train_acc = float(accuracy(params, x_train, y_train))
    test_acc = float(accuracy(params, x_test, y_test))
    print(f"train accuracy {train_acc:.4f}   test accuracy {test_acc:.4f}")
    os.makedirs("out", exist_ok=True)
    path = os.path.abspath(os.path.join("out", "loss_curve.png"))
    save_loss_curve(losses, path)
    print(f"loss curve written to {path}")
    if test_acc < 0.95:
        raise SystemExit(f"test accuracy {test_acc:.4f} is below 0.95")


if __name__ == "__main__":
    main()
