"""PJRT clients, devices, host<->device transfers and compiled executables (through jaxlib)."""
from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import logging
import os
import re
import threading
import time
import types

import numpy as np

from fluxion._src import dtypes
from fluxion._src.caches import BoundedDict
from fluxion._src.config import config

logger = logging.getLogger("fluxion")

_xla_client = None
_jax = None


def _jaxlib():
    global _xla_client, _jax
    if _xla_client is None:
        from jaxlib import _jax as jax_ext
        from jaxlib import xla_client
        # jaxlib records a Python traceback with every execution; without the jax package
        # loaded, each record leaks ~40 bytes (+4 MB over 100,000 calls). fluxion tracks
        # source locations itself and never reads these records.
        jax_ext.set_tracebacks_enabled(False)
        _xla_client, _jax = xla_client, jax_ext
    return _xla_client, _jax


# jaxlib 0.10 takes `_skip_checks` (its checks call back into the jax package); 0.11 dropped
# the argument. Known after the first call.
_takes_skip_checks: bool | None = None


def _with_skip_checks(make, *args):
    global _takes_skip_checks
    if _takes_skip_checks is None:
        try:
            out = make(*args, _skip_checks=True)
            _takes_skip_checks = True
            return out
        except TypeError:
            _takes_skip_checks = False
    return make(*args, _skip_checks=True) if _takes_skip_checks else make(*args)


def result_handler(aval, sharding, committed: bool = True):
    """jaxlib's wrapper of an execution's output as an array of `aval`."""
    return _with_skip_checks(_jaxlib()[1].array_result_handler, aval, sharding, committed)


def assemble_array(aval, sharding, bufs: list):
    """A committed jaxlib array of `aval` from one buffer per device of `sharding`."""
    return _with_skip_checks(_jaxlib()[1].ArrayImpl, aval, sharding, bufs, True)


class Backend:
    """A PJRT client and what fluxion caches about it."""

    def __init__(self, client, platform: str):
        self.client = client
        self.platform = platform
        self.devices = client.local_devices()
        self._shardings = {}

    def sharding(self, device, committed: bool = False):
        """The sharding object of fluxion's buffers on `device`. Committed buffers get
        another object than uncommitted ones, so that one identity check of a buffer's
        `_sharding` tells its device and that it is uncommitted (dispatch's fast paths)."""
        key = (device, committed)
        s = self._shardings.get(key)
        if s is None:
            s = self._shardings[key] = _make_sharding(device)
        return s


@functools.cache
def _sharding_class():
    xla_client, jax_ext = _jaxlib()

    class DeviceSharding(jax_ext.SingleDeviceSharding):
        """A single-device sharding with the attributes jaxlib's C++ reads from Python."""

        memory_kind = None
        is_fully_addressable = True

        @property
        def _device_assignment(self):
            return (self._device,)

        @property
        def _internal_device_list(self):
            return xla_client.DeviceList((self._device,))

        def _to_xla_hlo_sharding(self, ndim):
            return xla_client.HloSharding.replicate()

        def is_fully_replicated(self):
            return True

    return DeviceSharding


def _make_sharding(device):
    return _sharding_class()(device)  # the C++ base class provides `_device`


def _cpu_device_count() -> int:
    if int(config.num_cpu_devices) >= 0:  # jax_num_cpu_devices, or FLUXION_NUM_CPU_DEVICES
        return int(config.num_cpu_devices)
    flags = os.environ.get("XLA_FLAGS", "")
    for flag in flags.split():
        if flag.startswith("--xla_force_host_platform_device_count="):
            return int(flag.split("=", 1)[1])
    return 1


# Set by fluxion.distributed.initialize: joins the CPU client to a multi-process run.
distributed_options = None


def _make_cpu():
    xla_client, _ = _jaxlib()
    client = xla_client.make_cpu_client(asynchronous=True, num_devices=_cpu_device_count(),
                                        **(distributed_options or {}))
    return Backend(client, "cpu")


def _find_cuda_plugin() -> str | None:
    try:
        import importlib.util
        for name in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
            spec = importlib.util.find_spec(name)
            if spec and spec.submodule_search_locations:
                for loc in spec.submodule_search_locations:
                    hits = glob.glob(os.path.join(loc, "xla_cuda_plugin.so"))
                    if hits:
                        return hits[0]
    except (ImportError, ValueError):
        return None
    return None


def _cuda_plugin_extension():
    """jaxlib's CUDA plugin extension (custom-call and FFI-type registration), if installed."""
    import importlib
    for package in ("jax_cuda13_plugin", "jax_cuda12_plugin", "jaxlib.cuda"):
        try:
            return importlib.import_module(f"{package}.cuda_plugin_extension")
        except ImportError:
            continue
    return None


