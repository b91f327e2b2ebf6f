"""Jet rules of the primitives holding jaxprs: jit keeps one call, of the jet of its body;
custom_jvp/custom_vjp calls and checkpoint are inlined; cond, scan and while (which JAX
0.10.2's jet lacks) get the jet of their bodies with every series instantiated, so a carry
needs no fixpoint over which series are zero, at the price of carrying zeros.
"""
from __future__ import annotations

from typing import Sequence

from fluxion._src import core, staging
from fluxion._src.call_transforms import memoized
from fluxion._src.core import ClosedJaxpr, Jaxpr, Var
from fluxion._src.checkpoint import checkpoint_p
from fluxion._src.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from fluxion._src.dispatch import jit_p
from fluxion._src.jet import (instantiate_series, jet_flat, jet_trace_rules, zero_series,
                              zero_term)
from fluxion._src.lax.control_flow import cond_p, scan_p, while_p


def _inline_call_rule(jaxpr_param):
    def rule(trace, args, **params):
        closed = params[jaxpr_param]
        with core.set_current_trace(trace):
            return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
    return rule


# The body of a custom_jvp/custom_vjp function is differentiated, its rule ignored (as JAX);
# checkpointing means nothing to forward mode.
jet_trace_rules[custom_jvp_call_p] = _inline_call_rule("call_jaxpr")
jet_trace_rules[custom_vjp_call_p] = _inline_call_rule("call_jaxpr")
jet_trace_rules[checkpoint_p] = _inline_call_rule("jaxpr")


@memoized
def jet_jaxpr(closed, nonzero, term_avals, order: int):
    """A jaxpr taking (primals, the terms of the `nonzero` inputs, input by input) and
    returning (primal outs, the terms of outputs whose series is not zero); plus that mask."""
    n = len(closed.in_avals)
    out_mask: list[bool] = []

    def fun(*args):
        primals, flat_terms = args[:n], iter(args[n:])
        series = [[next(flat_terms) for _ in range(order)] if nz else zero_series
                  for nz in nonzero]
        outs, out_series = jet_flat(
            lambda *xs: core.eval_jaxpr(closed.jaxpr, closed.consts, *xs), primals, series, order)
        out_mask[:] = [s is not zero_series and not all(t is zero_term for t in s)
                       for s in out_series]
        terms = [t for p, s, nz in zip(outs, out_series, out_mask) if nz
                 for t in instantiate_series(p, s, order)]
        return list(outs) + terms

    in_avals = list(closed.in_avals) + list(term_avals)
    return staging.trace_to_jaxpr(fun, in_avals, origin="jet_jaxpr"), out_mask


def _jit_rule(trace, args, *, jaxpr, name, **params):
    order = trace.order
    pairs = [trace.to_primal_terms_pair(a) for a in args]
    nonzero = tuple(s is not zero_series for _, s in pairs)
    with core.set_current_trace(trace.parent):
        terms = [t for p, s in pairs if s is not zero_series
                 for t in instantiate_series(p, s, order)]
        term_avals = tuple(core.get_aval(t) for t in terms)
        closed, out_mask = jet_jaxpr(jaxpr, nonzero, term_avals, order)
        outs = jit_p.bind(*[p for p, _ in pairs], *terms, jaxpr=closed, name=f"jet({name})",
                          **params)
    n = len(jaxpr.out_avals)
    out_terms = iter(outs[n:])
    return [trace.wrap(p, [next(out_terms) for _ in range(order)] if nz else zero_series)
            for p, nz in zip(outs[:n], out_mask)]


jet_trace_rules[jit_p] = _jit_rule


@memoized
def jet_jaxpr_grouped(closed: ClosedJaxpr, order: int, in_groups: Sequence[int],
                      out_groups: Sequence[int]) -> ClosedJaxpr:
    """The jet of `closed`, every series instantiated. Its binders and outputs come in the
    groups of consecutive variables that `in_groups` / `out_groups` size, each group laid out
    as (its primals, then their terms: K per variable, variable by variable)."""
    def interleave(avals_or_vals, terms, groups):
        laid, pos = [], 0
        for g in groups:
            laid += list(avals_or_vals[pos:pos + g])
            laid += [t for ts in terms[pos:pos + g] for t in ts]
            pos += g
        return laid

    in_avals = list(closed.in_avals)
    out_avals = list(closed.out_avals)

    def fun(*args):
        primals, series, pos = [], [], 0
        for g in in_groups:
            primals += args[pos:pos + g]
            pos += g
            flat = args[pos:pos + g * order]
            pos += g * order
            series += [list(flat[i * order:(i + 1) * order]) for i in range(g)]
        outs, out_series = jet_flat(
            lambda *xs: core.eval_jaxpr(closed.jaxpr, closed.consts, *xs), primals, series, order)
        out_terms = [[_cast(t, a) for t in instantiate_series(p, s, order)]
                     for p, s, a in zip(outs, out_series, out_avals)]
        return interleave(outs, out_terms, out_groups)

    layout = interleave(in_avals, [[a] * order for a in in_avals], in_groups)
    return staging.trace_to_jaxpr(fun, layout, origin="jet_jaxpr")


