"""Gather and scatter: XLA's general indexed reads and indexed updates.

As in JAX, the index vector is always the last dimension of the indices array. Out-of-bounds
behaviour is chosen by `GatherScatterMode`: XLA itself clamps gather windows into bounds and
skips scatter windows that do not fit, so CLIP needs explicit clamping only for scatters and
FILL_OR_DROP needs explicit masking only for gathers.

Differentiation and batching rules follow each primitive's definition, as in JAX: gather
transposes to scatter-add; batching uses the operand / indices batching dimensions.
"""
from __future__ import annotations

import enum
import functools
import math
from typing import Callable, NamedTuple, Sequence

import numpy as np

from fluxion._src import ad, batching, core, dtypes, staging
from fluxion._src.compiler.hlo import i64_array
from fluxion._src.core import ClosedJaxpr, ShapedArray
from fluxion._src.export.shape_poly import is_symbolic_dim
from fluxion._src.lax import lax as _lax, structural
from fluxion._src.lax.base import standard_primitive
from fluxion._src.lax.reductions import monoid_reduce

__all__ = ["GatherDimensionNumbers", "ScatterDimensionNumbers", "GatherScatterMode", "gather",
           "scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max",
           "scatter_apply"]


class GatherScatterMode(enum.Enum):
    """How gather and scatter treat out-of-bounds indices.

    CLIP: indices are clamped so that the whole window is in bounds.
    FILL_OR_DROP: a gather window that is partly out of bounds is filled with `fill_value`;
      a scatter window that is partly out of bounds is dropped.
    PROMISE_IN_BOUNDS: the caller promises indices are in bounds; XLA then clamps gathers and
      drops scatters.
    """
    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    @staticmethod
    def from_any(s: "str | GatherScatterMode | None") -> "GatherScatterMode":
        """The mode named by `s`: 'clip', 'fill' or 'drop' (also None), 'promise_in_bounds'."""
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s == "fill" or s == "drop":
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f'Unknown gather mode "{s}"')


