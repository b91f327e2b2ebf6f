"""Automatic differentiation: forward mode by JVP tracing, reverse mode by partial evaluation
of the JVP into a linear jaxpr and transposition of that jaxpr.

Tangents may be symbolic zeros (`Zero`), which rules skip. Integer and boolean values have
`float0` tangents, as in JAX.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from fluxion._src import core, dtypes, machinery_ops, staging
from fluxion._src.core import ShapedArray, Trace, Tracer

# primitive -> rule(primals, tangents, **params) -> (primal_out, tangent_out)
primitive_jvps: dict[core.Primitive, Callable] = {}
# primitive -> rule(cotangent, *args, **params) -> cotangents for args (None where not linear)
primitive_transposes: dict[core.Primitive, Callable] = {}
# Primitives whose JVP rule runs even when every input tangent is zero (creating a Ref: its
# tangent Ref must exist for later writes of nonzero tangents into it).
jvp_on_zero_tangents: set = set()
# Rewrites applied to a linear jaxpr before it is transposed: fun(jaxpr, consts) -> (jaxpr,
# consts), or None to leave it (the state module discharges local Refs here).
linear_jaxpr_rewrites: list[Callable] = []
# Primitives declared linear (deflinear) or with zero derivative (defjvp_zero): other
# transformations (jet) reuse these facts.
linear_primitives: set = set()
zero_jvp_primitives: set = set()


# ---------------------------------------------------------------------------------------------
# Symbolic zeros and tangent types

def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The type of tangents of values of type `aval` (float0 for integers and booleans)."""
    if dtypes.is_inexact(aval.dtype):
        return aval
    return ShapedArray(aval.shape, dtypes.float0, False)


class Zero:
    """A tangent or cotangent known to be zero, of type `aval`."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    @staticmethod
    def from_primal_value(x) -> "Zero":
        return Zero(tangent_aval(core.get_aval(x)))

    # As JAX's SymbolicZero (which custom_jvp rules with symbolic_zeros=True receive).
    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


def zeros_like_aval(aval: ShapedArray):
    """A concrete (or traced, under the current trace) array of zeros of type `aval`."""
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)
    return machinery_ops.full(aval.shape, 0, aval.dtype, aval.weak_type)


def instantiate(t):
    return zeros_like_aval(t.aval) if type(t) is Zero else t


def add_tangents(a, b):
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    return add_any_p.bind(a, b)


class UndefinedPrimal:
    """Marks a linear input of an equation being transposed."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x) -> bool:
    return type(x) is UndefinedPrimal


# ---------------------------------------------------------------------------------------------
# add_any: the sum of two tangents (of any type, float0 included); linear.

def _add_any_abstract_eval(x, y):
    return x.update(weak_type=x.weak_type and y.weak_type)


def _add_any_impl(x, y):
    if core.get_aval(x).dtype == dtypes.float0:
        return x
    return machinery_ops.add(x, y)


def _add_any_lowering(ctx, x, y):
    return ctx.add(x, y)


add_any_p = core.Primitive("add_any")
add_any_p.def_abstract_eval(_add_any_abstract_eval)
add_any_p.def_impl(_add_any_impl)


def _register_add_any():
    from fluxion._src.compiler import lowering
    lowering.register_lowering(add_any_p, _add_any_lowering)
    primitive_jvps[add_any_p] = lambda primals, tangents: (
        add_any_p.bind(*primals), add_tangents(*tangents))
    primitive_transposes[add_any_p] = lambda ct, x, y: [ct, ct]
    from fluxion._src import batching

    def batch(args, dims):
        (x, y), (dx, dy) = args, dims
        d = dx if dx is not None else dy
        size = core.get_aval(x if dx is not None else y).shape[d]
        return add_any_p.bind(batching.matchaxis(x, dx, d, size),
                              batching.matchaxis(y, dy, d, size)), d
    batching.primitive_batchers[add_any_p] = batch


_register_add_any()


# ---------------------------------------------------------------------------------------------
# Forward mode

