"""(40) The eager suite: common jnp calls outside jit on small arrays, one row per call.

Each row times one call (its output waited for) on both frameworks; `harness.summary_rows`
adds the geometric mean of the ratios, whose target is 0.7.
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Measures, Row, Steady, Workload


def _calls(jax, jnp, n: int) -> dict:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((n, n)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((n, n)).astype(np.float32))
    v = jnp.asarray(rng.standard_normal(n).astype(np.float32))
    idx = jnp.asarray(np.array([0, 2, 1], np.int32))
    a3 = jnp.asarray(rng.standard_normal((3, 3)).astype(np.float32) + 3 * np.eye(3, dtype=np.float32))
    b3 = jnp.asarray(rng.standard_normal(3).astype(np.float32))
    return {
        "sin": lambda: jnp.sin(x),
        "exp": lambda: jnp.exp(x),
        "tanh": lambda: jnp.tanh(x),
        "sqrt_abs": lambda: jnp.sqrt(jnp.abs(x)),
        "negative": lambda: -x,
        "add": lambda: x + y,
        "multiply": lambda: jnp.multiply(x, y),
        "maximum": lambda: jnp.maximum(x, y),
        "add_scalar": lambda: x + 1.0,
        "mul_int_scalar": lambda: x * 2,
        "gt_scalar": lambda: x > 0,
        "eq_arrays": lambda: x == y,
        "sum": lambda: x.sum(),
        "sum_axis": lambda: jnp.sum(x, axis=0),
        "mean": lambda: jnp.mean(x),
        "max": lambda: x.max(),
        "argmax": lambda: jnp.argmax(v),
        "reshape": lambda: x.reshape(-1),
        "transpose": lambda: x.T,
        "expand_dims": lambda: x[None],
        "concatenate": lambda: jnp.concatenate([x, y]),
        "stack": lambda: jnp.stack([v, v]),
        "where": lambda: jnp.where(x > 0, x, y),
        "matmul": lambda: x @ y,
        "dot_vec": lambda: jnp.dot(x, v),
        "index_int": lambda: x[1],
        "index_slice": lambda: x[1:3, ::2],
        "index_array": lambda: v[idx],
        "at_set": lambda: v.at[0].set(5.0),
        "at_add": lambda: v.at[idx].add(1.0),
        "astype": lambda: x.astype(jnp.int32),
        "zeros_like": lambda: jnp.zeros_like(x),
        "clip": lambda: jnp.clip(x, -1.0, 1.0),
        "softmax_like": lambda: jnp.exp(x - x.max(axis=1, keepdims=True)),
        "linalg_solve_3x3": lambda: jnp.linalg.solve(a3, b3),
    }


CALL_NAMES = [
    "sin", "exp", "tanh", "sqrt_abs", "negative", "add", "multiply", "maximum", "add_scalar",
    "mul_int_scalar", "gt_scalar", "eq_arrays", "sum", "sum_axis", "mean", "max", "argmax",
    "reshape", "transpose", "expand_dims", "concatenate", "stack", "where", "matmul", "dot_vec",
    "index_int", "index_slice", "index_array", "at_set", "at_add", "astype", "zeros_like", "clip",
    "softmax_like", "linalg_solve_3x3"]


def eager_suite(jax, jnp, sizes):
    calls = _calls(jax, jnp, sizes["n"])
    measures = {}
    for name in CALL_NAMES:
        fn = calls[name]

        def probe(fn=fn):
            out = fn()
            out.block_until_ready()
            return out
        try:
            probe()
        except Exception as e:  # a missing function: that row reports the error
            measures[name] = _Failing(e)
            continue
        measures[name] = Steady(probe, warmup=20)
    return Measures(**measures)


class _Failing:
    def __init__(self, error):
        self.error = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"

    def measure(self, block_seconds):
        return self.error


WORKLOADS = [
    Workload(40, "eager_suite",
             tuple(Row(name, f"eager jnp: {name.replace('_', ' ')} (f32[{{n}},{{n}}])", "us",
                       "eager_call") for name in CALL_NAMES),
             eager_suite, {"n": 8}, {"n": 8}),
]
