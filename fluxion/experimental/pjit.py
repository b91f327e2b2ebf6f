"""`fluxion.experimental.pjit` (as `jax.experimental.pjit`, whose `pjit` is deprecated)."""
import warnings as _warnings


def __getattr__(name):
    if name == "pjit":
        _warnings.warn("jax.experimental.pjit.pjit has been deprecated. Please use `jax.jit` "
                       "instead.", DeprecationWarning, stacklevel=2)
        from fluxion._src.pjit import pjit
        return pjit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
