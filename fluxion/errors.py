"""Exception classes raised for tracer misuse and runtime failures (`jax.errors`' names)."""
from fluxion._src.core import JaxprTypeError  # noqa: F401
from fluxion._src.errors import (ConcretizationTypeError, JAXTypeError,  # noqa: F401
                                 JAXIndexError, KeyReuseError, NonConcreteBooleanIndexError,
                                 TracerArrayConversionError, TracerBoolConversionError,
                                 TracerIntegerConversionError, UnexpectedTracerError)

from fluxion._src.export.shape_poly import InconclusiveDimensionOperation  # noqa: F401,E402


def __getattr__(name):
    # jaxlib's runtime error class (raised when compiling or running an executable fails);
    # looked up lazily so that importing fluxion does not load the XLA client.
    if name == "JaxRuntimeError":
        from fluxion._src.compiler import backend
        return backend.runtime_error_class()
    raise AttributeError(f"module 'fluxion.errors' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), "JaxRuntimeError"])
