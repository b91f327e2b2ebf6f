"""Runtime introspection: clear_caches, live_arrays, print_environment_info."""
from __future__ import annotations

import gc
import os
import platform
import sys


def clear_caches() -> None:
    """Drop every compiled program and traced jaxpr fluxion holds (jit caches, eager
    primitive executables), so the next call traces and compiles again."""
    from fluxion._src import api, dispatch, placement
    from fluxion._src.compiler import backend, hlo
    for jitted in list(api.live_jit_functions):
        jitted.clear_cache()
    api._caches_by_function.clear()  # those of jit objects already gone
    dispatch._primitive_cache.clear()
    dispatch._jaxpr_cache.clear()
    hlo._tensor_types.clear()
    backend._executables.clear()
    placement._scalar_copies.clear()


def live_arrays(platform: str | None = None) -> list:
    """The Arrays alive now whose buffers are not deleted (optionally on one platform)."""
    from fluxion._src.array import Array
    out = []
    for obj in gc.get_objects():
        if type(obj) is Array:
            buf = obj._buf
            if buf.is_deleted():
                continue
            if platform is not None and buf.platform() != platform:
                continue
            out.append(obj)
    return out


def print_environment_info(return_string: bool = False):
    """Print (or return) versions of fluxion, jaxlib, NumPy, Python, and the devices."""
    import numpy as np
    import fluxion
    lines = [f"fluxion:    {fluxion.__version__}"]
    try:
        import jaxlib
        lines.append(f"jaxlib:     {jaxlib.__version__}")
    except ImportError:
        lines.append("jaxlib:     not installed")
    lines.append(f"numpy:      {np.__version__}")
    lines.append(f"python:     {sys.version}")
    lines.append(f"device info: {_device_info()}")
    lines.append(f"process_count: 1")
    lines.append(f"platform:   {platform.uname()}")
    flags = {k: v for k, v in os.environ.items() if k.startswith(("XLA_", "JAX_", "FLUXION_"))}
    if flags:
        lines.append("environment: " + ", ".join(f"{k}={v}" for k, v in sorted(flags.items())))
    text = "\n".join(lines) + "\n"
    if return_string:
        return text
    print(text, end="")
    return None


def _device_info() -> str:
    try:
        from fluxion._src.compiler import backend
        b = backend.get_backend()
        kinds = sorted({d.device_kind for d in b.devices})
        return f"{', '.join(kinds)}-{len(b.devices)}, {len(b.devices)} local devices ({b.platform})"
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({e})"
