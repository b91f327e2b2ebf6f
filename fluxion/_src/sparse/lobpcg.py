"""`sparse.linalg.lobpcg_standard`: the largest eigenpairs of a Hermitian operator by LOBPCG.

The iteration keeps three blocks of `k` columns, each orthonormal (a column may be zero where
the block lost rank): X, the current eigenvector estimates; P, the directions X moved in at
the last step; R, the residuals `A X - X diag(theta)` with X and P projected out. Each step
solves the Rayleigh-Ritz problem of A on span(X, P, R) and keeps its top `k` Ritz pairs.
Orthonormalization is SVQB (an eigendecomposition of the small Gram matrix), applied twice;
projections are repeated twice ("twice is enough", Kahan/Parlett). References: Knyazev,
SIAM J. Sci. Comput. 23 (2001); Duersch, Shao, Yang, Gu, SIAM J. Sci. Comput. 40 (2018);
Stathopoulos and Wu, SIAM J. Sci. Comput. 23 (2002).
"""
import functools

import numpy as np

from fluxion import lax
from fluxion import numpy as jnp
from fluxion._src.api import jit
from fluxion._src.basearray import Array


def lobpcg_standard(A, X, m: int = 100, tol=None):
    """Top-`k` eigenvalues and eigenvectors of a Hermitian matrix by LOBPCG.

    Parameters
    ----------
    A : array of shape (n, n), or callable
        The Hermitian matrix, or a function computing its product with an `(n, j)` array.
    X : array of shape (n, k)
        Initial search directions (linearly independent; orthonormalized here).
        Requires `0 < 5 * k < n`.
    m : int
        The maximum number of iterations.
    tol : float, optional
        An eigenpair `(lam, v)` has converged when `|A v - lam v| < tol * 10 * n *
        (lam + |A v|)`; the iteration stops once all `k` have. Defaults to the machine
        epsilon of `X.dtype`.

    Returns
    -------
    theta : array of shape (k,)
        The eigenvalues found, in decreasing order.
    U : array of shape (n, k)
        The corresponding eigenvectors.
    i : int array
        The number of iterations run.

    Raises
    ------
    ValueError
        If `k == 0`, `5 * k >= n`, or A's product does not have X's dtype and shape.
    """
    if isinstance(A, (Array, np.ndarray)):
        return _lobpcg_of_matrix(A, X, m, tol)
    return _lobpcg_of_operator(A, X, m, tol)


def _matmul(a, b):
    return lax.dot(a, b, precision=(lax.Precision.HIGHEST, lax.Precision.HIGHEST))


def _adjoint(a):
    return jnp.conj(a).T


@functools.partial(jit, static_argnames=("m",))
def _lobpcg_of_matrix(A, X, m, tol):
    return _lobpcg(functools.partial(_matmul, A), X, m, tol)


@functools.partial(jit, static_argnames=("A", "m"))
def _lobpcg_of_operator(A, X, m, tol):
    return _lobpcg(A, X, m, tol)


def _check_inputs(A, X):
    n, k = X.shape
    if k == 0:
        raise ValueError(f"must have search dim > 0, got {k}")
    if 5 * k >= n:
        raise ValueError(f"expected search dim * 5 < matrix dim (got {5 * k}, {n})")
    probe = A(jnp.zeros((n, 1), X.dtype))
    if probe.dtype != X.dtype:
        raise ValueError(f"A, X must have same dtypes (were {probe.dtype}, {X.dtype})")
    if probe.shape != (n, 1):
        raise ValueError(f"A must be ({n}, {n}) matrix A, got output {probe.shape}")


def _column_norms(a):
    return jnp.linalg.norm(a, ord=2, axis=0, keepdims=True)


