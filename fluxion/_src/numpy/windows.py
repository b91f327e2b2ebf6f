"""Window functions of fluxion.numpy: bartlett, blackman, hamming, hanning and kaiser.

All return the default float dtype and take a concrete length M.
"""
from __future__ import annotations

import operator

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.numpy import util


def _jnp():
    import fluxion.numpy as jnp
    return jnp


def _length(M, name: str) -> int:
    return operator.index(core.concrete_or_error(M, f"M argument of jnp.{name}"))


def _samples(M, name):
    """(M, n, dtype): n = arange(M) in the default float dtype; None when M <= 1."""
    jnp = _jnp()
    M = _length(M, name)
    dtype = dtypes.default_float_dtype()
    if M < 0:
        raise TypeError(f"jnp.{name}: negative window length M={M}")
    if M <= 1:
        return M, None, jnp.ones(M, dtype)
    return M, jnp.arange(M, dtype=dtype), None


def bartlett(M: int):
    """Triangular window of length M."""
    jnp = _jnp()
    M, n, small = _samples(M, "bartlett")
    if small is not None:
        return small
    return 1 - jnp.abs(2 * n + 1 - M) / (M - 1)


def blackman(M: int):
    """Blackman window of length M."""
    jnp = _jnp()
    M, n, small = _samples(M, "blackman")
    if small is not None:
        return small
    return 0.42 - 0.5 * jnp.cos(2 * np.pi * n / (M - 1)) + 0.08 * jnp.cos(4 * np.pi * n / (M - 1))


def hamming(M: int):
    """Hamming window of length M."""
    jnp = _jnp()
    M, n, small = _samples(M, "hamming")
    if small is not None:
        return small
    return 0.54 - 0.46 * jnp.cos(2 * np.pi * n / (M - 1))


def hanning(M: int):
    """Hann window of length M."""
    jnp = _jnp()
    M, n, small = _samples(M, "hanning")
    if small is not None:
        return small
    return 0.5 * (1 - jnp.cos(2 * np.pi * n / (M - 1)))


_I0_TERMS = 120


def _i0(x):
    """Modified Bessel function of the first kind, order 0: sum_k ((x/2)^k / k!)^2.

    Used when fluxion.numpy has no i0; the series converges for the arguments of kaiser
    windows (|x| up to about 100 in double precision).
    """
    jnp = _jnp()
    from fluxion import lax
    x, = util.promote_dtypes_inexact(util.as_array(x))
    quarter_sq = jnp.square(x) / 4

    def body(k, state):
        total, term = state
        kf = util.convert(k, term.dtype)
        term = term * quarter_sq / (kf * kf)
        return total + term, term

    one = jnp.ones_like(x)
    total, _ = lax.fori_loop(1, _I0_TERMS, body, (one, one))
    return total


def kaiser(M: int, beta):
    """Kaiser window of length M with shape parameter `beta`."""
    jnp = _jnp()
    M, n, small = _samples(M, "kaiser")
    if small is not None:
        return small
    i0 = getattr(jnp, "i0", None) or _i0
    alpha = 0.5 * (M - 1)
    return i0(beta * jnp.sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(beta)
