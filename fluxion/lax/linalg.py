"""fluxion.lax.linalg: matrix decompositions as primitives lowered to LAPACK on CPU."""
from fluxion._src.lax.linalg.primitives import (  # noqa: F401
    geqp3, geqp3_p,
    EigImplementation, EighImplementation, SvdAlgorithm, cholesky, cholesky_p, eig, eig_p, eigh,
    eigh_p,
    geqrf, geqrf_p, householder_product, householder_product_p, lu, lu_p,
    lu_pivots_to_permutation, lu_pivots_to_permutation_p, qr, qr_p, svd, svd_p, symmetrize,
    symmetric_product, symmetric_product_p, tridiagonal_solve, tridiagonal_solve_p,
    triangular_solve, triangular_solve_p)
from fluxion._src.lax.linalg.condensed import (  # noqa: F401
    hessenberg, hessenberg_p, schur, schur_p, tridiagonal, tridiagonal_p)
from fluxion._src.lax.linalg.ormqr import ormqr, ormqr_p  # noqa: F401
from fluxion._src.lax.linalg.cholesky_update import (  # noqa: F401
    cholesky_update, cholesky_update_p)
from fluxion._src.lax.linalg.qdwh import qdwh  # noqa: F401
