"""Structural primitives: they move, pick, pad or reinterpret elements without arithmetic.

squeeze, transpose, slice, rev, concatenate, select_n, pad, dynamic_slice,
dynamic_update_slice, clamp, iota, bitcast_convert_type and reduce_precision are primitives
(named and parameterized as JAX's, so jaxprs print alike); expand_dims, full, collapse and the
*_in_dim helpers are wrappers over them and over broadcast_in_dim/reshape, as in JAX.
"""
from __future__ import annotations

import math
import operator
from typing import Sequence

import numpy as np

from fluxion._src.export import shape_poly
from fluxion._src import ad, batching, core, dtypes, machinery_ops
from fluxion._src.array import Array
from fluxion._src.compiler.hlo import i64_array
from fluxion._src.core import ShapedArray
from fluxion._src.lax import lax
from fluxion._src.lax import shapes as lax_shapes
from fluxion._src.lax.base import FLOAT, check_dtype, standard_primitive
from fluxion._src.sharding_types import accepts_out_sharding

__all__ = [
    "squeeze", "expand_dims", "transpose", "slice", "rev", "concatenate", "select_n", "select",
    "pad", "dynamic_slice", "dynamic_update_slice", "slice_in_dim", "index_in_dim",
    "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice_in_dim",
    "dynamic_update_index_in_dim", "clamp", "iota", "broadcasted_iota", "bitcast_convert_type",
    "reduce_precision", "full", "full_like", "zeros_like_array", "collapse",
]

_builtin_slice = slice


# ---------------------------------------------------------------------------------------------
# Argument helpers

def _is_array(x) -> bool:
    return isinstance(x, (Array, core.Tracer))


def _int_tuple(opname: str, argname: str, values) -> tuple:
    """`values` as a tuple of Python ints; a TypeError naming the op if that is impossible."""
    try:
        return tuple(map(core.canonicalize_dim, values))
    except TypeError:
        raise TypeError(f"{opname} {argname} must be a sequence of integers, "
                        f"got {values!r}") from None


def _canonicalize_axis(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for array of dimension "
                                      f"{ndim}")
    return axis % ndim


def _check_nonnegative(opname: str, argname: str, values: tuple) -> None:
    if any(v < 0 for v in values):
        raise TypeError(f"{opname} {argname} must have every element be nonnegative, got {values}")


def _check_same_dtypes(opname: str, avals: Sequence[ShapedArray]) -> None:
    if len({a.dtype for a in avals}) > 1:
        got = ", ".join(a.dtype.name for a in avals)
        raise TypeError(f"lax.{opname} requires arguments to have the same dtypes, got {got}.")


# ---------------------------------------------------------------------------------------------
# Helpers for the differentiation and batching rules

def _insert(values, index: int, value) -> tuple:
    values = tuple(values)
    return values[:index] + (value,) + values[index:]


def _shift_axes(axes, batch_dim: int) -> tuple:
    """`axes` of an unbatched operand as axes of the operand with `batch_dim` inserted."""
    return tuple(a + (a >= batch_dim) for a in axes)


def _batch_size(args, dims) -> int:
    return next(core.get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)


def _has_tangent(t) -> bool:
    return type(t) is not ad.Zero and core.get_aval(t).dtype != dtypes.float0


def _tangent_or_zeros(t, primal):
    """`t`, or zeros of the tangent type of `primal` where `t` is a symbolic zero."""
    return t if _has_tangent(t) else ad.zeros_like_aval(ad.tangent_aval(core.get_aval(primal)))


def _linear_aval(x):
    """The aval of a transpose rule argument, linear (UndefinedPrimal) or not."""
    return x.aval if ad.is_undefined_primal(x) else core.get_aval(x)


# ---------------------------------------------------------------------------------------------
# squeeze and expand_dims

def _squeeze_abstract_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions):
        raise ValueError(f"squeeze: dimensions are not unique: {dimensions}")
    if not all(0 <= d < x.ndim for d in dimensions):
        raise ValueError(f"squeeze: dimensions {dimensions} outside range [0, {x.ndim}) for an "
                         f"operand of shape {x.shape}")
    if any(x.shape[d] != 1 for d in dimensions):
        raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size not "
                         f"equal to one, got shape={x.shape} and dimensions={dimensions}")
    shape = tuple(n for i, n in enumerate(x.shape) if i not in dimensions)
    return ShapedArray(shape, x.dtype, x.weak_type)


def _squeeze_lowering(ctx, x, *, dimensions):
    return ctx.reshape(x, ctx.avals_out[0].shape)


squeeze_p = standard_primitive("squeeze", _squeeze_abstract_eval, _squeeze_lowering)


def _squeeze_transpose(ct, x, *, dimensions):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [expand_dims(ct, dimensions)]


def _squeeze_batch(args, dims, *, dimensions):
    (x,), (d,) = args, dims
    out_dim = d - sum(a < d for a in dimensions)
    return squeeze_p.bind(x, dimensions=_shift_axes(dimensions, d)), out_dim


ad.deflinear(squeeze_p, _squeeze_transpose)
batching.primitive_batchers[squeeze_p] = _squeeze_batch


def squeeze(array, dimensions: Sequence[int]):
    """Remove size-1 dimensions.

    Parameters
    ----------
    array : array_like
    dimensions : sequence of int
        Dimensions to remove (negative values count from the end); each must have size 1.
    """
    ndim = core.get_aval(array).ndim
    dimensions = tuple(sorted(_canonicalize_axis(d, ndim) for d in dimensions))
    if not dimensions and _is_array(array):
        return array
    return squeeze_p.bind(array, dimensions=dimensions)


def expand_dims(array, dimensions: Sequence[int]):
    """Insert size-1 dimensions at `dimensions` (positions in the result; negative allowed)."""
    dimensions = tuple(operator.index(d) for d in dimensions)
    if len(set(dimensions)) != len(dimensions):
        raise ValueError(f"repeated axis in lax.expand_dims: {dimensions}")
    aval = core.get_aval(array)
    ndim_out = aval.ndim + len(dimensions)
    new_dims = {_canonicalize_axis(d, ndim_out) for d in dimensions}
    if len(new_dims) != len(dimensions):
        raise ValueError(f"repeated axis in lax.expand_dims: {dimensions}")
    kept = iter(aval.shape)
    shape = tuple(1 if i in new_dims else next(kept) for i in range(ndim_out))
    broadcast_dims = tuple(i for i in range(ndim_out) if i not in new_dims)
    return lax.broadcast_in_dim(array, shape, broadcast_dims)


# ---------------------------------------------------------------------------------------------
# transpose

def _transpose_abstract_eval(x, *, permutation):
    if tuple(sorted(permutation)) != tuple(range(x.ndim)):
        raise TypeError(f"transpose permutation isn't a permutation of operand dimensions, got "
                        f"permutation {permutation} for operand shape {x.shape}.")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


