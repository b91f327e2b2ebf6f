"""scipy.linalg on the Schur and Hessenberg forms: schur, hessenberg, rsf2csf, sqrtm, funm,
solve_sylvester (lax.linalg's gees/gehrd kernels plus triangular recurrences)."""
from __future__ import annotations

import numpy as np

import fluxion.numpy as jnp
from fluxion._src.scipy.linalg import _inexact
from fluxion import lax
from fluxion.lax import linalg as lax_linalg


def _h(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _require_inexact(name, a):
    # JAX's LAPACK-backed schur/hessenberg take floating or complex input only.
    dtype = jnp.asarray(a).dtype
    if not jnp.issubdtype(dtype, jnp.inexact):
        raise TypeError(f"{name} does not accept dtype {np.dtype(dtype).name}; accepted dtypes "
                        "are subtypes of floating or complexfloating.")


def _complex(a):
    a = _inexact(a)
    return a if jnp.iscomplexobj(a) else a.astype(jnp.result_type(a.dtype, 1j))


def _square(name, a, what="a"):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: input {what!r} must be a square matrix (or a batch of "
                         f"them), got shape {a.shape}")


def schur(a, output: str = "real"):
    """Schur decomposition a = Z T Z^H: returns (T, Z).

    T is quasi upper triangular (2x2 blocks for complex-conjugate eigenvalue pairs) for
    `output='real'` and real input, upper triangular for `output='complex'`.
    """
    if output not in ("real", "complex"):
        raise ValueError(f"Unrecognized output {output!r}: expected 'real' or 'complex'")
    if output == "real":
        _require_inexact("schur", a)
    a = _complex(a) if output == "complex" else _inexact(a)
    _square("schur", a)
    return lax_linalg.schur(a)


def hessenberg(a, *, calc_q: bool = False, overwrite_a: bool = False,
               check_finite: bool = True):
    """Hessenberg form a = Q H Q^H (H zero below the first subdiagonal): H, or (H, Q)."""
    _require_inexact("hessenberg", a)
    a = _inexact(a)
    _square("hessenberg", a)
    n = a.shape[-1]
    if n == 0:
        return (jnp.zeros_like(a), jnp.zeros_like(a)) if calc_q else jnp.zeros_like(a)
    out, taus = lax_linalg.hessenberg(a)
    h = jnp.triu(out, -1)
    if not calc_q:
        return h
    # Q = diag(1, Q'), Q' the product of the reflectors stored below the first subdiagonal.
    q_inner = lax_linalg.householder_product(out[..., 1:, :-1], taus)
    batch_pad = [(0, 0)] * (a.ndim - 2)
    q = jnp.pad(q_inner, batch_pad + [(1, 0), (1, 0)])
    q = q + jnp.pad(jnp.ones(a.shape[:-2] + (1, 1), a.dtype), batch_pad + [(0, n - 1),
                                                                         (0, n - 1)])
    return h, q


# ---------------------------------------------------------------------------------------------
# rsf2csf

def _rsf2csf_2d(T, Z):
    n = T.shape[-1]
    eps = np.finfo(T.dtype).eps
    rows = jnp.arange(n)

    def rotate(m, T, Z):
        # mu: LAPACK geev's first eigenvalue of the 2x2 block (as SciPy: for a real Schur
        # block, the one with positive imaginary part), shifted by T[m, m]. A closed form
        # orders the eigenvalues of other blocks differently.
        c, d = T[m, m - 1], T[m, m]
        mu = jnp.linalg.eigvals(lax.dynamic_slice(T, (m - 1, m - 1), (2, 2)))[0] - d
        r = jnp.sqrt(jnp.abs(mu) ** 2 + jnp.abs(c) ** 2).astype(T.dtype)
        cs, sn = mu / r, c / r
        G = jnp.stack([jnp.stack([jnp.conj(cs), sn]), jnp.stack([-sn, cs])])
        top = lax.dynamic_slice_in_dim(T, m - 1, 2, axis=0)
        top = jnp.where(rows >= m - 1, G @ top, top)
        T = lax.dynamic_update_slice_in_dim(T, top, m - 1, axis=0)
        cols = lax.dynamic_slice_in_dim(T, m - 1, 2, axis=1)
        cols = jnp.where(rows[:, None] <= m, cols @ _h(G), cols)
        T = lax.dynamic_update_slice_in_dim(T, cols, m - 1, axis=1)
        zc = lax.dynamic_slice_in_dim(Z, m - 1, 2, axis=1) @ _h(G)
        return T, lax.dynamic_update_slice_in_dim(Z, zc, m - 1, axis=1)

    def step(i, TZ):
        T, Z = TZ
        m = n - i
        big = jnp.abs(T[m, m - 1]) > eps * (jnp.abs(T[m - 1, m - 1]) + jnp.abs(T[m, m]))
        T, Z = lax.cond(big, rotate, lambda m, T, Z: (T, Z), m, T, Z)
        return T.at[m, m - 1].set(0), Z

    if n <= 1:
        return T, Z
    return lax.fori_loop(1, n, step, (T, Z))


def rsf2csf(T, Z, check_finite: bool = True):
    """Convert a real Schur form (T, Z) to the complex one: T upper triangular, a = Z T Z^H."""
    T, Z = jnp.asarray(T), jnp.asarray(Z)
    _square("rsf2csf", T, "T")
    _square("rsf2csf", Z, "Z")
    if T.shape[-1] != Z.shape[-1]:
        raise ValueError(f"Input array shapes must match: Z: {Z.shape} vs. T: {T.shape}")
    dtype = jnp.result_type(T.dtype, Z.dtype, 1j)
    if not jnp.issubdtype(dtype, jnp.complexfloating):
        dtype = jnp.result_type(float, 1j)
    T, Z = T.astype(dtype), Z.astype(dtype)
    return jnp.vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(T, Z)


# ---------------------------------------------------------------------------------------------
# sqrtm, funm

def _sqrtm_triangular(T):
    """The upper triangular square root U (U @ U = T) of an upper triangular T, column by
    column (Bjorck and Hammarling, 1983)."""
    n = T.shape[-1]
    diag = jnp.sqrt(jnp.diagonal(T))
    U = jnp.diag(diag)
    idx = jnp.arange(n)

    def column(j, U):
        def entry(l, U):
            i = j - 1 - l
            between = (idx > i) & (idx < j)
            s = jnp.sum(jnp.where(between, U[i, :] * U[:, j], 0))
            t = T[i, j]
            return U.at[i, j].set(jnp.where(t == s, 0, (t - s) / (diag[i] + diag[j])))
        return lax.fori_loop(0, j, entry, U)

    return lax.fori_loop(0, n, column, U)


def sqrtm(A, blocksize: int = 1):
    """The principal matrix square root, by the complex Schur method (complex result)."""
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    A = jnp.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"sqrtm expects a square matrix, got shape {A.shape}")
    T, Z = schur(A, output="complex")
    return Z @ _sqrtm_triangular(T) @ _h(Z)


