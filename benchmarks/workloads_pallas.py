"""Pallas workloads (numbers 90-99): tiled matmul and fused row softmax kernels in interpret
mode (fluxion's default and JAX's `interpret=True`), compile time from scratch and run time."""
from __future__ import annotations

import importlib

import numpy as np

from benchmarks.harness import Measures, Row, Steady, Timed, Workload


def _pl(jax):
    return importlib.import_module(jax.__name__ + ".experimental.pallas")


def _matmul_fn(jax, jnp, n, b):
    pl = _pl(jax)
    nk = n // b

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)
        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...])

        @pl.when(pl.program_id(2) == nk - 1)
        def _():
            o_ref[...] = acc_ref[...]

    scratch = pl.ANY((b, b), jnp.float32) if hasattr(pl, "ANY") and callable(pl.ANY) else None
    if jax.__name__ == "jax":
        from jax.experimental.pallas import tpu as pltpu
        scratch = pltpu.VMEM((b, b), jnp.float32)
    call = pl.pallas_call(
        kernel, jax.ShapeDtypeStruct((n, n), jnp.float32),
        grid_spec=pl.GridSpec(grid=(nk, nk, nk),
                              in_specs=[pl.BlockSpec((b, b), lambda i, j, k: (i, k)),
                                        pl.BlockSpec((b, b), lambda i, j, k: (k, j))],
                              out_specs=pl.BlockSpec((b, b), lambda i, j, k: (i, j)),
                              scratch_shapes=[scratch]),
        interpret=True)
    return jax.jit(call)


def _softmax_fn(jax, jnp, rows, cols, br):
    pl = _pl(jax)

    def kernel(x_ref, o_ref):
        v = x_ref[...]
        e = jnp.exp(v - v.max(axis=1, keepdims=True))
        o_ref[...] = e / e.sum(axis=1, keepdims=True)

    return jax.jit(pl.pallas_call(
        kernel, jax.ShapeDtypeStruct((rows, cols), jnp.float32), grid=(rows // br,),
        in_specs=[pl.BlockSpec((br, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((br, cols), lambda i: (i, 0)), interpret=True))


def tiled_matmul(jax, jnp, sizes):
    rng = np.random.default_rng(90)
    n, b = sizes["n"], sizes["block"]
    x = jnp.asarray(rng.standard_normal((n, n)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((n, n)).astype(np.float32))
    f = _matmul_fn(jax, jnp, n, b)
    return Measures(
        compile=Timed(lambda: _matmul_fn(jax, jnp, n, b)(x, y).block_until_ready()),
        run=Steady(lambda: f(x, y).block_until_ready()))


def fused_softmax(jax, jnp, sizes):
    rng = np.random.default_rng(91)
    r, c, br = sizes["rows"], sizes["cols"], sizes["block_rows"]
    x = jnp.asarray(rng.standard_normal((r, c)).astype(np.float32))
    f = _softmax_fn(jax, jnp, r, c, br)
    return Measures(
        compile=Timed(lambda: _softmax_fn(jax, jnp, r, c, br)(x).block_until_ready()),
        run=Steady(lambda: f(x).block_until_ready()))


WORKLOADS = [
    Workload(90, "pallas_tiled_matmul",
             (Row("compile", "pallas tiled matmul {n}x{n}, blocks {block}: first call "
                             "(trace + compile + run)", "ms", "first_call"),
              Row("run", "pallas tiled matmul {n}x{n}, blocks {block}: run", "ms", "steady")),
             tiled_matmul, {"n": 512, "block": 128}, {"n": 512, "block": 128}, reps=5,
             requires="experimental.pallas"),
    Workload(91, "pallas_fused_softmax",
             (Row("compile", "pallas fused softmax {rows}x{cols}, {block_rows} rows a block: "
                             "first call (trace + compile + run)", "ms", "first_call"),
              Row("run", "pallas fused softmax {rows}x{cols}: run", "ms", "steady")),
             fused_softmax, {"rows": 4096, "cols": 1024, "block_rows": 64},
             {"rows": 4096, "cols": 1024, "block_rows": 64}, reps=5,
             requires="experimental.pallas"),
]
