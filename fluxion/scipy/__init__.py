"""SciPy's API on fluxion arrays (`jax.scipy`)."""
from fluxion.scipy import (cluster, integrate, linalg, ndimage, optimize, sparse,  # noqa: F401
                           spatial, special, stats)
