"""`bernoulli`, `bessel_jn`, `owens_t` and `sph_harm_y`."""
from __future__ import annotations

import math
import operator
from functools import partial

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src import core, dtypes
from fluxion._src.api import jit
from fluxion._src.custom_derivatives import custom_jvp
from fluxion._src.numpy.util import promote_dtypes_inexact
from fluxion._src.scipy.special_integrals import _bernoulli_numbers


def bernoulli(n: int):
    """The Bernoulli numbers B_0 .. B_n (B_1 = -1/2), as an array of the default float type."""
    n = core.concrete_or_error(n, "Argument n of bernoulli")
    n = operator.index(n)
    if n < 0:
        raise ValueError("n must be a non-negative integer.")
    values = [float(b) for b in _bernoulli_numbers(n)]
    return jnp.asarray(values, dtypes.default_float_dtype())


def bessel_jn(z, *, v: int, n_iter: int = 50):
    """The Bessel functions of the first kind J_0(z) .. J_v(z), stacked on a new first axis.

    Miller's backward recurrence J_{k-1} = 2k/z J_k - J_{k+1} from k = n_iter, normalized by
    J_0 + 2 (J_2 + J_4 + ...) = 1; accurate for |z| well below n_iter. The values are rescaled
    whenever they grow large, so small |z| does not overflow.
    """
    (z,) = promote_dtypes_inexact(z)
    if jnp.iscomplexobj(z):
        raise ValueError("complex input not supported.")
    v = operator.index(core.concrete_or_error(v, "Argument v of bessel_jn."))
    n_iter = int(core.concrete_or_error(n_iter, "Argument n_iter of bessel_jn."))
    if v < 0:
        raise ValueError(f"bessel_jn: v must be non-negative, got {v}")
    return _bessel_jn(z, v, n_iter)


@partial(jit, static_argnums=(1, 2))
def _bessel_jn(z, v: int, n_iter: int):
    # A loop, not unrolled Python: XLA fuses an unrolled recurrence into one kernel that
    # recomputes shared terms, which made its derivative take exponential time.
    safe_z = jnp.where(z == 0, 1.0, z)
    big = 1e10 if z.dtype.itemsize >= 4 else 1e3
    orders = jnp.arange(v + 1).reshape((v + 1,) + (1,) * z.ndim)

    def step(i, carry):
        later, current, even_sum, kept = carry  # f_{k+1}, f_k, the sum, f_j for j <= v seen
        k = jnp.asarray(n_iter - i)  # under disable_jit the loop index is a Python int
        weight = jnp.where(k % 2 == 0, jnp.where(k == 0, 1.0, 2.0), 0.0).astype(z.dtype)
        even_sum = even_sum + weight * current
        kept = jnp.where(orders == k, current, kept)
        previous = 2 * k.astype(z.dtype) / safe_z * current - later
        scale = jnp.where(jnp.abs(previous) > big, 1 / big, 1.0).astype(z.dtype)
        return current * scale, previous * scale, even_sum * scale, kept * scale

    start = (jnp.zeros_like(z), jnp.full_like(z, 1e-16), jnp.zeros_like(z),
             jnp.zeros((v + 1,) + z.shape, z.dtype))
    # the last step's rescaling (after k = 0) multiplies sum and kept values alike
    _, _, even_sum, kept = lax.fori_loop(0, n_iter + 1, step, start)
    values = kept / even_sum
    at_zero = (orders == 0).astype(z.dtype)
    return jnp.where(z == 0, at_zero, values)


# ---------------------------------------------------------------------------------------------
# Owen's T function T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx

_GL_POINTS, _GL_WEIGHTS = np.polynomial.legendre.leggauss(40)


def _owens_t_quadrature(h, a):
    """T(h, a) for 0 <= a <= 1 by Gauss-Legendre quadrature on [0, a]."""
    x = 0.5 * a[..., None] * (jnp.asarray(_GL_POINTS, h.dtype) + 1)
    one_x2 = 1 + x * x
    f = jnp.exp(-0.5 * (h * h)[..., None] * one_x2) / one_x2
    return 0.25 * a / math.pi * jnp.sum(f * jnp.asarray(_GL_WEIGHTS, h.dtype), axis=-1)


def _ndtr(x):
    return 0.5 * lax.erfc(-x / math.sqrt(2.0))


@custom_jvp
def _owens_t(h, a):
    h, a = jnp.broadcast_arrays(h, a)
    ah, aa = jnp.abs(h), jnp.abs(a)
    inner = aa <= 1
    # For |a| > 1: T(h, a) = (Phi(h) Q(ah) + Phi(ah) Q(h)) / 2 - T(ah, 1/a) (h >= 0).
    h_q = jnp.where(inner, ah, aa * ah)
    a_q = jnp.where(inner, aa, 1 / jnp.where(inner, 1.0, aa))
    t = _owens_t_quadrature(h_q, jnp.where(aa == np.inf, 0.0, a_q))
    ph, qh = _ndtr(ah), _ndtr(-ah)
    pah, qah = _ndtr(aa * ah), _ndtr(-aa * ah)
    outer = 0.5 * (ph * qah + pah * qh) - t
    outer = jnp.where(aa == np.inf, jnp.where(ah == 0, 0.25, 0.5 * qh), outer)
    value = jnp.where(inner, t, outer)
    value = jnp.where(a < 0, -value, value)
    return jnp.where(jnp.isnan(h) | jnp.isnan(a), np.nan, value)


