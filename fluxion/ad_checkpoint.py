"""Rematerialization (`jax.ad_checkpoint`)."""
from fluxion._src.checkpoint import checkpoint, remat, checkpoint_name, checkpoint_policies  # noqa: F401