def _transpose_lowering(ctx, x, *, permutation):
    return ctx.transpose(x, permutation)


transpose_p = standard_primitive("transpose", _transpose_abstract_eval, _transpose_lowering)


def _transpose_transpose(ct, x, *, permutation):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [transpose(ct, tuple(int(i) for i in np.argsort(permutation)))]


def _transpose_batch(args, dims, *, permutation):
    """The permutation absorbs the batch dimension, which it moves to the front."""
    (x,), (d,) = args, dims
    return transpose(x, (d,) + _shift_axes(permutation, d)), 0


ad.deflinear(transpose_p, _transpose_transpose)
batching.primitive_batchers[transpose_p] = _transpose_batch


def transpose(operand, permutation: Sequence[int]):
    """Permute dimensions: result dimension i is operand dimension permutation[i]."""
    permutation = _int_tuple("transpose", "permutation", permutation)
    if permutation == tuple(range(core.get_aval(operand).ndim)) and _is_array(operand):
        return operand
    return transpose_p.bind(operand, permutation=permutation)


# ---------------------------------------------------------------------------------------------
# slice

def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    if len(start_indices) != x.ndim:
        raise TypeError(f"slice start_indices must have length equal to the number of dimensions "
                        f"of the operand, got indices {start_indices} for operand shape {x.shape}.")
    if len(limit_indices) != len(start_indices):
        raise TypeError(f"slice limit_indices must have the same length as start_indices, got "
                        f"start_indices {start_indices} and limit_indices {limit_indices}.")
    if any(shape_poly.known_true(lambda: lim > n) for lim, n in zip(limit_indices, x.shape)):
        raise TypeError(f"slice limit_indices must be less than or equal to operand shape, got "
                        f"limit_indices {limit_indices} for operand shape {x.shape}.")
    if any(s < 0 for s in start_indices):
        raise TypeError(f"slice start_indices must be greater than or equal to zero, got "
                        f"start_indices of {start_indices}.")
    if any(shape_poly.known_true(lambda: lim < s) for s, lim in zip(start_indices, limit_indices)):
        raise TypeError(f"slice limit_indices must be greater than or equal to start_indices, "
                        f"got start_indices {start_indices} and limit_indices {limit_indices}.")
    strides = strides or (1,) * x.ndim
    if len(strides) != x.ndim:
        raise TypeError(f"slice strides must have length equal to the number of dimensions of "
                        f"the operand, got strides {strides} for operand shape {x.shape}.")
    if any(s <= 0 for s in strides):
        raise TypeError(f"slice strides must be positive, got {strides}")
    shape = tuple(lim - s if st == 1 else shape_poly.stride_dim(lim - s, 1, st)
                  for s, lim, st in zip(start_indices, limit_indices, strides))
    return ShapedArray(shape, x.dtype, x.weak_type)


def _slice_lowering(ctx, x, *, start_indices, limit_indices, strides):
    return ctx.slice(x, start_indices, limit_indices, strides)


slice_p = standard_primitive("slice", _slice_abstract_eval, _slice_lowering)


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    """Pad the cotangent with zeros back to the operand's shape (strides become interior
    padding)."""
    aval = x.aval
    if type(ct) is ad.Zero:
        return [ad.Zero(aval)]
    strides = strides or (1,) * aval.ndim
    ct_shape = core.get_aval(ct).shape
    config = tuple((start, n - start - _dilated_size(m, stride - 1), stride - 1)
                   for start, n, m, stride in zip(start_indices, aval.shape, ct_shape, strides))
    return [pad(ct, np.zeros((), core.get_aval(ct).dtype), config)]


def _slice_batch(args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    size = core.get_aval(x).shape[d]
    out = slice_p.bind(x, start_indices=_insert(start_indices, d, 0),
                       limit_indices=_insert(limit_indices, d, size),
                       strides=None if strides is None else _insert(strides, d, 1))
    return out, d


ad.deflinear(slice_p, _slice_transpose)
batching.primitive_batchers[slice_p] = _slice_batch


def slice(operand, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None):
    """Static slice: operand[start_indices[0]:limit_indices[0]:strides[0], ...].

    Parameters
    ----------
    operand : array_like
    start_indices, limit_indices : sequence of int
        One non-negative index per dimension (no negative-index wrapping).
    strides : sequence of int, optional
        Positive strides; default 1.
    """
    start_indices = _int_tuple("slice", "start_indices", start_indices)
    limit_indices = _int_tuple("slice", "limit_indices", limit_indices)
    strides = None if strides is None else _int_tuple("slice", "strides", strides)
    return slice_p.bind(operand, start_indices=start_indices, limit_indices=limit_indices,
                        strides=strides)


def slice_in_dim(operand, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0):
    """`operand[..., start_index:limit_index:stride]` along `axis`; negative indices wrap."""
    shape = core.get_aval(operand).shape
    axis = _canonicalize_axis(axis, len(shape))
    size = shape[axis]
    start = 0 if start_index is None else _dim_index(start_index)
    limit = size if limit_index is None else _dim_index(limit_index)
    start = start + size if start < 0 else start
    limit = limit + size if limit < 0 else limit
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, _dim_index(stride)
    return slice(operand, starts, limits, strides)


def _dim_index(i):
    """A static index: an int, or a symbolic dimension (`x.shape[0] - 1`)."""
    return i if type(i) is shape_poly.DimExpr else operator.index(i)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """`operand[..., index]` along `axis` for a static index (negative wraps)."""
    shape = core.get_aval(operand).shape
    axis = _canonicalize_axis(axis, len(shape))
    index = _dim_index(index)
    wrapped = index + shape[axis] if index < 0 else index
    if not 0 <= wrapped < shape[axis]:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {shape[axis]}")
    result = slice_in_dim(operand, wrapped, wrapped + 1, 1, axis)
    return result if keepdims else squeeze(result, (axis,))


# ---------------------------------------------------------------------------------------------
# rev

def _rev_abstract_eval(x, *, dimensions):
    _check_nonnegative("rev", "dimensions", dimensions)
    if len(set(dimensions)) != len(dimensions):
        raise TypeError(f"rev dimensions must be unique, got {dimensions}.")
    if any(d >= x.ndim for d in dimensions):
        raise TypeError(f"rev dimensions must all be less than operand ndim, got dimensions "
                        f"{dimensions} for operand ndim {x.ndim}.")
    return x


def _rev_lowering(ctx, x, *, dimensions):
    return ctx.op1("stablehlo.reverse", [x], ctx.avals_out[0],
                   {"dimensions": i64_array(dimensions)})


rev_p = standard_primitive("rev", _rev_abstract_eval, _rev_lowering)


def _rev_transpose(ct, x, *, dimensions):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [rev(ct, dimensions)]


def _rev_batch(args, dims, *, dimensions):
    (x,), (d,) = args, dims
    return rev_p.bind(x, dimensions=_shift_axes(dimensions, d)), d


ad.deflinear(rev_p, _rev_transpose)
batching.primitive_batchers[rev_p] = _rev_batch


def rev(operand, dimensions: Sequence[int]):
    """Reverse the order of elements along each of `dimensions` (non-negative)."""
    return rev_p.bind(operand, dimensions=_int_tuple("rev", "dimensions", dimensions))


# ---------------------------------------------------------------------------------------------
# concatenate

def _concatenate_abstract_eval(*xs, dimension):
    if not xs:
        raise TypeError("concatenate expects at least one operand, got 0.")
    shapes = ", ".join(str(x.shape) for x in xs)
    if len({x.ndim for x in xs}) != 1:
        raise TypeError(f"Cannot concatenate arrays with different numbers of dimensions: "
                        f"got {shapes}.")
    if not 0 <= dimension < xs[0].ndim:
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for "
                        f"shapes {shapes}.")
    others = {x.shape[:dimension] + x.shape[dimension + 1:] for x in xs}
    if len(others) != 1:
        raise TypeError(f"Cannot concatenate arrays with shapes that differ in dimensions other "
                        f"than the one being concatenated: concatenating along dimension "
                        f"{dimension} for shapes {shapes}.")
    _check_same_dtypes("concatenate", xs)
    if xs[0].dtype.name in ("int2", "uint2"):
        # XLA CPU aborts the process compiling this (a failed check in its concatenate emitter).
        raise TypeError(f"concatenate does not support {xs[0].dtype.name} operands (XLA CPU "
                        "cannot compile it); convert to int8 or uint8 first.")
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, xs[0].dtype, all(x.weak_type for x in xs))


