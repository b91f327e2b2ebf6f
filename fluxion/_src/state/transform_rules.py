"""Differentiating and batching primitives with bodies (`scan`, `while`, `cond`, `jit`) that
are applied to Refs: the primitive is discharged where it is bound — each Ref operand is read
whole, the pure (discharged) primitive runs on the values, and the new values are written
back — and that pure program is what is differentiated or batched. Without Ref operands the
primitives' own rules apply unchanged.
"""
from __future__ import annotations

from fluxion._src import ad, batching, core
from fluxion._src.state import primitives
from fluxion._src.state.discharge import discharge_rules, pure_params
from fluxion._src.state.types import is_ref


def discharge_at_bind(prim, args, params):
    """Bind `prim` on `args` with each Ref operand replaced by its value, at the current trace,
    then store the new values in the Refs; returns the outputs."""
    mask = [id(a) if is_ref(a) else False for a in args]
    vals = [primitives.get(a) if m else a for a, m in zip(args, mask)]
    new_vals, outs = discharge_rules[prim](mask, vals, params)
    for a, nv in zip(args, new_vals):
        if nv is not None:
            primitives.set(a, ..., nv)
    return outs


def _wrap_jvp(prim):
    own = ad.primitive_jvps[prim]

    def rule(primals, tangents, **params):
        if not any(is_ref(p) for p in primals):
            return own(primals, tangents, **pure_params(params))
        outs, t_outs = ad.jvp_flat(lambda *a: discharge_at_bind(prim, a, params),
                                   list(primals), list(tangents), origin=f"jvp of {prim}")
        return outs, t_outs
    ad.primitive_jvps[prim] = rule


def _wrap_batch(prim):
    own = batching.trace_rules[prim]

    def rule(trace, vals, dims, **params):
        if not any(is_ref(v) for v in vals):
            return own(trace, vals, dims, **pure_params(params))
        return batching.batch_flat(lambda *a: discharge_at_bind(prim, a, params), vals, dims,
                                   trace.axis_name, trace.axis_size, trace.spmd_axis_name)
    batching.trace_rules[prim] = rule


def _wrap_partial_eval(prim):
    own = ad.partial_eval_rules[prim]

    def rule(trace, primitive, args, params):
        if not any(is_ref(a) for a in args):
            params = pure_params(params)
        return own(trace, primitive, args, params)
    ad.partial_eval_rules[prim] = rule


def _new_ref_batch(trace, vals, dims, *, memory_space, kind):
    # A Ref made under vmap is batched even when its initial value is not: batched values
    # may be written to it later.
    (x,), (d,) = vals, dims
    if d is batching.not_mapped:
        x, d = batching.broadcast_batch(x, trace.axis_size, 0), 0
    return primitives.new_ref_p.bind(x, memory_space=memory_space, kind=kind), d


def _register():
    from fluxion._src import jit_rules  # noqa: F401  (jit's own rules first)
    from fluxion._src.dispatch import jit_p
    from fluxion._src.lax.control_flow import cond_p, scan_p, while_p
    for prim in (jit_p, cond_p, scan_p, while_p):
        _wrap_jvp(prim)
        _wrap_batch(prim)
        _wrap_partial_eval(prim)
    from fluxion._src.lax.control_flow import linear_solve_p
    _wrap_jvp(linear_solve_p)
    _wrap_batch(linear_solve_p)
    batching.trace_rules[primitives.new_ref_p] = _new_ref_batch


_register()
