"""More of jax.lax: approx_max_k/approx_min_k (approx_top_k_p), ragged_dot, the patch and
locally connected convolutions, platform_dependent and composite.

On CPU, as in JAX, the approximate top-k is exact: it returns the k extreme entries along the
reduction dimension, in order.
"""
from __future__ import annotations

import math
import operator
from typing import Callable, NamedTuple, Sequence

import numpy as np

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.export.shape_poly import DimExpr, is_symbolic_shape
from fluxion._src.core import ShapedArray
from fluxion._src.lax import convolution, lax, structural
from fluxion._src.lax.base import standard_primitive
from fluxion._src.lax.sorting import top_k
from fluxion._src.lax.windowed import cumsum

__all__ = ["approx_max_k", "approx_min_k", "approx_top_k_p", "ragged_dot",
           "ragged_dot_general", "RaggedDotDimensionNumbers", "conv_general_dilated_patches",
           "conv_general_dilated_local", "platform_dependent", "composite"]


# ---------------------------------------------------------------------------------------------
# approx_max_k / approx_min_k

def _top_k_params(operand_aval, k, reduction_dimension):
    ndim = operand_aval.ndim
    if not -ndim <= reduction_dimension < ndim:
        raise ValueError(f"reduction_dimension {reduction_dimension} is out of bounds for an "
                         f"operand of rank {ndim}")
    dim = reduction_dimension % ndim
    if k < 0 or k > operand_aval.shape[dim]:  # (JAX's comparison, for a symbolic size too)
        raise ValueError(f"k must be between 0 and the size of the reduction dimension "
                         f"{operand_aval.shape[dim]}, got k={k}")
    return dim


def _approx_top_k_abstract_eval(operand, *, k, reduction_dimension, recall_target, is_max_k,
                                reduction_input_size_override, aggregate_to_topk):
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    if operand.ndim == 0:
        raise ValueError("approx_top_k operand must have rank at least 1")
    if not dtypes.is_float(operand.dtype):
        raise ValueError("operand must be a floating type")
    dim = _top_k_params(operand, k, reduction_dimension)
    if not 0.0 < recall_target <= 1.0:
        raise ValueError(f"recall_target should range in (0, 1], got {recall_target}")
    size = operand.shape[dim]
    if 0 <= reduction_input_size_override < size:
        raise ValueError(f"reduction_input_size_override {reduction_input_size_override} must "
                         f"be at least the size of the reduction dimension, {size}")
    shape = list(operand.shape)
    shape[dim] = _approx_output_size(size, operand.ndim, k, recall_target,
                                     reduction_input_size_override, aggregate_to_topk)
    return [ShapedArray(tuple(shape), operand.dtype), ShapedArray(tuple(shape), np.int32)]


def _approx_output_size(size, rank, k, recall_target, size_override, aggregate_to_topk):
    """How many entries the reduction keeps: k when aggregated, else the size XLA's
    approximate algorithm reduces to (its own formula, from jaxlib), which the CPU fallback
    returns sorted."""
    if aggregate_to_topk:
        return k
    if is_symbolic_shape((size, k)):
        raise NotImplementedError(
            f"approx_top_k with aggregate_to_topk=False not yet implemented when k ({k}) or "
            f"the reduction dimension's size ({size}) is symbolic: XLA's output size is "
            "computed from known sizes.")
    from jaxlib import _jax
    return _jax.approx_top_k_reduction_output_size(size, rank, k, recall_target, False,
                                                   size_override)[0]


def _approx_top_k_impl(operand, *, k, reduction_dimension, recall_target, is_max_k,
                       reduction_input_size_override, aggregate_to_topk):
    dim = reduction_dimension % operand.ndim
    kept = _approx_output_size(operand.shape[dim], operand.ndim, k, recall_target,
                               reduction_input_size_override, aggregate_to_topk)
    if is_max_k:
        return list(top_k(operand, kept, axis=dim))
    values, idx = top_k(lax.neg(operand), kept, axis=dim)
    return [lax.neg(values), idx]


