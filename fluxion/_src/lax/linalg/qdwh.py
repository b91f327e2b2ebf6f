"""qdwh: polar decomposition x = u h by the QR-based dynamically weighted Halley iteration.

Nakatsukasa, Bai and Gygi, "Optimizing Halley's iteration for computing the matrix polar
decomposition", SIAM J. Matrix Anal. Appl. 31(5), 2010. Written on lax.linalg's qr,
cholesky and triangular_solve, as in JAX (not a primitive).
"""
from __future__ import annotations

import numpy as np

# Above this weight the Cholesky-based step loses accuracy; use the QR-based one.
_CHOLESKY_CUTOFF = 100


def _weights(l, eps, max_iterations):
    """The static (a, b, c) of each dynamically weighted step, until l reaches 1."""
    tol_l = 10.0 * eps / 2.0
    steps = []
    while l + tol_l < 1 and len(steps) < max_iterations:
        l2 = l * l
        dd = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        sqd = (1.0 + dd) ** 0.5
        a = sqd + (2 - dd + 2 * (2 - l2) / (l2 * sqd)) ** 0.5
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        l = l * (a + b * l2) / (1 + c * l2)
        steps.append((a, b, c))
    return steps


def _qr_step(u, a, b, c):
    import fluxion.numpy as jnp
    from fluxion._src.lax.linalg.primitives import qr
    m, n = u.shape
    sqrt_c = c ** 0.5
    y = jnp.concatenate([sqrt_c * u, jnp.eye(n, dtype=u.dtype)], axis=0)
    q, _ = qr(y, full_matrices=False)
    q1, q2 = q[:m], q[m:]
    e = b / c
    return e * u + ((a - e) / sqrt_c) * (q1 @ jnp.conj(q2.T))


def _cholesky_step(u, a, b, c):
    import fluxion.numpy as jnp
    from fluxion._src.lax.linalg.primitives import cholesky, triangular_solve
    n = u.shape[1]
    z = c * (jnp.conj(u.T) @ u) + jnp.eye(n, dtype=u.dtype)
    w = cholesky(z, symmetrize_input=False)
    # u z^-1 = u w^-H w^-1, as two triangular solves from the right.
    y = triangular_solve(w, u, left_side=False, lower=True, transpose_a=True,
                         conjugate_a=True)
    y = triangular_solve(w, y, left_side=False, lower=True)
    e = b / c
    return e * u + (a - e) * y


def _qdwh(x, max_iterations, eps):
    import fluxion.numpy as jnp
    from fluxion import lax
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    one_norm = jnp.linalg.norm(x, ord=1)
    inf_norm = jnp.linalg.norm(x, ord=np.inf)
    alpha_inv = jnp.where(one_norm == 0, 1, lax.rsqrt(one_norm) * lax.rsqrt(inf_norm))
    u = x * alpha_inv.astype(x.dtype)
    tol_norm = (10.0 * eps / 2.0) ** (1 / 3)

    not_converged = jnp.array(True)
    steps = _weights(eps, eps, max_iterations)
    for a, b, c in steps:
        if c > _CHOLESKY_CUTOFF:
            u = _qr_step(u, a, b, c)
        else:
            u_prev = u
            u = _cholesky_step(u, a, b, c)
            not_converged = jnp.linalg.norm(u - u_prev) > tol_norm

    # l has reached 1 (or the budget is spent): plain Halley steps until u settles.
    def cond(state):
        k, _, nc = state
        return jnp.logical_and(nc, k < max_iterations)

    def body(state):
        k, u, _ = state
        u_new = _cholesky_step(u, 3.0, 1.0, 3.0)
        return k + 1, u_new, jnp.linalg.norm(u_new - u) > tol_norm

    k, u, not_converged = lax.while_loop(cond, body,
                                         (len(steps), u, not_converged))
    u = 1.5 * u - 0.5 * u @ (jnp.conj(u.T) @ u)  # one Newton-Schulz refinement
    h = jnp.conj(u.T) @ x
    h = (h + jnp.conj(h.T)) / 2
    return u, h, k, jnp.logical_not(not_converged)


def qdwh(x, *, is_hermitian: bool = False, max_iterations: int | None = None,
         eps: float | None = None, dynamic_shape: tuple[int, int] | None = None):
    """Polar decomposition x = u h of an (M, N) matrix with M >= N by QDWH.

    Returns (u, h, num_iters, is_converged): u has orthonormal columns, h is Hermitian
    positive semidefinite. `dynamic_shape` (m, n) treats x as an m x n matrix padded with
    zeros; u and h are padded likewise. `is_hermitian` is unused (as in JAX).
    """
    import fluxion.numpy as jnp
    del is_hermitian
    x = jnp.asarray(x)
    max_iterations = 10 if max_iterations is None else int(max_iterations)
    if x.ndim != 2:
        raise ValueError(f"qdwh requires a matrix, got shape {x.shape}")
    M, N = x.shape
    if M < N:
        raise ValueError("The input matrix of shape M x N must have M >= N.")
    if dynamic_shape is None:
        return _qdwh(x, max_iterations, eps)
    m, n = (int(d) for d in dynamic_shape)
    u, h, k, ok = _qdwh(x[:m, :n], max_iterations, eps)
    return (jnp.pad(u, [(0, M - m), (0, N - n)]), jnp.pad(h, [(0, N - n), (0, N - n)]), k, ok)
