"""Associated Legendre functions of the first kind (`lpmn`, `lpmn_values`), deprecated in JAX
with no replacement planned and kept here for programs that still use them."""
from __future__ import annotations

import math

import numpy as np

from fluxion._src import core
from fluxion._src.ad_api import jvp
from fluxion import numpy as jnp


def _check(m, n, z, name):
    z = jnp.asarray(z)
    if z.dtype not in (np.float32, np.float64):
        raise TypeError(f"z.dtype={z.dtype} is not supported by {name}: it takes float32 or "
                        "float64.")
    if z.ndim != 1:
        raise ValueError("z must be a 1D array.")
    m = int(core.concrete_or_error(m, f"Argument m of {name}."))
    n = int(core.concrete_or_error(n, f"Argument n of {name}."))
    if m != n:
        raise NotImplementedError("Computations for m!=n are not yet supported.")
    return n, z


def _table(l_max: int, z, normalized: bool, sine_power: bool = True):
    """P[m, l, k] = P_l^m(z_k) for 0 <= m, l <= l_max (zero where m > l), with the
    Condon-Shortley phase; `normalized` scales by sqrt((2l+1)/(4 pi) (l-m)!/(l+m)!).
    Without `sine_power`, the polynomial Q_l^m = P_l^m / (1 - z^2)^(m/2)."""
    orders = np.arange(l_max + 1)
    # The diagonal P_m^m = c_m (1 - z^2)^(m/2).
    if normalized:
        c = np.cumprod([0.5 / math.sqrt(math.pi)]
                       + [-math.sqrt(1 + 0.5 / a) for a in range(1, l_max + 1)])
    else:
        c = np.cumprod([1.0] + [1.0 - 2.0 * a for a in range(1, l_max + 1)])
    diagonal = jnp.broadcast_to(jnp.asarray(c, z.dtype)[:, None], (l_max + 1, z.shape[0]))
    if sine_power:
        diagonal = diagonal * _sine_powers(z, orders)
    zeros = jnp.zeros_like(diagonal)
    columns = [jnp.where((orders == 0)[:, None], diagonal, zeros)]
    previous2, previous = zeros, columns[0]
    for l in range(1, l_max + 1):
        below = orders < l  # orders the three-term recurrence in l reaches
        m = np.where(below, orders, 0).astype(np.float64)
        if normalized:
            a = np.sqrt((4.0 * l * l - 1) / np.where(below, l * l - m * m, 1.0))
            b = np.sqrt(np.maximum((l - 1.0) ** 2 - m * m, 0) / (4.0 * (l - 1.0) ** 2 - 1))
            step = a[:, None] * (z[None, :] * previous - b[:, None] * previous2)
        else:
            step = ((2.0 * l - 1) * z[None, :] * previous
                    - (l + m - 1.0)[:, None] * previous2) / np.where(below, l - m, 1.0)[:, None]
        column = jnp.where(below[:, None], step.astype(z.dtype),
                           jnp.where((orders == l)[:, None], diagonal, zeros))
        columns.append(column)
        previous2, previous = previous, column
    return jnp.stack(columns, axis=1)


def _sine_powers(z, orders):
    """(1 - z^2)^(m/2) for each order m, shape (len(orders), len(z))."""
    return jnp.sqrt(1 - z * z)[None, :] ** orders[:, None].astype(z.dtype)


def lpmn_values(m: int, n: int, z, is_normalized: bool):
    """Associated Legendre functions of the first kind, P_l^m(z), for 0 <= m, l <= n.

    Parameters
    ----------
    m, n : int
        The largest order and degree (equal; static).
    z : array of float32 or float64, shape (k,)
        The points.
    is_normalized : bool
        Scale by sqrt((2l+1)/(4 pi) (l-m)!/(l+m)!), so that the spherical harmonics built
        from them are orthonormal.

    Returns
    -------
    Array of shape (n + 1, n + 1, k), indexed [order, degree, point]; zero where m > l.
    """
    l_max, z = _check(m, n, z, "lpmn_values")
    return _table(l_max, z, bool(is_normalized))


def lpmn(m: int, n: int, z):
    """Associated Legendre functions of the first kind and their derivatives in z
    (unnormalized, Condon-Shortley phase).

    Returns
    -------
    (values, derivatives), each of shape (n + 1, n + 1, len(z)), indexed
    [order, degree, point].
    """
    l_max, z = _check(m, n, z, "lpmn")
    # P = s^m Q with s = sqrt(1 - z^2) and Q a polynomial, so dP/dz = s^m Q' - m z s^(m-2) Q:
    # finite at z = +-1 for m != 1 (differentiating through s there would give 0 * inf).
    q, dq = jvp(lambda x: _table(l_max, x, False, sine_power=False), (z,), (jnp.ones_like(z),))
    orders = np.arange(l_max + 1)
    s_m = _sine_powers(z, orders)[:, None, :]
    s_m2 = _sine_powers(z, np.maximum(orders - 2, 0))[:, None, :] / jnp.where(
        (orders == 1)[:, None, None], jnp.sqrt(1 - z * z), 1)
    weight = jnp.asarray(orders, z.dtype)[:, None, None] * z
    derivative = s_m * dq - jnp.where((orders == 0)[:, None, None], 0, weight * s_m2 * q)
    present = (orders[:, None] <= orders[None, :])[:, :, None]  # m <= l
    return _table(l_max, z, False), jnp.where(present, derivative, 0)