class GatherDimensionNumbers(NamedTuple):
    """How the dimensions of a gather's operand, indices and output correspond (XLA's Gather).

    offset_dims: output dimensions that hold the window (slice) dimensions, sorted.
    collapsed_slice_dims: operand dimensions of window size 1 left out of the output, sorted.
    start_index_map: for each component of the index vector, the operand dimension it indexes.
    operand_batching_dims / start_indices_batching_dims: paired dimensions of operand and
      indices that are indexed in lockstep (like a batch dimension of both).
    """
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How the dimensions of a scatter's operand, indices and updates correspond (XLA's Scatter).

    update_window_dims: dimensions of `updates` that are window dimensions, sorted.
    inserted_window_dims: operand dimensions of window size 1 absent from `updates`, sorted.
    scatter_dims_to_operand_dims: for each component of the index vector, the operand dimension.
    operand_batching_dims / scatter_indices_batching_dims: paired batch dimensions.
    """
    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


def _int_tuple(dims) -> tuple[int, ...]:
    return tuple(int(d) for d in dims)


def _dim_tuple(dims) -> tuple:
    """Sizes: ints, or symbolic dimensions as they are (shape polymorphism)."""
    return tuple(d if is_symbolic_dim(d) else int(d) for d in dims)


def _canonical_dnums(dnums, cls):
    if not isinstance(dnums, cls):
        raise TypeError(f"dimension_numbers must be a {cls.__name__}, got {type(dnums).__name__}")
    return cls(*(_int_tuple(field) for field in dnums))


# ---------------------------------------------------------------------------------------------
# Checks shared by the gather and scatter shape rules

def _check_sorted(dims, op, name):
    if list(dims) != sorted(dims):
        raise TypeError(f"{name} in {op} op must be sorted; got {dims}")


def _check_unique(dims, op, name):
    if len(set(dims)) != len(dims):
        raise TypeError(f"{name} in {op} op must not repeat; got: {dims}.")


def _check_in_range(dims, rank, op, name):
    for d in dims:
        if not 0 <= d < rank:
            raise TypeError(f"Invalid {name} set in {op} op; valid range is [0, {rank}); got: {d}.")


def _check_sorted_set(dims, rank, op, name):
    _check_sorted(dims, op, name)
    _check_unique(dims, op, name)
    _check_in_range(dims, rank, op, name)


def _check_disjoint(dims1, dims2, op, name1, name2):
    if set(dims1) & set(dims2):
        raise TypeError(f"{name1} and {name2} in {op} op must be disjoint; got: {dims1} and {dims2}.")


def _check_index_vector_size(op, name, index_map, indices: ShapedArray):
    """One entry of `index_map` per element of the index vectors (the last axis of indices)."""
    if len(index_map) != indices.shape[-1]:
        raise TypeError(f"{op} op has {len(index_map)} elements in {name} and the bound of "
                        f"dimension index_vector_dim={indices.ndim - 1} of indices is "
                        f"{indices.shape[-1]}. These two numbers must be equal"
                        + ("." if op == "Gather" else ""))


def _check_index_map(index_map, rank, name):
    """Each index vector element maps to an operand dimension (JAX's message)."""
    what = "start_index_map" if name == "start_index_map" else f"{name} mapping"
    for i, d in enumerate(index_map):
        if not 0 <= d < rank:
            raise TypeError(f"Invalid {what}; domain is [0, {rank}), got: {i}->{d}.")


def _check_index_dtype(op, indices: ShapedArray):
    if not dtypes.is_integer(indices.dtype):
        raise ValueError(f"{op}: indices must have an integer type, got {indices.dtype.name}")
    if indices.ndim == 0:
        raise TypeError(f"{op}: indices must have rank >= 1 (the last dimension is the index "
                        f"vector); got shape {indices.shape}")


def _check_batching(op, operand, indices, operand_batching_dims, indices_batching_dims,
                    indices_name):
    _check_sorted_set(operand_batching_dims, operand.ndim, op, "operand_batching_dims")
    _check_unique(indices_batching_dims, op, indices_name)
    _check_in_range(indices_batching_dims, indices.ndim, op, indices_name)
    if indices.ndim - 1 in indices_batching_dims:
        raise TypeError(f"{op.capitalize()} op cannot have the index vector dimension as a "
                        f"batching dimension; got {indices_batching_dims}.")
    if len(operand_batching_dims) != len(indices_batching_dims):
        raise TypeError(f"{op.capitalize()} op requires equal numbers of operand_batching_dims "
                        f"and {indices_name}, got {operand_batching_dims} and "
                        f"{indices_batching_dims}.")
    operand_batch = tuple(operand.shape[d] for d in operand_batching_dims)
    indices_batch = tuple(indices.shape[d] for d in indices_batching_dims)
    if operand_batch != indices_batch:
        raise TypeError(f"{op.capitalize()} op requires operand batching dimensions and indices "
                        f"batching dimensions to have the same shape, got {operand_batch} and "
                        f"{indices_batch}.")


# ---------------------------------------------------------------------------------------------
# gather

def _gather_shape(operand: ShapedArray, indices: ShapedArray, dnums: GatherDimensionNumbers,
                  slice_sizes) -> tuple:
    _check_index_dtype("gather", indices)
    batch_shape = indices.shape[:-1]
    out_rank = len(batch_shape) + len(dnums.offset_dims)
    _check_sorted(dnums.offset_dims, "gather", "offset_dims")
    _check_unique(dnums.offset_dims, "gather", "offset_dims")
    for i, d in enumerate(dnums.offset_dims):
        if not 0 <= d < out_rank:
            raise TypeError(f"Offset dimension {i} in gather op is out of bounds; got {d}, but "
                            f"should have been in [0, {out_rank})")
    _check_index_vector_size("Gather", "start_index_map", dnums.start_index_map, indices)
    _check_index_map(dnums.start_index_map, operand.ndim, "start_index_map")
    _check_unique(dnums.start_index_map, "gather", "start_index_map")
    _check_sorted_set(dnums.collapsed_slice_dims, operand.ndim, "gather", "collapsed_slice_dims")
    _check_sorted_set(dnums.operand_batching_dims, operand.ndim, "gather", "operand_batching_dims")
    _check_disjoint(dnums.collapsed_slice_dims, dnums.operand_batching_dims, "gather",
                    "collapsed_slice_dims", "operand_batching_dims")
    _check_disjoint(dnums.start_index_map, dnums.operand_batching_dims, "gather",
                    "start_index_map", "operand_batching_dims")
    _check_batching("gather", operand, indices, dnums.operand_batching_dims,
                    dnums.start_indices_batching_dims, "start_indices_batching_dims")
    if len(slice_sizes) != operand.ndim:
        raise TypeError(f"Gather op must have one slice size for every input dimension; got: "
                        f"len(slice_sizes)={len(slice_sizes)}, operand shape {operand.shape}")
    if operand.ndim != (len(dnums.offset_dims) + len(dnums.collapsed_slice_dims)
                        + len(dnums.operand_batching_dims)):
        raise TypeError(f"All components of the offset index in a gather op must either be a "
                        f"offset dimension or explicitly collapsed/batching; got "
                        f"len(slice_sizes)={len(slice_sizes)}, offset_dims={dnums.offset_dims}, "
                        f"collapsed_slice_dims={dnums.collapsed_slice_dims}, "
                        f"operand_batching_dims={dnums.operand_batching_dims}.")
    indices_empty = math.prod(indices.shape) == 0
    for i, (size, bound) in enumerate(zip(slice_sizes, operand.shape)):
        if not indices_empty and not 0 <= size <= bound:
            raise TypeError(f"Slice size at index {i} in gather op is out of range, must be "
                            f"within [0, {bound} + 1), got {size} (operand shape {operand.shape}).")
    for i, d in enumerate(dnums.collapsed_slice_dims):
        if slice_sizes[d] != 1:
            raise TypeError(f"Gather op can only collapse slice dims with bound 1, but bound is "
                            f"{slice_sizes[d]} for index {d} at position {i}.")
    for i, d in enumerate(dnums.operand_batching_dims):
        if slice_sizes[d] > 1:
            raise TypeError(f"Gather op can only have operand batching dims with bound 0/1, but "
                            f"bound is {slice_sizes[d]} for index {d} at position {i}.")
    window = iter(s for d, s in enumerate(slice_sizes)
                  if d not in dnums.collapsed_slice_dims and d not in dnums.operand_batching_dims)
    batch = iter(batch_shape)
    return tuple(next(window) if d in dnums.offset_dims else next(batch) for d in range(out_rank))


def _gather_abstract_eval(operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                          indices_are_sorted, mode, fill_value):
    shape = _gather_shape(operand, indices, dimension_numbers, slice_sizes)
    return ShapedArray(shape, operand.dtype, operand.weak_type)


def _dims_attr(values) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _gather_dnums_attr(dnums: GatherDimensionNumbers, index_vector_dim: int) -> str:
    return ("#stablehlo.gather<"
            f"offset_dims = {_dims_attr(dnums.offset_dims)}, "
            f"collapsed_slice_dims = {_dims_attr(dnums.collapsed_slice_dims)}, "
            f"operand_batching_dims = {_dims_attr(dnums.operand_batching_dims)}, "
            f"start_indices_batching_dims = {_dims_attr(dnums.start_indices_batching_dims)}, "
            f"start_index_map = {_dims_attr(dnums.start_index_map)}, "
            f"index_vector_dim = {index_vector_dim}>")


def _bool_attr(value: bool) -> str:
    return "true" if value else "false"


def _index_bounds(ctx, indices, operand_shape, window_sizes, operand_dims):
    """Per index-vector component, the largest start that keeps the window in bounds, broadcast
    to the indices' shape (clipped to what the index dtype can hold)."""
    info = dtypes.iinfo(indices.dtype)
    bounds = [operand_shape[d] - window_sizes[d] for d in operand_dims]
    if any(is_symbolic_dim(b) for b in bounds):  # never negative: windows fit the operand
        vector = ctx.convert(ctx.shape_value(bounds), indices.dtype)
        return ctx.broadcast_in_dim(vector, indices.shape, (indices.aval.ndim - 1,))
    bounds = np.clip(np.array(bounds, dtype=np.int64), 0, info.max).astype(indices.dtype)
    vector = ctx.constant(bounds, indices.dtype)
    return ctx.broadcast_in_dim(vector, indices.shape, (indices.aval.ndim - 1,))


def _gather_lowering(ctx, operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                     indices_are_sorted, mode, fill_value):
    out_aval = ctx.avals_out[0]
    if out_aval.size == 0:  # StableHLO rejects some empty gathers that are valid here
        return ctx.constant(np.zeros((), out_aval.dtype), out_aval.dtype, out_aval.shape)
    attrs = {"dimension_numbers": _gather_dnums_attr(dimension_numbers, indices.aval.ndim - 1),
             "indices_are_sorted": _bool_attr(indices_are_sorted)}
    if any(is_symbolic_dim(d) for d in slice_sizes):  # sizes computed at run time
        out = ctx.op1("stablehlo.dynamic_gather",
                      [operand, indices, ctx.shape_value(slice_sizes)],
                      out_aval.update(weak_type=False), attrs)
    else:
        attrs["slice_sizes"] = i64_array(slice_sizes)
        out = ctx.op1("stablehlo.gather", [operand, indices], out_aval.update(weak_type=False),
                      attrs)
    if mode != GatherScatterMode.FILL_OR_DROP:
        return out
    in_bounds = _window_in_bounds(ctx, indices, operand.shape, slice_sizes,
                                  dimension_numbers.start_index_map)
    batch_positions = [d for d in range(out_aval.ndim) if d not in dimension_numbers.offset_dims]
    mask = ctx.broadcast_in_dim(in_bounds, out_aval.shape, batch_positions)
    fill = ctx.constant(np.asarray(fill_value).astype(out_aval.dtype), out_aval.dtype, out_aval.shape)
    return ctx.select(mask, out, fill)


def _window_in_bounds(ctx, indices, operand_shape, window_sizes, operand_dims):
    """A boolean per index vector: does the whole window it starts lie inside the operand?"""
    upper = _index_bounds(ctx, indices, operand_shape, window_sizes, operand_dims)
    zero = ctx.constant(0, indices.dtype, indices.shape)
    ok = ctx.and_(ctx.compare(indices, zero, "GE"), ctx.compare(indices, upper, "LE"))
    return monoid_reduce(ctx, ok, (indices.aval.ndim - 1,), "and")


gather_p = standard_primitive("gather", _gather_abstract_eval, _gather_lowering)


def _default_fill_value(dtype: np.dtype):
    if dtypes.is_inexact(dtype):
        return np.nan
    if dtype == dtypes.bool_:
        return True
    info = dtypes.iinfo(dtype)
    return int(info.min) if dtype.kind == "i" else int(info.max)


def _static_fill_value(fill_value, dtype: np.dtype):
    """A hashable Python scalar for the primitive's params (NaN always as the `np.nan` object,
    so that equal params hit the compilation cache)."""
    if fill_value is None:
        return _default_fill_value(dtype)
    value = np.asarray(core.concrete_or_error(fill_value, "The fill_value of a gather"))
    if value.shape != ():
        raise ValueError(f"gather fill_value must be a scalar, got shape {value.shape}")
    value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return np.nan
    return value


def gather(operand, start_indices, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], *, indices_are_sorted: bool = False,
           unique_indices: bool = False, mode=None, fill_value=None):
    """Gather slices of `operand` at `start_indices` (XLA's Gather).

    Parameters
    ----------
    operand : array to take slices from.
    start_indices : integer array; its last dimension is the index vector.
    dimension_numbers : a GatherDimensionNumbers.
    slice_sizes : the size of the slice in each operand dimension.
    indices_are_sorted, unique_indices : promises that may speed up the gather.
    mode : a GatherScatterMode or 'clip', 'fill', 'promise_in_bounds'; default
        PROMISE_IN_BOUNDS (out-of-bounds windows are clamped into bounds).
    fill_value : value of out-of-bounds windows in FILL_OR_DROP mode; default NaN for
        inexact dtypes, the minimum of signed, the maximum of unsigned dtypes, True for bool.
    """
    parsed_mode = GatherScatterMode.from_any(
        GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode)
    dtype = core.get_aval(operand).dtype
    fill = _static_fill_value(fill_value, dtype) if parsed_mode == GatherScatterMode.FILL_OR_DROP \
        else None
    return gather_p.bind(operand, start_indices,
                         dimension_numbers=_canonical_dnums(dimension_numbers, GatherDimensionNumbers),
                         slice_sizes=_dim_tuple(slice_sizes), unique_indices=bool(unique_indices),
                         indices_are_sorted=bool(indices_are_sorted), mode=parsed_mode,
                         fill_value=fill)


