"""`fluxion.scipy.sparse.linalg`: Krylov solvers (cg, bicgstab) for linear operators given as
functions or matrices, on arrays or pytrees of arrays.

Each solve is a `lax.custom_linear_solve`, so it differentiates by solving the adjoint system
(implicit differentiation) instead of unrolling the iterations, and vmaps and jits.
"""
from __future__ import annotations

import functools
import operator

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src.array import Array
from fluxion._src.tree_util import Partial, tree_leaves, tree_map, tree_structure


def _is_complex(x) -> bool:
    return np.dtype(x.dtype).kind == "c"


def _vdot_real(x, y):
    """Re(<x, y>), summed over the leaves; real-imaginary cross terms cancel."""
    total = 0.0
    for a, b in zip(tree_leaves(x), tree_leaves(y)):
        part = jnp.vdot(jnp.real(a), jnp.real(b), precision=lax.Precision.HIGHEST)
        if _is_complex(a) or _is_complex(b):
            part = part + jnp.vdot(jnp.imag(a), jnp.imag(b), precision=lax.Precision.HIGHEST)
        total = total + part
    return total


def _vdot(x, y):
    return sum(jnp.vdot(a, b, precision=lax.Precision.HIGHEST)
               for a, b in zip(tree_leaves(x), tree_leaves(y)))


def _axpy(alpha, x, y):
    """alpha * x + y, leafwise."""
    return tree_map(lambda a, b: alpha * a + b, x, y)


_sub = functools.partial(tree_map, operator.sub)


@Partial
def _identity(x):
    return x


def _as_operator(f, name):
    if callable(f):
        return f
    if isinstance(f, (np.ndarray, Array)):
        if f.ndim != 2 or f.shape[0] != f.shape[1]:
            raise ValueError(f"linear operator must be a square matrix, but has shape: {f.shape}")
        return functools.partial(jnp.dot, f, precision=lax.Precision.HIGHEST)
    if hasattr(f, "__matmul__"):  # any operator object: its own `@` (a sparse matrix, ...)
        shape = getattr(f, "shape", None)
        if shape is not None and (len(shape) != 2 or shape[0] != shape[1]):
            raise ValueError(f"linear operator must be a square matrix, but has shape: {shape}")
        return functools.partial(operator.matmul, f)
    raise TypeError(f"{name} must be either a function or ndarray: {f}")


def _cg(A, b, x0, *, maxiter, tol, atol, M):
    threshold = jnp.maximum(tol ** 2 * _vdot_real(b, b), atol ** 2)
    r0 = _sub(b, A(x0))
    z0 = M(r0)
    dtype = jnp.result_type(*tree_leaves(z0))
    gamma0 = _vdot_real(r0, z0).astype(dtype)

    def not_done(state):
        _, r, gamma, _, k = state
        residual = gamma.real if M is _identity else _vdot_real(r, r)
        return (residual > threshold) & (k < maxiter)

    def step(state):
        x, r, gamma, p, k = state
        Ap = A(p)
        alpha = gamma / _vdot_real(p, Ap).astype(dtype)
        x, r = _axpy(alpha, p, x), _axpy(-alpha, Ap, r)
        z = M(r)
        gamma_next = _vdot_real(r, z).astype(dtype)
        return x, r, gamma_next, _axpy(gamma_next / gamma, p, z), k + 1

    return lax.while_loop(not_done, step, (x0, r0, gamma0, z0, 0))[0]


def _bicgstab(A, b, x0, *, maxiter, tol, atol, M):
    threshold = jnp.maximum(tol ** 2 * _vdot_real(b, b), atol ** 2)
    r0 = _sub(b, A(x0))
    one = jnp.ones((), jnp.result_type(*tree_leaves(b)))

    def not_done(state):
        _, r, *_, k = state
        return (_vdot_real(r, r) > threshold) & (k < maxiter) & (k >= 0)

    def step(state):
        x, r, r_hat, alpha, omega, rho, p, q, k = state
        rho_next = _vdot(r_hat, r)
        beta = rho_next / rho * alpha / omega
        p = tree_map(lambda r_, p_, q_: r_ + beta * (p_ - omega * q_), r, p, q)
        p_hat = M(p)
        q = A(p_hat)
        alpha = rho_next / _vdot(r_hat, q)
        s = _axpy(-alpha, q, r)
        converged_half_way = _vdot_real(s, s) < threshold
        s_hat = M(s)
        t = A(s_hat)
        omega = _vdot(t, s) / _vdot(t, t)
        x = tree_map(lambda x_, ph, sh: jnp.where(converged_half_way, x_ + alpha * ph,
                                                  x_ + alpha * ph + omega * sh), x, p_hat, s_hat)
        r = tree_map(lambda s_, t_: jnp.where(converged_half_way, s_, s_ - omega * t_), s, t)
        # Breakdowns end the loop with a negative count (rho = 0: -10; alpha or omega = 0: -11).
        k = jnp.where((omega == 0) | (alpha == 0), -11, k + 1)
        k = jnp.where(rho_next == 0, -10, k)
        return x, r, r_hat, alpha, omega, rho_next, p, q, k

    start = (x0, r0, r0, one, one, one, r0, r0, 0)
    return lax.while_loop(not_done, step, start)[0]


