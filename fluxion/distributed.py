"""Multi-process runs (`initialize`, `shutdown`), as `jax.distributed`."""
from fluxion._src.distributed import initialize, is_initialized, shutdown  # noqa: F401
