"""A second compiler: fluxion's StableHLO through IREE (`jit(f, backend="iree")`).

The module fluxion lowers for the CPU is compiled by `iree-base-compiler` for the `llvm-cpu`
target and run by `iree-base-runtime` on its `local-task` driver. Arguments arrive as fluxion
Arrays (jaxlib buffers on the CPU), are handed to IREE as host arrays, and the results come
back as fluxion Arrays, so an IREE-compiled function composes with everything else.

What IREE cannot take is refused before compiling, with the reason: custom calls (LAPACK,
FFT-free linear algebra kernels, jaxlib's own targets) and Python host callbacks exist only
in XLA. Compiled modules (.vmfb) go to the persistent compilation cache like XLA's.
"""
from __future__ import annotations

import functools
import logging
import re
import time

import numpy as np

from fluxion._src.compiler import backend
from fluxion._src.config import config

logger = logging.getLogger("fluxion")

_CUSTOM_CALL = re.compile(r'(?:call_target_name = |stablehlo\.custom_call @)"?([\w.\-]+)"?')
_FLAGS = ("--iree-llvmcpu-target-cpu=host",)


@functools.cache
def _iree():
    try:
        import iree.compiler as compiler
        import iree.runtime as runtime
    except ImportError as e:
        raise RuntimeError("backend='iree' needs the iree-base-compiler and iree-base-runtime "
                           f"packages (pip install iree-base-compiler iree-base-runtime): {e}"
                           ) from None
    return compiler, runtime


def is_available() -> bool:
    try:
        _iree()
        return True
    except RuntimeError:
        return False


@functools.cache
def _runtime_config():
    _, runtime = _iree()
    return runtime.Config("local-task")


def unsupported_reason(text: str) -> str | None:
    """Why IREE cannot compile this module, or None."""
    if getattr(text, "host_callbacks", None):
        return "it calls back into Python (host callbacks exist only in XLA)"
    targets = sorted(set(_CUSTOM_CALL.findall(text)))
    if targets:
        return (f"it uses the custom call target(s) {', '.join(targets)} (XLA's LAPACK, FFT or "
                "jaxlib kernels), which IREE does not provide")
    return None


class _Results:
    __slots__ = ("outs",)

    def __init__(self, outs):
        self.outs = outs

    def consume_with_handlers(self, handlers):
        return self.outs


class IreeLoaded:
    """An IREE module with jaxlib's `execute_sharded` interface (one device)."""

    def __init__(self, vmfb: bytes, module_name: str, arg_avals, out_avals, device):
        _, runtime = _iree()
        self.context = runtime.SystemContext(config=_runtime_config())
        self.context.add_vm_module(runtime.VmModule.copy_buffer(self.context.instance, vmfb))
        self.main = self.context.modules[module_name]["main"]
        self.arg_avals = list(arg_avals)
        self.out_avals = list(out_avals)
        self.device = device

    def execute_sharded(self, bufs):
        args = [backend.to_numpy(b, a.dtype) for b, a in zip(bufs, self.arg_avals)]
        outs = self.main(*args)
        if len(self.out_avals) == 1:
            outs = (outs,)
        elif outs is None:
            outs = ()
        result = []
        for o, aval in zip(outs, self.out_avals):
            # a copy: IREE's mapped memory must not outlive its buffer view
            host = np.array(o.to_host() if hasattr(o, "to_host") else o, dtype=aval.dtype)
            result.append(backend.device_put_numpy(host.reshape(aval.shape), aval, self.device))
        return _Results(result)


class IreeExecutable:
    """What `backend.Executable` is for XLA: the loaded module and its output types."""

    __slots__ = ("loaded", "out_avals", "handlers", "device", "name", "text")

    def __init__(self, loaded, out_avals, device, name, text):
        self.loaded, self.out_avals, self.device, self.name, self.text = (
            loaded, list(out_avals), device, name, text)
        self.handlers = None

    def execute(self, bufs: list) -> list:
        return self.loaded.execute_sharded(bufs).outs


def _module_name(text: str) -> str:
    m = re.match(r"\s*module @([\w$.\-]+)", text)
    return m.group(1) if m else "module"


def compile_module(text: str, arg_avals, out_avals, name: str = "main") -> IreeExecutable:
    """Compile fluxion's StableHLO `text` with IREE (llvm-cpu) and load it."""
    reason = unsupported_reason(text)
    if reason is not None:
        raise NotImplementedError(f"IREE cannot compile {name}: {reason}. Use the XLA backend "
                                  "for this function (jit without backend='iree').")
    compiler, _ = _iree()
    device = backend.get_backend("cpu").devices[0]
    vmfb = _compile_cached(compiler, str(text), name)
    loaded = IreeLoaded(vmfb, _module_name(text), arg_avals, out_avals, device)
    return IreeExecutable(loaded, out_avals, device, name, text)


def _compile_cached(compiler, text: str, name: str) -> bytes:
    from fluxion._src.compiler import compilation_cache as cc
    import importlib.metadata
    key = None
    if cc.is_enabled():
        version = importlib.metadata.version("iree-base-compiler")
        key = cc.cache_key(text, ("iree llvm-cpu " + version + " ".join(_FLAGS)).encode(),
                           _IreePlatform, _IreeDevice)
        vmfb = cc.get(key)
        if vmfb is not None:
            cc.stats["hits"] += 1
            if config.log_compiles:
                logger.warning("Persistent compilation cache hit for %s (IREE)", name)
            return vmfb
        cc.stats["misses"] += 1
    start = time.perf_counter()
    try:
        vmfb = compiler.compile_str(text, target_backends=["llvm-cpu"], input_type="stablehlo",
                                    extra_args=list(_FLAGS))
    except compiler.CompilerToolError as e:
        raise RuntimeError(f"IREE failed to compile {name}: {str(e)[-3000:]}") from None
    elapsed = time.perf_counter() - start
    if config.log_compiles:
        logger.warning("Finished IREE compilation of %s in %.3f sec", name, elapsed)
    if key is not None and elapsed >= cc._min_compile_time():
        cc.put(key, bytes(vmfb))
    return bytes(vmfb)


class _IreePlatform:
    platform = "iree-llvm-cpu"

    class client:
        platform_version = "local-task"


class _IreeDevice:
    device_kind = "host"
    id = 0
