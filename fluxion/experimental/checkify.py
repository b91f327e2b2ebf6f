"""`fluxion.experimental.checkify` (JAX's `jax.experimental.checkify`)."""
from fluxion._src.checkify import (  # noqa: F401
    Error, FailedCheckError, NaNError, DivisionByZeroError, OOBError,
    user_checks, nan_checks, div_checks, index_checks, float_checks, automatic_checks,
    all_checks, check, checkify, check_error, debug_check, ErrorCategory, init_error)


def __getattr__(name):
    if name == "JaxRuntimeError":  # jaxlib's class, as JAX's (fluxion.errors'); looked up lazily
        from fluxion._src.compiler import backend
        return backend.runtime_error_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), "JaxRuntimeError"])