# ---------------------------------------------------------------------------------------------
# Where batching rules put the batch dimension
#
# Batching adds one dimension to each batched argument. The rules below keep it where it is
# whenever it is already at a position the dimension numbers can describe, and otherwise
# move (or, for unbatched arguments that must carry it, broadcast) it to the first such place.

def _shift(dims, position: int) -> tuple:
    """`dims` renumbered for an array with a new dimension inserted at `position`."""
    return tuple(d + (d >= position) for d in dims)


def _shift_and_add(dims, position: int) -> tuple:
    """`dims` renumbered for a new dimension at `position`, which joins them (sorted)."""
    return tuple(sorted(_shift(dims, position) + (position,)))


def _complement(dims, ndim: int) -> tuple:
    return tuple(d for d in range(ndim) if d not in dims)


def _rank_among(members, position: int) -> int:
    """How many of `members` precede a dimension inserted at `position`."""
    return sum(m < position for m in members)


def _insertion_range(members, rank: int, ndim: int) -> tuple[int, int]:
    """The positions (first, last) at which a dimension inserted into an array of rank `ndim`
    is preceded by exactly `rank` of the sorted dimensions `members`."""
    first = members[rank - 1] + 1 if rank else 0
    last = members[rank] if rank < len(members) else ndim
    return first, last


def _place_batch_dim(x, dim, first: int, last: int, size: int):
    """`x` with its batch dimension somewhere in [first, last] (broadcast in if unbatched)."""
    if dim is None:
        return batching.broadcast_batch(x, size, first), first
    if first <= dim <= last:
        return x, dim
    return batching.moveaxis(x, dim, first), first


def _index_vector_not_batched(indices, indices_dim):
    """The index vector dimension (the last) cannot be a batch dimension: move it first."""
    if indices_dim == core.get_aval(indices).ndim - 1:
        return batching.moveaxis(indices, indices_dim, 0), 0
    return indices, indices_dim


