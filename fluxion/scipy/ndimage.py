"""Image processing (`jax.scipy.ndimage`)."""
from fluxion._src.scipy.ndimage import map_coordinates  # noqa: F401
