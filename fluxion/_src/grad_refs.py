"""Cotangent destinations for `vjp`'s `with_refs` (JAX's `jax.ad` namespace): per primal,
the cotangent's value (`GradValue`), none at all (`DontWant`), or accumulation into a Ref."""
from __future__ import annotations

import dataclasses

from fluxion._src import core
from fluxion._src.tree_util import register_pytree_node, tree_flatten, tree_unflatten


@dataclasses.dataclass(frozen=True)
class GradValue:
    """Return this primal's cotangent as a value (the default)."""


@dataclasses.dataclass(frozen=True)
class DontWant:
    """Do not compute this primal's cotangent; `DidntWant()` stands in its place."""


@dataclasses.dataclass(frozen=True)
class GradRef:
    """Stands for a cotangent that was added into the Ref given for it."""


@dataclasses.dataclass(frozen=True)
class DidntWant:
    """Stands for a cotangent not computed (`DontWant`)."""


for _cls in (GradRef, DidntWant):  # empty pytrees, as JAX's (they can be returned from jit)
    register_pytree_node(_cls, lambda x: ((), None), lambda aux, children, cls=_cls: cls())


def _is_ref(x) -> bool:
    from fluxion._src.state.types import AbstractRef
    try:
        return isinstance(core.get_aval(x), AbstractRef)
    except TypeError:
        return False


def apply_with_refs(vjp_fun, maybe_ct_refs, cotangent):
    """`vjp_fun(cotangent)`, each primal's cotangent sent where `maybe_ct_refs` says."""
    is_dest = lambda x: isinstance(x, (GradValue, DontWant)) or _is_ref(x)  # noqa: E731
    dests, tree = tree_flatten(maybe_ct_refs, is_leaf=is_dest)
    in_tree = vjp_fun.static.in_tree
    if tree != in_tree:
        raise TypeError(f"with_refs needs one destination (GradValue(), DontWant() or a Ref) per "
                        f"primal, with the primals' structure {in_tree}; got {tree}.")
    cts = tree_flatten(vjp_fun(cotangent))[0]
    out = []
    for dest, ct in zip(dests, cts):
        if isinstance(dest, DontWant):
            out.append(DidntWant())
        elif _is_ref(dest):
            dest[...] = dest[...] + ct
            out.append(GradRef())
        else:
            out.append(ct)
    return tree_unflatten(in_tree, out)
