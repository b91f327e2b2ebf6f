"""Sparse linear algebra (`jax.scipy.sparse`)."""
from fluxion.scipy.sparse import linalg  # noqa: F401
