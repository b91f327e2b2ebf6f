"""`odeint`: adaptive Dormand-Prince (RK45) integration with reverse-mode by the adjoint
method (`jax.experimental.ode.odeint`).

The forward solve is a `scan` over the requested times; between two of them a `while_loop`
takes accepted/rejected Runge-Kutta steps and the answer at the requested time comes from the
4th-order polynomial fitted to the last accepted step. The backward pass integrates the
augmented system (state, state cotangent, time cotangent, argument cotangents) backwards in
time between consecutive output times (Chen et al. 2018, appendix C).
"""
from __future__ import annotations

import operator

import numpy as np

import fluxion
import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src import core
from fluxion._src.flatten_util import ravel_pytree
from fluxion._src.tree_util import tree_leaves, tree_map

__all__ = ["odeint"]

# Dormand-Prince 5(4) tableau: stage times, stage weights, 5th-order solution weights and
# the difference between 5th- and 4th-order weights (the local error estimate).
_C = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1., 1., 0.)
_A = ((1 / 5, 0, 0, 0, 0, 0, 0),
      (3 / 40, 9 / 40, 0, 0, 0, 0, 0),
      (44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0),
      (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0),
      (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0),
      (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0))
_B = (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0)
_B_ERR = (35 / 384 - 1951 / 21600, 0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 - -12231 / 42400, 11 / 84 - 649 / 6300, -1. / 60.)
# Weights of the stages giving y at the middle of a step (Shampine's dense output).
_B_MID = (6025192743 / 30085553152 / 2, 0, 51252292925 / 65400821598 / 2,
          -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
          -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def _dense_output(y0, y1, k, dt):
    """Coefficients (highest power first) of the quartic p on [0, 1] with p(0) = y0,
    p(1) = y1, p(1/2) = the mid-step value and p' matching the first and last stages."""
    dt = dt.astype(y0.dtype)
    y_mid = y0 + dt * jnp.dot(jnp.array(_B_MID, dtype=y0.dtype), k)
    dy0, dy1 = dt * k[0], dt * k[-1]
    a = -2. * dy0 + 2. * dy1 - 8. * y0 - 8. * y1 + 16. * y_mid
    b = 5. * dy0 - 3. * dy1 + 18. * y0 + 14. * y1 - 32. * y_mid
    c = -4. * dy0 + dy1 - 11. * y0 - 5. * y1 + 16. * y_mid
    return jnp.stack([a, b, c, dy0, y0])


def _initial_step(fun, t0, y0, order, rtol, atol, f0):
    """Hairer, Norsett & Wanner, Solving ODEs I, section II.4: a first step size whose
    explicit Euler error is about the tolerance."""
    dtype = y0.dtype
    scale = (atol + jnp.abs(y0) * rtol).astype(dtype)
    d0 = jnp.linalg.norm(y0 / scale)
    d1 = jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = fun(y0 + h0.astype(dtype) * f0, t0 + h0)
    d2 = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1. / (order + 1.)))
    return jnp.minimum(100. * h0, h1)


def _rk_step(fun, y0, f0, t0, dt):
    """One Dormand-Prince step: (y1, f(y1), error estimate, the 7 stage derivatives)."""
    dtype = f0.dtype
    c = jnp.array(_C, dtype=dt.dtype)
    a = jnp.array(_A, dtype=dtype)
    h = dt.astype(dtype)

    def stage(i, k):
        return k.at[i, :].set(fun(y0 + h * jnp.dot(a[i - 1, :], k), t0 + dt * c[i - 1]))

    k = jnp.zeros((7, f0.shape[0]), dtype).at[0, :].set(f0)
    k = lax.fori_loop(1, 7, stage, k)
    y1 = h * jnp.dot(jnp.array(_B, dtype=dtype), k) + y0
    y1_err = h * jnp.dot(jnp.array(_B_ERR, dtype=dtype), k)
    return y1, k[-1], y1_err, k


def _error_ratio(err, rtol, atol, y0, y1):
    """RMS of the error estimate relative to the tolerance; a step is accepted when <= 1."""
    tol = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    ratio = err / tol.astype(err.dtype)
    sq = ratio.real ** 2 + ratio.imag ** 2 if jnp.iscomplexobj(ratio) else ratio ** 2
    return jnp.sqrt(jnp.mean(sq))


