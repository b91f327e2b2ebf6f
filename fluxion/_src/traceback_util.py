"""Hide fluxion's internal frames from tracebacks of exceptions raised through public APIs.

A user's error (a shape mismatch in their function, a tracer used in `if`) then shows their own
lines and the API call, not the tracing machinery. Set `FLUXION_TRACEBACK_FILTERING=off` (or
`config.update("traceback_filtering", "off")`) to see everything.
"""
from __future__ import annotations

import functools
import os
import sys
import types

from fluxion._src.config import config

_INTERNAL_DIR = os.path.dirname(os.path.abspath(__file__))  # fluxion/_src


def _is_internal(frame) -> bool:
    return frame.f_code.co_filename.startswith(_INTERNAL_DIR)


def user_stacklevel() -> int:
    """`warnings.warn`'s stacklevel, called from inside fluxion, that names the first frame
    outside fluxion/_src (the user's line)."""
    frame, level = sys._getframe(2), 2  # the caller of warnings.warn's caller
    while frame is not None and _is_internal(frame):
        frame, level = frame.f_back, level + 1
    return level


def filter_traceback(tb):
    """A new traceback chain without the frames that belong to fluxion/_src."""
    kept = []
    while tb is not None:
        if not _is_internal(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    new = None
    for entry in reversed(kept):
        new = types.TracebackType(new, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return new


def _note_user_line_from(e: BaseException) -> None:
    """Note on `e` the innermost user frame its traceback passes through (once)."""
    from fluxion._src import core
    if getattr(e, "_fluxion_user_line", False):
        return
    tb, user = e.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not core._is_internal_file(code.co_filename):
            user = tb
        tb = tb.tb_next
    if user is None:
        return
    try:
        e._fluxion_user_line = True
    except AttributeError:
        return
    code = user.tb_frame.f_code
    e.add_note(f"at {code.co_filename}:{user.tb_lineno} ({code.co_name})")


def strip_internal_frames(e: BaseException) -> None:
    """Prepare `e` (being handled) to leave fluxion: note the user's line on shape and dtype
    errors and drop fluxion's frames from its traceback (unless filtering is off)."""
    if isinstance(e, (TypeError, ValueError)):
        _note_user_line_from(e)
    if config.traceback_filtering == "off":
        return
    # Filtered again at each boundary it leaves: frames of outer fluxion calls are added to the
    # traceback as the exception unwinds through them.
    filtered = filter_traceback(e.__traceback__)
    if filtered is not e.__traceback__ and not getattr(e, "_fluxion_filtered", False):
        e.add_note("(fluxion removed its internal frames from this traceback; set "
                   "FLUXION_TRACEBACK_FILTERING=off to see them)")
        try:
            e._fluxion_filtered = True
        except AttributeError:
            pass
    e.__traceback__ = filtered


def api_boundary(fun):
    """Decorate a public entry point so that exceptions leaving it carry a filtered traceback."""
    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            strip_internal_frames(e)
            raise
    return wrapper
