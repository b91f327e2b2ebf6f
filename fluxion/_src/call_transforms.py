"""Transformations of closed jaxprs, used by call-like primitives (jit, control flow):
JVP of a jaxpr, partial evaluation of a jaxpr into known and unknown parts, transposition."""
from __future__ import annotations

from typing import Sequence

from fluxion._src import ad, core, staging
from fluxion._src.core import ClosedJaxpr, Jaxpr


def _trace(fun, avals, origin) -> ClosedJaxpr:
    return staging.trace_to_jaxpr(fun, list(avals), origin=origin)


def closure_convert(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Turn the consts of a closed jaxpr into leading invars; returns (jaxpr, consts)."""
    jaxpr = closed.jaxpr
    if not jaxpr.constvars:
        return closed, []
    converted = Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns,
                      jaxpr.effects, jaxpr.debug_info)
    return ClosedJaxpr(converted, []), list(closed.consts)


def jvp_jaxpr(closed: ClosedJaxpr, nonzero: Sequence[bool], instantiate: bool | Sequence[bool] = False):
    """A jaxpr taking (primals, tangents of the `nonzero` inputs) and returning (primal outs,
    tangents of the outputs whose tangent is not symbolically zero); plus that out mask."""
    in_avals = closed.in_avals
    tangent_avals = [ad.tangent_aval(a) for a, nz in zip(in_avals, nonzero) if nz]
    n = len(in_avals)
    out_mask: list[bool] = []
    n_out = len(closed.out_avals)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)

    def fun(*args):
        primals, nz_tangents = args[:n], iter(args[n:])
        tangents = [next(nz_tangents) if nz else ad.Zero(ad.tangent_aval(a))
                    for a, nz in zip(in_avals, nonzero)]
        outs_p, outs_t = ad.jvp_flat(lambda *xs: core.eval_jaxpr(closed.jaxpr, closed.consts, *xs),
                                     primals, tangents)
        outs_t = [ad.instantiate(t) if i else t for t, i in zip(outs_t, inst)]
        out_mask[:] = [type(t) is not ad.Zero for t in outs_t]
        return list(outs_p) + [t for t in outs_t if type(t) is not ad.Zero]

    jaxpr = _trace(fun, list(in_avals) + tangent_avals, "jvp_jaxpr")
    return jaxpr, out_mask


def partial_eval_jaxpr(closed: ClosedJaxpr, unknown: Sequence[bool], instantiate=False):
    """Split a jaxpr by which inputs are unknown.

    Returns (known_jaxpr, unknown_jaxpr, out_unknown, num_residuals): known_jaxpr maps the
    known inputs to (known outputs, residuals); unknown_jaxpr maps (residuals, unknown inputs)
    to the unknown outputs.
    """
    in_avals = closed.in_avals
    n_out = len(closed.out_avals)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    box = {}

    def known_fun(*known_vals):
        pe = ad.PartialEvalTrace("partial_eval_jaxpr")
        try:
            known_iter = iter(known_vals)
            ins = [pe.new_arg(a) if u else next(known_iter) for a, u in zip(in_avals, unknown)]
            with core.set_current_trace(pe):
                outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *ins)
            # An instantiated known output is staged too: it becomes a residual passed through.
            out_unknown = [pe.is_unknown(o) or i for o, i in zip(outs, inst)]
            staged = pe.to_jaxpr([o for o, u in zip(outs, out_unknown) if u])
        finally:
            pe.is_live = False
        unknown_jaxpr, residuals = closure_convert(staged)
        box.update(unknown_jaxpr=unknown_jaxpr, out_unknown=out_unknown, n_res=len(residuals))
        return [o for o, u in zip(outs, out_unknown) if not u] + residuals

    known_avals = [a for a, u in zip(in_avals, unknown) if not u]
    known_jaxpr = _trace(known_fun, known_avals, "partial_eval_jaxpr")
    return known_jaxpr, box["unknown_jaxpr"], box["out_unknown"], box["n_res"]


def transpose_jaxpr(closed: ClosedJaxpr, linear: Sequence[bool], ct_avals: Sequence):
    """A jaxpr mapping (non-linear inputs, output cotangents) to cotangents of the linear inputs."""
    in_avals = closed.in_avals
    nonlin_avals = [a for a, l in zip(in_avals, linear) if not l]
    n_nonlin = len(nonlin_avals)

    def fun(*args):
        nonlin, cts = iter(args[:n_nonlin]), list(args[n_nonlin:])
        linear_args = [ad.UndefinedPrimal(a) if l else next(nonlin) for a, l in zip(in_avals, linear)]
        cts_in = ad.backward_pass(closed.jaxpr, closed.consts, linear_args, cts)
        return [ad.instantiate(ct) for ct, l in zip(cts_in, linear) if l]

    return _trace(fun, nonlin_avals + list(ct_avals), "transpose_jaxpr")
