"""`custom_vmap`: functions with a user-defined batching rule, and `sequential_vmap`.

A call binds `custom_vmap_call`, whose equation holds the function's jaxpr (run by evaluation,
staging and lowering) and the rule (run by vmap). Its JVP is another `custom_vmap_call`: of the
JVP of the jaxpr, with a rule that differentiates the user's rule. Reverse mode is not
supported, as in JAX.
"""
from __future__ import annotations

import functools
from typing import Callable

from fluxion._src import ad, batching, core
from fluxion._src.api import fun_name
from fluxion._src.call_transforms import jvp_jaxpr, positional_args, trace_closure_converted
from fluxion._src.compiler import lowering
from fluxion._src.traceback_util import api_boundary
from fluxion._src.tree_util import tree_flatten, tree_map, tree_unflatten

custom_vmap_p = core.Primitive("custom_vmap_call")
custom_vmap_p.multiple_results = True


class custom_vmap:
    """Customize how a function is batched by `vmap`.

    >>> @custom_vmap
    ... def f(x, y):
    ...     return x + y
    >>> @f.def_vmap
    ... def f_vmap_rule(axis_size, in_batched, xs, ys):
    ...     return xs * ys, True
    >>> vmap(f)(jnp.arange(3), jnp.arange(1, 4))   # xs * ys
    Array([0, 2, 6], dtype=int32)

    The rule receives the batch size, a pytree of booleans (one per argument leaf: whether it is
    batched, along axis 0) and the arguments; it returns ``(outputs, out_batched)``.
    """

    def __init__(self, fun: Callable):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule = None

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def def_vmap(self, vmap_rule: Callable) -> Callable:
        """Set the rule ``vmap_rule(axis_size, in_batched, *args) -> (out, out_batched)``."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    @api_boundary
    def __call__(self, *args, **kwargs):
        name = fun_name(self.fun)
        args = positional_args(self.fun, args, kwargs, "custom_vmap")
        if not self.vmap_rule:
            raise AttributeError(f"No batching rule defined for custom_vmap function {name} "
                                 "using def_vmap.")
        if core.current_trace() is core.eval_trace:  # nothing to batch: run it as it is
            return self.fun(*args)
        leaves, in_tree = tree_flatten(args)
        call, consts, out_tree = trace_closure_converted(
            self.fun, in_tree, [core.get_aval(x) for x in leaves], origin=f"custom_vmap({name})")
        rule = _FlatRule(self.vmap_rule, in_tree, out_tree, len(consts))
        outs = custom_vmap_p.bind(*consts, *leaves, call=call, rule=rule)
        return tree_unflatten(out_tree, outs)


def _rule_name(rule) -> str:
    return getattr(rule, "__name__", "<unnamed rule>")


class _FlatRule:
    """The user's rule on flat lists: ``(axis_size, in_batched, args) -> (outs, out_batched)``,
    checking the trees it returns. The leading `num_consts` arguments are values the function
    closed over; they must not be batched."""

    def __init__(self, rule, in_tree, out_tree, num_consts):
        self.rule, self.in_tree, self.out_tree = rule, in_tree, out_tree
        self.num_consts = num_consts

    def __call__(self, axis_size, in_batched, args):
        n = self.num_consts
        if any(in_batched[:n]):
            raise NotImplementedError(
                f"custom_vmap function closes over a value batched by vmap (rule "
                f"{_rule_name(self.rule)}); pass it as an argument instead.")
        in_b = tree_unflatten(self.in_tree, list(in_batched[n:]))
        out, out_batched = self.rule(axis_size, list(in_b), *tree_unflatten(self.in_tree, args[n:]))
        outs, tree1 = tree_flatten(out)
        flags, tree2 = tree_flatten(out_batched)
        if tree1 != tree2:
            raise ValueError(f"structure of output value and output batching specification "
                             f"returned by custom vmap rule ({_rule_name(self.rule)}) do not "
                             f"match.\nOutput values: {tree1}\nBatching spec: {tree2}")
        if tree1 != self.out_tree:
            raise ValueError(f"structure of output returned by custom vmap rule "
                             f"({_rule_name(self.rule)}) does not match that of original "
                             f"custom-vmapped function.\nOriginal output: {self.out_tree}\n"
                             f"Rule output: {tree1}")
        return outs, [bool(b) for b in flags]

    def __repr__(self):
        return _rule_name(self.rule)


class _JvpOfRule:
    """The rule of the JVP of a custom_vmap function, from the rule of the function: arguments
    and tangents batched together go to the rule batched; those batched alone are batched
    around the JVP of the rule by ordinary vmap."""

    def __init__(self, rule):
        self.rule = rule

    def __call__(self, axis_size, in_batched, args):
        n = len(args) // 2
        pb, tb = in_batched[:n], in_batched[n:]
        mutual = [p and t for p, t in zip(pb, tb)]
        extra = [0 if p and not t else None for p, t in zip(pb, tb)] + \
                [0 if t and not p else None for p, t in zip(pb, tb)]
        mutual_out = []

        def to_jvp(*primals):
            outs, out_b = self.rule(axis_size, mutual, list(primals))
            mutual_out[:] = out_b
            return outs

        def jvp_of_rule(*ps_ts):
            out_p, out_t = ad.jvp_flat(to_jvp, ps_ts[:n], ps_ts[n:])
            return list(out_p) + [ad.instantiate(t) for t in out_t]

        outs, dims = batching.batch_flat(jvp_of_rule, list(args), extra, None, axis_size)
        outs = [o if d is None else batching.moveaxis(o, d, 0) for o, d in zip(outs, dims)]
        m = len(outs) // 2
        batched = [mb or d is not None for mb, d in zip(mutual_out * 2, dims)]
        return outs, batched[:m] + batched[m:]

    def __repr__(self):
        return f"jvp({self.rule!r})"


def _impl(*args, call, rule):
    return core.eval_jaxpr(call.jaxpr, call.consts, *args)


def _batch(args, dims, *, call, rule):
    axis_size = next(core.get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    args = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    outs, out_batched = rule(axis_size, [d is not None for d in dims], args)
    return outs, [0 if b else None for b in out_batched]


def _jvp(primals, tangents, *, call, rule):
    n = len(primals)
    tangents = [ad.instantiate(t) for t in tangents]
    jvp_call, _ = jvp_jaxpr(call, [True] * n, True)
    outs = custom_vmap_p.bind(*primals, *tangents, call=jvp_call, rule=_JvpOfRule(rule))
    m = len(outs) // 2
    return outs[:m], outs[m:]


def _partial_eval(trace, primitive, args, params):
    raise ValueError("Linearization failed to produce known values for all output primals. This "
                     "is typically caused by attempting to differentiate a function uses an "
                     "operation that does not support reverse-mode autodiff.")


custom_vmap_p.def_impl(_impl)
custom_vmap_p.def_abstract_eval(lambda *avals, call, rule: call.out_avals)
batching.primitive_batchers[custom_vmap_p] = _batch
ad.primitive_jvps[custom_vmap_p] = _jvp
ad.partial_eval_rules[custom_vmap_p] = _partial_eval
lowering.register_lowering(custom_vmap_p,
                           lambda ctx, *args, call, rule: ctx.lower_jaxpr(call, args))


def sequential_vmap(f: Callable) -> custom_vmap:
    """A `custom_vmap` whose batching rule runs `f` once per batch element, in a loop
    (`lax.map`) over the batched arguments, for functions that cannot batch natively."""
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        from fluxion._src.lax.control_flow import map as lax_map
        args = list(args)
        mapped = tree_map(lambda b, x: x if b else None, in_batched, args)
        unmapped = tree_map(lambda b, x: None if b else x, in_batched, args)

        def one(mapped_args):
            merged = tree_map(lambda b, m, u: m if b else u, in_batched, mapped_args, unmapped,
                              is_leaf=lambda x: x is None)
            return f(*merged)

        out = lax_map(one, mapped)
        return out, tree_map(lambda _: True, out)

    return f