def _paired_batching_dims(operand_dims, indices_dims, operand_dim: int, indices_dim: int):
    """Operand and indices batching dimensions with the pair (operand_dim, indices_dim)
    added, renumbered, and ordered by operand dimension (which must be sorted)."""
    pairs = sorted(zip(_shift(operand_dims, operand_dim) + (operand_dim,),
                       _shift(indices_dims, indices_dim) + (indices_dim,)))
    return tuple(o for o, _ in pairs), tuple(i for _, i in pairs)


# ---------------------------------------------------------------------------------------------
# gather: differentiation and batching

def _gather_jvp(g, operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                indices_are_sorted, mode, fill_value):
    """Gather is linear in the operand; out-of-bounds windows filled in the primal have a
    zero tangent."""
    tangent_fill = 0 if mode == GatherScatterMode.FILL_OR_DROP else None
    return gather_p.bind(g, indices, dimension_numbers=dimension_numbers,
                         slice_sizes=slice_sizes, unique_indices=unique_indices,
                         indices_are_sorted=indices_are_sorted, mode=mode,
                         fill_value=tangent_fill)


def _gather_to_scatter_dnums(dnums: GatherDimensionNumbers) -> ScatterDimensionNumbers:
    """The dimension numbers of the scatter that writes back what a gather reads."""
    return ScatterDimensionNumbers(
        update_window_dims=dnums.offset_dims,
        inserted_window_dims=dnums.collapsed_slice_dims,
        scatter_dims_to_operand_dims=dnums.start_index_map,
        operand_batching_dims=dnums.operand_batching_dims,
        scatter_indices_batching_dims=dnums.start_indices_batching_dims)


def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                      indices_are_sorted, mode, fill_value):
    """Scatter-add the cotangent into zeros. The same `mode` makes the scatter treat
    out-of-bounds windows as the gather did: CLIP clamps both; FILL_OR_DROP fills the gather
    and drops the scatter's window."""
    if type(ct) is ad.Zero:
        return [ad.Zero(operand.aval), None]
    zeros = structural.full(operand.aval.shape, 0, core.get_aval(ct).dtype)
    ct_operand = scatter_add(zeros, indices, ct, _gather_to_scatter_dnums(dimension_numbers),
                             indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices, mode=mode)
    return [ct_operand, None]


def _gather_batch(args, dims, *, dimension_numbers, slice_sizes, unique_indices,
                  indices_are_sorted, mode, fill_value):
    (operand, indices), (operand_dim, indices_dim) = args, dims
    params = dict(mode=mode, fill_value=fill_value)
    if indices_dim is None:
        return _gather_batch_operand(operand, operand_dim, indices, dimension_numbers,
                                     slice_sizes, unique_indices=unique_indices,
                                     indices_are_sorted=indices_are_sorted, **params)
    indices, indices_dim = _index_vector_not_batched(indices, indices_dim)
    dnums = dimension_numbers
    # The batch dimension of the indices becomes an output batch dimension: the output's
    # non-offset dimensions are the indices' dimensions but the index vector, in order.
    out_ndim = core.get_aval(indices).ndim - 2 + len(dnums.offset_dims)
    out_dim = _insertion_range(_complement(dnums.offset_dims, out_ndim), indices_dim,
                               out_ndim)[0]
    offset_dims = _shift(dnums.offset_dims, out_dim)
    if operand_dim is None:
        # Different examples may read the same operand element, and in any order.
        new_dnums = dnums._replace(
            offset_dims=offset_dims,
            start_indices_batching_dims=_shift(dnums.start_indices_batching_dims, indices_dim))
        out = gather_p.bind(operand, indices, dimension_numbers=new_dnums,
                            slice_sizes=slice_sizes, unique_indices=False,
                            indices_are_sorted=False, **params)
        return out, out_dim
    # Both batched: the batch dimensions of operand and indices advance in lockstep.
    operand_batching, indices_batching = _paired_batching_dims(
        dnums.operand_batching_dims, dnums.start_indices_batching_dims, operand_dim,
        indices_dim)
    new_dnums = GatherDimensionNumbers(
        offset_dims=offset_dims,
        collapsed_slice_dims=_shift(dnums.collapsed_slice_dims, operand_dim),
        start_index_map=_shift(dnums.start_index_map, operand_dim),
        operand_batching_dims=operand_batching, start_indices_batching_dims=indices_batching)
    slice_sizes = slice_sizes[:operand_dim] + (1,) + slice_sizes[operand_dim:]
    out = gather_p.bind(operand, indices, dimension_numbers=new_dnums, slice_sizes=slice_sizes,
                        unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                        **params)
    return out, out_dim


def _gather_batch_operand(operand, operand_dim, indices, dnums, slice_sizes, **params):
    """Only the operand is batched: its batch dimension is one more (whole) window dimension."""
    operand_aval = core.get_aval(operand)
    windows = _complement(dnums.collapsed_slice_dims + dnums.operand_batching_dims,
                          operand_aval.ndim - 1)
    out_ndim = core.get_aval(indices).ndim - 1 + len(dnums.offset_dims)
    out_dim = _insertion_range(dnums.offset_dims, _rank_among(windows, operand_dim),
                               out_ndim)[0]
    new_dnums = dnums._replace(
        offset_dims=_shift_and_add(dnums.offset_dims, out_dim),
        collapsed_slice_dims=_shift(dnums.collapsed_slice_dims, operand_dim),
        start_index_map=_shift(dnums.start_index_map, operand_dim),
        operand_batching_dims=_shift(dnums.operand_batching_dims, operand_dim))
    slice_sizes = (slice_sizes[:operand_dim] + (operand_aval.shape[operand_dim],)
                   + slice_sizes[operand_dim:])
    out = gather_p.bind(operand, indices, dimension_numbers=new_dnums, slice_sizes=slice_sizes,
                        **params)
    return out, out_dim


ad.defjvp(gather_p, _gather_jvp, None)
ad.primitive_transposes[gather_p] = _gather_transpose
batching.primitive_batchers[gather_p] = _gather_batch


# ---------------------------------------------------------------------------------------------
# scatter

