"""Jet rules of cond, scan and while (JAX 0.10.2's jet has none).

The body of each is replaced by its jet, with every series instantiated: a carry then needs no
fixpoint over which series are zero, at the price of carrying zeros.
"""
from __future__ import annotations

from typing import Sequence

from fluxion._src import core, staging
from fluxion._src.call_transforms import memoized
from fluxion._src.core import ClosedJaxpr, Jaxpr, Var
from fluxion._src.jet import instantiate_series, jet_flat, jet_trace_rules, zero_series
from fluxion._src.lax.control_flow import cond_p, scan_p, while_p


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


def _no_series(trace, args) -> bool:
    return all(trace.to_primal_terms_pair(a)[1] is zero_series for a in args)


def _bind_plain(trace, prim, args, params):
    primals = [trace.to_primal_terms_pair(a)[0] for a in args]
    with core.set_current_trace(trace.parent):
        return prim.bind(*primals, **params)


def _cond_rule(trace, args, *, branches):
    index, *ops = args
    if _no_series(trace, ops):
        return _bind_plain(trace, cond_p, args, dict(branches=branches))
    n_in, n_out = len(ops), len(branches[0].out_avals)
    with core.set_current_trace(trace.parent):
        new = tuple(jet_jaxpr_grouped(b, trace.order, (n_in,), (n_out,)) for b in branches)
        primals, series = _args(trace, ops, branches[0].in_avals)
        outs = cond_p.bind(trace.to_primal_terms_pair(index)[0],
                           *_laid_out(primals, series, [n_in]), branches=new)
    return _wrap_groups(trace, outs, [n_out])


def _scan_rule(trace, args, *, jaxpr, length, reverse, num_consts, num_carry, unroll):
    params = dict(jaxpr=jaxpr, length=length, reverse=reverse, num_consts=num_consts,
                  num_carry=num_carry, unroll=unroll)
    if _no_series(trace, args):
        return _bind_plain(trace, scan_p, args, params)
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
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    if _no_series(trace, args):
        return _bind_plain(trace, while_p, args, params)
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
