"""`config.explain_cache_misses`: log why `jit` traced a function again."""
from __future__ import annotations

import inspect
import logging

from fluxion._src.config import config

logger = logging.getLogger("fluxion")


def _where(fun) -> str:
    try:
        code = inspect.unwrap(fun).__code__
        return f"{code.co_filename}:{code.co_firstlineno}"
    except (AttributeError, ValueError):
        return "<unknown>"


def _arg_names(fun, in_tree, n: int) -> list[str]:
    try:
        from fluxion._src.tree_util import keystr, tree_flatten_with_path
        paths = [keystr(p) for p, _ in tree_flatten_with_path(
            in_tree.unflatten([0] * in_tree.num_leaves))[0]]
        try:
            params = list(inspect.signature(fun).parameters)
        except (TypeError, ValueError):
            params = []
        out = []
        for p in paths:
            # "[0][1]..." is (args, kwargs)[0][position]...; name the position when we can
            if p.startswith("[0]["):
                rest = p[4:]
                pos, _, tail = rest.partition("]")
                name = params[int(pos)] if pos.isdigit() and int(pos) < len(params) else f"args[{pos}]"
                out.append(name + tail)
            elif p.startswith("[1]"):
                out.append(p[3:].strip("[]'\""))
            else:
                out.append(p)
        return out
    except Exception:  # noqa: BLE001 - an explanation must never break a call
        return [f"argument {i}" for i in range(n)]


def _flag_changes(old, new) -> list:
    """Lines naming the configuration flags that differ between two `config.trace_key`s."""
    users = config._user_contexts  # make_user_context's, after the flags
    names = ("enable_x64", *config._trace_flags,
             *(getattr(c, "label", None) or f"user context #{i} (make_user_context)"
               for i, c in enumerate(users)))
    defaults = tuple(config._defaults[n] for n in config._trace_flags) + tuple(
        c.default for c in users)
    old = old if type(old) is tuple else (old, *defaults)
    new = new if type(new) is tuple else (new, *defaults)
    return [f"  {n} changed from {a} to {b}" for n, a, b in zip(names, old, new) if a != b]


def _describe(aval) -> str:
    return aval.str_short() + ("{weak_type=True}" if aval.weak_type else "")


def explanation(fun, cache: dict, key) -> str:
    """Why `key` missed `cache` (a jit's compiled-entry cache), in words."""
    name = getattr(fun, "__name__", type(fun).__name__)
    head = f"TRACING CACHE MISS for {name} defined at {_where(fun)} because:"
    if not cache:
        return f"{head} never seen function: {name} id={id(fun)}"
    in_tree, static_pos, static_kw, avals, x64 = key
    reasons = []
    best = None
    for old in cache:
        o_tree, o_pos, o_kw, o_avals, o_x64 = old
        diffs = []
        if o_x64 != x64:
            diffs.extend(_flag_changes(o_x64, x64))
        if o_pos != static_pos or o_kw != static_kw:
            diffs.append(f"  static arguments changed from {dict(o_pos) or dict(o_kw)} to "
                         f"{dict(static_pos) or dict(static_kw)}")
        if o_tree != in_tree:
            diffs.append(f"  the structure of the arguments changed from {o_tree} to {in_tree}")
        elif o_avals != avals:
            names = _arg_names(fun, in_tree, len(avals))
            for i, (a, b) in enumerate(zip(o_avals, avals)):
                if a is b:
                    continue
                what = " and ".join(n for n, changed in (
                    ("shape", a.shape != b.shape), ("dtype", a.dtype != b.dtype),
                    ("weak type", a.weak_type != b.weak_type)) if changed)
                label = names[i] if i < len(names) else f"argument {i}"
                diffs.append(f"  for argument {label}: {what} changed from {_describe(a)} to "
                             f"{_describe(b)}")
        if best is None or len(diffs) < len(best):
            best = diffs
    reasons = best or ["  an unknown reason"]
    return head + "\n" + "\n".join(reasons)


def explain(fun, cache: dict, key) -> None:
    try:
        logger.warning(explanation(fun, cache, key))
    except Exception:  # noqa: BLE001
        logger.warning("TRACING CACHE MISS for %s (no explanation available)",
                       getattr(fun, "__name__", fun))