def _check_scatter_shapes(operand, indices, updates, dnums: ScatterDimensionNumbers):
    _check_index_dtype("scatter", indices)
    if operand.dtype != updates.dtype:
        raise TypeError(f"lax.scatter requires arguments to have the same dtypes, got "
                        f"{operand.dtype.name}, {updates.dtype.name}.")
    batch_shape = indices.shape[:-1]
    expected_rank = len(batch_shape) + len(dnums.update_window_dims)
    if updates.ndim != expected_rank:
        raise TypeError(f"Updates tensor must be of rank {expected_rank}; got {updates.ndim} "
                        f"(updates shape {updates.shape}, indices shape {indices.shape}).")
    _check_sorted_set(dnums.update_window_dims, updates.ndim, "scatter", "update_window_dims")
    _check_sorted_set(dnums.inserted_window_dims, operand.ndim, "scatter", "inserted_window_dims")
    _check_sorted_set(dnums.operand_batching_dims, operand.ndim, "scatter",
                      "operand_batching_dims")
    _check_disjoint(dnums.inserted_window_dims, dnums.operand_batching_dims, "scatter",
                    "inserted_window_dims", "operand_batching_dims")
    _check_disjoint(dnums.scatter_dims_to_operand_dims, dnums.operand_batching_dims, "scatter",
                    "scatter_dims_to_operand_dims", "operand_batching_dims")
    _check_batching("scatter", operand, indices, dnums.operand_batching_dims,
                    dnums.scatter_indices_batching_dims, "scatter_indices_batching_dims")
    window_rank = (len(dnums.update_window_dims) + len(dnums.inserted_window_dims)
                   + len(dnums.operand_batching_dims))
    if operand.ndim != window_rank:
        raise TypeError(f"Scatter op has window of size {window_rank}; doesn't match operand of "
                        f"rank {operand.ndim} (shape {operand.shape}).")
    _check_index_vector_size("Scatter", "scatter_dims_to_operand_dims",
                             dnums.scatter_dims_to_operand_dims, indices)
    _check_index_map(dnums.scatter_dims_to_operand_dims, operand.ndim,
                     "scatter_dims_to_operand_dims")
    _check_unique(dnums.scatter_dims_to_operand_dims, "scatter", "scatter_dims_to_operand_dims")
    window_bounds = [operand.shape[d] for d in range(operand.ndim)
                     if d not in dnums.inserted_window_dims and d not in dnums.operand_batching_dims]
    for update_dim, bound in zip(dnums.update_window_dims, window_bounds):
        if updates.shape[update_dim] > bound:
            raise TypeError(f"Bounds of the window dimensions of updates must not exceed the "
                            f"bounds of the corresponding dimensions of operand. For dimension "
                            f"{update_dim}, updates bound is {updates.shape[update_dim]}, "
                            f"operand bound is {bound}.")
    scatter_dims = [d for d in range(updates.ndim) if d not in dnums.update_window_dims]
    for update_dim, bound in zip(scatter_dims, batch_shape):
        if updates.shape[update_dim] != bound:
            raise TypeError(f"Bounds of the scatter dimensions of updates must be the same as "
                            f"the bounds of the corresponding dimensions of scatter indices. For "
                            f"scatter dimension {update_dim}, updates bound is "
                            f"{updates.shape[update_dim]}, indices bound is {bound}.")


def _scatter_abstract_eval(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                           unique_indices, mode, update_jaxpr, update_consts):
    _check_scatter_shapes(operand, indices, updates, dimension_numbers)
    return operand


def _scatter_window_sizes(operand_shape, updates_shape, dnums: ScatterDimensionNumbers):
    window = iter(updates_shape[d] for d in dnums.update_window_dims)
    return [1 if d in dnums.inserted_window_dims or d in dnums.operand_batching_dims
            else next(window) for d in range(len(operand_shape))]


def _scatter_dnums_attr(dnums: ScatterDimensionNumbers, index_vector_dim: int) -> str:
    return ("#stablehlo.scatter<"
            f"update_window_dims = {_dims_attr(dnums.update_window_dims)}, "
            f"inserted_window_dims = {_dims_attr(dnums.inserted_window_dims)}, "
            f"input_batching_dims = {_dims_attr(dnums.operand_batching_dims)}, "
            f"scatter_indices_batching_dims = {_dims_attr(dnums.scatter_indices_batching_dims)}, "
            f"scatter_dims_to_operand_dims = {_dims_attr(dnums.scatter_dims_to_operand_dims)}, "
            f"index_vector_dim = {index_vector_dim}>")


def _scatter_lowering(ctx, operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                      unique_indices, mode, update_jaxpr, update_consts):
    if updates.aval.size == 0 or operand.aval.size == 0:
        return operand
    if mode == GatherScatterMode.CLIP:
        window_sizes = _scatter_window_sizes(operand.shape, updates.shape, dimension_numbers)
        upper = _index_bounds(ctx, indices, operand.shape, window_sizes,
                              dimension_numbers.scatter_dims_to_operand_dims)
        indices = ctx.clamp(ctx.constant(0, indices.dtype, indices.shape), indices, upper)
    scalar = ShapedArray((), operand.dtype)
    region = ctx.new_block([scalar, scalar])
    if update_jaxpr is None:
        combined = region.args[1]
    else:
        closed = ClosedJaxpr(update_jaxpr, list(update_consts))
        combined = ctx.lower_jaxpr(closed, region.args, block=region)[0]
    region.ret([combined])
    attrs = {"scatter_dimension_numbers": _scatter_dnums_attr(dimension_numbers,
                                                              indices.aval.ndim - 1),
             "indices_are_sorted": _bool_attr(indices_are_sorted),
             "unique_indices": _bool_attr(unique_indices)}
    return ctx.op1("stablehlo.scatter", [operand, indices, updates],
                   ctx.avals_out[0].update(weak_type=False), attrs, [region])


def _scatter_primitive(name: str) -> core.Primitive:
    return standard_primitive(name, _scatter_abstract_eval, _scatter_lowering)


scatter_p = _scatter_primitive("scatter")
scatter_add_p = _scatter_primitive("scatter-add")
scatter_sub_p = _scatter_primitive("scatter-sub")
scatter_mul_p = _scatter_primitive("scatter-mul")
scatter_min_p = _scatter_primitive("scatter-min")
scatter_max_p = _scatter_primitive("scatter-max")