def _concatenate_lowering(ctx, *xs, dimension):
    return ctx.concatenate(xs, dimension)


concatenate_p = standard_primitive("concatenate", _concatenate_abstract_eval, _concatenate_lowering)


def _concatenate_transpose(ct, *xs, dimension):
    """Each linear operand's cotangent is its slice of the output cotangent."""
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval) if ad.is_undefined_primal(x) else None for x in xs]
    cts, start = [], 0
    for x in xs:
        size = _linear_aval(x).shape[dimension]
        cts.append(slice_in_dim(ct, start, start + size, axis=dimension)
                   if ad.is_undefined_primal(x) else None)
        start += size
    return cts


def _concatenate_batch(args, dims, *, dimension):
    """Operands join with their batch dims where the first batched operand has it."""
    size = _batch_size(args, dims)
    out_dim = next(d for d in dims if d is not None)
    xs = [batching.matchaxis(x, d, out_dim, size) for x, d in zip(args, dims)]
    return concatenate_p.bind(*xs, dimension=dimension + (dimension >= out_dim)), out_dim


ad.deflinear(concatenate_p, _concatenate_transpose)
batching.primitive_batchers[concatenate_p] = _concatenate_batch


def concatenate(operands: Sequence, dimension: int):
    """Join arrays of one dtype and rank along `dimension` (non-negative)."""
    if len(operands) == 0:
        raise ValueError("concatenate requires a non-empty sequence of arrays")
    if len(operands) == 1 and isinstance(operands[0], Array):
        return operands[0]
    return concatenate_p.bind(*operands, dimension=operator.index(dimension))


# ---------------------------------------------------------------------------------------------
# select_n, select and clamp

def _select_n_abstract_eval(which, *cases):
    if not cases:
        raise TypeError("select_n must have at least one case")
    if any(c.shape != cases[0].shape for c in cases[1:]):
        raise TypeError(f"select cases must have the same shapes, got "
                        f"[{', '.join(str(c.shape) for c in cases)}].")
    if which.shape and which.shape != cases[0].shape:
        raise TypeError(f"select `which` must be scalar or have the same shape as cases, got "
                        f"`which` shape {which.shape} but case shape {cases[0].shape}.")
    _check_same_dtypes("select_n", cases)
    if which.dtype != dtypes.bool_ and not dtypes.is_integer(which.dtype):
        raise TypeError(f"select `which` must be boolean or integer type, got {which.dtype}.")
    if which.dtype == dtypes.bool_ and len(cases) > 2:
        raise TypeError("select with boolean `which` cannot have > 2 cases.")
    return ShapedArray(cases[0].shape, cases[0].dtype, all(c.weak_type for c in cases))


def _select_n_lowering(ctx, which, *cases):
    if which.dtype == dtypes.bool_ and len(cases) == 2:
        return ctx.select(which, cases[1], cases[0])
    return _select_tree(ctx, which, 0, cases)


def _select_tree(ctx, which, offset: int, cases):
    """Binary search on `which` over cases[offset:]: a select per comparison."""
    if len(cases) == 1:
        return cases[0]
    mid = len(cases) // 2
    in_lower_half = ctx.compare(which, offset + mid, "LT")
    return ctx.select(in_lower_half, _select_tree(ctx, which, offset, cases[:mid]),
                      _select_tree(ctx, which, offset + mid, cases[mid:]))


select_n_p = standard_primitive("select_n", _select_n_abstract_eval, _select_n_lowering)


def _select_n_jvp(primals, tangents):
    """`which` is not differentiable; the tangent is selected from the cases' tangents."""
    which, *cases = primals
    out = select_n_p.bind(which, *cases)
    case_tangents = tangents[1:]
    if not any(_has_tangent(t) for t in case_tangents):
        return out, ad.Zero.from_primal_value(out)
    return out, select_n_p.bind(which, *[_tangent_or_zeros(t, case)
                                         for t, case in zip(case_tangents, cases)])


def _select_n_transpose(ct, which, *cases):
    """Case i receives the cotangent where `which` picks it, zero elsewhere."""
    if ad.is_undefined_primal(which):
        raise NotImplementedError("select_n transpose: `which` is not a linear argument.")
    if type(ct) is ad.Zero:
        return [None] + [ad.Zero(c.aval) if ad.is_undefined_primal(c) else None for c in cases]
    zeros = ad.zeros_like_aval(core.get_aval(ct))
    return [None] + [
        select_n_p.bind(which, *[ct if j == i else zeros for j in range(len(cases))])
        if ad.is_undefined_primal(case) else None
        for i, case in enumerate(cases)]


def _select_n_batch(args, dims):
    """A scalar unbatched `which` stays scalar; otherwise `which` is brought to the cases'
    batched shape (a per-example scalar `which` is broadcast along the case dimensions)."""
    (which, *cases), (which_dim, *case_dims) = args, dims
    size = _batch_size(args, dims)
    which_ndim = core.get_aval(which).ndim - (which_dim is not None)
    if which_dim is None and which_ndim == 0:
        out_dim = next(d for d in case_dims if d is not None)
        cases = [batching.matchaxis(c, d, out_dim, size) for c, d in zip(cases, case_dims)]
        return select_n_p.bind(which, *cases), out_dim
    batched_cases = [d for d in case_dims if d is not None]
    if which_dim is not None and (which_ndim > 0 or not batched_cases):
        out_dim = which_dim
    else:
        out_dim = batched_cases[0]
    cases = [batching.matchaxis(c, d, out_dim, size) for c, d in zip(cases, case_dims)]
    case_shape = core.get_aval(cases[0]).shape
    if which_dim is not None and which_ndim == 0:
        which = lax.broadcast_in_dim(which, case_shape, (out_dim,))
    else:
        which = batching.matchaxis(which, which_dim, out_dim, size)
    return select_n_p.bind(which, *cases), out_dim


