"""Optimization (`jax.scipy.optimize`)."""
from fluxion._src.scipy.optimize import OptimizeResults, minimize  # noqa: F401
