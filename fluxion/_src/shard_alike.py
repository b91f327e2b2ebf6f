"""`shard_alike(x, y)`: the identity on `x` and `y`, asking XLA's partitioner to give each
pair of leaves the same sharding (an `sdy.sharding_group` of the two)."""
from __future__ import annotations

import itertools

from fluxion._src import ad, batching, core, tree_util
from fluxion._src.compiler import lowering

_next_group_id = itertools.count()


def shard_alike(x, y):
    """Shard `x` and `y` alike: returns ``(x, y)``, whose leaves XLA shards the same way.

    Parameters
    ----------
    x, y : pytrees of arrays with the same structure and leaf shapes.
    """
    x_flat, x_tree = tree_util.tree_flatten(x)
    y_flat, y_tree = tree_util.tree_flatten(y)
    if x_tree != y_tree:
        raise ValueError(f"Trees should be equal. Got x_tree: {x_tree}, y_tree: {y_tree}")
    for a, b in zip(x_flat, y_flat):
        sa, sb = core.get_aval(a).shape, core.get_aval(b).shape
        if sa != sb:
            raise ValueError(
                "The leaves shapes of `x` and `y` should match. Got `x` leaf shape:"
                f" {sa} and `y` leaf shape: {sb}. File an issue at"
                " https://github.com/jax-ml/jax/issues if you want this feature.")
    outs = [shard_alike_p.bind(a, b) for a, b in zip(x_flat, y_flat)]
    x_out = [o[0] for o in outs]
    y_out = [o[1] for o in outs]
    return tree_util.tree_unflatten(x_tree, x_out), tree_util.tree_unflatten(y_tree, y_out)


shard_alike_p = core.Primitive("shard_alike")
shard_alike_p.multiple_results = True
shard_alike_p.def_abstract_eval(lambda x, y: [x, y])


def _lowering(ctx, x, y):
    group = next(_next_group_id)
    for v in (x, y):
        ctx.op("sdy.sharding_group", [v], [], {"group_id": f"{group} : i64"})
    return [x, y]


lowering.register_lowering(shard_alike_p, _lowering)


def _transpose(cts, x, y):
    x_ct, y_ct = cts
    if type(x_ct) is ad.Zero or type(y_ct) is ad.Zero:
        return [x_ct, y_ct]
    return list(shard_alike(x_ct, y_ct))


ad.deflinear(shard_alike_p, _transpose)


def _batcher(args, dims):
    (x, y), (xd, yd) = args, dims
    if xd == yd:
        return shard_alike(x, y), (xd, yd)
    if xd is None:
        x = batching.broadcast_batch(x, y.shape[yd], yd)
        return shard_alike(x, y), (yd, yd)
    if yd is None:
        y = batching.broadcast_batch(y, x.shape[xd], xd)
        return shard_alike(x, y), (xd, xd)
    y = batching.moveaxis(y, yd, xd)
    return shard_alike(x, y), (xd, xd)


batching.primitive_batchers[shard_alike_p] = _batcher
