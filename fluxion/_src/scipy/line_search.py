"""A line search satisfying the strong Wolfe conditions (Nocedal and Wright, Numerical
Optimization, algorithms 3.5 and 3.6), traceable: it runs as `lax.while_loop`s, so BFGS that
uses it compiles to one program. The decisions follow jax.scipy.optimize.line_search, so both
take the same steps."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src.ad_api import value_and_grad


def _dot(a, b):
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


def _select(pred, new: dict, state):
    """`state` with the fields in `new` replaced where `pred` holds."""
    return state._replace(**{k: jnp.where(pred, v, getattr(state, k)) for k, v in new.items()})


def _cubic_minimizer(a, fa, fpa, b, fb, c, fc):
    """Minimizer of the cubic through (a, fa) with slope fpa at a, (b, fb) and (c, fc)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    rhs_b, rhs_c = fb - fa - fpa * db, fc - fa - fpa * dc
    A = (dc ** 2 * rhs_b - db ** 2 * rhs_c) / denom
    B = (-dc ** 3 * rhs_b + db ** 3 * rhs_c) / denom
    return a + (-B + jnp.sqrt(B * B - 3.0 * A * fpa)) / (3.0 * A)


def _quadratic_minimizer(a, fa, fpa, b, fb):
    db = b - a
    curvature = (fb - fa - fpa * db) / db ** 2
    return a - fpa / (2.0 * curvature)


class _Zoom(NamedTuple):
    done: object
    failed: object
    j: object
    a_lo: object
    phi_lo: object
    dphi_lo: object
    a_hi: object
    phi_hi: object
    dphi_hi: object
    a_rec: object
    phi_rec: object
    a_star: object
    phi_star: object
    dphi_star: object
    g_star: object
    nfev: object


def _zoom(phi_dphi_g, sufficient_decrease, curvature, lo, hi, g0, skip):
    """Algorithm 3.6: shrink [a_lo, a_hi] until a point meets both Wolfe conditions."""
    (a_lo, phi_lo, dphi_lo), (a_hi, phi_hi, dphi_hi) = lo, hi
    state = _Zoom(False, False, 0, a_lo, phi_lo, dphi_lo, a_hi, phi_hi, dphi_hi,
                  (a_lo + a_hi) / 2.0, (phi_lo + phi_hi) / 2.0, 1.0, phi_lo, dphi_lo, g0, 0)

    def body(s):
        width = s.a_hi - s.a_lo
        left, right = jnp.minimum(s.a_hi, s.a_lo), jnp.maximum(s.a_hi, s.a_lo)
        tiny = 1e-5 if jnp.finfo(width.dtype).bits < 64 else 1e-10
        s = s._replace(failed=s.failed | (width <= tiny))
        cubic = _cubic_minimizer(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi, s.a_rec,
                                 s.phi_rec)
        use_cubic = (s.j > 0) & (cubic > left + 0.2 * width) & (cubic < right - 0.2 * width)
        quad = _quadratic_minimizer(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi)
        use_quad = ~use_cubic & (quad > left + 0.1 * width) & (quad < right - 0.1 * width)
        a_j = jnp.where(use_cubic, cubic, jnp.where(use_quad, quad, (s.a_lo + s.a_hi) / 2.0))
        phi_j, dphi_j, g_j = phi_dphi_g(a_j)
        phi_j, dphi_j = phi_j.astype(s.phi_lo.dtype), dphi_j.astype(s.dphi_lo.dtype)
        s = s._replace(nfev=s.nfev + 1)
        to_hi = sufficient_decrease(a_j, phi_j) | (phi_j >= s.phi_lo)
        found = curvature(dphi_j) & ~to_hi
        flip = (dphi_j * (s.a_hi - s.a_lo) >= 0.0) & ~to_hi & ~found
        to_lo = ~to_hi & ~found
        s = _select(to_hi, dict(a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j, a_rec=s.a_hi,
                                phi_rec=s.phi_hi), s)
        s = _select(found, dict(a_star=a_j, phi_star=phi_j, dphi_star=dphi_j,
                                g_star=g_j.astype(s.g_star.dtype)), s)
        s = s._replace(done=found | s.done)
        s = _select(flip, dict(a_hi=s.a_lo, phi_hi=s.phi_lo, dphi_hi=s.dphi_lo, a_rec=s.a_hi,
                               phi_rec=s.phi_hi), s)
        s = _select(to_lo & ~flip, dict(a_rec=s.a_lo, phi_rec=s.phi_lo), s)
        s = _select(to_lo, dict(a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j), s)
        j = s.j + 1
        return s._replace(j=j, failed=s.failed | (j >= 30))

    return lax.while_loop(lambda s: ~s.done & ~skip & ~s.failed, body, state)


