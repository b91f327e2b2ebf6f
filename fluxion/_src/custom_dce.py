"""`custom_dce`: functions with a user-defined dead-code-elimination rule.

A call binds `custom_dce_call`, whose equation holds the function's jaxpr (run by evaluation
and lowering) and the rule. When dead-code elimination of a jaxpr (staging's `dce_jaxpr`, run
on every traced jaxpr, so under `jit`) finds some of the equation's outputs unused, it asks
the rule for a computation of only the used ones, and drops the inputs that needs no more.
vmap batches the function and the rule; differentiation inlines the function's JVP (the rule
does not reach derivatives).
"""
from __future__ import annotations

import functools
from typing import Callable

from fluxion._src import ad, batching, core, effects, staging
from fluxion._src.api import _merge_args, fun_name
from fluxion._src.call_transforms import (batch_jaxpr, jvp_jaxpr, positional_args,
                                         trace_closure_converted)
from fluxion._src.compiler import lowering
from fluxion._src.core import ClosedJaxpr, Jaxpr, JaxprEqn
from fluxion._src.traceback_util import api_boundary
from fluxion._src.tree_util import tree_flatten, tree_unflatten

custom_dce_p = core.Primitive("custom_dce_call")
custom_dce_p.multiple_results = True


class custom_dce:
    """Give a function a rule that computes only the outputs its caller uses.

    >>> @custom_dce
    ... def f(x, y):
    ...     return jnp.sin(x) * y, x * jnp.sin(y)
    >>> @f.def_dce
    ... def f_dce(used_outs, x, y):
    ...     return (jnp.sin(x) * y if used_outs[0] else None,
    ...             x * jnp.sin(y) if used_outs[1] else None)

    Under `jit`, ``f(x, y)[0]`` then computes only ``sin(x) * y``. The rule receives a pytree
    of booleans shaped like the outputs (whether each is used) and the arguments; it returns
    the outputs' pytree with None in place of each unused output. Arguments named by
    `static_argnums` are passed to both as they are.
    """

    def __init__(self, fun: Callable, static_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.static_argnums = ((static_argnums,) if isinstance(static_argnums, int)
                               else tuple(static_argnums))
        self.dce_rule = None

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def def_dce(self, dce_rule: Callable) -> Callable:
        """Set the rule ``dce_rule(used_outs, *args) -> outputs (None where unused)``."""
        self.dce_rule = dce_rule
        return dce_rule

    @api_boundary
    def __call__(self, *args, **kwargs):
        name = fun_name(self.fun)
        args = positional_args(self.fun, args, kwargs, "custom_dce")
        if self.dce_rule is None:
            raise AttributeError(f"No DCE rule defined for custom_dce function {name} using "
                                 "def_dce.")
        statics = {i: args[i] for i in self.static_argnums}
        dyn = [a for i, a in enumerate(args) if i not in statics]
        fun = _with_statics(self.fun, statics)
        rule_fun = _with_statics(self.dce_rule, statics, leading=1)
        leaves, in_tree = tree_flatten(tuple(dyn))
        call, consts, out_tree = trace_closure_converted(
            lambda *a: fun(*a), in_tree, [core.get_aval(x) for x in leaves],
            origin=f"custom_dce({name})")
        rule = _FlatRule(rule_fun, _rule_name(self.dce_rule), name, in_tree, out_tree,
                         tuple(call.in_avals), tuple(call.out_avals), len(consts))
        outs = custom_dce_p.bind(*consts, *leaves, fun_jaxpr=call, rule=rule)
        return tree_unflatten(out_tree, outs)


def _with_statics(f, statics: dict, leading: int = 0):
    """`f` taking only the dynamic arguments (after `leading` ones), statics put back."""
    if not statics:
        return f
    static_pos = sorted(statics.items())

    def g(*args):
        return f(*args[:leading], *_merge_args(args[leading:], static_pos))
    return g


def _rule_name(rule) -> str:
    return getattr(rule, "__name__", "<unnamed rule>")


class _FlatRule:
    """The user's rule on flat values: `jaxpr(used)` is a ClosedJaxpr from all the equation's
    inputs (closed-over consts first) to the used outputs, checked against the function's."""

    def __init__(self, rule, rule_name, fun_name, in_tree, out_tree, in_avals, out_avals,
                 num_consts):
        self.rule, self.rule_name, self.fun_name = rule, rule_name, fun_name
        self.in_tree, self.out_tree = in_tree, out_tree
        self.in_avals, self.out_avals, self.num_consts = in_avals, out_avals, num_consts
        self._cache: dict = {}

    def jaxpr(self, used: tuple) -> ClosedJaxpr:
        hit = self._cache.get(used)
        if hit is None:
            hit = self._cache[used] = staging.trace_to_jaxpr(
                lambda *xs: self._flat(used, xs), list(self.in_avals),
                origin=f"custom_dce rule {self.rule_name}")
        return hit

    def _flat(self, used, xs):
        consts, args = xs[:self.num_consts], xs[self.num_consts:]
        # The function's closed-over values are tracers of its own trace; the rule closes
        # over its own, so the consts are not passed on.
        del consts
        out = self.rule(tree_unflatten(self.out_tree, list(used)),
                        *tree_unflatten(self.in_tree, list(args)))
        leaves, tree = tree_flatten(out, is_leaf=lambda x: x is None)
        if tree != self.out_tree:
            raise TypeError(f"Custom DCE rule {self.rule_name} for function {self.fun_name} "
                            f"must produce an output with the same container (pytree) "
                            f"structure as the function's, with None for unused outputs; "
                            f"got {tree}, expected {self.out_tree}.")
        outs = []
        for i, (u, x, aval) in enumerate(zip(used, leaves, self.out_avals)):
            if not u:
                continue
            if x is None:
                raise ValueError(f"Custom DCE rule {self.rule_name} for function "
                                 f"{self.fun_name} must produce values for all of the required "
                                 f"outputs (as specified by the `used_outs` argument to the "
                                 f"rule); output {i} is used but the rule returned None.")
            got = core.get_aval(x)
            if (got.shape, got.dtype) != (aval.shape, aval.dtype):
                raise TypeError(f"Custom DCE rule {self.rule_name} for function "
                                f"{self.fun_name} must produce values with the same shapes "
                                f"and dtypes as the function; output {i} is "
                                f"{got.str_short()}, expected {aval.str_short()}.")
            outs.append(x)
        return outs

    def __repr__(self):
        return self.rule_name


class _BatchedRule:
    """The rule of a batched custom_dce call: the rule's jaxpr batched as the function's
    was, every output batched at 0."""

    def __init__(self, rule, in_dims, axis_size):
        self.rule, self.in_dims, self.axis_size = rule, tuple(in_dims), axis_size

    def jaxpr(self, used: tuple) -> ClosedJaxpr:
        return _batched_all(self.rule.jaxpr(used), self.in_dims, self.axis_size)

    def __repr__(self):
        return f"vmap({self.rule!r})"


def _batched_all(closed: ClosedJaxpr, in_dims, axis_size: int) -> ClosedJaxpr:
    """`closed` batched over inputs at `in_dims`, with every output batched at 0."""
    from fluxion._src.lax import lax
    batched, out_batched = batch_jaxpr(closed, tuple(in_dims), None, axis_size)
    if all(out_batched):
        return batched

    def fun(*xs):
        outs = core.eval_jaxpr(batched.jaxpr, batched.consts, *xs)
        return [o if b else lax.broadcast(o, (axis_size,))
                for o, b in zip(outs, out_batched)]
    return staging.trace_to_jaxpr(fun, list(batched.in_avals), origin="custom_dce vmap")


def _dce_rule(used_outs: list, eqn: JaxprEqn) -> tuple[list, JaxprEqn]:
    """(used inputs, the equation computing only the used outputs from those inputs)."""
    if all(used_outs):
        return [True] * len(eqn.invars), eqn
    if not any(used_outs):
        if effects.has_effects(eqn):
            return [True] * len(eqn.invars), eqn
        return [False] * len(eqn.invars), None
    params = eqn.params
    rule = params["rule"]
    if rule is not None:
        closed = rule.jaxpr(tuple(used_outs))
    else:  # already pruned: drop outputs of its (plain) jaxpr
        j = params["fun_jaxpr"].jaxpr
        closed = ClosedJaxpr(staging.dce_jaxpr(Jaxpr(
            j.constvars, j.invars, [v for v, u in zip(j.outvars, used_outs) if u], j.eqns)),
            params["fun_jaxpr"].consts)
    live = staging.used_invars(closed.jaxpr)
    j = closed.jaxpr
    pruned = ClosedJaxpr(Jaxpr(j.constvars, [v for v, l in zip(j.invars, live) if l],
                               j.outvars, j.eqns, j.effects, j.debug_info), closed.consts)
    return live, JaxprEqn([v for v, l in zip(eqn.invars, live) if l],
                          [v for v, u in zip(eqn.outvars, used_outs) if u], custom_dce_p,
                          dict(params, fun_jaxpr=pruned, rule=None), eqn.source_info)


def _impl(*args, fun_jaxpr, rule):
    return core.eval_jaxpr(fun_jaxpr.jaxpr, fun_jaxpr.consts, *args)


def _batch(args, dims, *, fun_jaxpr, rule):
    axis_size = next(core.get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    args = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    in_dims = tuple(None if d is None else 0 for d in dims)
    fun = _batched_all(fun_jaxpr, in_dims, axis_size)
    new_rule = None if rule is None else _BatchedRule(rule, in_dims, axis_size)
    return custom_dce_p.bind(*args, fun_jaxpr=fun, rule=new_rule), [0] * len(fun.out_avals)


def _jvp(primals, tangents, *, fun_jaxpr, rule):
    nonzero = [type(t) is not ad.Zero for t in tangents]
    jvp_closed, out_nonzero = jvp_jaxpr(fun_jaxpr, nonzero)
    outs = core.eval_jaxpr(jvp_closed.jaxpr, jvp_closed.consts, *primals,
                           *[t for t in tangents if type(t) is not ad.Zero])
    n = len(fun_jaxpr.out_avals)
    nz = iter(outs[n:])
    return outs[:n], [next(nz) if z else ad.Zero(ad.tangent_aval(a))
                      for a, z in zip(fun_jaxpr.out_avals, out_nonzero)]


custom_dce_p.def_impl(_impl)
custom_dce_p.def_abstract_eval(lambda *avals, fun_jaxpr, rule: fun_jaxpr.out_avals)
batching.primitive_batchers[custom_dce_p] = _batch
ad.primitive_jvps[custom_dce_p] = _jvp
lowering.register_lowering(custom_dce_p,
                           lambda ctx, *args, fun_jaxpr, rule: ctx.lower_jaxpr(fun_jaxpr, args))
staging.dce_rules[custom_dce_p] = _dce_rule
