"""Polynomials of fluxion.numpy (coefficients highest power first): poly, polyadd, polysub,
polymul, polydiv, polyder, polyint, polyval, polyfit and roots.

roots, poly of a matrix and polyfit use `fluxion.numpy.linalg` (eigvals, lstsq), imported when
called.
"""
from __future__ import annotations

import operator

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.numpy import util
from fluxion._src.numpy.eager import eager_compiled


def _jnp():
    import fluxion.numpy as jnp
    return jnp


def _linalg():
    import fluxion.numpy.linalg as linalg  # built on LAPACK; imported on first use
    return linalg


def _complex_dtype(dtype):
    return np.dtype(np.complex128 if np.dtype(dtype) == np.float64 else np.complex64) \
        if not dtypes.is_complex(dtype) else np.dtype(dtype)


def _trim_leading_zeros(x, tol=0.0):
    """Drop leading (near-)zeros of a concrete 1-D array."""
    value = np.asarray(core.concrete_or_error(x, "trim_leading_zeros requires concrete input"))
    # Zeros are exact zeros and values below tol; NaN is no zero (it was trimmed).
    nonzero = np.nonzero(~((value == 0) | (np.abs(value) < tol)))[0]
    return x[int(nonzero[0]):] if nonzero.size else x[:0]


def _roots_no_zeros(p):
    jnp = _jnp()
    if p.size < 2:
        return jnp.array([], dtype=_complex_dtype(p.dtype))
    companion = jnp.diag(jnp.ones((p.size - 2,), p.dtype), -1)
    companion = companion.at[0, :].set(-p[1:] / p[0])
    return _linalg().eigvals(companion)


def _roots_with_zeros(p, num_leading_zeros):
    jnp = _jnp()
    from fluxion import lax
    p = jnp.where(p.shape[0] == num_leading_zeros, 1.0, p)
    found = _roots_no_zeros(jnp.roll(p, -num_leading_zeros))
    # Zero roots go last; the last num_leading_zeros roots stand for the stripped zeros: NaN.
    found = lax.sort_key_val(found == 0, found)[1]
    return jnp.where(jnp.arange(found.size) < found.size - num_leading_zeros, found,
                     complex(np.nan, np.nan))


def roots(p, *, strip_zeros: bool = True):
    """Roots of the polynomial with coefficients `p`, as eigenvalues of its companion matrix.

    With strip_zeros=False (usable under jit) leading zero coefficients give NaN roots.
    """
    jnp = _jnp()
    p = util.ensure_arraylike("roots", p)
    p, = util.promote_dtypes_inexact(p)
    p = jnp.atleast_1d(p)
    if p.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    if p.size < 2:
        return jnp.array([], dtype=_complex_dtype(p.dtype))
    leading = jnp.where(jnp.all(p == 0), p.shape[0], jnp.argmin(p == 0))
    if strip_zeros:
        leading = int(core.concrete_or_error(
            leading, "The error occurred in the jnp.roots() function. To use this within a "
            "JIT-compiled context, pass strip_zeros=False, but be aware that leading zeros "
            "will result in some returned roots being set to NaN."))
        return _roots_no_zeros(p[leading:])
    return _roots_with_zeros(p, leading)


def _vander(x, n):
    jnp = _jnp()
    powers = jnp.arange(n - 1, -1, -1)
    return jnp.power(x[:, None], powers) if n else jnp.zeros((x.shape[0], 0), x.dtype)


