"""The workloads, each written once against a (jax-like, jnp-like) module pair.

A workload function takes `(jax, jnp, sizes)` and returns a probe (see harness.Measures) that
times its steady state, a compilation from scratch or a memory figure. It uses only the public
JAX API, so the same code runs on `jax, jax.numpy` and on `fluxion, fluxion.numpy`.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time

import numpy as np

from benchmarks.harness import Measures, Row, Steady, Timed, Value, Workload, short_error

FIRST_CALL_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "first_call.py")


# ---------------------------------------------------------------------------------------------
# Models and data (NumPy first, so both frameworks get identical values)

def _normal(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def init_mlp(jnp, sizes, seed=0):
    """[(w, b), ...] for layer widths `sizes`, with 1/sqrt(fan_in)-scaled weights."""
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(_normal(rng, (n_in, n_out), 1 / np.sqrt(n_in))),
             jnp.zeros((n_out,), jnp.float32))
            for n_in, n_out in zip(sizes[:-1], sizes[1:])]


def tanh_mlp_loss(jnp):
    def loss(params, x):
        for w, b in params:
            x = jnp.tanh(x @ w + b)
        return jnp.mean(x ** 2)
    return loss


def relu_mlp(jnp, params, x):
    for w, b in params[:-1]:
        x = jnp.maximum(x @ w + b, 0.0)
    w, b = params[-1]
    return x @ w + b


def cross_entropy_loss(jax, jnp):
    """Softmax cross-entropy of the ReLU MLP; works on a batch or on a single example."""
    def loss(params, x, labels):
        logits = relu_mlp(jnp, params, x)
        log_probs = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.sum(jax.nn.one_hot(labels, logits.shape[-1]) * log_probs, axis=-1))
    return loss


def sgd_train_step(jax, jnp, learning_rate=1e-3):
    loss = cross_entropy_loss(jax, jnp)

    def train_step(params, x, labels):
        value, grads = jax.value_and_grad(loss)(params, x, labels)
        params = jax.tree_util.tree_map(lambda p, g: p - learning_rate * g, params, grads)
        return params, value
    return train_step


def classification_data(jnp, batch, features, classes, seed=1):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(_normal(rng, (batch, features)))
    labels = jnp.asarray(rng.integers(0, classes, size=batch).astype(np.int32))
    return x, labels


# ---------------------------------------------------------------------------------------------
# (1) and (2): the cost of running one tiny op

def jit_dispatch(jax, jnp, sizes):
    add = jax.jit(lambda x, y: x + y)
    x = jnp.ones((sizes["n"],), jnp.float32)
    y = jnp.ones((sizes["n"],), jnp.float32)
    return Measures(dispatch=Steady(lambda: add(x, y).block_until_ready(), warmup=100))


def eager_add(jax, jnp, sizes):
    x = jnp.ones((sizes["n"],), jnp.float32)
    y = jnp.ones((sizes["n"],), jnp.float32)
    return Measures(eager=Steady(lambda: (x + y).block_until_ready(), warmup=100))


# ---------------------------------------------------------------------------------------------
# (3) and (4): tracing, and the first call in a fresh process

def _tanh_mlp_problem(jnp, sizes):
    params = init_mlp(jnp, [sizes["width"]] * (sizes["layers"] + 1))
    x = jnp.asarray(_normal(np.random.default_rng(1), (sizes["batch"], sizes["width"])))
    return params, x


def make_jaxpr_of_grad(jax, jnp, sizes):
    loss = tanh_mlp_loss(jnp)
    params, x = _tanh_mlp_problem(jnp, sizes)
    # A new grad function per call, so no framework can reuse a previous trace.
    return Measures(tracing=Steady(lambda: jax.make_jaxpr(jax.grad(loss))(params, x)))


def first_call_of_jit_grad(jax, jnp, sizes) -> float:
    """Seconds for jit(grad(loss))(params, x) to trace, lower, compile, run and be ready.

    Meant for a fresh process (benchmarks/first_call.py); the backend is started by creating
    the inputs, before the clock starts.
    """
    params, x = _tanh_mlp_problem(jnp, sizes)
    jax.block_until_ready((params, x))
    loss = tanh_mlp_loss(jnp)
    start = time.perf_counter()
    jax.block_until_ready(jax.jit(jax.grad(loss))(params, x))
    return time.perf_counter() - start


class FreshProcessProbe:
    """Runs benchmarks/first_call.py in a new Python process per sample: no warm caches."""

    def __init__(self, module_name: str, sizes: dict, timeout_s: float = 300):
        self.command = [sys.executable, FIRST_CALL_SCRIPT, module_name, json.dumps(sizes)]
        self.timeout_s = timeout_s

    def sample(self, block_seconds: float) -> dict:
        proc = subprocess.run(self.command, capture_output=True, text=True, timeout=self.timeout_s)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise RuntimeError(f"helper process failed: {tail}")
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        return {"import": report["import_s"],
                "first_call": report.get("first_call_s", report.get("first_call_error"))}


def first_call_in_fresh_process(jax, jnp, sizes):
    return FreshProcessProbe(jax.__name__, sizes)


# ---------------------------------------------------------------------------------------------
# (5), (6) and (10): an MLP classifier

def training_step(jax, jnp, sizes):
    step = jax.jit(sgd_train_step(jax, jnp))
    state = {"params": init_mlp(jnp, sizes["layers"])}
    x, labels = classification_data(jnp, sizes["batch"], sizes["layers"][0], sizes["layers"][-1])

    def run():
        state["params"], loss = step(state["params"], x, labels)
        jax.block_until_ready((state["params"], loss))
    return Measures(train_step=Steady(run))


def per_example_grads(jax, jnp, sizes):
    loss = cross_entropy_loss(jax, jnp)
    grads = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    params = init_mlp(jnp, sizes["layers"])
    x, labels = classification_data(jnp, sizes["batch"], sizes["layers"][0], sizes["layers"][-1])
    return Measures(per_example=Steady(lambda: jax.block_until_ready(grads(params, x, labels))))


def _memory_of_donated_step(jax, jnp, sizes):
    params = init_mlp(jnp, sizes["layers"])
    x, labels = classification_data(jnp, sizes["batch"], sizes["layers"][0], sizes["layers"][-1])
    step = jax.jit(sgd_train_step(jax, jnp), donate_argnums=0)
    compiled = step.lower(params, x, labels).compile()
    stats = compiled.memory_analysis()
    jax.block_until_ready(compiled(params, x, labels))  # the donated executable must also run
    parts = {name: int(getattr(stats, f"{name}_size_in_bytes"))
             for name in ("temp", "argument", "output", "alias", "generated_code")}
    peak = parts["temp"] + parts["argument"] + parts["output"] - parts["alias"]
    return peak, parts


def donated_step_memory(jax, jnp, sizes):
    return Measures(peak_memory=Value(lambda: _memory_of_donated_step(jax, jnp, sizes)))


# ---------------------------------------------------------------------------------------------
# (7): a scan RNN

def scan_rnn(jax, jnp):
    def rnn(params, h0, xs):
        w_h, w_x, b = params

        def cell(h, x):
            return jnp.tanh(h @ w_h + x @ w_x + b), None

        h, _ = jax.lax.scan(cell, h0, xs)
        return h
    return rnn


def scan_rnn_compile_and_run(jax, jnp, sizes):
    rng = np.random.default_rng(0)
    hidden, features = sizes["hidden"], sizes["features"]
    batch, steps = sizes["batch"], sizes["steps"]
    params = (jnp.asarray(_normal(rng, (hidden, hidden), 1 / np.sqrt(hidden))),
              jnp.asarray(_normal(rng, (features, hidden), 1 / np.sqrt(features))),
              jnp.zeros((hidden,), jnp.float32))
    h0 = jnp.zeros((batch, hidden), jnp.float32)
    xs = jnp.asarray(_normal(rng, (steps, batch, features)))
    run = jax.jit(scan_rnn(jax, jnp))

    def compile_fresh():  # from a new Python function, so no trace or executable is reused
        return jax.jit(scan_rnn(jax, jnp)).lower(params, h0, xs).compile()

    return Measures(
        scan_compile=Timed(compile_fresh),
        scan_step=Steady(lambda: run(params, h0, xs).block_until_ready(), per=steps))


# ---------------------------------------------------------------------------------------------
# (8) and (9): big array programs

def normal_samples(jax, jnp, sizes):
    n = sizes["n"]
    sample = jax.jit(lambda key: jax.random.normal(key, (n,), jnp.float32))
    key = jax.random.PRNGKey(0)
    return Measures(random_normal=Steady(lambda: sample(key).block_until_ready()))


def matmul_chain(jax, jnp, sizes):
    n, count = sizes["n"], sizes["count"]
    rng = np.random.default_rng(0)
    x = jnp.asarray(_normal(rng, (n, n)))
    weights = [jnp.asarray(_normal(rng, (n, n), 1 / np.sqrt(n))) for _ in range(count)]

    @jax.jit
    def chain(x, weights):
        for w in weights:
            x = x @ w
        return x
    return Measures(matmul_chain=Steady(lambda: chain(x, weights).block_until_ready(), warmup=1))


# ---------------------------------------------------------------------------------------------
# The list the runner goes through

MNIST_MLP = [784, 512, 512, 10]
SMALL_MLP = [784, 128, 128, 10]

# Row titles are formatted with the workload's sizes (lists print as 784-512-10).
WORKLOADS = [
    Workload(1, "jit_dispatch",
             (Row("dispatch", "jit dispatch of x + y, f32[{n}] (per call)", "us", "dispatch"),),
             jit_dispatch, {"n": 3}, {"n": 3}),
    Workload(2, "eager_add", (Row("eager", "eager x + y, f32[{n}] (per op)", "us", "eager"),),
             eager_add, {"n": 3}, {"n": 3}),
    Workload(3, "make_jaxpr_grad_mlp",
             (Row("tracing", "make_jaxpr(grad) of {layers}-layer tanh MLP, width {width}", "ms",
                  "tracing"),),
             make_jaxpr_of_grad, {"layers": 20, "width": 64, "batch": 32},
             {"layers": 5, "width": 64, "batch": 32}),
    Workload(4, "first_call_jit_grad_mlp",
             (Row("import", "import time (fresh process)", "ms", None),
              Row("first_call", "first call of jit(grad) of the {layers}-layer MLP (fresh "
                                "process)", "ms", "first_call")),
             first_call_in_fresh_process, {"layers": 20, "width": 64, "batch": 32},
             {"layers": 5, "width": 64, "batch": 32}, reps=5),
    Workload(5, "train_step_mlp",
             (Row("train_step", "train step (value_and_grad + SGD), MLP {layers}, batch {batch}",
                  "ms", "steady"),),
             training_step, {"layers": MNIST_MLP, "batch": 256},
             {"layers": [784, 128, 10], "batch": 64}),
    Workload(6, "per_example_grads",
             (Row("per_example", "vmap(grad) per-example grads, MLP {layers}, batch {batch}",
                  "ms", "steady"),),
             per_example_grads, {"layers": SMALL_MLP, "batch": 128},
             {"layers": [784, 32, 10], "batch": 16}),
    Workload(7, "scan_rnn",
             (Row("scan_compile", "scan RNN, {steps} steps, hidden {hidden}: trace + lower + "
                                  "compile", "ms", "first_call"),
              Row("scan_step", "scan RNN, {steps} steps, hidden {hidden}, batch {batch}: time "
                               "per step", "us", "steady")),
             scan_rnn_compile_and_run,
             {"steps": 1000, "hidden": 128, "features": 128, "batch": 8},
             {"steps": 100, "hidden": 32, "features": 32, "batch": 8}, reps=5),
    Workload(8, "random_normal",
             (Row("random_normal", "{n:,} normal samples (jitted)", "ms", "steady"),),
             normal_samples, {"n": 10**7}, {"n": 10**5}, requires="random"),
    Workload(9, "matmul_chain",
             (Row("matmul_chain", "{count} chained {n}x{n} f32 matmuls (jitted)", "ms",
                  "steady"),),
             matmul_chain, {"n": 2048, "count": 4}, {"n": 256, "count": 4}, reps=5),
    Workload(10, "donated_train_step_memory",
             (Row("peak_memory", "peak memory of (5) with donated params (memory_analysis: "
                                 "temp + args + outputs - aliased)", "bytes", "memory"),),
             donated_step_memory, {"layers": MNIST_MLP, "batch": 256},
             {"layers": [784, 128, 10], "batch": 64}, reps=1),
]


def run_first_call_report(module_name: str, sizes: dict) -> dict:
    """What benchmarks/first_call.py prints: import and first-call seconds (or the error)."""
    start = time.perf_counter()
    jax = importlib.import_module(module_name)
    jnp = importlib.import_module(f"{module_name}.numpy")
    report = {"import_s": time.perf_counter() - start}
    try:
        report["first_call_s"] = first_call_of_jit_grad(jax, jnp, sizes)
    except Exception as e:
        report["first_call_error"] = short_error(e)
    return report