approx_top_k_p = standard_primitive("approx_top_k", _approx_top_k_abstract_eval,
                                    lowering.lower_fun(_approx_top_k_impl),
                                    multiple_results=True)


def _select_along(t, idx, dim):
    """t gathered at `idx` along `dim` (idx has t's shape with size k at `dim`)."""
    n = t.shape[dim]
    t_moved = structural.expand_dims(t, (dim,))          # (..., 1, n, ...)
    idx_moved = structural.expand_dims(idx, (dim + 1,))  # (..., k, 1, ...)
    shape = list(idx.shape)
    shape.insert(dim + 1, n)
    iota = structural.broadcasted_iota(np.int32, tuple(shape), dim + 1)
    hit = lax.eq(iota, lax.broadcast_in_dim(idx_moved, tuple(shape), tuple(range(len(shape)))))
    picked = structural.select(hit, lax.broadcast_in_dim(t_moved, tuple(shape),
                                                         tuple(range(len(shape)))),
                               structural.full(tuple(shape), 0, t.dtype))
    return lax.reduce_sum(picked, (dim + 1,))


def _approx_top_k_jvp(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    values, idx = approx_top_k_p.bind(x, **params)
    if type(t) is ad.Zero:
        return [values, idx], [ad.Zero.from_primal_value(values), ad.Zero.from_primal_value(idx)]
    dim = params["reduction_dimension"] % x.ndim
    return [values, idx], [_select_along(t, idx, dim), ad.Zero.from_primal_value(idx)]


ad.primitive_jvps[approx_top_k_p] = _approx_top_k_jvp


def _approx_top_k_batch(args, dims, **params):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    rd = params["reduction_dimension"]
    params = dict(params, reduction_dimension=rd + 1 if rd >= 0 else rd)
    return approx_top_k_p.bind(x, **params), [0, 0]


batching.primitive_batchers[approx_top_k_p] = _approx_top_k_batch


def _approx_k(operand, k, reduction_dimension, recall_target, reduction_input_size_override,
              aggregate_to_topk, is_max_k):
    # an int, or symbolic (the size of another argument's axis)
    k = k if type(k) is DimExpr else operator.index(k)
    return list(approx_top_k_p.bind(
        operand, k=k, reduction_dimension=operator.index(reduction_dimension),
        recall_target=float(recall_target), is_max_k=is_max_k,
        reduction_input_size_override=operator.index(reduction_input_size_override),
        aggregate_to_topk=bool(aggregate_to_topk)))


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The k largest entries along `reduction_dimension` and their indices (exact on CPU)."""
    return _approx_k(operand, k, reduction_dimension, recall_target,
                     reduction_input_size_override, aggregate_to_topk, True)


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The k smallest entries along `reduction_dimension` and their indices (exact on CPU)."""
    return _approx_k(operand, k, reduction_dimension, recall_target,
                     reduction_input_size_override, aggregate_to_topk, False)


# ---------------------------------------------------------------------------------------------
# ragged_dot

class RaggedDotDimensionNumbers(NamedTuple):
    """Dimension numbers of `ragged_dot_general`: the dot's dimension numbers, the lhs ragged
    dimensions and the rhs group dimensions."""

    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: Sequence[int]
    rhs_group_dimensions: Sequence[int]


_RAGGED_DOT_DEFAULT = RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])


