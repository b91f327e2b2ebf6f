"""Segment reductions (`jax.ops.segment_sum` and friends).

Each is one scatter of `data` into `num_segments` rows that start at the reduction's
identity, so empty segments hold the identity and out-of-range ids follow `mode` (dropped by
default). With `bucket_size`, every run of `bucket_size` consecutive entries is reduced into
its own row block first and the blocks are then reduced, which keeps long sums accurate.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.export import shape_poly
from fluxion._src.lax import indexing as lax_indexing, structural
from fluxion._src.lax.indexing import GatherScatterMode
from fluxion._src.numpy import reductions, util
from fluxion._src.numpy.indexing import _scatter_update

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _identity(scatter_op, dtype):
    """The value an empty segment holds for `scatter_op` in `dtype`."""
    if scatter_op is lax_indexing.scatter_add:
        return 0
    if scatter_op is lax_indexing.scatter_mul:
        return 1
    smallest = scatter_op is lax_indexing.scatter_max
    if dtype == np.bool_:
        return not smallest
    if dtypes.issubdtype(dtype, np.integer):
        info = dtypes.iinfo(dtype)
        return info.min if smallest else info.max
    return -math.inf if smallest else math.inf


def _num_segments(num_segments, segment_ids):
    # JAX names segment_sum in this error whichever reduction asked.
    context = "segment_sum() `num_segments` argument."
    if num_segments is None:
        num_segments = reductions.max(segment_ids) + 1
    if type(num_segments) is shape_poly.DimExpr:  # a symbolic dimension (x.shape[1])
        return num_segments
    num_segments = operator.index(core.concrete_or_error(num_segments, context))
    if num_segments < 0:
        raise ValueError("num_segments must be non-negative.")
    return num_segments


def _segment_update(name, data, segment_ids, scatter_op, reducer, num_segments,
                    indices_are_sorted, unique_indices, bucket_size, mode, out_sharding):
    util.check_arraylike(name, data, segment_ids)
    mode = GatherScatterMode.FILL_OR_DROP if mode is None else mode
    data = util.as_array(data)
    segment_ids = util.as_array(segment_ids)
    shape, dtype = core.get_aval(data).shape, core.get_aval(data).dtype
    num_segments = _num_segments(num_segments, segment_ids)
    fill = _identity(scatter_op, dtype)
    kwargs = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                  mode=mode, wrap_negative_indices=False)
    if bucket_size is None:
        def compute():
            out = structural.full((num_segments,) + shape[1:], fill, dtype)
            return _scatter_update(out, segment_ids, data, scatter_op, **kwargs)
        if out_sharding is None:
            return compute()
        from fluxion._src.sharded_jit import apply_out_sharding
        return apply_out_sharding(compute, out_sharding)
    if out_sharding is not None:
        raise NotImplementedError(f"{name}: out_sharding with bucket_size")
    ids_shape = core.get_aval(segment_ids).shape
    num_buckets = -(-math.prod(ids_shape) // bucket_size)
    out = structural.full((num_buckets, num_segments) + shape[1:], fill, dtype)
    buckets = (structural.iota(np.int32, ids_shape[0]) if shape_poly.is_symbolic_dim(
        ids_shape[0]) else np.arange(ids_shape[0])) // bucket_size
    out = _scatter_update(out, (buckets, segment_ids[None, :]), data, scatter_op, **kwargs)
    return reducer(out, axis=0).astype(dtype)


def _check_unreduced(name, out_sharding):
    spec = getattr(out_sharding, "spec", out_sharding)
    if getattr(spec, "unreduced", None):
        raise NotImplementedError(f"unreduced for {name} is not yet supported.")


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """Sums of `data` within segments along its leading axis.

    Parameters
    ----------
    data : array, entries to sum; `data[i]` belongs to segment `segment_ids[i]`.
    segment_ids : integer array, the segment of each entry (need not be sorted).
    num_segments : int, number of segments (default `max(segment_ids) + 1`, which needs
        concrete ids: under jit pass it statically).
    indices_are_sorted, unique_indices : bool, promises about `segment_ids`.
    bucket_size : int, sum runs of this many entries separately first (accuracy).
    mode : GatherScatterMode or str, handling of ids outside `[0, num_segments)`
        (default: dropped).
    out_sharding : NamedSharding or PartitionSpec, the layout of the result.

    Returns
    -------
    Array of shape `(num_segments,) + data.shape[1:]` and `data`'s dtype; empty segments are 0.
    """
    return _segment_update("segment_sum", data, segment_ids, lax_indexing.scatter_add,
                           reductions.sum, num_segments, indices_are_sorted, unique_indices,
                           bucket_size, mode, out_sharding)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False,
                 unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """Products of `data` within segments along its leading axis; empty segments are 1.

    Parameters and result as `segment_sum`.
    """
    _check_unreduced("prod", out_sharding)
    return _segment_update("segment_prod", data, segment_ids, lax_indexing.scatter_mul,
                           reductions.prod, num_segments, indices_are_sorted, unique_indices,
                           bucket_size, mode, out_sharding)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """Maxima of `data` within segments along its leading axis; empty segments hold the
    dtype's lowest value (-inf for floats, False for bools).

    Parameters and result as `segment_sum`.
    """
    _check_unreduced("max", out_sharding)
    return _segment_update("segment_max", data, segment_ids, lax_indexing.scatter_max,
                           reductions.max, num_segments, indices_are_sorted, unique_indices,
                           bucket_size, mode, out_sharding)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """Minima of `data` within segments along its leading axis; empty segments hold the
    dtype's highest value (inf for floats, True for bools).

    Parameters and result as `segment_sum`.
    """
    _check_unreduced("min", out_sharding)
    return _segment_update("segment_min", data, segment_ids, lax_indexing.scatter_min,
                           reductions.min, num_segments, indices_are_sorted, unique_indices,
                           bucket_size, mode, out_sharding)
