"""Bounded caches: every cache of compiled programs in fluxion has a size limit.

The limits keep the executables alive in a process to a few thousand: an XLA:CPU executable
holds about 3-15 memory mappings of JIT code, a process may have 65,530 (vm.max_map_count),
and past that XLA crashes while compiling (seen 2026-11-27 in a test-suite worker holding
~2,000 fluxion and ~1,000 JAX executables, after ~4,000 tests).

`BoundedDict` is a dict (lookups stay at C speed) whose insertions evict the oldest entry once
`maxsize` entries are held. The bounds, per cache:

- eager primitives (dispatch._primitive_cache): 1024 signatures in all;
- jit'ed call primitives under other traces (dispatch._jaxpr_cache): 1024;
- XLA executables by program text and device (compiler/backend._executables): 512;
- each `jit` function: 1024 signatures (its dispatch, fast-path and trace caches);
- each jnp function's eager executables (numpy/eager.py): 64 signatures, and 512 compiled
  for all functions together, then every eager cache is emptied;
- Python-scalar constants on the device (array._scalar_cache): 4096, then cleared;
- Python floats as device scalars for Array operators (numpy/array_methods): 4096, then
  cleared;
- StableHLO tensor type text (compiler/hlo._tensor_types): 16384, then cleared;
- scatter combiner jaxprs (lax/indexing._combiner_cache): 1024, then cleared;
- large host constants on the device (dispatch._constant_buffers): weak, freed with the last
  executable that uses them;
- interned avals (core.ShapedArray): not evicted, since avals compare by identity; one small
  object per distinct (shape, dtype, weak type).
"""
from __future__ import annotations

import threading


class BoundedDict(dict):
    """A dict that drops its oldest entry when an insertion would exceed `maxsize`."""

    __slots__ = ("maxsize",)

    def __init__(self, maxsize: int):
        super().__init__()
        self.maxsize = maxsize

    def __reduce__(self):
        # A cache pickles empty: its entries (compiled executables) are of this process.
        return type(self), (self.maxsize,)

    def __setitem__(self, key, value):
        if key not in self:
            while len(self) >= self.maxsize:
                try:
                    del self[next(iter(self))]
                except (StopIteration, KeyError, RuntimeError):  # emptied by another thread
                    break
        dict.__setitem__(self, key, value)


# Compiling happens under this lock, so threads that miss a cache for the same program at
# once compile it once (the second finds the first's entry when it gets the lock).
compile_lock = threading.RLock()