def polyfit(x, y, deg: int, rcond=None, full: bool = False, w=None, cov=False):
    """Least-squares polynomial fit of degree `deg` (coefficients highest power first)."""
    jnp = _jnp()
    if w is None:
        x_arr, y_arr = util.ensure_arraylike("polyfit", x, y)
    else:
        x_arr, y_arr, w = util.ensure_arraylike("polyfit", x, y, w)
    deg = int(core.concrete_or_error(deg, "deg must be int"))  # NumPy and JAX take 1.0
    order = deg + 1
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if x_arr.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x_arr.size == 0:
        raise TypeError("expected non-empty vector for x")
    if y_arr.ndim < 1 or y_arr.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if x_arr.shape[0] != y_arr.shape[0]:
        raise TypeError("expected x and y to have same length")
    if rcond is None:
        rcond = x_arr.shape[0] * float(jnp.finfo(x_arr.dtype).eps) \
            if dtypes.is_inexact(x_arr.dtype) else \
            x_arr.shape[0] * float(np.finfo(dtypes.default_float_dtype()).eps)
    rcond = float(core.concrete_or_error(rcond, "rcond must be float"))
    lhs = _vander(x_arr, order)
    rhs = y_arr
    if w is not None:
        w_arr, = util.promote_dtypes_inexact(w)
        if w_arr.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w_arr.shape[0] != y_arr.shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * w_arr[:, None]
        rhs = rhs * (w_arr[:, None] if rhs.ndim == 2 else w_arr)
    # Scaling the columns improves the conditioning of the least-squares problem.
    scale = jnp.sqrt((lhs * lhs).sum(axis=0))
    lhs = lhs / scale[None, :]
    linalg = _linalg()
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = (c.T / scale[None, :]).T if c.ndim > 1 else c / scale
    if full:
        return c, resids, rank, s, util.as_array(rcond)
    if cov:
        vbase = linalg.inv(jnp.dot(lhs.T, lhs)) / jnp.outer(scale, scale)
        if cov == "unscaled":
            fac = jnp.array(1.0)
        else:
            if x_arr.shape[0] <= order:
                raise ValueError("the number of data points must exceed order to scale the "
                                 "covariance matrix")
            fac = resids / (x_arr.shape[0] - order)
        if y_arr.ndim == 1:
            return c, vbase * jnp.atleast_1d(fac)[None]
        return c, vbase[:, :, None] * jnp.atleast_1d(fac)[None, None, :]
    return c


def poly(seq_of_zeros):
    """Coefficients of the monic polynomial with the given roots (or a matrix's eigenvalues)."""
    jnp = _jnp()
    z = util.ensure_arraylike("poly", seq_of_zeros)
    z, = util.promote_dtypes_inexact(z)
    z = jnp.atleast_1d(z)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        z = _linalg().eigvals(z)
    if z.ndim != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    dt = z.dtype
    if z.shape[0] == 0:
        return jnp.ones((), dtype=dt)
    a = jnp.ones((1,), dtype=dt)
    for k in range(z.shape[0]):
        a = jnp.convolve(a, jnp.stack([jnp.ones((), dt), -z[k]]), mode="full")
    return a


@eager_compiled(static_argnames=('unroll',))
def polyval(p, x, *, unroll: int = 16):
    """Value of the polynomial `p` at `x` by Horner's rule (a scan over the coefficients)."""
    jnp = _jnp()
    from fluxion import lax
    p, x = util.ensure_arraylike("polyval", p, x)
    p_arr, x_arr = util.promote_dtypes(p, x)
    shape = util.broadcast_shapes(p_arr.shape[1:], x_arr.shape)
    y = jnp.zeros(shape, dtype=x_arr.dtype)
    y, _ = lax.scan(lambda acc, c: (acc * x_arr + c, None), y, p_arr, unroll=unroll)
    return y


def _coefficients(name, *polys):
    """Polynomial coefficient vectors: a scalar is a polynomial of degree 0 (as in NumPy)."""
    jnp = _jnp()
    polys = [jnp.atleast_1d(p) for p in polys]
    for p in polys:
        if p.ndim != 1:
            raise ValueError(f"{name}: polynomial coefficients must be 1-D, got shape {p.shape}")
    return polys


@eager_compiled(static_argnames=())
def polyadd(a1, a2):
    """Sum of two polynomials."""
    a1, a2 = _coefficients("polyadd", *util.promote_dtypes(
        *util.ensure_arraylike("polyadd", a1, a2)))
    if a2.shape[0] <= a1.shape[0]:
        return a1.at[-a2.shape[0]:].add(a2) if a2.shape[0] else a1
    return a2.at[-a1.shape[0]:].add(a1) if a1.shape[0] else a2


