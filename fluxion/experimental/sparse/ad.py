"""Sparse-aware differentiation (`jax.experimental.sparse.ad`)."""
from fluxion._src.sparse.ad import (  # noqa: F401
    grad as grad, jacfwd as jacfwd, jacobian as jacobian, jacrev as jacrev,
    value_and_grad as value_and_grad)
