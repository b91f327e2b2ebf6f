"""The persistent compilation cache (`jax.experimental.compilation_cache`)."""
from fluxion.experimental.compilation_cache import compilation_cache  # noqa: F401
