"""FFT workloads (numbers 30-39): jitted `jnp.fft.fft` of complex64 and `jnp.fft.rfft2` of f32."""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Measures, Row, Steady, Workload


def fft_1d(jax, jnp, sizes):
    rng = np.random.default_rng(30)
    n = sizes["n"]
    z = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    x = jnp.asarray(z)
    f = jax.jit(jnp.fft.fft)
    return Measures(fft=Steady(lambda: f(x).block_until_ready()))


def rfft2_2d(jax, jnp, sizes):
    rng = np.random.default_rng(31)
    x = jnp.asarray(rng.standard_normal((sizes["n"], sizes["n"])).astype(np.float32))
    f = jax.jit(jnp.fft.rfft2)
    return Measures(rfft2=Steady(lambda: f(x).block_until_ready()))


WORKLOADS = [
    Workload(30, "fft_c64", (Row("fft", "jit jnp.fft.fft of complex64[{n}]", "ms", "steady"),),
             fft_1d, {"n": 2 ** 20}, {"n": 2 ** 20}, requires="numpy.fft"),
    Workload(31, "rfft2_f32", (Row("rfft2", "jit jnp.fft.rfft2 of f32[{n},{n}]", "ms",
                                   "steady"),),
             rfft2_2d, {"n": 1024}, {"n": 1024}, requires="numpy.fft"),
]
