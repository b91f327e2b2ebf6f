"""SciPy's API on fluxion arrays (`jax.scipy`)."""
from fluxion.scipy import optimize  # noqa: F401
