"""`fluxion.experimental.shard_alike` (as `jax.experimental.shard_alike`)."""
from fluxion._src.shard_alike import shard_alike  # noqa: F401