def _group_mask(group_sizes, m: int, group_offset):
    """(m, g) one-hot: row i belongs to the group whose [start, end) range holds i."""
    g = group_sizes.shape[0]
    ends = cumsum(group_sizes, 0)
    starts = lax.sub(ends, group_sizes)
    rows = structural.broadcasted_iota(group_sizes.dtype, (m, g), 0)
    starts_b = lax.broadcast_in_dim(starts, (m, g), (1,))
    ends_b = lax.broadcast_in_dim(ends, (m, g), (1,))
    mask = lax.bitwise_and(lax.ge(rows, starts_b), lax.lt(rows, ends_b))
    if group_offset is not None:
        cols = structural.broadcasted_iota(group_sizes.dtype, (m, g), 1)
        mask = lax.bitwise_and(mask, lax.ge(cols, lax.broadcast_in_dim(
            lax.reshape(group_offset, ()), (m, g), ())))
    return mask


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """Ragged matrix product: consecutive row groups of `lhs` (m, k), of sizes `group_sizes`
    (g,), each multiplied by its own `rhs[i]` (g, k, n); rows past the groups give zeros."""
    del out_sharding
    from fluxion._src.numpy.util import as_array
    lhs, rhs, group_sizes = as_array(lhs), as_array(rhs), as_array(group_sizes)
    if lhs.ndim != 2 or rhs.ndim != 3 or group_sizes.ndim != 1:
        raise TypeError(f"ragged_dot expects lhs (m, k), rhs (g, k, n) and group_sizes (g,), "
                        f"got shapes {lhs.shape}, {rhs.shape}, {group_sizes.shape}")
    m, k = lhs.shape
    g, k2, n = rhs.shape
    if k != k2 or group_sizes.shape[0] != g:
        raise TypeError(f"ragged_dot: incompatible shapes {lhs.shape}, {rhs.shape}, "
                        f"{group_sizes.shape}")
    if not dtypes.issubdtype(group_sizes.dtype, np.integer):
        raise TypeError(f"ragged_dot requires integer group_sizes, got dtype "
                        f"{group_sizes.dtype}")
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"ragged_dot requires operands of the same dtype, got {lhs.dtype} and "
                        f"{rhs.dtype}")
    out_dtype = lhs.dtype if preferred_element_type is None else np.dtype(
        preferred_element_type)
    mask = _group_mask(group_sizes, m, group_offset)
    # Every row times every group's matrix, then each row keeps its own group's product.
    per_group = lax.dot_general(lhs, rhs, (((1,), (1,)), ((), ())), precision=precision,
                                preferred_element_type=out_dtype)  # (m, g, n)
    keep = lax.broadcast_in_dim(mask, (m, g, n), (0, 1))
    zeros = structural.full((m, g, n), 0, per_group.dtype)
    return lax.reduce_sum(structural.select(keep, per_group, zeros), (1,))


def _remaining(rank: int, *taken) -> list:
    used = {d for dims in taken for d in dims}
    return [d for d in range(rank) if d not in used]


def _ragged_mode(lhs_rank: int, dn) -> tuple[str, int]:
    """('noncontracting' | 'contracting' | 'batch', the lhs ragged dimension)."""
    (l_contract, _), (l_batch, _) = dn.dot_dimension_numbers
    ragged = dn.lhs_ragged_dimensions[0]
    if ragged in l_contract:
        return "contracting", ragged
    if ragged in l_batch:
        return "batch", ragged
    return "noncontracting", ragged


def _ragged_prefix(mode: str, rank: int, ragged: int, batch, contract) -> list:
    """The operand dimensions a group_sizes array of rank > 1 has before its group axis."""
    batch, contract = list(batch), list(contract)
    if mode == "noncontracting":
        free = _remaining(rank, batch, contract)
        return batch + free[:free.index(ragged)]
    if mode == "contracting":
        return batch + contract[:contract.index(ragged)]
    return batch[:batch.index(ragged)]


