"""Memory spaces (`jax.memory`)."""
from fluxion._src.memory import Space  # noqa: F401
