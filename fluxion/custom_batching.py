"""Custom batching rules (`jax.custom_batching`)."""
from fluxion._src.custom_batching import custom_vmap, sequential_vmap  # noqa: F401