ad.primitive_jvps[select_n_p] = _select_n_jvp
ad.primitive_transposes[select_n_p] = _select_n_transpose
batching.primitive_batchers[select_n_p] = _select_n_batch


def select_n(which, *cases):
    """Pick elementwise from `cases` by `which`.

    Parameters
    ----------
    which : array_like of bool or integer
        Scalar or of the cases' shape. A bool picks cases[1] where True (at most two cases);
        an integer picks cases[which] (out-of-range values give unspecified results).
    *cases : array_like
        At least one, all of one shape and dtype.
    """
    if not cases:
        raise ValueError("select_n() must have at least one case")
    return select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
    """`on_true` where `pred` is True, else `on_false` (pred is scalar or of their shape)."""
    return select_n_p.bind(pred, on_false, on_true)


def _clamp_abstract_eval(lo, x, hi):
    for name, bound in (("min", lo), ("max", hi)):
        if bound.shape and bound.shape != x.shape:
            raise TypeError(f"clamp requires {name}.shape == operand.shape or {name}.shape == (), "
                            f"got {name}.shape={bound.shape}, operand.shape={x.shape}.")
    _check_same_dtypes("clamp", (lo, x, hi))
    return ShapedArray(x.shape, x.dtype, lo.weak_type and x.weak_type and hi.weak_type)


def _clamp_lowering(ctx, lo, x, hi):
    return ctx.clamp(lo, x, hi)


clamp_p = standard_primitive("clamp", _clamp_abstract_eval, _clamp_lowering)


def _clamp_tangent_where(condition, g, operand):
    """`g` (broadcast to the operand's shape) where `condition` holds, else zero."""
    shape = core.get_aval(operand).shape
    g = lax.broadcast_in_dim(g, shape, ()) if core.get_aval(g).shape != shape else g
    return select(condition, g, ad.zeros_like_aval(core.get_aval(g)))


# As in JAX: at a tie between the operand and a bound, neither gets the tangent; `min` gets
# it only where min < max.
ad.defjvp(clamp_p,
          lambda g, lo, x, hi: _clamp_tangent_where(
              lax.bitwise_and(lax.gt(lo, x), lax.lt(lo, hi)), g, x),
          lambda g, lo, x, hi: _clamp_tangent_where(
              lax.bitwise_and(lax.gt(x, lo), lax.lt(x, hi)), g, x),
          lambda g, lo, x, hi: _clamp_tangent_where(lax.lt(hi, x), g, x))


def _clamp_batch(args, dims):
    """Unbatched scalar bounds stay scalar; other bounds are brought to the operand's batched
    shape, the batch dim where the operand has it."""
    (lo, x, hi), (lo_dim, x_dim, hi_dim) = args, dims
    size = _batch_size(args, dims)
    x_ndim = core.get_aval(x).ndim - (x_dim is not None)
    if x_dim is not None:
        out_dim = x_dim
    else:
        full_rank = [d for b, d in ((lo, lo_dim), (hi, hi_dim))
                     if d is not None and core.get_aval(b).ndim - 1 == x_ndim]
        out_dim = full_rank[0] if full_rank else 0
    x = batching.matchaxis(x, x_dim, out_dim, size)
    shape = core.get_aval(x).shape

    def batched_bound(bound, dim):
        ndim = core.get_aval(bound).ndim - (dim is not None)
        if dim is None:
            return bound if ndim == 0 else batching.broadcast_batch(bound, size, out_dim)
        if ndim == 0 and x_ndim > 0:
            return lax.broadcast_in_dim(bound, shape, (out_dim,))
        return batching.moveaxis(bound, dim, out_dim)

    return clamp_p.bind(batched_bound(lo, lo_dim), x, batched_bound(hi, hi_dim)), out_dim


batching.primitive_batchers[clamp_p] = _clamp_batch


def clamp(min, x, max):
    """Elementwise `min(max(x, min), max)`; `min` and `max` may be scalars."""
    return clamp_p.bind(min, x, max)


# ---------------------------------------------------------------------------------------------
# pad

def _dilated_size(size: int, interior: int) -> int:
    return 0 if size == 0 else size + (size - 1) * interior


def _pad_abstract_eval(x, padding_value, *, padding_config):
    if padding_value.ndim != 0:
        raise ValueError(f"padding_value must be a scalar; got shape {padding_value.shape}")
    if len(padding_config) != x.ndim:
        raise ValueError(f"length of padding_config must equal the number of axes of operand, got "
                         f"padding_config {padding_config} for operand shape {x.shape}")
    if any(interior < 0 for _, _, interior in padding_config):
        raise ValueError(f"interior padding in padding_config must be nonnegative, got "
                         f"padding_config {padding_config}")
    shape = tuple(lo + hi + _dilated_size(n, interior)
                  for (lo, hi, interior), n in zip(padding_config, x.shape))
    if any(n < 0 for n in shape):
        raise ValueError(f"Dimension size after padding is not at least 0, got result shape "
                         f"{shape}, for padding_config {padding_config} and operand shape "
                         f"{x.shape}")
    # The dtypes last, as JAX checks shapes before dtypes.
    if x.dtype != padding_value.dtype:
        raise TypeError(f"pad operand and padding_value must be same dtype: got {x.dtype} and "
                        f"{padding_value.dtype}.")
    return ShapedArray(shape, x.dtype, x.weak_type and padding_value.weak_type)


def _pad_lowering(ctx, x, padding_value, *, padding_config):
    low, high, interior = zip(*padding_config) if padding_config else ((), (), ())
    if shape_poly.is_symbolic_shape(low + high + interior):  # symbolic widths
        return ctx.op1("stablehlo.dynamic_pad",
                       [x, padding_value, *(ctx.shape_value(v) for v in (low, high, interior))],
                       ctx.avals_out[0])
    return ctx.op1("stablehlo.pad", [x, padding_value], ctx.avals_out[0],
                   {"edge_padding_low": i64_array(low), "edge_padding_high": i64_array(high),
                    "interior_padding": i64_array(interior)})


pad_p = standard_primitive("pad", _pad_abstract_eval, _pad_lowering)


