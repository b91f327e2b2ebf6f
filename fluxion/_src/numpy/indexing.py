"""NumPy-style indexing of fluxion arrays: `x[idx]`, `x.at[idx].set(y)` and friends, `take`
and `take_along_axis`.

An index expression is parsed into one entry per indexed dimension (after expanding `...`
and boolean masks). Pure basic indexing (static or traced scalar integers, slices, None)
reads with slice / rev / dynamic_slice / squeeze / broadcast_in_dim; anything with index
arrays reads with a single gather. Updates always scatter. Out-of-bounds indices follow JAX:
reads clamp (unless mode='fill'), updates are dropped (unless mode='clip').
"""
from __future__ import annotations

import functools

import math
import operator
import warnings
from typing import Any, Callable, NamedTuple

import numpy as np

from fluxion._src.export import shape_poly
from fluxion._src import core, dtypes
from fluxion._src.config import config
from fluxion._src.errors import NonConcreteBooleanIndexError
from fluxion._src.array import Array
from fluxion._src.lax import indexing as lax_indexing
from fluxion._src.lax import lax, structural
from fluxion._src.lax.indexing import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from fluxion._src.numpy import array_methods, eager, ufuncs, util

__all__ = ["take", "take_along_axis"]


# ---------------------------------------------------------------------------------------------
# Parsed index entries

class _Slice(NamedTuple):
    """A static slice of operand dimension `dim`: `length` elements from `start` by `step`."""
    dim: int
    start: int
    step: int
    length: int


class _Int(NamedTuple):
    """A scalar integer index of `dim`: a Python int, or a 0-d Array or tracer."""
    dim: int
    index: Any


class _IndexArray(NamedTuple):
    """An integer index array of `dim`; `dim` is None for a boolean scalar, which indexes no
    dimension but adds one of length 1 (True) or 0 (False) to the advanced-index shape."""
    dim: int | None
    index: Any


class _NewAxis:
    """A None in the index: a new dimension of length 1."""


_NEWAXIS = _NewAxis()


class _Separator:
    """An ellipsis standing for no dimension: it indexes nothing, but index arrays on its two
    sides are not adjacent (NumPy then puts their broadcast dimensions first)."""


_SEPARATOR = _Separator()


def _is_traced_or_device(x) -> bool:
    return isinstance(x, (Array, core.Tracer))


def _as_index_tuple(idx) -> tuple:
    if isinstance(idx, tuple):
        return idx
    if isinstance(idx, list):
        # Lists of scalars were probably meant as an index array; others as an index tuple.
        meant = "tuple" if any(_is_multidimensional_part(i) for i in idx) else "array"
        raise TypeError("Using a non-tuple sequence for multidimensional indexing is not allowed; "
                        f"use `arr[{meant}(seq)]` instead of `arr[seq]`.")
    return (idx,)


def _is_multidimensional_part(item) -> bool:
    """Whether an element of a list index only makes sense as one entry of an index tuple."""
    return (item is None or item is Ellipsis or isinstance(item, (list, tuple, slice))
            or (isinstance(item, (np.ndarray, Array, core.Tracer)) and np.ndim(item) != 0))


def _holds_device_values(seq) -> bool:
    return any(_holds_device_values(x) if isinstance(x, (list, tuple)) else
               _is_traced_or_device(x) for x in seq)


def _host_index_array(item, position: int) -> np.ndarray:
    """A list, tuple or non-integer scalar in an index, as a NumPy index array."""
    arr = np.asarray(item)
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.int64)  # `[]` is an empty integer index, as in NumPy
    if arr.dtype.kind not in "biu":
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{arr.dtype} at position {position}, indexer value {item!r}")
    return arr


def _concrete_mask(mask) -> np.ndarray:
    if isinstance(mask, core.Tracer):
        value = mask.to_concrete_value()
        if value is None:
            raise NonConcreteBooleanIndexError(mask.aval.str_short())
        return np.asarray(value)
    return np.asarray(mask)


def _static_slice_part(value, what: str, s: slice):
    if value is None or type(value) is shape_poly.DimExpr:
        return value
    try:
        return operator.index(value)
    except TypeError:
        if isinstance(value, core.Tracer):
            raise IndexError(
                f"Array slice indices must have static start/stop/step to be used with NumPy "
                f"indexing syntax. Found slice({s.start}, {s.stop}, {s.step}). To index a "
                "statically sized array at a dynamic position, use lax.dynamic_slice / "
                "lax.dynamic_update_slice.") from None
        raise TypeError(f"slice indices must be integers or None or have an __index__ method, "
                        f"got {what}={value!r}") from None


def _parse_slice(s: slice, dim: int, size: int) -> _Slice:
    start, stop, step = (_static_slice_part(getattr(s, n), n, s) for n in ("start", "stop", "step"))
    if shape_poly.DimExpr in (type(size), type(start), type(stop), type(step)):
        return _symbolic_slice(dim, start, stop, step, size)
    start, stop, step = slice(start, stop, step).indices(size)
    return _Slice(dim, start, step, len(range(start, stop, step)))


def _symbolic_slice(dim, start, stop, step, size) -> "_Slice":
    """`slice.indices` over a dimension of symbolic `size` (ints clamped symbolically)."""
    mx, mn = shape_poly.max_dim, shape_poly.min_dim
    step = 1 if step is None else step
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if step > 0:
        lo, hi = 0, size
    else:
        lo, hi = -1, size - 1
    def clamp(v, default):
        if v is None:
            return default
        return mx(v + size, lo) if v < 0 else mn(v, hi)
    start = clamp(start, 0 if step > 0 else size - 1)
    stop = clamp(stop, size if step > 0 else -1)
    gap, distance = (step, stop - start) if step > 0 else (-step, start - stop)
    # ceil(distance / gap) as a floordiv of a clamped non-negative numerator, which the
    # symbolic comparisons can bound (a negated floordiv they cannot)
    length = mx(0, distance + gap - 1) // gap
    return _Slice(dim, start, step, length)


