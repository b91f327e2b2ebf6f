"""`shard_map` as one equation of a larger program (under `jit`, `grad`, `vmap`).

`shard_map_p` holds the per-block jaxpr, the mesh, the specs and the mesh axes the body is
manual over (`manual_axes`, mesh order). It lowers to Shardy's `sdy.manual_computation`
inside a partitioned module (sharded_jit.py): the body is the per-device program along the
manual axes, its collectives span partitions; along the other axes XLA's partitioner splits
the body's (whole) values. An eager call runs as a one-equation partitioned program.
"""
from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

from fluxion._src import ad, batching, core, staging
from fluxion._src.call_transforms import batch_jaxpr, jvp_jaxpr, transpose_jaxpr
from fluxion._src.compiler import lowering
from fluxion._src.lax import parallel, parallel_lowering
from fluxion._src.mesh import PartitionSpec
from fluxion._src.batching import bind_axes
from fluxion._src import sharded_jit
from fluxion._src.sharding_impls import NamedSharding

shard_map_p = core.Primitive("shard_map")
shard_map_p.multiple_results = True


def _axes(mesh, manual_axes=None):
    """The (name, size) axes the body binds: the manual ones (all mesh axes by default)."""
    names = mesh.axis_names if manual_axes is None else manual_axes
    return [(a, mesh.shape[a]) for a in names]


class _ManualContext(threading.local):
    def __init__(self):
        self.axes: tuple = ()


_manual_context = _ManualContext()


@contextlib.contextmanager
def inside_body(mesh, manual_axes):
    """Trace or transform a shard_map body: bind its manual axes in the named-axis environment
    and record them as manual for the shard_maps nested in it."""
    outer = _manual_context.axes
    _manual_context.axes = outer + tuple(a for a in manual_axes if a not in outer)
    try:
        with bind_axes(_axes(mesh, manual_axes)):
            yield
    finally:
        _manual_context.axes = outer


def newly_manual(manual_axes) -> tuple:
    """The axes of `manual_axes` that no enclosing shard_map body already makes manual (JAX's
    `newly_manual_axes`): a nested shard_map's specs, transposition and residuals are over
    these alone; along the others each of its calls already works on one block."""
    return tuple(a for a in manual_axes if a not in _manual_context.axes)


def _global_aval(aval, spec, mesh):
    shape = list(aval.shape)
    for d in range(len(shape)):
        shape[d] *= math.prod(mesh.shape[a] for a in spec.axes_of(d))
    return aval.update(shape=tuple(shape))


def _unmentioned(mesh, spec, manual_axes) -> tuple:
    """The manual axes `spec` leaves out (the value is the same along them)."""
    used = set(spec.used_axes())
    return tuple(a for a in manual_axes if a not in used)


def _abstract_eval(*avals, jaxpr, mesh, in_specs, out_specs, manual_axes):
    return [_global_aval(a, s, mesh) for a, s in zip(jaxpr.out_avals, out_specs)]


def _trace_body(fun, avals, mesh, manual_axes, origin):
    with inside_body(mesh, manual_axes):
        return staging.trace_to_jaxpr(fun, list(avals), origin=origin)


def _jvp(primals, tangents, *, jaxpr, mesh, in_specs, out_specs, manual_axes):
    nonzero = [type(t) is not ad.Zero for t in tangents]
    with inside_body(mesh, manual_axes):
        jvp_closed, out_nonzero = jvp_jaxpr(jaxpr, nonzero)
    nz_specs = [s for s, nz in zip(in_specs, nonzero) if nz]
    out_nz_specs = [s for s, nz in zip(out_specs, out_nonzero) if nz]
    outs = shard_map_p.bind(*primals, *[t for t in tangents if type(t) is not ad.Zero],
                            jaxpr=jvp_closed, mesh=mesh, in_specs=(*in_specs, *nz_specs),
                            out_specs=(*out_specs, *out_nz_specs), manual_axes=manual_axes)
    n = len(out_specs)
    nz_iter = iter(outs[n:])
    out_avals = _abstract_eval(jaxpr=jaxpr, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                               manual_axes=manual_axes)
    tangents_out = [next(nz_iter) if nz else ad.Zero(ad.tangent_aval(a))
                    for a, nz in zip(out_avals, out_nonzero)]
    return outs[:n], tangents_out


