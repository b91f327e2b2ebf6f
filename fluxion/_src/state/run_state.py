"""`run_state_p`: a pure function of initial values that runs a body over Refs.

``run_state(f)(init)`` binds `run_state_p` with the body as a jaxpr whose inputs are all Refs
(as JAX's `run_state_p`): the values the body closed over first (hoisted to Refs, except Refs
from an outer scope, which are passed themselves), then one per leaf of `init`. Its outputs
are the final values of all of them. `make_jaxpr` shows one `run_state` equation; lowering,
JVP and batching run the discharged (pure) body.
"""
from __future__ import annotations

from typing import Callable

from fluxion._src import ad, batching, core, staging, tree_util
from fluxion._src.compiler import lowering
from fluxion._src.state import discharge, primitives, transform_rules
from fluxion._src.state.types import AbstractRef, is_ref_aval

run_state_p = core.Primitive("run_state")
run_state_p.multiple_results = True
# The body's Refs are its own; Refs from outside reach it as operands.
discharge.SCOPED_STATE_PRIMITIVES.add(run_state_p)


def _inner(aval):
    return aval.inner_aval if is_ref_aval(aval) else aval


def _abstract_eval(*avals, jaxpr, which_linear, is_initialized):
    if len(avals) != len(jaxpr.in_avals):
        raise TypeError(f"run_state: {len(avals)} operands for a body of "
                        f"{len(jaxpr.in_avals)} Refs")
    for a, r in zip(avals, jaxpr.in_avals):
        if not is_ref_aval(r) or _inner(a).shape != r.shape or _inner(a).dtype != r.dtype:
            raise TypeError(f"run_state: operand {a.str_short()} for a body input "
                            f"{r.str_short()}")
    return [_inner(a) for a in avals]


run_state_p.def_abstract_eval(_abstract_eval)


def _run_pure(*vals, jaxpr, which_linear, is_initialized):
    """The outputs of run_state_p from the operands' values, as ordinary fluxion ops."""
    _, finals = discharge.eval_discharged(jaxpr.jaxpr, jaxpr.consts, vals,
                                          [True] * len(vals))
    return finals


lowering.register_lowering(run_state_p, lowering.lower_fun(_run_pure, multiple_results=True))


def _discharge(mask, vals, params):
    outs = run_state_p.bind(*vals, **params)
    return [o if m else None for o, m in zip(outs, mask)], outs


discharge.discharge_rules[run_state_p] = _discharge


def _jvp(primals, tangents, **params):
    return ad.jvp_flat(lambda *v: _run_pure(*v, **params), list(primals), list(tangents),
                       origin="jvp of run_state")


def _batch(trace, vals, dims, **params):
    return batching.batch_flat(lambda *v: _run_pure(*v, **params), vals, dims,
                               trace.axis_name, trace.axis_size, trace.spmd_axis_name)


ad.primitive_jvps[run_state_p] = _jvp
batching.trace_rules[run_state_p] = _batch
# Operands that are Refs (closed over from outside): read, run the pure primitive, write back.
transform_rules._wrap_jvp(run_state_p)
transform_rules._wrap_batch(run_state_p)


def run_state(f: Callable) -> Callable:
    """Run a function of Refs as a pure function of their initial values (`pl.run_state`).

    ``run_state(f)(init)`` makes a Ref holding each leaf of `init`, calls ``f(refs)`` (which
    returns None), and returns the pytree of the Refs' final values. It binds the primitive
    `run_state_p`, and works under `jit`, `vmap` and `grad` like any other function.
    """
    def wrapped(init):
        leaves, tree = tree_util.tree_flatten(init)
        avals = [AbstractRef(core.get_aval(x)) for x in leaves]

        def body(*refs):
            out = f(tree_util.tree_unflatten(tree, list(refs)))
            if out is not None:
                raise TypeError(f"run_state: the function must return None, got {out!r}")
            return []

        closed = staging.trace_to_jaxpr(body, avals, origin="run_state")
        consts = list(closed.consts)
        const_is_ref = [is_ref_aval(v.aval) for v in closed.jaxpr.constvars]

        def hoisted(*refs):  # the closed-over values become Refs (JAX's hoist_consts_to_refs)
            cs = [r if is_ref else primitives.get(r) for r, is_ref in
                  zip(refs[:len(consts)], const_is_ref)]
            core.eval_jaxpr(closed.jaxpr, cs, *refs[len(consts):])
            return []

        const_avals = [v.aval if is_ref else AbstractRef(v.aval)
                       for v, is_ref in zip(closed.jaxpr.constvars, const_is_ref)]
        jaxpr = staging.trace_to_jaxpr(hoisted, const_avals + avals, origin="run_state")
        n = len(jaxpr.jaxpr.invars)
        outs = run_state_p.bind(*consts, *leaves, jaxpr=jaxpr, which_linear=(False,) * n,
                                is_initialized=(True,) * n)
        return tree_util.tree_unflatten(tree, outs[len(consts):])
    return wrapped
