"""Experimental APIs (`fluxion.experimental`): submodules are imported on use."""
from fluxion._src.callbacks import io_callback  # noqa: F401
