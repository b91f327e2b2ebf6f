"""`shard_map` under its older path."""
from fluxion._src.shard_map import shard_map  # noqa: F401
