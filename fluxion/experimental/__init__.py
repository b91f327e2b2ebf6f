"""Experimental APIs (`fluxion.experimental`): submodules (shard_map, multihost_utils, ...)
are imported on use."""
from fluxion._src.callbacks import io_callback  # noqa: F401
