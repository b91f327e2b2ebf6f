"""Iterative linear solvers (`jax.scipy.sparse.linalg`)."""
from fluxion._src.scipy.sparse_linalg import bicgstab, cg, gmres  # noqa: F401
