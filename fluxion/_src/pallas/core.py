"""The vocabulary of Pallas kernels: block specs, grid specs, memory spaces, scratch shapes,
and how a `BlockSpec` maps a grid point to a block of an array (`BlockMapping`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from fluxion._src.core import ClosedJaxpr, ShapedArray
from fluxion._src.state import indexing


def cdiv(a, b):
    """Ceiling division ``(a + b - 1) // b`` (ints or arrays)."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return (a + b - 1) // b


Slice = indexing.Slice
ds = indexing.ds
dslice = ds


def multiple_of(x, values):
    """A hint that `x` is a multiple of `values`; the CPU lowering ignores it."""
    return x


class _Squeezed:
    def __repr__(self):
        return "pl.squeezed"


squeezed = _Squeezed()


@dataclasses.dataclass(frozen=True)
class MemorySpace:
    name: str

    def __call__(self, shape, dtype):
        return ScratchShape(tuple(shape), np.dtype(dtype), self)


ANY = MemorySpace("any")


@dataclasses.dataclass(frozen=True)
class ScratchShape:
    shape: tuple
    dtype: Any
    memory_space: MemorySpace = ANY


@dataclasses.dataclass(frozen=True)
class CostEstimate:
    flops: int
    transcendentals: int
    bytes_accessed: int


@dataclasses.dataclass(frozen=True)
class Blocked:
    """A block dimension of `block_size` whose index_map value counts blocks (the default)."""
    block_size: int


@dataclasses.dataclass(frozen=True)
class Element:
    """A block dimension of `block_size` whose index_map value is an element offset."""
    block_size: int
    padding: tuple = (0, 0)


@dataclasses.dataclass(frozen=True)
class BlockSpec:
    """How a grid point maps to a block: `block_shape` (``None``/`squeezed` drop a size-1 dim)
    and `index_map(*grid_ids) -> block indices` (defaults to the whole array)."""
    block_shape: Sequence | None = None
    index_map: Callable | None = None
    memory_space: Any = None


@dataclasses.dataclass(frozen=True)
class GridSpec:
    grid: tuple = ()
    in_specs: Any = None
    out_specs: Any = None
    scratch_shapes: Sequence = ()




# ---------------------------------------------------------------------------------------------
# Block mappings: a BlockSpec resolved against one array

@dataclasses.dataclass(frozen=True, eq=False)
class BlockMapping:
    """How grid points map to blocks of one operand of `pallas_call_p`.

    `index_map` is a jaxpr from the grid indices (int32 scalars) to one int32 index per
    dimension: a block index, or an element offset where `element` is set. Dimensions marked
    `squeezed` have size 1 and are dropped from the kernel's Ref.
    """
    block_shape: tuple
    squeezed: tuple
    element: tuple
    index_map: ClosedJaxpr
    array_aval: ShapedArray
    memory_space: Any = None

    @property
    def ref_shape(self) -> tuple:
        return tuple(d for d, s in zip(self.block_shape, self.squeezed) if not s)

    def structural_key(self):
        from fluxion._src import core
        key = self.__dict__.get("_cached_key")
        if key is None:
            key = (self.block_shape, self.squeezed, self.element,
                   core.jaxpr_fingerprint(self.index_map.jaxpr),
                   tuple(id(c) for c in self.index_map.consts), self.array_aval,
                   self.memory_space)
            object.__setattr__(self, "_cached_key", key)
        return key

    # Compared by structure, so equal calls share one compiled executable when run eagerly.
    def __eq__(self, other):
        return type(other) is BlockMapping and (self is other or self.structural_key() == other._key())

    def __hash__(self):
        return hash(self.structural_key())

    def __repr__(self):
        return (f"BlockMapping(block_shape={self.block_shape}, "
                f"array={self.array_aval.str_short()})")


def block_dims(spec, shape, what, kname):
    """(block_shape, squeezed, element) of `spec` for an array of `shape`."""
    if spec is None or spec.block_shape is None:
        return tuple(shape), (False,) * len(shape), (False,) * len(shape)
    bs = tuple(spec.block_shape)
    if len(bs) != len(shape):
        raise ValueError(f"pallas_call {kname}: {what} block_shape {bs} has rank {len(bs)} "
                         f"but the array has shape {tuple(shape)}")
    for b in bs:
        if isinstance(b, Element) and tuple(b.padding) != (0, 0):
            raise NotImplementedError(f"pallas_call {kname}: Element padding {b.padding}")
    dims = tuple(1 if b is None or b is squeezed else
                 b.block_size if isinstance(b, (Blocked, Element)) else int(b) for b in bs)
    if any(d <= 0 for d in dims):
        raise ValueError(f"pallas_call {kname}: {what} block_shape {bs} has a dimension that is "
                         "not positive")
    sq = tuple(b is None or b is squeezed for b in bs)
    el = tuple(isinstance(b, Element) for b in bs)
    return dims, sq, el


def trace_index_map(spec, rank: int, grid: tuple, what: str, kname: str) -> ClosedJaxpr:
    """The index map of `spec` as a jaxpr of the grid indices; checks its arity."""
    import numpy as np
    from fluxion._src import staging
    from fluxion._src.lax import lax
    index_map = None if spec is None else spec.index_map

    def fun(*ids):
        if index_map is None:
            idx = (0,) * rank
        else:
            idx = index_map(*ids)
            if not isinstance(idx, tuple):
                idx = (idx,)
        if len(idx) != rank:
            raise ValueError(f"pallas_call {kname}: index_map of {what} returned {len(idx)} "
                             f"indices for a block of rank {rank}")
        return [lax.convert_element_type(i, np.int32) for i in idx]

    scalar = ShapedArray((), np.int32)
    return staging.trace_to_jaxpr(fun, [scalar] * len(grid), origin=f"index_map of {what}")
