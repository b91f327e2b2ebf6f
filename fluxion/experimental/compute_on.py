"""`fluxion.experimental.compute_on` (as `jax.experimental.compute_on`)."""
from fluxion._src.compute_on import compute_on, compute_on2  # noqa: F401
