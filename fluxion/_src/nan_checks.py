"""`config.debug_nans` / `config.debug_infs`: find the primitive that made a NaN or an Inf.

While either flag is on, every eager primitive's outputs are checked, and so are a jitted
function's; when a jitted output holds a NaN (Inf), its jaxpr is run again one primitive at a
time and `FloatingPointError` names the first primitive whose output has one, with the user's
source line that created it. Off, nothing on any path costs anything: the flags swap the
eager entry point and keep jit off its fast path only while they are on.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.config import config

_plain_apply = None


def _bad_kind(values) -> str | None:
    for x in values:
        dtype = _dtype_of(x)
        if dtype is None or not dtypes.is_inexact(dtype):
            continue
        arr = np.asarray(x)
        if config.debug_nans and np.isnan(arr).any():
            return "nan"
        if config.debug_infs and np.isinf(arr).any():
            return "inf"
    return None


def _dtype_of(x):
    """The dtype of an array (global ones included); None for host values (a NaN constant
    such as `x * np.nan` does not excuse the primitive it goes into) and anything else."""
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval.dtype
    if dtypes.is_host_value(x):
        return None
    try:
        return core.get_aval(x).dtype
    except TypeError:
        return None


def _as_arrays(args) -> list:
    """A jitted function's arguments as Arrays: a NaN argument then comes in already bad."""
    from fluxion._src.lax import lax
    return [lax._convert_element_type(x, None, dtypes.is_weakly_typed(x))
            if dtypes.is_host_value(x) else x for x in args]


def _error(kind: str, prim_name: str, where: str | None) -> FloatingPointError:
    at = f" at {where}" if where else ""
    return FloatingPointError(f"invalid value ({kind}) encountered in {prim_name}{at}")


def _no_culprit_error(kind: str, name: str) -> FloatingPointError:
    return FloatingPointError(
        f"invalid value ({kind}) encountered in the output of jit({name}). The de-optimized "
        f"function (the function run without `jit`, one primitive at a time) was run to find the "
        f"primitive that made it, but the de-optimized function did not produce an invalid "
        f"value itself: it may come from {kind} literals or inputs passed through (as in "
        f"`jit(lambda x: jnp.nan)(x)`), or from an optimization `jit` made.")


# Their bad outputs are reported as JAX reports them, naming no primitive.
_SHARDED_PRIMITIVES = frozenset({"shard_map", "xla_pmap"})


def _sharded_error(kind: str) -> FloatingPointError:
    return FloatingPointError(f"Invalid value ({kind}) encountered in sharded computation.")


def check_sharded_outputs(outs) -> None:
    """After a pmap: a NaN (Inf) in an output raises."""
    kind = _bad_kind(outs)
    if kind is not None:
        raise _sharded_error(kind)


def _checked_apply(prim, args, params):
    outs = _plain_apply(prim, args, params)
    kind = _bad_kind(outs if prim.multiple_results else [outs])
    if kind is not None and _bad_kind(args) != kind:
        if prim.name in _SHARDED_PRIMITIVES:
            raise _sharded_error(kind)
        raise _error(kind, prim.name, core.user_frame_summary())
    return outs


def check_jit_outputs(traced, args, outs) -> None:
    """After a jitted call: if an output is bad, re-run primitive by primitive and raise."""
    kind = _bad_kind(outs)
    if kind is None:
        return
    # JAX's notice (the same text for an inf), printed before the re-run.
    print("Invalid nan value encountered in the output of a jax.jit function. Calling the "
          "de-optimized version.")
    closed = traced.jaxpr
    found = _rerun(closed.jaxpr, closed.consts, _as_arrays(args))
    if found is not None:
        prim_name, info = found
        raise _error(kind, prim_name, info.summary() if info is not None else None)
    raise _no_culprit_error(kind, traced.name)


def check_eager_outputs(name: str, outs, rerun) -> None:
    """After an eager jnp function ran as one program: if an output is bad, `rerun` it op by
    op (each primitive checked: the first bad one raises); else name the function."""
    from fluxion._src.tree_util import tree_leaves
    kind = _bad_kind(tree_leaves(outs))
    if kind is None:
        return
    rerun()
    raise _error(kind, name, core.user_frame_summary())


