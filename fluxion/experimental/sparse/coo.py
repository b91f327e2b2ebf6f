"""COO-format sparse matrices (`jax.experimental.sparse.coo`)."""
from fluxion._src.sparse.coo_csr import (  # noqa: F401
    COO as COO, coo_fromdense as coo_fromdense, coo_matmat as coo_matmat,
    coo_matvec as coo_matvec, coo_todense as coo_todense)
