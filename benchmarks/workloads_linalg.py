"""(20-26) linear algebra on LAPACK, jitted, f32: cholesky, solve, eigh, svd and qr of an n x n
matrix (two sizes), and a batch of 8x8 solves in one call."""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Measures, Row, Steady, Workload


def _matrices(jnp, n, batch=()):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(batch + (n, n)).astype(np.float32)
    spd = a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)
    b = rng.standard_normal(batch + (n, 1)).astype(np.float32)
    return jnp.asarray(a), jnp.asarray(spd.astype(np.float32)), jnp.asarray(b)


def _decomposition(op):
    def setup(jax, jnp, sizes):
        a, spd, b = _matrices(jnp, sizes["n"])
        calls = {"cholesky": (lambda x: jnp.linalg.cholesky(x), spd),
                 "solve": (lambda x: jnp.linalg.solve(x, b), a),
                 "eigh": (lambda x: jnp.linalg.eigh(x), spd),
                 "svd": (lambda x: jnp.linalg.svd(x), a),
                 "qr": (lambda x: jnp.linalg.qr(x), a)}
        fn, arg = calls[op]
        compiled = jax.jit(fn)
        return Measures(**{op: Steady(lambda: jax.block_until_ready(compiled(arg)))})
    return setup


def batched_solve(jax, jnp, sizes):
    a, _, b = _matrices(jnp, 8, (sizes["batch"],))
    solve = jax.jit(jnp.linalg.solve)
    return Measures(batched_solve=Steady(lambda: solve(a, b).block_until_ready()))


WORKLOADS = [
    Workload(20 + i, f"linalg_{op}",
             (Row(op, f"jit jnp.linalg.{op}, f32 {{n}}x{{n}}", "ms", "steady"),),
             _decomposition(op), {"n": 1024}, {"n": 256}, reps=5)
    for i, op in enumerate(("cholesky", "solve", "eigh", "svd", "qr"))
] + [
    Workload(25, "linalg_batched_solve",
             (Row("batched_solve", "jit jnp.linalg.solve, {batch} f32 8x8 systems", "ms",
                  "steady"),),
             batched_solve, {"batch": 512}, {"batch": 512}),
]
