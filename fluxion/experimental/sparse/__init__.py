"""Sparse arrays (`jax.experimental.sparse`): the BCOO format and its operations."""
from fluxion._src.sparse.bcoo import (  # noqa: F401
    BCOO as BCOO,
    JAXSparse as JAXSparse,
    bcoo_multiply_sparse as bcoo_multiply_sparse,
    bcoo_rev as bcoo_rev,
    CuSparseEfficiencyWarning as CuSparseEfficiencyWarning,
    SparseEfficiencyError as SparseEfficiencyError,
    SparseEfficiencyWarning as SparseEfficiencyWarning,
    bcoo_broadcast_in_dim as bcoo_broadcast_in_dim,
    bcoo_concatenate as bcoo_concatenate,
    bcoo_dot_general as bcoo_dot_general,
    bcoo_eliminate_zeros as bcoo_eliminate_zeros,
    bcoo_extract as bcoo_extract,
    bcoo_fromdense as bcoo_fromdense,
    bcoo_multiply_dense as bcoo_multiply_dense,
    bcoo_reduce_sum as bcoo_reduce_sum,
    bcoo_reshape as bcoo_reshape,
    bcoo_slice as bcoo_slice,
    bcoo_sort_indices as bcoo_sort_indices,
    bcoo_spdot_general as bcoo_spdot_general,
    bcoo_squeeze as bcoo_squeeze,
    bcoo_sum_duplicates as bcoo_sum_duplicates,
    bcoo_todense as bcoo_todense,
    bcoo_transpose as bcoo_transpose,
    bcoo_update_layout as bcoo_update_layout,
    empty as empty,
    eye as eye,
    todense as todense,
)
from fluxion._src.sparse.transform import sparsify as sparsify  # noqa: F401
from fluxion._src.sparse.ad import (  # noqa: F401
    grad as grad, jacfwd as jacfwd, jacobian as jacobian, jacrev as jacrev,
    value_and_grad as value_and_grad)
from fluxion._src.sparse.coo_csr import (  # noqa: F401
    COO as COO, CSC as CSC, CSR as CSR,
    coo_fromdense as coo_fromdense, coo_matmat as coo_matmat, coo_matvec as coo_matvec,
    coo_todense as coo_todense,
    csr_fromdense as csr_fromdense, csr_matmat as csr_matmat, csr_matvec as csr_matvec,
    csr_todense as csr_todense)
from fluxion._src.sparse.random import random_bcoo as random_bcoo  # noqa: F401
from fluxion._src.sparse.bcsr import (  # noqa: F401
    BCSR as BCSR,
    bcsr_dot_general as bcsr_dot_general,
    bcsr_fromdense as bcsr_fromdense,
    bcsr_todense as bcsr_todense,
)
from fluxion.experimental.sparse import linalg as linalg  # noqa: F401,E402
from fluxion.experimental.sparse import ad, api, bcoo, bcsr, coo, csr, random, transform  # noqa: F401,E402,E501
