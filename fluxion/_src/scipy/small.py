"""Small scipy modules: integrate.trapezoid and cluster.vq.vq."""
from __future__ import annotations

import fluxion.numpy as jnp
from fluxion._src.numpy.util import promote_dtypes_inexact


def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """Integral of `y` along `axis` by the trapezoidal rule (samples at `x`, or spaced `dx`)."""
    # Integer samples are made inexact first (int32 -> float32 even under x64), as in JAX.
    if x is None:
        y, = promote_dtypes_inexact(jnp.asarray(y))
        widths = dx
    else:
        y, x = promote_dtypes_inexact(jnp.asarray(y), jnp.asarray(x))
        if x.ndim == 1:
            widths = x[1:] - x[:-1]
        else:
            widths = jnp.moveaxis(_diff(x, axis), axis, -1)
    y = jnp.moveaxis(y, axis, -1)
    return 0.5 * jnp.sum(widths * (y[..., 1:] + y[..., :-1]), axis=-1)


def _diff(x, axis):
    x = jnp.moveaxis(x, axis, -1)
    return jnp.moveaxis(x[..., 1:] - x[..., :-1], -1, axis)


def vq(obs, code_book, check_finite: bool = True):
    """Assign each observation (row of `obs`) to its nearest code; returns (codes, distances)."""
    obs, code_book = promote_dtypes_inexact(jnp.asarray(obs), jnp.asarray(code_book))
    if obs.ndim != code_book.ndim:
        raise ValueError("Observation and code_book should have the same rank")
    if obs.ndim == 1:
        obs, code_book = obs[..., None], code_book[..., None]
    if obs.ndim != 2:
        raise ValueError("ndim different than 1 or 2 are not supported")
    distances = jnp.sum((obs[:, None, :] - code_book[None, :, :]) ** 2, axis=-1)
    codes = jnp.argmin(distances, axis=-1)
    return codes, jnp.sqrt(jnp.min(distances, axis=-1))
