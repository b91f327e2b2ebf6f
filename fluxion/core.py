"""Core types (`fluxion.core`): abstract values, tracers, jaxprs."""
from fluxion._src.core import (ShapedArray, Tracer, Primitive, Jaxpr, ClosedJaxpr, JaxprEqn,  # noqa: F401
                               Var, Literal, eval_jaxpr, jaxpr_as_fun, check_jaxpr, get_aval,
                               concrete_or_error)
from fluxion._src.export.shape_poly import (  # noqa: F401,E402
    max_dim, min_dim, dimension_as_value, is_constant_dim, is_symbolic_dim)
