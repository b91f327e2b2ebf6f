"""Exponential, sine/cosine and Fresnel integrals and the dilogarithm: `expn`, `exp1`, `expi`,
`sici`, `fresnel`, `spence`.

Each is a power series where it converges fast and a continued fraction or asymptotic series
elsewhere, evaluated with a fixed number of terms (enough for float64), and has its derivative
in closed form as a custom JVP.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src.api import jit
from fluxion._src.custom_derivatives import custom_jvp
from fluxion._src.scipy.special_faddeeva import _half_to_single, _wofz, strong_inexact

_EULER = np.euler_gamma
_TINY = 1e-30


def _real_input(name, *args):
    args = strong_inexact(*args)
    for a in args:
        if jnp.iscomplexobj(a):
            raise ValueError(f"{name} does not support complex-valued inputs.")
    return args


# ---------------------------------------------------------------------------------------------
# E_n(x) = integral_1^inf exp(-x t) / t^n dt

def _expn_series(n, x):
    """E_n(x) for 0 < x <= 1, n >= 1: the power series with its log term at i = n - 1."""
    psi = lax.digamma(n)  # -gamma + sum_{k < n} 1/k
    first = jnp.where(n == 1, -jnp.log(x) - _EULER, 1 / jnp.where(n == 1, 2.0, n - 1))

    def body(i, carry):
        total, factor = carry
        factor = factor * (-x / i)
        log_term = factor * (psi - jnp.log(x))
        plain = -factor / jnp.where(i == n - 1, 1.0, i - n + 1)
        return total + jnp.where(i == n - 1, log_term, plain), factor

    one = jnp.ones_like(x)
    return lax.fori_loop(1, 30, body, (first, one))[0]


def _expn_fraction(n, x):
    """E_n(x) for x > 1: the continued fraction, evaluated by the modified Lentz method."""
    b = x + n
    c = jnp.full_like(x, 1 / _TINY)
    d = 1 / b

    def body(i, carry):
        b, c, d, h = carry
        a = -i * (n - 1 + i)
        b = b + 2
        d = 1 / (a * d + b)
        c = b + a / c
        return b, c, d, h * c * d

    h = lax.fori_loop(1, 80, body, (b, c, d, d))[3]
    return h * jnp.exp(-x)


def _expn_value(n, x):
    valid = (n >= 0) & (n == jnp.floor(n)) & (x >= 0)
    safe_n = jnp.where(valid & (n >= 1), n, 1.0)
    small = x <= 1
    xs = jnp.where(small & (x > 0), x, 0.5)
    xl = jnp.where(small | (x == np.inf), 2.0, x)
    value = jnp.where(small, _expn_series(safe_n, xs), _expn_fraction(safe_n, xl))
    value = jnp.where(x == np.inf, 0.0, value)
    e0 = jnp.exp(-x) / x
    at_zero = jnp.where(n > 1, 1 / jnp.where(n > 1, n - 1, 1.0), np.inf)
    value = jnp.where(n == 0, e0, jnp.where(x == 0, at_zero, value))
    return jnp.where(valid, value, np.nan)


@custom_jvp
def _expn(n, x):
    return _expn_value(n, x)


@_expn.defjvp
def _expn_jvp(primals, tangents):
    n, x = primals
    _, dx = tangents
    return _expn(n, x), -_expn_value(n - 1, x) * dx


_expn_jit = jit(_expn)


def expn(n, x):
    """The generalized exponential integral E_n(x) for integer n >= 0 and x >= 0 (NaN
    elsewhere, also for non-integer n as in JAX). Differentiable in x."""
    n, x = _real_input("expn", n, x)
    n, x = jnp.broadcast_arrays(lax.stop_gradient(n), x)
    return _half_to_single(lambda v: _expn_jit(n.astype(v.dtype), v), x)


def exp1(x):
    """The exponential integral E_1(x) = integral_x^inf exp(-t) / t dt (NaN for x < 0)."""
    (x,) = _real_input("exp1", x)
    return _half_to_single(lambda v: _expn_jit(jnp.ones_like(v), v), x)


def _expi_positive(x):
    """Ei(x) for x > 0: the series gamma + log x + sum x^k / (k k!) up to 40, then the
    asymptotic series exp(x) / x sum k! / x^k."""
    small = x <= 40
    xs = jnp.where(small, x, 1.0)

    def series_body(k, carry):
        total, term = carry
        term = term * xs / k
        return total + term / k, term

    series = lax.fori_loop(1, 130, series_body, (jnp.zeros_like(xs), jnp.ones_like(xs)))[0]
    series = _EULER + jnp.log(xs) + series
    xl = jnp.where(small, 50.0, x)

    def asymptotic_body(k, carry):
        total, term = carry
        term = term * k / xl
        return total + term, term

    tail = lax.fori_loop(1, 40, asymptotic_body, (jnp.ones_like(xl), jnp.ones_like(xl)))[0]
    return jnp.where(small, series, jnp.exp(xl) / xl * tail)


def _expi_value(x):
    positive = _expi_positive(jnp.where(x > 0, x, 1.0))
    negative = -_expn_value(jnp.ones_like(x), jnp.where(x < 0, -x, 1.0))
    value = jnp.where(x > 0, positive, negative)
    value = jnp.where(x == np.inf, np.inf, jnp.where(x == -np.inf, 0.0, value))
    return jnp.where(x == 0, -np.inf, jnp.where(jnp.isnan(x), np.nan, value))


@custom_jvp
def _expi(x):
    return _expi_value(x)


@_expi.defjvp
def _expi_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return _expi(x), jnp.exp(x) / x * dx


def expi(x):
    """The exponential integral Ei(x) = -PV integral_{-x}^inf exp(-t) / t dt."""
    (x,) = _real_input("expi", x)
    return _half_to_single(_expi_jit, x)


# ---------------------------------------------------------------------------------------------
# Sine and cosine integrals

def _sici_series(x):
    """(Si, Ci) for 0 < x <= 2 by their power series."""
    x2 = x * x

    def body(k, carry):
        si, ci, term = carry  # term = (-1)^k x^(2k) / (2k)! before the update
        term_odd = term * x / (2 * k + 1)  # (-1)^k x^(2k+1) / (2k+1)!
        si = si + term_odd / (2 * k + 1)
        term_next = -term_odd * x / (2 * k + 2)  # (-1)^(k+1) x^(2k+2) / (2k+2)!
        ci = ci + term_next / (2 * k + 2)
        return si, ci, term_next

    si, ci, _ = lax.fori_loop(0, 16, body, (jnp.zeros_like(x), jnp.zeros_like(x),
                                            jnp.ones_like(x)))
    del x2
    return si, _EULER + jnp.log(x) + ci


def _sici_fraction(x):
    """(Si, Ci) for x > 2 from E_1(ix) = -Ci(x) + i (Si(x) - pi/2), by a continued fraction."""
    zero = jnp.zeros_like(x)
    b = lax.complex(jnp.ones_like(x), x)
    c = lax.complex(jnp.full_like(x, 1 / _TINY), zero)
    d = 1 / b

    def body(i, carry):
        b, c, d, h = carry
        a = -(i - 1.0) * (i - 1.0)
        b = b + 2
        d = 1 / (a * d + b)
        c = b + a / c
        return b, c, d, h * c * d

    h = lax.fori_loop(2, 120, body, (b, c, d, d))[3]
    h = lax.complex(jnp.cos(x), -jnp.sin(x)) * h
    return 0.5 * math.pi + jnp.imag(h), -jnp.real(h)


@custom_jvp
def _sici(x):
    ax = jnp.abs(x)
    small = ax <= 2
    si_s, ci_s = _sici_series(jnp.where(small & (ax > 0), ax, 1.0))
    si_l, ci_l = _sici_fraction(jnp.where(small | (ax == np.inf), 3.0, ax))
    si = jnp.where(small, si_s, si_l)
    ci = jnp.where(small, ci_s, ci_l)
    si = jnp.where(ax == np.inf, 0.5 * math.pi, jnp.where(ax == 0, 0.0, si))
    ci = jnp.where(ax == np.inf, 0.0, jnp.where(ax == 0, -np.inf, ci))
    ci = jnp.where(x == -np.inf, np.nan, ci)  # as SciPy
    return jnp.where(x < 0, -si, si), ci


@_sici.defjvp
def _sici_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    out = _sici(x)
    safe = jnp.where(x == 0, 1.0, x)
    dsi = jnp.where(x == 0, 1.0, jnp.sin(x) / safe)
    return out, (dsi * dx, jnp.cos(x) / x * dx)


def sici(x):
    """The sine and cosine integrals (Si(x), Ci(x)); for x < 0, Ci(x) is Ci(|x|), as SciPy."""
    x = jnp.asarray(x)
    if jnp.iscomplexobj(x):  # (JAX's words for sici)
        raise ValueError(f"Argument `x` to sici must be real-valued. Got dtype {x.dtype}.")
    (x,) = _real_input("sici", x)
    if x.dtype.itemsize < 4:
        si, ci = _sici_jit(x.astype(np.float32))
        return si.astype(x.dtype), ci.astype(x.dtype)
    return _sici_jit(x)


# ---------------------------------------------------------------------------------------------
# Fresnel integrals S(x) = int_0^x sin(pi t^2 / 2) dt, C(x) = int_0^x cos(pi t^2 / 2) dt

def _sin_cos_half_pi_square(x):
    """(sin, cos) of pi/2 x^2, accurate for large |x| (pi/2 x^2 itself has no correct digits
    beyond x ~ 1e3 in float32): x = a + b with a holding the upper half of x's mantissa bits
    (Veltkamp's split), so that a^2, 2ab and b^2 are exact and each is reduced modulo 4 exactly;
    the quadrant then comes off exactly too, which makes the zeros at integer x^2 exact."""
    half_bits = 2.0 ** ((np.finfo(x.dtype).nmant + 2) // 2) + 1
    c = half_bits * x
    a = c - (c - x)
    b = x - a
    r = jnp.fmod(a * a, 4.0) + jnp.fmod(2 * a * b, 4.0) + jnp.fmod(b * b, 4.0)
    quadrant = jnp.round(r)
    angle = 0.5 * math.pi * (r - quadrant)  # in [-pi/4, pi/4]
    sin, cos = jnp.sin(angle), jnp.cos(angle)
    quadrant = jnp.fmod(quadrant, 4.0)
    sin_out = jnp.where(quadrant == 0, sin, jnp.where(quadrant == 1, cos,
                                                      jnp.where(quadrant == 2, -sin, -cos)))
    cos_out = jnp.where(quadrant == 0, cos, jnp.where(quadrant == 1, -sin,
                                                      jnp.where(quadrant == 2, -cos, sin)))
    return sin_out, cos_out


def _fresnel_series(x):
    t = 0.5 * math.pi * x * x

    def body(k, carry):
        s, c, term = carry  # term = (-1)^k t^(2k) / (2k)!
        c = c + term / (4 * k + 1)
        odd = term * t / (2 * k + 1)  # (-1)^k t^(2k+1) / (2k+1)!
        s = s + odd / (4 * k + 3)
        return s, c, -odd * t / (2 * k + 2)

    s, c, _ = lax.fori_loop(0, 20, body, (jnp.zeros_like(x), jnp.zeros_like(x),
                                          jnp.ones_like(x)))
    return s * x, c * x


def _fresnel_large(x):
    """C + iS = (1 + i)/2 (1 - exp(i pi x^2 / 2) w((1 + i) sqrt(pi) x / 2)) for x > 0."""
    r = 0.5 * math.sqrt(math.pi) * x
    w = _wofz(lax.complex(r, r))
    sin, cos = _sin_cos_half_pi_square(x)
    value = 0.5 * lax.complex(jnp.ones_like(x), jnp.ones_like(x)) * (
        1 - lax.complex(cos, sin) * w)
    return jnp.imag(value), jnp.real(value)


@custom_jvp
def _fresnel(x):
    ax = jnp.abs(x)
    small = ax < 1.5
    # Beyond this the terms 1/(pi x) that oscillate about 1/2 are below half an ulp of 1/2.
    flat = ax > 2 / (math.pi * float(np.finfo(x.dtype).eps))
    s_s, c_s = _fresnel_series(jnp.where(small, ax, 0.0))
    s_l, c_l = _fresnel_large(jnp.where(small | flat, 2.0, ax))
    s = jnp.where(small, s_s, jnp.where(flat, 0.5, s_l))
    c = jnp.where(small, c_s, jnp.where(flat, 0.5, c_l))
    sign = jnp.where(x < 0, -1.0, 1.0)
    return sign * s, sign * c


@_fresnel.defjvp
def _fresnel_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    sin, cos = _sin_cos_half_pi_square(x)
    return _fresnel(x), (sin * dx, cos * dx)


def fresnel(x):
    """The Fresnel integrals (S(x), C(x)) (real input only)."""
    (x,) = strong_inexact(x)
    if jnp.iscomplexobj(x):  # JAX's error class here
        raise NotImplementedError("Support for complex-valued inputs is not implemented yet.")
    if x.dtype.itemsize < 4:
        s, c = _fresnel_jit(x.astype(np.float32))
        return s.astype(x.dtype), c.astype(x.dtype)
    return _fresnel_jit(x)


# ---------------------------------------------------------------------------------------------
# Spence's function spence(x) = integral_1^x log t / (1 - t) dt = Li2(1 - x)

def _bernoulli_numbers(n: int):
    """B_0..B_n as Fractions (B_1 = -1/2), from sum_k C(m+1, k) B_k = 0."""
    numbers = [Fraction(1)]
    for m in range(1, n + 1):
        numbers.append(-sum(math.comb(m + 1, k) * numbers[k] for k in range(m)) / (m + 1))
    return numbers


# Li2(y) = sum_n B_n u^(n+1) / (n+1)! with u = -log(1 - y), for |u| <= log 2.
_LI2_SERIES = [float(b / math.factorial(i + 1)) for i, b in enumerate(_bernoulli_numbers(24))]


def _li2_central(y):
    u = -jnp.log1p(-y)
    out = jnp.zeros_like(u)
    for c in _LI2_SERIES[::-1]:
        out = out * u + c
    return out * u


def _spence_value(x):
    """Li2(1 - x) for x >= 0, reduced to -1 <= y <= 1/2 by Li2's reflections."""
    y = 1 - x
    pi2_6 = math.pi ** 2 / 6
    below = y < -1  # Li2(y) = -pi^2/6 - log(-y)^2 / 2 - Li2(1/y)
    yb = jnp.where(below, y, -2.0)
    value_below = -pi2_6 - 0.5 * jnp.log(-yb) ** 2 - _li2_central(1 / yb)
    above = x < 0.5  # y > 1/2: Li2(y) = pi^2/6 - log(y) log(1 - y) - Li2(1 - y), 1 - y = x
    xa = jnp.where(above & (x > 0), x, 0.25)
    value_above = pi2_6 - jnp.log1p(-xa) * jnp.log(xa) - _li2_central(xa)
    central = _li2_central(jnp.where(below | above, 0.0, y))
    value = jnp.where(below, value_below, jnp.where(above, value_above, central))
    value = jnp.where(x == 0, pi2_6, value)
    return jnp.where((x < 0) | (x == np.inf) | jnp.isnan(x), np.nan, value)


@custom_jvp
def _spence(x):
    return _spence_value(x)


@_spence.defjvp
def _spence_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    one = x == 1
    slope = jnp.where(one, -1.0, jnp.log(x) / jnp.where(one, 2.0, 1 - x))
    return _spence(x), slope * dx


def spence(x):
    """Spence's function integral_1^x log(t) / (1 - t) dt, i.e. the dilogarithm Li2(1 - x),
    for x >= 0 (NaN below, as SciPy for real input)."""
    dtype = jnp.asarray(x).dtype
    if dtype not in (np.float32, np.float64):  # as JAX, which has no other types here
        raise TypeError(f"x.dtype={dtype} is not supported, see docstring for supported types.")
    (x,) = _real_input("spence", x)
    return _half_to_single(_spence_jit, x)


# Compiled once per signature (the loops above are many small operations).
_expi_jit = jit(_expi)
_sici_jit = jit(_sici)
_fresnel_jit = jit(_fresnel)
_spence_jit = jit(_spence)