def _parlett(F, T):
    """Fill the strict upper triangle of F = f(T) from its diagonal (Parlett's recurrence,
    Golub and Van Loan, Algorithm 11.1.1); also returns the smallest |T[j,j] - T[i,i]|."""
    n = T.shape[-1]
    idx = jnp.arange(n)

    def diagonal(p, carry):
        def entry(i, carry):
            F, minden = carry
            j = i + p
            between = (idx > i) & (idx < j)
            s = T[i, j] * (F[j, j] - F[i, i])
            s = s + jnp.sum(jnp.where(between, T[i, :] * F[:, j] - F[i, :] * T[:, j], 0))
            den = T[j, j] - T[i, i]
            s = jnp.where(den != 0, s / jnp.where(den != 0, den, 1), s)
            return F.at[i, j].set(s), jnp.minimum(minden, jnp.abs(den))
        return lax.fori_loop(0, n - p, entry, carry)

    return lax.fori_loop(1, n, diagonal, (F, jnp.abs(T[0, 0])))


def funm(A, func, disp: bool = True):
    """The matrix function f(A) for a scalar function `func`, by the Schur-Parlett method.

    The result is complex. With `disp=False` returns (f(A), an estimate of its relative
    error).
    """
    A = jnp.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError("expected square array_like input")
    T, Z = schur(A)
    T, Z = rsf2csf(T, Z)
    F = jnp.diag(jnp.asarray(func(jnp.diagonal(T))).astype(T.dtype))
    F, minden = _parlett(F, T)
    F = Z @ F @ _h(Z)
    if disp:
        return F
    tol = np.finfo(F.dtype).eps
    minden = jnp.where(minden == 0, tol, minden)
    err = jnp.where(jnp.any(jnp.isinf(F)), np.inf, jnp.minimum(1, jnp.maximum(
        tol, (tol / minden) * jnp.linalg.norm(jnp.triu(T, 1), 1))))
    return F, err


