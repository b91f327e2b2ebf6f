"""`checkpoint` (remat): trade memory for recomputation in reverse-mode differentiation.

The `checkpoint` primitive wraps a jaxpr. When reverse mode splits it into a forward part and
a staged (backward) part, only the values its `policy` calls saveable become residuals; every
other value the backward part needs is recomputed there from the saved ones.
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import numpy as np

from fluxion._src import ad, batching, core, effects, key_flow, staging
from fluxion._src.config import config
from fluxion._src.api import fun_name
from fluxion._src.call_transforms import (batch_jaxpr, closure_convert, jvp_jaxpr, memoized,
                                          partial_eval_jaxpr, transpose_jaxpr)
from fluxion._src.compiler import lowering
from fluxion._src.core import ClosedJaxpr, Jaxpr, Literal
from fluxion._src.traceback_util import api_boundary
from fluxion._src.tree_util import tree_flatten, tree_unflatten

checkpoint_p = core.Primitive("checkpoint")
checkpoint_p.multiple_results = True


# ---------------------------------------------------------------------------------------------
# Policies: policy(primitive, *input_avals, **params) -> whether the output may be saved: a
# bool, or one of JAX's cases `Saveable`, `Recompute` or `Offloadable(src, dst)`.

class RecomputeType:
    """The type of `Recompute`: a policy's answer that a value is recomputed, not saved."""

    def __repr__(self):
        return "Recompute"


class SaveableType:
    """The type of `Saveable`: a policy's answer that a value is saved as a residual."""

    def __repr__(self):
        return "Saveable"


Recompute = RecomputeType()
Saveable = SaveableType()


class Offloadable(NamedTuple):
    """A policy's answer that a value is saved, moved from memory kind `src` to `dst` (e.g.
    "device" to "pinned_host") until the backward pass. fluxion keeps one memory space per
    device, so an offloaded value is saved where it is (docs/differences.md)."""
    src: str
    dst: str


def _saves(case) -> bool:
    """Whether a policy's answer saves the value (Offloadable does: it saves it elsewhere)."""
    if isinstance(case, (bool, np.bool_)):
        return bool(case)
    if isinstance(case, (SaveableType, Offloadable)):
        return True
    if isinstance(case, RecomputeType):
        return False
    msg = ("Value returned by a remat policy should be a bool or `ad_checkpoint.Recompute`, "
           f"`ad_checkpoint.Saveable` or `ad_checkpoint.Offloadable(...)`. Got {case} of type "
           f"{type(case)}.")
    if case is Offloadable:
        msg += " Did you return `Offloadable` instead of an instantiated `Offloadable(...)`?"
    raise TypeError(msg)


def everything_saveable(prim, *avals, **params) -> bool:
    return True


def nothing_saveable(prim, *avals, **params) -> bool:
    return False


def dots_saveable(prim, *avals, **params) -> bool:
    return prim.name == "dot_general"


checkpoint_dots = dots_saveable