def _classify(item, position: int):
    """(kind, value) of one element of an index tuple; kind is one of 'none', 'ellipsis',
    'slice', 'int', 'bool', 'mask' and 'array'."""
    if item is None:
        return "none", None
    if item is Ellipsis:
        return "ellipsis", None
    if isinstance(item, slice):
        return "slice", item
    if isinstance(item, (bool, np.bool_)):
        return "bool", bool(item)
    if isinstance(item, (int, np.integer)):
        return "int", operator.index(item)
    if type(item) is shape_poly.DimExpr:  # a symbolic position: a traced index
        item = shape_poly.dimension_as_value(item)
    if isinstance(item, (list, tuple)) and _holds_device_values(item):
        from fluxion._src.numpy.creation import asarray
        item = asarray(item)  # a list holding traced (or device) scalars: stacked by fluxion
    elif isinstance(item, (list, tuple, float, complex, np.generic)):
        item = _host_index_array(item, position)
    if isinstance(item, (np.ndarray, Array, core.Tracer)):
        dtype = np.dtype(item.dtype)
        if dtype == dtypes.bool_:
            if item.ndim == 0:
                return "bool", bool(_concrete_mask(item))
            return "mask", item
        if dtypes.is_integer(dtype):
            if item.ndim == 0:
                return "int", operator.index(item) if isinstance(item, np.ndarray) else item
            return "array", item
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{dtype} at position {position}, indexer value {item!r}")
    if isinstance(item, str):
        raise TypeError(f"fluxion does not support string indexing; got {item!r}")
    raise TypeError(f"Indexer must be an integer, slice, None, Ellipsis, boolean or integer "
                    f"array; got {type(item).__name__} at position {position}: {item!r}")


def _consumed_dims(kind: str, value) -> int:
    if kind in ("slice", "int", "array"):
        return 1
    if kind == "mask":
        return value.ndim
    return 0