def _unpad(ct, padding_config):
    """The elements of a padded array that came from the operand (zeros for elements that
    negative padding removed)."""
    low, high, interior = zip(*padding_config) if padding_config else ((), (), ())
    if any(low) or any(high):
        ct = pad(ct, np.zeros((), core.get_aval(ct).dtype),
                 tuple((-lo, -hi, 0) for lo, hi in zip(low, high)))
    if any(interior):
        shape = core.get_aval(ct).shape
        ct = slice(ct, (0,) * len(shape), shape, tuple(i + 1 for i in interior))
    return ct


def _pad_transpose(ct, x, padding_value, *, padding_config):
    x_linear, value_linear = ad.is_undefined_primal(x), ad.is_undefined_primal(padding_value)
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval) if x_linear else None,
                ad.Zero(padding_value.aval) if value_linear else None]
    ct_x = _unpad(ct, padding_config)
    ct_value = None
    if value_linear:
        def total(v):
            return lax.reduce_sum(v, tuple(range(core.get_aval(v).ndim)))
        ct_value = lax.sub(total(ct), total(ct_x))
    return [ct_x if x_linear else None, ct_value]


def _pad_batch(args, dims, *, padding_config):
    """A per-example padding value is written through a mask of the padded positions."""
    (x, padding_value), (x_dim, value_dim) = args, dims
    size = _batch_size(args, dims)
    out_dim = 0 if x_dim is None else x_dim
    x = batching.matchaxis(x, x_dim, out_dim, size)
    config = _insert(padding_config, out_dim, (0, 0, 0))
    if value_dim is None:
        return pad_p.bind(x, padding_value, padding_config=config), out_dim
    aval = core.get_aval(x)
    padded = pad_p.bind(x, np.zeros((), aval.dtype), padding_config=config)
    from_operand = pad_p.bind(full(aval.shape, True, dtypes.bool_), np.array(False),
                              padding_config=config)
    padding = lax.broadcast_in_dim(padding_value, core.get_aval(padded).shape, (out_dim,))
    return select(from_operand, padded, padding), out_dim


ad.deflinear(pad_p, _pad_transpose)
batching.primitive_batchers[pad_p] = _pad_batch


def pad(operand, padding_value, padding_config: Sequence[tuple[int, int, int]]):
    """Pad with `padding_value` (a scalar of the operand's dtype).

    Parameters
    ----------
    operand : array_like
    padding_value : scalar
    padding_config : sequence of (low, high, interior)
        Per dimension: elements added before, after, and between neighbours. Negative low or
        high remove elements from that edge (after interior padding is inserted).
    """
    config = tuple(_int_tuple("pad", "padding_config", triple) for triple in padding_config)
    if any(len(triple) != 3 for triple in config):
        raise ValueError(f"pad padding_config must be a sequence of (low, high, interior) "
                         f"triples, got {padding_config!r}")
    return pad_p.bind(operand, padding_value, padding_config=config)


# ---------------------------------------------------------------------------------------------
# dynamic_slice and dynamic_update_slice

def _check_start_indices(opname: str, x, indices) -> None:
    if len(indices) != x.ndim:
        raise TypeError(f"{opname} start_indices must have length equal to the rank of the "
                        f"operand, got {len(indices)} indices for operand shape {x.shape}.")
    if any(i.ndim != 0 for i in indices):
        raise TypeError(f"start_indices arguments to {opname} must be scalars, got indices of "
                        f"shapes {[i.shape for i in indices]}")
    if any(i.dtype != indices[0].dtype or not dtypes.is_integer(i.dtype) for i in indices):
        raise TypeError(f"index arguments to {opname} must be integers of the same type, got: "
                        f"{', '.join(i.dtype.name for i in indices)}")


def _dynamic_slice_abstract_eval(x, *indices, slice_sizes):
    _check_start_indices("dynamic_slice", x, indices)
    if len(slice_sizes) != x.ndim:
        raise TypeError(f"dynamic_slice slice_sizes must have length equal to the rank of the "
                        f"operand, got slice_sizes {slice_sizes} for operand shape {x.shape}.")
    if any(s < 0 for s in slice_sizes):
        raise TypeError(f"dynamic_slice slice_sizes must be greater than or equal to zero, got "
                        f"slice_sizes of {slice_sizes}.")
    if any(shape_poly.known_true(lambda: s > n) for s, n in zip(slice_sizes, x.shape)):
        raise TypeError(f"dynamic_slice slice_sizes must be less than or equal to operand shape, "
                        f"got slice_sizes {slice_sizes} for operand shape {x.shape}.")
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


def _dynamic_slice_lowering(ctx, x, *indices, slice_sizes):
    if shape_poly.is_symbolic_shape(slice_sizes):
        # a symbolic slice size: real_dynamic_slice from the start indices clamped as
        # dynamic_slice clamps them, to [0, dim - size]
        starts = []
        for i, n, s in zip(indices, x.shape, slice_sizes):
            i = ctx.convert(i, np.int32)
            starts.append(ctx.clamp(ctx.constant(np.int32(0), np.int32), i,
                                    ctx.dim_value(n - s)))
        start = ctx.concatenate([ctx.reshape(i, (1,)) for i in starts], 0)
        limit = ctx.add(start, ctx.shape_value(slice_sizes))
        return ctx.op1("stablehlo.real_dynamic_slice",
                       [x, start, limit, ctx.shape_value((1,) * len(slice_sizes))],
                       ctx.avals_out[0])
    return ctx.op1("stablehlo.dynamic_slice", [x, *indices], ctx.avals_out[0],
                   {"slice_sizes": i64_array(slice_sizes)})


dynamic_slice_p = standard_primitive("dynamic_slice", _dynamic_slice_abstract_eval,
                                     _dynamic_slice_lowering)


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    """Start indices are not differentiable: the tangent is the same slice of the tangent."""
    x, *indices = primals
    out = dynamic_slice_p.bind(x, *indices, slice_sizes=slice_sizes)
    if not _has_tangent(tangents[0]):
        return out, ad.Zero.from_primal_value(out)
    return out, dynamic_slice_p.bind(tangents[0], *indices, slice_sizes=slice_sizes)


def _dynamic_slice_transpose(ct, x, *indices, slice_sizes):
    no_index_cts = [None] * len(indices)
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)] + no_index_cts
    return [dynamic_update_slice_p.bind(ad.zeros_like_aval(x.aval), ct, *indices)] + no_index_cts


def _index_matrix(indices, dims, size: int):
    """Per-example start indices as a (batch, len(indices)) array (a gather's or scatter's
    indices; unbatched indices are repeated)."""
    columns = [lax.broadcast_in_dim(i, (size, 1), () if d is None else (0,))
               for i, d in zip(indices, dims)]
    return concatenate_p.bind(*columns, dimension=1)


def _zero_start(indices):
    """A start index of 0 for an inserted batch dimension, of the other starts' dtype (int32
    for a rank-0 operand, which has none)."""
    return np.zeros((), core.get_aval(indices[0]).dtype if indices else np.int32)


