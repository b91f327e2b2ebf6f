"""`compute_on`: mark the ops traced inside a block to run on another compute unit (the host,
a GPU stream, a sparse core). On CPU the marks are frontend attributes XLA ignores."""
from __future__ import annotations

import contextlib
import json

from fluxion._src import op_attributes, tree_util
from fluxion._src.memory import Space

_COMPUTE_TYPES = {"device_host": "host", "device": "dense", "tpu_sparsecore": "sparseoffload"}


def _check_valid(compute_type) -> None:
    if not isinstance(compute_type, str):
        raise TypeError("`compute_on`'s compute_type argument must be a string.")
    if compute_type not in _COMPUTE_TYPES and not compute_type.startswith("gpu_stream:"):
        raise ValueError(
            f"Invalid compute type {compute_type}. Current supported values are `device_host`, "
            "`device`, `tpu_sparsecore`, and `gpu_stream:#`.")


def _attributes(compute_type: str) -> dict:
    if compute_type.startswith("gpu_stream:"):
        return {"_xla_stream_annotation": compute_type.split(":", 1)[1], "inlineable": "false"}
    return {"_xla_compute_type": _COMPUTE_TYPES[compute_type]}


@contextlib.contextmanager
def compute_on(compute_type: str):
    """Context manager (or decorator) running the ops traced inside it on `compute_type`:
    ``'device_host'``, ``'device'``, ``'tpu_sparsecore'`` or ``'gpu_stream:<n>'``.
    An inner `compute_on` replaces an outer one."""
    _check_valid(compute_type)
    cleared = {"_xla_compute_type": None, "_xla_stream_annotation": None, "inlineable": None}
    with op_attributes.extend({**cleared, **_attributes(compute_type)}):
        yield


def compute_on2(f=None, *, compute_type, out_memory_spaces, compiler_options=None):
    """`f` with its ops run on `compute_type`, its results placed in `out_memory_spaces` (a
    `fluxion.memory.Space` or a pytree of them matching the results); usable as a decorator.

    fluxion marks the ops as `compute_on` does, and checks but does not honour the memory
    spaces and `compiler_options` (a dict) (see docs/differences.md)."""
    kwargs = dict(compute_type=compute_type, out_memory_spaces=out_memory_spaces,
                  compiler_options=compiler_options)
    if f is None:
        return lambda g: _compute_on2(g, **kwargs)
    return _compute_on2(f, **kwargs)


def _compute_on2(f, *, compute_type, out_memory_spaces, compiler_options):
    _check_valid(compute_type)
    if compiler_options is not None:
        json.dumps(compiler_options)  # JAX serializes them: unserializable ones raise TypeError

    def wrapped(*args):
        with compute_on(compute_type):
            out = f(*args)
        tree_util.broadcast_prefix(
            out_memory_spaces, out, lambda p: isinstance(p, Space),
            lambda p, t: ValueError(f"compute_on out_memory_spaces specification must be a tree "
                                    f"prefix of the corresponding value, got {p!r} for {t!r}"))
        return out
    return wrapped