def _parse_index(shape: tuple, idx) -> list:
    """The entries of `idx` for an array of `shape`: every dimension gets exactly one."""
    items = [_classify(item, i) for i, item in enumerate(_as_index_tuple(idx))]
    if sum(kind == "ellipsis" for kind, _ in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(_consumed_dims(kind, value) for kind, value in items)
    if consumed > len(shape):
        raise IndexError(f"Too many indices: array is {len(shape)}-dimensional, but {consumed} "
                         f"were indexed")
    explicit_ellipsis = any(kind == "ellipsis" for kind, _ in items)
    if not explicit_ellipsis:
        items.append(("ellipsis", None))
    entries, dim = [], 0
    for kind, value in items:
        if kind == "ellipsis":
            if explicit_ellipsis and len(shape) == consumed:
                entries.append(_SEPARATOR)
            for _ in range(len(shape) - consumed):
                entries.append(_Slice(dim, 0, 1, shape[dim]))
                dim += 1
        elif kind == "none":
            entries.append(_NEWAXIS)
        elif kind == "bool":
            entries.append(_IndexArray(None, np.zeros(int(value), np.int32)))
        elif kind == "slice":
            entries.append(_parse_slice(value, dim, shape[dim]))
            dim += 1
        elif kind == "int":
            entries.append(_Int(dim, value))
            dim += 1
        elif kind == "array":
            entries.append(_IndexArray(dim, value))
            dim += 1
        else:
            entries.extend(_mask_entries(_concrete_mask(value), dim, shape, len(entries)))
            dim += value.ndim
    return entries


def _mask_entries(mask: np.ndarray, dim: int, shape: tuple, position: int) -> list:
    expected = shape[dim:dim + mask.ndim]
    # An empty mask selects nothing: its zero-size dimensions may face any size (NumPy, JAX).
    if len(expected) != mask.ndim or any(m not in (0, s) for m, s in zip(mask.shape, expected)):
        raise IndexError(f"boolean index did not match shape of indexed array in index "
                         f"{position}: got {mask.shape}, expected {expected}")
    return [_IndexArray(dim + i, nz) for i, nz in enumerate(np.nonzero(mask))]


def _check_ints_on_empty_axes(entries, shape) -> None:
    """An integer index (static or traced) of an axis of size 0 names no element: JAX's
    IndexError, for reads in every mode and for updates. With index arrays beside it, it is
    one more gather index and JAX reads (or drops) nothing instead."""
    if _has_index_arrays(entries):
        return
    for e in entries:
        if isinstance(e, _Int) and type(shape[e.dim]) is not shape_poly.DimExpr \
                and shape[e.dim] == 0:
            raise IndexError(f"index is out of bounds for axis {e.dim} with size 0")


def _has_index_arrays(entries) -> bool:
    return any(isinstance(e, _IndexArray) for e in entries)


# ---------------------------------------------------------------------------------------------
# Index values

def _index_dtype(shape) -> np.dtype:
    big = any(type(d) is not shape_poly.DimExpr and d > np.iinfo(np.int32).max for d in shape)
    return np.dtype(np.int64 if big else np.int32)


def _normalized_index(index, size: int, dtype: np.dtype, wrap_negative: bool):
    """`index` converted to `dtype`, with negative values counted from the end."""
    if not _is_traced_or_device(index) and type(size) is shape_poly.DimExpr:
        index = lax._convert_element_type(np.asarray(index).astype(dtype), dtype)
    if not _is_traced_or_device(index):
        # As for traced indices (and in JAX): converted to `dtype` first, which wraps values
        # past its range; then negative ones of a signed index count from the end.
        values = np.asarray(index)
        signed = values.dtype.kind != "u"
        values = values.astype(dtype)
        if wrap_negative and signed:
            values = np.where(values < 0, values + np.asarray(size, dtype), values)
        return values
    unsigned = np.dtype(index.dtype).kind == "u"
    index = lax.convert_element_type(index, dtype)
    if not wrap_negative or unsigned:
        return index
    zero, size = np.zeros((), dtype), shape_poly.size_value(size, dtype)
    return structural.select_n(lax.lt(index, zero), index, lax.add(index, size))


# ---------------------------------------------------------------------------------------------
# Basic indexing without gathers

def _symbolic_strided(entries) -> bool:
    """Whether a slice has a step other than 1 and a symbolic length, possibly 0: no static
    `slice` can express it for every length, so it is read with a gather (as JAX does)."""
    return any(isinstance(e, _Slice) and e.step != 1 and type(e.length) is shape_poly.DimExpr
               for e in entries)


def _basic_take(arr, entries):
    """`arr[idx]` for ints (static or traced), slices and None, without a gather."""
    shape = core.get_aval(arr).shape
    arr = _static_slices(arr, entries, shape)
    arr = _dynamic_ints(arr, entries, shape)
    int_dims = [e.dim for e in entries if isinstance(e, _Int)]
    if int_dims:
        arr = structural.squeeze(arr, int_dims)
    out_entries = [e for e in entries if not isinstance(e, _Int) and e is not _SEPARATOR]
    new_axes = [i for i, e in enumerate(out_entries) if e is _NEWAXIS]
    if new_axes:
        arr = structural.expand_dims(arr, new_axes)
    return arr


def _static_slices(arr, entries, shape):
    """Apply the static slices and static ints (a clamped length-1 slice) with slice and rev."""
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    reversed_dims = []
    for e in entries:
        if isinstance(e, _Slice) and e.length == 0:
            starts[e.dim], limits[e.dim] = 0, 0
        elif isinstance(e, _Slice):
            step = -e.step if e.step < 0 else e.step  # (a symbolic step has no abs())
            first = e.start if e.step > 0 else e.start + e.step * (e.length - 1)
            starts[e.dim], limits[e.dim] = first, first + step * (e.length - 1) + 1
            if type(e.length) is shape_poly.DimExpr or e.length > 1:
                strides[e.dim] = step
                if e.step < 0:
                    reversed_dims.append(e.dim)
        elif isinstance(e, _Int) and not _is_dynamic_int(e, shape):
            i = e.index + shape[e.dim] if e.index < 0 else e.index
            starts[e.dim], limits[e.dim] = i, i + 1
    unit_strides = all(s == 1 for s in strides)
    if starts != [0] * len(shape) or limits != list(shape) or not unit_strides:
        arr = structural.slice(arr, starts, limits, None if unit_strides else strides)
    if reversed_dims:
        arr = structural.rev(arr, reversed_dims)
    return arr


def _is_dynamic_int(e, shape) -> bool:
    """Whether the int entry `e` is read with a dynamic_slice: traced indices, and static ones
    out of bounds (clamped by dynamic_slice, where `checkify`'s index checks can see them)."""
    if _is_traced_or_device(e.index):
        return True
    try:
        return not -shape[e.dim] <= e.index < shape[e.dim]
    except shape_poly.InconclusiveDimensionOperation:  # a[1] of a[b]: clamped, as in JAX
        return True


def _dynamic_ints(arr, entries, shape):
    """dynamic_slice of size 1 at the traced (or static out-of-bounds) integer indices; `shape`
    is the shape before `_static_slices`."""
    dynamic = {e.dim: e.index for e in entries
               if isinstance(e, _Int) and _is_dynamic_int(e, shape)}
    if not dynamic:
        return arr
    dtype = _index_dtype(shape)
    shape = core.get_aval(arr).shape
    for d, i in dynamic.items():
        if not _is_traced_or_device(i) and i < 0 and shape_poly.is_symbolic_dim(shape[d]):
            # a[-2] of a[b]: b - 2 clamped at 0, a value computed from b
            start = shape_poly.max_dim(int(i) + shape[d], 0)
            dynamic[d] = lax.convert_element_type(shape_poly.dimension_as_value(start), dtype)
        elif not _is_traced_or_device(i):
            info = np.iinfo(dtype)
            # Below -size reads the first element, as in JAX (dynamic_slice would wrap -1).
            i = max(int(i) + shape[d], 0) if i < 0 else int(i)
            if i > info.max:
                raise OverflowError(f"Python int {i} too large to convert to {np.dtype(dtype)} "
                                    f"(index of axis {d})")
            dynamic[d] = np.asarray(i, dtype)
    starts = [lax.convert_element_type(dynamic[d], dtype) if d in dynamic else np.zeros((), dtype)
              for d in range(len(shape))]
    sizes = [1 if d in dynamic else n for d, n in enumerate(shape)]
    return structural.dynamic_slice(arr, starts, sizes)


# ---------------------------------------------------------------------------------------------
# The gather (and scatter) form of an index

class _Plan(NamedTuple):
    """How `x[idx]` reads as a gather: `gather(x, indices, dnums, slice_sizes)` has shape
    `gather_shape`; inserting size-1 dimensions at `new_axes` gives NumPy's `result_shape`."""
    indices: Any
    dnums: GatherDimensionNumbers
    slice_sizes: tuple
    gather_shape: tuple
    new_axes: tuple
    result_shape: tuple
    unique: bool
    sorted: bool


def _output_layout(entries, advanced_shape) -> list:
    """The result's dimensions in order: ('window', entry), ('strided', entry), ('advanced', i)
    for dimension i of the broadcast index arrays, or ('new', None)."""
    advanced_positions = [i for i, e in enumerate(entries) if isinstance(e, (_Int, _IndexArray))]
    block = [("advanced", i) for i in range(len(advanced_shape))]
    contiguous = advanced_positions == list(range(advanced_positions[0], advanced_positions[-1] + 1)) \
        if advanced_positions else True
    layout = [] if contiguous else list(block)
    for position, e in enumerate(entries):
        if e is _SEPARATOR:  # (it only parts the advanced indices)
            continue
        if e is _NEWAXIS:
            layout.append(("new", None))
        elif isinstance(e, _Slice):
            single = type(e.length) is not shape_poly.DimExpr and e.length <= 1
            layout.append(("window" if e.step == 1 or single else "strided", e))
        elif contiguous and position == advanced_positions[0]:
            layout.extend(block)
    return layout


def _dim_size(kind, value, advanced_shape) -> int:
    if kind == "new":
        return 1
    if kind == "advanced":
        return advanced_shape[value]
    return value.length


def _gather_plan(shape: tuple, entries, wrap_negative: bool, for_update: bool = False) -> _Plan:
    advanced = [e for e in entries if isinstance(e, (_Int, _IndexArray))]
    advanced_shape = util.broadcast_shapes(*(np.shape(e.index) for e in advanced))
    layout = _output_layout(entries, advanced_shape)
    gather_layout = [d for d in layout if d[0] != "new"]
    batch = [d for d in gather_layout if d[0] in ("strided", "advanced")]
    batch_shape = tuple(_dim_size(k, v, advanced_shape) for k, v in batch)
    # An update at an index of an empty axis is dropped (JAX's scatter), a read has no value
    # (unless nothing is read: an empty result, which JAX gives too).
    result_size = math.prod(_dim_size(k, v, advanced_shape) for k, v in gather_layout)
    if result_size != 0 and not for_update:
        for e in advanced:
            if e.dim is not None and shape[e.dim] == 0:
                raise IndexError(f"index is out of bounds for axis {e.dim} with size 0")
    dtype = _index_dtype(shape)
    components = _index_components(shape, advanced, batch, batch_shape, gather_layout, dtype,
                                   wrap_negative)
    # Host components first: they stack into one constant (the order of components is free).
    components.sort(key=lambda c: _is_traced_or_device(c[1]))
    slice_sizes = [1] * len(shape)
    for kind, e in gather_layout:
        if kind == "window":
            slice_sizes[e.dim] = e.length
    dnums = GatherDimensionNumbers(
        offset_dims=tuple(i for i, d in enumerate(gather_layout) if d[0] == "window"),
        collapsed_slice_dims=tuple(sorted([e.dim for e in advanced if e.dim is not None]
                                          + [e.dim for k, e in batch if k == "strided"])),
        start_index_map=tuple(d for d, _ in components))
    no_arrays = not any(isinstance(e, _IndexArray) for e in advanced)
    strided_steps = [e.step for k, e in batch if k == "strided"]
    return _Plan(_stack_components([c for _, c in components], batch_shape, dtype), dnums,
                 tuple(slice_sizes),
                 gather_shape=tuple(_dim_size(k, v, advanced_shape) for k, v in gather_layout),
                 new_axes=tuple(i for i, d in enumerate(layout) if d[0] == "new"),
                 result_shape=tuple(_dim_size(k, v, advanced_shape) for k, v in layout),
                 unique=no_arrays,
                 sorted=no_arrays and len(strided_steps) <= 1 and all(s > 0 for s in strided_steps))


def _index_components(shape, advanced, batch, batch_shape, gather_layout, dtype,
                      wrap_negative) -> list:
    """(operand dim, start indices of shape batch_shape + (1,)) for every indexed dimension:
    index arrays and scalar ints, strided slices (an arithmetic sequence along their own batch
    dimension) and windows that do not start at 0."""
    advanced_dims = tuple(i for i, d in enumerate(batch) if d[0] == "advanced")
    components = []
    for e in advanced:
        if e.dim is not None:
            index = _normalized_index(e.index, shape[e.dim], dtype, wrap_negative)
            dims = advanced_dims[len(advanced_dims) - np.ndim(index):]
            components.append((e.dim, _place(index, batch_shape, dims)))
    for position, (kind, e) in enumerate(batch):
        if kind == "strided":
            if shape_poly.DimExpr in (type(e.length), type(e.start), type(e.step)):
                start, step = (lax.convert_element_type(shape_poly.dimension_as_value(v), dtype)
                               for v in (e.start, e.step))
                steps = lax.add(lax.mul(structural.iota(dtype, e.length), step), start)
            else:
                steps = np.arange(e.length, dtype=dtype) * dtype.type(e.step) + dtype.type(e.start)
            components.append((e.dim, _place(steps, batch_shape, (position,))))
    for kind, e in gather_layout:
        if kind == "window" and e.start != 0:
            components.append((e.dim, _place(np.asarray(e.start, dtype), batch_shape, ())))
    return components


def _place(index, batch_shape: tuple, dims: tuple):
    """`index` broadcast to `batch_shape + (1,)`, its dimensions going to `dims`."""
    target = batch_shape + (1,)
    if not _is_traced_or_device(index):
        expanded = np.expand_dims(index, [d for d in range(len(target)) if d not in dims])
        return np.broadcast_to(expanded, target)
    return lax.broadcast_in_dim(index, target, dims)


def _stack_components(components: list, batch_shape: tuple, dtype: np.dtype):
    host = [c for c in components if not _is_traced_or_device(c)]
    traced = [c for c in components if _is_traced_or_device(c)]
    parts = traced
    if host or not traced:
        block = np.concatenate(host, axis=-1) if host else np.zeros(batch_shape + (0,), dtype)
        parts = [block] + traced
    if len(parts) == 1:
        return parts[0]
    return structural.concatenate(parts, len(batch_shape))


# ---------------------------------------------------------------------------------------------
# Eager calls: one cached executable per index structure

_DYNAMIC = "dynamic"  # an index item passed to the executable as an argument
_INT32_RANGE = range(-2**31, 2**31)


class _MovingSlice(NamedTuple):
    """A unit-step slice of `dim` read at a start passed as an argument: `length` elements."""
    dim: int
    length: int


def _eager_index(shape: tuple, idx, moving_slices: bool = False):
    """(structure, dynamic values) of `idx` for an eager executable, or None for an index the
    general path must see: its values decide the program (masks, lists, NumPy scalars) or it
    is malformed.

    Python ints are dynamic (indexing at another position runs the same executable, as in
    JAX), and so are integer Arrays; None and Ellipsis are static, and so are slices, except
    that with `moving_slices` (reads) a unit-step slice's start is dynamic too (`x[i:i+2]`
    for another `i` runs the same executable)."""
    items = idx if type(idx) is tuple else (idx,)
    consumed = 0
    for item in items:
        t = type(item)
        if t is int:
            if item not in _INT32_RANGE:
                return None
            consumed += 1
        elif t is slice:
            if any(p is not None and type(p) is not int
                   for p in (item.start, item.stop, item.step)):
                return None
            consumed += 1
        elif (t is Array and item.aval.dtype.kind in "iu"
              or t is np.ndarray and item.dtype.kind in "iu"):
            consumed += 1
        elif item is not None and item is not Ellipsis:
            return None
    if consumed > len(shape) or sum(item is Ellipsis for item in items) > 1:
        return None
    structure, dynamic, dim = [], [], 0
    for item in items:
        t = type(item)
        if t is slice:
            moving = moving_slices and item.step in (None, 1) and shape[dim] < 2**31 and (
                item.start is not None or item.stop is not None)
            if moving:
                start, stop, _ = item.indices(shape[dim])
                structure.append(_MovingSlice(dim, max(stop - start, 0)))
                dynamic.append(start)
            else:
                structure.append((item.start, item.stop, item.step))
            dim += 1
        elif item is None or item is Ellipsis:
            structure.append(item)
            if item is Ellipsis:
                dim += len(shape) - consumed
        else:
            structure.append(_DYNAMIC)
            dynamic.append(item)
            dim += 1
    return tuple(structure), dynamic


def _rebuilt_index(structure, dynamic) -> tuple:
    values = iter(dynamic)
    return tuple(next(values) if item is _DYNAMIC else
                 slice(*item) if type(item) is tuple else item for item in structure)


def _cut_moving_slices(structure, arr, dynamic):
    """`arr` cut to its moving slices (one dynamic_slice), with the structure and values of
    the rest of the index (a moving slice becomes a full slice of the cut dimension)."""
    cuts, rest, values = {}, [], []
    dynamic = iter(dynamic)
    for item in structure:
        if type(item) is _MovingSlice:
            cuts[item.dim] = (next(dynamic), item.length)
            rest.append((None, None, None))
        else:
            if item is _DYNAMIC:
                values.append(next(dynamic))
            rest.append(item)
    if cuts:
        shape = core.get_aval(arr).shape
        dtype = _index_dtype(shape)
        starts = [lax.convert_element_type(cuts[d][0], dtype) if d in cuts
                  else np.zeros((), dtype) for d in range(len(shape))]
        sizes = [cuts[d][1] if d in cuts else n for d, n in enumerate(shape)]
        arr = structural.dynamic_slice(arr, starts, sizes)
    return arr, rest, values


def _get_program(spec, arr, *dynamic):
    """`arr[idx]` (`x.at[idx].get(**options)`); spec: (structure, type of the fill value,
    options)."""
    structure, _, options = spec
    arr, structure, dynamic = _cut_moving_slices(structure, arr, dynamic)
    return rewriting_take(arr, _rebuilt_index(structure, dynamic), **dict(options))


def _update_program(spec, arr, values, *dynamic):
    """`x.at[idx].<op>(values, **options)`; spec: (structure, scatter function, options)."""
    structure, scatter_fn, options = spec
    return _scatter_update(arr, _rebuilt_index(structure, dynamic), values, scatter_fn,
                           **dict(options))


_get_program.__name__ = "getitem"
_update_program.__name__ = "index_update"
# `x.at[idx].get()`'s options when all are defaults: it then runs `x[idx]`'s executable,
# whose key holds () instead (the key is hashed on every call)
_GET_DEFAULTS = tuple(sorted(dict(indices_are_sorted=False, unique_indices=False, mode=None,
                                  fill_value=None, wrap_negative_indices=True).items()))


def _run_eager(program, arr, idx, spec_rest: tuple, leading: list, moving_slices: bool):
    """`program`'s cached executable for `idx` of the Array `arr` (its structure and
    `spec_rest` are the static part, `leading` and the index values the arguments), or None
    where the general path must run."""
    index = _eager_index(arr.aval.shape, idx, moving_slices)
    if index is None:
        return None
    structure, dynamic = index
    return eager.run_compiled(program, (structure, *spec_rest), [*leading, *dynamic])


# ---------------------------------------------------------------------------------------------
# Reads

def _check_static_indices(entries, shape, wrap_negative: bool) -> None:
    """The `check_static_indices` flag: a static integer index out of bounds is an error."""
    for e in entries:
        if (isinstance(e, _Int) and not _is_traced_or_device(e.index)
                and type(shape[e.dim]) is not shape_poly.DimExpr):
            size = shape[e.dim]
            position = e.index + size if wrap_negative and e.index < 0 else e.index
            if not 0 <= position < size:
                raise IndexError(f"index {e.index} out of bounds for axis {e.dim} with size "
                                 f"{size} (normalize_indices={wrap_negative})")


def rewriting_take(arr, idx, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                   mode=None, fill_value=None, wrap_negative_indices: bool = True):
    """`arr[idx]` with NumPy's semantics; out-of-bounds reads follow `mode` (default: clamp)."""
    arr = util.as_array(arr)
    shape = core.get_aval(arr).shape
    entries = _parse_index(shape, idx)
    _check_ints_on_empty_axes(entries, shape)
    parsed_mode = None if mode is None else GatherScatterMode.from_any(mode)
    if config.check_static_indices and parsed_mode in (None,
                                                       GatherScatterMode.PROMISE_IN_BOUNDS):
        _check_static_indices(entries, shape, wrap_negative_indices)
    if parsed_mode == GatherScatterMode.CLIP:  # static indices clamp now, as JAX's do (so
        # checkify sees no out-of-bounds read there)
        entries = [_Int(e.dim, min(max(e.index, -shape[e.dim]), shape[e.dim] - 1))
                   if isinstance(e, _Int) and not _is_traced_or_device(e.index) else e
                   for e in entries]
    if not _has_index_arrays(entries) and parsed_mode != GatherScatterMode.FILL_OR_DROP and \
            wrap_negative_indices and not _symbolic_strided(entries):
        return _basic_take(arr, entries)
    plan = _gather_plan(shape, entries, wrap_negative_indices)
    if all(type(d) is int for d in plan.result_shape) and math.prod(plan.result_shape) == 0:
        # Nothing is read (and a gather from an empty axis would be malformed), as in JAX.
        aval = core.get_aval(arr)
        empty = structural.full(plan.result_shape, 0, aval.dtype)
        return lax._convert_element_type(empty, aval.dtype, aval.weak_type)
    out = lax_indexing.gather(arr, plan.indices, plan.dnums, plan.slice_sizes,
                              indices_are_sorted=indices_are_sorted or plan.sorted,
                              unique_indices=unique_indices or plan.unique, mode=parsed_mode,
                              fill_value=fill_value)
    if plan.new_axes:
        out = structural.expand_dims(out, plan.new_axes)
    return out


# ---------------------------------------------------------------------------------------------
# Updates

def _scatter_update(arr, idx, values, scatter_fn: Callable, *, indices_are_sorted: bool,
                    unique_indices: bool, mode, wrap_negative_indices: bool = True):
    """`arr` with `scatter_fn` combining `values` into `arr[idx]` (a new array)."""
    arr = util.as_array(arr)
    aval = core.get_aval(arr)
    entries = _parse_index(aval.shape, idx)
    _check_ints_on_empty_axes(entries, aval.shape)
    plan = _gather_plan(aval.shape, entries, wrap_negative_indices, for_update=True)
    if isinstance(values, (list, tuple)):
        from fluxion._src.numpy.creation import asarray
        values = asarray(values)
    if not (type(values) is int and dtypes.is_integer(aval.dtype)
            and dtypes.iinfo(aval.dtype).min <= values <= dtypes.iinfo(aval.dtype).max):
        values = util.as_array(values)  # other Python ints must fit the default int type
    updates = lax._convert_element_type(values, aval.dtype, aval.weak_type)
    updates = util.broadcast_to(updates, plan.result_shape)
    if plan.new_axes:
        updates = structural.squeeze(updates, plan.new_axes)
    dnums = ScatterDimensionNumbers(
        update_window_dims=plan.dnums.offset_dims,
        inserted_window_dims=plan.dnums.collapsed_slice_dims,
        scatter_dims_to_operand_dims=plan.dnums.start_index_map)
    return scatter_fn(arr, plan.indices, updates, dnums,
                      indices_are_sorted=indices_are_sorted or plan.sorted,
                      unique_indices=unique_indices or plan.unique, mode=mode)


def _scatter_apply_fn(func: Callable) -> Callable:
    def scatter_fn(arr, indices, updates, dnums, **kwargs):
        return lax_indexing.scatter_apply(arr, indices, func, dnums,
                                          update_shape=core.get_aval(updates).shape, **kwargs)
    return scatter_fn


_safe_casts: dict = {}  # (trace_key, type of the values, target dtype) -> bool


def _warn_if_unsafe_cast(values, arr) -> None:
    """JAX's FutureWarning for update values its type promotion would not cast to `arr`'s
    dtype (a float into an int array, an int into a bool one)."""
    target = np.dtype(arr.dtype)
    t = type(values)
    kind = values.aval if t is Array else t if t in (bool, int, float, complex) else None
    key = (config.trace_key, kind, target)
    safe = _safe_casts.get(key) if kind is not None else None
    if safe is None:
        if not hasattr(values, "dtype") and kind is None:
            values = np.asarray(values)  # a list: NumPy's dtype, as JAX reads it
        source = dtypes.dtype(values, canonicalize=True)
        safe = source == target or dtypes.result_type(values, target) == target
        if kind is not None:
            if len(_safe_casts) > 256:
                _safe_casts.clear()
            _safe_casts[key] = safe
    if not safe:
        warnings.warn(
            "scatter inputs have incompatible types: cannot safely cast value from "
            f"dtype={dtypes.dtype(values, canonicalize=True)} to dtype={target} with "
            f"jax_numpy_dtype_promotion={config.numpy_dtype_promotion}. In future JAX "
            "releases this will result in an error.", FutureWarning, stacklevel=4)


class _IndexUpdateHelper:
    """The `x.at` property: `x.at[idx]` names the positions an update method acts on."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef:
    """`x.at[idx]`: each method returns a new array; `x` is unchanged.

    Every method takes keyword arguments `indices_are_sorted`, `unique_indices` (promises),
    `mode` (GatherScatterMode or its name) and `wrap_negative_indices`. By default reads clamp
    out-of-bounds indices and updates drop them.
    """

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None,
            wrap_negative_indices=True, out_sharding=None):
        """`x[idx]`; with mode='fill', out-of-bounds positions read `fill_value`;
        `out_sharding` lays the result out (and settles an ambiguous sharding)."""
        if out_sharding is not None:
            from fluxion._src.sharded_jit import apply_out_sharding
            return apply_out_sharding(lambda: self.get(
                indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
                fill_value=fill_value, wrap_negative_indices=wrap_negative_indices), out_sharding)
        options = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       mode=mode, fill_value=fill_value,
                       wrap_negative_indices=wrap_negative_indices)
        if (type(self.array) is Array and not config.check_static_indices
                and type(fill_value) in (type(None), bool, int, float, complex)):
            given = tuple(sorted(options.items()))
            out = _run_eager(_get_program, self.array, self.index,
                             (type(fill_value), () if given == _GET_DEFAULTS else given),
                             [self.array], moving_slices=True)
            if out is not None:
                return out
        return rewriting_take(self.array, self.index, **options)

    def _update(self, values, scatter_fn, kwargs):
        _warn_if_unsafe_cast(values, self.array)
        if type(self.array) is Array and (type(values) is not int or values in _INT32_RANGE):
            out = _run_eager(_update_program, self.array, self.index,
                             (scatter_fn, tuple(sorted(kwargs.items()))), [self.array, values],
                             moving_slices=False)
            if out is not None:
                return out
        return _scatter_update(self.array, self.index, values, scatter_fn, **kwargs)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """`x[idx] = values`."""
        return self._update(values, lax_indexing.scatter, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """`x[idx] += values` (repeated indices accumulate)."""
        return self._update(values, lax_indexing.scatter_add, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        """`x[idx] -= values` (repeated indices accumulate)."""
        return self._update(values, lax_indexing.scatter_sub, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        """`x[idx] *= values` (repeated indices accumulate)."""
        return self._update(values, lax_indexing.scatter_mul, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
               wrap_negative_indices=True):
        """`x[idx] /= values`, with true division (integer arrays give floats, as in JAX)."""
        return ufuncs.true_divide(self.array, self._scaled_ones(values, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices)))

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """`x[idx] **= values`."""
        return ufuncs.power(self.array, self._scaled_ones(values, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices)))

    def _scaled_ones(self, values, kwargs):
        """Ones like `x`, multiplied by `values` at `idx`."""
        ones = structural.full_like(self.array, 1)
        return _scatter_update(ones, self.index, values, lax_indexing.scatter_mul, **kwargs)

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """`x[idx] = minimum(x[idx], values)`."""
        return self._update(values, lax_indexing.scatter_min, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """`x[idx] = maximum(x[idx], values)`."""
        return self._update(values, lax_indexing.scatter_max, dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))

    def apply(self, func: Callable, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """`x` with the unary `func` applied at `idx` (once per occurrence of an index)."""
        zero = np.zeros((), core.get_aval(self.array).dtype)
        # (not `_update`: a new scatter function each call would compile each call)
        return _scatter_update(self.array, self.index, zero, _scatter_apply_fn(func), **dict(
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices))


def _getitem(self, idx):
    aval = getattr(self, "aval", None)  # global Arrays have none
    if aval is not None and type(aval) is not core.ShapedArray:  # a traced Ref: its type says how to read it
        return aval._getitem(self, idx)
    if type(self) is Array and not config.check_static_indices:  # (its ints are static)
        out = _run_eager(_get_program, self, idx, (type(None), ()), [self], moving_slices=True)
        if out is not None:
            return out
    return rewriting_take(self, idx)


def _setitem(self, idx, value):
    aval = getattr(self, "aval", None)  # global Arrays have none
    if aval is not None and type(aval) is not core.ShapedArray:  # a traced Ref
        return aval._setitem(self, idx, value)
    raise TypeError(f"{type(self).__name__} objects are immutable and do not support item "
                    "assignment. Instead of x[idx] = y, use x = x.at[idx].set(y) or another "
                    ".at[] method.")


# ---------------------------------------------------------------------------------------------
# take and take_along_axis

def _take_mode(mode, indices, size: int):
    """(indices, gather mode) for jnp's `mode` argument of take / take_along_axis."""
    if mode is None or mode == "fill" or mode == "drop":
        return indices, GatherScatterMode.FILL_OR_DROP
    if mode == "clip":
        return indices, GatherScatterMode.CLIP
    if mode == "wrap":
        size = np.asarray(size, indices.dtype)
        wrapped = ufuncs.remainder(indices, size) if _is_traced_or_device(indices) else \
            np.mod(indices, size)
        return wrapped, GatherScatterMode.PROMISE_IN_BOUNDS
    if mode == "raise":
        raise NotImplementedError("The 'raise' mode of take is not supported: fluxion cannot "
                                  "report out-of-bounds indices from compiled code.")
    if isinstance(mode, GatherScatterMode) or mode == "promise_in_bounds":
        return indices, GatherScatterMode.from_any(mode)
    raise ValueError(f"Invalid mode '{mode}' for take")


def _integer_indices(fname: str, indices, error=TypeError):
    """Integer indices; host values stay NumPy arrays so that index arithmetic folds.

    `error` is the class JAX raises for other indices (take: ValueError, take_along_axis:
    TypeError).
    """
    if not _is_traced_or_device(indices):
        indices = np.asarray(indices)
    if not dtypes.is_integer(indices.dtype):
        raise error(f"{fname} indices must be of integer type, got {indices.dtype}")
    return indices


def _reshape(x, shape: tuple):
    return lax.reshape(x, shape) if _is_traced_or_device(x) else np.reshape(x, shape)


@eager.eager_compiled(static_argnames=("axis", "out", "mode", "unique_indices",
                                       "indices_are_sorted", "fill_value"))
def take(a, indices, axis: int | None = None, out=None, mode=None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value=None):
    """Take elements of `a` along `axis` (of the flattened `a` when axis is None).

    Parameters
    ----------
    a : array_like
    indices : integer array_like; negative values count from the end.
    axis : int, optional
    mode : 'fill' or 'drop' (default: out-of-bounds positions read `fill_value`, NaN for
        inexact dtypes), 'clip', 'wrap', or a GatherScatterMode. 'raise' is not supported.
    fill_value : scalar, optional
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to take is not supported.")
    util.check_arraylike("take", a, indices)
    a = util.as_array(a)
    indices = _integer_indices("take", indices, ValueError)
    if axis is None:
        a = lax.reshape(a, (core.get_aval(a).size,))
        axis = 0
    shape = core.get_aval(a).shape
    axis = util.canonicalize_axis(axis, len(shape))
    index_shape = np.shape(indices)
    if shape[axis] == 0 and math.prod(index_shape) != 0:
        raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
    if mode is None or mode == "fill" or mode == "drop":
        indices = _normalized_index(indices, shape[axis], _index_dtype(shape), True)
    indices, gather_mode = _take_mode(mode, indices, shape[axis])
    slice_sizes = shape[:axis] + (1,) + shape[axis + 1:]
    dnums = GatherDimensionNumbers(
        offset_dims=tuple(range(axis)) + tuple(range(axis + len(index_shape),
                                                     len(shape) + len(index_shape) - 1)),
        collapsed_slice_dims=(axis,), start_index_map=(axis,))
    return lax_indexing.gather(a, _reshape(indices, index_shape + (1,)), dnums, slice_sizes,
                               indices_are_sorted=indices_are_sorted,
                               unique_indices=unique_indices, mode=gather_mode,
                               fill_value=fill_value)


@eager.eager_compiled(static_argnames=("axis", "mode", "fill_value", "wrap_negative_indices"))
def take_along_axis(arr, indices, axis: int | None = -1, mode=None, fill_value=None, *,
                    wrap_negative_indices: bool | None = None):
    """Pick `arr`'s elements at `indices` along `axis`, matching positions elsewhere.

    Parameters
    ----------
    arr : array_like
    indices : integer array of `arr`'s rank; other dimensions broadcast against `arr`'s.
    axis : int or None (None: `arr` flattened, `indices` 1-D).
    mode : as for `take` (default 'fill'), or 'one_hot': a product with one-hot rows of the
        indices (out-of-bounds indices give 0).
    fill_value : scalar, optional
    wrap_negative_indices : bool, optional
        Whether negative indices count from the end; by default they do unless `mode` is
        'promise_in_bounds' (JAX's rule).
    """
    util.check_arraylike("take_along_axis", arr, indices)
    arr = util.as_array(arr)
    indices = _integer_indices("take_along_axis", indices)
    index_shape = np.shape(indices)
    if axis is None:
        if len(index_shape) != 1:
            raise ValueError(f"take_along_axis indices must be 1D if axis=None, got shape "
                             f"{index_shape}")
        arr = lax.reshape(arr, (core.get_aval(arr).size,))
        axis = 0
    shape = core.get_aval(arr).shape
    if len(index_shape) != len(shape):
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{len(index_shape)} vs. {len(shape)}")
    axis = util.canonicalize_axis(axis, len(shape))
    out_shape = util.broadcast_shapes(index_shape, shape[:axis] + (1,) + shape[axis + 1:])
    if shape[axis] == 0:
        return structural.full(out_shape, 0, core.get_aval(arr).dtype)
    if wrap_negative_indices is None:
        wrap_negative_indices = mode != "promise_in_bounds"
    indices = _normalized_index(indices, shape[axis], _index_dtype(shape), wrap_negative_indices)
    if mode == "one_hot":
        return _one_hot_along_axis(arr, indices, axis)
    indices, gather_mode = _take_mode(mode, indices, shape[axis])
    return _gather_along_axis(arr, indices, axis, gather_mode, fill_value)


def _one_hot_along_axis(arr, indices, axis: int):
    """take_along_axis as a sum of `arr` times one-hot rows of `indices` (a dot, no gather)."""
    from fluxion._src.numpy.einsum import einsum
    size = core.get_aval(arr).shape[axis]
    indices = util.as_array(indices)
    moved_indices = structural.expand_dims(_move_axis_last(indices, axis), (-1,))
    hot = lax.eq(moved_indices, lax.broadcast_in_dim(
        structural.iota(core.get_aval(indices).dtype, size),
        core.get_aval(moved_indices).shape[:-1] + (size,), (core.get_aval(moved_indices).ndim - 1,)))
    dtype = core.get_aval(arr).dtype
    out = einsum("...yz,...z->...y", hot, _move_axis_last(arr, axis),
                 preferred_element_type=dtype, precision=lax.Precision.HIGHEST)
    return _move_last_axis_to(out, axis)


def _move_axis_last(x, axis: int):
    ndim = core.get_aval(x).ndim
    return structural.transpose(x, tuple(d for d in range(ndim) if d != axis) + (axis,))


def _move_last_axis_to(x, axis: int):
    ndim = core.get_aval(x).ndim
    order = list(range(ndim - 1))
    order.insert(axis, ndim - 1)
    return structural.transpose(x, tuple(order))


def _gather_along_axis(arr, indices, axis: int, mode, fill_value):
    """One gather: other dimensions are whole windows (indices of size 1 there), batch
    dimensions (equal sizes) or index-only dimensions (arr of size 1 there, squeezed)."""
    shape = core.get_aval(arr).shape
    index_shape = np.shape(indices)
    squeezed = [d for d in range(len(shape))
                if d != axis and shape[d] == 1 and index_shape[d] != 1]
    arr = structural.squeeze(arr, squeezed)
    operand_dim = {d: i for i, d in enumerate(d for d in range(len(shape)) if d not in squeezed)}
    window = [d for d in range(len(shape)) if d != axis and index_shape[d] == 1]
    batching = [d for d in range(len(shape)) if d != axis and d not in window and d not in squeezed]
    kept = [d for d in range(len(shape)) if d not in window]
    indices = _reshape(indices, tuple(index_shape[d] for d in kept) + (1,))
    slice_sizes = tuple(shape[d] if d in window else 1 for d in operand_dim)
    dnums = GatherDimensionNumbers(
        offset_dims=tuple(window), collapsed_slice_dims=(operand_dim[axis],),
        start_index_map=(operand_dim[axis],),
        operand_batching_dims=tuple(operand_dim[d] for d in batching),
        start_indices_batching_dims=tuple(kept.index(d) for d in batching))
    return lax_indexing.gather(arr, indices, dnums, slice_sizes, mode=mode, fill_value=fill_value)


def _at(self):
    """``x.at``: the update helper of an array; for a traced Ref, views of it (``ref.at[i]``)."""
    aval = getattr(self, "aval", None)
    if aval is not None and hasattr(aval, "_addupdate"):  # a traced Ref
        from fluxion._src.state import views
        return views.RefAt(self)
    return _IndexUpdateHelper(self)


def _addupdate(self):
    """``ref.addupdate(x, idx=())`` of a traced Ref (``ref[idx] += x``); arrays have none."""
    aval = getattr(self, "aval", None)
    if aval is None or not hasattr(aval, "_addupdate"):
        raise AttributeError(f"{type(self).__name__!r} object has no attribute 'addupdate'")
    return functools.partial(aval._addupdate, self)


array_methods.attach({
    "__getitem__": _getitem,
    "__setitem__": _setitem,
    "addupdate": property(_addupdate),
    "at": property(_at),
})