_combiner_cache: dict = {}


def _combiner_jaxpr(fn: Callable, dtype: np.dtype):
    """The jaxpr of `fn(old, update)` on scalars of `dtype` (cached, so params compare equal)."""
    key = (fn, dtype)
    try:
        cached = _combiner_cache.get(key)
    except TypeError:  # an unhashable function: traced on every call
        cached, key = None, None
    if cached is None:
        if len(_combiner_cache) > 1024:
            _combiner_cache.clear()
        scalar = ShapedArray((), dtype)
        closed = staging.trace_to_jaxpr(lambda x, y: [fn(x, y)], [scalar, scalar],
                                        origin="scatter combiner")
        if any(isinstance(c, core.Tracer) for c in closed.consts):
            raise TypeError("The function of a scatter cannot close over traced values.")
        cached = (closed.jaxpr, tuple(closed.consts))
        if not closed.consts and key is not None:
            _combiner_cache[key] = cached
    return cached


def _scatter_bind(prim, combiner, operand, scatter_indices, updates, dimension_numbers,
                  indices_are_sorted, unique_indices, mode):
    update_jaxpr, update_consts = (None, ()) if combiner is None else _combiner_jaxpr(
        combiner, core.get_aval(operand).dtype)
    return prim.bind(operand, scatter_indices, updates,
                     dimension_numbers=_canonical_dnums(dimension_numbers, ScatterDimensionNumbers),
                     indices_are_sorted=bool(indices_are_sorted),
                     unique_indices=bool(unique_indices), mode=GatherScatterMode.from_any(mode),
                     update_jaxpr=update_jaxpr, update_consts=update_consts)


