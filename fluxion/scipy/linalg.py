"""Linear algebra (`jax.scipy.linalg`)."""
from fluxion._src.scipy.linalg import (  # noqa: F401
    cho_factor, cho_solve, cholesky, det, eigh, eigh_tridiagonal, expm, expm_frechet, inv, lu,
    lu_factor, lu_solve, polar, qr, qr_multiply, solve, solve_triangular, svd)
from fluxion._src.scipy.special_matrices import (  # noqa: F401
    block_diag, circulant, companion, convolution_matrix, dft, fiedler, fiedler_companion,
    hadamard, hankel, helmert, hilbert, invhilbert, invpascal, leslie, pascal, toeplitz)
from fluxion._src.scipy.linalg_schur import (  # noqa: F401
    funm, hessenberg, rsf2csf, schur, solve_sylvester, sqrtm)

from fluxion._src.numpy.eager import compile_eagerly as _compile_eagerly  # noqa: E402

# Outside jit each function runs as one cached executable per signature (expm's Pade steps,
# a factorization and its checks: one dispatch each, as JAX jits them). Op by op stay
# cho_factor and cho_solve, whose pair (c, lower) holds a Python bool that a program would
# return, or take, as an array, and funm, whose `func` may be a NumPy function of values.
_compile_eagerly(globals(), names=[n for n in dir() if not n.startswith("_")
                                   and n not in ("cho_factor", "cho_solve", "funm")],
                 static_parameters=frozenset({
    "lower", "overwrite_a", "overwrite_b", "overwrite_c", "check_finite", "n", "mode", "scale",
    "dtype", "eigvals_only", "turbo", "eigvals", "type", "select", "select_range", "tol",
    "upper_triangular", "max_squarings", "method", "compute_expm", "full",
    "calc_q", "kind", "permute_l", "trans", "side", "eps", "max_iterations", "lwork",
    "pivoting", "conjugate", "output", "debug", "assume_a", "unit_diagonal", "blocksize",
    "full_matrices", "compute_uv", "lapack_driver"}))
