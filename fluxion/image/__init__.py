"""Image resampling (`jax.image`)."""
from fluxion._src.image import ResizeMethod, resize, scale_and_translate  # noqa: F401
