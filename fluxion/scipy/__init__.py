"""SciPy's API on fluxion arrays (`jax.scipy`)."""
from fluxion.scipy import (cluster, fft, integrate, interpolate, linalg, ndimage,  # noqa: F401
                           optimize, signal, sparse, spatial, special, stats)