def _dynamic_slice_batch(args, dims, *, slice_sizes):
    """Unbatched starts slice the whole batch dimension; per-example starts become a gather
    (clamped like dynamic_slice) whose operand batch dimension stays in place."""
    (x, *indices), (x_dim, *index_dims) = args, dims
    size = _batch_size(args, dims)
    if all(d is None for d in index_dims):
        zero = _zero_start(indices)
        out = dynamic_slice_p.bind(x, *_insert(indices, x_dim, zero),
                                   slice_sizes=_insert(slice_sizes, x_dim, size))
        return out, x_dim
    from fluxion._src.lax import indexing
    starts = _index_matrix(indices, index_dims, size)
    ndim = len(slice_sizes)
    if x_dim is None:
        dnums = indexing.GatherDimensionNumbers(
            offset_dims=tuple(range(1, ndim + 1)), collapsed_slice_dims=(),
            start_index_map=tuple(range(ndim)))
        out_dim, sizes = 0, slice_sizes
    else:
        others = tuple(i for i in range(ndim + 1) if i != x_dim)
        dnums = indexing.GatherDimensionNumbers(
            offset_dims=others, collapsed_slice_dims=(), start_index_map=others,
            operand_batching_dims=(x_dim,), start_indices_batching_dims=(0,))
        out_dim, sizes = x_dim, _insert(slice_sizes, x_dim, 1)
    # An unbatched operand is read by every example, at starts in any order and in windows
    # that may overlap; the flags pass on to the transpose's scatter-add, where a wrong
    # unique_indices loses updates on GPUs.
    own_operand = x_dim is not None
    out = indexing.gather(x, starts, dnums, sizes, mode=indexing.GatherScatterMode.CLIP,
                          indices_are_sorted=own_operand, unique_indices=own_operand)
    return out, out_dim


ad.primitive_jvps[dynamic_slice_p] = _dynamic_slice_jvp
ad.primitive_transposes[dynamic_slice_p] = _dynamic_slice_transpose
batching.primitive_batchers[dynamic_slice_p] = _dynamic_slice_batch


def _dynamic_update_slice_abstract_eval(x, update, *indices):
    if update.ndim != x.ndim:
        raise TypeError(f"dynamic_update_slice update must have the same rank as operand, got "
                        f"update shape {update.shape} for operand shape {x.shape}.")
    _check_start_indices("dynamic_update_slice", x, indices)
    if any(u > n for u, n in zip(update.shape, x.shape)):
        raise TypeError(f"dynamic_update_slice update shape must be smaller than operand shape, "
                        f"got update shape {update.shape} for operand shape {x.shape}.")
    _check_same_dtypes("dynamic_update_slice", (x, update))
    weak = x.weak_type and update.weak_type and all(i.weak_type for i in indices)
    return ShapedArray(x.shape, x.dtype, weak)


def _dynamic_update_slice_lowering(ctx, x, update, *indices):
    return ctx.op1("stablehlo.dynamic_update_slice", [x, update, *indices], ctx.avals_out[0])


dynamic_update_slice_p = standard_primitive("dynamic_update_slice",
                                            _dynamic_update_slice_abstract_eval,
                                            _dynamic_update_slice_lowering)


def _dynamic_update_slice_jvp(primals, tangents):
    """Linear in (operand, update) jointly; the start indices are not differentiable."""
    x, update, *indices = primals
    out = dynamic_update_slice_p.bind(x, update, *indices)
    t_x, t_update = tangents[:2]
    if not (_has_tangent(t_x) or _has_tangent(t_update)):
        return out, ad.Zero.from_primal_value(out)
    return out, dynamic_update_slice_p.bind(_tangent_or_zeros(t_x, x),
                                            _tangent_or_zeros(t_update, update), *indices)


def _dynamic_update_slice_transpose(ct, x, update, *indices):
    x_linear, update_linear = ad.is_undefined_primal(x), ad.is_undefined_primal(update)
    update_aval = _linear_aval(update)
    no_index_cts = [None] * len(indices)
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval) if x_linear else None,
                ad.Zero(update.aval) if update_linear else None] + no_index_cts
    ct_x = ct_update = None
    if x_linear:
        zeros = ad.zeros_like_aval(ad.tangent_aval(update_aval))
        ct_x = dynamic_update_slice_p.bind(ct, zeros, *indices)
    if update_linear:
        ct_update = dynamic_slice_p.bind(ct, *indices, slice_sizes=update_aval.shape)
    return [ct_x, ct_update] + no_index_cts


def _dynamic_update_slice_batch(args, dims):
    """Unbatched starts update the whole batch dimension; per-example starts become a
    scatter (clamped like dynamic_update_slice) with the operand's batch dim in place."""
    (x, update, *indices), (x_dim, update_dim, *index_dims) = args, dims
    size = _batch_size(args, dims)
    if all(d is None for d in index_dims):
        out_dim = x_dim if x_dim is not None else update_dim
        x = batching.matchaxis(x, x_dim, out_dim, size)
        update = batching.matchaxis(update, update_dim, out_dim, size)
        zero = _zero_start(indices)
        return dynamic_update_slice_p.bind(x, update, *_insert(indices, out_dim, zero)), out_dim
    from fluxion._src.lax import indexing
    out_dim = 0 if x_dim is None else x_dim
    x = batching.matchaxis(x, x_dim, out_dim, size)
    if update_dim is None:
        update, update_dim = batching.broadcast_batch(update, size, 0), 0
    ndim = core.get_aval(x).ndim
    dnums = indexing.ScatterDimensionNumbers(
        update_window_dims=tuple(i for i in range(ndim) if i != update_dim),
        inserted_window_dims=(),
        scatter_dims_to_operand_dims=tuple(i for i in range(ndim) if i != out_dim),
        operand_batching_dims=(out_dim,), scatter_indices_batching_dims=(0,))
    starts = _index_matrix(indices, index_dims, size)
    out = indexing.scatter(x, starts, update, dnums, mode=indexing.GatherScatterMode.CLIP,
                           indices_are_sorted=True, unique_indices=True)
    return out, out_dim


ad.primitive_jvps[dynamic_update_slice_p] = _dynamic_update_slice_jvp
ad.primitive_transposes[dynamic_update_slice_p] = _dynamic_update_slice_transpose
batching.primitive_batchers[dynamic_update_slice_p] = _dynamic_update_slice_batch


def _index_scalars(start_indices) -> list:
    """The start indices as a list of scalars (a 1-D array is split into its elements)."""
    if isinstance(start_indices, (Array, core.Tracer, np.ndarray)):
        if start_indices.ndim != 1:
            raise ValueError(f"Slice indices must be a 1D sequence, got {start_indices.shape}")
        if isinstance(start_indices, np.ndarray):
            return list(start_indices)
        return [index_in_dim(start_indices, i, keepdims=False)
                for i in range(start_indices.shape[0])]
    return list(start_indices)