def _scatter_wrapper(prim, combiner_name: str | None, verb: str):
    def fn(operand, scatter_indices, updates, dimension_numbers: ScatterDimensionNumbers, *,
           indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        combiner = None if combiner_name is None else getattr(_lax, combiner_name)
        return _scatter_bind(prim, combiner, operand, scatter_indices, updates,
                             dimension_numbers, indices_are_sorted, unique_indices, mode)
    fn.__name__ = fn.__qualname__ = prim.name.replace("-", "_")
    fn.__doc__ = f"""Scatter {verb} (XLA's Scatter).

    Parameters
    ----------
    operand : the array to update.
    scatter_indices : integer array; its last dimension is the index vector.
    updates : values with `operand`'s dtype, laid out as `dimension_numbers` says.
    dimension_numbers : a ScatterDimensionNumbers.
    indices_are_sorted, unique_indices : promises that may speed up the scatter.
    mode : a GatherScatterMode or 'clip', 'drop', 'promise_in_bounds'; default FILL_OR_DROP
        (updates whose window is out of bounds are dropped).
    """
    return fn


scatter = _scatter_wrapper(scatter_p, None, "replacing operand values with updates")
scatter_add = _scatter_wrapper(scatter_add_p, "add", "adding updates to operand values")
scatter_sub = _scatter_wrapper(scatter_sub_p, "sub", "subtracting updates from operand values")
scatter_mul = _scatter_wrapper(scatter_mul_p, "mul", "multiplying operand values by updates")
scatter_min = _scatter_wrapper(scatter_min_p, "min", "keeping the minimum of operand and updates")
scatter_max = _scatter_wrapper(scatter_max_p, "max", "keeping the maximum of operand and updates")


def scatter_apply(operand, scatter_indices, func: Callable, dimension_numbers:
                  ScatterDimensionNumbers, *, update_shape: Sequence[int] = (),
                  indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
    """Apply the unary `func` to `operand` at the scattered positions (once per occurrence).

    `update_shape` is the shape the updates of an equivalent `scatter` would have.
    """
    placeholder = structural.full(_int_tuple(update_shape), 0, core.get_aval(operand).dtype)
    return _scatter_bind(scatter_p, _ApplyCombiner(func), operand, scatter_indices, placeholder,
                         dimension_numbers, indices_are_sorted, unique_indices, mode)


class _ApplyCombiner:
    """The combiner `(old, update) -> func(old)`; equal for equal `func`, so its jaxpr is cached."""

    def __init__(self, func: Callable):
        self.func = func

    def __call__(self, old, update):
        return self.func(old)

    def __eq__(self, other):
        return type(other) is _ApplyCombiner and other.func == self.func

    def __hash__(self):
        return hash(self.func)


# ---------------------------------------------------------------------------------------------
# scatter: differentiation and batching

def _scatter_to_gather(dnums: ScatterDimensionNumbers) -> GatherDimensionNumbers:
    """The dimension numbers of the gather that reads what a scatter writes."""
    return GatherDimensionNumbers(
        offset_dims=dnums.update_window_dims,
        collapsed_slice_dims=dnums.inserted_window_dims,
        start_index_map=dnums.scatter_dims_to_operand_dims,
        operand_batching_dims=dnums.operand_batching_dims,
        start_indices_batching_dims=dnums.scatter_indices_batching_dims)


def _gather_updates(x, indices, updates_shape, dnums: ScatterDimensionNumbers, **params):
    """`x` read back at the windows a scatter with `dnums` writes, laid out as its updates."""
    slice_sizes = _scatter_window_sizes(core.get_aval(x).shape, updates_shape, dnums)
    return gather(x, indices, _scatter_to_gather(dnums), slice_sizes, **params)


def _zero_cotangents(operand, updates):
    return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None, None,
            ad.Zero(updates.aval) if ad.is_undefined_primal(updates) else None]


def _updates_shape(updates) -> tuple:
    return updates.aval.shape if ad.is_undefined_primal(updates) else core.get_aval(updates).shape


def _scatter_linear_jvp(prim, primals, tangents, **params):
    """The JVP of a scatter linear in (operand, updates) jointly: the same scatter of the
    tangents."""
    operand, indices, updates = primals
    out = prim.bind(operand, indices, updates, **params)
    t_operand, _, t_updates = tangents
    if type(t_operand) is ad.Zero and type(t_updates) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    return out, prim.bind(ad.instantiate(t_operand), indices, ad.instantiate(t_updates), **params)


def _scatter_addsub_transpose(prim, ct, operand, indices, updates, *, update_jaxpr,
                              update_consts, dimension_numbers, indices_are_sorted,
                              unique_indices, mode):
    if type(ct) is ad.Zero:
        return _zero_cotangents(operand, updates)
    ct_operand = ct if ad.is_undefined_primal(operand) else None
    ct_updates = None
    if ad.is_undefined_primal(updates):
        # fill_value 0: the cotangent of an update dropped out of bounds is zero. (Under
        # PROMISE_IN_BOUNDS the gather clamps instead, as in JAX: a broken promise.)
        ct_updates = _gather_updates(ct, indices, updates.aval.shape, dimension_numbers,
                                     indices_are_sorted=indices_are_sorted,
                                     unique_indices=unique_indices, mode=mode, fill_value=0)
        if prim is scatter_sub_p:
            ct_updates = _lax.neg(ct_updates)
    return [ct_operand, None, ct_updates]


def _scatter_jvp(primals, tangents, *, update_jaxpr, update_consts, dimension_numbers,
                 indices_are_sorted, unique_indices, mode):
    """The JVP of scatter (set). Which of several updates to one position wins is up to XLA,
    so, as JAX does, the rule scatters an id per update to learn which one won at every
    position, masks the losers (and overwritten operand values) away, and computes primal
    and tangent outputs with scatter-adds, which have transposes."""
    if update_jaxpr is not None:
        raise NotImplementedError("scatter_apply JVP not implemented")
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    if unique_indices:
        return _scatter_linear_jvp(scatter_p, primals, tangents, update_jaxpr=None,
                                   update_consts=(), **params)
    operand, indices, updates = primals
    t_operand, _, t_updates = tangents
    updates_shape = core.get_aval(updates).shape
    update_ids = _update_ids(updates_shape, dimension_numbers.update_window_dims)
    id_dtype = core.get_aval(update_ids).dtype
    operand_shape = core.get_aval(operand).shape
    scattered_ids = scatter(structural.full(operand_shape, 0, id_dtype), indices, update_ids,
                            **params)
    winning_ids = _gather_updates(scattered_ids, indices, updates_shape, dimension_numbers)
    operand_kept = _lax.eq(scattered_ids, np.zeros((), id_dtype))
    update_won = _lax.eq(update_ids, winning_ids)

    def combine(x, u):
        x = structural.select(operand_kept, x, structural.full_like(x, 0))
        u = structural.select(update_won, u, structural.full_like(u, 0))
        return scatter_add(x, indices, u, **params)

    return (combine(operand, updates),
            combine(ad.instantiate(t_operand), ad.instantiate(t_updates)))


def _update_ids(updates_shape, update_window_dims):
    """1, 2, ...: one id per update window, broadcast over the window, in updates' shape."""
    ids_shape = tuple(1 if d in update_window_dims else n for d, n in enumerate(updates_shape))
    count = math.prod(ids_shape)
    small = is_symbolic_dim(count) or count < np.iinfo(np.int32).max  # (as JAX)
    dtype = np.dtype(np.int32 if small else np.int64)
    ids = _lax.reshape(_lax.add(structural.iota(dtype, count), np.ones((), dtype)), ids_shape)
    return _lax.broadcast_in_dim(ids, updates_shape, tuple(range(len(updates_shape))))


def _scatter_transpose(ct, operand, indices, updates, *, update_jaxpr, update_consts,
                       dimension_numbers, indices_are_sorted, unique_indices, mode):
    """Scatter (set) is linear in (operand, updates) only when no two updates collide."""
    if not unique_indices:
        raise NotImplementedError("scatter transpose is only implemented where "
                                  "unique_indices=True")
    if type(ct) is ad.Zero:
        return _zero_cotangents(operand, updates)
    updates_shape = _updates_shape(updates)
    ct_operand = ct_updates = None
    params = dict(indices_are_sorted=indices_are_sorted, unique_indices=True, mode=mode)
    if ad.is_undefined_primal(operand):
        # Overwritten positions pass no cotangent to the operand.
        zeros = structural.full(updates_shape, 0, core.get_aval(ct).dtype)
        ct_operand = scatter(ct, indices, zeros, dimension_numbers, **params)
    if ad.is_undefined_primal(updates):
        ct_updates = _gather_updates(ct, indices, updates_shape, dimension_numbers,
                                     fill_value=0, **params)
    return [ct_operand, None, ct_updates]


def _scatter_mul_jvp_updates(g, operand, indices, updates, *, update_jaxpr, update_consts,
                             dimension_numbers, indices_are_sorted, unique_indices, mode):
    if not unique_indices:
        raise NotImplementedError(
            "scatter_mul gradients are only implemented if `unique_indices=True`")
    spread = scatter_add(structural.full_like(operand, 0), indices, g, dimension_numbers,
                         indices_are_sorted=indices_are_sorted, unique_indices=True, mode=mode)
    return _lax.mul(operand, spread)


def _scatter_mul_transpose(ct, operand, indices, updates, *, update_jaxpr, update_consts,
                           dimension_numbers, indices_are_sorted, unique_indices, mode):
    """Linear in the operand (updates fixed); in the updates only for unique indices."""
    if type(ct) is ad.Zero:
        return _zero_cotangents(operand, updates)
    params = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                  mode=mode)
    ct_operand = ct_updates = None
    if ad.is_undefined_primal(operand):
        ct_operand = scatter_mul(ct, indices, updates, dimension_numbers, **params)
    if ad.is_undefined_primal(updates):
        if not unique_indices:
            raise NotImplementedError(
                "scatter_mul gradients are only implemented if `unique_indices=True`")
        ct_updates = _gather_updates(_lax.mul(ct, operand), indices, updates.aval.shape,
                                     dimension_numbers, fill_value=0, **params)
    return [ct_operand, None, ct_updates]


