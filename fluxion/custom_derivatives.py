"""Custom differentiation rules (`jax.custom_derivatives`)."""
from fluxion._src.ad import Zero as SymbolicZero  # noqa: F401
from fluxion._src.closure_conversion import closure_convert  # noqa: F401
from fluxion._src.custom_derivatives import (custom_jvp, custom_vjp,  # noqa: F401
                                             custom_jvp_call_p, custom_vjp_call_p,
                                             CustomVJPPrimal, custom_vjp_primal_tree_values)
from fluxion._src.custom_gradient import custom_gradient  # noqa: F401
from fluxion._src.custom_derivatives_extras import zero_from_primal  # noqa: F401
from fluxion._src.linear_call import linear_call  # noqa: F401