def _wrap_negative_index(index, size: int, allow_negative: bool):
    """A start index with negative values counted from the end (when allowed), as JAX does.

    Static indices become NumPy scalars of their canonical dtype (they print as literals);
    traced signed indices get a select. Non-integer or non-scalar indices pass through for the
    primitive to reject."""
    dtype = dtypes.dtype(index, canonicalize=True)
    if not dtypes.is_integer(dtype) or np.ndim(index) != 0:
        return index
    if _is_array(index):
        if not allow_negative or dtype.kind == "u":
            return index
        is_negative = lax.lt(index, np.zeros((), dtype))
        return select_n(is_negative, index, lax.add(index, shape_poly.size_value(size, dtype)))
    value = operator.index(index)
    if value < 0 and not allow_negative:
        raise ValueError(f"Index {value} is out of bounds for dimension {size} if "
                         f"allow_negative_indices=False")
    if value < 0 and type(size) is shape_poly.DimExpr:  # counts from a symbolic end: traced
        return lax.add(np.asarray(value, dtype), shape_poly.size_value(size, dtype))
    return np.asarray(value + size if value < 0 else value, dtype)


def _start_indices(aval, start_indices, allow_negative_indices) -> list:
    indices = _index_scalars(start_indices)
    if len(indices) != aval.ndim:
        raise ValueError(f"Length of slice indices must match number of operand dimensions "
                         f"({len(indices)} vs {aval.shape})")
    if isinstance(allow_negative_indices, bool):
        allow_negative_indices = (allow_negative_indices,) * aval.ndim
    return [_wrap_negative_index(i, n, allow) for i, n, allow
            in zip(indices, aval.shape, allow_negative_indices)]


def dynamic_slice(operand, start_indices, slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True):
    """Slice of static size `slice_sizes` at (possibly traced) `start_indices`.

    Parameters
    ----------
    operand : array_like
    start_indices : sequence of scalar integers, or a 1-D integer array
        All of one integer dtype. A negative index counts from the end (when
        `allow_negative_indices`); each start is then clamped to [0, shape - slice_size] so
        the slice lies inside the operand.
    slice_sizes : sequence of int
    """
    aval = core.get_aval(operand)
    indices = _start_indices(aval, start_indices, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *indices,
                                slice_sizes=_int_tuple("dynamic_slice", "slice_sizes", slice_sizes))


def dynamic_update_slice(operand, update, start_indices, *,
                         allow_negative_indices: bool | Sequence[bool] = True):
    """`operand` with `update` written at (possibly traced) `start_indices`.

    Start indices are wrapped and clamped as in `dynamic_slice`, so `update` (of the operand's
    rank and dtype, no larger than it) always lies inside the result.
    """
    aval = core.get_aval(operand)
    indices = _start_indices(aval, start_indices, allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *indices)


def _zero_index_like(index):
    """A zero start index of `index`'s dtype (a Python int stays a Python int)."""
    if type(index) is int:
        return 0
    return np.zeros((), dtypes.dtype(index, canonicalize=True))


def _one_axis_indices(ndim: int, axis: int, start_index, allow_negative: bool):
    starts = [_zero_index_like(start_index)] * ndim
    starts[axis] = start_index
    allow = [False] * ndim
    allow[axis] = allow_negative
    return starts, allow


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True):
    """`dynamic_slice` along one axis: `operand[..., start_index:start_index + slice_size]`."""
    shape = core.get_aval(operand).shape
    axis = _canonicalize_axis(axis, len(shape))
    starts, allow = _one_axis_indices(len(shape), axis, start_index, allow_negative_indices)
    sizes = list(shape)
    sizes[axis] = core.canonicalize_dim(slice_size)
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True):
    """`operand[..., index]` along `axis` for a (possibly traced) index, clamped into range."""
    axis = _canonicalize_axis(axis, core.get_aval(operand).ndim)
    result = dynamic_slice_in_dim(operand, index, 1, axis,
                                  allow_negative_indices=allow_negative_indices)
    return result if keepdims else squeeze(result, (axis,))


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int, *,
                                allow_negative_indices: bool = True):
    """`dynamic_update_slice` with a start index along `axis` only (others are 0)."""
    ndim = core.get_aval(operand).ndim
    axis = _canonicalize_axis(axis, ndim)
    starts, allow = _one_axis_indices(ndim, axis, start_index, allow_negative_indices)
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=allow)


def dynamic_update_index_in_dim(operand, update, index, axis: int, *,
                                allow_negative_indices: bool = True):
    """Write `update` at `index` along `axis`; `update` may lack that axis."""
    ndim = core.get_aval(operand).ndim
    axis = _canonicalize_axis(axis, ndim)
    update_ndim = core.get_aval(update).ndim
    if update_ndim + 1 == ndim:
        update = expand_dims(update, (axis,))
    elif update_ndim != ndim:
        raise TypeError(f"dynamic_update_index_in_dim: update of rank {update_ndim} does not fit "
                        f"an operand of rank {ndim} (it needs rank {ndim} or {ndim - 1}).")
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


# ---------------------------------------------------------------------------------------------
# iota

def _iota_abstract_eval(*, dtype, shape, dimension, sharding=None):
    if not (dtypes.issubdtype(dtype, np.integer) or dtypes.issubdtype(dtype, np.inexact)):
        raise TypeError(f"iota does not accept dtype {dtype.name}. Accepted dtypes are subtypes "
                        f"of integer, floating, complexfloating.")
    _check_nonnegative("iota", "shape", shape)
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota dimension must be between 0 and len(shape), got "
                         f"dimension={dimension} for shape={shape}")
    return ShapedArray(shape, dtype)


def _iota_lowering(ctx, *, dtype, shape, dimension, sharding=None):
    out = ctx.avals_out[0]
    if not dtypes.is_complex(dtype):
        return ctx.iota(out, dimension)
    real_dtype = np.float32 if dtype == dtypes.complex64 else np.float64
    return ctx.convert(ctx.iota(out.update(dtype=real_dtype), dimension), dtype)


iota_p = standard_primitive("iota", _iota_abstract_eval, _iota_lowering)


def _canonical_user_dtype(dtype) -> np.dtype:
    return dtypes.canonicalize_dtype(dtypes.dtype(dtype))


@accepts_out_sharding
def broadcasted_iota(dtype, shape: Sequence[int], dimension: int):
    """An array of `shape` whose elements count 0, 1, ... along `dimension`."""
    shape = _int_tuple("broadcasted_iota", "shape", shape)
    dimension = operator.index(core.concrete_or_error(dimension, "dimension of broadcasted_iota"))
    return iota_p.bind(dtype=dtypes.check_user_dtype(dtype, "broadcasted_iota"), shape=shape,
                       dimension=dimension,
                       sharding=None)


def iota(dtype, size: int):
    """`[0, 1, ..., size - 1]` as a 1-D array of `dtype`."""
    return broadcasted_iota(dtype, (size,), 0)


# ---------------------------------------------------------------------------------------------
# bitcast_convert_type and reduce_precision

