"""Global configuration flags (`fluxion.config`).

Flags are read from the environment at import time (``FLUXION_<NAME>`` or JAX's ``JAX_<NAME>``)
and changed with ``fluxion.config.update(name, value)``. JAX's names (``jax_enable_x64``) are
accepted as aliases for ours (``enable_x64``).
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys

_TRUE = {"1", "true", "yes", "on", "t", "y"}


def _env_bool(name: str, default: bool) -> bool:
    for key in (f"FLUXION_{name.upper()}", f"JAX_{name.upper()}"):
        value = os.environ.get(key)
        if value is not None:
            return value.strip().lower() in _TRUE
    return default


class Config:
    """Holds the flags; attribute access is the fast path used internally."""

    _defaults = {
        "enable_x64": False,
        "disable_jit": False,
        "log_compiles": False,
        "debug_nans": False,
        "platforms": None,
        "numpy_rank_promotion": "allow",
        "traceback_filtering": "auto",
        # debugging and observability (issue 13)
        "debug_infs": False,
        "explain_cache_misses": False,
        "check_tracer_leaks": False,
        "transfer_guard": None,
        "transfer_guard_host_to_device": None,
        "transfer_guard_device_to_host": None,
        # portability (issue 14): the persistent compilation cache and the compiler backend
        "enable_compilation_cache": True,
        "compilation_cache_dir": None,
        "persistent_cache_min_compile_time_secs": 0.0,
        "persistent_cache_max_size": 1 << 30,
        # JAX's names: -1 leaves persistent_cache_max_size in charge; entries smaller than
        # min_entry_size_bytes are not written
        "compilation_cache_max_size": -1,
        "persistent_cache_min_entry_size_bytes": 0,
        # CPU devices of the CPU client (-1: XLA_FLAGS' host device count, else 1); set before
        # the first computation
        "num_cpu_devices": -1,
        # accepted for JAX programs, with no effect in fluxion (docs/differences.md)
        "raise_persistent_cache_errors": False,
        "persistent_cache_enable_xla_caches": "xla_gpu_per_fusion_autotune_cache_dir",
        "compilation_cache_include_metadata_in_key": False,
        "compilation_cache_check_contents": False,
        "use_shardy_partitioner": True,
        "pprint_use_color": True,
        "include_full_tracebacks_in_locations": True,
        "traceback_in_locations_limit": 100,
        # Exported.mlir_module() prints the ops' locations
        "include_debug_info_in_dumps": True,
        "optimization_level": "UNKNOWN",
        "memory_fitting_level": "O2",
        "exec_time_optimization_effort": 0.0,
        "memory_fitting_effort": 0.0,
        "use_magma": "auto",
        "default_backend": None,
        # where uncommitted computations run (issue 12): None, a Device, or a platform name
        "default_device": None,
        # numpy semantics, matmul precision, PRNG behaviour and runtime guards (config_flags.py)
        "numpy_dtype_promotion": "standard",
        "default_matmul_precision": None,
        "enable_checks": False,
        "no_tracing": False,
        "no_execution": False,
        "thread_guard": False,
        "transfer_guard_device_to_device": None,
        "threefry_partitionable": True,
        "debug_key_reuse": False,
        "enable_custom_prng": False,
        "default_prng_impl": "threefry2x32",
        "legacy_prng_key": "allow",
        "random_seed_offset": 0,
        "allow_f16_reductions": True,
        "array_garbage_collection_guard": None,
        "auto_pcast": True,
        "remove_size_one_mesh_axis_from_type": False,
        "jax2tf_associative_scan_reductions": False,
        # accepted for JAX programs; fluxion's softmax is differentiated the same either way
        "softmax_custom_jvp": False,
        # the level of the "fluxion" logger, with a handler to stderr (config_flags.py)
        "logging_level": "NOTSET",
        # accepted for JAX programs: fluxion mocks no GPU topology
        "mock_gpu_topology": "",
        # JAX's deprecated name for the default platform (before the first computation)
        "platform_name": "",
        # static integer indices out of bounds raise IndexError (reads with mode None or
        # promise_in_bounds), instead of being clamped
        "check_static_indices": False,
    }

    # Flags besides enable_x64 that change what tracing produces, or (no_execution) whether a
    # cached program may run: they are part of every cache key through `trace_key`.
    _trace_flags = ("numpy_rank_promotion", "numpy_dtype_promotion", "default_matmul_precision",
                    "no_execution", "allow_f16_reductions", "legacy_prng_key",
                    "default_prng_impl", "threefry_partitionable", "enable_custom_prng",
                    "debug_key_reuse", "random_seed_offset", "check_static_indices")
    # name -> function checking and canonicalizing a new value (set by config_flags.py)
    _validators: dict = {}

    def __init__(self):
        for name, default in self._defaults.items():
            if isinstance(default, bool):
                value = _env_bool(name, default)
            else:
                value = os.environ.get(f"FLUXION_{name.upper()}", os.environ.get(f"JAX_{name.upper()}", default))
                if isinstance(default, (int, float)) and isinstance(value, str):
                    value = type(default)(value)
            object.__setattr__(self, name, value)
        self._listeners = []
        self._user_contexts = []  # make_user_context's contexts: their values key caches too
        self._refresh_trace_key()

    def __reduce__(self):
        return "config"  # the process's flags, by reference (pickled jitted functions)

    def _refresh_trace_key(self) -> None:
        """`trace_key`: enable_x64 alone while the other trace flags and the user contexts
        (make_user_context) have their defaults (so the keys of ordinary programs stay as
        small as before), else all of them."""
        others = tuple(getattr(self, n) for n in self._trace_flags)
        users = tuple(c.value for c in self._user_contexts)
        if (others == tuple(self._defaults[n] for n in self._trace_flags)
                and all(c.value is c.default for c in self._user_contexts)):
            object.__setattr__(self, "trace_key", self.enable_x64)
        else:
            object.__setattr__(self, "trace_key", (self.enable_x64, *others, *users))

    def _canonical_name(self, name: str) -> str:
        if name.startswith("jax_"):
            name = name[4:]
        if name not in self._defaults:
            raise AttributeError(f"Unrecognized config option: {name!r}")
        return name

    def update(self, name: str, value) -> None:
        """Set a flag, e.g. ``config.update("enable_x64", True)``."""
        name = self._canonical_name(name)
        if name == "default_device":
            _check_default_device(value)
        validate = self._validators.get(name)
        if validate is not None:
            value = validate(value)
        object.__setattr__(self, name, value)
        if name == "enable_x64" or name in self._trace_flags:
            self._refresh_trace_key()
        for listener in self._listeners:
            listener(name, value)

    def read(self, name: str):
        return getattr(self, self._canonical_name(name))

    def __getattr__(self, name):
        # Only reached for names not set in __init__, e.g. `config.jax_enable_x64`.
        if name.startswith("jax_") and name[4:] in type(self)._defaults:
            return object.__getattribute__(self, name[4:])
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            self.update(name, value)

    @property
    def x64_enabled(self) -> bool:
        """Whether 64-bit types are enabled (JAX's `config.x64_enabled`)."""
        return self.enable_x64

    def parse_flags_with_absl(self) -> None:
        """Apply the ``--jax_<flag>=<value>`` (or ``--fluxion_<flag>``) command-line arguments
        before the first ``--``, as JAX's method of this name does for absl-style test
        programs: ``--jax_enable_x64``, ``--nojax_enable_x64``, ``--jax_numpy_rank_promotion=
        raise``. Flags fluxion does not have are ignored (absl's known_only)."""
        for arg in itertools.takewhile(lambda a: a != "--", sys.argv[1:]):
            name, has_value, text = arg.partition("=")
            negated = name.startswith(("--nojax_", "--nofluxion_"))
            name = name.removeprefix("--no" if negated else "--")
            if not name.startswith(("jax_", "fluxion_")):
                continue
            name = name.partition("_")[2]
            if name not in self._defaults:
                continue
            default = self._defaults[name]
            if isinstance(default, bool) or not has_value:
                value = (not negated) if not has_value else text.lower() in _TRUE
            elif isinstance(default, (int, float)):
                value = type(default)(text)
            else:
                value = text
            self.update(name, value)

    def signature(self) -> tuple:
        """The flags that change what a traced program means; part of every jit cache key."""
        return self.trace_key if type(self.trace_key) is tuple else (self.trace_key,)

    @contextlib.contextmanager
    def _override(self, name, value):
        name = self._canonical_name(name)
        old = getattr(self, name)
        self.update(name, value)
        try:
            yield
        finally:
            self.update(name, old)


def _check_default_device(value) -> None:
    if value is None or (hasattr(value, "platform") and hasattr(value, "client")):
        return
    if isinstance(value, str) and value.isidentifier():
        return
    raise ValueError("jax.default_device must be passed either a Device object (e.g. "
                     "`jax.devices('cpu')[0]`) or a platform name string like 'cpu' or 'gpu', "
                     f"got: {value!r}")


config = Config()


def enable_x64(new_val: bool = True):
    """Context manager that turns 64-bit types on (or off) inside a block."""
    return config._override("enable_x64", new_val)


def default_device(device):
    """Context manager that makes `device` (a Device or a platform name such as "cpu") the
    device on which uncommitted computations and new arrays are placed inside a block."""
    return config._override("default_device", device)


def disable_jit(disable: bool = True):
    """Context manager that runs jitted functions op by op inside a block."""
    return config._override("disable_jit", disable)


def _flag_context(name: str, doc: str):
    """A context manager for one boolean flag, as JAX's `jax.<flag>(new_val=True)`."""
    def context(new_val: bool = True):
        return config._override(name, bool(new_val))
    context.__name__ = context.__qualname__ = name
    context.__doc__ = doc
    return context


debug_nans = _flag_context("debug_nans", "Context manager: raise on NaNs produced inside a block.")
debug_infs = _flag_context("debug_infs", "Context manager: raise on Infs produced inside a block.")
log_compiles = _flag_context("log_compiles", "Context manager: log compilations inside a block.")
explain_cache_misses = _flag_context(
    "explain_cache_misses", "Context manager: log why jitted functions trace again inside a block.")
check_tracer_leaks = _flag_context(
    "check_tracer_leaks", "Context manager: check for leaked tracers inside a block.")
checking_leaks = check_tracer_leaks
softmax_custom_jvp = _flag_context(
    "softmax_custom_jvp", "Context manager for JAX's `jax_softmax_custom_jvp` flag (accepted; "
    "fluxion's softmax has the same derivatives either way).")

