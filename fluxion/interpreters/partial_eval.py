"""Dead-code elimination of jaxprs and its per-primitive rules (the part of
`jax.interpreters.partial_eval` fluxion can honour).

A rule in `dce_rules` is ``rule(used_outputs, eqn) -> (used_inputs, new_eqn or None)``; it is
asked for every equation of its primitive, and `new_eqn` (None: drop the equation) computes
just the used outputs. Without a rule, an equation is kept whole when one of its outputs is
used or it has effects.
"""
from __future__ import annotations

from typing import Sequence

from fluxion._src import staging
from fluxion._src.core import Jaxpr
from fluxion._src.staging import dce_rules  # noqa: F401


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: bool | Sequence[bool],
              instantiate: bool | Sequence[bool] = False) -> tuple[Jaxpr, list[bool]]:
    """Remove from `jaxpr` what its used outputs do not need.

    Parameters
    ----------
    jaxpr : the Jaxpr to prune.
    used_outputs : which outputs are used (one bool for all).
    instantiate : inputs to keep even when unused (one bool for all).

    Returns
    -------
    ``(new_jaxpr, used_inputs)``: new_jaxpr has only the used outputs and inputs.
    """
    n_in, n_out = len(jaxpr.invars), len(jaxpr.outvars)
    used_outputs = ([used_outputs] * n_out if isinstance(used_outputs, bool)
                    else list(used_outputs))
    instantiate = [instantiate] * n_in if isinstance(instantiate, bool) else list(instantiate)
    if len(used_outputs) != n_out or len(instantiate) != n_in:
        raise ValueError(f"dce_jaxpr: {len(used_outputs)} used_outputs for {n_out} outputs, "
                         f"{len(instantiate)} instantiate flags for {n_in} inputs")
    outvars = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    pruned = staging.dce_jaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, outvars, jaxpr.eqns,
                                     jaxpr.effects, jaxpr.debug_info))
    used_inputs = [u or i for u, i in zip(staging.used_invars(pruned), instantiate)]
    return (Jaxpr(pruned.constvars, [v for v, u in zip(pruned.invars, used_inputs) if u],
                  pruned.outvars, pruned.eqns, pruned.effects, pruned.debug_info), used_inputs)
