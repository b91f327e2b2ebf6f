"""Image processing (`jax.scipy.ndimage`)."""
from fluxion._src.scipy.ndimage import map_coordinates  # noqa: F401

from fluxion._src.numpy.eager import compile_eagerly as _compile_eagerly  # noqa: E402

# Outside jit map_coordinates runs as one cached executable per signature.
_compile_eagerly(globals(), static_parameters=frozenset({"order", "mode"}))
