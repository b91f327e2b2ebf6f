"""(80-85) Portability: the persistent compilation cache, export, and IREE.

80: first call of jit(grad(20-layer MLP)) in a fresh process: fluxion with its persistent cache
    warm (the default, primed once in setup) against JAX cold (no persistent cache);
81: the same with JAX's persistent cache enabled and warm as well (`jax_compilation_cache_dir`,
    min compile time 0): both frameworks warm;
82: a second `jit` object of the same function: its first call, in the same process;
83: export + serialize in process, then deserialize + first call in a fresh process;
84: the MLP training step of workload 5 compiled by IREE (fluxion) against XLA (JAX);
85: the matmul chain of workload 9 compiled by IREE (fluxion) against XLA (JAX).
For JAX, 84-85 measure XLA, so their ratios are IREE / XLA.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.harness import Measures, Row, Steady, Timed, Workload
from benchmarks.workloads import (MNIST_MLP, _normal, _tanh_mlp_problem, classification_data,
                                  init_mlp, sgd_train_step, tanh_mlp_loss)

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "export_first_call.py")


def _cache_env(module_name: str, directory: str | None) -> dict:
    env = dict(os.environ)
    if module_name == "fluxion":
        if directory is None:
            env["FLUXION_ENABLE_COMPILATION_CACHE"] = "0"
        else:
            env.update(FLUXION_ENABLE_COMPILATION_CACHE="1",
                       FLUXION_COMPILATION_CACHE_DIR=directory,
                       FLUXION_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    else:
        for k in ("JAX_COMPILATION_CACHE_DIR", "JAX_ENABLE_COMPILATION_CACHE"):
            env.pop(k, None)
        if directory is not None:
            env.update(JAX_COMPILATION_CACHE_DIR=directory,
                       JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                       JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    return env


def _run_helper(args, env, timeout_s=300) -> dict:
    proc = subprocess.run([sys.executable, HELPER, *args], capture_output=True, text=True,
                          env=env, timeout=timeout_s)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise RuntimeError(f"helper process failed: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


class _WarmCacheProbe:
    """First call in a fresh process per sample, with a persistent cache primed in setup (or
    none, for JAX in workload 80). With `floor`, also XLA's share of that call: with a warm
    cache, a second fresh process per sample times the call stage by stage and reports the
    executable's load from the cache plus its first run; cold (JAX), the whole first call."""

    def __init__(self, module_name, sizes, warm: bool, floor: bool = False):
        self.tmp = tempfile.TemporaryDirectory(prefix="fluxion-bench-cache-")
        self.env = _cache_env(module_name, self.tmp.name if warm else None)
        self.args = [module_name, "jit", json.dumps(sizes)]
        self.warm, self.floor = warm, floor
        if warm:
            _run_helper(self.args, self.env)  # fills the cache

    def sample(self, block_seconds):
        values = {"first_call": _run_helper(self.args, self.env)["first_call_s"]}
        if self.floor and self.warm:
            phases = _run_helper([self.args[0], "phases", self.args[2]], self.env)
            values["xla_floor"] = phases["compile_s"] + phases["first_run_s"]
        elif self.floor:
            values["xla_floor"] = values["first_call"]
        return values


def first_call_warm_vs_cold(jax, jnp, sizes):
    return _WarmCacheProbe(jax.__name__, sizes, warm=jax.__name__ == "fluxion", floor=True)


def first_call_both_warm(jax, jnp, sizes):
    return _WarmCacheProbe(jax.__name__, sizes, warm=True)


def second_jit_object(jax, jnp, sizes):
    params, x = _tanh_mlp_problem(jnp, sizes)
    grad_fn = jax.grad(tanh_mlp_loss(jnp))
    jax.block_until_ready(jax.jit(grad_fn)(params, x))  # the first jit object
    return Measures(second_jit=Timed(
        lambda: jax.block_until_ready(jax.jit(grad_fn)(params, x))))


