"""fluxion.numpy.linalg: jax.numpy.linalg on LAPACK."""
from fluxion._src.numpy.linalg import (  # noqa: F401
    EigResult, EighResult, LinAlgError, QRResult, SlogdetResult, SVDResult, cholesky, cond, cross, det, eig,
    eigvals,
    diagonal, eigh, eigvalsh, inv, lstsq, matmul, matrix_norm, matrix_power, matrix_rank,
    matrix_transpose, multi_dot, norm, outer, pinv, qr, slogdet, solve, svd, svdvals, tensordot,
    tensorinv, tensorsolve, trace, vecdot, vector_norm)
