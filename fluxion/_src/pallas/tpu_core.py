"""The TPU vocabulary of Pallas kernels (`pltpu`): compiler parameters, grid specs with scalar
prefetch, semaphore scratch types, interpret-mode parameters, and small vector ops (`roll`,
`bitcast`). fluxion has no TPU compiler: these kernels run in interpret mode, where the
compiler parameters change nothing.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np

from fluxion._src.pallas.core import SEMAPHORE, CompilerParams as _CompilerParamsBase, GridSpec
from fluxion._src.pallas.core import ScratchShape


class GridDimensionSemantics(enum.Enum):
    """How a TPU may run the steps along one grid dimension."""
    PARALLEL = "parallel"
    CORE_PARALLEL = "core_parallel"
    SUBCORE_PARALLEL = "subcore_parallel"
    ARBITRARY = "arbitrary"


PARALLEL = GridDimensionSemantics.PARALLEL
CORE_PARALLEL = GridDimensionSemantics.CORE_PARALLEL
SUBCORE_PARALLEL = GridDimensionSemantics.SUBCORE_PARALLEL
ARBITRARY = GridDimensionSemantics.ARBITRARY


@dataclasses.dataclass(frozen=True)
class CompilerParams(_CompilerParamsBase):
    """Mosaic (TPU) compiler parameters (``pltpu.CompilerParams``), JAX's fields. They tune
    TPU compilation; in interpret mode (fluxion's only mode) they change nothing."""
    BACKEND = "mosaic_tpu"
    dimension_semantics: Any = None
    allow_input_fusion: Any = None
    vmem_limit_bytes: int | None = None
    collective_id: int | None = None
    has_side_effects: bool = False
    flags: Any = None
    internal_scratch_in_bytes: int | None = None
    serialization_format: int = 1
    disable_bounds_checks: bool = False
    disable_semaphore_checks: bool = False
    skip_device_barrier: bool = False
    allow_collective_id_without_custom_barrier: bool = False
    shape_invariant_numerics: bool = True
    use_tc_tiling_on_sc: bool | None = None
    needs_layout_passes: bool = True
    fuse_transposed_lhs_in_matmul: bool = False

    def __post_init__(self):
        if self.dimension_semantics is not None:  # JAX keeps them as a tuple
            object.__setattr__(self, "dimension_semantics", tuple(self.dimension_semantics))


@dataclasses.dataclass(frozen=True)
class InterpretParams:
    """``interpret=pltpu.InterpretParams(...)``: JAX's TPU interpreter's options. fluxion's
    interpret mode runs grid steps one after another on one core and completes a DMA when it
    starts, so these options (race detection, DMA ordering, ...) change nothing."""
    detect_races: bool = False
    out_of_bounds_reads: str = "raise"
    skip_floating_point_ops: bool = False
    uninitialized_memory: str = "nan"
    num_cores_or_threads: int = 1
    vector_clock_size: int | None = None
    logging_mode: Any = None
    dma_execution_mode: str = "on_wait"
    random_seed: int | None = None
    grid_point_recorder: Any = None
    allow_hbm_allocation_in_run_scoped: bool = False
    buffer_bounds: str = "logical"


@dataclasses.dataclass(frozen=True, init=False)
class PrefetchScalarGridSpec(GridSpec):
    """A grid spec whose first `num_scalar_prefetch` operands are passed whole to every index
    map (after the grid indices) and to the kernel as its leading Refs."""
    num_scalar_prefetch: int = 0

    def __init__(self, num_scalar_prefetch: int, grid=(), in_specs=None, out_specs=None,
                 scratch_shapes=()):
        super().__init__(grid, in_specs, out_specs, tuple(scratch_shapes))
        object.__setattr__(self, "num_scalar_prefetch", num_scalar_prefetch)


class SemaphoreType(enum.Enum):
    """Semaphore scratch buffers: ``pltpu.SemaphoreType.DMA`` (one) or ``.DMA((n,))`` (an
    array of them). In interpret mode a semaphore is an int32 counter."""
    REGULAR = "regular"
    DMA = "dma"
    BARRIER = "barrier"

    def __call__(self, shape: tuple) -> ScratchShape:
        return ScratchShape(tuple(shape), np.dtype(np.int32), SEMAPHORE)

    shape = property(lambda self: ())
    dtype = property(lambda self: np.dtype(np.int32))
    memory_space = property(lambda self: SEMAPHORE)


# ---------------------------------------------------------------------------------------------
# Vector ops

def roll(x, shift, axis: int, *, stride: int | None = None, stride_axis: int | None = None):
    """`x` rotated by `shift` along `axis`, as `jnp.roll` (element ``i`` moves to
    ``i + shift``). With `stride`, slice ``k`` along `stride_axis` rolls by
    ``shift + k * stride``."""
    import fluxion.numpy as jnp
    if isinstance(shift, int) and shift < 0:
        raise ValueError("shift must be non-negative.")
    if axis < 0 or axis >= len(x.shape):
        raise ValueError("axis is out of range.")
    if (stride is None) != (stride_axis is None):
        raise ValueError("stride and stride_axis must be both specified or not.")
    if stride is None:
        return jnp.roll(x, shift, axis)
    if stride < 0:
        raise ValueError("stride must be non-negative.")
    if stride_axis < 0 or stride_axis >= len(x.shape):
        raise ValueError("stride_axis is out of range")
    if axis == stride_axis:
        raise ValueError("expected axis and stride_axis are different.")
    parts = jnp.split(x, x.shape[stride_axis], stride_axis)
    return jnp.concatenate([jnp.roll(p, shift + k * stride, axis) for k, p in enumerate(parts)],
                           stride_axis)


def bitcast(x, ty):
    """`x`'s bits as dtype `ty`, packing or unpacking along the second-minor dimension (TPU
    layout): f32 ``(2m, n)`` becomes bf16 ``(4m, n)`` and back."""
    from fluxion import lax
    import fluxion.numpy as jnp
    ty = np.dtype(ty)
    if len(x.shape) < 2:
        raise ValueError("Not implemented: bitcast 1D")
    src_bits, dst_bits = np.dtype(x.dtype).itemsize * 8, ty.itemsize * 8
    if x.shape[-2] * src_bits % dst_bits:
        raise ValueError("Not implemented: the 2nd minor dim can not be perfectly packed or"
                         " unpacked")
    if src_bits < dst_bits:  # several rows pack into one
        *lead, m, n = x.shape
        k = dst_bits // src_bits
        x = jnp.swapaxes(x.reshape(*lead, m // k, k, n), -1, -2)
        return lax.bitcast_convert_type(x, ty)
    if src_bits > dst_bits:  # one row unpacks into several
        y = lax.bitcast_convert_type(x, ty)
        *lead, m, n, k = y.shape
        return jnp.swapaxes(y, -1, -2).reshape(*lead, m * k, n)
    return lax.bitcast_convert_type(x, ty)


# ---------------------------------------------------------------------------------------------
# Masked loads and stores, hints

def load(ref, *, mask=None):
    """Read a Ref or view; where `mask` is False the value is unspecified (here: what the Ref
    holds)."""
    from fluxion._src.pallas import triton_ops
    return triton_ops.load(ref, mask=mask)


def store(ref, val, *, mask=None) -> None:
    """Write `val` into a Ref or view where `mask` is True (everywhere without a mask)."""
    from fluxion._src.pallas import triton_ops
    triton_ops.store(ref, val, mask=mask)


def touch(ref) -> None:
    """Mark `ref` as used (keeps a TPU compiler from reordering around it); nothing here."""
    del ref


def with_memory_space_constraint(x, memory_space):
    """`x`, asking a TPU compiler to place it in `memory_space`; the value is unchanged."""
    del memory_space
    return x


def is_tpu_device() -> bool:
    """Whether the default device is a TPU (fluxion runs on CPUs and GPUs)."""
    from fluxion._src import api
    return api.devices()[0].platform == "tpu"


# ---------------------------------------------------------------------------------------------
# einshape: reshape and transpose by an equation ("a(bc)->(ba)c")

def _einshape_groups(side: str) -> list:
    """The dimension groups of one side of an equation: ``"a(bc)"`` is ``[["a"], ["b", "c"]]``."""
    groups, k = [], 0
    while k < len(side):
        c = side[k]
        if c == "(":
            end = side.find(")", k)
            if end < 0:
                raise ValueError(f"Unbalanced parentheses in einshape side {side!r}")
            groups.append(list(side[k + 1:end].replace(" ", "")))
            k = end + 1
        elif c.isalpha():
            groups.append([c])
            k += 1
        elif c.isspace():
            k += 1
        else:
            raise ValueError(f"Unexpected character {c!r} in einshape side {side!r}")
    return groups


def _einshape_sizes(lhs: list, shape: tuple, sizes: dict) -> dict:
    """The size of every named dimension, splitting LHS groups by `sizes` (at most one
    unknown name per group)."""
    if len(lhs) != len(shape):
        raise ValueError(f"Equation LHS has {len(lhs)} groups but input has {len(shape)} dims. "
                         f"LHS: {lhs}, Input shape: {tuple(shape)}")
    known: dict = {}
    for group, n in zip(lhs, shape):
        if len(group) == 1:
            name = group[0]
            if name in known and known[name] != n:
                raise ValueError(f"Inconsistent size for {name}: {known[name]} vs {n}")
            known[name] = n
            continue
        unknown = [d for d in group if d not in sizes]
        given = int(np.prod([sizes[d] for d in group if d in sizes]))
        if len(unknown) > 1:
            raise ValueError(f"Ambiguous split for {group} with size {n}. Unknowns: "
                             f"{unknown}. Provide sizes via kwargs.")
        if not unknown:
            if given != n:
                raise ValueError(f"Size mismatch for group {group}: expected {n}, got {given}")
        elif n % given:
            raise ValueError(f"Cannot split size {n} with known sizes {given}")
        for d in group:
            known[d] = sizes[d] if d in sizes else n // given
    return known


def einshape(equation: str, x, assert_is_tile_preserving: bool = False, **sizes: int):
    """Reshape and transpose `x` by an einshape equation: names are dimensions, parentheses
    on the left split a dimension (sizes from `sizes` where not inferable), on the right merge
    dimensions, and the order on the right is a transpose (``"a(bc)->(ba)c"``)."""
    from fluxion import lax
    del assert_is_tile_preserving  # a TPU layout property: every layout is fine here
    if equation.count("->") != 1:
        raise ValueError("Equation must contain exactly one '->'")
    lhs_text, rhs_text = equation.split("->")
    lhs, rhs = _einshape_groups(lhs_text), _einshape_groups(rhs_text)
    known = _einshape_sizes(lhs, tuple(x.shape), sizes)
    lhs_names = [d for g in lhs for d in g]
    rhs_names = [d for g in rhs for d in g]
    for d in rhs_names:
        if d not in known:
            raise ValueError(f"Unknown dimension {d} in RHS")
    if sorted(lhs_names) != sorted(rhs_names):
        raise NotImplementedError("Only reordering/splitting/merging supported (no broadcast "
                                  "yet).")
    x = lax.reshape(x, tuple(known[d] for d in lhs_names))
    x = lax.transpose(x, tuple(lhs_names.index(d) for d in rhs_names))
    return lax.reshape(x, tuple(int(np.prod([known[d] for d in g])) for g in rhs))
