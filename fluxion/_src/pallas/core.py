"""The vocabulary of Pallas kernels: block specs, grid specs, memory spaces, scratch shapes,
and how a `BlockSpec` maps a grid point to a block of an array (`BlockMapping`).
"""
from __future__ import annotations

import dataclasses
import enum
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


def next_power_of_2(x: int) -> int:
    """The least power of two ``>= x`` (1 for 0)."""
    if x < 0:
        raise ValueError("`next_power_of_2` requires a non-negative integer.")
    return 1 if x == 0 else 2 ** (int(x) - 1).bit_length()


def strides_from_shape(shape: tuple) -> tuple:
    """The row-major strides, in elements, of an array of `shape`."""
    strides, size = [], int(np.prod(shape))
    for n in shape:
        size //= n
        strides.append(size)
    return tuple(strides)


def multiple_of(x, values):
    """A hint that `x` is a multiple of `values`; the CPU lowering ignores it."""
    return x


class Squeezed:
    """A block dimension of size 1 that the kernel's Ref does not have (``pl.squeezed``)."""

    def __repr__(self):
        return "Squeezed()"

    def __eq__(self, other):
        return type(other) is Squeezed

    def __hash__(self):
        return hash(Squeezed)


squeezed = Squeezed()


def align_to(a, alignment):
    """`a` rounded up to a multiple of `alignment`."""
    return cdiv(a, alignment) * alignment


# ``in_specs=pl.no_block_spec``: the whole array, as a spec of None
no_block_spec = None


class DeviceIdType(enum.Enum):
    """How a remote DMA or signal names its device: by mesh coordinates or a logical id."""
    MESH = "mesh"
    LOGICAL = "logical"


@dataclasses.dataclass(frozen=True)
class MemorySpace:
    name: str

    def __call__(self, shape, dtype):
        return ScratchShape(tuple(shape), np.dtype(dtype), self)


ANY = MemorySpace("any")
SEMAPHORE = MemorySpace("semaphore")  # semaphore scratch (`pltpu.SemaphoreType`): int32 counters
# JAX's `pl.MemorySpace` is an enum: its members as class attributes
for _name in ("ANY", "DEFAULT", "HOST"):
    setattr(MemorySpace, _name, ANY if _name == "ANY" else MemorySpace(_name.lower()))
HOST = MemorySpace.HOST


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
    """A block dimension of `block_size` whose index_map value is an element offset.

    `padding` ``(low, high)`` pads the array along this dimension before blocks are taken
    (offsets count from the start of the padding); reads of the padding give
    `uninitialized_value` (NaN for floats), and what is written there is dropped.
    """
    block_size: int
    padding: tuple = (0, 0)


@dataclasses.dataclass(frozen=True)
class BoundedSlice:
    """A block dimension whose index_map value is a `pl.ds(start, size)` with ``size <=
    block_size``. Only TPU kernels run these; JAX's interpret mode (and so fluxion's CPU
    lowering) raises ValueError when such a kernel runs."""
    block_size: int

    def __repr__(self):
        return f"BoundedSlice({self.block_size})"


class RevisitMode(enum.Enum):
    """Whether an output block may be revisited at any grid step (a TPU pipelining hint)."""
    IMMEDIATE = 0
    ANY = 1


@dataclasses.dataclass(frozen=True)
class Buffered:
    """How many buffers a pipelined block uses (``BlockSpec(pipeline_mode=pl.Buffered(3))``).
    It tunes TPU pipelining; interpret mode (fluxion's only mode) reads blocks directly."""
    buffer_count: int
    use_lookahead: bool = False
    revisit: RevisitMode | None = None


class CompilerParams:
    """The base of the backends' compiler parameters (`pltpu.CompilerParams`,
    `plt.CompilerParams`): they tune hardware compilation and change nothing in interpret
    mode."""
    BACKEND: str = ""


BlockDim = Element | Squeezed | Blocked | BoundedSlice | int | None


