"""JAX's top-level flag objects (`jax.numpy_rank_promotion`, `jax.no_tracing`, ...).

Each is a `FlagState`: calling it gives a context manager that sets the flag inside a block,
and `.value` reads it, as JAX's `config.State` objects. New values are checked here (the same
ValueErrors as JAX) before `fluxion.config` stores them.
"""
from __future__ import annotations

import logging
import sys

from fluxion._src.config import config

# JAX's legacy precision names, then the names of the dot algorithm presets (DEFAULT aside).
_PRECISION_NAMES = ("default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
                    "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
                    "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32",
                    "BF16_BF16_BF16", "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6",
                    "BF16_BF16_F32_X9", "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32",
                    "F64_F64_F64")
_PRNG_IMPLS = ("threefry2x32", "threefry4x32", "rbg", "unsafe_rbg", "philox2x32", "philox4x32")


def _enum(name: str, choices: tuple, allow_none: bool = False):
    def validate(value):
        if value is None and allow_none:
            return None
        if value not in choices:
            prefix = "None or in" if allow_none else "in"
            raise ValueError(f"new enum value must be {prefix} {list(choices)}, got {value} "
                             f"of type {type(value)}.")
        return value
    validate.__name__ = f"validate_{name}"
    return validate


def _dtype_promotion(value):
    if value not in ("standard", "strict"):
        raise ValueError(f"{value!r} is not a valid NumpyDtypePromotion")
    return value


def _legacy_prng_key(value):
    if value not in ("allow", "warn", "error"):
        raise ValueError(f"{value!r} is not a valid LegacyPrngKeyState")
    return value


def _transfer_level(value):
    levels = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")
    if value is not None and value not in levels:
        raise ValueError(f"new enum value must be None or in {list(levels)}, got {value!r} of "
                         f"type {type(value)}.")
    return value


def _gc_guard(value):
    levels = ("allow", "log", "fatal")
    if value is not None and value not in levels:
        raise ValueError(f"new enum value must be None or in {list(levels)}, got {value!r} of "
                         f"type {type(value)}.")
    return value


def _int_or_none(value):
    if value is not None and not isinstance(value, int):
        raise ValueError(f"new int config value must be None or of type int, got {value} of "
                         f"type {type(value)}")
    return value


def _num_cpu_devices(value):
    from fluxion._src.compiler import backend
    if "cpu" in backend._backends:
        raise RuntimeError("jax_num_cpu_devices config should be updated before backends are "
                           "initialized i.e. before any JAX operation is executed. You should "
                           "initialize this config immediately after `import jax`.")
    return int(value)


