"""SciPy's API on fluxion arrays (`jax.scipy`)."""
from fluxion.scipy import cluster, integrate, ndimage, optimize, sparse  # noqa: F401