class _Found(Exception):
    """Stops a re-run at the first bad equation; `found` is (primitive name, source info)."""

    def __init__(self, found):
        super().__init__()
        self.found = found


def _rerun(jaxpr, consts, args):
    """Evaluate `jaxpr` eagerly; (primitive name, source info) of the first bad output."""
    from fluxion._src import dispatch

    def step(eqn, ins):
        if eqn.primitive.impl is None:
            outs = dispatch.apply_primitive(eqn.primitive, ins, eqn.params)
        else:  # jit, control flow: their own eager binds may find it first
            try:
                outs = eqn.primitive.bind(*ins, **eqn.params)
            except FloatingPointError:
                if _bad_kind(ins) is not None:
                    raise
                raise _Found(_look_inside(eqn, ins) or (eqn.primitive.name, eqn.source_info))
        outs = outs if eqn.primitive.multiple_results else [outs]
        if _bad_kind(outs) is not None and _bad_kind(ins) is None:
            raise _Found(_look_inside(eqn, ins) or (eqn.primitive.name, eqn.source_info))
        return outs

    try:
        core.eval_jaxpr_with(jaxpr, consts, args, step)
    except _Found as stop:
        return stop.found
    return None


def _look_inside(eqn, ins):
    """Re-run a bad jit / cond / while / scan equation's body eagerly to find the culprit."""
    name, p = eqn.primitive.name, eqn.params
    if name == "jit":
        return _rerun(p["jaxpr"].jaxpr, p["jaxpr"].consts, ins)
    if name == "cond":
        index = int(np.clip(int(np.asarray(ins[0])), 0, len(p["branches"]) - 1))
        branch = p["branches"][index]
        return _rerun(branch.jaxpr, branch.consts, ins[1:])
    if name == "while":
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        cconsts, bconsts, carry = ins[:nc], ins[nc:nc + nb], list(ins[nc + nb:])
        cond, body = p["cond_jaxpr"], p["body_jaxpr"]
        while bool(core.eval_jaxpr(cond.jaxpr, cond.consts, *cconsts, *carry)[0]):
            found = _rerun(body.jaxpr, body.consts, [*bconsts, *carry])
            if found is not None:
                return found
            carry = core.eval_jaxpr(body.jaxpr, body.consts, *bconsts, *carry)
        return None
    if name == "scan":
        body, nconsts, ncarry = p["jaxpr"], p["num_consts"], p["num_carry"]
        consts, carry, xs = ins[:nconsts], list(ins[nconsts:nconsts + ncarry]), ins[nconsts + ncarry:]
        steps = range(p["length"] - 1, -1, -1) if p["reverse"] else range(p["length"])
        for t in steps:
            x_t = [x[t] for x in xs]
            found = _rerun(body.jaxpr, body.consts, [*consts, *carry, *x_t])
            if found is not None:
                return found
            carry = core.eval_jaxpr(body.jaxpr, body.consts, *consts, *carry, *x_t)[:ncarry]
        return None
    return None


def enabled() -> bool:
    return bool(config.debug_nans or config.debug_infs)


def _on_config_change(name, value) -> None:
    global _plain_apply
    if name not in ("debug_nans", "debug_infs"):
        return
    from fluxion._src import api, dispatch
    from fluxion._src.numpy import array_methods
    array_methods.shortcuts_enabled = not enabled()
    if enabled():
        if _plain_apply is None:
            _plain_apply = dispatch.apply_primitive
            core.apply_primitive = _checked_apply
        for jitted in list(api.live_jit_functions):  # calls must take the checking path
            jitted._fast_cache.clear()
        from fluxion._src.numpy import eager
        for cache in eager.fast_caches:
            cache.clear()
    elif _plain_apply is not None:
        core.apply_primitive = _plain_apply
        _plain_apply = None


config._listeners.append(_on_config_change)
if enabled():
    _on_config_change("debug_nans", True)