def _scatter_extremal_jvp(prim, primals, tangents, *, update_jaxpr, update_consts,
                          dimension_numbers, indices_are_sorted, unique_indices, mode):
    """JVP of scatter-min/max as in JAX: where several values tie for the result (updates
    equal to it, and the operand if it kept its value), the tangent is their average."""
    operand, indices, updates = primals
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    out = prim.bind(operand, indices, updates, update_jaxpr=update_jaxpr,
                    update_consts=update_consts, **params)
    t_operand, _, t_updates = tangents
    if type(t_operand) is ad.Zero and type(t_updates) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    t_operand, t_updates = ad.instantiate(t_operand), ad.instantiate(t_updates)
    updates_aval = core.get_aval(updates)
    dtype = updates_aval.dtype
    zeros, ones = structural.full(updates_aval.shape, 0, dtype), structural.full(
        updates_aval.shape, 1, dtype)

    def at_updates(x):  # `x` read at every update's position (JAX's default gather mode)
        return _gather_updates(x, indices, updates_aval.shape, dimension_numbers)

    def count_at_updates(flags):
        counts = scatter_add(structural.full_like(operand, 0), indices, flags, dimension_numbers)
        return at_updates(counts)

    result = at_updates(out)
    update_won = _lax.eq(updates, result)
    operand_kept = _lax.eq(at_updates(operand), result)
    winners = count_at_updates(structural.select(update_won, ones, zeros))
    references = count_at_updates(ones)
    share = _lax.div(ones, structural.select(operand_kept, _lax.add(winners, ones), winners))
    updates_coef = structural.select(update_won, share, zeros)
    operand_share = structural.select(operand_kept, share, zeros)
    # Spread over the `references` updates at a position, these remove the operand's tangent
    # but for its share.
    operand_coef = _lax.div(_lax.sub(operand_share, ones), references)
    tangent_updates = _lax.add(_lax.mul(at_updates(t_operand), operand_coef),
                               _lax.mul(t_updates, updates_coef))
    return out, scatter_add(t_operand, indices, tangent_updates, **params)


def _scatter_batch(prim, args, dims, *, dimension_numbers, **params):
    (operand, indices, updates), (operand_dim, indices_dim, updates_dim) = args, dims
    size = next(core.get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    if indices_dim is None:
        operand, operand_dim, updates, dnums = _scatter_batch_window(
            operand, operand_dim, updates, updates_dim, dimension_numbers, size)
    else:
        operand, operand_dim, indices, updates, dnums = _scatter_batch_lockstep(
            operand, operand_dim, indices, indices_dim, updates, updates_dim,
            dimension_numbers, size)
    return prim.bind(operand, indices, updates, dimension_numbers=dnums, **params), operand_dim


def _scatter_batch_window(operand, operand_dim, updates, updates_dim, dnums, size):
    """Unbatched indices: the batch dimension is one more (whole) window dimension of operand
    and updates, so both must have it, at matching places among the window dimensions."""
    operand_ndim = core.get_aval(operand).ndim - (operand_dim is not None)
    updates_ndim = core.get_aval(updates).ndim - (updates_dim is not None)
    windows = _complement(dnums.inserted_window_dims + dnums.operand_batching_dims, operand_ndim)
    if operand_dim is None:
        rank = _rank_among(dnums.update_window_dims, updates_dim)
        first, last = _insertion_range(windows, rank, operand_ndim)
        operand_dim = min(max(updates_dim, first), last)  # where updates have it, if possible
        operand = batching.broadcast_batch(operand, size, operand_dim)
    else:
        first, last = _insertion_range(dnums.update_window_dims,
                                       _rank_among(windows, operand_dim), updates_ndim)
        updates, updates_dim = _place_batch_dim(updates, updates_dim, first, last, size)
    new_dnums = dnums._replace(
        update_window_dims=_shift_and_add(dnums.update_window_dims, updates_dim),
        inserted_window_dims=_shift(dnums.inserted_window_dims, operand_dim),
        scatter_dims_to_operand_dims=_shift(dnums.scatter_dims_to_operand_dims, operand_dim),
        operand_batching_dims=_shift(dnums.operand_batching_dims, operand_dim))
    return operand, operand_dim, updates, new_dnums


def _scatter_batch_lockstep(operand, operand_dim, indices, indices_dim, updates, updates_dim,
                            dnums, size):
    """Batched indices: operand and indices get a pair of batching dimensions, and updates
    a scatter dimension matching the indices' batch dimension."""
    indices, indices_dim = _index_vector_not_batched(indices, indices_dim)
    if operand_dim is None:
        operand, operand_dim = batching.broadcast_batch(operand, size, 0), 0
    updates_ndim = core.get_aval(updates).ndim - (updates_dim is not None)
    scatter_dims = _complement(dnums.update_window_dims, updates_ndim)
    first, last = _insertion_range(scatter_dims, indices_dim, updates_ndim)
    updates, updates_dim = _place_batch_dim(updates, updates_dim, first, last, size)
    operand_batching, indices_batching = _paired_batching_dims(
        dnums.operand_batching_dims, dnums.scatter_indices_batching_dims, operand_dim,
        indices_dim)
    new_dnums = ScatterDimensionNumbers(
        update_window_dims=_shift(dnums.update_window_dims, updates_dim),
        inserted_window_dims=_shift(dnums.inserted_window_dims, operand_dim),
        scatter_dims_to_operand_dims=_shift(dnums.scatter_dims_to_operand_dims, operand_dim),
        operand_batching_dims=operand_batching, scatter_indices_batching_dims=indices_batching)
    return operand, operand_dim, indices, updates, new_dnums


def _register_scatter_rules():
    for prim in (scatter_add_p, scatter_sub_p):
        ad.primitive_jvps[prim] = functools.partial(_scatter_linear_jvp, prim)
        ad.primitive_transposes[prim] = functools.partial(_scatter_addsub_transpose, prim)
    ad.primitive_jvps[scatter_p] = _scatter_jvp
    ad.primitive_transposes[scatter_p] = _scatter_transpose
    ad.defjvp(scatter_mul_p, lambda g, x, i, y, **params: scatter_mul_p.bind(g, i, y, **params),
              None, _scatter_mul_jvp_updates)
    ad.primitive_transposes[scatter_mul_p] = _scatter_mul_transpose
    for prim in (scatter_min_p, scatter_max_p):
        ad.primitive_jvps[prim] = functools.partial(_scatter_extremal_jvp, prim)
    for prim in (scatter_p, scatter_add_p, scatter_sub_p, scatter_mul_p, scatter_min_p,
                 scatter_max_p):
        batching.primitive_batchers[prim] = functools.partial(_scatter_batch, prim)


_register_scatter_rules()
