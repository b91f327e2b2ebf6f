"""JAX's rule for Refs passed to `jit`: one Ref may not reach a function twice, as two
arguments or as an argument and a closed-over value (the compiled program would hold two
copies of one buffer, and the last write would silently win)."""
from __future__ import annotations

import inspect

from fluxion._src import tree_util
from fluxion._src.state.types import is_ref


def _leaf_names(fun, in_tree, n_leaves) -> list[str]:
    """A name per flattened argument: the parameter's name, with the pytree path inside it."""
    try:
        params = [p.name for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    paths = [p for p, _ in tree_util.tree_flatten_with_path(
        tree_util.tree_unflatten(in_tree, list(range(n_leaves))))[0]]
    names = []
    for path in paths:
        head, rest = path[0], path[1:]
        if getattr(head, "idx", None) == 0 and rest:  # positional: (args, kwargs)[0][i]
            i = getattr(rest[0], "idx", None)
            base = params[i] if i is not None and i < len(params) else f"args[{i}]"
            names.append(base + tree_util.keystr(tuple(rest[1:])))
        else:
            names.append(tree_util.keystr(tuple(rest)) if rest else "kwargs")
    return names


def _where(fun, origin):
    name = getattr(fun, "__name__", type(fun).__name__)
    code = getattr(fun, "__code__", None)
    at = f" at {code.co_filename}:{code.co_firstlineno}" if code is not None else ""
    return f"{name}{at}"


def check_ref_arguments(fun, leaves, in_tree, consts, origin: str = "jit") -> None:
    """Raise JAX's ValueError when one Ref is among `leaves` twice, or is both among them and
    among `consts` (the closed-over values of the traced function)."""
    seen: dict[int, int] = {}
    for k, x in enumerate(leaves):
        if not is_ref(x):
            continue
        if id(x) in seen:
            names = _leaf_names(fun, in_tree, len(leaves))
            raise ValueError(
                "only one reference to a mutable array may be passed as an argument to a "
                f"function, but when tracing {_where(fun, origin)} for {origin} the mutable "
                f"array reference of type {x.aval.str_short()} appeared at both "
                f"{names[seen[id(x)]]} and {names[k]}.")
        seen[id(x)] = k
    if not seen:
        return
    for c in consts:
        if is_ref(c) and id(c) in seen:
            names = _leaf_names(fun, in_tree, len(leaves))
            raise ValueError(
                f"when tracing {_where(fun, origin)} for {origin}, a mutable array reference "
                f"of type {c.aval.str_short()} was both closed over and passed as the argument "
                f"{names[seen[id(c)]]}")
