"""`fluxion.experimental.pallas.triton` (``plt``): Triton-style kernel ops. There is no GPU
kernel compiler: kernels using them run in interpret mode, with JAX's interpret semantics."""
from fluxion._src.pallas.triton_ops import (
    CompilerParams, approx_tanh, atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min,
    atomic_or, atomic_xchg, atomic_xor, debug_barrier, dot, load, max_contiguous, store)

__all__ = ["CompilerParams", "approx_tanh", "atomic_add", "atomic_and", "atomic_cas",
           "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor",
           "debug_barrier", "dot", "load", "max_contiguous", "store"]
