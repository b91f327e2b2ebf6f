"""Differentiation rules for primitives (`jax.interpreters.ad`).

``defjvp(prim, *jvp_fns)`` gives a primitive its JVP; ``deflinear(prim, transpose_rule)``
declares a linear primitive; ``primitive_jvps`` and ``primitive_transposes`` are the rule
tables. Reverse mode needs a transpose rule for every linear primitive a JVP rule emits.
"""
from fluxion._src.ad import (Zero, UndefinedPrimal, add_tangents, defjvp, defjvp2,  # noqa: F401
                             defjvp_zero, deflinear, instantiate, is_undefined_primal,
                             primitive_jvps, primitive_transposes, zeros_like_aval)
