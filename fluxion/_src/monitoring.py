"""Event listeners (`jax.monitoring`): callbacks told about events, durations and scalars.

fluxion records JAX's compile-time events: the durations of tracing to a jaxpr, lowering to
StableHLO and backend compilation, under JAX's event names, each with `fun_name`.
"""
from __future__ import annotations

import time

JAXPR_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
JAXPR_TO_MLIR_MODULE_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

_event_listeners: list = []
_event_duration_secs_listeners: list = []
_event_time_span_listeners: list = []
_scalar_listeners: list = []


def record_event(event: str, **kwargs) -> None:
    """Tell the event listeners that `event` happened."""
    for callback in list(_event_listeners):
        callback(event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs) -> None:
    """Tell the duration listeners that `event` took `duration` seconds."""
    for callback in list(_event_duration_secs_listeners):
        callback(event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float, **kwargs) -> None:
    """Tell the time-span listeners that `event` ran from `start_time` to `end_time`."""
    for callback in list(_event_time_span_listeners):
        callback(event, start_time, end_time, **kwargs)


def record_scalar(event: str, value, **kwargs) -> None:
    """Tell the scalar listeners a value of `event`."""
    for callback in list(_scalar_listeners):
        callback(event, value, **kwargs)


def register_event_listener(callback) -> None:
    """Call `callback(event, **kwargs)` on each `record_event`."""
    _event_listeners.append(callback)


def register_event_duration_secs_listener(callback) -> None:
    """Call `callback(event, duration_secs, **kwargs)` on each recorded duration."""
    _event_duration_secs_listeners.append(callback)


def register_event_time_span_listener(callback) -> None:
    """Call `callback(event, start_time, end_time, **kwargs)` on each recorded time span."""
    _event_time_span_listeners.append(callback)


def register_scalar_listener(callback) -> None:
    """Call `callback(event, value, **kwargs)` on each recorded scalar."""
    _scalar_listeners.append(callback)


def _unregister(listeners: list, callback) -> None:
    assert callback in listeners
    listeners.remove(callback)


def unregister_event_listener(callback) -> None:
    _unregister(_event_listeners, callback)


def unregister_event_duration_listener(callback) -> None:
    _unregister(_event_duration_secs_listeners, callback)


def unregister_event_time_span_listener(callback) -> None:
    _unregister(_event_time_span_listeners, callback)


def unregister_scalar_listener(callback) -> None:
    _unregister(_scalar_listeners, callback)


def clear_event_listeners() -> None:
    """Remove every listener."""
    for listeners in (_event_listeners, _event_duration_secs_listeners,
                      _event_time_span_listeners, _scalar_listeners):
        listeners.clear()


def record_phase(event: str, start: float, fun_name: str) -> None:
    """Record a compile phase that began at `start` (time.perf_counter()) and ends now."""
    if not (_event_duration_secs_listeners or _event_time_span_listeners):
        return
    elapsed = time.perf_counter() - start
    end = time.time()
    record_event_duration_secs(event, elapsed, fun_name=fun_name)
    record_event_time_span(event, end - elapsed, end, fun_name=fun_name)