_LOGGING_LEVELS = ("NOTSET", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_log_handler = logging.StreamHandler(sys.stderr)
_log_handler.setFormatter(logging.Formatter(
    "%(levelname)s:%(asctime)s:%(name)s:%(lineno)s: %(message)s"))


def _apply_logging_level(level) -> None:
    """`jax_logging_level`: the "fluxion" logger gets the level and, unless it is NOTSET, a
    handler printing to stderr; None removes the handler (the level stays), as in JAX."""
    logger = logging.getLogger("fluxion")
    logger.removeHandler(_log_handler)
    if level is None:
        return
    logger.setLevel(level)
    if level != "NOTSET":
        logger.addHandler(_log_handler)


def _on_config_change(name, value) -> None:
    if name == "logging_level":
        _apply_logging_level(value)


config._listeners.append(_on_config_change)
if config.logging_level != "NOTSET":  # set from the environment (JAX_LOGGING_LEVEL)
    _apply_logging_level(_enum("logging_level", _LOGGING_LEVELS)(config.logging_level))

config._validators.update({
    "logging_level": _enum("logging_level", _LOGGING_LEVELS, allow_none=True),
    "num_cpu_devices": _num_cpu_devices,
    "random_seed_offset": _int_or_none,
    "numpy_rank_promotion": _enum("numpy_rank_promotion", ("allow", "warn", "raise")),
    "numpy_dtype_promotion": _dtype_promotion,
    "default_matmul_precision": _enum("default_matmul_precision", _PRECISION_NAMES,
                                      allow_none=True),
    "default_prng_impl": _enum("default_prng_impl", _PRNG_IMPLS),
    "legacy_prng_key": _legacy_prng_key,
    "transfer_guard_device_to_device": _transfer_level,
    "array_garbage_collection_guard": _gc_guard,
})


class FlagState:
    """One configuration flag: `flag(value)` is a context manager setting it inside a block,
    `flag.value` its current value (JAX's `config.State`)."""

    def __init__(self, name: str, doc: str, boolean: bool):
        self._name = name
        self._boolean = boolean
        self.__name__ = name
        self.__doc__ = f"Context manager for `jax_{name}` config option.\n\n{doc}"

    @property
    def value(self):
        return getattr(config, self._name)

    def __call__(self, new_val=...):
        if new_val is ...:
            if not self._boolean:
                raise TypeError(f"{self._name}() missing 1 required positional argument: "
                                "'new_val'")
            new_val = True
        return config._override(self._name, bool(new_val) if self._boolean else new_val)

    def __bool__(self):
        raise TypeError(f"bool() not supported for instances of type 'FlagState' ({self._name}): "
                        f"use {self._name}.value")

    def __repr__(self):
        return f"<FlagState jax_{self._name}={self.value!r}>"


def _flag(name: str, doc: str, boolean: bool = True) -> FlagState:
    return FlagState(name, doc, boolean)


numpy_rank_promotion = _flag(
    "numpy_rank_promotion", 'NumPy-style implicit rank promotion in jnp binary operations: '
    '"allow", "warn" or "raise".', boolean=False)
numpy_dtype_promotion = _flag(
    "numpy_dtype_promotion", 'Implicit dtype promotion rules: "standard", or "strict" (binary '
    'operations between differing strongly-typed dtypes raise TypePromotionError).',
    boolean=False)
default_matmul_precision = _flag(
    "default_matmul_precision", "The precision of matmuls and convolutions given no precision: "
    "None, one of 'default', 'high', 'highest', 'bfloat16', 'tensorfloat32', 'float32', or the "
    "name of a lax.DotAlgorithmPreset such as 'BF16_BF16_F32'.",
    boolean=False)
enable_checks = _flag("enable_checks", "Check fluxion's internal invariants (slower).")
no_tracing = _flag("no_tracing", "Raise RuntimeError when a function would be traced for jit.")
no_execution = _flag("no_execution", "Raise RuntimeError when a computation would run.")
thread_guard = _flag("thread_guard", "Raise when a multi-process operation is called from "
                     "another thread than the one that set the guard.")
transfer_guard_device_to_device = _flag(
    "transfer_guard_device_to_device", 'Transfer guard level for device-to-device transfers: '
    '"allow", "log", "disallow", "log_explicit" or "disallow_explicit".', boolean=False)
threefry_partitionable = _flag(
    "threefry_partitionable", "Use the partitionable threefry random-bits algorithm (the "
    "default); False selects the original one, with different random values.")
debug_key_reuse = _flag("debug_key_reuse", "Raise KeyReuseError when an eager typed PRNG key "
                        "is used again after being consumed.")
enable_custom_prng = _flag("enable_custom_prng", "PRNGKey returns typed key arrays.")
default_prng_impl = _flag("default_prng_impl", "The PRNG implementation of new keys.",
                          boolean=False)
legacy_prng_key = _flag("legacy_prng_key", 'What raw uint32 keys passed to random functions do: '
                        '"allow", "warn" or "error".', boolean=False)
allow_f16_reductions = _flag("allow_f16_reductions", "If False, reduce_sum on float16 or "
                             "bfloat16 operands raises ValueError.")
array_garbage_collection_guard = _flag(
    "array_garbage_collection_guard", 'What garbage collection of Arrays in reference cycles '
    'does: None, "allow", "log" or "fatal".', boolean=False)
auto_pcast = _flag("auto_pcast", "Insert pvary to match varying manual axes on simple ops.")
remove_size_one_mesh_axis_from_type = _flag(
    "remove_size_one_mesh_axis_from_type", "Drop mesh axes of size 1 from array types.")
jax2tf_associative_scan_reductions = _flag(
    "jax2tf_associative_scan_reductions", "Lower cumulative reductions as associative scans "
    "on every platform.")


def check_execution_allowed(name: str) -> None:
    """RuntimeError under `no_execution` (called where a program is about to run; cached
    fast paths miss while the flag is set, since it is part of `config.trace_key`)."""
    if config.no_execution:
        raise RuntimeError(f"JAX tried to execute function {name}, but the no_execution config "
                           "option is set")


def check_tracing_allowed(fun, what: str = "jit") -> None:
    """RuntimeError under `no_tracing` when `fun` is about to be traced."""
    if config.no_tracing:
        raise RuntimeError(f"re-tracing function {_describe(fun)} for `{what}`, but "
                           "'no_tracing' is set")


def _describe(fun) -> str:
    code = getattr(fun, "__code__", None)
    name = getattr(fun, "__name__", None) or repr(fun)
    if code is None:
        return name
    return f"{name} at {code.co_filename}:{code.co_firstlineno}"