class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        return core.get_aval(self.primal)

    def to_concrete_value(self):
        p = self.primal
        if isinstance(p, Tracer):
            return p.to_concrete_value()
        return p

    def _short_repr(self) -> str:
        primal = _tracer_or_value_str(self.primal)
        if isinstance(self._trace.parent, PartialEvalTrace):  # grad, vjp, linearize
            tangent_type = core.get_aval(self.tangent) if type(self.tangent) is not Zero \
                else self.tangent.aval
            return f"GradTracer(primal={primal}, typeof(tangent)={tangent_type.str_short()})"
        return f"JVPTracer(primal={primal}, tangent={_tracer_or_value_str(self.tangent)})"


def _tracer_or_value_str(x) -> str:
    return x._short_repr() if isinstance(x, Tracer) else str(x)


class JVPTrace(Trace):
    def __init__(self, origin: str = "jvp"):
        self.parent = core.current_trace()
        self.origin = origin
        self.is_live = True

    def __repr__(self):
        return "JVPTrace"

    def primal_tangent(self, x):
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        return x, Zero.from_primal_value(x)

    def process_primitive(self, primitive, args, params):
        primals, tangents = [], []
        for x in args:
            p, t = self.primal_tangent(x)
            primals.append(p)
            tangents.append(t)
        with core.set_current_trace(self.parent):
            if all(type(t) is Zero for t in tangents) and primitive not in jvp_on_zero_tangents:
                return primitive.bind(*primals, **params)
            rule = primitive_jvps.get(primitive)
            if rule is None:
                raise NotImplementedError(
                    f"Differentiation rule for '{primitive.name}' not implemented. Define one with "
                    f"fluxion.interpreters.ad.defjvp or primitive_jvps[{primitive.name}_p].")
            primal_out, tangent_out = rule(primals, tangents, **params)
        if primitive.multiple_results:
            return [self.wrap(p, t) for p, t in zip(primal_out, tangent_out)]
        return self.wrap(primal_out, tangent_out)

    def wrap(self, primal, tangent):
        if type(tangent) is Zero:
            return primal
        return JVPTracer(self, primal, tangent)


def _pin_host_values(values: Sequence) -> tuple[list, dict]:
    """Host values (Python and NumPy scalars, NumPy arrays) as Arrays of the type they have
    now, and a map from each new Array's id back to its host value. A host value's type
    follows the x64 flag, so an `enable_x64` inside the traced function would otherwise widen a
    primal but not the tangent created for it beside it."""
    from fluxion._src.array import make_array
    pinned, originals = [], {}
    for x in values:
        if dtypes.is_host_value(x) and np.result_type(x) != dtypes.float0:
            aval = core.get_aval(x)
            new = make_array(np.asarray(x), aval.dtype, aval.weak_type)
            originals[id(new)] = x
            x = new
        pinned.append(x)
    return pinned, originals


def jvp_flat(fun: Callable, primals: Sequence, tangents: Sequence, origin="jvp"):
    """Run `fun` (flat lists in and out) on JVP tracers; returns (primal_outs, tangent_outs),
    with symbolic Zero where an output's tangent is zero. Host inputs returned unchanged come
    back as given."""
    primals, originals = _pin_host_values(primals)
    tangents, t_originals = _pin_host_values(tangents)
    originals.update(t_originals)
    trace = JVPTrace(origin)
    # an input whose tangent is a symbolic zero (a float0 one) is passed as itself, as in JAX
    ins = [trace.wrap(p, t) for p, t in zip(primals, tangents)]
    try:
        with core.set_current_trace(trace):
            outs = fun(*ins)
        pairs = [trace.primal_tangent(x) for x in outs]
    finally:
        trace.is_live = False
    return ([originals.get(id(p), p) for p, _ in pairs],
            [originals.get(id(t), t) for _, t in pairs])


# ---------------------------------------------------------------------------------------------
# Partial evaluation: values known now are computed; the rest is staged into a jaxpr.

