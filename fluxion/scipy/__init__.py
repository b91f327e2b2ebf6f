"""SciPy's API on fluxion arrays (`jax.scipy`)."""
from fluxion.scipy import cluster, integrate, ndimage, optimize, sparse, special, stats  # noqa: F401