def _make_cuda():
    xla_client, _ = _jaxlib()
    path = _find_cuda_plugin()
    if path is None:
        raise RuntimeError("no CUDA PJRT plugin found (install jax-cuda12-pjrt or jax-cuda13-pjrt)")
    if not xla_client.pjrt_plugin_loaded("cuda"):
        c_api = xla_client.load_pjrt_plugin_dynamically("cuda", path)
        _register_cuda_custom_calls(xla_client, c_api)
    if not xla_client.pjrt_plugin_initialized("cuda"):
        xla_client.initialize_pjrt_plugin("cuda")
    # The allocator settings JAX reads (XLA_PYTHON_CLIENT_PREALLOCATE, XLA_CLIENT_MEM_FRACTION,
    # XLA_PYTHON_CLIENT_ALLOCATOR, ...): without them the plugin takes 75% of the GPU at start.
    options = xla_client.generate_pjrt_gpu_plugin_options()
    client = xla_client.make_c_api_client("cuda", options)
    return Backend(client, "cuda")


def _register_cuda_custom_calls(xla_client, c_api) -> None:
    """Route custom-call registrations for "CUDA" to the plugin just loaded, and register the
    plugin's own FFI handlers (the Python host-callback targets among them).

    When another library loaded the plugin first, it has done this already."""
    extension = _cuda_plugin_extension()
    if extension is None:
        logger.warning("jaxlib's cuda_plugin_extension is missing: host callbacks and "
                       "linear algebra will not compile for CUDA")
        return
    xla_client.register_custom_type_handler(
        "CUDA", functools.partial(extension.register_custom_type, c_api))
    xla_client.register_custom_call_handler(
        "CUDA", functools.partial(extension.register_custom_call_target, c_api))
    for name, type_id in extension.ffi_types().items():
        xla_client.register_custom_type(name, type_id, platform="CUDA")
    for name, handler in extension.ffi_handlers().items():
        xla_client.register_custom_call_target(name, handler, platform="CUDA", api_version=1)


_FACTORIES = {"cpu": _make_cpu, "cuda": _make_cuda}
_backends: dict[str, Backend] = {}
_failed: dict[str, str] = {}
# Creating a client twice would give two sets of devices named alike whose buffers and
# executables do not mix; threads making their first calls at once must share one.
_backends_lock = threading.RLock()


def _requested_platforms() -> list[str]:
    requested = config.platforms or os.environ.get("JAX_PLATFORMS") or ""
    names = [p.strip().lower() for p in str(requested).split(",") if p.strip()]
    return ["cuda" if n == "gpu" else n for n in names]


def get_backend(platform: str | None = None) -> Backend:
    """The backend for `platform`, or the default one: a GPU where available, else the CPU."""
    backend = _backends.get("__default__" if platform is None else platform)
    if backend is not None:
        return backend
    with _backends_lock:
        return _get_backend_locked(platform)


def _get_backend_locked(platform: str | None) -> Backend:
    if platform is not None:
        platform = "cuda" if platform == "gpu" else platform.lower()
        if platform not in _backends:
            if platform not in _FACTORIES:
                raise RuntimeError(f"Unknown backend '{platform}'; known: {sorted(_FACTORIES)}")
            _backends[platform] = _FACTORIES[platform]()
        return _backends[platform]
    default = _backends.get("__default__")
    if default is not None:
        return default
    named = str(config.platform_name or "").lower()  # jax_platform_name, deprecated in JAX
    order = ([named] if named else None) or _requested_platforms() or ["cuda", "cpu"]
    errors = []
    for name in order:
        if name == "cuda" and not _requested_platforms() and _find_cuda_plugin() is None:
            continue
        try:
            backend = get_backend(name)
        except Exception as e:  # a missing plugin or a machine without the device
            errors.append(f"{name}: {e}")
            continue
        _backends["__default__"] = backend
        return backend
    raise RuntimeError("Unable to initialize any backend: " + "; ".join(errors))


def runtime_error_class() -> type:
    """jaxlib's JaxRuntimeError (a RuntimeError): what failed compiles and executions raise."""
    return _jaxlib()[1].JaxRuntimeError


def default_device():
    """The device uncommitted values go to: the `default_device` flag (a device, or a
    platform name for that backend's first device), else the default backend's first."""
    device = config.default_device
    if device is None:
        return get_backend().devices[0]
    if isinstance(device, str):
        return get_backend(device).devices[0]
    return device


