"""Rotations (`jax.scipy.spatial.transform`)."""
from fluxion._src.scipy.rotation import Rotation, Slerp  # noqa: F401
