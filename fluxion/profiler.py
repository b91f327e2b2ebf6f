"""Profiling on jaxlib's profiler (`jax.profiler`).

`start_trace(logdir)` / `stop_trace()` (or `with trace(logdir):`) write
`<logdir>/plugins/profile/<run>/<host>.xplane.pb` (TensorBoard, xprof) and
`<host>.trace.json.gz` (Perfetto, chrome://tracing). fluxion's own phases appear in the trace
as `fluxion.trace`, `fluxion.lower`, `fluxion.compile` and `fluxion.execute` annotations.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading

from fluxion._src import profiling as _profiling

_lock = threading.Lock()
_session = None
_logdir = None
_create_perfetto = False


def _profiler():
    from jaxlib import _profiler
    return _profiler


def start_trace(log_dir, create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
                profiler_options=None) -> None:
    """Start collecting a trace; `stop_trace` writes it under `log_dir`."""
    global _session, _logdir, _create_perfetto
    with _lock:
        if _session is not None:
            raise RuntimeError("Profile has already been started. Only one profile may be run "
                               "at a time.")
        prof = _profiler()
        from fluxion._src.compiler import backend
        backend.get_backend()  # the client must exist for its device events to be recorded
        options = profiler_options or prof.ProfileOptions()
        _session = prof.ProfilerSession(options)
        _logdir = str(log_dir)
        _create_perfetto = create_perfetto_trace or create_perfetto_link
        _profiling.set_active(True)


def stop_trace() -> None:
    """Stop the trace started by `start_trace` and write its files."""
    global _session, _logdir
    with _lock:
        if _session is None:
            raise RuntimeError("No profile started")
        session, logdir = _session, _logdir
        _session, _logdir = None, None
        _profiling.set_active(False)
        session.stop_and_export(logdir)
        if _create_perfetto:
            _write_perfetto_trace(logdir)


def _write_perfetto_trace(logdir: str) -> None:
    import glob
    import gzip
    import json
    runs = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*")))
    if not runs:
        return
    for path in glob.glob(os.path.join(runs[-1], "*.trace.json.gz")):
        with gzip.open(path, "rt") as f:
            data = json.load(f)
        data.pop("metadata", None)
        with gzip.open(os.path.join(runs[-1], "perfetto_trace.json.gz"), "wt") as f:
            json.dump(data, f)


@contextlib.contextmanager
def trace(log_dir, create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
          profiler_options=None):
    """Context manager: trace what runs inside it into `log_dir`."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


_PROFILE_DATA_NAMES = ("ProfileData", "ProfileEvent", "ProfilePlane")


def __getattr__(name):
    # jaxlib's readers of XSpace profiles (`ProfileData.from_file(".../host.xplane.pb")`,
    # `.from_serialized_xspace(bytes)`, `.planes`, `.find_plane_with_name(name)`), loaded on
    # first use so that importing fluxion does not load the profiler.
    if name in _PROFILE_DATA_NAMES:
        from jaxlib import _profile_data
        return getattr(_profile_data, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_PROFILE_DATA_NAMES))


def register_subprocess(pid: int, port: int):
    """Profile the process `pid`, whose profiler server listens on `port`, along with this
    one; returns a function that unregisters it. RuntimeError if it cannot be registered."""
    return _profiler().register_subprocess(pid, port)


def ProfileOptions():  # noqa: N802 - JAX's name
    """jaxlib's profiler options (host_tracer_level, python_tracer_level, ...)."""
    return _profiler().ProfileOptions()


class TraceAnnotation:
    """A named region in the trace (a no-op unless a trace is being collected)."""

    def __init__(self, name: str, **kwargs):
        self._me = _profiler().TraceMe(name, **kwargs)

    def __enter__(self):
        self._me.__enter__()
        return self

    def __exit__(self, *exc):
        return self._me.__exit__(*exc)


class StepTraceAnnotation(TraceAnnotation):
    """A training step in the trace: `with StepTraceAnnotation("train", step_num=i):`."""

    def __init__(self, name: str, **kwargs):
        super().__init__(name, _r=1, **kwargs)


def annotate_function(func=None, name: str | None = None, **kwargs):
    """Decorator putting every call of `func` in a `TraceAnnotation` named after it."""
    if func is None:
        return functools.partial(annotate_function, name=name, **kwargs)
    label = name or getattr(func, "__qualname__", getattr(func, "__name__", "function"))

    @functools.wraps(func)
    def wrapper(*args, **kw):
        with TraceAnnotation(label, **kwargs):
            return func(*args, **kw)
    return wrapper


_servers: dict = {}


def start_server(port: int):
    """Start a profiler server on `port` (for TensorBoard / xprof's "capture profile")."""
    if port in _servers:
        raise ValueError(f"Only one profiler server per port; {port} already has one")
    server = _profiler().start_server(port)
    _servers[port] = server
    return server


def stop_server() -> None:
    if not _servers:
        raise ValueError("No active profiler server.")
    for port in list(_servers):
        del _servers[port]  # jaxlib's server shuts down when its object is destroyed


def device_memory_profile(backend: str | None = None) -> bytes:
    """A pprof-format (gzipped protobuf) profile of the device memory in use."""
    from fluxion._src.compiler import backend as _backend
    client = _backend.get_backend(backend).client
    return client.heap_profile()


def save_device_memory_profile(filename, backend: str | None = None) -> None:
    """Write `device_memory_profile()` to `filename` (open it with `pprof`)."""
    profile = device_memory_profile(backend)
    with open(filename, "wb") as f:
        f.write(profile)
