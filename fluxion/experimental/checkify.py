"""`fluxion.experimental.checkify` (JAX's `jax.experimental.checkify`)."""
from fluxion._src.checkify import (  # noqa: F401
    Error, JaxRuntimeError, FailedCheckError, NaNError, DivisionByZeroError, OOBError,
    user_checks, nan_checks, div_checks, index_checks, float_checks, automatic_checks,
    all_checks, check, checkify, check_error, debug_check, ErrorCategory, init_error)
