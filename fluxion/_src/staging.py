"""Staging Python functions into jaxprs: a trace that records every primitive it sees."""
from __future__ import annotations

import sys
from typing import Callable, Sequence

import numpy as np

from fluxion._src import core, effects, source_info
from fluxion._src.config import config
from fluxion._src.core import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, ShapedArray, Trace,
                               Tracer, Var)


class JaxprTracer(Tracer):
    __slots__ = ("_aval", "_var")

    def __init__(self, trace: "JaxprTrace", aval: ShapedArray, var: Var):
        self._trace = trace
        self._aval = aval
        self._var = var

    @property
    def aval(self):
        return self._aval

    def _short_repr(self) -> str:
        return self._trace.tracer_repr(self)


def _is_nested_in(trace, outer) -> bool:
    """Whether `trace` runs inside `outer` (`outer` is among its parents)."""
    trace = trace.parent
    while trace is not None:
        if trace is outer:
            return True
        trace = trace.parent
    return False


class JaxprTrace(Trace):
    """Records primitives applied to its tracers as equations of a new jaxpr.

    Values that are not this trace's tracers become constants: scalars inline as literals,
    everything else (arrays, and tracers of enclosing traces) as constvars.
    """

    def __init__(self, origin: str = "make_jaxpr"):
        self.eqns: list[JaxprEqn] = []
        self.invars: list[Var] = []
        self.constvars: list[Var] = []
        self.consts: list = []
        self._const_ids: dict[int, Var] = {}
        self.origin = origin
        self.is_live = True
        self.parent = core.current_trace()

    def new_arg(self, aval: ShapedArray) -> JaxprTracer:
        var = Var(aval)
        self.invars.append(var)
        return JaxprTracer(self, aval, var)

    def to_var(self, x):
        if isinstance(x, JaxprTracer) and x._trace is self:
            return x._var
        if isinstance(x, Tracer):
            if not x._trace.is_live:
                raise core.escaped_tracer_error(x)
            if _is_nested_in(x._trace, self):
                raise core.inner_tracer_error(x)
            return self._const_var(x, x.aval)
        aval = core.get_aval(x)
        if not aval.shape and type(aval) is ShapedArray:  # not a Ref
            return Literal(_scalar_value(x, aval), aval)
        return self._const_var(x, aval)

    def _const_var(self, x, aval) -> Var:
        var = self._const_ids.get(id(x))
        if var is None:
            var = self._const_ids[id(x)] = Var(aval)
            self.constvars.append(var)
            self.consts.append(x)
        return var

    def process_primitive(self, primitive, args, params):
        invars = [self.to_var(x) for x in args]
        out_avals = primitive.abstract_eval_avals([v.aval for v in invars], params)
        outvars = [Var(a) for a in out_avals]
        self.eqns.append(JaxprEqn(invars, outvars, primitive, params, source_info.current()))
        outs = [JaxprTracer(self, a, v) for a, v in zip(out_avals, outvars)]
        return outs if primitive.multiple_results else outs[0]

    def to_jaxpr(self, outs: Sequence) -> ClosedJaxpr:
        outvars = [self.to_var(x) for x in outs]
        jaxpr = dce_jaxpr(Jaxpr(self.constvars, self.invars, outvars, self.eqns))
        return prune_consts(ClosedJaxpr(jaxpr, self.consts))

    def __repr__(self):
        return "DynamicJaxprTrace"

    def tracer_repr(self, tracer: JaxprTracer) -> str:
        return f"JitTracer({tracer.aval})"


def _scalar_value(x, aval):
    if isinstance(x, Tracer):
        return x
    if type(x) in (bool, int, float, complex):
        np.array(x, dtype=aval.dtype)  # raises OverflowError for an int out of range
        return x  # as JAX keeps it: the Python value, printed as written
    value = np.asarray(x, dtype=aval.dtype)[()]
    if aval.weak_type:
        # A NumPy scalar would re-enter as a strongly typed value (an `add f 1` re-evaluated by
        # jvp or vmap would turn strong): keep the weak type by a Python scalar of that dtype.
        scalar = value.item()
        if core.get_aval(scalar).dtype == aval.dtype:
            return scalar
        return x
    return value


def trace_to_jaxpr(fun: Callable, in_avals: Sequence[ShapedArray], origin: str = "make_jaxpr"):
    """Trace `fun` (flat arrays in, flat list out) on abstract arguments: a ClosedJaxpr."""
    trace = JaxprTrace(origin)
    args = [trace.new_arg(a) for a in in_avals]
    try:
        with core.set_current_trace(trace):
            outs = fun(*args)
        closed = trace.to_jaxpr(outs)
    finally:
        trace.is_live = False
    if config.check_tracer_leaks:
        del args, outs
        _check_tracer_leaks(trace)
    return closed


