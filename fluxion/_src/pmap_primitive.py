"""`xla_pmap`: pmap as one equation of a larger program (under `jit`, `grad`, `vmap`, or
another `pmap`).

The equation holds the per-device body and how its operands and results map onto the pmap
axis. Applied to concrete values it runs as its own replicated executable (pmap.py). Inside
another program it lowers as older JAX's `_pmap_lowering` did: the whole program runs as
`num_replicas` = product of the pmap axis sizes, each replica slices its operands by its
index on the axis (from `replica_id`) and the results are all-gathered back, so collectives
inside use the replica groups of their axes (`lax/parallel_lowering.py`).
"""
from __future__ import annotations

import math

import numpy as np

from fluxion._src import ad, batching, core, staging
from fluxion._src.call_transforms import (batch_jaxpr, jvp_jaxpr, partial_eval_jaxpr,
                                          transpose_jaxpr)
from fluxion._src.compiler import lowering
from fluxion._src.lax import parallel, parallel_lowering, structural

xla_pmap_p = core.Primitive("xla_pmap")
xla_pmap_p.multiple_results = True


def _insert(aval, axis, size):
    if axis is None:
        return aval
    shape = list(aval.shape)
    shape.insert(axis, size)
    return aval.update(shape=tuple(shape))


def _abstract_eval(*avals, jaxpr, axis_name, axis_size, in_axes, out_axes, **_):
    return [_insert(a, ax, axis_size) for a, ax in zip(jaxpr.out_avals, out_axes)]


def _bound(axis_name, axis_size):
    return batching.extend_axis_env(axis_name, axis_size)


def _trace_body(fun, avals, axis_name, axis_size, origin):
    with _bound(axis_name, axis_size):
        return staging.trace_to_jaxpr(fun, list(avals), origin=origin)


