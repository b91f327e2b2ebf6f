"""Order-based ops: sort (one or several operands, lexicographic keys), sort_key_val, top_k,
argmax and argmin.

Floats are ordered as in JAX: -0.0 and 0.0 are equal for sort and for argmax/argmin ties, NaNs
sort last, and argmax/argmin return the first NaN when there is one.
"""
from __future__ import annotations

import operator
from typing import Sequence

import numpy as np

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.export import shape_poly
from fluxion._src.core import ShapedArray
from fluxion._src.lax import lax
from fluxion._src.lax.base import ANY, ORDERED, check_dtype, standard_primitive
from fluxion._src.lax.indexing import GatherDimensionNumbers, GatherScatterMode, gather
from fluxion._src.lax.reductions import emit_reduce, identity_value
from fluxion._src.lax.structural import broadcasted_iota

__all__ = ["argmax", "argmax_p", "argmin", "argmin_p", "sort", "sort_key_val", "sort_p",
           "top_k", "top_k_p"]


def _canonicalize_axis(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for array of dimension "
                                      f"{ndim}")
    return axis % ndim if ndim else axis


# ---------------------------------------------------------------------------------------------
# sort

def _sort_abstract_eval(*avals, dimension, is_stable, num_keys):
    if not avals:
        raise TypeError("sort requires at least one operand")
    if any(a.shape != avals[0].shape for a in avals):
        raise TypeError(f"Arguments to sort must have equal shapes, got: "
                        f"{' '.join(str(a.shape) for a in avals)}")
    if not 1 <= num_keys <= len(avals):
        raise ValueError(f"sort: num_keys={num_keys} must be between 1 and the number of "
                         f"operands {len(avals)}")
    if not 0 <= dimension < avals[0].ndim:
        raise ValueError(f"sort: dimension {dimension} is out of bounds for operands of shape "
                         f"{avals[0].shape}")
    if any(a.dtype.name in ("int2", "uint2") for a in avals):
        # XLA CPU compiles it but returns garbage (jaxlib 0.10.2; JAX gives wrong results too).
        raise TypeError("sort does not support int2 or uint2 operands (XLA CPU sorts them "
                        "wrongly); convert to int8 or uint8 first.")
    for i, a in enumerate(avals):
        check_dtype("sort", a, ANY, i)
    return list(avals)


def _float_sort_key(block, x):
    """x with -0.0 made 0.0 and every NaN the same positive NaN, for a total-order compare."""
    zero = block.constant(0, x.dtype)
    x = block.select(block.compare(x, zero, "EQ"), zero, x)
    return block.select(block.compare(x, x, "NE"), block.constant(np.nan, x.dtype), x)


def _sort_keys(block, x) -> list:
    if dtypes.is_complex(x.dtype):
        part = ShapedArray((), np.float32 if x.dtype == dtypes.complex64 else np.float64)
        return [_float_sort_key(block, block.op1(f"stablehlo.{p}", [x], part))
                for p in ("real", "imag")]
    if dtypes.is_float(x.dtype):
        return [_float_sort_key(block, x)]
    return [x]


def _less_than(block, xs, ys):
    """Lexicographic x < y over pairs of key scalars."""
    result = None
    for x, y in reversed(list(zip(xs, ys))):
        compare_type = "TOTALORDER" if dtypes.is_float(x.dtype) else None
        lt = block.compare(x, y, "LT", compare_type)
        if result is not None:
            lt = block.or_(lt, block.and_(block.compare(x, y, "EQ", compare_type), result))
        result = lt
    return result


