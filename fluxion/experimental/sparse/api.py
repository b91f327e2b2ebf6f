"""Format-generic sparse helpers (`jax.experimental.sparse.api`)."""
from fluxion._src.sparse.bcoo import empty as empty, eye as eye, todense as todense  # noqa: F401
