"""fluxion's phases (trace, lower, compile, execute) as profiler annotations.

`phase(name)` costs one global read when no trace is being collected."""
from __future__ import annotations

import contextlib

_active = False
_null = contextlib.nullcontext()


def set_active(active: bool) -> None:
    global _active
    _active = bool(active)


def is_active() -> bool:
    return _active


def phase(phase_name: str, **metadata):
    """A context manager annotating `fluxion.<name>` in the trace, when one is collected."""
    if not _active:
        return _null
    from jaxlib import _profiler
    return _profiler.TraceMe(f"fluxion.{phase_name}", **metadata)