def _next_step(dt, ratio, safety=0.9, ifactor=10.0, dfactor=0.2, order=5.0):
    """The next step size: grow at most `ifactor`-fold, and after a rejected step shrink at
    most to `dfactor` of it."""
    dfactor = jnp.where(ratio < 1, 1.0, dfactor)
    factor = jnp.minimum(ifactor, jnp.maximum(ratio ** (-1.0 / order) * safety, dfactor))
    return jnp.where(ratio == 0, dt * ifactor, dt * factor)


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=np.inf, hmax=np.inf):
    """Integrate ``dy/dt = func(y, t, *args)`` with adaptive Dormand-Prince Runge-Kutta.

    Parameters
    ----------
    func : callable ``func(y, t, *args)`` giving dy/dt, a pytree like `y`.
    y0 : array or pytree of arrays, the state at ``t[0]``.
    t : 1-D float array of strictly increasing times to report the solution at.
    *args : arrays, scalars or pytrees of them passed on to `func` (differentiable).
    rtol, atol : float, relative and absolute local error tolerances.
    mxstep : int, the most steps (accepted or not) between two consecutive times.
    hmax : float, the largest step size.

    Returns
    -------
    The solution at every time in `t`: a pytree like `y0` with a leading axis of ``len(t)``.
    Reverse-mode derivatives with respect to `y0`, `t` and `args` use the adjoint method.
    """
    for arg in tree_leaves(args):
        if not core.valid_jaxtype(arg):
            raise TypeError(
                f"The contents of odeint *args must be arrays or scalars, but got {arg}.")
    t = jnp.asarray(t)
    if not jnp.issubdtype(t.dtype, jnp.floating):
        raise TypeError(f"t must be an array of floats, but got {t}.")
    converted, consts = fluxion.closure_convert(func, y0, t[0], *args)
    return _odeint_wrapper(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)


def _flat_state_fun(func, unravel):
    """`func` on flat state vectors."""
    def flat_func(y_flat, t, *args):
        return ravel_pytree(func(unravel(y_flat), t, *args))[0]
    return flat_func


@fluxion.jit(static_argnums=(0, 1, 2, 3, 4))
def _odeint_wrapper(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    y0, unravel = ravel_pytree(y0)
    out = _odeint(_flat_state_fun(func, unravel), rtol, atol, mxstep, hmax, y0, ts, *args)
    return fluxion.vmap(unravel)(out)


def _solve(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    with fluxion.default_matmul_precision("highest"):
        return _solve_at_times(func, rtol, atol, mxstep, hmax, y0, ts, *args)


def _solve_at_times(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    def fun(y, t):
        return func(y, t, *args)

    def to_next_time(carry, target_t):
        def not_there(state):
            i, _, _, t, dt, _, _ = state
            return (t < target_t) & (i < mxstep) & (dt > 0)

        def try_step(state):
            i, y, f, t, dt, last_t, coeffs = state
            y1, f1, err, k = _rk_step(fun, y, f, t, dt)
            ratio = _error_ratio(err, rtol, atol, y, y1)
            new_coeffs = _dense_output(y, y1, k, dt)
            next_dt = jnp.clip(_next_step(dt, ratio), min=0., max=hmax)
            accepted = [i + 1, y1, f1, t + dt, next_dt, t, new_coeffs]
            rejected = [i + 1, y, f, t, next_dt, last_t, coeffs]
            ok = ratio <= 1.
            return [jnp.where(ok, a, r) for a, r in zip(accepted, rejected)]

        _, *carry = lax.while_loop(not_there, try_step, [0] + carry)
        _, _, t, _, last_t, coeffs = carry
        s = (target_t - last_t) / (t - last_t)
        return carry, jnp.polyval(coeffs, s.astype(coeffs.dtype))

    f0 = fun(y0, ts[0])
    dt = jnp.clip(_initial_step(fun, ts[0], y0, 4, rtol, atol, f0), min=0., max=hmax)
    coeffs = jnp.stack([y0] * 5)
    _, ys = lax.scan(to_next_time, [y0, f0, ts[0], dt, ts[0], coeffs], ts[1:])
    return jnp.concatenate((y0[None], ys))


_odeint = fluxion.custom_vjp(_solve, nondiff_argnums=(0, 1, 2, 3, 4))


def _odeint_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_bwd(func, rtol, atol, mxstep, hmax, res, g):
    with fluxion.default_matmul_precision("highest"):
        return _adjoint(func, rtol, atol, mxstep, hmax, res, g)


def _adjoint(func, rtol, atol, mxstep, hmax, res, g):
    ys, ts, args = res

    def augmented(state, minus_t, *args):
        # Integrated in negated time, so that the solver runs forward.
        y, y_bar, *_ = state
        y_dot, vjp = fluxion.vjp(func, y, -minus_t, *args)
        return (-y_dot, *vjp(y_bar))

    def back_one_interval(carry, i):
        y_bar, t0_bar, args_bar = carry
        # moving output time ts[i] changes the loss through dy/dt there
        t_bar = jnp.dot(func(ys[i], ts[i], *args), g[i]).real
        t0_bar = t0_bar - t_bar
        _, y_bar, t0_bar, args_bar = odeint(
            augmented, (ys[i], y_bar, t0_bar, args_bar), jnp.array([-ts[i], -ts[i - 1]]),
            *args, rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        y_bar, t0_bar, args_bar = tree_map(operator.itemgetter(1), (y_bar, t0_bar, args_bar))
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar

    init = (g[-1], 0., tree_map(jnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), rev_ts_bar = lax.scan(
        back_one_interval, init, jnp.arange(len(ts) - 1, 0, -1))
    ts_bar = jnp.concatenate([jnp.array([t0_bar]), rev_ts_bar[::-1]])
    return (y_bar, ts_bar, *args_bar)


_odeint.defvjp(_odeint_fwd, _odeint_bwd)
