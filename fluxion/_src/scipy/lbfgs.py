"""Limited-memory BFGS (Nocedal and Wright, algorithms 7.4 and 7.5), JAX's
`minimize(method="l-bfgs-experimental-do-not-rely-on-this")`.

One `lax.while_loop`: the last `maxcor` steps s and gradient changes y are kept, newest last,
and the two-loop recursion turns them into a search direction; the strong-Wolfe line search
picks the step. Complex `x` is minimized over its real and imaginary parts (the gradient
`value_and_grad` gives is conjugated into the descent direction).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src.ad_api import value_and_grad
from fluxion._src.scipy.line_search import line_search
from fluxion._src.scipy.optimize import _dot, _vector_norm


class LBFGSResults(NamedTuple):
    """converged, failed, k (iterations), nfev, ngev, x_k, f_k, g_k, the step and gradient-change
    histories with their 1 / (y . s), gamma (the initial inverse-Hessian scale), status (0
    converged, 1 maxiter, 2 maxfun, 3 maxgrad, 4 no progress (ftol), 5 line search failed) and
    the last line search's status."""
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    s_history: Any
    y_history: Any
    rho_history: Any
    gamma: Any
    status: Any
    ls_status: Any


def _push(history, new):
    """`history` with its oldest entry dropped and `new` appended (newest last)."""
    return jnp.concatenate([history[1:], new[None]], axis=0)


def _direction(state: LBFGSResults):
    """-H g by the two-loop recursion over the stored pairs (at most k of them yet)."""
    m = state.rho_history.shape[0]
    stored = jnp.minimum(state.k, m)
    dtype = state.rho_history.dtype

    def newest_first(j, carry):
        q, alphas = carry
        i = m - 1 - j
        alpha = (state.rho_history[i]
                 * _dot(jnp.conj(state.s_history[i]), q).real.astype(dtype))
        return q - alpha * jnp.conj(state.y_history[i]), alphas.at[i].set(alpha)

    q, alphas = lax.fori_loop(0, stored, newest_first,
                              (-jnp.conj(state.g_k), jnp.zeros_like(state.rho_history)))
    q = state.gamma * q

    def oldest_first(j, q):
        i = m - stored + j
        beta = state.rho_history[i] * _dot(state.y_history[i], q).real.astype(dtype)
        return q + (alphas[i] - beta) * state.s_history[i]

    return lax.fori_loop(0, stored, oldest_first, q)


def minimize_lbfgs(fun: Callable, x0, maxiter: float | None = None, norm=np.inf,
                   maxcor: int = 10, ftol: float = 2.220446049250313e-09, gtol: float = 1e-05,
                   maxfun: float | None = None, maxgrad: float | None = None,
                   maxls: int = 20) -> LBFGSResults:
    """L-BFGS from the 1-D `x0` until the gradient's `norm` is below `gtol`, an iteration
    improves `fun` by less than `ftol`, or a limit (maxiter, maxfun, maxgrad) is reached.
    Without any limit given, maxiter is 200 times the size of `x0`."""
    x0 = jnp.asarray(x0)
    d, dtype = x0.shape[0], x0.dtype
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = 200 * d
    maxiter = np.inf if maxiter is None else maxiter
    maxfun = np.inf if maxfun is None else maxfun
    maxgrad = np.inf if maxgrad is None else maxgrad
    f0, g0 = value_and_grad(fun)(x0)
    start = LBFGSResults(
        converged=_vector_norm(g0, norm) < gtol, failed=jnp.array(False), k=jnp.array(0),
        nfev=jnp.array(1), ngev=jnp.array(1), x_k=x0, f_k=f0, g_k=g0,
        s_history=jnp.zeros((maxcor, d), dtype), y_history=jnp.zeros((maxcor, d), dtype),
        rho_history=jnp.zeros((maxcor,), dtype), gamma=jnp.array(1.0, g0.dtype),
        status=jnp.array(0), ls_status=jnp.array(0))

    def step(state: LBFGSResults) -> LBFGSResults:
        p = _direction(state)
        ls = line_search(fun, state.x_k, p, old_fval=state.f_k, gfk=state.g_k, maxiter=maxls)
        s = jnp.asarray(ls.a_k).astype(p.dtype) * p
        y = ls.g_k - state.g_k
        ys = jnp.real(_dot(y, s))
        # Later reasons win: a failed line search over the limits over too little progress.
        status = jnp.where(state.f_k - ls.f_k < ftol, 4, 0)
        status = jnp.where(state.ngev >= maxgrad, 3, status)
        status = jnp.where(state.nfev >= maxfun, 2, status)
        status = jnp.where(state.k >= maxiter, 1, status)
        status = jnp.where(ls.failed, 5, status)
        converged = _vector_norm(ls.g_k, norm) < gtol
        return LBFGSResults(
            converged=converged, failed=(status > 0) & ~converged, k=state.k + 1,
            nfev=state.nfev + ls.nfev, ngev=state.ngev + ls.ngev, x_k=state.x_k + s,
            f_k=ls.f_k, g_k=ls.g_k, s_history=_push(state.s_history, s),
            y_history=_push(state.y_history, y),
            rho_history=_push(state.rho_history, jnp.reciprocal(ys).astype(dtype)),
            gamma=(ys / jnp.real(_dot(jnp.conj(y), y))).astype(state.g_k.dtype),
            status=jnp.where(converged, 0, status), ls_status=ls.status)

    return lax.while_loop(lambda s: ~s.converged & ~s.failed, step, start)
