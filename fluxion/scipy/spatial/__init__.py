"""Spatial algorithms (`jax.scipy.spatial`)."""
from fluxion.scipy.spatial import transform  # noqa: F401