@eager_compiled(static_argnames=())
def polysub(a1, a2):
    """Difference of two polynomials."""
    jnp = _jnp()
    a1, a2 = util.promote_dtypes(*util.ensure_arraylike("polysub", a1, a2))
    return polyadd(a1, jnp.negative(a2))


@eager_compiled(static_argnames=('m',))
def polyint(p, m: int = 1, k=None):
    """m-th antiderivative of `p` with integration constants `k` (scalar or length m)."""
    jnp = _jnp()
    m = operator.index(core.concrete_or_error(m, "'m' argument of jnp.polyint"))
    if k is None:
        k = 0
    p, k = util.ensure_arraylike("polyint", p, k)
    p_arr, k_arr = util.promote_dtypes_inexact(p, k)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k_arr = jnp.atleast_1d(k_arr)
    if k_arr.shape[0] == 1:
        k_arr = jnp.full((m,), k_arr[0])
    if k_arr.shape != (m,):
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    if m == 0:
        return p_arr
    n = p_arr.shape[0] + m
    grid = np.arange(n)[None] - np.arange(m)[:, None]
    coeff = np.maximum(1, grid).prod(0)[::-1].astype(p_arr.dtype)
    return jnp.true_divide(jnp.concatenate((p_arr, k_arr)), coeff)


@eager_compiled(static_argnames=('m',))
def polyder(p, m: int = 1):
    """m-th derivative of the polynomial `p`."""
    jnp = _jnp()
    p = util.ensure_arraylike("polyder", p)
    m = operator.index(core.concrete_or_error(m, "'m' argument of jnp.polyder"))
    p_arr, = util.promote_dtypes_inexact(p)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    if m == 0:
        return p_arr
    coeff = (np.arange(m, p_arr.shape[0])[None] - np.arange(m)[:, None]).prod(0)
    return p_arr[:-m] * jnp.asarray(coeff[::-1].astype(p_arr.dtype))


def polymul(a1, a2, *, trim_leading_zeros: bool = False):
    """Product of two polynomials."""
    jnp = _jnp()
    a1, a2 = _coefficients("polymul", *util.promote_dtypes_inexact(
        *util.ensure_arraylike("polymul", a1, a2)))
    if trim_leading_zeros and (a1.shape[0] > 1 or a2.shape[0] > 1):
        a1, a2 = _trim_leading_zeros(a1), _trim_leading_zeros(a2)
    if a1.shape[0] == 0:
        a1 = jnp.zeros(1, dtype=a2.dtype)
    if a2.shape[0] == 0:
        a2 = jnp.zeros(1, dtype=a1.dtype)
    return jnp.convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros: bool = False):
    """Quotient and remainder of polynomial division u / v."""
    jnp = _jnp()
    u_arr, v_arr = _coefficients("polydiv", *util.promote_dtypes_inexact(
        *util.ensure_arraylike("polydiv", u, v)))
    m = u_arr.shape[0] - 1
    n = v_arr.shape[0] - 1
    scale = 1.0 / v_arr[0]
    q = jnp.zeros(max(m - n + 1, 1), dtype=u_arr.dtype)
    for k in range(0, m - n + 1):
        d = scale * u_arr[k]
        q = q.at[k].set(d)
        u_arr = u_arr.at[k:k + n + 1].add(-d * v_arr)
    if trim_leading_zeros:
        u_arr = _trim_leading_zeros(u_arr, tol=float(np.sqrt(jnp.finfo(u_arr.dtype).eps)))
    return q, u_arr


def _compile_eager_calls():  # as in manipulation.py
    from fluxion._src.numpy.eager import compile_eagerly
    compile_eagerly(globals(), names=("polyfit",),
                    static_parameters=frozenset({"deg", "rcond", "full", "cov"}))


_compile_eager_calls()
