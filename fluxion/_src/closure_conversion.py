"""`closure_convert`: a function's closed-over values that may carry tangents become explicit
arguments, so that it can be passed to a `custom_vjp` function (whose rules differentiate only
with respect to arguments)."""
from __future__ import annotations

from typing import Callable

from fluxion._src import ad, batching, core, dtypes, staging
from fluxion._src.api import check_callable, fun_name
from fluxion._src.tree_util import tree_flatten, tree_unflatten


def _maybe_perturbed(x) -> bool:
    """False where `x` cannot carry a nonzero tangent (up to heuristics), as JAX decides."""
    if not isinstance(x, core.Tracer):
        return False
    if isinstance(x, ad.JVPTracer) and type(x.tangent) is ad.Zero:
        return _maybe_perturbed(x.primal)
    if isinstance(x, staging.JaxprTracer):  # staged now, maybe differentiated later
        return ad.tangent_aval(x.aval).dtype != dtypes.float0
    if isinstance(x, batching.BatchTracer):
        return _maybe_perturbed(x.val)
    return True


def closure_convert(fun: Callable, *example_args):
    """Closure conversion utility, for use with higher-order custom derivatives.

    Parameters
    ----------
    fun : the function to convert; it may close over traced values.
    *example_args : arguments (arrays or pytrees) with the types `fun` will be called with.

    Returns
    -------
    ``(converted_fun, consts)``: ``converted_fun(*args, *consts)`` computes ``fun(*args)``, the
    closed-over values that might be differentiated (`consts`) taken as trailing arguments.
    """
    check_callable(fun)
    leaves, in_tree = tree_flatten(example_args)
    in_avals = [core.get_aval(x) for x in leaves]
    closed, out_tree = staging.trace_pytree_to_jaxpr(
        fun, in_tree, in_avals, origin=f"closure_convert({fun_name(fun)})")
    consts = list(closed.consts)
    hoisted = [_maybe_perturbed(c) for c in consts]
    kept = [c for c, h in zip(consts, hoisted) if not h]
    const_args = [c for c, h in zip(consts, hoisted) if h]
    n_hoisted = len(const_args)

    def converted_fun(*args_hconsts):
        n_args = len(args_hconsts) - n_hoisted
        args, hconsts = args_hconsts[:n_args], args_hconsts[n_args:]
        kept_it, h_it = iter(kept), iter(hconsts)
        all_consts = [next(h_it) if h else next(kept_it) for h in hoisted]
        arg_leaves, in_tree2 = tree_flatten(tuple(args))
        if in_tree != in_tree2:
            raise TypeError("The inputs to the closure produced by closure_convert must have the "
                            "same Pytree structure as the example arguments passed when "
                            f"closure_convert was called. Expected {in_tree}, but got {in_tree2}")
        outs = core.eval_jaxpr(closed.jaxpr, all_consts, *arg_leaves)
        return tree_unflatten(out_tree, outs)

    converted_fun.__name__ = fun_name(fun)
    return converted_fun, const_args