def _sort_lowering(ctx, *operands, dimension, is_stable, num_keys):
    scalar_avals = [ShapedArray((), x.dtype) for x in operands]
    comparator = ctx.new_block([a for a in scalar_avals for _ in range(2)])
    lhs_keys, rhs_keys = [], []
    for i in range(num_keys):
        lhs_keys += _sort_keys(comparator, comparator.args[2 * i])
        rhs_keys += _sort_keys(comparator, comparator.args[2 * i + 1])
    comparator.ret([_less_than(comparator, lhs_keys, rhs_keys)])
    return ctx.op("stablehlo.sort", list(operands), [x.aval for x in operands],
                  {"dimension": f"{dimension} : i64",
                   "is_stable": "true" if is_stable else "false"}, [comparator])


sort_p = standard_primitive("sort", _sort_abstract_eval, _sort_lowering, multiple_results=True)


def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sort an array, or several arrays of one shape by their first `num_keys` (XLA's Sort).

    Parameters
    ----------
    operand : an array, or a sequence of arrays of one shape.
    dimension : the dimension to sort along.
    is_stable : keep the order of equal keys.
    num_keys : how many leading operands are keys, compared lexicographically; the others
        follow the keys' permutation.

    Returns the sorted array, or a tuple of sorted arrays for a sequence operand. Floats sort
    with NaNs last and -0.0 equal to 0.0; complex numbers by real part, then imaginary part.
    """
    if isinstance(operand, Sequence):
        if not operand:
            raise TypeError("Sort requires at least one operand")
        if not 1 <= num_keys <= len(operand):
            raise ValueError(f"num_keys={num_keys} must be between 1 and "
                             f"len(operand)={len(operand)}")
        dimension = _canonicalize_axis(dimension, core.get_aval(operand[0]).ndim)
        return tuple(sort_p.bind(*operand, dimension=dimension, is_stable=bool(is_stable),
                                 num_keys=operator.index(num_keys)))
    if num_keys != 1:
        raise ValueError(f"num_keys={num_keys} must equal 1 for a single operand.")
    dimension = _canonicalize_axis(dimension, core.get_aval(operand).ndim)
    return sort_p.bind(operand, dimension=dimension, is_stable=bool(is_stable), num_keys=1)[0]


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """Sort `keys` along `dimension` and apply the same permutation to `values`."""
    dimension = _canonicalize_axis(dimension, core.get_aval(keys).ndim)
    sorted_keys, sorted_values = sort_p.bind(keys, values, dimension=dimension,
                                             is_stable=bool(is_stable), num_keys=1)
    return sorted_keys, sorted_values


# ---------------------------------------------------------------------------------------------
# top_k

def _top_k_abstract_eval(operand, *, k, axis):
    if dtypes.is_complex(operand.dtype):
        raise ValueError("top_k is not compatible with complex inputs.")
    check_dtype("top_k", operand, ORDERED)
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
    if operand.ndim == 0:
        raise TypeError(f"top_k operand must have >= 1 dimension, got {operand.shape}")
    if not 0 <= axis < operand.ndim:
        raise ValueError(f"axis argument out of range: axis={axis} for "
                         f"operand.shape={operand.shape}")
    if operand.shape[axis] < k:
        raise ValueError(f"k argument to top_k must be no larger than size along axis; got k={k} "
                         f"with shape={list(operand.shape)} and axis={axis}")
    _check_int32_indexable(operand.shape, axis)
    shape = operand.shape[:axis] + (k,) + operand.shape[axis + 1:]
    return [operand.update(shape=shape), ShapedArray(shape, np.int32)]


def _check_int32_indexable(shape, axis: int) -> None:
    """JAX's ValueError where top_k's int32 indices cannot index the axis (a symbolic size
    that may or may not be too large passes)."""
    from fluxion._src.export.shape_poly import InconclusiveDimensionOperation
    int32_max = np.iinfo(np.int32).max
    try:
        too_large = bool(shape[axis] > int32_max + 1)
    except InconclusiveDimensionOperation:
        return
    if too_large:
        raise ValueError("top_k returns int32 indices, which will overflow for array dimensions "
                         f"larger than the maximum int32 ({int32_max}). Got "
                         f"operand.shape={tuple(shape)}")


def _top_k_lowering(ctx, operand, *, k, axis):
    last = operand.aval.ndim - 1
    perm = list(range(last + 1))
    perm[axis], perm[last] = last, axis
    if axis != last:
        operand = ctx.transpose(operand, perm)
    shape = operand.shape[:-1] + (k,)
    results = [operand.aval.update(shape=shape), ShapedArray(shape, np.int32)]
    if type(k) is shape_poly.DimExpr:  # refined to chlo.top_k when the module is specialized
        values, indices = ctx.custom_call("stablehlo.dynamic_top_k", [operand, ctx.dim_value(k)],
                                          results, api_version=2, shape_operands=False)
    else:
        values, indices = ctx.op("chlo.top_k", [operand], results, {"k": f"{k} : i64"})
    if axis != last:
        values, indices = ctx.transpose(values, perm), ctx.transpose(indices, perm)
    return [values, indices]


top_k_p = standard_primitive("top_k", _top_k_abstract_eval, _top_k_lowering, multiple_results=True)


def top_k(operand, k: int, *, axis: int = -1):
    """The `k` largest entries along `axis` and their int32 indices, largest first.

    Equal entries keep their order (the lower index first); NaNs count as largest.
    """
    k = k if type(k) is shape_poly.DimExpr else operator.index(k)
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
    axis = _canonicalize_axis(axis, core.get_aval(operand).ndim)
    values, indices = top_k_p.bind(operand, k=k, axis=axis)
    return [values, indices]  # a list, as JAX


# ---------------------------------------------------------------------------------------------
# argmax, argmin

def _argminmax_abstract_eval(name: str):
    def rule(operand, *, axes, index_dtype):
        axis, = axes
        check_dtype(name, operand, ORDERED)
        if not 0 <= axis < operand.ndim:
            raise ValueError(f"{name}: Invalid axis {axis} for operand shape {operand.shape}")
        if operand.shape[axis] < 1:
            raise ValueError(f"argmin and argmax require non-empty reduced dimension. "
                             f"operand.shape={operand.shape} axis={axis}")
        if not dtypes.is_integer(index_dtype):
            raise TypeError(f"index_dtype must be an integer type, but got {index_dtype.name}")
        return ShapedArray(operand.shape[:axis] + operand.shape[axis + 1:], index_dtype)
    return rule


def _argminmax_lowering(kind: str):
    direction = "GT" if kind == "max" else "LT"

    def pick_first(block, accs, xs):
        """Whether the (value, index) pair `accs` wins over `xs`: it is strictly better, or tied
        with the lower index. NaNs beat numbers and tie with each other."""
        (a, a_index), (b, b_index) = accs, xs
        better = block.compare(a, b, direction)
        tied = block.compare(a, b, "EQ")
        if dtypes.is_inexact(a.dtype):
            a_nan, b_nan = block.compare(a, a, "NE"), block.compare(b, b, "NE")
            better = block.or_(block.and_(a_nan, block.not_(b_nan)), better)
            tied = block.or_(block.and_(a_nan, b_nan), tied)
        first = block.compare(a_index, b_index, "LT")
        return block.or_(better, block.and_(tied, first))

    def lowering(ctx, operand, *, axes, index_dtype):
        indices = ctx.iota(ShapedArray(operand.shape, index_dtype), axes[0])
        inits = [ctx.constant(identity_value(kind, operand.dtype), operand.dtype),
                 ctx.constant(0, index_dtype)]

        def body(block, accs, xs):
            pick = pick_first(block, accs, xs)
            return [block.select(pick, accs[0], xs[0]), block.select(pick, accs[1], xs[1])]
        return emit_reduce(ctx, [operand, indices], inits, axes, body)[1]
    return lowering


argmax_p = standard_primitive("argmax", _argminmax_abstract_eval("argmax"),
                              _argminmax_lowering("max"))
argmin_p = standard_primitive("argmin", _argminmax_abstract_eval("argmin"),
                              _argminmax_lowering("min"))


def argmax(operand, axis: int, index_dtype):
    """Index of the largest element along `axis` (the first one on ties; the first NaN if any)."""
    index_dtype = dtypes.check_user_dtype(index_dtype, "argmax")
    return argmax_p.bind(operand, axes=(operator.index(axis),), index_dtype=index_dtype)


def argmin(operand, axis: int, index_dtype):
    """Index of the smallest element along `axis` (the first one on ties; the first NaN if any)."""
    index_dtype = dtypes.check_user_dtype(index_dtype, "argmin")
    return argmin_p.bind(operand, axes=(operator.index(axis),), index_dtype=index_dtype)


# ---------------------------------------------------------------------------------------------
# Differentiation and batching rules

def _index_dtype(size: int) -> np.dtype:
    if type(size) is shape_poly.DimExpr:  # a symbolic size: int32 indices, as JAX's
        return np.dtype(np.int32)
    return np.dtype(np.int32 if size < 2 ** 31 else np.int64)


def _take_along(x, indices, dimension: int):
    """x[..., indices[...], ...] along `dimension`, matching positions in the other
    dimensions (which `indices` shares with `x`)."""
    shape = core.get_aval(indices).shape
    others = tuple(d for d in range(len(shape)) if d != dimension)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(dimension,),
                                   start_index_map=(dimension,), operand_batching_dims=others,
                                   start_indices_batching_dims=others)
    return gather(x, lax.reshape(indices, shape + (1,)), dnums, (1,) * len(shape),
                  mode=GatherScatterMode.PROMISE_IN_BOUNDS)


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    """Sort an iota along with the operands to learn the permutation, then apply it to the
    tangents with a gather."""
    shape = core.get_aval(primals[0]).shape
    iota = broadcasted_iota(_index_dtype(shape[dimension]), shape, dimension)
    *sorted_primals, permutation = sort_p.bind(*primals, iota, dimension=dimension,
                                               is_stable=is_stable, num_keys=num_keys)
    sorted_tangents = [t if type(t) is ad.Zero else _take_along(t, permutation, dimension)
                       for t in tangents]
    return sorted_primals, sorted_tangents


def _sort_batch(args, dims, *, dimension, is_stable, num_keys):
    bdim, size = next((d, core.get_aval(x).shape[d]) for x, d in zip(args, dims)
                      if d is not None)
    args = [batching.matchaxis(x, d, bdim, size) for x, d in zip(args, dims)]
    outs = sort_p.bind(*args, dimension=dimension + (bdim <= dimension), is_stable=is_stable,
                       num_keys=num_keys)
    return outs, [bdim] * len(outs)


def _top_k_jvp(primals, tangents, *, k, axis):
    (x,), (t,) = primals, tangents
    values, indices = top_k_p.bind(x, k=k, axis=axis)
    return [values, indices], [_take_along(t, indices, axis),
                               ad.Zero.from_primal_value(indices)]


def _top_k_batch(args, dims, *, k, axis):
    (x,), (bdim,) = args, dims
    return top_k_p.bind(x, k=k, axis=axis + (bdim <= axis)), [bdim, bdim]


def _argminmax_batch(prim):
    def rule(args, dims, *, axes, index_dtype):
        (x,), (bdim,) = args, dims
        axis, = axes
        return (prim.bind(x, axes=(axis + (axis >= bdim),), index_dtype=index_dtype),
                bdim - (axis < bdim))
    return rule


ad.primitive_jvps[sort_p] = _sort_jvp
batching.primitive_batchers[sort_p] = _sort_batch
ad.primitive_jvps[top_k_p] = _top_k_jvp
batching.primitive_batchers[top_k_p] = _top_k_batch
for _prim in (argmax_p, argmin_p):
    ad.defjvp_zero(_prim)
    batching.primitive_batchers[_prim] = _argminmax_batch(_prim)