def refs_among(leaves) -> bool:
    """Whether any of `leaves` is a Ref (False before any Ref exists)."""
    ref_types = sys.modules.get("fluxion._src.state.types")
    return ref_types is not None and any(map(ref_types.is_ref, leaves))


def trace_pytree_to_jaxpr(fun: Callable, in_tree, in_avals: Sequence[ShapedArray],
                          origin: str):
    """Trace `fun`, called with the pytree `in_tree` of abstract leaves `in_avals` and
    returning any pytree: (closed_jaxpr, out_tree)."""
    from fluxion._src.tree_util import tree_flatten, tree_unflatten
    box = []

    def flat_fun(*leaves):
        out_leaves, out_tree = tree_flatten(fun(*tree_unflatten(in_tree, leaves)))
        if refs_among(out_leaves):
            from fluxion._src.state import aliasing
            aliasing.check_no_returned_refs(
                fun, origin.split()[0], out_leaves, out_tree, leaves,
                aliasing.operand_names(fun, in_tree, len(leaves)), core.current_trace())
        box.append(out_tree)
        return out_leaves

    closed = trace_to_jaxpr(flat_fun, in_avals, origin=f"{origin} ({describe_function(fun)})")
    return closed, box[0]


def describe_function(fun) -> str:
    """'name at file:line' of the user's function (under its wrappers: `__wrapped__`, or the
    `user_function` of fluxion's loop bodies), for error messages."""
    import inspect
    inner = inspect.unwrap(fun)
    while hasattr(inner, "user_function"):
        inner = inspect.unwrap(inner.user_function)
    name = getattr(inner, "__name__", type(inner).__name__)
    code = getattr(inner, "__code__", None)
    return name if code is None else f"{name} at {code.co_filename}:{code.co_firstlineno}"


def _check_tracer_leaks(trace: JaxprTrace) -> None:
    """`config.check_tracer_leaks`: raise if a tracer of the finished `trace` is still alive."""
    import gc
    gc.collect()
    leaked = [o for o in gc.get_referrers(trace) if isinstance(o, JaxprTracer)]
    if leaked:
        raise core.escaped_tracer_error(leaked[0]).__class__(
            f"Leaked trace {trace.origin}: {len(leaked)} tracer(s) outlived it, e.g. "
            f"{leaked[0]!r}. A tracer was stored in a global, a closure or an object attribute; "
            "return it from the function instead.")


# primitive -> rule(used_outputs, eqn) -> (used_inputs, new_eqn or None), asked for each of
# the primitive's equations (JAX's `pe.dce_rules`; e.g. custom_dce_call): new_eqn computes
# the used outputs, None drops the equation. Without a rule an equation is kept whole when
# an output is used or it has effects.
dce_rules: dict = {}


def dce_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    """Drop equations whose outputs nothing uses (and constvars left unused)."""
    live = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    kept = []
    changed = False
    for eqn in reversed(jaxpr.eqns):
        used = [id(v) in live for v in eqn.outvars]
        rule = dce_rules.get(eqn.primitive)
        if rule is not None:
            _, new = rule(used, eqn)
            changed = changed or new is not eqn
            if new is None:
                continue
            eqn = new
        elif not any(used) and not (getattr(eqn.primitive, "has_side_effect", False)
                                    or effects.has_effects(eqn)):
            continue
        kept.append(eqn)
        live.update(id(v) for v in eqn.invars if isinstance(v, Var))
    kept.reverse()
    if not changed and len(kept) == len(jaxpr.eqns):
        return jaxpr
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, kept, jaxpr.effects, jaxpr.debug_info)


def _read_var_ids(jaxpr: Jaxpr) -> set:
    """The ids of the vars of `jaxpr` that an equation or an output reads."""
    read = {id(v) for e in jaxpr.eqns for v in e.invars if isinstance(v, Var)}
    read.update(id(v) for v in jaxpr.outvars if isinstance(v, Var))
    return read


def used_invars(jaxpr: Jaxpr) -> list[bool]:
    """Whether each input of `jaxpr` is read (by an equation or as an output)."""
    read = _read_var_ids(jaxpr)
    return [id(v) in read for v in jaxpr.invars]


def prune_consts(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Remove constvars that no equation or output uses."""
    jaxpr = closed.jaxpr
    used = _read_var_ids(jaxpr)
    pairs = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if id(v) in used]
    if len(pairs) == len(jaxpr.constvars):
        return closed
    return ClosedJaxpr(Jaxpr([v for v, _ in pairs], jaxpr.invars, jaxpr.outvars, jaxpr.eqns,
                             jaxpr.effects, jaxpr.debug_info), [c for _, c in pairs])
