"""The Faddeeva function w(z) = exp(-z^2) erfc(-iz) and what is built on it: `wofz`, `erfcx`,
`dawsn`.

w(z) in the upper half plane is Weideman's rational approximation (SIAM J. Numer. Anal. 31,
1994): with L = sqrt(N / sqrt(2)) and Z = (L + iz) / (L - iz),
w(z) ~ 2 p(Z) / (L - iz)^2 + 1 / (sqrt(pi) (L - iz)), where the N coefficients of p come from
one FFT of samples of exp(-t^2) (L^2 + t^2) at t = L tan(theta / 2). In the lower half plane
w(z) = 2 exp(-z^2) - w(-z).
"""
from __future__ import annotations

import math

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src.api import jit
from fluxion._src.custom_derivatives import custom_jvp
from fluxion._src.numpy.util import convert, promote_dtypes_inexact

_N = 32


def _weideman_coefficients(n: int):
    m = 2 * n
    length = math.sqrt(n / math.sqrt(2.0))
    theta = np.arange(-m + 1, m) * np.pi / m
    t = length * np.tan(theta / 2)
    samples = np.concatenate([[0.0], np.exp(-t * t) * (length * length + t * t)])
    coefficients = np.real(np.fft.fft(np.fft.fftshift(samples))) / (2 * m)
    return length, coefficients[1:n + 1][::-1]  # highest power first


_L, _COEFFICIENTS = _weideman_coefficients(_N)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


def _horner(coefficients, x):
    out = jnp.zeros_like(x)
    for c in coefficients:
        out = out * x + float(c)  # a Python float keeps x's precision (NumPy scalars would not)
    return out


def _w_upper(z):
    """w(z) for Im z >= 0 (complex z)."""
    iz = lax.complex(-jnp.imag(z), jnp.real(z))
    denominator = _L - iz
    p = _horner(_COEFFICIENTS, (_L + iz) / denominator)
    return 2 * p / (denominator * denominator) + _INV_SQRT_PI / denominator


def _w_of_positive_imaginary(y):
    """w(iy) = erfcx(y) for real y >= 0: Weideman's formula is real there."""
    denominator = _L + y
    p = _horner(_COEFFICIENTS, (_L - y) / denominator)
    return 2 * p / (denominator * denominator) + _INV_SQRT_PI / denominator


@custom_jvp
def _wofz(z):
    upper = jnp.imag(z) >= 0
    flipped = jnp.where(upper, z, -z)
    w = _w_upper(flipped)
    e = jnp.exp(-z * z)
    return jnp.where(upper, w, e + e - w)  # e + e: 2 * e would make inf * 0 = NaN on overflow


@_wofz.defjvp
def _wofz_jvp(primals, tangents):
    (z,), (dz,) = primals, tangents
    w = _wofz(z)
    return w, (-2 * z * w + 2j * _INV_SQRT_PI) * dz


def strong_inexact(*args):
    """Promote to inexact dtypes with the weak type dropped: these functions' results are never
    weakly typed, as in JAX."""
    return [convert(a, a.dtype) for a in promote_dtypes_inexact(*args)]


def wofz(z):
    """The Faddeeva function w(z) = exp(-z**2) erfc(-i z); real input is made complex."""
    (z,) = strong_inexact(z)
    if not jnp.iscomplexobj(z):
        if z.dtype.itemsize < 4:  # there is no half-precision complex type
            z = z.astype(np.float32)
        z = lax.complex(z, jnp.zeros_like(z))
    return _wofz_jit(z)


_wofz_jit = jit(_wofz)


def _half_to_single(fn, *args):
    """fn on float32 for half-precision arguments (rational approximations and long series
    need float32's digits), its result rounded back to the first argument's dtype."""
    dtype = args[0].dtype
    if dtype.itemsize < 4:
        return fn(*(a.astype(np.float32) for a in args)).astype(dtype)
    return fn(*args)


@custom_jvp
def _erfcx(x):
    ax = jnp.abs(x)
    infinite = ax == np.inf
    positive = _w_of_positive_imaginary(jnp.where(infinite, 0.0, ax))
    positive = jnp.where(infinite, 0.0, positive)
    negative = 2 * jnp.exp(x * x) - positive
    return jnp.where(x >= 0, positive, negative)


@_erfcx.defjvp
def _erfcx_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    y = _erfcx(x)
    return y, (2 * x * y - 2 * _INV_SQRT_PI) * dx


def erfcx(x):
    """The scaled complementary error function exp(x**2) erfc(x) (complex input: w(ix))."""
    (x,) = strong_inexact(x)
    if jnp.iscomplexobj(x):
        return _wofz_jit(lax.complex(-jnp.imag(x), jnp.real(x)))
    return _half_to_single(_erfcx_jit, x)


# Dawson's integral F(x) = sqrt(pi)/2 Im w(x) for real x; near 0 its Taylor series
# sum_k (-2)^k x^(2k+1) / (2k+1)!! keeps the relative accuracy w's absolute error would lose.
_DAWSN_SERIES = [(-2.0) ** k / math.prod(range(1, 2 * k + 2, 2)) for k in range(12)][::-1]


def _dawsn_value(x):
    small = jnp.abs(x) < 0.2
    xs = jnp.where(small, x, 0.0)
    series = xs * _horner(_DAWSN_SERIES, xs * xs)
    xl = jnp.where(small | (jnp.abs(x) > 1e8), 1.0, x)
    general = 0.5 * math.sqrt(math.pi) * jnp.imag(_w_upper(lax.complex(xl, jnp.zeros_like(xl))))
    far = 0.5 / jnp.where(jnp.abs(x) > 1e8, x, 1.0)  # F(x) ~ 1/(2x); 0 at +-inf
    return jnp.where(small, series, jnp.where(jnp.abs(x) > 1e8, far, general))


@custom_jvp
def _dawsn(x):
    return _dawsn_value(x)


@_dawsn.defjvp
def _dawsn_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    y = _dawsn(x)
    return y, (1 - 2 * x * y) * dx


def dawsn(x):
    """Dawson's integral exp(-x**2) * integral_0^x exp(t**2) dt (real input only)."""
    (x,) = strong_inexact(x)
    if jnp.iscomplexobj(x):
        raise ValueError("dawsn does not support complex-valued inputs.")
    return _half_to_single(_dawsn_jit, x)


# Compiled once per signature (the loops above are many small operations).
_erfcx_jit = jit(_erfcx)
_dawsn_jit = jit(_dawsn)
