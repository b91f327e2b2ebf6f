"""What reverse-mode differentiation of a function saves (`jax.ad_checkpoint.
print_saved_residuals`): the residuals its `vjp` keeps, each with where it comes from."""
from __future__ import annotations

import builtins
from typing import Callable

from fluxion._src import core
from fluxion._src.core import Literal


def saved_residuals(f: Callable, *args, **kwargs) -> list[tuple]:
    """`(aval, source)` for each residual that `vjp(f, *args, **kwargs)` keeps."""
    from fluxion._src.ad_api import vjp
    from fluxion._src.api import make_jaxpr
    from fluxion._src.cache_misses import _arg_names
    from fluxion._src.checkpoint import name_p
    from fluxion._src.lax.structural import reduce_precision_p
    from fluxion._src.tree_util import tree_flatten, tree_unflatten

    leaves, in_tree = tree_flatten((args, kwargs))

    def flat(*xs):
        a, kw = tree_unflatten(in_tree, xs)
        return vjp(lambda *a: f(*a, **kw), *a)[1]  # the VJP's leaves are its residuals

    jaxpr = make_jaxpr(flat)(*leaves).jaxpr
    names = _arg_names(f, in_tree, len(leaves))
    # a residual rounded by reduce_precision is reported as the value it rounds
    through = {e.outvars[0]: e.invars[0] for e in jaxpr.eqns if e.primitive is reduce_precision_p}
    res = {through.get(v, v) for v in jaxpr.outvars if type(v) is not Literal}

    out = [(v.aval, "from a literal") for v in jaxpr.outvars if type(v) is Literal]
    out += [(v.aval, "from a constant") for v in jaxpr.constvars if v in res]
    out += [(v.aval, f"from the argument {n}") for v, n in zip(jaxpr.invars, names) if v in res]
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            if v not in res:
                continue
            where = eqn.source_info.summary() if eqn.source_info is not None else "unknown"
            if eqn.primitive is name_p:
                out.append((v.aval, f"named '{eqn.params['name']}' from {where}"))
            elif eqn.primitive.name in ("jit", "pjit"):
                out.append((v.aval, f"output of jitted function '{eqn.params.get('name')}' "
                                    f"from {where}"))
            else:
                out.append((v.aval, f"output of {eqn.primitive.name} from {where}"))
    return out


def print_saved_residuals(f: Callable, *args, **kwargs) -> None:
    """Print the residuals that reverse-mode differentiation of `f` at these arguments saves:
    one line per residual, its type and where it comes from (an argument, a named value, or
    the primitive and source line that computes it)."""
    for aval, src in saved_residuals(f, *args, **kwargs):
        builtins.print(f"{aval.str_short()} {src}")
