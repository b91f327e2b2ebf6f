"""Differentiation rules of the `jit` call primitive: the callee stays one compiled call under
jvp, partial evaluation splits it into a known call and an unknown call, and transposition
transposes the callee."""
from __future__ import annotations

from fluxion._src import ad, batching, core
from fluxion._src.call_transforms import batch_jaxpr, jvp_jaxpr, partial_eval_jaxpr, transpose_jaxpr
from fluxion._src.dispatch import jit_p


def _pinned(params) -> dict:
    """The `device` of a `jit(device=...)` call, kept by the calls derived from it."""
    return {"device": params["device"]} if params.get("device") is not None else {}


def _jit_jvp(primals, tangents, *, jaxpr, name, **params):
    nonzero = [type(t) is not ad.Zero for t in tangents]
    jvp_closed, out_nonzero = jvp_jaxpr(jaxpr, nonzero)
    outs = jit_p.bind(*primals, *[t for t in tangents if type(t) is not ad.Zero],
                      jaxpr=jvp_closed, name=f"jvp({name})", **params)
    n = len(jaxpr.out_avals)
    nz_tangents = iter(outs[n:])
    tangents_out = [next(nz_tangents) if nz else ad.Zero(ad.tangent_aval(a))
                    for a, nz in zip(jaxpr.out_avals, out_nonzero)]
    return outs[:n], tangents_out


def _jit_partial_eval(trace: ad.PartialEvalTrace, prim, args, params):
    jaxpr, name = params["jaxpr"], params["name"]
    pinned = _pinned(params)
    unknown = [trace.is_unknown(x) for x in args]
    known_jaxpr, unknown_jaxpr, out_unknown, _ = partial_eval_jaxpr(jaxpr, unknown)
    known_args = [x for x, u in zip(args, unknown) if not u]
    with core.set_current_trace(trace.parent):
        known_results = jit_p.bind(*known_args, jaxpr=known_jaxpr, name=name, **pinned)
    n_known_out = sum(1 for u in out_unknown if not u)
    known_outs, residuals = known_results[:n_known_out], known_results[n_known_out:]
    unknown_args = list(residuals) + [x for x, u in zip(args, unknown) if u]
    unknown_outs = trace.stage(jit_p, unknown_args, dict(jaxpr=unknown_jaxpr, name=name,
                                                         **pinned))
    known_iter, unknown_iter = iter(known_outs), iter(unknown_outs)
    return [next(unknown_iter) if u else next(known_iter) for u in out_unknown]


def _jit_transpose(cts, *args, jaxpr, name, **params):
    linear = [ad.is_undefined_primal(a) for a in args]
    ct_avals = [ad.tangent_aval(a) for a in jaxpr.out_avals]
    transposed = transpose_jaxpr(jaxpr, linear, ct_avals)
    nonlin = [a for a, l in zip(args, linear) if not l]
    cts = [ad.instantiate(ct) for ct in cts]
    cts_in = iter(jit_p.bind(*nonlin, *cts, jaxpr=transposed, name=f"transpose({name})",
                             **_pinned(params)))
    return [next(cts_in) if l else None for l in linear]


def _jit_batch(trace, vals, dims, *, jaxpr, name, **params):
    vals = [v if d is None else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    in_dims = tuple(None if d is None else 0 for d in dims)
    batched, out_batched = batch_jaxpr(jaxpr, in_dims, trace.axis_name, trace.axis_size)
    outs = jit_p.bind(*vals, jaxpr=batched, name=name, **params)
    return outs, [0 if b else None for b in out_batched]


ad.primitive_jvps[jit_p] = _jit_jvp
batching.trace_rules[jit_p] = _jit_batch
ad.partial_eval_rules[jit_p] = _jit_partial_eval
ad.primitive_transposes[jit_p] = _jit_transpose
