"""Sparse linear algebra (`jax.experimental.sparse.linalg`): `spsolve`, `lobpcg_standard`."""
from fluxion._src.sparse.linalg import spsolve as spsolve  # noqa: F401
from fluxion._src.sparse.lobpcg import lobpcg_standard as lobpcg_standard  # noqa: F401
