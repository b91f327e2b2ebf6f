"""`custom_gradient`: TensorFlow-style custom gradients, built on `custom_vjp`. The function
returns ``(value, vjp_fn)``; `vjp_fn` is staged to a jaxpr whose closed-over values are the
residuals of the custom_vjp."""
from __future__ import annotations

import functools
from typing import Callable

from fluxion._src import ad, core, staging
from fluxion._src.api import fun_name
from fluxion._src.custom_derivatives import custom_vjp
from fluxion._src.tree_util import (register_pytree_node, tree_flatten, tree_unflatten,
                                    treedef_is_leaf)


class _Residuals:
    """The staged rule: its closed-over values are the pytree's leaves; its jaxpr and trees
    are static."""

    def __init__(self, jaxpr, in_tree, out_tree, consts):
        self.jaxpr, self.in_tree, self.out_tree, self.consts = jaxpr, in_tree, out_tree, consts


register_pytree_node(_Residuals, lambda r: (r.consts, (r.jaxpr, r.in_tree, r.out_tree)),
                     lambda aux, consts: _Residuals(*aux, list(consts)))


def custom_gradient(fun: Callable) -> custom_vjp:
    """Define a function's gradient with the function itself (as ``tf.custom_gradient``).

    `fun(*args)` returns ``(value, vjp_fn)`` where ``vjp_fn(cotangent)`` returns one cotangent
    per argument (a single value is accepted for a one-argument function).

    >>> @custom_gradient
    ... def f(x):
    ...     return x ** 2, lambda g: (g * x,)
    """
    @functools.wraps(fun)
    def wrapped_fun(*args, **kwargs):
        ans, _ = fun(*args, **kwargs)
        return ans

    def fwd(*args, **kwargs):
        ans, rule = fun(*args, **kwargs)
        ans_flat, out_tree = tree_flatten((ans,))
        ct_avals = [ad.tangent_aval(core.get_aval(x)) for x in ans_flat]
        closed, in_tree = staging.trace_pytree_to_jaxpr(
            rule, out_tree, ct_avals, origin=f"custom_gradient({fun_name(fun)})")
        return ans, _Residuals(closed.jaxpr, in_tree, out_tree, list(closed.consts))

    def bwd(res, cts):
        cts_flat, out_tree = tree_flatten((cts,))
        if out_tree != res.out_tree:
            raise TypeError(f"{res.out_tree}\n!=\n{out_tree}")
        cts_out = core.eval_jaxpr(res.jaxpr, res.consts, *cts_flat)
        cts_out = tree_unflatten(res.in_tree, cts_out)
        return (cts_out,) if treedef_is_leaf(res.in_tree) else cts_out

    wrapped = custom_vjp(wrapped_fun)
    wrapped.defvjp(fwd, bwd)
    return wrapped