@dataclasses.dataclass(frozen=True)
class BlockSpec:
    """How a grid point maps to a block: `block_shape` (``None``/`squeezed` drop a size-1 dim)
    and `index_map(*grid_ids) -> block indices` (defaults to the whole array).
    `pipeline_mode` (`pl.Buffered`) tunes TPU pipelining and is ignored in interpret mode."""
    block_shape: Sequence | None = None
    index_map: Callable | None = None
    memory_space: Any = None
    pipeline_mode: Buffered | None = None


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
    padding: tuple | None = None  # (low, high) per dimension (`pl.Element` padding)
    bounded: bool = False  # a `pl.BoundedSlice` dimension (kernels cannot run on the CPU)

    def __post_init__(self):
        if self.padding is None:
            object.__setattr__(self, "padding", ((0, 0),) * len(self.block_shape))

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
                   self.memory_space, self.padding, self.bounded)
            object.__setattr__(self, "_cached_key", key)
        return key

    # Compared by structure, so equal calls share one compiled executable when run eagerly.
    def __eq__(self, other):
        return type(other) is BlockMapping and (
            self is other or self.structural_key() == other.structural_key())

    def __hash__(self):
        return hash(self.structural_key())

    def __repr__(self):
        return (f"BlockMapping(block_shape={self.block_shape}, "
                f"array={self.array_aval.str_short()})")


def block_dims(spec, shape, what, kname):
    """(block_shape, squeezed, element, padding, bounded) of `spec` for an array of `shape`:
    `bounded` marks the `BoundedSlice` dimensions."""
    n = len(shape)
    if spec is None or spec.block_shape is None:
        return tuple(shape), (False,) * n, (False,) * n, ((0, 0),) * n, (False,) * n
    bs = tuple(spec.block_shape)
    if len(bs) != len(shape):
        raise ValueError(f"pallas_call {kname}: {what} block_shape {bs} has rank {len(bs)} "
                         f"but the array has shape {tuple(shape)}")
    padding = []
    for b in bs:
        pad = tuple(b.padding) if isinstance(b, Element) else (0, 0)
        if len(pad) != 2 or any(not isinstance(p, (int, np.integer)) or p < 0 for p in pad):
            raise ValueError(f"pallas_call {kname}: {what} Element padding {b.padding} must be "
                             "a pair of non-negative ints (low, high)")
        padding.append((int(pad[0]), int(pad[1])))
    dims = tuple(1 if b is None or isinstance(b, Squeezed) else
                 b.block_size if isinstance(b, (Blocked, Element, BoundedSlice)) else int(b)
                 for b in bs)
    if any(d <= 0 for d in dims):
        raise ValueError(f"pallas_call {kname}: {what} block_shape {bs} has a dimension that is "
                         "not positive")
    sq = tuple(b is None or isinstance(b, Squeezed) for b in bs)
    el = tuple(isinstance(b, Element) for b in bs)
    bounded = tuple(isinstance(b, BoundedSlice) for b in bs)
    return dims, sq, el, tuple(padding), bounded


def trace_index_map(spec, rank: int, grid: tuple, what: str, kname: str,
                    bounded: tuple = (), prefetch_avals: tuple = ()) -> ClosedJaxpr:
    """The index map of `spec` as a jaxpr of the grid indices (then the scalar-prefetch
    operands, `prefetch_avals`); checks its arity. A `BoundedSlice` dimension (marked in
    `bounded`) takes a `pl.ds`, whose start is kept."""
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
        out = []
        for k, (i, b) in enumerate(zip(idx, bounded or (False,) * rank)):
            if b != isinstance(i, Slice):  # JAX's class and words
                raise ValueError(
                    f"pallas_call {kname}: index_map of {what} returned a value of type "
                    f"{type(i).__name__} at position {k} "
                    + ("with a BoundedSlice block dimension when it should be pl.Slice" if b
                       else "when it should be a scalar (pl.Slice only for BoundedSlice "
                            "block dimensions)"))
            if b:
                size = spec.block_shape[k].block_size
                if isinstance(i.size, (int, np.integer)) and i.size > size:
                    raise ValueError(f"pallas_call {kname}: index_map of {what} returned "
                                     f"pl.ds of size {i.size} at position {k}, larger than "
                                     f"its BoundedSlice({size})")
                i = i.start
            out.append(lax.convert_element_type(i, np.int32))
        return out

    scalar = ShapedArray((), np.int32)
    return staging.trace_to_jaxpr(fun, [scalar] * len(grid) + list(prefetch_avals),
                                  origin=f"index_map of {what}")