# ---------------------------------------------------------------------------------------------
# solve_sylvester

def _sylvester_triangular(R, L, F):
    """Y with R Y + Y L = F for upper triangular R (m x m) and lower triangular L (n x n),
    one column at a time from the last: (R + L[j, j] I) y_j = f_j - sum_{k>j} y_k L[k, j]."""
    m, n = F.shape
    eye = jnp.eye(m, dtype=F.dtype)

    def column(i, Y):
        j = n - 1 - i
        rhs = F[:, j] - Y @ L[:, j]  # columns <= j of Y are still zero
        y = lax_linalg.triangular_solve(R + L[j, j] * eye, rhs[:, None], left_side=True,
                                        lower=False)[:, 0]
        return Y.at[:, j].set(y)

    return lax.fori_loop(0, n, column, jnp.zeros_like(F))


def _solve_sylvester_2d(A, B, C, *, method, tol):
    if method == "schur":
        R, U = schur(A, output="complex")
        S, V = schur(_h(B), output="complex")  # B = V S^H V^H
        L = _h(S)
        F = _h(U) @ C.astype(R.dtype) @ V
        X = U @ _sylvester_triangular(R, L, F) @ _h(V)
        wa, wb = jnp.diagonal(R), jnp.diagonal(L)
    else:
        wa, ua = jnp.linalg.eig(A)
        wb, ub = jnp.linalg.eig(B)
        F = jnp.linalg.solve(ua, C.astype(wa.dtype) @ ub)
        X = ua @ (F / (wa[:, None] + wb[None, :])) @ jnp.linalg.inv(ub)
    if not jnp.iscomplexobj(C):
        X = jnp.real(X)
    singular = jnp.any(jnp.abs(wa[:, None] + wb[None, :]) < tol)
    return jnp.where(singular, jnp.full_like(X, np.nan), X)


def solve_sylvester(A, B, C, *, method: str = "schur", tol: float = 1e-8):
    """X with A X + X B = C (Bartels-Stewart on complex Schur forms, or `method='eigen'`).

    Returns NaN where some eigenvalues a_i + b_j are within `tol` of zero (no unique
    solution).
    """
    if method not in ("schur", "eigen"):
        raise ValueError(f"Unrecognized method {method}. The two valid methods are either "
                         f"\"schur\" or \"eigen\".")
    from fluxion._src.numpy.util import promote_dtypes_inexact
    A, B, C = promote_dtypes_inexact(jnp.asarray(A), jnp.asarray(B), jnp.asarray(C))
    m, n = C.shape[-2:]
    if A.shape[-2:] != (m, m) or B.shape[-2:] != (n, n):
        raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {A.shape}\n"
                         f"B: {B.shape}\nC: {C.shape}")
    return jnp.vectorize(lambda a, b, c: _solve_sylvester_2d(a, b, c, method=method, tol=tol),
                         signature="(m,m),(n,n),(m,n)->(m,n)")(A, B, C)
