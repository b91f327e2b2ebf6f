"""Interpolation (`jax.scipy.interpolate`)."""
from fluxion._src.scipy.interpolate import RegularGridInterpolator  # noqa: F401