class PartialEvalTrace(staging.JaxprTrace):
    """Stages only equations with an unknown (staged) input; everything else runs at the parent
    trace. Known values used by staged equations become constvars (the residuals)."""

    def __repr__(self):
        return "PartialEvalTrace"

    def tracer_repr(self, tracer) -> str:
        return f"Traced<{tracer.aval}:JaxprTrace>"  # JAX's JaxprTracer (a linearized tangent)

    def process_primitive(self, primitive, args, params):
        for x in args:
            if isinstance(x, staging.JaxprTracer) and x._trace is self:
                rule = partial_eval_rules.get(primitive)
                if rule is not None:
                    return rule(self, primitive, args, params)
                return super().process_primitive(primitive, args, params)
        with core.set_current_trace(self.parent):
            return primitive.bind(*args, **params)

    def stage(self, primitive, args, params):
        """Record the equation as unknown, whatever its inputs (for partial-eval rules)."""
        return staging.JaxprTrace.process_primitive(self, primitive, args, params)

    def is_unknown(self, x) -> bool:
        return isinstance(x, staging.JaxprTracer) and x._trace is self


# primitive -> rule(trace, primitive, args, params): custom partial evaluation (call primitives)
partial_eval_rules: dict[core.Primitive, Callable] = {}


def linearize_flat(fun: Callable, primals: Sequence, origin="linearize"):
    """Returns (primal_outs, linear_jaxpr, out_tangent_is_zero): the jaxpr maps input tangents
    to output tangents, its constvars holding residuals computed now."""
    pe = PartialEvalTrace(origin)
    try:
        tangent_args = []
        for p in primals:
            aval = tangent_aval(core.get_aval(p))
            arg = pe.new_arg(aval)  # an invar either way, so the jaxpr takes one tangent per primal
            tangent_args.append(Zero(aval) if aval.dtype == dtypes.float0 else arg)
        with core.set_current_trace(pe):
            primal_outs, tangent_outs = jvp_flat(fun, primals, tangent_args, origin)
        zero_outs = [type(t) is Zero for t in tangent_outs]
        tangent_outs = [zeros_like_aval(t.aval) if type(t) is Zero else t for t in tangent_outs]
        with core.set_current_trace(pe):
            closed = pe.to_jaxpr(tangent_outs)
    finally:
        pe.is_live = False
    return primal_outs, closed, zero_outs


# ---------------------------------------------------------------------------------------------
# Transposition

def _literal_value(v: core.Literal):
    """A literal's value, as an Array of its aval's dtype where a host value would now be
    narrowed (a float64 literal traced under enable_x64, transposed outside it)."""
    aval = v.aval
    if isinstance(v.val, Tracer) or dtypes.canonicalize_dtype(aval.dtype) == aval.dtype:
        return v.val
    return machinery_ops.full(aval.shape, v.val, aval.dtype, aval.weak_type)


