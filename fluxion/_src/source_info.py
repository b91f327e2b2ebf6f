"""Where each equation came from: the user's file:line and the name stack.

Staging records a `SourceInfo` on every equation; lowering writes it as an MLIR `loc(...)` on
the ops of that equation, so XLA's HLO metadata, dumps and profiles name the user's code.
`named_scope` and `named_call` add names to the stack; `jit` adds `jit(<function>)`.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import threading

from fluxion._src import core, op_attributes


class SourceInfo:
    __slots__ = ("file", "line", "function", "name_stack", "attrs", "column", "_locs",
                 "_transposed")

    def __init__(self, file: str, line: int, function: str, name_stack: str, attrs=None,
                 column: int = 0):
        self.file = file
        self.line = line
        self.column = column  # 0-based, of the expression that ran; 0 when unknown
        self.function = function
        self.name_stack = name_stack
        self.attrs = attrs  # frontend attributes of its ops (op_attributes), or None
        self._locs = None
        self._transposed = None

    def transposed(self) -> "SourceInfo":
        """This location with the name stack of its transposition: the last `jvp(...)` scope
        becomes `transpose(jvp(...))`, as JAX names the ops of a backward pass."""
        t = self._transposed
        if t is None:
            parts = self.name_stack.split("/") if self.name_stack else []
            jvps = [i for i, p in enumerate(parts) if p.startswith("jvp(")]
            if jvps:
                parts[jvps[-1]] = f"transpose({parts[jvps[-1]]})"
            else:
                parts.append("transpose")
            t = self._transposed = SourceInfo(self.file, self.line, self.function, "/".join(parts),
                                              self.attrs, self.column)
        return t

    def __repr__(self):
        return self.summary()

    def summary(self) -> str:
        return core.location_summary(self.file, self.line, self.column, self.function)

    def loc(self, prim_name: str) -> str:
        """` loc("<name stack>/<primitive>"("<file>":<line>:0))`, cached per primitive."""
        locs = self._locs
        if locs is None:
            locs = self._locs = {}
        text = locs.get(prim_name)
        if text is None:
            name = f"{self.name_stack}/{prim_name}" if self.name_stack else prim_name
            text = locs[prim_name] = f' loc("{_escape(name)}"("{_escape(self.file)}":{self.line}:0))'
        return text


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


class _NameStack(threading.local):
    def __init__(self):
        self.names: tuple = ()
        self.text: str = ""


_stack = _NameStack()
_internal: dict[str, bool] = {}


_interned: dict = {}


def current() -> SourceInfo | None:
    """The SourceInfo of the innermost frame outside fluxion (None if there is none), or that
    of the equation being re-evaluated (see `core._TraceState.source_info`)."""
    info = core._trace_state.source_info
    if info is not None:
        return info
    attrs = op_attributes.current.value
    frame = sys._getframe(2)
    internal = _internal
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename  # keyed by name: a code object's hash walks its contents
        is_internal = internal.get(filename)
        if is_internal is None:
            is_internal = internal[filename] = core._is_internal_file(filename)
        if not is_internal:
            key = (filename, frame.f_lineno, frame.f_lasti, code.co_name, _stack.text, attrs)
            info = _interned.get(key)
            if info is None:  # shared, so its loc(...) texts are built once
                if len(_interned) > 50000:
                    _interned.clear()
                info = _interned[key] = SourceInfo(
                    code.co_filename, frame.f_lineno, core.qualified_name(code), _stack.text,
                    attrs, core.frame_column(frame))
            return info
        frame = frame.f_back
    if attrs is not None:
        return SourceInfo("unknown", 0, "", _stack.text, attrs)
    return None


def name_stack() -> str:
    return _stack.text


@contextlib.contextmanager
def extend_name_stack(name: str):
    old_names, old_text = _stack.names, _stack.text
    _stack.names = old_names + (name,)
    _stack.text = "/".join(_stack.names)
    try:
        yield
    finally:
        _stack.names, _stack.text = old_names, old_text


def named_scope(name: str):
    """Context manager adding `name` to the name stack of the ops traced inside it
    (shown in StableHLO locations, HLO metadata and profiles)."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope name argument must be a string, got {name!r}")
    return extend_name_stack(name)


def named_call(fun, *, name: str | None = None):
    """`fun`, with its traced ops under `name` (default: its `__name__`) in the name stack."""
    label = name or getattr(fun, "__name__", "named_call")

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        with extend_name_stack(label):
            return fun(*args, **kwargs)
    return wrapper