# ---------------------------------------------------------------------------------------------
# Transfers

def device_put_numpy(x: np.ndarray, aval, device=None, committed: bool = False):
    """Copy a host array (already of the aval's dtype) to a device (default: the default
    device); returns a jaxlib array, committed to its device if `committed`."""
    xla_client, _ = _jaxlib()
    if device is None:
        device = default_device() if config.default_device is not None else (
            get_backend().devices[0])
    elif committed or device != get_backend().devices[0]:
        from fluxion._src import placement
        placement.activate()
    return xla_client.batched_device_put(aval, backend_of(device).sharding(device, committed),
                                         [x], [device], committed,
                                         enable_x64=config.enable_x64)


def duplicate(buf):
    """A new buffer with `buf`'s value, sharding and devices (donating or deleting either one
    leaves the other)."""
    xla_client, jax_ext = _jaxlib()
    return jax_ext.batched_copy_array_to_devices_with_sharding(
        [buf], [buf._sharding._internal_device_list], [buf._sharding],
        [xla_client.ArrayCopySemantics.ALWAYS_COPY])[0]


def copy_to_device(buf, device):
    """`buf` (a single-device jaxlib array) copied to `device`, keeping its committedness;
    `buf` itself where it already lives there."""
    if buf._sharding._device == device:
        return buf
    xla_client, jax_ext = _jaxlib()
    source = buf._sharding._device
    committed = bool(buf._committed)
    sharding = backend_of(device).sharding(device, committed)
    if source.client is device.client:
        out = jax_ext.batched_copy_array_to_devices_with_sharding(
            [buf], [xla_client.DeviceList((device,))], [sharding],
            [xla_client.ArrayCopySemantics.REUSE_INPUT])[0]
        return out if bool(out._committed) == committed else (
            out._rewrap_with_aval_and_sharding(out.aval, sharding))
    # Another platform's client: through the host.
    host = to_numpy(buf, buf.aval.dtype)
    return xla_client.batched_device_put(buf.aval, sharding, [host], [device], committed,
                                         enable_x64=config.enable_x64)


def committed_copy(buf):
    """`buf` as a committed array (the same device memory)."""
    if buf._committed:
        return buf
    device = buf._sharding._device
    return buf._rewrap_with_aval_and_sharding(buf.aval, backend_of(device).sharding(device, True))


def backend_of(device) -> Backend:
    platform = device.platform
    platform = "cuda" if platform == "gpu" else platform
    return get_backend(platform)


class _DLPackCapsule:
    """Hands a DLPack capsule to numpy.from_dlpack."""

    __slots__ = ("capsule",)

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, *args, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


# DLPack has no code for these; they go through jaxlib's own conversion.
_NO_DLPACK = frozenset([dtypes.bfloat16, dtypes.float0])


def to_numpy(buf, dtype) -> np.ndarray:
    """A host copy of a device buffer.

    On CPU this goes through DLPack: jaxlib's own conversion imports the jax package as a side
    effect where jax is installed (hundreds of milliseconds, and not ours to depend on). The
    copy keeps the result valid after the buffer is donated or deleted."""
    if dtype not in _NO_DLPACK and buf.platform() == "cpu":
        _, jax_ext = _jaxlib()
        capsule = jax_ext.buffer_to_dlpack_managed_tensor(buf)
        return np.from_dlpack(_DLPackCapsule(capsule)).copy()
    arr, _ = buf._single_device_array_to_np_array_did_copy()
    return arr


# ---------------------------------------------------------------------------------------------
# Compilation

# jaxlib's result handlers read only these three attributes.
_TOKEN_BUFFER_AVAL = types.SimpleNamespace(shape=(0,), dtype=np.dtype(np.bool_), weak_type=False)


class Executable:
    """A compiled module and the handlers that wrap its outputs."""

    __slots__ = ("loaded", "out_avals", "handlers", "committed_handlers", "device", "name",
                 "text")

    def __init__(self, loaded, out_avals, device, name, text):
        _, jax_ext = _jaxlib()
        self.loaded = loaded
        self.out_avals = list(out_avals)
        self.device = device
        self.name = name
        self.text = text
        backend = backend_of(device)
        # A token result comes back as a buffer of shape (0,) (as JAX reads it). Outputs are
        # uncommitted, or committed when an input was (`committed_handlers`).
        avals = [_TOKEN_BUFFER_AVAL if getattr(a, "is_token", False) else a
                 for a in self.out_avals]
        self.handlers = [result_handler(a, backend.sharding(device), False) for a in avals]
        self.committed_handlers = [result_handler(a, backend.sharding(device, True), True)
                                   for a in avals]

    def execute(self, bufs: list) -> list:
        """Run on device buffers; returns jaxlib arrays."""
        return self.loaded.execute_sharded(bufs).consume_with_handlers(self.handlers)