def _check_ragged_dot_general(lhs, rhs, group_sizes, dn) -> str:
    """JAX's checks of ragged_dot_general's arguments (TypeErrors); returns the mode."""
    def in_range(d, rank, what, arg):
        if not 0 <= d < rank:
            raise TypeError(f"ragged_dot_general requires {what} numbers to be nonnegative and "
                            f"less than the number of axes of the {arg} value, got {d} for "
                            f"{arg} of rank {rank}.")
    if len(dn.lhs_ragged_dimensions) != 1:
        raise TypeError("ragged_dot_general expects exactly one lhs ragged dimension.")
    in_range(dn.lhs_ragged_dimensions[0], lhs.ndim, "lhs ragged dimension", "lhs")
    mode, ragged = _ragged_mode(lhs.ndim, dn)
    (l_contract, r_contract), (l_batch, r_batch) = dn.dot_dimension_numbers
    if group_sizes.ndim == 0:
        raise TypeError("expected rank of group_sizes to be >=1.")
    if group_sizes.ndim != 1:
        prefix = _ragged_prefix(mode, lhs.ndim, ragged, l_batch, l_contract)
        expected = tuple(lhs.shape[d] for d in prefix) + (group_sizes.shape[-1],)
        if tuple(group_sizes.shape) != expected:
            raise TypeError(f"expected group_sizes to have shape {expected}, got "
                            f"{tuple(group_sizes.shape)}.")
    groups = group_sizes.shape[-1]
    rhs_group = list(dn.rhs_group_dimensions)
    if mode != "noncontracting":
        if rhs_group:
            raise TypeError("ragged_dot_general requires zero group dimensions in the rhs when "
                            "lhs ragged dimension is contracting or batch.")
    else:
        if len(rhs_group) != 1:
            raise TypeError("ragged_dot_general requires exactly one rhs group dimension when "
                            "lhs ragged dimension is noncontracting.")
        in_range(rhs_group[0], rhs.ndim, "rhs group dimension", "rhs")
        if rhs_group[0] in r_batch or rhs_group[0] in r_contract:
            raise TypeError("ragged_dot_general requires rhs group dimension numbers to be "
                            "distinct from contracting and batch dimensions.")
        if rhs.shape[rhs_group[0]] != groups:
            raise TypeError(f"expected rhs group dimension size to be {groups}, got "
                            f"{rhs.shape[rhs_group[0]]}.")
    if not dtypes.issubdtype(group_sizes.dtype, np.integer):
        raise TypeError("ragged_dot_general requires that group_sizes.dtype is subtype of "
                        "np.integer.")
    return mode