def _krylov(method, A, b, x0, tol, atol, maxiter, M, symmetric_if_real):
    if x0 is None:
        x0 = tree_map(jnp.zeros_like, b)
    b, x0 = tree_map(jnp.asarray, b), tree_map(jnp.asarray, x0)
    if tree_structure(x0) != tree_structure(b):
        raise ValueError(f"x0 and b must have matching tree structure: {tree_structure(x0)} vs "
                         f"{tree_structure(b)}")
    shapes = lambda t: [np.shape(leaf) for leaf in tree_leaves(t)]  # noqa: E731
    if shapes(x0) != shapes(b):
        raise ValueError(f"arrays in x0 and b must have matching shapes: {shapes(x0)} vs "
                         f"{shapes(b)}")
    if maxiter is None:
        maxiter = 10 * sum(leaf.size for leaf in tree_leaves(b))
    A = _as_operator(A, "linear operator")
    M = _identity if M is None else _as_operator(M, "preconditioner")
    solve = functools.partial(method, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    symmetric = symmetric_if_real and not any(_is_complex(leaf) for leaf in tree_leaves(b))
    x = lax.custom_linear_solve(A, b, solve=lambda A_, b_: solve(A_, b_),
                                transpose_solve=lambda A_, b_: solve(A_, b_), symmetric=symmetric)
    return x, None


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve A x = b for a positive definite A with conjugate gradients.

    Parameters
    ----------
    A : a function x -> A x, or a square matrix. Results must have b's structure.
    b : array or pytree of arrays.
    x0 : initial guess (zeros by default).
    tol, atol : stop when norm(residual) <= max(tol * norm(b), atol).
    maxiter : at most this many iterations (10 * size of b by default).
    M : preconditioner (function or matrix) approximating the inverse of A.

    Returns
    -------
    (x, info) with info None (convergence is not reported, as in JAX).
    """
    return _krylov(_cg, A, b, x0, tol, atol, maxiter, M, symmetric_if_real=True)


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve A x = b for a general A with the biconjugate gradient stabilized method.

    Parameters as for `cg`; A need not be symmetric.
    """
    return _krylov(_bicgstab, A, b, x0, tol, atol, maxiter, M, symmetric_if_real=False)


# ---------------------------------------------------------------------------------------------
# GMRES

def _norm(x):
    return jnp.sqrt(_vdot_real(x, x))


def _safe_normalize(x, threshold=None):
    """(x / |x|, |x|), or (0, 0) when |x| is at or below `threshold` (machine epsilon)."""
    norm = _norm(x)
    dtype = jnp.result_type(*tree_leaves(x))
    if threshold is None:
        threshold = jnp.finfo(norm.dtype).eps
    use = norm > threshold
    scaled = tree_map(lambda y: jnp.where(use, y / norm.astype(dtype), 0.0).astype(y.dtype), x)
    return scaled, jnp.where(use, norm, 0.0)


def _columns(v_tree, k):
    return tree_map(lambda v: v[..., k], v_tree)


def _project(q_tree, x):
    """Q^H x, summed over the leaves (Q's Krylov vectors are its last axis)."""
    return sum(jnp.einsum("...n,...->n", jnp.conj(q), y) for q, y in
               zip(tree_leaves(q_tree), tree_leaves(x)))


def _gram_schmidt(q_tree, x, x_norm, max_iterations=2):
    """Orthogonalize x against Q's columns, repeating once more when cancellation lost more
    than half of x (classical Gram-Schmidt with reorthogonalization)."""
    def once(x):
        h = _project(q_tree, x)
        return tree_map(lambda q, y: y - jnp.dot(q, h), q_tree, x), h

    x, r = once(x)
    for _ in range(max_iterations - 1):
        again = _norm(x) < x_norm / np.sqrt(2.0)
        x2, h2 = once(x)
        x = tree_map(lambda a, b: jnp.where(again, b, a), x, x2)
        r = r + jnp.where(again, h2, 0.0)
    return x, r


def _arnoldi(k, A, M, V, H):
    """The k-th Arnoldi step: the next orthonormal Krylov vector, and H's row k."""
    v = M(A(_columns(V, k)))
    _, norm0 = _safe_normalize(v)
    v, h = _gram_schmidt(V, v, norm0)
    eps = jnp.finfo(norm0.dtype).eps
    unit, norm1 = _safe_normalize(v, threshold=eps * norm0)
    V = tree_map(lambda X, y: X.at[..., k + 1].set(y), V, unit)
    h = h.at[k + 1].set(norm1.astype(h.dtype))
    return V, H.at[k, :].set(h), norm1 == 0


def _gmres_cycle(A, b, x0, unit_residual, residual_norm, restart, M):
    """One restart: build the Krylov basis, then take the least-squares combination of it
    (normal equations solved by Cholesky, as JAX's 'batched' method)."""
    from fluxion.lax import linalg as lax_linalg
    dtype = jnp.result_type(*tree_leaves(b))
    V = tree_map(lambda x: jnp.pad(x[..., None], ((0, 0),) * x.ndim + ((0, restart),)),
                 unit_residual)
    H = jnp.eye(restart, restart + 1, dtype=dtype)

    def step(state):
        V, H, _, k = state
        V, H, breakdown = _arnoldi(k, A, M, V, H)
        return V, H, breakdown, k + 1
    V, H, _, _ = lax.while_loop(lambda s: (s[3] < restart) & ~s[2], step, (V, H, False, 0))
    beta = jnp.zeros(restart + 1, dtype).at[0].set(residual_norm.astype(dtype))
    hT = H.T  # (restart + 1, restart)
    normal = jnp.conj(hT).T @ hT
    rhs = jnp.conj(hT).T @ beta
    factor = lax_linalg.cholesky(normal)
    y = lax_linalg.triangular_solve(factor, rhs[:, None], left_side=True, lower=True)
    y = lax_linalg.triangular_solve(factor, y, left_side=True, lower=True, transpose_a=True,
                                    conjugate_a=True)[:, 0]
    x = tree_map(lambda x0_, X: x0_ + jnp.dot(X[..., :-1], y), x0, V)
    unit, norm = _safe_normalize(M(_sub(b, A(x))))
    return x, unit, norm


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
          solve_method="batched"):
    """Solve A x = b with restarted GMRES (any nonsingular A).

    Parameters as for `cg`, and `restart` (the Krylov dimension of each cycle) and
    `solve_method` ('batched'; 'incremental' is accepted and solved the same way).

    Returns
    -------
    (x, info) with info 0, or -1 if x is not finite.
    """
    if solve_method not in ("batched", "incremental"):
        raise ValueError(f"invalid solve_method {solve_method}, must be either 'incremental' "
                         "or 'batched'")
    if x0 is None:
        x0 = tree_map(jnp.zeros_like, b)
    b, x0 = tree_map(jnp.asarray, b), tree_map(jnp.asarray, x0)
    if tree_structure(x0) != tree_structure(b):
        raise ValueError(f"x0 and b must have matching tree structure: {tree_structure(x0)} vs "
                         f"{tree_structure(b)}")
    A = _as_operator(A, "linear operator")
    M = _identity if M is None else _as_operator(M, "preconditioner")
    size = sum(leaf.size for leaf in tree_leaves(b))
    maxiter = 10 * size if maxiter is None else maxiter
    restart = min(restart, size)
    atol = jnp.maximum(tol * _norm(b), atol)

    def solve(A_, b_):
        unit, norm = _safe_normalize(M(_sub(b_, A_(x0))))

        def cycle(state):
            x, k, unit, norm = state
            x, unit, norm = _gmres_cycle(A_, b_, x, unit, norm, restart, M)
            return x, k + 1, unit, norm
        return lax.while_loop(lambda s: (s[1] < maxiter) & (s[3] > atol), cycle,
                              (x0, 0, unit, norm))[0]

    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    return x, jnp.where(jnp.isnan(_norm(x)), -1, 0)