def _bitcast_abstract_eval(x, *, new_dtype):
    old = x.dtype
    if old != new_dtype and (dtypes.bool_ in (old, new_dtype) or dtypes.is_complex(old)
                             or dtypes.is_complex(new_dtype)):
        raise TypeError(f"lax.bitcast_convert_type does not support bool or complex values "
                        f"unless the operand and destination types match. Got operand "
                        f"dtype={old}, new_dtype={new_dtype}.")
    old_bits, new_bits = dtypes.itemsize_bits(old), dtypes.itemsize_bits(new_dtype)
    if old_bits == new_bits:
        shape = x.shape
    elif old_bits > new_bits:
        shape = x.shape + (old_bits // new_bits,)
    else:
        last = x.shape[-1] if x.shape else 1
        if last * old_bits != new_bits:
            raise ValueError(f"Attempting to convert array of shape {x.shape} from {old} of size "
                             f"{old_bits} bits to {new_dtype} of size {new_bits} bits, but "
                             f"{last} * {old_bits} != {new_bits}")
        shape = x.shape[:-1]
    return ShapedArray(shape, new_dtype)


def _bitcast_lowering(ctx, x, *, new_dtype):
    return ctx.bitcast_convert(x, ctx.avals_out[0])


bitcast_convert_type_p = standard_primitive("bitcast_convert_type", _bitcast_abstract_eval,
                                            _bitcast_lowering)


def _bitcast_batch(args, dims, *, new_dtype):
    """Elementwise, except that a wider new dtype consumes the trailing dimension, which
    therefore must not be the batch dimension."""
    (x,), (d,) = args, dims
    aval = core.get_aval(x)
    if dtypes.itemsize_bits(aval.dtype) < dtypes.itemsize_bits(new_dtype) and d == aval.ndim - 1:
        x, d = batching.moveaxis(x, d, 0), 0
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), d


ad.defjvp_zero(bitcast_convert_type_p)
batching.primitive_batchers[bitcast_convert_type_p] = _bitcast_batch


def bitcast_convert_type(operand, new_dtype):
    """Reinterpret the bits of `operand` as `new_dtype`.

    Equal sizes keep the shape; a narrower `new_dtype` adds a trailing dimension of
    old_size // new_size; a wider one removes a trailing dimension of new_size // old_size.
    """
    return bitcast_convert_type_p.bind(operand, new_dtype=_canonical_user_dtype(new_dtype))


def _reduce_precision_abstract_eval(x, *, exponent_bits, mantissa_bits):
    check_dtype("reduce_precision", x, FLOAT)
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got {exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError(f"reduce_precision: mantissa_bits must be non-negative; "
                         f"got {mantissa_bits}")
    return x


def _reduce_precision_lowering(ctx, x, *, exponent_bits, mantissa_bits):
    return ctx.op1("stablehlo.reduce_precision", [x], ctx.avals_out[0],
                   {"exponent_bits": f"{exponent_bits} : i32",
                    "mantissa_bits": f"{mantissa_bits} : i32"})


reduce_precision_p = standard_primitive("reduce_precision", _reduce_precision_abstract_eval,
                                        _reduce_precision_lowering)


def _reduce_precision_transpose(ct, x, *, exponent_bits, mantissa_bits):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [reduce_precision_p.bind(ct, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)]


ad.deflinear(reduce_precision_p, _reduce_precision_transpose)
batching.defvectorized(reduce_precision_p)


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """Round floats to the nearest value with the given exponent and mantissa bit counts."""
    exponent_bits = operator.index(
        core.concrete_or_error(exponent_bits, "exponent_bits of reduce_precision"))
    mantissa_bits = operator.index(
        core.concrete_or_error(mantissa_bits, "mantissa_bits of reduce_precision"))
    return reduce_precision_p.bind(operand, exponent_bits=exponent_bits,
                                   mantissa_bits=mantissa_bits)


# ---------------------------------------------------------------------------------------------
# full, full_like, zeros_like_array, collapse

def full(shape: Sequence[int], fill_value, dtype=None, *, sharding=None):
    """An array of `shape` filled with the scalar `fill_value` (cast to `dtype` if given),
    laid out as `sharding` if given."""
    if sharding is not None:
        from fluxion._src.sharded_jit import apply_out_sharding
        return apply_out_sharding(lambda: full(shape, fill_value, dtype), sharding)
    shape = _int_tuple("full", "shape", shape)
    if np.shape(fill_value):
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape "
                        f"{np.shape(fill_value)}.")
    if dtype is None:
        weak_type = dtypes.is_weakly_typed(fill_value)
        fill_dtype = dtypes.dtype(fill_value, canonicalize=True)
    else:
        weak_type, fill_dtype = False, dtypes.check_user_dtype(dtype, "full")
    fill_value = lax._convert_element_type(fill_value, fill_dtype, weak_type)
    return lax.broadcast(fill_value, shape)


def full_like(x, fill_value, dtype=None, shape: Sequence[int] | None = None, sharding=None):
    """An array like `x` (its shape and dtype, unless given) filled with `fill_value`."""
    if sharding is not None:
        from fluxion._src.sharded_jit import apply_out_sharding
        return apply_out_sharding(lambda: full_like(x, fill_value, dtype, shape), sharding)
    fill_shape = np.shape(x) if shape is None else shape
    weak_type = dtype is None and dtypes.is_weakly_typed(x)
    fill_dtype = dtypes.dtype(x if dtype is None else dtype, canonicalize=True)
    out = full(fill_shape, lax._convert_element_type(fill_value, fill_dtype, weak_type))
    from fluxion._src.placement import place_like
    return place_like(out, x, weak_type)  # on x's devices, when x is committed there


def zeros_like_array(x):
    """Zeros of `x`'s shape, dtype and weak type."""
    return full_like(x, 0)


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """Merge dimensions [start_dimension, stop_dimension) into one (row-major order)."""
    shape = core.get_aval(operand).shape
    lo, hi, _ = _builtin_slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        raise ValueError(f"Invalid dimension range passed to collapse: {shape}"
                         f"[{start_dimension}:{stop_dimension}]")
    size = math.prod(shape[lo:hi])
    return lax.reshape(operand, shape[:lo] + (size,) + shape[hi:])


# The transformation machinery sits below lax; it reaches these operations through
# machinery_ops, which is filled in here.
def _machinery_full(shape, fill_value, dtype, weak_type):
    fill = lax._convert_element_type(fill_value, dtype, weak_type)
    if fill.dtype != dtype:  # a 64-bit aval met outside enable_x64: keep its width exactly
        fill = lax_shapes.convert_element_type_p.bind(fill, new_dtype=np.dtype(dtype),
                                                      weak_type=weak_type)
    return lax.broadcast(fill, shape)


machinery_ops.install(full=_machinery_full, add=lax.add, transpose=transpose,
                      broadcast_in_dim=lax.broadcast_in_dim, reshape=lax.reshape)