class _ExportProbe:
    def __init__(self, jax, jnp, sizes):
        self.jax, self.sizes = jax, sizes
        self.export = __import__(f"{jax.__name__}.export", fromlist=["export"])
        self.params, self.x = _tanh_mlp_problem(jnp, sizes)
        self.grad_fn = jax.grad(tanh_mlp_loss(jnp))
        self.tmp = tempfile.TemporaryDirectory(prefix="fluxion-bench-export-")
        self.path = os.path.join(self.tmp.name, "mlp_grad.bin")
        self.env = _cache_env(jax.__name__, None)

    def sample(self, block_seconds):
        start = time.perf_counter()
        exp = self.export.export(self.jax.jit(self.grad_fn))(self.params, self.x)
        blob = exp.serialize()
        exported = time.perf_counter() - start
        with open(self.path, "wb") as f:
            f.write(bytes(blob))
        report = _run_helper([self.jax.__name__, "load", json.dumps(self.sizes), self.path],
                             self.env)
        return {"export_serialize": exported, "load_first_call": report["load_and_call_s"]}


def export_round_trip(jax, jnp, sizes):
    return _ExportProbe(jax, jnp, sizes)


def _jit_iree(jax, f):
    """IREE for fluxion; XLA for JAX (the baseline the ratio compares with)."""
    return jax.jit(f, backend="iree") if jax.__name__ == "fluxion" else jax.jit(f)


def iree_training_step(jax, jnp, sizes):
    step = _jit_iree(jax, sgd_train_step(jax, jnp))
    state = {"params": init_mlp(jnp, sizes["layers"])}
    x, labels = classification_data(jnp, sizes["batch"], sizes["layers"][0], sizes["layers"][-1])

    def run():
        state["params"], loss = step(state["params"], x, labels)
        jax.block_until_ready((state["params"], loss))
    return Measures(iree_train_step=Steady(run))


def iree_matmul_chain(jax, jnp, sizes):
    n, count = sizes["n"], sizes["count"]
    rng = np.random.default_rng(0)
    x = jnp.asarray(_normal(rng, (n, n)))
    weights = [jnp.asarray(_normal(rng, (n, n), 1 / np.sqrt(n))) for _ in range(count)]

    def chain(x, weights):
        for w in weights:
            x = x @ w
        return x
    chain = _jit_iree(jax, chain)
    return Measures(iree_matmul_chain=Steady(lambda: chain(x, weights).block_until_ready(),
                                             warmup=1))


MLP_SIZES = {"layers": 20, "width": 64, "batch": 32}
WORKLOADS = [
    Workload(80, "first_call_warm_cache_vs_jax_cold",
             (Row("first_call", "first call of jit(grad) of the {layers}-layer MLP, fresh "
                                "process: fluxion with a warm persistent cache vs JAX cold",
                  "ms", "warm_cache_first_call"),
              Row("xla_floor", "XLA's share of that fluxion call (executable load from the "
                               "cache + first run) vs JAX cold: the least row 80 can be", "ms",
                  None)),
             first_call_warm_vs_cold, MLP_SIZES, {"layers": 5, "width": 64, "batch": 32}, reps=5),
    Workload(81, "first_call_both_caches_warm",
             (Row("first_call", "first call of jit(grad) of the {layers}-layer MLP, fresh "
                                "process, both persistent caches warm", "ms",
                  "both_caches_warm"),),
             first_call_both_warm, MLP_SIZES, {"layers": 5, "width": 64, "batch": 32}, reps=5),
    Workload(82, "second_jit_object_first_call",
             (Row("second_jit", "first call of a second jit object of the same grad function "
                                "({layers}-layer MLP, same process; issue target 0.2)", "ms",
                  "first_call"),),
             second_jit_object, MLP_SIZES, {"layers": 5, "width": 64, "batch": 32}),
    Workload(83, "export_serialize_load_call",
             (Row("export_serialize", "export + serialize jit(grad) of the {layers}-layer MLP",
                  "ms", None),
              Row("load_first_call", "deserialize + first call in a fresh process", "ms",
                  None)),
             export_round_trip, MLP_SIZES, {"layers": 5, "width": 64, "batch": 32}, reps=5),
    Workload(84, "iree_train_step_mlp",
             (Row("iree_train_step", "train step MLP {layers}, batch {batch}: fluxion on IREE "
                                     "(llvm-cpu) vs JAX on XLA", "ms", None),),
             iree_training_step, {"layers": MNIST_MLP, "batch": 256},
             {"layers": [784, 128, 10], "batch": 64}),
    Workload(85, "iree_matmul_chain",
             (Row("iree_matmul_chain", "{count} chained {n}x{n} f32 matmuls: fluxion on IREE vs "
                                       "JAX on XLA", "ms", None),),
             iree_matmul_chain, {"n": 2048, "count": 4}, {"n": 256, "count": 4}, reps=5),
]
