"""`sparse.linalg.spsolve`: a direct solve of a CSR system.

As in JAX on the CPU, the factorization is SciPy's (`scipy.sparse.linalg.spsolve`, called
through `pure_callback`); derivatives come from `lax.custom_linear_solve` (implicit
differentiation with respect to the matrix values and the right-hand side).
"""
import numpy as np

from fluxion import numpy as jnp
from fluxion._src.callbacks import pure_callback
from fluxion._src.lax.control_flow import custom_linear_solve
from fluxion._src.api import ShapeDtypeStruct


def _csr_matvec(data, indices, indptr, x, transpose=False):
    n = indptr.shape[0] - 1
    rows = jnp.searchsorted(indptr, jnp.arange(data.shape[0], dtype=indptr.dtype),
                            side="right") - 1
    if transpose:
        rows, indices = indices, rows
    return jnp.zeros(n, jnp.result_type(data, x)).at[rows].add(data * x[indices], mode="drop")


def _scipy_solve(transpose):
    def solve(data, indices, indptr, b):
        import scipy.sparse
        import scipy.sparse.linalg
        a = scipy.sparse.csr_matrix((np.asarray(data), np.asarray(indices), np.asarray(indptr)),
                                    shape=(b.size, b.size))
        if transpose:
            a = a.T.tocsr()
        return np.asarray(scipy.sparse.linalg.spsolve(a, np.asarray(b)), dtype=b.dtype)
    return solve


def spsolve(data, indices, indptr, b, tol=1e-6, reorder=1):
    """Solve ``A x = b`` for a square CSR matrix ``A = (data, indices, indptr)``.

    Parameters
    ----------
    data, indices, indptr : 1-D arrays
      The CSR buffers.
    b : 1-D array
    tol, reorder
      Accepted for JAX compatibility (used by JAX's GPU solver only).

    Returns
    -------
    array
      The solution, with the shape and dtype of ``b``.
    """
    data, indices, indptr, b = map(jnp.asarray, (data, indices, indptr, b))
    if data.dtype != b.dtype:
        raise ValueError(f"data types do not match: {data.dtype=} {b.dtype=}")
    if not (jnp.issubdtype(indices.dtype, jnp.integer) and
            jnp.issubdtype(indptr.dtype, jnp.integer)):
        raise ValueError(f"index arrays must be integer typed; got {indices.dtype=} "
                         f"{indptr.dtype=}")
    if not data.ndim == indices.ndim == indptr.ndim == b.ndim == 1:
        raise ValueError("Arrays must be one-dimensional. "
                         f"Got {data.shape=} {indices.shape=} {indptr.shape=} {b.shape=}")
    if indptr.size != b.size + 1 or data.shape != indices.shape:
        raise ValueError(f"Invalid CSR buffer sizes: {data.shape=} {indices.shape=} "
                         f"{indptr.shape=}")
    if reorder not in (0, 1, 2, 3):
        raise ValueError(f"{reorder=} not valid, must be one of [1, 2, 3, 4]")
    float(tol)
    out = ShapeDtypeStruct(b.shape, b.dtype)

    def solve(_, rhs):
        return pure_callback(_scipy_solve(False), out, data, indices, indptr, rhs)

    def transpose_solve(_, rhs):
        return pure_callback(_scipy_solve(True), out, data, indices, indptr, rhs)

    matvec = lambda x: _csr_matvec(data, indices, indptr, x)
    return custom_linear_solve(matvec, b, solve, transpose_solve)