def _transpose(cts, *args, jaxpr, mesh, in_specs, out_specs, manual_axes):
    """As JAX does without replication checks: output cotangents are divided by the size of
    the manual axes their spec leaves out (each device holds a copy), and the cotangents of
    inputs whose spec leaves manual axes out are summed over them. Auto axes need nothing:
    along them the body works on whole values."""
    linear = [ad.is_undefined_primal(a) for a in args]
    ct_avals = [ad.tangent_aval(a) for a in jaxpr.out_avals]
    with inside_body(mesh, manual_axes):
        transposed = transpose_jaxpr(jaxpr, linear, ct_avals)
    nonlin = [a for a, l in zip(args, linear) if not l]
    nonlin_specs = [s for s, l in zip(in_specs, linear) if not l]
    lin_specs = [s for s, l in zip(in_specs, linear) if l]
    n_nonlin = len(nonlin)

    def body(*xs):
        ins, cts_in = list(xs[:n_nonlin]), list(xs[n_nonlin:])
        scaled = []
        for ct, spec in zip(cts_in, out_specs):
            k = math.prod(mesh.shape[a] for a in _unmentioned(mesh, spec, manual_axes))
            scaled.append(ct / np.asarray(k, ct.dtype) if k > 1 and
                          np.issubdtype(ct.dtype, np.inexact) else ct)
        outs = core.eval_jaxpr(transposed.jaxpr, transposed.consts, *ins, *scaled)
        summed = []
        for o, spec in zip(outs, lin_specs):
            over = _unmentioned(mesh, spec, manual_axes)
            summed.append(parallel.psum(o, over) if over else o)
        return summed

    wrapped = _trace_body(body, [*transposed.in_avals], mesh, manual_axes, "shard_map transpose")
    cts = [ad.instantiate(ct) for ct in cts]
    outs = shard_map_p.bind(*nonlin, *cts, jaxpr=wrapped, mesh=mesh,
                            in_specs=(*nonlin_specs, *out_specs), out_specs=tuple(lin_specs),
                            manual_axes=manual_axes)
    out_iter = iter(outs)
    return [next(out_iter) if l else None for l in linear]


