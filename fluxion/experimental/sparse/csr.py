"""CSR- and CSC-format sparse matrices (`jax.experimental.sparse.csr`)."""
from fluxion._src.sparse.coo_csr import (  # noqa: F401
    CSC as CSC, CSR as CSR, csr_fromdense as csr_fromdense, csr_matmat as csr_matmat,
    csr_matvec as csr_matvec, csr_todense as csr_todense)
