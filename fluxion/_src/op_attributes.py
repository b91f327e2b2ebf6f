"""Frontend attributes of the ops traced inside a context (`set_xla_metadata`, `compute_on`).

The current attributes are recorded in each equation's `SourceInfo` when it is staged; lowering
adds them as `mhlo.frontend_attributes` to the ops defining the equation's results, as JAX
does. They are part of every jit cache key (a function traced again under other attributes
is lowered again).
"""
from __future__ import annotations

import contextlib
import re

from fluxion._src.user_context import UserContext

# A tuple of (name, value-as-string) pairs, in the order they were set, or None.
current = UserContext(None)
current.label = "XLA metadata (set_xla_metadata / compute_on)"  # named in cache-miss reports


def _as_text(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


@contextlib.contextmanager
def extend(updates: dict):
    """Set the attributes `updates` (a `None` value removes a name) inside the block."""
    if not updates:
        yield
        return
    merged = dict(current.value or ())
    for k, v in updates.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = _as_text(v)
    with current(tuple(merged.items()) or None):
        yield


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _name_text(k: str) -> str:
    """An attribute name: bare where MLIR allows, else quoted."""
    return k if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.$]*", k) else f'"{_escape(k)}"'


def _dict_text(attrs) -> str:
    return ", ".join(f'{_name_text(k)} = "{_escape(v)}"' for k, v in attrs)


def _matching(text: str, i: int) -> int:
    """Index just past the bracket closing the one at `text[i]` (strings are skipped)."""
    depth, in_str = 0, False
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced op text")


def add_to_op(line: str, attrs) -> str:
    """`line` (one op in generic syntax) with `attrs` added to its frontend attributes; those
    the op already has win."""
    start = line.index('"(', line.index(" = ")) + 1  # the operand list
    i = _matching(line, start)
    if line.startswith(" (", i):  # regions
        i = _matching(line, i + 1)
    if line.startswith(" {", i):  # an attribute dictionary: extend it
        end = _matching(line, i + 1) - 1
        body = line[i + 2:end]
        m = re.search(r"mhlo\.frontend_attributes = \{", body)
        if m:
            inner_end = _matching(body, m.end() - 1) - 1
            existing = body[m.end():inner_end]
            names = set(re.findall(r'([A-Za-z_"][^ ]*) = ', existing))
            new = [(k, v) for k, v in attrs if k not in names and f'"{k}"' not in names]
            if not new:
                return line
            body = body[:m.end()] + _dict_text(new) + (", " if existing else "") + body[m.end():]
        else:
            body = f"{body}, mhlo.frontend_attributes = {{{_dict_text(attrs)}}}"
        return line[:i + 2] + body + line[end:]
    return f"{line[:i]} {{mhlo.frontend_attributes = {{{_dict_text(attrs)}}}}}{line[i:]}"


def tag_results(lines: list, first_line: int, results, attrs) -> None:
    """Add `attrs` to the ops among `lines[first_line:]` that define `results` (Values)."""
    wanted = {r.name.split("#")[0] for r in results}
    for j in range(first_line, len(lines)):
        line = lines[j]
        lhs = line.split(" = ", 1)[0].split(":")[0] if " = " in line else None
        if lhs in wanted:
            lines[j] = add_to_op(line, attrs)


_COMPUTE_KEYS = ("_xla_compute_type", "_xla_stream_annotation", "inlineable")
_BROADCASTS = ('"stablehlo.broadcast_in_dim"(', '"stablehlo.dynamic_broadcast_in_dim"(')


def tag_equation(lines: list, first_line: int, results, attrs) -> None:
    """Add the attributes of an equation to its ops: all of them on the ops defining its
    `results`; the compute-type ones (`compute_on`) also on its broadcasts, as JAX's lowering
    helpers add them."""
    tag_results(lines, first_line, results, attrs)
    compute = tuple((k, v) for k, v in attrs if k in _COMPUTE_KEYS)
    if compute:
        for j in range(first_line, len(lines)):
            line = lines[j]
            if "\n" not in line and any(b in line for b in _BROADCASTS):
                lines[j] = add_to_op(line, compute)