def _expand_by_groups(x, group_sizes, ragged: int, prefix: Sequence[int]):
    """x with a leading group axis: entry g keeps the positions of the ragged dimension in
    group g (consecutive runs of group_sizes), zeros elsewhere. `prefix` are the dimensions of
    x matching the leading axes of a group_sizes of rank > 1."""
    shape = (group_sizes.shape[-1],) + tuple(x.shape)
    ends = cumsum(group_sizes, group_sizes.ndim - 1)
    starts = lax.sub(ends, group_sizes)
    where = tuple(1 + d for d in prefix) + (0,) if group_sizes.ndim > 1 else (0,)
    position = structural.broadcasted_iota(group_sizes.dtype, shape, 1 + ragged)
    inside = lax.bitwise_and(lax.ge(position, lax.broadcast_in_dim(starts, shape, where)),
                             lax.lt(position, lax.broadcast_in_dim(ends, shape, where)))
    wide = lax.broadcast_in_dim(x, shape, tuple(range(1, len(shape))))
    return structural.select(inside, wide, structural.full(shape, 0, x.dtype))


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers,
                       precision=None, preferred_element_type=None, group_offset=None,
                       out_sharding=None):
    """`ragged_dot` with explicit dimension numbers, in JAX's three modes.

    The lhs ragged dimension, split into consecutive groups of `group_sizes` (its last axis
    counts the groups; leading axes, if any, follow the lhs batch and outer dimensions):

    - non-contracting (rhs has one group dimension): each group of lhs rows is multiplied by
      its own slice of rhs, ``[b, m, k] x [g, b, k, n] -> [b, m, n]``;
    - contracting (no rhs group dimension): one product per group, summed over the group's
      part of the contraction, ``[b, m, k] x [b, k, n] -> [g, b, m, n]``;
    - batch: an ordinary batched product, ``[b, m, k] x [b, k, n] -> [b, m, n]``.
    """
    from fluxion._src.numpy.util import as_array
    lhs, rhs, group_sizes = as_array(lhs), as_array(rhs), as_array(group_sizes)
    dn = RaggedDotDimensionNumbers(
        tuple(tuple(tuple(int(d) for d in dims) for dims in pair)
              for pair in ragged_dot_dimension_numbers.dot_dimension_numbers),
        tuple(int(d) for d in ragged_dot_dimension_numbers.lhs_ragged_dimensions),
        tuple(int(d) for d in ragged_dot_dimension_numbers.rhs_group_dimensions))
    mode = _check_ragged_dot_general(lhs, rhs, group_sizes, dn)
    (l_contract, r_contract), (l_batch, r_batch) = dn.dot_dimension_numbers
    default = ((((1,), (1,)), ((), ())), (0,), (0,))
    if (dn.dot_dimension_numbers, dn.lhs_ragged_dimensions, dn.rhs_group_dimensions) == \
            default and lhs.ndim == 2 and rhs.ndim == 3 and group_sizes.ndim == 1:
        return ragged_dot(lhs, rhs, group_sizes, precision, preferred_element_type,
                          group_offset, out_sharding)
    if group_offset is not None:
        raise NotImplementedError("ragged_dot_general: group_offset is supported only in the "
                                  "ragged_dot layout (as in JAX, which supports it nowhere).")
    dot = lambda a, b, dims: lax.dot_general(a, b, dims, precision=precision,
                                             preferred_element_type=preferred_element_type,
                                             out_sharding=out_sharding)
    shift = lambda dims: tuple(d + 1 for d in dims)
    ragged = dn.lhs_ragged_dimensions[0]
    l_prefix = (_ragged_prefix(mode, lhs.ndim, ragged, l_batch, l_contract)
                if group_sizes.ndim > 1 else [])
    if mode == "batch":
        return dot(lhs, rhs, dn.dot_dimension_numbers)
    lhs_groups = _expand_by_groups(lhs, group_sizes, ragged, l_prefix)
    if mode == "noncontracting":
        # The group axis contracts with the rhs group dimension: each row meets its group.
        return dot(lhs_groups, rhs, ((shift(l_contract) + (0,),
                                      r_contract + (dn.rhs_group_dimensions[0],)),
                                     (shift(l_batch), r_batch)))
    r_ragged = r_contract[l_contract.index(ragged)]
    r_prefix = (_ragged_prefix(mode, rhs.ndim, r_ragged, r_batch, r_contract)
                if group_sizes.ndim > 1 else [])
    rhs_groups = _expand_by_groups(rhs, group_sizes, r_ragged, r_prefix)
    return dot(lhs_groups, rhs_groups, ((shift(l_contract), shift(r_contract)),
                                        ((0,) + shift(l_batch), (0,) + shift(r_batch))))


# ---------------------------------------------------------------------------------------------
# Patches and locally connected convolution

def _default_specs(ndim: int):
    """JAX's default layout (batch/feature dims first, then spatial) as spec strings."""
    spatial = "HWDUVXYZ"[:ndim - 2]
    return ("NC" + spatial, "OI" + spatial, "NC" + spatial)


