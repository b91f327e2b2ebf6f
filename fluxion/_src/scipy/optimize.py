"""`fluxion.scipy.optimize`: minimize (BFGS) and the strong-Wolfe line search.

BFGS (Nocedal and Wright, algorithm 6.1) runs as one `lax.while_loop`, so `minimize` works
under `jit`; gradients come from `value_and_grad`.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src.ad_api import value_and_grad
from fluxion._src.scipy.line_search import LineSearchResults, line_search  # noqa: F401


class OptimizeResults(NamedTuple):
    """x, success, status (0 converged, 1 maxiter, 2+ line search failure), fun, jac,
    hess_inv, nfev, njev, nit."""
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


class _BFGS(NamedTuple):
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    H_k: Any
    old_old_fval: Any
    line_search_status: Any


def _vector_norm(x, ord):
    if ord == np.inf:
        return jnp.max(jnp.abs(x))
    if ord == -np.inf:
        return jnp.min(jnp.abs(x))
    if ord == 2:
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x))))
    return jnp.sum(jnp.abs(x) ** ord) ** (1.0 / ord)


def _dot(a, b):
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


def minimize_bfgs(fun: Callable, x0, maxiter: int | None = None, norm=np.inf, gtol: float = 1e-5,
                  line_search_maxiter: int = 10):
    """BFGS from `x0` until the gradient's `norm` is below `gtol` (or maxiter iterations)."""
    maxiter = np.size(x0) * 200 if maxiter is None else maxiter
    n = x0.shape[0]
    f0, g0 = value_and_grad(fun)(x0)
    start = _BFGS(_vector_norm(g0, norm) < gtol, False, 0, 1, 1, x0, f0, g0,
                  jnp.eye(n, dtype=x0.dtype), f0 + _vector_norm(g0, 2) / 2, 0)

    def body(s):
        direction = -_dot(s.H_k, s.g_k)
        ls = line_search(fun, s.x_k, direction, old_fval=s.f_k, old_old_fval=s.old_old_fval,
                         gfk=s.g_k, maxiter=line_search_maxiter)
        step = ls.a_k * direction
        y = ls.g_k - s.g_k
        rho = jnp.reciprocal(_dot(y, step))
        w = jnp.eye(n, dtype=rho.dtype) - rho * step[:, None] * y[None, :]
        H = jnp.einsum("ij,jk,lk", w, s.H_k, w, precision=lax.Precision.HIGHEST) \
            + rho * step[:, None] * step[None, :]
        return _BFGS(_vector_norm(ls.g_k, norm) < gtol, ls.failed, s.k + 1,
                     s.nfev + ls.nfev, s.ngev + ls.ngev, s.x_k + step, ls.f_k, ls.g_k,
                     jnp.where(jnp.isfinite(rho), H, s.H_k), s.f_k, ls.status)

    s = lax.while_loop(lambda s: ~s.converged & ~s.failed & (s.k < maxiter), body, start)
    status = jnp.where(s.converged, 0, jnp.where(s.k == maxiter, 1,
                                                 jnp.where(s.failed, 2 + s.line_search_status,
                                                           -1)))
    return s, status


def minimize(fun: Callable, x0, args: tuple = (), *, method: str, tol: float | None = None,
             options: Mapping[str, Any] | None = None) -> OptimizeResults:
    """Minimize `fun(x, *args)` over a 1-D `x` from `x0`.

    Parameters
    ----------
    method : "BFGS", or JAX's "l-bfgs-experimental-do-not-rely-on-this" (L-BFGS).
    tol : unused, as in JAX; use options={"gtol": ...}.
    options : BFGS: maxiter, norm, gtol, line_search_maxiter. L-BFGS: maxiter, norm, maxcor,
        ftol, gtol, maxfun, maxgrad, maxls.
    """
    options = dict(options or {})
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to fluxion.scipy.optimize.minimize must be a tuple, "
                        f"got {args}")
    if method.lower() not in ("bfgs", "l-bfgs-experimental-do-not-rely-on-this"):
        raise ValueError(f"Method {method} not recognized")
    x0 = jnp.asarray(x0)
    if x0.ndim != 1:
        raise ValueError(f"minimize: x0 must be one-dimensional, got shape {x0.shape}")
    if method.lower() != "bfgs":
        from fluxion._src.scipy.lbfgs import minimize_lbfgs
        r = minimize_lbfgs(lambda x: fun(x, *args), x0, **options)
        return OptimizeResults(x=r.x_k, success=r.converged & ~r.failed, status=r.status,
                               fun=r.f_k, jac=r.g_k, hess_inv=None, nfev=r.nfev, njev=r.ngev,
                               nit=r.k)
    s, status = minimize_bfgs(lambda x: fun(x, *args), x0, **options)
    return OptimizeResults(x=s.x_k, success=s.converged & ~s.failed, status=status, fun=s.f_k,
                           jac=s.g_k, hess_inv=s.H_k, nfev=s.nfev, njev=s.ngev, nit=s.k)
