"""`fluxion.experimental.xla_metadata` (as `jax.experimental.xla_metadata`)."""
from fluxion._src.xla_metadata import set_xla_metadata  # noqa: F401