def conv_general_dilated_patches(lhs, filter_shape: Sequence[int], window_strides, padding,
                                 lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                                 precision=None, preferred_element_type=None):
    """Extract the patches a convolution would see, flattened into the output feature
    dimension (C-major: input channel, then the filter positions in rhs_spec order)."""
    from fluxion._src.numpy.util import as_array
    lhs = as_array(lhs)
    filter_shape = tuple(operator.index(d) for d in filter_shape)
    if dimension_numbers is None:
        dimension_numbers = _default_specs(lhs.ndim)
    lhs_perm, rhs_perm, _ = convolution.conv_general_permutations(dimension_numbers)
    channels = lhs.shape[lhs_perm[1]]
    size = math.prod(filter_shape)
    ident = np.eye(size, dtype=lhs.dtype).reshape((size,) + filter_shape)
    canonical = np.concatenate([ident] * channels, axis=0)[:, None]  # (C*P, 1, *filter)
    rhs = np.transpose(canonical, np.argsort(rhs_perm))
    return convolution.conv_general_dilated(
        lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
        feature_group_count=channels, precision=precision,
        preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """Locally connected (unshared-weight) convolution: a separate filter at each output
    position. `rhs` has "I" = in_features * prod(filter_shape) and spatial dims equal to the
    output's."""
    from fluxion._src.numpy.util import as_array
    lhs, rhs = as_array(lhs), as_array(rhs)
    if dimension_numbers is None:
        dimension_numbers = _default_specs(lhs.ndim)
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers,
                                           precision=precision)
    _, rhs_perm, out_perm = convolution.conv_general_permutations(dimension_numbers)
    p = structural.transpose(patches, tuple(out_perm))  # (N, C*P, *S)
    w = structural.transpose(rhs, tuple(rhs_perm))      # (O, C*P, *S)
    spatial = p.shape[2:]
    flat = math.prod(spatial)
    p = lax.reshape(p, p.shape[:2] + (flat,))
    w = lax.reshape(w, w.shape[:2] + (flat,))
    out = lax.dot_general(p, w, (((1,), (1,)), ((2,), (2,))), precision=precision)  # (S, N, O)
    out = structural.transpose(out, (1, 2, 0))
    out = lax.reshape(out, out.shape[:2] + spatial)
    return structural.transpose(out, tuple(np.argsort(out_perm)))


# ---------------------------------------------------------------------------------------------
# platform_dependent and composite

def platform_dependent(*args, default: Callable | None = None, **per_platform: Callable):
    """Call the function given for the platform being compiled for (or `default`).

    fluxion compiles for one backend, so the branch is chosen for it when tracing, where JAX
    chooses when lowering; the results are the same.
    """
    from fluxion._src.api import default_backend
    platform = default_backend()
    aliases = {"cpu": ("cpu",), "gpu": ("cuda", "rocm", "gpu"), "cuda": ("cuda", "gpu"),
               "rocm": ("rocm", "gpu")}
    for name in aliases.get(platform, (platform,)):
        if name in per_platform:
            return per_platform[name](*args)
    if default is None:
        raise NotImplementedError(f"platform_dependent: translation rule for the branches "
                                  f"{tuple(per_platform)} not found for platform {platform} "
                                  "(and no default)")
    return default(*args)


def composite(decomposition: Callable, name: str, version: int = 0):
    """Mark `decomposition` as the composite op `name`. fluxion runs the decomposition itself
    (XLA on CPU does the same with a composite); the jaxpr shows its operations inline."""
    if not isinstance(name, str) or not name:
        raise ValueError("composite name must be a non-empty string")

    def call(*args, **attributes):
        # The operands and results are arrays of canonical dtypes, as when JAX traces the
        # decomposition: NumPy inputs must not run (and come back) as float64 NumPy arrays.
        from fluxion._src.numpy.util import as_array
        from fluxion._src.tree_util import tree_map
        out = decomposition(*tree_map(as_array, args), **attributes)
        return tree_map(as_array, out)

    call.__name__ = getattr(decomposition, "__name__", "composite")
    return call


del core


# ---------------------------------------------------------------------------------------------
# scaled_dot: block-scaled dot product

