"""Primitives and the jaxpr IR, for code that defines its own primitives (`jax.extend.core`)."""
from fluxion._src.core import (ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, JaxprTypeError,  # noqa: F401
                               Literal, Primitive, Var, check_jaxpr, concrete_or_error,
                               jaxpr_as_fun, set_current_trace, subjaxprs, valid_jaxtype)

__all__ = ["ClosedJaxpr", "DropVar", "Jaxpr", "JaxprEqn", "JaxprTypeError", "Literal",
           "Primitive", "Var", "check_jaxpr", "concrete_or_error", "jaxpr_as_fun",
           "set_current_trace", "subjaxprs", "valid_jaxtype"]