class LineSearchResults(NamedTuple):
    """failed, nit, nfev, ngev, k, a_k (the step), f_k, g_k, status (0 ok, 1 zoom failed,
    3 maxiter)."""
    failed: object
    nit: object
    nfev: object
    ngev: object
    k: object
    a_k: object
    f_k: object
    g_k: object
    status: object


class _Search(NamedTuple):
    done: object
    failed: object
    i: object
    a_prev: object
    phi_prev: object
    dphi_prev: object
    nfev: object
    a_star: object
    phi_star: object
    dphi_star: object
    g_star: object


def line_search(f, xk, pk, old_fval=None, old_old_fval=None, gfk=None, c1=1e-4, c2=0.9,
                maxiter=20) -> LineSearchResults:
    """Find a step along the descent direction `pk` from `xk` meeting the strong Wolfe
    conditions with constants c1 (sufficient decrease) and c2 (curvature)."""
    xk, pk = jnp.asarray(xk), jnp.asarray(pk)
    dtype = jnp.result_type(xk, pk, 1.0)
    xk, pk = xk.astype(dtype), pk.astype(dtype)

    def phi_dphi_g(t):
        value, g = value_and_grad(f)(xk + jnp.asarray(t, dtype=pk.dtype) * pk)
        return value, jnp.real(_dot(g, pk)), g

    evaluated = old_fval is None or gfk is None
    if evaluated:
        phi0, dphi0, gfk = phi_dphi_g(0.0)
    else:
        phi0, dphi0 = old_fval, jnp.real(_dot(gfk, pk))
    if old_old_fval is None:
        first_step = 1.0
    else:
        guess = 1.01 * 2 * (phi0 - old_old_fval) / dphi0
        first_step = jnp.where(guess > 1, 1.0, guess)

    def sufficient_decrease(a, phi):  # violated
        return phi > phi0 + c1 * a * dphi0

    def curvature(dphi):  # met
        return jnp.abs(dphi) <= -c2 * dphi0

    start = _Search(jnp.array(False), jnp.array(False), 1, 0.0, phi0, dphi0, int(evaluated),
                    0.0, phi0, dphi0, gfk)

    def body(s):
        a_i = jnp.where(s.i == 1, first_step, s.a_prev * 2.0)
        phi_i, dphi_i, g_i = phi_dphi_g(a_i)
        s = s._replace(nfev=s.nfev + 1)
        zoom_back = sufficient_decrease(a_i, phi_i) | ((phi_i >= s.phi_prev) & (s.i > 1))
        accept = curvature(dphi_i) & ~zoom_back
        zoom_forward = (dphi_i >= 0.0) & ~zoom_back & ~accept
        z1 = _zoom(phi_dphi_g, sufficient_decrease, curvature, (s.a_prev, s.phi_prev, s.dphi_prev),
                   (a_i, phi_i, dphi_i), gfk, ~zoom_back)
        z2 = _zoom(phi_dphi_g, sufficient_decrease, curvature, (a_i, phi_i, dphi_i),
                   (s.a_prev, s.phi_prev, s.dphi_prev), gfk, ~zoom_forward)
        s = s._replace(nfev=s.nfev + z1.nfev + z2.nfev)
        star = lambda z: dict(a_star=z.a_star, phi_star=z.phi_star, dphi_star=z.dphi_star,  # noqa
                              g_star=z.g_star)
        s = _select(zoom_back, star(z1), s)._replace(
            done=zoom_back | s.done, failed=(zoom_back & z1.failed) | s.failed)
        s = _select(accept, dict(a_star=a_i, phi_star=phi_i, dphi_star=dphi_i, g_star=g_i), s)
        s = s._replace(done=accept | s.done)
        s = _select(zoom_forward, star(z2), s)._replace(
            done=zoom_forward | s.done, failed=(zoom_forward & z2.failed) | s.failed)
        return s._replace(i=s.i + 1, a_prev=a_i, phi_prev=phi_i, dphi_prev=dphi_i)

    s = lax.while_loop(lambda s: ~s.done & (s.i <= maxiter) & ~s.failed, body, start)
    status = jnp.where(s.failed, 1, jnp.where(s.i > maxiter, 3, 0))
    step = jnp.asarray(s.a_star)
    if jnp.finfo(step.dtype).bits != 64:  # keep a float32 step from vanishing
        step = jnp.where(jnp.abs(step) < 1e-8, jnp.sign(step) * 1e-8, step)
    return LineSearchResults(s.failed | ~s.done, s.i - 1, s.nfev, s.nfev, s.i, step,
                             s.phi_star, s.g_star, status)