def _check_scale(side, operand_shape, scale_shape, contracting):
    for i, size in enumerate(operand_shape):
        if i in contracting:
            if size % scale_shape[i]:
                raise TypeError(f"{side} contracting dim {i} of size {size} must be divisible "
                                f"by its scale's dim size {scale_shape[i]}.")
            if size // scale_shape[i] < 2:
                raise TypeError(f"The ratio of {side} contracting dim {i} to its scale's dim "
                                f"size ({size // scale_shape[i]}) must be at least 2.")
        elif scale_shape[i] != size:
            raise TypeError(f"{side} dim {i} of size {size} does not match scale dim size "
                            f"{scale_shape[i]}.")


def _expand_scale(scale, operand_shape, contracting):
    """Each scale entry repeated over its block of the contracting dimensions."""
    for i in contracting:
        if scale.shape[i] != operand_shape[i]:
            block = operand_shape[i] // scale.shape[i]
            shape = list(scale.shape)
            shape.insert(i + 1, block)
            dims = tuple(d if d <= i else d + 1 for d in range(scale.ndim))
            scale = lax.broadcast_in_dim(scale, tuple(shape), dims)
            shape[i] *= block
            del shape[i + 1]
            scale = lax.reshape(scale, tuple(shape))
    return scale


def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None,
               preferred_element_type=None):
    """`(lhs * lhs_scale) @ (rhs * rhs_scale)` (a `dot_general`), each scale repeated over
    blocks of the contracting dimensions; operands and scales are taken in bfloat16 and the
    result is `preferred_element_type` (default bfloat16). Not differentiable, as in JAX."""
    from fluxion._src.numpy.util import as_array
    lhs, rhs = as_array(lhs), as_array(rhs)
    if dimension_numbers is None:
        if lhs.ndim < 2:
            raise TypeError("scaled_dot does not support 0-rank and 1-rank operands.")
        n = lhs.ndim
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    ranks = {lhs.ndim, rhs.ndim} | {np.ndim(s) for s in (lhs_scale, rhs_scale) if s is not None}
    if len(ranks) != 1:
        raise TypeError("All input tensors must have the same rank.")
    if len(lhs_batch) != len(rhs_batch):
        raise TypeError("LHS and RHS must have the same number of batch dimensions, got "
                        f"{len(lhs_batch)} and {len(rhs_batch)}.")
    for i, j in zip(lhs_contract, rhs_contract):
        if lhs.shape[i] != rhs.shape[j]:
            raise TypeError(f"LHS contracting dim {i} of size {lhs.shape[i]} does not match "
                            f"RHS contracting dim {j} of size {rhs.shape[j]}.")
    bf16 = np.dtype(dtypes.bfloat16)
    out_dtype = bf16 if preferred_element_type is None else np.dtype(preferred_element_type)
    sides = []
    for side, x, scale, contract in (("LHS", lhs, lhs_scale, lhs_contract),
                                     ("RHS", rhs, rhs_scale, rhs_contract)):
        x = lax.convert_element_type(x, bf16)
        if scale is not None:
            scale = as_array(scale)
            _check_scale(side, x.shape, scale.shape, contract)
            scale = _expand_scale(lax.convert_element_type(scale, bf16), x.shape, contract)
            x = lax.mul(x, scale)
        sides.append(x)
    return lax.dot_general(sides[0], sides[1], dimension_numbers,
                           preferred_element_type=out_dtype)


__all__.append("scaled_dot")


# ---------------------------------------------------------------------------------------------
# select_and_scatter: XLA's SelectAndScatter with arbitrary select and scatter computations

def _select_and_scatter_abstract_eval(operand, source, init_value, *, select_jaxpr,
                                      select_consts, scatter_jaxpr, scatter_consts,
                                      window_dimensions, window_strides, padding):
    from fluxion._src.lax.windowed import _window_output_shape
    ones = (1,) * len(window_dimensions)
    windows = _window_output_shape("select_and_scatter", operand, window_dimensions,
                                   window_strides, padding, ones, ones)
    if source.shape != windows:
        raise TypeError(f"select_and_scatter source shape {source.shape} must be the shape "
                        f"{windows} of the windows of operand shape {operand.shape}.")
    if init_value.shape != () or init_value.dtype != source.dtype:
        raise TypeError("select_and_scatter init_value must be a scalar of the source's dtype")
    return ShapedArray(operand.shape, source.dtype)


