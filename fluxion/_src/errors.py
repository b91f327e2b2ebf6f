"""Exception classes raised for tracer misuse (`fluxion.errors`)."""
from __future__ import annotations


_ERROR_PAGE = "https://docs.jax.dev/en/latest/errors.html"


class _DocumentedError:
    """Ends each message with the address of the error's explanation in JAX's documentation
    (the same errors, under the same names), as JAX's own error classes do."""

    def __init__(self, message: str):
        super().__init__(f"{message}\nSee {_ERROR_PAGE}#jax.errors.{type(self).__name__}")


class JAXTypeError(_DocumentedError, TypeError):
    """A `TypeError` specific to tracing (`jax.errors.JAXTypeError`)."""


FluxionTypeError = JAXTypeError  # the name fluxion's modules use


class JAXIndexError(_DocumentedError, IndexError):
    """An `IndexError` specific to tracing (`jax.errors.JAXIndexError`)."""


class NonConcreteBooleanIndexError(JAXIndexError):
    """A boolean mask used as an index is traced: the result's shape would depend on its values.

    Under `jit` every array has a static shape, so `x[mask]` (and `x.at[mask]`) needs a
    concrete mask; `where(mask, x, other)` is the traceable way to select elementwise.
    """

    def __init__(self, aval_str: str):
        super().__init__(
            f"Array boolean indices must be concrete; got {aval_str}\n\nThe shape of x[mask] "
            "depends on the values of mask, which are not known while tracing. Use "
            "fluxion.numpy.where(mask, x, other) to select elementwise, or pass the mask as a "
            "static (concrete) value.")


def _type_of(tracer) -> str:
    """A tracer's type in JAX's words (`bool[]`, `float32[3,4]`)."""
    aval = getattr(tracer, "aval", None)
    if aval is None or not hasattr(aval, "dtype"):
        return type(tracer).__name__
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"


class ConcretizationTypeError(FluxionTypeError):
    """A traced (abstract) value was used where a concrete Python value is needed."""

    def __init__(self, tracer, context: str = ""):
        super().__init__(
            f"Abstract tracer value encountered where concrete value is expected: traced array "
            f"with shape {_type_of(tracer)}\n"
            f"{context}\n"
            "The value depends on the arguments of a transformed function, so its concrete "
            "value is not known while tracing. Use structured control flow (lax.cond, "
            "lax.while_loop, lax.fori_loop, lax.scan) or mark the argument static "
            "(static_argnums / static_argnames).")


class TracerBoolConversionError(ConcretizationTypeError):
    """A traced value was used where Python needs a bool (`if`, `while`, `and`, `or`)."""

    def __init__(self, tracer, context: str = ""):
        FluxionTypeError.__init__(
            self,
            f"Attempted boolean conversion of traced array with shape {_type_of(tracer)}.\n"
            f"{context}\n"
            "Python control flow (`if`, `while`, `and`/`or`) needs a concrete value, but this one "
            "depends on the arguments of a transformed function. Use lax.cond (or lax.switch) "
            "to branch on a traced value, lax.while_loop or lax.fori_loop to loop on one, or "
            "jnp.where to select elementwise; or mark the argument static (static_argnums / "
            "static_argnames).")


class TracerIntegerConversionError(FluxionTypeError):
    def __init__(self, tracer, context: str = ""):
        super().__init__(
            f"The __index__() method was called on traced array with shape {_type_of(tracer)}\n"
            f"{context}\n"
            "A traced value cannot be used as a Python integer (e.g. as an index into a list "
            "or a shape); mark the argument static or use lax.dynamic_slice.")


class TracerArrayConversionError(FluxionTypeError):
    def __init__(self, tracer, context: str = ""):
        super().__init__(
            f"The numpy.ndarray conversion method __array__() was called on traced array "
            f"with shape {_type_of(tracer)}\n{context}\nNumPy functions cannot run on traced values: use "
            "fluxion.numpy instead of numpy inside transformed functions.")


class UnexpectedTracerError(FluxionTypeError):
    """A tracer was used outside the transformation that created it (it leaked)."""


class KeyReuseError(FluxionTypeError):
    pass
