"""SciPy's API on fluxion arrays (`jax.scipy`)."""
from fluxion.scipy import optimize, sparse  # noqa: F401