def _cast(x, aval):
    from fluxion._src.lax import lax as lax_impl
    if core.get_aval(x) == aval:
        return x
    return lax_impl._convert_element_type(x, aval.dtype, aval.weak_type)


def _args(trace, args, avals):
    """Primals and instantiated series of `args`, the terms cast to the binders' types."""
    primals, series = [], []
    for a, aval in zip(args, avals):
        p, s = trace.to_primal_terms_pair(a)
        primals.append(p)
        series.append([_cast(t, aval) for t in instantiate_series(p, s, trace.order)])
    return primals, series


def _laid_out(primals, series, groups):
    laid, pos = [], 0
    for g in groups:
        laid += primals[pos:pos + g]
        laid += [t for ts in series[pos:pos + g] for t in ts]
        pos += g
    return laid


def _wrap_groups(trace, outs, groups):
    """Undo the (primals, terms) layout of the outputs: jet tracers, group by group."""
    order, result, pos = trace.order, [], 0
    for g in groups:
        primals = outs[pos:pos + g]
        flat = outs[pos + g:pos + g + g * order]
        pos += g + g * order
        result += [trace.wrap(p, flat[i * order:(i + 1) * order]) for i, p in enumerate(primals)]
    return result


def _cond_rule(trace, args, *, branches):
    index, *ops = args
    n_in, n_out = len(ops), len(branches[0].out_avals)
    with core.set_current_trace(trace.parent):
        new = tuple(jet_jaxpr_grouped(b, trace.order, (n_in,), (n_out,)) for b in branches)
        primals, series = _args(trace, ops, branches[0].in_avals)
        outs = cond_p.bind(trace.to_primal_terms_pair(index)[0],
                           *_laid_out(primals, series, [n_in]), branches=new)
    return _wrap_groups(trace, outs, [n_out])


def _scan_rule(trace, args, *, jaxpr, length, reverse, num_consts, num_carry, unroll):
    order = trace.order
    num_xs = len(args) - num_consts - num_carry
    num_ys = len(jaxpr.out_avals) - num_carry
    in_groups, out_groups = (num_consts, num_carry, num_xs), (num_carry, num_ys)
    with core.set_current_trace(trace.parent):
        body = jet_jaxpr_grouped(jaxpr, order, in_groups, out_groups)
        # The xs' terms are stacked like the xs: cast against the stacked types.
        in_avals = list(jaxpr.in_avals)
        outer_avals = in_avals[:num_consts + num_carry] + [
            core.get_aval(trace.to_primal_terms_pair(x)[0]) for x in args[num_consts + num_carry:]]
        primals, series = _args(trace, args, outer_avals)
        outs = scan_p.bind(*_laid_out(primals, series, in_groups), jaxpr=body, length=length,
                           reverse=reverse, num_consts=num_consts * (order + 1),
                           num_carry=num_carry * (order + 1), unroll=unroll)
    return _wrap_groups(trace, outs, out_groups)


def _while_rule(trace, args, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    order = trace.order
    cond_consts = [trace.to_primal_terms_pair(a)[0] for a in args[:cond_nconsts]]
    rest = args[cond_nconsts:]
    num_carry = len(rest) - body_nconsts
    with core.set_current_trace(trace.parent):
        body = jet_jaxpr_grouped(body_jaxpr, order, (body_nconsts, num_carry), (num_carry,))
        primals, series = _args(trace, rest, body_jaxpr.in_avals)
        # The condition reads the primal carry only: its binders for the terms are unused.
        carry_avals = body_jaxpr.in_avals[body_nconsts:]
        term_vars = [Var(a) for a in carry_avals for _ in range(order)]
        j = cond_jaxpr.jaxpr
        cond = ClosedJaxpr(Jaxpr(j.constvars, j.invars + term_vars, j.outvars, j.eqns,
                                 j.effects, j.debug_info), cond_jaxpr.consts)
        outs = while_p.bind(*cond_consts,
                            *_laid_out(primals, series, [body_nconsts, num_carry]),
                            cond_jaxpr=cond, body_jaxpr=body, cond_nconsts=cond_nconsts,
                            body_nconsts=body_nconsts * (order + 1))
    return _wrap_groups(trace, outs, [num_carry])


jet_trace_rules[cond_p] = _cond_rule
jet_trace_rules[scan_p] = _scan_rule
jet_trace_rules[while_p] = _while_rule
