"""Collectives over a pmap axis lowered to XLA cross-replica collectives.

While `pmap` lowers its body, `replica_axes` names the axes that are XLA replicas (outermost
first; replica id = row-major index over them). A collective over such an axis becomes
`stablehlo.all_reduce` / `all_gather` / `all_to_all` / `collective_permute` / `replica_id`
with the replica groups of that axis.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from fluxion._src import dtypes
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray
from fluxion._src.lax import parallel
from fluxion._src.lax.elementwise import emit_max_min

_state = threading.local()

# The name of the anonymous innermost replica axis: the replicas of a program beyond the
# product of its pmap axes (a jit holding pmaps of different sizes, or the inner replicas of a
# pmap whose body holds another pmap). No collective names it.
EXTRA_REPLICAS = type("ExtraReplicas", (), {"__repr__": lambda self: "<extra replicas>"})()


def _axes() -> list:
    return getattr(_state, "axes", [])


@contextlib.contextmanager
def replica_axes(axes, partitions: bool = False, manual=None):
    """Lower collectives over these (name, size) axes as cross-replica collectives; with
    `partitions`, as collectives across the partitions of an SPMD program (shard_map inside
    a partitioned program: global device ids, channel handles, `partition_id`), of which the
    axes named in `manual` (default all) are manual and the others left to the partitioner."""
    old = _axes(), getattr(_state, "partitions", False), getattr(_state, "manual", None)
    _state.axes = list(axes)
    _state.partitions = partitions
    _state.manual = None if manual is None else tuple(manual)
    try:
        yield
    finally:
        _state.axes, _state.partitions, _state.manual = old


def current_axes() -> list:
    """The (name, size) replica axes of the program being lowered, outermost first."""
    return list(_axes())


def in_partitions() -> bool:
    return getattr(_state, "partitions", False)


def in_replicated_program() -> bool:
    """Whether the program being lowered runs as several replicas (a pmap)."""
    return bool(_axes()) and not in_partitions()


def _cross_partition_attrs(global_ids: bool = True) -> dict:
    """The attributes that make a collective span partitions rather than replicas."""
    if not getattr(_state, "partitions", False):
        return {}
    _state.channel = getattr(_state, "channel", 0) + 1
    attrs = {"channel_handle": f"#stablehlo.channel_handle<handle = {_state.channel}, type = 1>"}
    if global_ids:
        attrs["use_global_device_ids"] = "unit"
    return attrs


def _groups(axis_name, axis_index_groups=None) -> list[list[int]]:
    """Replica groups for collectives over `axis_name` (a name or tuple of names); with
    `axis_index_groups`, each is split into those groups of its indices along the axes."""
    names = parallel._names(axis_name)
    axes = _axes()
    known = [n for n, _ in axes]
    for n in names:
        if n not in known:
            raise NotImplementedError(
                f"collective over axis {n!r} can only be used inside a transformation that binds "
                "that axis name (vmap or pmap with axis_name=...).")
    sizes = [s for _, s in axes]
    ids = np.arange(int(np.prod(sizes))).reshape(sizes)
    pos = [known.index(n) for n in names]
    rest = [i for i in range(len(axes)) if i not in pos]
    size = int(np.prod([sizes[i] for i in pos]))
    grouped = np.transpose(ids, rest + pos).reshape(-1, size).tolist()
    if axis_index_groups is None:
        return grouped
    covered = sorted(i for g in axis_index_groups for i in g)
    if covered != list(range(size)):
        # XLA's verifier would reject the groups with an internal error
        raise ValueError(f"axis_index_groups {[list(g) for g in axis_index_groups]} must cover "
                         f"the indices of axis {axis_name!r} (size {size}) exactly once")
    return [[row[i] for i in g] for row in grouped for g in axis_index_groups]


def _groups_attr(groups) -> str:
    """The replica_groups attribute; uneven groups are padded with -1, as JAX does."""
    width = max(len(g) for g in groups)
    rows = ", ".join("[" + ", ".join(str(i) for i in [*g, *[-1] * (width - len(g))]) + "]"
                     for g in groups)
    return f"dense<[{rows}]> : tensor<{len(groups)}x{width}xi64>"


_REDUCERS = {"psum": "stablehlo.add", "pmax": "stablehlo.maximum", "pmin": "stablehlo.minimum"}


def _all_reduce_rule(kind):
    def rule(ctx, x, *, axis_name, axis_index_groups=None):
        groups = _groups(axis_name, axis_index_groups)
        op = _REDUCERS[kind]
        dtype = x.dtype
        if dtype == np.bool_:
            op = {"stablehlo.add": "stablehlo.or", "stablehlo.maximum": "stablehlo.or",
                  "stablehlo.minimum": "stablehlo.and"}[op]
        scalar = ShapedArray((), dtype)
        region = ctx.new_block([scalar, scalar])
        if kind != "psum" and dtypes.is_complex(dtype):
            region.ret([emit_max_min(region, *region.args, kind[1:])])
        else:
            region.ret([region.op1(op, [region.args[0], region.args[1]], scalar)])
        return ctx.op1("stablehlo.all_reduce", [x], x.aval,
                       {"replica_groups": _groups_attr(groups), **_cross_partition_attrs()},
                       [region])
    return rule


def _axis_index_rule(ctx, *, axis_name):
    axes = _axes()
    known = [n for n, _ in axes]
    _groups(axis_name)
    partitions = getattr(_state, "partitions", False)
    manual = getattr(_state, "manual", None)
    auto = [n for n in known if manual is not None and n not in manual]
    b = ctx
    if partitions and auto:
        # XLA's partitioner rejects partition_id where some axes are automatic (its value
        # differs along them); as JAX does, read it in a region manual over those axes too.
        b = ctx.new_block([])
    which = "partition_id" if partitions else "replica_id"
    rid = b.op1(f"stablehlo.{which}", [], ShapedArray((), np.uint32))
    idx = b.convert(rid, np.int32)
    pos = known.index(axis_name)
    inner = int(np.prod([s for _, s in axes[pos + 1:]]))
    if inner > 1:
        idx = b.div(idx, b.constant(np.int32(inner), np.int32))
    size = axes[pos][1]
    if pos > 0:
        idx = b.rem(idx, b.constant(np.int32(size), np.int32))
    if b is ctx:
        return idx
    b.ret([idx], op_name="sdy.return")
    names = ", ".join(f'"{n}"' for n in auto)
    (out,) = ctx.op("sdy.manual_computation", [], [ShapedArray((), np.int32)],
                    {"in_shardings": "#sdy.sharding_per_value<[]>",
                     "out_shardings": "#sdy.sharding_per_value<[<@mesh, []>]>",
                     "manual_axes": f"#sdy<manual_axes{{{names}}}>"}, [b])
    return out


def _all_gather_rule(ctx, x, *, axis_name, axis, tiled, axis_index_groups=None):
    groups = _groups(axis_name, axis_index_groups)
    size = len(groups[0])
    if not tiled:
        shape = list(x.shape)
        shape.insert(axis, 1)
        x = ctx.reshape(x, tuple(shape))
    out_shape = list(x.shape)
    out_shape[axis] *= size
    return ctx.op1("stablehlo.all_gather", [x], ShapedArray(tuple(out_shape), x.dtype),
                   {"all_gather_dim": f"{axis} : i64", "replica_groups": _groups_attr(groups),
                    **_cross_partition_attrs()})


def _ppermute_rule(ctx, x, *, axis_name, perm):
    groups = _groups(axis_name)
    pairs = [(g[s], g[t]) for g in groups for s, t in perm]
    if not pairs:
        return ctx.broadcast(ctx.constant(np.zeros((), x.dtype), x.dtype), x.shape)
    text = ", ".join(f"[{a}, {b}]" for a, b in pairs)
    return ctx.op1("stablehlo.collective_permute", [x], x.aval,
                   {"source_target_pairs": f"dense<[{text}]> : tensor<{len(pairs)}x2xi64>",
                    **_cross_partition_attrs(global_ids=False)})


def _all_to_all_rule(ctx, x, *, axis_name, split_axis, concat_axis, tiled, axis_index_groups=None):
    groups = _groups(axis_name, axis_index_groups)
    size = len(groups[0])
    attrs = {"replica_groups": _groups_attr(groups), "split_count": f"{size} : i64",
             **_cross_partition_attrs(global_ids=False)}
    if tiled:
        shape = list(x.shape)
        shape[split_axis] //= size
        shape[concat_axis] *= size
        return ctx.op1("stablehlo.all_to_all", [x], ShapedArray(tuple(shape), x.dtype),
                       {"split_dimension": f"{split_axis} : i64",
                        "concat_dimension": f"{concat_axis} : i64", **attrs})
    # Exchange along the split axis in place: afterwards it indexes the source example.
    y = ctx.op1("stablehlo.all_to_all", [x], x.aval,
                {"split_dimension": f"{split_axis} : i64",
                 "concat_dimension": f"{split_axis} : i64", **attrs})
    perm = list(range(x.aval.ndim))
    perm.insert(concat_axis, perm.pop(split_axis))
    return ctx.transpose(y, perm)


lowering.register_lowering(parallel.psum_p, _all_reduce_rule("psum"))
lowering.register_lowering(parallel.pmax_p, _all_reduce_rule("pmax"))
lowering.register_lowering(parallel.pmin_p, _all_reduce_rule("pmin"))
lowering.register_lowering(parallel.axis_index_p, _axis_index_rule)
lowering.register_lowering(parallel.all_gather_p, _all_gather_rule)
lowering.register_lowering(parallel.ppermute_p, _ppermute_rule)
lowering.register_lowering(parallel.all_to_all_p, _all_to_all_rule)