def _select_and_scatter_lowering(ctx, operand, source, init_value, *, select_jaxpr,
                                 select_consts, scatter_jaxpr, scatter_consts,
                                 window_dimensions, window_strides, padding):
    from fluxion._src.compiler.hlo import dense_i64, i64_array
    from fluxion._src.core import ClosedJaxpr
    scalar = ShapedArray((), operand.dtype)
    select = ctx.new_block([scalar, scalar])
    select.ret(ctx.lower_jaxpr(ClosedJaxpr(select_jaxpr, list(select_consts)), select.args,
                               select))
    source_scalar = ShapedArray((), source.dtype)
    scatter = ctx.new_block([source_scalar, source_scalar])
    scatter.ret(ctx.lower_jaxpr(ClosedJaxpr(scatter_jaxpr, list(scatter_consts)),
                                scatter.args, scatter))
    return ctx.op1("stablehlo.select_and_scatter", [operand, source, init_value],
                   ctx.avals_out[0],
                   {"window_dimensions": i64_array(window_dimensions),
                    "window_strides": i64_array(window_strides),
                    "padding": dense_i64(padding, (len(padding), 2))}, [select, scatter])


select_and_scatter_p = standard_primitive("select_and_scatter",
                                          _select_and_scatter_abstract_eval,
                                          _select_and_scatter_lowering)


def _select_and_scatter_batch(args, dims, **params):
    operand, source, init_value = args
    d_op, d_src, d_init = dims
    if d_init is not batching.not_mapped:
        raise NotImplementedError("select_and_scatter: a batched init_value is not supported")
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not batching.not_mapped)
    operand = batching.bdim_at_front(operand, d_op, size)
    source = batching.bdim_at_front(source, d_src, size)
    params = dict(params, window_dimensions=(1,) + tuple(params["window_dimensions"]),
                  window_strides=(1,) + tuple(params["window_strides"]),
                  padding=((0, 0),) + tuple(tuple(p) for p in params["padding"]))
    return select_and_scatter_p.bind(operand, source, init_value, **params), 0


batching.primitive_batchers[select_and_scatter_p] = _select_and_scatter_batch
__all__.append("select_and_scatter_p")


# ---------------------------------------------------------------------------------------------
# dce_sink: an equation with no outputs that dead-code elimination keeps

dce_sink_p = standard_primitive("dce_sink", lambda *avals, prevent_mlir_dce: [],
                                lambda ctx, *xs, prevent_mlir_dce: [], multiple_results=True)
dce_sink_p.has_side_effect = True


def _dce_sink_jvp(primals, tangents, **params):
    dce_sink_p.bind(*primals, **params)
    return [], []


def _dce_sink_batch(args, dims, **params):
    dce_sink_p.bind(*args, **params)
    return [], []


ad.primitive_jvps[dce_sink_p] = _dce_sink_jvp
batching.primitive_batchers[dce_sink_p] = _dce_sink_batch


def dce_sink(val, *, prevent_mlir_dce: bool = False):
    """Keep `val` (a pytree of arrays) alive in the jaxpr: the `dce_sink` equation has no
    outputs and survives dead-code elimination. It emits no StableHLO. Returns None."""
    from fluxion._src import tree_util
    from fluxion._src.numpy.util import as_array
    leaves = [as_array(x) for x in tree_util.tree_leaves(val)]
    dce_sink_p.bind(*leaves, prevent_mlir_dce=bool(prevent_mlir_dce))


__all__ += ["dce_sink", "dce_sink_p"]
