"""Integration (`jax.scipy.integrate`)."""
from fluxion._src.scipy.small import trapezoid  # noqa: F401
