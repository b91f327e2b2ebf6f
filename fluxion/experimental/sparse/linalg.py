"""Sparse linear algebra (`jax.experimental.sparse.linalg`): `spsolve`."""
from fluxion._src.sparse.linalg import spsolve as spsolve  # noqa: F401
