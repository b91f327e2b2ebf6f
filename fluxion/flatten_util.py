"""Flattening pytrees into vectors (`jax.flatten_util`)."""
from fluxion._src.flatten_util import ravel_pytree  # noqa: F401
