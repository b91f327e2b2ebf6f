"""(70-72) Debugging and observability: debug.print, pure_callback and checkify.

70: a jitted step that calls `debug.print` once per call (printing into a discarded stream);
71: a jitted `pure_callback` round trip on f32[{n}] (device -> Python -> device);
72: `checkify` with `all_checks` of a 20-layer MLP gradient, jitted: run time per call.
"""
from __future__ import annotations

import contextlib
import importlib
import io

import numpy as np

from benchmarks.harness import Measures, Row, Steady, Workload


class _Sink(io.TextIOBase):
    def write(self, s):
        return len(s)


def debug_print_step(jax, jnp, sizes):
    x = jnp.asarray(np.arange(sizes["n"], dtype=np.float32))

    @jax.jit
    def step(x):
        y = jnp.tanh(x) * 2.0
        jax.debug.print("step value {}", y.sum())
        return y

    sink = _Sink()

    def probe():
        with contextlib.redirect_stdout(sink):
            out = step(x)
            out.block_until_ready()
            if hasattr(jax, "effects_barrier"):
                jax.effects_barrier()
        return out

    return Measures(debug_print=Steady(probe, warmup=5))


def pure_callback_round_trip(jax, jnp, sizes):
    x = jnp.asarray(np.linspace(0, 1, sizes["n"], dtype=np.float32))

    @jax.jit
    def f(x):
        return jax.pure_callback(lambda a: np.sin(a), jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

    def probe():
        out = f(x)
        out.block_until_ready()
        return out

    return Measures(pure_callback=Steady(probe, warmup=5))


def checkify_mlp_grad(jax, jnp, sizes):
    checkify = importlib.import_module(jax.__name__ + ".experimental.checkify")
    rng = np.random.default_rng(0)
    w = sizes["width"]
    params = [(jnp.asarray(rng.standard_normal((w, w)).astype(np.float32) / np.sqrt(w)),
               jnp.asarray(np.zeros(w, np.float32))) for _ in range(sizes["layers"])]
    x = jnp.asarray(rng.standard_normal((sizes["batch"], w)).astype(np.float32))

    def loss(params, x):
        for wt, b in params:
            x = jnp.tanh(x @ wt + b)
        return jnp.mean(x ** 2)

    checked = jax.jit(checkify.checkify(jax.grad(loss), errors=checkify.all_checks))

    def probe():
        err, grads = checked(params, x)
        grads[-1][0].block_until_ready()
        return grads

    return Measures(checkify=Steady(probe, warmup=30))  # big executables run slowly at first


WORKLOADS = [
    Workload(70, "debug_print_jit",
             (Row("debug_print", "jitted step with one debug.print, f32[{n}] (per call)", "us",
                  "dispatch"),),
             debug_print_step, {"n": 1000}, {"n": 1000}),
    Workload(71, "pure_callback_jit",
             (Row("pure_callback", "jitted pure_callback round trip, f32[{n}] (per call)", "us",
                  "dispatch"),),
             pure_callback_round_trip, {"n": 1000}, {"n": 1000}),
    Workload(72, "checkify_mlp_grad",
             (Row("checkify", "checkify(all_checks) of grad of {layers}-layer MLP, width {width},"
                              " batch {batch} (jitted, per call)", "ms", "steady"),),
             checkify_mlp_grad, {"layers": 20, "width": 64, "batch": 32},
             {"layers": 20, "width": 64, "batch": 32}),
]