def backward_pass(jaxpr: core.Jaxpr, consts: Sequence, linear_args: Sequence,
                  cotangents_out: Sequence) -> list:
    """Transpose a linear jaxpr: given cotangents of its outputs, return cotangents of its
    invars (a symbolic Zero where nothing flows). Constvars hold non-linear residuals."""
    for rewrite in linear_jaxpr_rewrites:
        rewritten = rewrite(jaxpr, consts)
        if rewritten is not None:
            jaxpr, consts = rewritten
    primal_env: dict[int, object] = {}
    ct_env: dict[int, object] = {}
    linear_vars: set[int] = set()

    for v, c in zip(jaxpr.constvars, consts):
        primal_env[id(v)] = c
    for v, a in zip(jaxpr.invars, linear_args):
        if is_undefined_primal(a):
            linear_vars.add(id(v))
        else:
            primal_env[id(v)] = a

    # Equations with no linear input compute residuals: evaluate them forward first.
    linear_eqns = []
    for eqn in jaxpr.eqns:
        if any(type(v) is not core.Literal and id(v) in linear_vars for v in eqn.invars):
            linear_eqns.append(eqn)
            linear_vars.update(id(v) for v in eqn.outvars)
        else:
            ins = [_literal_value(v) if type(v) is core.Literal else primal_env[id(v)]
                   for v in eqn.invars]
            outs = eqn.primitive.bind(*ins, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            for v, x in zip(eqn.outvars, outs):
                primal_env[id(v)] = x

    def write_ct(v, ct):
        if type(v) is core.Literal or ct is None or type(ct) is Zero or id(v) not in linear_vars:
            return
        prev = ct_env.get(id(v))
        ct_env[id(v)] = ct if prev is None else add_tangents(prev, ct)

    for v, ct in zip(jaxpr.outvars, cotangents_out):
        write_ct(v, ct)

    for eqn in reversed(linear_eqns):
        cts = [ct_env.pop(id(v), None) for v in eqn.outvars]
        if all(ct is None for ct in cts):
            continue
        cts = [Zero(tangent_aval(v.aval)) if ct is None else ct for v, ct in zip(eqn.outvars, cts)]
        args = [_literal_value(v) if type(v) is core.Literal else
                UndefinedPrimal(v.aval) if id(v) in linear_vars else primal_env[id(v)]
                for v in eqn.invars]
        rule = primitive_transposes.get(eqn.primitive)
        if rule is None:
            raise NotImplementedError(
                f"Transpose rule (for reverse-mode differentiation) for '{eqn.primitive.name}' "
                "not implemented.")
        ct_arg = cts if eqn.primitive.multiple_results else cts[0]
        state = core._trace_state
        info = eqn.source_info
        outer_info, state.source_info = state.source_info, (
            info.transposed() if info is not None else state.source_info)
        try:  # the transposed equations point at the user's line of the forward one
            cts_in = rule(ct_arg, *args, **eqn.params)
        finally:
            state.source_info = outer_info
        for v, ct in zip(eqn.invars, cts_in):
            write_ct(v, ct)

    return [ct_env.get(id(v), Zero(tangent_aval(v.aval))) if id(v) in linear_vars else None
            for v in jaxpr.invars]


# ---------------------------------------------------------------------------------------------
# Rule-definition helpers (public as fluxion.interpreters.ad)

def defjvp(primitive: core.Primitive, *jvp_fns) -> None:
    """JVP of `primitive` as a sum of per-argument terms: jvp_fns[i](g, *primals, **params) is
    the tangent contribution of argument i given its tangent g (None: no dependence)."""
    _def_term_jvp(primitive, jvp_fns, with_output=False)


def defjvp2(primitive: core.Primitive, *jvp_fns) -> None:
    """Like defjvp, but each term also receives the primal output: fn(g, ans, *primals)."""
    _def_term_jvp(primitive, jvp_fns, with_output=True)


def _def_term_jvp(primitive, jvp_fns, with_output: bool) -> None:
    def rule(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        total = None
        for fn, t in zip(jvp_fns, tangents):
            if fn is None or type(t) is Zero:
                continue
            term = fn(t, out, *primals, **params) if with_output else fn(t, *primals, **params)
            total = term if total is None else add_tangents(total, term)
        if total is None:
            total = Zero.from_primal_value(out) if not primitive.multiple_results else [
                Zero.from_primal_value(o) for o in out]
        return out, total
    primitive_jvps[primitive] = rule


def defjvp_zero(primitive: core.Primitive) -> None:
    """`primitive`'s outputs do not depend differentiably on its inputs."""
    def rule(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        if primitive.multiple_results:
            return out, [Zero.from_primal_value(o) for o in out]
        return out, Zero.from_primal_value(out)
    primitive_jvps[primitive] = rule
    zero_jvp_primitives.add(primitive)


def deflinear(primitive: core.Primitive, transpose_rule: Callable) -> None:
    """`primitive` is linear in all its inputs: its JVP applies it to the tangents, and
    `transpose_rule(ct, *args, **params)` returns the cotangents of its inputs."""
    def jvp(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        tangents = [instantiate(t) for t in tangents]
        return out, primitive.bind(*tangents, **params)
    primitive_jvps[primitive] = jvp
    primitive_transposes[primitive] = transpose_rule
    linear_primitives.add(primitive)

