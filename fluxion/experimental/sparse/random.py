"""Random sparse arrays (`jax.experimental.sparse.random`)."""
from fluxion._src.sparse.random import random_bcoo as random_bcoo  # noqa: F401