_HOST_CALLBACK_TARGET = re.compile(r"python_(?:cpu|gpu)_callback")
_FFI_HOST_CALLBACK_TARGETS = ("xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback")


def _callback_index(op):
    from jaxlib.mlir import ir
    try:
        return ir.IntegerAttr(ir.DictAttr(op.attributes["backend_config"])["index"]).value
    except (KeyError, ValueError, TypeError, IndexError):
        return None


def check_host_callback_calls(text: str, n_callbacks: int, name: str) -> None:
    """Raise ValueError for a custom call into Python that is not one of the program's own
    `n_callbacks` host callbacks (a custom lowering can emit one): jaxlib would look up a
    callable that is not there and crash the process."""
    if not _HOST_CALLBACK_TARGET.search(text):
        return
    from jaxlib.mlir import ir
    try:
        module = parse_module(text)
    except Exception:  # noqa: BLE001 - XLA reports the parse error when compiling
        return
    bad = []

    def visit(op):
        if op.name == "stablehlo.custom_call":
            target = ir.StringAttr(op.attributes["call_target_name"]).value
            if _HOST_CALLBACK_TARGET.search(target):
                index = _callback_index(op)
                if (target not in _FFI_HOST_CALLBACK_TARGETS or index is None
                        or not 0 <= index < n_callbacks):
                    bad.append(f"{target} with index {index}")
        return ir.WalkResult.ADVANCE
    with module.context:
        module.operation.walk(visit)
    if bad:
        raise ValueError(f"{name} has a custom call into Python ({bad[0]}) that is not one of "
                         f"its {n_callbacks} host callbacks; only fluxion's callbacks "
                         "(pure_callback, io_callback, debug.callback) may call back into Python")


# Executables by (program text, device): a program XLA already compiled in this process is
# reused, whoever traced it (a fresh `jit(lambda ...)` per call, eager ops whose cache keys
# differ only in weak types, equal programs from different functions).
_executables = BoundedDict(512)

# The `compiler_options` of the jit (or `Lowered.compile`) compiling now, as sorted (name,
# value) pairs: XLA debug options by name, and the four build options JAX sets directly.
_options_state = threading.local()
_BUILD_OPTIONS = ("exec_time_optimization_effort", "memory_fitting_effort",
                  "optimization_level", "memory_fitting_level")


@contextlib.contextmanager
def compiler_options(options: dict | None):
    """Compile with these XLA options (JAX's `jit(compiler_options=...)`) inside the block."""
    outer = getattr(_options_state, "current", ())
    _options_state.current = tuple(sorted((options or {}).items()))
    try:
        yield
    finally:
        _options_state.current = outer


def current_compiler_options() -> tuple:
    return getattr(_options_state, "current", ())


def apply_compiler_options(options) -> None:
    """Set the current `compiler_options` on XLA CompileOptions; an unknown name or a bad
    value is XLA's JaxRuntimeError when compiling ("No such compile option: ...")."""
    overrides = dict(current_compiler_options())
    if not overrides:
        return
    build = options.executable_build_options
    for name in _BUILD_OPTIONS:
        if name in overrides:
            setattr(build, name, overrides.pop(name))
    options.env_option_overrides = list(overrides.items())


# Custom-call targets whose handlers a library registers with XLA on first use (jaxlib's
# LAPACK and cuSOLVER kernels): target-name prefix -> a function registering them.
_kernel_registrars: dict = {}


def register_kernel_registrar(prefix: str, ensure) -> None:
    """Have `ensure()` run before compiling or loading a module that calls a custom-call target
    named `prefix...`: a deserialized artifact never lowered those calls in this process."""
    _kernel_registrars[prefix] = ensure


def ensure_kernels_for(text: str) -> None:
    """Register the handlers of the library kernels `text` calls (once each)."""
    for prefix, ensure in list(_kernel_registrars.items()):
        if prefix in text:
            ensure()


def compile_and_load(client, text: str, devices, options, what: str):
    """Compile `text` for `devices` (a multi-device program: pmap, sharded jit), with the
    library kernels it calls registered first; XLA's error names `what` and shows the module."""
    _, jax_ext = _jaxlib()
    host_callbacks = getattr(text, "host_callbacks", None)
    check_host_callback_calls(text, len(host_callbacks or ()), what)
    ensure_kernels_for(text)
    try:
        if host_callbacks:
            return _compile_with_callbacks(client, text, devices, options, host_callbacks)
        return client.compile_and_load(text.encode(), devices, options)
    except jax_ext.JaxRuntimeError as e:
        raise jax_ext.JaxRuntimeError(f"XLA failed to compile {what}: {e}\n--- module ---\n"
                                      f"{text}") from None


