"""Linear algebra (`jax.scipy.linalg`)."""
from fluxion._src.scipy.linalg import (  # noqa: F401
    cho_factor, cho_solve, cholesky, det, eigh, eigh_tridiagonal, expm, expm_frechet, inv, lu,
    lu_factor, lu_solve, polar, qr, qr_multiply, solve, solve_triangular, svd)
from fluxion._src.scipy.special_matrices import (  # noqa: F401
    block_diag, circulant, companion, convolution_matrix, dft, fiedler, fiedler_companion,
    hadamard, hankel, helmert, hilbert, invhilbert, invpascal, leslie, pascal, toeplitz)
from fluxion._src.scipy.linalg_schur import (  # noqa: F401
    funm, hessenberg, rsf2csf, schur, solve_sylvester, sqrtm)
