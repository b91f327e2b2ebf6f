"""`ensure_compile_time_eval`: inside a traced function, operations whose inputs are all
concrete run at once (constant folding at trace time) instead of being staged."""
from __future__ import annotations

import contextlib

from fluxion._src import core
from fluxion._src.core import Trace, Tracer


class _CompileTimeEvalTrace(Trace):
    """Sits above the current trace: a primitive with no tracer among its inputs is evaluated
    eagerly; any other goes on to the trace below."""

    def __init__(self):
        self.parent = core.current_trace()
        self.is_live = True

    def process_primitive(self, primitive, args, params):
        concrete = not any(isinstance(x, Tracer) for x in args)
        with core.set_current_trace(core.eval_trace if concrete else self.parent):
            return primitive.bind(*args, **params)

    def __repr__(self):
        return f"CompileTimeEvalTrace({self.parent!r})"


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Context manager to evaluate computations on concrete values eagerly, even while a
    function is being staged out (by `jit`, `lax.scan`, ...), so that their results are
    concrete (usable in Python control flow) rather than tracers.

    Operations on traced values are staged as usual.
    """
    if core.current_trace() is core.eval_trace:
        yield
        return
    trace = _CompileTimeEvalTrace()
    try:
        with core.set_current_trace(trace):
            yield
    finally:
        trace.is_live = False
