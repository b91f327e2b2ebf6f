"""JAX's rule for Refs passed to `jit`: one Ref may not reach a function twice, as two
arguments or as an argument and a closed-over value (the compiled program would hold two
copies of one buffer, and the last write would silently win)."""
from __future__ import annotations

import inspect

from fluxion._src import tree_util
from fluxion._src.state.types import is_ref


def referent(x):
    """The Ref a value stands for: differentiation wraps one Ref in a new tracer per argument,
    so two arguments are the same Ref when their primals are."""
    while hasattr(x, "primal") and is_ref(x):
        x = x.primal
    return x


def _positional_parameters(fun) -> list[str]:
    try:
        return [p.name for p in inspect.signature(fun).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _leaf_paths(in_tree, n_leaves) -> list[tuple]:
    return [p for p, _ in tree_util.tree_flatten_with_path(
        tree_util.tree_unflatten(in_tree, list(range(n_leaves))))[0]]


def _positional_name(params, path) -> str:
    """`path` = (index of a positional argument, path inside it): the parameter's name (or
    args[i]) with the path inside it."""
    i = getattr(path[0], "idx", None) if path else None
    base = params[i] if i is not None and i < len(params) else f"args[{i}]"
    return base + tree_util.keystr(tuple(path[1:]))


def _leaf_names(fun, in_tree, n_leaves) -> list[str]:
    """A name per flattened argument: the parameter's name, with the pytree path inside it."""
    params = _positional_parameters(fun)
    names = []
    for path in _leaf_paths(in_tree, n_leaves):
        head, rest = path[0], path[1:]
        if getattr(head, "idx", None) == 0 and rest:  # positional: (args, kwargs)[0][i]
            names.append(_positional_name(params, rest))
        else:
            names.append(tree_util.keystr(tuple(rest)) if rest else "kwargs")
    return names


def _where(fun, origin):
    name = getattr(fun, "__name__", type(fun).__name__)
    code = getattr(fun, "__code__", None)
    at = f" at {code.co_filename}:{code.co_firstlineno}" if code is not None else ""
    return f"{name}{at}"


def _check_aliases(leaves, consts, names, where, traced_for: str) -> None:
    """JAX's ValueError when one Ref is among `leaves` twice, or is both among them and among
    `consts` (the closed-over values of the traced function). `names()` (the leaves' names)
    and `where()` (the function's) are computed only to raise."""
    seen: dict[int, int] = {}
    for k, x in enumerate(leaves):
        if not is_ref(x):
            continue
        if id(referent(x)) in seen:
            raise ValueError(
                "only one reference to a mutable array may be passed as an argument to a "
                f"function, but when tracing {where()} for {traced_for} the mutable array "
                f"reference of type {x.aval} appeared at both "
                f"{names()[seen[id(referent(x))]]} and {names()[k]}.")
        seen[id(referent(x))] = k
    for c in consts:
        if is_ref(c) and id(referent(c)) in seen:
            raise ValueError(
                f"when tracing {where()} for {traced_for}, a mutable array reference of type "
                f"{c.aval} was both closed over and passed as the argument "
                f"{names()[seen[id(referent(c))]]}")


def check_ref_arguments(fun, leaves, in_tree, consts, origin: str = "jit") -> None:
    """JAX's aliasing rule for the arguments `(args, kwargs)` of a jit or vmap function."""
    _check_aliases(leaves, consts, lambda: _leaf_names(fun, in_tree, len(leaves)),
                   lambda: _where(fun, origin), origin)


def _user_function(fun):
    """The user's function under fluxion's wrappers (loop bodies keep it as `user_function`)."""
    inner = inspect.unwrap(fun)
    while hasattr(inner, "user_function"):
        inner = inspect.unwrap(inner.user_function)
    return inner


def operand_names(fun, in_tree, n_leaves) -> list[str]:
    """A name per flattened operand of a control-flow function called as `fun(*operands)`:
    the parameter's name with the pytree path inside it (``c[0]``, ``x1``)."""
    params = _positional_parameters(_user_function(fun))
    return [_positional_name(params, path) for path in _leaf_paths(in_tree, n_leaves)]


def check_operands(fun, leaves, in_tree, consts, traced_for: str) -> None:
    """JAX's aliasing rule for the operands of a control-flow function (scan, cond, ...):
    one Ref may not be two operands, nor an operand and a closed-over value."""
    _check_aliases(leaves, consts, lambda: operand_names(fun, in_tree, len(leaves)),
                   lambda: _where(_user_function(fun), traced_for), traced_for)


def check_no_returned_refs(fun, traced_for: str, out_leaves, out_tree, in_leaves,
                           in_names, trace) -> None:
    """JAX's ValueError for a traced function that returns a Ref, saying where the Ref came
    from: created in the function (with the line) or passed in as an argument."""
    for i, x in enumerate(out_leaves):
        if not is_ref(x):
            continue
        paths = _leaf_paths(out_tree, len(out_leaves))
        path = tree_util.keystr(tuple(paths[i])) if i < len(paths) else ""
        loc = f" at output tree path result{path}" if path else ""
        raise ValueError(
            f"function {_where(_user_function(fun), traced_for)} traced for {traced_for} "
            f"returned a mutable array reference of type {x.aval}{loc}, but "
            f"mutable array references cannot be returned.{_ref_origin(x, in_leaves, in_names, trace)}")


def _ref_origin(x, in_leaves, in_names, trace) -> str:
    for k, arg in enumerate(in_leaves):
        if arg is x:
            return ("\n\nThe returned mutable array was passed in as the argument "
                    f"{in_names[k]}.")
    var = getattr(x, "_var", None)
    if var is None or getattr(x, "_trace", None) is not trace:
        return ""
    for eqn in trace.eqns:
        if any(v is var for v in eqn.outvars):
            where = eqn.source_info.summary() if eqn.source_info is not None else "unknown"
            return f"\n\nThe returned mutable array was created on line {where}."
    return ""
