"""The confluent and Gauss hypergeometric functions `hyp1f1` and `hyp2f1` (real arguments).

Both sum their power series for a fixed number of terms (a `fori_loop`, so every argument
differentiates in both modes), after a transformation that puts the argument where the series
converges quickly:

- 1F1(a; b; x): Kummer's e^x 1F1(b - a; b; -x) for x < 0; for x >= 100 the asymptotic series
  Gamma(b)/Gamma(a) e^x x^(a-b) sum (b-a)_k (1-a)_k / (k! x^k).
- 2F1(a, b; c; x), x < 1: Pfaff's (1 - x)^(-a) 2F1(a, c - b; c; x / (x - 1)) when that brings the
  argument nearer 0; above 0.9 (with c - a - b not an integer) the connection formula to 1 - x.
"""
from __future__ import annotations

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src.api import jit
from fluxion._src.numpy.util import promote_dtypes_inexact
from fluxion._src.scipy.special import gamma, gammaln, gammasgn
from fluxion._src.scipy.special_faddeeva import _half_to_single

_TERMS_1F1 = 320
_TERMS_2F1 = 420


def _real_args(name, *args):
    args = promote_dtypes_inexact(*args)
    if jnp.iscomplexobj(args[0]):
        raise ValueError(f"{name} does not support complex-valued inputs.")
    return jnp.broadcast_arrays(*args)


def _series(ratio, terms: int, like):
    """1 + sum_k t_k with t_0 = 1, t_{k+1} = t_k * ratio(k)."""
    def body(k, carry):
        total, term = carry
        term = term * ratio(k.astype(like.dtype))
        return total + term, term
    one = jnp.ones_like(like)
    return lax.fori_loop(0, terms, body, (one, one))[0]


def _gamma_ratio(a, b):
    """Gamma(b) / Gamma(a), through logs with signs (no overflow for large arguments)."""
    return gammasgn(a) * gammasgn(b) * jnp.exp(gammaln(b) - gammaln(a))


# ---------------------------------------------------------------------------------------------

def _hyp1f1_series(a, b, x):
    return _series(lambda k: (a + k) / (b + k) * x / (k + 1), _TERMS_1F1, x)


def _hyp1f1_asymptotic(a, b, x):
    tail = _series(lambda k: (b - a + k) * (1 - a + k) / ((k + 1) * x), 40, x)
    return _gamma_ratio(a, b) * jnp.exp(x) * x ** (a - b) * tail


def hyp1f1(a, b, x):
    """Kummer's confluent hypergeometric function 1F1(a; b; x) for real arguments."""
    # in float32 for half precision: hundreds of series terms in float16 lose everything
    return _half_to_single(_hyp1f1, *_real_args("hyp1f1", a, b, x))


@jit
def _hyp1f1(a, b, x):
    flip = x < 0
    a2 = jnp.where(flip, b - a, a)  # Kummer's transformation: the series then has x >= 0
    x2 = jnp.abs(x)
    far = x2 >= 100
    near = _hyp1f1_series(a2, b, jnp.where(far, 0.0, x2))
    # The asymptotic series needs 1/Gamma(a) != 0: a non-positive integer a is a polynomial,
    # which the (exact, terminating) power series gives.
    polynomial = (a2 <= 0) & (a2 == jnp.floor(a2))
    use_far = far & ~polynomial
    asymptotic = _hyp1f1_asymptotic(jnp.where(use_far, a2, 1.0), jnp.where(use_far, b, 1.0),
                                    jnp.where(use_far, x2, 100.0))
    series_far = _hyp1f1_series(a2, b, jnp.where(far & polynomial, x2, 0.0))
    value = jnp.where(use_far, asymptotic, jnp.where(far, series_far, near))
    value = jnp.where(flip, jnp.exp(x) * value, value)
    # 1F1 ~ Gamma(b) / Gamma(b - a) (-x)^-a as x -> -inf (or faster, with the exponential)
    value = jnp.where((x == -np.inf) & (a > 0), 0.0, value)
    value = jnp.where(a == b, jnp.exp(x), value)
    value = jnp.where(b == 0, np.inf, value)
    return jnp.where(a == 0, jnp.ones_like(value), value)


# ---------------------------------------------------------------------------------------------

def _hyp2f1_series(a, b, c, z):
    return _series(lambda k: (a + k) * (b + k) / ((c + k) * (k + 1)) * z, _TERMS_2F1, z)


def _is_integer(v):
    return v == jnp.round(v)


def _rgamma(v):
    """1 / Gamma(v), 0 at the poles."""
    pole = (v <= 0) & _is_integer(v)
    return jnp.where(pole, 0.0, 1 / gamma(jnp.where(pole, 0.5, v)))