def dots_with_no_batch_dims_saveable(prim, *avals, **params) -> bool:
    if prim.name != "dot_general":
        return False
    (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
    return not lhs_batch and not rhs_batch


checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


def save_only_these_names(*names) -> Callable:
    """Save only values tagged with `checkpoint_name(x, name)` for one of `names`."""
    wanted = set(names)

    def policy(prim, *avals, **params):
        return prim is name_p and params["name"] in wanted
    return policy


def save_any_names_but_these(*names) -> Callable:
    """Save every value tagged with `checkpoint_name` except those named in `names`."""
    excluded = set(names)

    def policy(prim, *avals, **params):
        return prim is name_p and params["name"] not in excluded
    return policy


def save_anything_except_these_names(*names) -> Callable:
    """Save every value except those tagged with `checkpoint_name` for one of `names`."""
    excluded = set(names)

    def policy(prim, *avals, **params):
        return not (prim is name_p and params["name"] in excluded)
    return policy


def save_from_both_policies(policy_1: Callable, policy_2: Callable) -> Callable:
    """Save a value when either policy saves it (both must answer with a bool)."""
    def policy(prim, *avals, **params):
        out1 = policy_1(prim, *avals, **params)
        out2 = policy_2(prim, *avals, **params)
        if not (isinstance(out1, bool) and isinstance(out2, bool)):
            raise ValueError(f"The return value of the policies should be a boolean. Got: {out1} "
                             f"and {out2}. Please write a custom policy function directly, "
                             "rather than using this helper function.")
        return out1 or out2
    return policy


def save_and_offload_only_these_names(*, names_which_can_be_saved, names_which_can_be_offloaded,
                                      offload_src, offload_dst) -> Callable:
    """Save values named in `names_which_can_be_saved`, offload (from memory kind
    `offload_src` to `offload_dst`) those in `names_which_can_be_offloaded`, recompute the
    rest."""
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    if saved & offloaded:
        raise ValueError("The names should be exclusive and should not intersect in "
                         "`names_which_can_be_saved` and `names_which_can_be_offloaded`. Got "
                         f"names_which_can_be_saved={saved}, names_which_can_be_offloaded="
                         f"{offloaded} and the intersection={saved & offloaded}")

    def policy(prim, *avals, **params):
        if prim is name_p and params["name"] in saved:
            return Saveable
        if prim is name_p and params["name"] in offloaded:
            return Offloadable(src=offload_src, dst=offload_dst)
        return Recompute
    return policy


def offload_dot_with_no_batch_dims(offload_src, offload_dst) -> Callable:
    """As `dots_with_no_batch_dims_saveable`, offloading those dots' results (from memory kind
    `offload_src` to `offload_dst`) instead of keeping them in place."""
    def policy(prim, *avals, **params):
        if dots_with_no_batch_dims_saveable(prim, *avals, **params):
            return Offloadable(src=offload_src, dst=offload_dst)
        return Recompute
    return policy


class checkpoint_policies:
    """Namespace of the built-in remat policies (`jax.checkpoint_policies`)."""
    everything_saveable = staticmethod(everything_saveable)
    nothing_saveable = staticmethod(nothing_saveable)
    dots_saveable = staticmethod(dots_saveable)
    checkpoint_dots = staticmethod(dots_saveable)
    dots_with_no_batch_dims_saveable = staticmethod(dots_with_no_batch_dims_saveable)
    checkpoint_dots_with_no_batch_dims = staticmethod(dots_with_no_batch_dims_saveable)
    save_only_these_names = staticmethod(save_only_these_names)
    save_any_names_but_these = staticmethod(save_any_names_but_these)
    save_anything_except_these_names = staticmethod(save_anything_except_these_names)
    save_from_both_policies = staticmethod(save_from_both_policies)
    save_and_offload_only_these_names = staticmethod(save_and_offload_only_these_names)
    offload_dot_with_no_batch_dims = staticmethod(offload_dot_with_no_batch_dims)


# ---------------------------------------------------------------------------------------------
# checkpoint_name: an identity that tags a value for save_only_these_names

name_p = core.Primitive("name")
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_impl(lambda x, *, name: x)
lowering.register_lowering(name_p, lambda ctx, x, *, name: x)
ad.primitive_jvps[name_p] = lambda primals, tangents, *, name: (
    name_p.bind(primals[0], name=name), tangents[0])
batching.primitive_batchers[name_p] = lambda args, dims, *, name: (
    name_p.bind(args[0], name=name), dims[0])


def checkpoint_name(x, name):
    """Tag `x` with `name`, for checkpoint policies that save values by name."""
    from fluxion._src.tree_util import tree_map
    return tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


# ---------------------------------------------------------------------------------------------
# The API

def checkpoint(fun: Callable, *, prevent_cse: bool = True, policy: Callable | None = None,
               static_argnums=(), concrete: bool = False) -> Callable:
    """Make `fun` recompute its intermediate values in the backward pass instead of storing
    them; `policy` (from `checkpoint_policies`) picks values that may be stored anyway.
    (`concrete=True` is refused, as in JAX: use `static_argnums`.)"""
    if concrete:
        raise NotImplementedError(
            "The `concrete` option to `checkpoint` was removed (as in JAX v0.10.0). In its "
            "place please use `static_argnums`.")
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    static_argnums = tuple(static_argnums)

    @functools.wraps(fun)
    @api_boundary
    def wrapped(*args, **kwargs):
        statics = {i: args[i] for i in static_argnums}
        dyn = tuple(a for i, a in enumerate(args) if i not in statics)
        leaves, in_tree = tree_flatten((dyn, kwargs))
        box = []
        call = key_flow.StagedCall((args, kwargs)) if config.debug_key_reuse else None
        f = fun if call is None else call.wrap(fun)

        def flat(*xs):
            d, kw = tree_unflatten(in_tree, xs)
            it = iter(d)
            full = [statics[i] if i in statics else next(it) for i in range(len(args))]
            out = f(*full, **kw)
            out_leaves, out_tree = tree_flatten(out)
            box.append(out_tree)
            return out_leaves

        closed = staging.trace_to_jaxpr(flat, [core.get_aval(x) for x in leaves],
                                        origin=f"checkpoint of {fun_name(fun)}")
        if call is not None:
            call.finish("remat2")
        jaxpr, consts = closure_convert(closed)
        outs = checkpoint_p.bind(*consts, *leaves, jaxpr=jaxpr, prevent_cse=prevent_cse,
                                 differentiated=False, policy=policy)
        return tree_unflatten(box[0], outs)

    return wrapped


remat = checkpoint


# ---------------------------------------------------------------------------------------------
# Rules

def _checkpoint_impl(*args, jaxpr, **_):
    return core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


def _checkpoint_jvp(primals, tangents, *, jaxpr, prevent_cse, differentiated, policy):
    nonzero = [type(t) is not ad.Zero for t in tangents]
    jvp_closed, out_nonzero = jvp_jaxpr(jaxpr, nonzero)
    outs = checkpoint_p.bind(*primals, *[t for t in tangents if type(t) is not ad.Zero],
                             jaxpr=jvp_closed, prevent_cse=prevent_cse, differentiated=True,
                             policy=policy)
    n = len(jaxpr.out_avals)
    nz = iter(outs[n:])
    return outs[:n], [next(nz) if z else ad.Zero(ad.tangent_aval(a))
                      for a, z in zip(jaxpr.out_avals, out_nonzero)]


def _has_mixed_call(jaxpr: Jaxpr, unknown) -> bool:
    """Whether an equation with its own partial-eval rule (cond, scan, while, jit, ...) has
    both known and unknown inputs: the eqn-by-eqn split below would stage all of it, primal
    part included (a JVP of scan carries primals and tangents in one equation)."""
    unknown_ids = {id(v) for v, u in zip(jaxpr.invars, unknown) if u}
    for eqn in jaxpr.eqns:
        ins = [type(v) is not Literal and id(v) in unknown_ids for v in eqn.invars]
        if any(ins):
            if eqn.primitive in ad.partial_eval_rules and not all(ins):
                return True
            unknown_ids.update(id(v) for v in eqn.outvars)
    return False


@memoized
def _split_mixed_calls(closed: ClosedJaxpr, unknown) -> ClosedJaxpr:
    """`closed` with every mixed equation split into a known and an unknown equation (by the
    primitives' own partial-eval rules), as one jaxpr: the known part, then the unknown part
    reading the known part's residuals."""
    known_jaxpr, unknown_jaxpr, out_unknown, n_res = partial_eval_jaxpr(closed, unknown)

    def fused(*args):
        known_args = [a for a, u in zip(args, unknown) if not u]
        results = core.eval_jaxpr(known_jaxpr.jaxpr, known_jaxpr.consts, *known_args)
        n_known = len(results) - n_res
        known_outs, residuals = results[:n_known], results[n_known:]
        unknown_outs = core.eval_jaxpr(unknown_jaxpr.jaxpr, unknown_jaxpr.consts, *residuals,
                                       *[a for a, u in zip(args, unknown) if u])
        k, s = iter(known_outs), iter(unknown_outs)
        return [next(s) if u else next(k) for u in out_unknown]

    return staging.trace_to_jaxpr(fused, list(closed.in_avals), origin="checkpoint")


@memoized
def partial_eval_with_policy(closed: ClosedJaxpr, unknown, policy):
    """Split `closed` by unknown inputs, saving only policy-saveable known values.

    Returns (known_jaxpr, staged_jaxpr, out_unknown): known_jaxpr maps known inputs to (known
    outputs, residuals); staged_jaxpr maps (residuals, unknown inputs) to unknown outputs and
    recomputes the known values it needs that were not saveable."""
    if _has_mixed_call(closed.jaxpr, unknown):
        closed = _split_mixed_calls(closed, tuple(unknown))
    jaxpr = closed.jaxpr
    policy = policy or nothing_saveable
    unknown_ids = {id(v) for v, u in zip(jaxpr.invars, unknown) if u}
    producer, unknown_eqns = {}, set()
    for i, eqn in enumerate(jaxpr.eqns):
        if any(type(v) is not Literal and id(v) in unknown_ids for v in eqn.invars):
            unknown_eqns.add(i)
            unknown_ids.update(id(v) for v in eqn.outvars)
        else:
            for v in eqn.outvars:
                producer[id(v)] = i
    out_unknown = [type(v) is not Literal and id(v) in unknown_ids for v in jaxpr.outvars]

    def saveable(v) -> bool:
        i = producer.get(id(v))
        if i is None:  # an input or a const
            return True
        eqn = jaxpr.eqns[i]
        return _saves(policy(eqn.primitive, *[x.aval for x in eqn.invars], **eqn.params))

    # Debug callbacks of the known part run again with the recomputation (as in JAX, where
    # the rematerialized forward pass keeps its effectful equations): a print shows remat.
    rerun = {i for i, e in enumerate(jaxpr.eqns) if i not in unknown_eqns and any(
        isinstance(x, (effects.DebugEffect, effects.OrderedDebugEffect))
        for x in effects.eqn_effects(e))} if unknown_eqns else set()
    needed = [v for i in sorted(unknown_eqns | rerun) for v in jaxpr.eqns[i].invars
              if type(v) is not Literal and id(v) not in unknown_ids]
    residuals, residual_ids, recompute, seen = [], set(), set(rerun), set()
    while needed:
        v = needed.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if saveable(v):
            residuals.append(v)
            residual_ids.add(id(v))
        else:
            i = producer[id(v)]
            recompute.add(i)
            needed.extend(x for x in jaxpr.eqns[i].invars if type(x) is not Literal)

    known_invars = [v for v, u in zip(jaxpr.invars, unknown) if not u]
    known_eqns = [e for i, e in enumerate(jaxpr.eqns) if i not in unknown_eqns]
    known_outs = [v for v, u in zip(jaxpr.outvars, out_unknown) if not u]
    known = staging.dce_jaxpr(Jaxpr(jaxpr.constvars, known_invars, known_outs + residuals, known_eqns))
    staged_eqns = [e for i, e in enumerate(jaxpr.eqns) if i in unknown_eqns or i in recompute]
    staged_invars = residuals + [v for v, u in zip(jaxpr.invars, unknown) if u]
    staged = staging.dce_jaxpr(Jaxpr([], staged_invars,
                                     [v for v, u in zip(jaxpr.outvars, out_unknown) if u], staged_eqns))
    return (ClosedJaxpr(known, closed.consts), ClosedJaxpr(staged, []), out_unknown, len(residuals))


def _checkpoint_partial_eval(trace: ad.PartialEvalTrace, prim, args, params):
    jaxpr, policy = params["jaxpr"], params["policy"]
    unknown = tuple(trace.is_unknown(x) for x in args)
    known_jaxpr, staged_jaxpr, out_unknown, _ = partial_eval_with_policy(jaxpr, unknown, policy)
    known_args = [x for x, u in zip(args, unknown) if not u]
    with core.set_current_trace(trace.parent):
        known_results = core.eval_jaxpr(known_jaxpr.jaxpr, known_jaxpr.consts, *known_args)
    n_known = sum(1 for u in out_unknown if not u)
    known_outs, residuals = known_results[:n_known], known_results[n_known:]
    staged_args = list(residuals) + [x for x, u in zip(args, unknown) if u]
    staged_outs = trace.stage(checkpoint_p, staged_args,
                              dict(params, jaxpr=staged_jaxpr, differentiated=True))
    k, s = iter(known_outs), iter(staged_outs)
    return [next(s) if u else next(k) for u in out_unknown]


def _checkpoint_transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    linear = tuple(ad.is_undefined_primal(a) for a in args)
    ct_avals = tuple(ad.tangent_aval(a) for a in jaxpr.out_avals)
    transposed = transpose_jaxpr(jaxpr, linear, ct_avals)
    nonlin = [a for a, l in zip(args, linear) if not l]
    outs = iter(checkpoint_p.bind(*nonlin, *[ad.instantiate(c) for c in cts], jaxpr=transposed,
                                  prevent_cse=prevent_cse, differentiated=True, policy=policy))
    return [next(outs) if l else None for l in linear]


def _checkpoint_batch(trace, vals, dims, *, jaxpr, **params):
    vals = [v if d is None else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    in_dims = tuple(None if d is None else 0 for d in dims)
    batched, out_batched = batch_jaxpr(jaxpr, in_dims, trace.axis_name, trace.axis_size)
    outs = checkpoint_p.bind(*vals, jaxpr=batched, **params)
    return outs, [0 if b else None for b in out_batched]


def _checkpoint_lowering(ctx, *args, jaxpr, prevent_cse, **_):
    if prevent_cse and args:
        # An optimization barrier stops XLA from merging the recomputation with the forward pass.
        args = ctx.op("stablehlo.optimization_barrier", list(args), [a.aval for a in args])
    return ctx.lower_jaxpr(jaxpr, list(args))


checkpoint_p.def_impl(_checkpoint_impl)
checkpoint_p.def_abstract_eval(lambda *avals, jaxpr, **_: jaxpr.out_avals)
ad.primitive_jvps[checkpoint_p] = _checkpoint_jvp
ad.partial_eval_rules[checkpoint_p] = _checkpoint_partial_eval
ad.primitive_transposes[checkpoint_p] = _checkpoint_transpose
batching.trace_rules[checkpoint_p] = _checkpoint_batch
lowering.register_lowering(checkpoint_p, _checkpoint_lowering)
