"""The public functions of Refs (`fluxion.new_ref`, `fluxion.ref.*`) and `run_state`."""
from __future__ import annotations

from typing import Callable

from fluxion._src import core, staging, tree_util
from fluxion._src.state import stateful_call, transform_rules  # noqa: F401  (registrations)
from fluxion._src.state.discharge import discharge_state, eval_discharged
from fluxion._src.state.indexing import Slice, ds
from fluxion._src.state.primitives import (addupdate, empty_ref, free_ref, freeze, get,
                                           new_ref, set, swap)
from fluxion._src.state.types import AbstractRef, Ref

__all__ = ["AbstractRef", "Ref", "Slice", "addupdate", "discharge_state", "ds", "empty_ref",
           "free_ref", "freeze", "get", "new_ref", "run_state", "set", "swap"]


def run_state(f: Callable) -> Callable:
    """Run a function of Refs as a pure function of their initial values (`pl.run_state`).

    ``run_state(f)(init)`` makes a Ref holding each leaf of `init`, calls ``f(refs)`` (which
    returns None), and returns the pytree of the Refs' final values. The result is pure: it
    works under `jit`, `vmap` and `grad` like any other function.
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
        _, finals = eval_discharged(closed.jaxpr, closed.consts, leaves, [True] * len(leaves))
        return tree_util.tree_unflatten(tree, finals)
    return wrapped
