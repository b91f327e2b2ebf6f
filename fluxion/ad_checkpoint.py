"""Rematerialization (`jax.ad_checkpoint`)."""
from fluxion._src.checkpoint import (checkpoint, remat, checkpoint_name,  # noqa: F401
                                     checkpoint_policies, Offloadable, Recompute, Saveable)
from fluxion._src.saved_residuals import print_saved_residuals  # noqa: F401
