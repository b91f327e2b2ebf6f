"""Experimental random APIs (`fluxion.experimental.random`, as `jax.experimental.random`)."""
from fluxion._src.stateful_rng import StatefulPRNG, stateful_rng  # noqa: F401