def _batch(trace, vals, dims, *, jaxpr, mesh, in_specs, out_specs, manual_axes):
    vals = [v if d is None else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    in_dims = tuple(None if d is None else 0 for d in dims)
    with inside_body(mesh, manual_axes):
        batched, out_batched = batch_jaxpr(jaxpr, in_dims, trace.axis_name, trace.axis_size)
    specs = tuple(s if d is None else PartitionSpec(None, *s) for s, d in zip(in_specs, in_dims))
    ospecs = tuple(PartitionSpec(None, *s) if b else s for s, b in zip(out_specs, out_batched))
    outs = shard_map_p.bind(*vals, jaxpr=batched, mesh=mesh, in_specs=specs, out_specs=ospecs,
                            manual_axes=manual_axes)
    return outs, [0 if b else None for b in out_batched]


def _per_value(specs, avals, open_dims: bool) -> str:
    """Shardy's per-value shardings of `specs`; with `open_dims` (some mesh axes stay
    automatic) every dimension is open (`?`), so the partitioner may also split it over them."""
    texts = []
    for spec, aval in zip(specs, avals):
        dims = []
        for d in range(len(aval.shape)):
            names = [f'"{a}"' for a in spec.axes_of(d)] + (["?"] if open_dims else [])
            dims.append("{" + ", ".join(names) + "}")
        texts.append(f"<@mesh, [{', '.join(dims)}]>")
    return "#sdy.sharding_per_value<[" + ", ".join(texts) + "]>"


def _lowering_rule(ctx, *args, jaxpr, mesh, in_specs, out_specs, manual_axes):
    program_mesh = getattr(sharded_jit._lowering, "mesh", None)
    if program_mesh is None or program_mesh.shape_tuple != mesh.shape_tuple:
        raise NotImplementedError("shard_map can only be lowered inside a program partitioned "
                                  "over its mesh")
    region = ctx.new_block(jaxpr.in_avals)
    # Inside a shard_map body (nesting), the enclosing one's manual axes stay manual and this
    # one makes the rest of its axes manual. Collective groups are partition ids over the
    # whole mesh.
    outer = getattr(sharded_jit._lowering, "manual", ())
    newly = tuple(a for a in manual_axes if a not in outer)
    all_manual = tuple(a for a in mesh.axis_names if a in outer or a in manual_axes)
    sharded_jit._lowering.manual = all_manual
    try:
        with parallel_lowering.replica_axes(_axes(mesh), partitions=True, manual=all_manual), \
                bind_axes(_axes(mesh, manual_axes)):
            outs = lowering.lower_jaxpr_into(region, jaxpr, region.args)
    finally:
        sharded_jit._lowering.manual = outer
    region.ret(outs, op_name="sdy.return")
    partial = len(all_manual) < len(mesh.axis_names)
    names = ", ".join(f'"{a}"' for a in newly)
    attrs = {"in_shardings": _per_value(in_specs, ctx.avals_in, partial),
             "out_shardings": _per_value(out_specs, ctx.avals_out, partial),
             "manual_axes": f"#sdy<manual_axes{{{names}}}>"}
    return ctx.op("sdy.manual_computation", list(args), list(ctx.avals_out), attrs, [region])


def _discharge(mask, vals, *, jaxpr, mesh, in_specs, out_specs, manual_axes):
    """Refs among the operands: their values go in with their specs, the body's final values
    of them come out with the same specs."""
    from fluxion._src.state.discharge import discharge_state
    body_mask = [bool(m) for m in mask]
    with inside_body(mesh, manual_axes):
        body = discharge_state(jaxpr.jaxpr, jaxpr.consts, body_mask)
    ref_specs = tuple(s for s, m in zip(in_specs, body_mask) if m)
    outs = shard_map_p.bind(*vals, jaxpr=body, mesh=mesh, in_specs=in_specs,
                            out_specs=tuple(out_specs) + ref_specs, manual_axes=manual_axes)
    n = len(out_specs)
    finals = iter(outs[n:])
    return [next(finals) if m else None for m in body_mask], outs[:n]


shard_map_p.def_abstract_eval(_abstract_eval)
ad.primitive_jvps[shard_map_p] = _jvp
ad.primitive_transposes[shard_map_p] = _transpose
batching.trace_rules[shard_map_p] = _batch
lowering.register_lowering(shard_map_p, _lowering_rule)


def _register_discharge():
    from fluxion._src.state import discharge, transform_rules
    discharge.discharge_rules[shard_map_p] = lambda mask, vals, params: _discharge(
        mask, vals, **params)
    transform_rules._wrap_jvp(shard_map_p)
    transform_rules._wrap_batch(shard_map_p)


_register_discharge()
sharded_jit.mesh_primitives[shard_map_p] = lambda params: NamedSharding(params["mesh"],
                                                                        PartitionSpec())


def _partial_eval(trace, prim, args, params):
    """Split into a known shard_map (run now) and an unknown one (staged). Residuals vary per
    device, so they leave the known call stacked over its manual mesh axes (those it newly
    makes manual, see `newly_manual`) on a new leading dimension, and enter the unknown call
    unstacked again."""
    from fluxion._src.call_transforms import partial_eval_jaxpr
    from fluxion._src.lax import lax
    jaxpr, mesh, manual = params["jaxpr"], params["mesh"], params["manual_axes"]
    in_specs, out_specs = params["in_specs"], params["out_specs"]
    unknown = [trace.is_unknown(x) for x in args]
    with inside_body(mesh, manual):
        known_jaxpr, unknown_jaxpr, out_unknown, n_res = partial_eval_jaxpr(jaxpr, unknown)
    stacked = PartitionSpec(tuple(manual))
    n_known_out = out_unknown.count(False)

    def known_body(*xs):
        outs = core.eval_jaxpr(known_jaxpr.jaxpr, known_jaxpr.consts, *xs)
        return list(outs[:n_known_out]) + [lax.reshape(r, (1, *r.shape)) for r in outs[n_known_out:]]

    known_body_jaxpr = _trace_body(known_body, known_jaxpr.in_avals, mesh, manual, "shard_map")
    known_args = [x for x, u in zip(args, unknown) if not u]
    with core.set_current_trace(trace.parent):
        known_results = shard_map_p.bind(
            *known_args, jaxpr=known_body_jaxpr, mesh=mesh,
            in_specs=tuple(s for s, u in zip(in_specs, unknown) if not u),
            out_specs=tuple([s for s, u in zip(out_specs, out_unknown) if not u]
                            + [stacked] * n_res), manual_axes=manual)
    known_outs, residuals = known_results[:n_known_out], known_results[n_known_out:]
    res_avals = unknown_jaxpr.in_avals[:n_res]

    def unknown_body(*xs):
        res = [lax.reshape(r, a.shape) for r, a in zip(xs[:n_res], res_avals)]
        return core.eval_jaxpr(unknown_jaxpr.jaxpr, unknown_jaxpr.consts, *res, *xs[n_res:])

    unknown_body_jaxpr = _trace_body(
        unknown_body, [a.update(shape=(1, *a.shape)) for a in res_avals]
        + list(unknown_jaxpr.in_avals[n_res:]), mesh, manual, "shard_map")
    unknown_args = list(residuals) + [x for x, u in zip(args, unknown) if u]
    unknown_outs = trace.stage(shard_map_p, unknown_args, dict(
        jaxpr=unknown_body_jaxpr, mesh=mesh,
        in_specs=tuple([stacked] * n_res + [s for s, u in zip(in_specs, unknown) if u]),
        out_specs=tuple(s for s, u in zip(out_specs, out_unknown) if u), manual_axes=manual))
    known_iter, unknown_iter = iter(known_outs), iter(unknown_outs)
    return [next(unknown_iter) if u else next(known_iter) for u in out_unknown]


ad.partial_eval_rules[shard_map_p] = _partial_eval