def _hyp2f1_integer_gap(a, b, m, s):
    """2F1(a, b; a + b + m; 1 - s) for an integer m >= 0 and small s (Abramowitz and Stegun
    15.3.10-11): a finite sum and a series with logarithms and digammas."""
    c = a + b + m

    def finite_body(n, carry):
        total, term = carry
        n = n.astype(s.dtype)
        term = term * (a + n) * (b + n) / ((n + 1) * jnp.where(n + 1 < m, 1 - m + n, 1.0)) * s
        return total + jnp.where(n + 1 < m, term, 0.0), term

    one = jnp.ones_like(s)
    finite = lax.fori_loop(0, 60, finite_body, (jnp.where(m > 0, one, 0.0), one))[0]
    finite = finite * jnp.where(m > 0, gamma(jnp.where(m > 0, m, 1.0)), 0.0) * gamma(c) \
        * _rgamma(a + m) * _rgamma(b + m)
    log_s = jnp.log(s)

    def log_body(n, carry):
        total, term = carry
        n = n.astype(s.dtype)
        bracket = (log_s - lax.digamma(n + 1) - lax.digamma(n + m + 1)
                   + lax.digamma(a + n + m) + lax.digamma(b + n + m))
        total = total + term * bracket
        term = term * (a + m + n) * (b + m + n) / ((n + 1) * (n + m + 1)) * s
        return total, term

    first = _rgamma(m + 1)
    logs = lax.fori_loop(0, 80, log_body, (jnp.zeros_like(s), first))[0]
    sign = jnp.where(m % 2 == 1, -1.0, 1.0)
    return finite - sign * gamma(c) * _rgamma(a) * _rgamma(b) * s ** m * logs


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function 2F1(a, b; c; x) for real arguments and x <= 1
    (above 1: the polynomial or (1 - x)^-b forms where they are real, else inf, as SciPy;
    inf where c is a non-positive integer, as JAX)."""
    # in float32 for half precision (2F1(1, 1; 2; 1/2) came out NaN in float16)
    return _half_to_single(_hyp2f1, *_real_args("hyp2f1", a, b, c, x))


@jit
def _hyp2f1(a, b, c, x):
    d = c - a - b
    # A non-positive integer a or b makes the series a polynomial: summed as it is.
    polynomial = ((a <= 0) & _is_integer(a)) | ((b <= 0) & _is_integer(b))
    # Pfaff: 2F1(a, b; c; x) = (1 - x)^-a 2F1(a, c - b; c; x / (x - 1)), for x < -1/2 too
    # (the argument lands in (1/3, 1)); without it the series would not converge for x < -1.
    pfaff = (x < -0.5) & ~polynomial
    z = jnp.where(pfaff, x / jnp.where(pfaff, x - 1, 1.0), x)
    b2 = jnp.where(pfaff, c - b, b)
    d2 = c - a - b2
    prefactor = jnp.where(pfaff, (1 - x) ** (-a), 1.0)
    polynomial = polynomial | ((b2 <= 0) & _is_integer(b2))  # Pfaff's c - b may be one
    # Near 1, the connection formula with 1 - z (c - a - b not an integer).
    # c - a - b within rounding of an integer (2.9 - 0.7 - 1.2) is that integer: the
    # connection formula would cancel catastrophically there.
    near_integer = jnp.abs(d2 - jnp.round(d2)) < 50 * float(np.finfo(z.dtype).eps)
    connect = (z > 0.9) & ~near_integer & ~polynomial
    zc = jnp.where(connect, z, 0.0)
    s = 1 - zc
    safe_d = jnp.where(connect, d2, 0.5)
    first = (gamma(c) * gamma(safe_d) * _rgamma(c - a) * _rgamma(c - b2)
             * _hyp2f1_series(a, b2, 1 - safe_d, jnp.where(connect, s, 0.0)))
    second = (s ** safe_d * gamma(c) * gamma(-safe_d) * _rgamma(a) * _rgamma(b2)
              * _hyp2f1_series(c - a, c - b2, 1 + safe_d, jnp.where(connect, s, 0.0)))
    # With an integer c - a - b, the logarithmic case (Euler's transformation first if it is
    # negative: 2F1(a, b; c; z) = (1 - z)^(c-a-b) 2F1(c - a, c - b; c; z)).
    gap = (z > 0.9) & near_integer & ~polynomial
    sg = jnp.where(gap, 1 - z, 0.5)
    m = jnp.round(d2)
    euler = m < 0
    integer_value = jnp.where(euler, sg ** m, 1.0) * _hyp2f1_integer_gap(
        jnp.where(gap, jnp.where(euler, c - a, a), 0.5),
        jnp.where(gap, jnp.where(euler, c - b2, b2), 0.5),
        jnp.where(gap, jnp.abs(m), 0.0), sg)
    direct = _hyp2f1_series(a, b2, c, jnp.where(connect | gap, 0.0, z))
    value = prefactor * jnp.where(connect, first + second, jnp.where(gap, integer_value, direct))
    # At 1: Gauss's sum for c - a - b > 0, else the sign of the divergent leading term.
    gauss = gamma(c) * gamma(jnp.where(d > 0, d, 1.0)) * _rgamma(c - a) * _rgamma(c - b)
    divergent_sign = gammasgn(c) * gammasgn(jnp.where(d < 0, -d, 1.0)) * gammasgn(a) * gammasgn(b)
    at_one = jnp.where(d > 0, gauss, divergent_sign * np.inf)
    # Above 1 the series diverges: a polynomial (a terminating series) is summed; with c equal
    # to a (or b) and an integer b (or a), 2F1 = (1 - x)^-b is real; SciPy and JAX give inf
    # for the rest.
    above = jnp.where((a == c) & _is_integer(b), (1 - x) ** (-b),
                      jnp.where((b == c) & _is_integer(a), (1 - x) ** (-a), np.inf))
    value = jnp.where((x == 1) & ~polynomial, at_one,
                      jnp.where((x > 1) & ~polynomial, above, value))
    # 2F1 ~ x^-min(a, b) as x -> -inf
    value = jnp.where((x == -np.inf) & (a > 0) & (b > 0), 0.0, value)
    value = jnp.where((c <= 0) & _is_integer(c), np.inf, value)
    trivial = (x == 0) | (((a == 0) | (b == 0)) & (c != 0))
    return jnp.where(trivial, jnp.ones_like(value), value)