def _svqb(a):
    """An orthonormal basis of span(a) in `a`'s shape; directions that are numerically
    dependent (Gram eigenvalue below eps times the largest) come out as zero columns."""
    norms = _column_norms(a)
    a = a / jnp.where(norms == 0, 1, norms)
    gram = _matmul(_adjoint(a), a)
    w, v = jnp.linalg.eigh(gram)
    cutoff = jnp.finfo(a.dtype).eps * jnp.max(w)
    keep = (w > cutoff) & (cutoff > 0)
    scale = jnp.where(keep, 1 / jnp.sqrt(jnp.where(keep, w, 1)), 0)
    basis = _matmul(a, v * scale[None, :].astype(v.dtype))
    norms = _column_norms(basis)
    return basis / jnp.where(norms == 0, 1, norms)


def _orthonormalize(a):
    return _svqb(_svqb(a))


def _project_out(basis, u):
    """The part of `u` orthogonal to the orthonormal (zero columns allowed) `basis`, as
    orthonormal columns; columns that were (numerically) inside span(basis) become zero."""
    for _ in range(2):
        u = _orthonormalize(u - _matmul(basis, _matmul(_adjoint(basis), u)))
    # Renormalizing can bring back components along `basis` when a column was tiny; a last
    # projection without renormalizing exposes those columns by their shrunken norm.
    for _ in range(2):
        u = u - _matmul(basis, _matmul(_adjoint(basis), u))
    return u * (_column_norms(u) >= 0.99).astype(u.dtype)


def _initial_directions(X):
    """k orthonormal directions orthogonal to X (a fixed Gaussian draw projected out)."""
    from fluxion import random
    draw = random.normal(random.key(0), X.shape, jnp.finfo(X.dtype).dtype).astype(X.dtype)
    return _project_out(X, draw)


def _rayleigh_ritz(A, basis):
    """Ritz values (decreasing) and coefficient vectors of A on orthonormal `basis`."""
    w, v = jnp.linalg.eigh(_matmul(_adjoint(basis), A(basis)))
    return w[::-1], v[:, ::-1]


def _lobpcg(A, X, m, tol):
    n, k = X.shape
    _check_inputs(A, X)
    if tol is None:
        tol = float(jnp.finfo(X.dtype).eps)
    X = _orthonormalize(X)
    P = _initial_directions(X)
    AX = A(X)
    theta = jnp.real(jnp.sum(jnp.conj(X) * AX, axis=0))
    R = AX - theta[None, :].astype(X.dtype) * X

    def step(state):
        i, X, P, R, _, _ = state
        R = _project_out(jnp.concatenate([X, P], axis=1), R)
        basis = jnp.concatenate([X, P, R], axis=1)
        ritz_values, coef = _rayleigh_ritz(A, basis)
        theta = ritz_values[:k]
        top = coef[:, :k]
        X = _matmul(basis, top / _column_norms(top))
        X = X / _column_norms(X)
        # span(new X, new P) must contain the old X. The coefficient vectors of the other
        # Ritz vectors, coef[:, k:], combined by their first k rows (their overlap with old
        # X) give the k directions of that span orthogonal to new X.
        overlap, _ = jnp.linalg.qr(_adjoint(coef[:k, k:]))
        P = _matmul(basis, _matmul(coef[:, k:], overlap))
        norms = _column_norms(P)
        P = P / jnp.where(norms == 0, 1, norms)
        AX = A(X)
        R = AX - theta[None, :].astype(X.dtype) * X
        bound = tol * 10 * n * (jnp.linalg.norm(AX, ord=2, axis=0) + theta)
        converged = jnp.sum(jnp.linalg.norm(R, ord=2, axis=0) < bound, dtype=jnp.int32)
        return i + 1, X, P, R, converged, theta

    def unfinished(state):
        i, *_, converged, _ = state
        return (i < m) & (converged < k)

    state = (jnp.int32(0), X, P, R, jnp.int32(0), theta)
    i, X, _, _, _, theta = lax.while_loop(unfinished, step, state)
    return theta, X, i