@_owens_t.defjvp
def _owens_t_jvp(primals, tangents):
    h, a = primals
    dh, da = tangents
    out = _owens_t(h, a)
    dt_dh = -jnp.exp(-0.5 * h * h) * lax.erf(a * h / math.sqrt(2.0)) / (
        2 * math.sqrt(2 * math.pi))
    dt_da = jnp.exp(-0.5 * (1 + a * a) * h * h) / (2 * math.pi * (1 + a * a))
    return out, dt_dh * dh + dt_da * da


def owens_t(h, a):
    """Owen's T function (1 / 2pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx."""
    h, a = promote_dtypes_inexact(h, a)
    if jnp.iscomplexobj(h):
        raise ValueError("owens_t does not support complex-valued inputs.")
    return _owens_t_jit(h, a)


# ---------------------------------------------------------------------------------------------
# Spherical harmonics

def _normalized_legendre(n, m, x, sin_x, n_max: int):
    """The orthonormalized associated Legendre value P_n^m(x) (Condon-Shortley phase),
    sqrt((2n+1)/(4 pi) (n-m)!/(n+m)!) P_n^m, for 0 <= m, elementwise, by the stable
    recurrences in n (m fixed per element)."""
    p_mm = jnp.full_like(x, math.sqrt(1 / (4 * math.pi)))
    for k in range(1, n_max + 1):  # P_m^m = -sqrt((2k+1)/(2k)) sin P_{k-1}^{k-1}
        factor = -math.sqrt((2 * k + 1) / (2 * k)) * sin_x
        p_mm = jnp.where(k <= m, p_mm * factor, p_mm)
    result = jnp.where(n == m, p_mm, 0.0)
    p_prev2, p_prev = jnp.zeros_like(x), p_mm
    for step in range(1, n_max + 1):
        l = m + step  # degree reached in this step; beyond n_max for large m: unused
        l_f = l.astype(x.dtype)
        m_f = m.astype(x.dtype)
        a_l = jnp.sqrt((4 * l_f * l_f - 1) / jnp.maximum(l_f * l_f - m_f * m_f, 1))
        a_prev = jnp.sqrt((4 * (l_f - 1) ** 2 - 1) / jnp.maximum((l_f - 1) ** 2 - m_f * m_f, 1))
        back = jnp.where(step == 1, 0.0, p_prev2 / jnp.where(step == 1, 1.0, a_prev))
        p_l = a_l * (x * p_prev - back)
        result = jnp.where(n == l, p_l, result)
        p_prev2, p_prev = p_prev, p_l
    return result


def sph_harm_y(n, m, theta, phi, diff_n: int | None = None, n_max: int | None = None):
    """The spherical harmonic Y_n^m(theta, phi), theta the polar and phi the azimuthal angle
    (SciPy's `sph_harm_y`). `n_max` (the largest n) must be static under jit."""
    if diff_n is not None:
        raise NotImplementedError("The 'diff_n' argument to jax.scipy.special.sph_harm_y is "
                                  "not supported.")
    n, m = jnp.asarray(n), jnp.asarray(m)
    theta, phi = promote_dtypes_inexact(theta, phi)
    if theta.ndim == 0:
        theta = theta.reshape((1,))
    if n_max is None:
        n_max = np.max(np.asarray(core.concrete_or_error(
            n, "The `n_max` argument of `sph_harm_y` must be statically specified to use "
               "`sph_harm_y` within fluxion transformations.")))
    n_max = int(core.concrete_or_error(n_max, "n_max of sph_harm_y"))
    result = _sph_harm_y(n, m, theta, phi, n_max)
    # JAX's result meets the default float type (its (-1.0)**|m| factor): complex128 under x64
    return result.astype(jnp.promote_types(result.dtype, dtypes.default_float_dtype()))


@partial(jit, static_argnums=(4,))
def _sph_harm_y(n, m, theta, phi, n_max: int):
    n, m, theta, phi = jnp.broadcast_arrays(n, m, theta, phi)
    abs_m = jnp.abs(m)
    # P_n^m(cos theta) has the factor sqrt(1 - cos^2) = |sin theta| (SciPy's, for any theta)
    legendre = _normalized_legendre(n, abs_m, jnp.cos(theta), jnp.abs(jnp.sin(theta)), n_max)
    legendre = jnp.where((abs_m > n) | (n < 0), 0.0, legendre)
    angle = abs_m.astype(theta.dtype) * phi
    y = lax.complex(legendre * jnp.cos(angle), legendre * jnp.sin(angle))
    sign = jnp.where(abs_m % 2 == 1, -1.0, 1.0).astype(theta.dtype)
    return jnp.where(m < 0, sign * jnp.conj(y), y)


# Compiled once per signature (the loops above are many small operations).
_owens_t_jit = jit(_owens_t)