def jaxpr_replicas(jaxpr) -> int:
    """How many replicas a program holding `jaxpr` needs: each pmap multiplies the replicas
    of its body by its axis size; elsewhere the largest need among sub-jaxprs wins."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    most = 1
    for eqn in jaxpr.eqns:
        if eqn.primitive is xla_pmap_p:
            most = max(most, eqn.params["axis_size"] * jaxpr_replicas(eqn.params["jaxpr"]))
        else:
            for sub in core.subjaxprs(eqn.params):
                most = max(most, jaxpr_replicas(sub))
    return most


def _impl(*args, **params):
    from fluxion._src import pmap
    return pmap.run_pmap_equation(args, params)


def _jvp(primals, tangents, *, jaxpr, axis_name, axis_size, in_axes, out_axes, **params):
    nonzero = [type(t) is not ad.Zero for t in tangents]
    with _bound(axis_name, axis_size):
        jvp_closed, out_nonzero = jvp_jaxpr(jaxpr, nonzero)
    nz_in = [a for a, nz in zip(in_axes, nonzero) if nz]
    nz_out = [a for a, nz in zip(out_axes, out_nonzero) if nz]
    outs = xla_pmap_p.bind(*primals, *[t for t in tangents if type(t) is not ad.Zero],
                           jaxpr=jvp_closed, axis_name=axis_name, axis_size=axis_size,
                           in_axes=(*in_axes, *nz_in), out_axes=(*out_axes, *nz_out), **params)
    n = len(out_axes)
    nz_iter = iter(outs[n:])
    out_avals = [_insert(a, ax, axis_size) for a, ax in zip(jaxpr.out_avals, out_axes)]
    tangents_out = [next(nz_iter) if nz else ad.Zero(ad.tangent_aval(a))
                    for a, nz in zip(out_avals, out_nonzero)]
    return outs[:n], tangents_out


def _partial_eval(trace, prim, args, params):
    """A known pmap (run now) and an unknown one (staged): residuals differ per device, so
    they leave the known pmap mapped on axis 0 and enter the unknown one mapped there."""
    jaxpr, axis_name, axis_size = params["jaxpr"], params["axis_name"], params["axis_size"]
    in_axes, out_axes = params["in_axes"], params["out_axes"]
    unknown = [trace.is_unknown(x) for x in args]
    with _bound(axis_name, axis_size):
        known_jaxpr, unknown_jaxpr, out_unknown, n_res = partial_eval_jaxpr(jaxpr, unknown)
    rest = {k: v for k, v in params.items() if k not in ("jaxpr", "in_axes", "out_axes")}
    known_args = [x for x, u in zip(args, unknown) if not u]
    with core.set_current_trace(trace.parent):
        known_results = xla_pmap_p.bind(
            *known_args, jaxpr=known_jaxpr,
            in_axes=tuple(a for a, u in zip(in_axes, unknown) if not u),
            out_axes=tuple([a for a, u in zip(out_axes, out_unknown) if not u] + [0] * n_res),
            **rest)
    n_known_out = out_unknown.count(False)
    known_outs, residuals = known_results[:n_known_out], known_results[n_known_out:]
    unknown_outs = trace.stage(xla_pmap_p, list(residuals) + [x for x, u in zip(args, unknown) if u],
                               dict(rest, jaxpr=unknown_jaxpr,
                                    in_axes=tuple([0] * n_res + [a for a, u in zip(in_axes, unknown) if u]),
                                    out_axes=tuple(a for a, u in zip(out_axes, out_unknown) if u)))
    known_iter, unknown_iter = iter(known_outs), iter(unknown_outs)
    return [next(unknown_iter) if u else next(known_iter) for u in out_unknown]


def _transpose(cts, *args, jaxpr, axis_name, axis_size, in_axes, out_axes, **params):
    """As JAX's pmap (a shard_map without replication checks): the cotangent of an unmapped
    result is split evenly over the devices, and that of an unmapped operand is summed over
    them."""
    linear = [ad.is_undefined_primal(a) for a in args]
    ct_avals = [ad.tangent_aval(a) for a in jaxpr.out_avals]
    with _bound(axis_name, axis_size):
        transposed = transpose_jaxpr(jaxpr, linear, ct_avals)
    nonlin = [a for a, l in zip(args, linear) if not l]
    lin_axes = tuple(a for a, l in zip(in_axes, linear) if l)
    n_nonlin = len(nonlin)

    def body(*xs):
        ins, cts_in = list(xs[:n_nonlin]), list(xs[n_nonlin:])
        scaled = [ct / np.asarray(axis_size, ct.dtype)
                  if ax is None and axis_size > 1 and np.issubdtype(ct.dtype, np.inexact) else ct
                  for ct, ax in zip(cts_in, out_axes)]
        outs = core.eval_jaxpr(transposed.jaxpr, transposed.consts, *ins, *scaled)
        return [parallel.psum(o, axis_name) if ax is None else o for o, ax in zip(outs, lin_axes)]

    wrapped = _trace_body(body, transposed.in_avals, axis_name, axis_size, "pmap transpose")
    cts = [ad.instantiate(ct) for ct in cts]
    outs = xla_pmap_p.bind(*nonlin, *cts, jaxpr=wrapped, axis_name=axis_name,
                           axis_size=axis_size,
                           in_axes=(*(a for a, l in zip(in_axes, linear) if not l), *out_axes),
                           out_axes=lin_axes, **params)
    out_iter = iter(outs)
    return [next(out_iter) if l else None for l in linear]


def _batch(trace, vals, dims, *, jaxpr, axis_name, axis_size, in_axes, out_axes, **params):
    """vmap of pmap maps an extra leading dimension inside the body (batch dimensions move
    to 0, so the pmap axes shift by one)."""
    vals = [v if d is None else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    in_dims = tuple(None if d is None else 0 for d in dims)
    with _bound(axis_name, axis_size):
        batched, out_batched = batch_jaxpr(jaxpr, in_dims, trace.axis_name, trace.axis_size)
    new_in = tuple(a if d is None or a is None else a + 1 for a, d in zip(in_axes, in_dims))
    new_out = tuple(a if not b or a is None else a + 1 for a, b in zip(out_axes, out_batched))
    outs = xla_pmap_p.bind(*vals, jaxpr=batched, axis_name=axis_name, axis_size=axis_size,
                           in_axes=new_in, out_axes=new_out, **params)
    return outs, [0 if b else None for b in out_batched]


def _lowering(ctx, *args, jaxpr, axis_name, axis_size, in_axes, out_axes, **_):
    """Each replica takes its slice of the mapped operands and runs the body; the mapped
    results are gathered from the replicas of the axis."""
    if parallel_lowering.in_partitions():
        raise ValueError("pmap inside shard_map is not supported: the shard_map's devices are "
                         "already split among its mesh axes (JAX raises ValueError too)")
    axes = parallel_lowering.current_axes()
    total = math.prod(s for _, s in axes)
    named = [(n, s) for n, s in axes if n is not parallel_lowering.EXTRA_REPLICAS]
    outer = math.prod(s for _, s in named)
    inner = jaxpr_replicas(jaxpr)
    if total % (outer * axis_size * inner):
        if total == 1:
            raise ValueError("pmap inside a jit with in_shardings/out_shardings or sharded "
                             "arguments is not supported: the jit is partitioned over its mesh "
                             "(JAX raises ValueError, incompatible devices)")
        raise ValueError(f"the pmaps in one jit must have sizes that divide each other: a pmap "
                         f"of size {axis_size} cannot be laid out on the {total} devices the "
                         "jit runs on (set by its largest pmap)")
    extra = total // (outer * axis_size)
    new_axes = named + [(axis_name, axis_size)]

    def per_replica(*xs):
        idx = parallel.axis_index(axis_name)
        ins = [x if a is None else structural.dynamic_index_in_dim(
                   x, idx, a, keepdims=False, allow_negative_indices=False)
               for x, a in zip(xs, in_axes)]
        outs = core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *ins)
        return [o if a is None else parallel.all_gather(o, axis_name, axis=a, tiled=False)
                for o, a in zip(outs, out_axes)]

    with batching.bind_axes(new_axes):
        closed = staging.trace_to_jaxpr(per_replica, list(ctx.avals_in), origin="pmap")
        with parallel_lowering.replica_axes(new_axes + [(parallel_lowering.EXTRA_REPLICAS, extra)]):
            return lowering.lower_jaxpr_into(ctx.block, closed, list(args))


def _pp_rule(eqn, context):
    inner = eqn.params["jaxpr"].jaxpr
    if id(inner) not in context.shared_jaxprs:
        context.suggest_same_names(inner.invars, eqn.invars)
    others = sorted(k for k in eqn.params if k != "name")
    return core.pp_eqn_default(eqn, context, ["name", *others])


xla_pmap_p.def_impl(_impl)
xla_pmap_p.def_abstract_eval(_abstract_eval)
ad.primitive_jvps[xla_pmap_p] = _jvp
ad.partial_eval_rules[xla_pmap_p] = _partial_eval
ad.primitive_transposes[xla_pmap_p] = _transpose
batching.trace_rules[xla_pmap_p] = _batch
lowering.register_lowering(xla_pmap_p, _lowering)
core.pp_eqn_rules[xla_pmap_p] = _pp_rule