def compile_module(text: str, out_avals, device=None, name: str = "main") -> Executable:
    xla_client, jax_ext = _jaxlib()
    backend = get_backend() if device is None else backend_of(device)
    device = device or backend.devices[0]
    host_callbacks = getattr(text, "host_callbacks", None)
    key = None if host_callbacks else (hashlib.blake2b(text.encode(), digest_size=20).digest(),
                                       device, current_compiler_options())
    loaded = _executables.get(key) if key is not None else None
    if loaded is None:
        loaded = _compile(backend, text, device, name, host_callbacks)
        if key is not None:
            _executables[key] = loaded
    return Executable(loaded, out_avals, device, name, text)


def _compile(backend, text, device, name, host_callbacks):
    xla_client, jax_ext = _jaxlib()
    start = time.perf_counter()
    options = xla_client.CompileOptions()
    if device != backend.devices[0]:  # XLA's default assignment is the first device
        options.device_assignment = xla_client.DeviceAssignment.create(np.array([[device.id]]))
    apply_compiler_options(options)
    check_host_callback_calls(text, len(host_callbacks or ()), name)
    ensure_kernels_for(text)
    cached = False  # loaded from the persistent compilation cache
    try:
        if host_callbacks:
            loaded = _compile_with_callbacks(backend.client, text, xla_client.DeviceList(
                (device,)), options, host_callbacks)
        else:
            from fluxion._src.compiler import compilation_cache
            devices = xla_client.DeviceList((device,))
            loaded, cached = compilation_cache.compile_or_load(
                backend.client, text, devices, options, backend, device, name,
                lambda: backend.client.compile_and_load(text.encode(), devices, options))
    except jax_ext.JaxRuntimeError as e:
        raise jax_ext.JaxRuntimeError(f"XLA failed to compile {name}: {e}\n--- module ---\n{text}") from None
    if config.log_compiles and not cached:
        logger.warning("Finished XLA compilation of %s in %.3f sec", name, time.perf_counter() - start)
    return loaded


def _compile_with_callbacks(client, text, devices, options, host_callbacks):
    """Compile a module whose custom calls call Python: jaxlib takes the callables only with
    a parsed module. The executable waits for its callbacks on every run; each device (replica
    or partition) of a multi-device program calls them on its own data."""
    from fluxion._src.callbacks import SynchronousExecutable
    return SynchronousExecutable(client.compile_and_load(
        parse_module(text), devices, options, host_callbacks=list(host_callbacks)))


_mlir_context = None


def parse_module(text: str):
    """`text` parsed into a jaxlib `ir.Module` (with StableHLO's dialects loaded)."""
    global _mlir_context
    from jaxlib.mlir import ir
    if _mlir_context is None:
        from jaxlib.mlir._mlir_libs import _jax_mlir_ext
        from jaxlib.mlir.dialects import chlo, mhlo, sdy, stablehlo
        registry = ir.DialectRegistry()
        _jax_mlir_ext.register_dialects(registry)
        ctx = ir.Context()
        ctx.append_dialect_registry(registry)
        ctx.load_all_available_dialects()
        mhlo.register_mhlo_dialect(ctx)
        chlo.register_dialect(ctx)
        stablehlo.register_dialect(ctx)
        sdy.register_dialect(ctx)  # Shardy annotations in jax.export's artifacts
        _mlir_context = ctx
    with _mlir_context:
        return ir.Module.parse(text)


# The parser's location of an op written without one: its line in fluxion's own text
_PARSER_LOCATION = re.compile(r'loc\("-":\d+:\d+\)')


def module_asm(module, debug_info: bool) -> str:
    """`module` in MLIR's custom assembly form, as JAX prints it; with `debug_info`, the ops'
    locations (those fluxion did not write, which only point into its text, as `unknown`)."""
    text = module.operation.get_asm(enable_debug_info=debug_info)
    return _PARSER_LOCATION.sub("loc(unknown)", text) if debug_info else text


def canonical_numpy(x, dtype=None) -> np.ndarray:
    """`x` as a NumPy array of its canonical dtype (64-bit types narrowed unless x64)."""
    arr = np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)
    target = dtypes.canonicalize_dtype(arr.dtype)
    if arr.dtype != target:
        arr = arr.astype(target)
    return arr
