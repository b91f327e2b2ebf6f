"""Continuous distributions built from uniform and normal draws (JAX's algorithms, op for op,
so that samples match JAX's bit for bit).

Each public sampler checks its arguments, then calls a jitted implementation on the raw key
data; implementations call each other's un-jitted forms.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import dtypes
from fluxion._src.lax import lax, structural
from fluxion._src.lax.stop_gradient import stop_gradient
from fluxion._src.numpy import reductions, ufuncs, util
from fluxion._src.random import prng
from fluxion._src.random._common import (canonical_shape, check_out_sharding, check_safe_to_cast,
                                         check_shape, require_float, shape_from_params, static_jit,
                                         user_dtype)
from fluxion._src.random.basic import (const, float_sampler_args, _normal, _rademacher, unstack,
                                       _uniform)
from fluxion._src.random.keys import check_key


def _truncated_normal(key, lower, upper, shape, dtype):
    if shape is None:
        shape = util.broadcast_shapes(np.shape(lower), np.shape(upper))
    else:
        check_shape("truncated_normal", shape, np.shape(lower), np.shape(upper))
    sqrt2 = const(dtype, np.sqrt(2))
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a = lax.erf(lower / sqrt2)
    b = lax.erf(upper / sqrt2)
    u = _uniform(key, a, b, shape, dtype)
    out = sqrt2 * lax.erf_inv(u)
    # Keep the samples inside the open interval despite rounding.
    return ufuncs.clip(out, lax.nextafter(stop_gradient(lower), const(dtype, np.inf)),
                       lax.nextafter(stop_gradient(upper), const(dtype, -np.inf)))


_truncated_normal_jit = static_jit(_truncated_normal, 2)


def truncated_normal(key, lower, upper, shape=None, dtype=None, *, out_sharding=None):
    """Standard normal samples truncated to the open interval (lower, upper)."""
    if shape is not None:
        shape = canonical_shape(shape)
    key, _ = check_key("truncated_normal", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, float)
    require_float("truncated_normal", dtype)
    return _truncated_normal_jit(key, lower, upper, shape, dtype)


def _lognormal(key, sigma, shape, dtype):
    sigma = lax.convert_element_type(sigma, dtype)
    return lax.exp(_normal(key, shape, dtype) * sigma)


_lognormal_jit = static_jit(_lognormal, 2)


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None, *, out_sharding=None):
    """Log-normal samples: exp(sigma * N(0, 1))."""
    key, _ = check_key("lognormal", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, float)
    require_float("lognormal", dtype, "a float or complex")
    shape = shape_from_params("lognormal", shape, sigma)
    check_safe_to_cast("lognormal", dtype, sigma)
    return _lognormal_jit(key, sigma, shape, dtype)


# ---------------------------------------------------------------------------------------------
# One-parameter-free transforms of a uniform draw

def _simple_sampler(name: str, impl):
    """Public sampler `name(key, shape=(), dtype=None)` around `impl(key, shape, dtype)`."""
    impl_jit = static_jit(impl, 2)

    def sampler(key, shape=(), dtype=None, *, out_sharding=None):
        key, _ = check_key(name, key)
        check_out_sharding(out_sharding)
        dtype = user_dtype(dtype, float)
        require_float(name, dtype)
        return impl_jit(key, canonical_shape(shape), dtype)
    sampler.__name__ = sampler.__qualname__ = name
    return sampler


def _exponential(key, shape, dtype):
    u = _uniform(key, 0.0, 1.0, shape, dtype)
    return lax.neg(lax.log1p(lax.neg(u)))


def _laplace(key, shape, dtype):
    u = _uniform(key, -1.0 + dtypes.finfo(dtype).epsneg, 1.0, shape, dtype)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def _logistic(key, shape, dtype):
    x = _uniform(key, dtypes.finfo(dtype).tiny, 1.0, shape, dtype)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def _cauchy(key, shape, dtype):
    u = _uniform(key, dtypes.finfo(dtype).eps, 1.0, shape, dtype)
    return lax.tan(lax.mul(const(dtype, np.pi), lax.sub(u, const(dtype, 0.5))))


def _maxwell(key, shape, dtype):
    samples = _normal(key, shape + (3,), dtype)
    return ufuncs.sqrt(reductions.sum(samples * samples, axis=-1))


exponential = _simple_sampler("exponential", _exponential)
laplace = _simple_sampler("laplace", _laplace)
logistic = _simple_sampler("logistic", _logistic)
cauchy = _simple_sampler("cauchy", _cauchy)
maxwell = _simple_sampler("maxwell", _maxwell)
exponential.__doc__ = "Exponential samples of rate 1: -log(1 - U)."
laplace.__doc__ = "Laplace samples of location 0 and scale 1."
logistic.__doc__ = "Standard logistic samples: log(U / (1 - U))."
cauchy.__doc__ = "Standard Cauchy samples: tan(pi * (U - 1/2))."
maxwell.__doc__ = "Maxwell samples: the norm of a 3-dimensional standard normal vector."


# ---------------------------------------------------------------------------------------------
# Gumbel (also the noise of categorical sampling)

def _safe_int_to_float(bits):
    """A pair of uint32 arrays read as a 64-bit fraction in [0, 1), rounded down to float32
    with full precision near 0 (the "highest" Gumbel mode)."""
    finfo = dtypes.finfo(dtypes.float32)
    u32 = dtypes.uint32
    hi, lo = bits[0], bits[1]
    hiclz, loclz = lax.clz(hi), lax.clz(lo)
    thirty_two = const(u32, 32)
    mantissa = lax.bitwise_or(
        lax.shift_left(hi, hiclz),
        util.where(hiclz == thirty_two, lax.shift_left(lo, loclz),
                   lax.shift_right_logical(lo, const(u32, finfo.bits) - hiclz)))
    mantissa = lax.shift_right_logical(mantissa, const(u32, finfo.bits - finfo.nmant - 1))
    mantissa = lax.bitwise_and(mantissa, const(u32, (1 << finfo.nmant) - 1))
    exp = lax.shift_left(const(u32, -finfo.minexp) - util.where(hiclz == thirty_two,
                                                                 thirty_two + loclz, hiclz),
                         const(u32, finfo.nmant))
    exp = lax.bitwise_and(exp, const(u32, (1 << (finfo.bits - 2)) - (1 << (finfo.nmant - 1))))
    return lax.bitcast_convert_type(lax.bitwise_or(exp, mantissa), dtypes.float32)


def _gumbel(key, shape, dtype, mode):
    info = dtypes.finfo(dtype)
    if dtype == dtypes.float32 and mode == "highest":
        u32 = dtypes.uint32
        bits = prng.random_bits(key, info.bits, (2,) + shape)
        neg = lax.bitwise_not(bits)
        lo_bits = neg[1]
        carry = lax.convert_element_type(lo_bits == const(u32, (1 << info.bits) - 1), u32)
        neg = neg + structural.concatenate(
            [structural.expand_dims(carry, (0,)),
             structural.expand_dims(structural.full_like(lo_bits, 1), (0,))], 0)
        flip_mask = bits[0] < const(u32, 1 << (info.bits - 1))
        x = _safe_int_to_float(util.where(flip_mask, bits, neg))
        return util.where(flip_mask, -ufuncs.log(-ufuncs.log1p(-x)),
                          -ufuncs.log(-ufuncs.log(x)))
    if mode in ("high", "highest"):
        draws = _uniform(key, 0.0, 1.0, (2,) + shape, dtype)
        high, low = draws[0], draws[1]
        x = util.where(high >= 0.5, high, high + 2 ** (-info.nmant) * low + info.tiny)
        return -ufuncs.log(-ufuncs.log1p(-x))
    return -ufuncs.log(-ufuncs.log(_uniform(key, info.tiny, 1.0, shape, dtype)))


_gumbel_jit = static_jit(_gumbel, 3)


def gumbel_mode(mode):
    if mode is None:
        mode = "low"
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return mode


def gumbel(key, shape=(), dtype=None, mode=None, *, out_sharding=None):
    """Standard Gumbel samples: -log(-log(U)).

    `mode="high"` spends twice the random bits to resolve the tail near U = 0; "highest"
    (float32 only) resolves it to float32's smallest normal number.
    """
    key, _ = check_key("gumbel", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, float)
    require_float("gumbel", dtype)
    return _gumbel_jit(key, canonical_shape(shape), dtype, gumbel_mode(mode))


# ---------------------------------------------------------------------------------------------
# Samplers with parameters

def _pareto(key, b, shape, dtype):
    b = lax.convert_element_type(b, dtype)
    return lax.exp(_exponential(key, shape, dtype) / b)


_pareto_jit = static_jit(_pareto, 2)


def pareto(key, b, shape=None, dtype=None, *, out_sharding=None):
    """Pareto samples of shape parameter `b` (support [1, inf)): exp(E / b)."""
    key, shape, dtype = float_sampler_args("pareto", key, shape, dtype, out_sharding, b)
    return _pareto_jit(key, b, shape, dtype)


def _double_sided_maxwell(key, loc, scale, shape, dtype):
    params_shape = util.broadcast_shapes(np.shape(loc), np.shape(scale))
    if not shape:
        shape = params_shape
    shape = shape + params_shape
    maxwell_key, rademacher_key = unstack(prng.split(key, (2,)))
    maxwell_rvs = _maxwell(maxwell_key, shape, dtype)
    random_sign = _rademacher(rademacher_key, shape, dtype)
    return random_sign * maxwell_rvs * scale + loc


_double_sided_maxwell_jit = static_jit(_double_sided_maxwell, 2)


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Double-sided Maxwell samples: a random sign times a Maxwell draw, scaled and shifted.

    The result shape is `shape` followed by the broadcast shape of `loc` and `scale`.
    """
    key, _ = check_key("double_sided_maxwell", key)
    dtype = user_dtype(dtype, float)
    require_float("double_sided_maxwell", dtype)
    return _double_sided_maxwell_jit(key, loc, scale, canonical_shape(shape), dtype)


def _weibull_min(key, scale, concentration, shape, dtype):
    u = _uniform(key, 0, 1, shape, dtype)
    return ufuncs.power(-ufuncs.log1p(-u), 1.0 / concentration) * scale


_weibull_min_jit = static_jit(_weibull_min, 2)


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull samples: scale * (-log(1 - U)) ** (1 / concentration)."""
    key, _ = check_key("weibull_min", key)
    dtype = user_dtype(dtype, float)
    require_float("weibull_min", dtype)
    return _weibull_min_jit(key, scale, concentration, canonical_shape(shape), dtype)


def _rayleigh(key, scale, shape, dtype):
    u = _uniform(key, 0.0, 1.0, shape, dtype)
    scale = util.broadcast_to(lax.convert_element_type(scale, dtype), shape)
    root = lax.sqrt(lax.mul(lax.log(u), util.lax_const(scale, -2)))
    return lax.mul(scale, root)


_rayleigh_jit = static_jit(_rayleigh, 2)


def rayleigh(key, scale, shape=None, dtype=None, *, out_sharding=None):
    """Rayleigh samples of the given scale: scale * sqrt(-2 log U)."""
    key, shape, dtype = float_sampler_args("rayleigh", key, shape, dtype, out_sharding, scale)
    return _rayleigh_jit(key, scale, shape, dtype)


def _wald(key, mean, shape, dtype):
    k1, k2 = unstack(prng.split(key, (2,)))
    mean = util.broadcast_to(lax.convert_element_type(mean, dtype), shape)
    v = _normal(k1, shape, dtype)
    z = _uniform(k2, 0.0, 1.0, shape, dtype)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return structural.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


_wald_jit = static_jit(_wald, 2)


def wald(key, mean, shape=None, dtype=None, *, out_sharding=None):
    """Wald (inverse Gaussian) samples of the given mean and shape parameter 1."""
    key, shape, dtype = float_sampler_args("wald", key, shape, dtype, out_sharding, mean)
    return _wald_jit(key, mean, shape, dtype)


def _triangular(key, left, mode, right, shape, dtype):
    left = util.broadcast_to(lax.convert_element_type(left, dtype), shape)
    right = util.broadcast_to(lax.convert_element_type(right, dtype), shape)
    mode = util.broadcast_to(lax.convert_element_type(mode, dtype), shape)
    fc = (mode - left) / (right - left)
    u = _uniform(key, 0.0, 1.0, shape, dtype)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return structural.select(u < fc, out1, out2)


_triangular_jit = static_jit(_triangular, 2)


def triangular(key, left, mode, right, shape=None, dtype=None, *, out_sharding=None):
    """Triangular samples on [left, right] with peak at `mode` (by inverting the CDF)."""
    key, shape, dtype = float_sampler_args("triangular", key, shape, dtype, out_sharding,
                                           left, mode, right)
    return _triangular_jit(key, left, mode, right, shape, dtype)


# ---------------------------------------------------------------------------------------------
# Samplers built on linear algebra

def _multivariate_normal(key, mean, cov, shape, dtype, method):
    import fluxion.numpy as jnp
    from fluxion._src.numpy import linalg
    if method == "svd":
        u, s, _ = linalg.svd(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = linalg.eigh(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = linalg.cholesky(cov)
    samples = _normal(key, shape + mean.shape[-1:], dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, samples)


_multivariate_normal_jit = static_jit(_multivariate_normal, 3)


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky", *,
                        out_sharding=None):
    """Multivariate normal samples: mean + F z with F F^H = cov from `method`'s factorization
    ('cholesky', 'eigh' or 'svd') and z standard normal."""
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    key, _ = check_key("multivariate_normal", key)
    check_out_sharding(out_sharding)
    mean, cov = util.promote_dtypes_inexact(util.as_array(mean), util.as_array(cov))
    if dtype is None:
        dtype = mean.dtype
    else:
        dtype = user_dtype(dtype, float)
    if not dtypes.is_float(dtype):
        raise ValueError(f"dtype argument to `multivariate_normal` must be a float dtype, got "
                         f"{dtype}")
    if not np.ndim(mean) >= 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{np.ndim(mean)}")
    if not np.ndim(cov) >= 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{np.ndim(cov)}")
    n = mean.shape[-1]
    if tuple(cov.shape[-2:]) != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {tuple(cov.shape)}.")
    if shape is None:
        shape = tuple(np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2]))
    else:
        shape = canonical_shape(shape)
        try:
            np.broadcast_shapes(shape, mean.shape[:-1], cov.shape[:-2])
        except ValueError:
            raise ValueError(f"normal parameter shapes must be broadcast-compatible with shape "
                             f"argument, and the result of broadcasting the shapes must equal "
                             f"the shape argument, but got result "
                             f"{np.broadcast_shapes(shape, mean.shape[:-1], cov.shape[:-2])} "
                             f"for shape argument {shape}.") from None
    return _multivariate_normal_jit(key, mean, cov, shape, np.dtype(dtype), method)


def _orthogonal(key, n, m, shape, dtype):
    import fluxion.numpy as jnp
    from fluxion._src.numpy import linalg
    z = _normal(key, (*shape, max(n, m), min(n, m)), dtype)
    q, r = linalg.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(d), -2)
    return jnp.swapaxes(x, -1, -2) if n < m else x


_orthogonal_jit = static_jit(_orthogonal, 4)


def orthogonal(key, n, shape=(), dtype=None, m=None, *, out_sharding=None):
    """Haar-random orthogonal (or unitary) n x m matrices: QR of a normal matrix with the
    signs of R's diagonal moved into Q (Mezzadri 2007)."""
    import operator
    key, _ = check_key("orthogonal", key)
    check_out_sharding(out_sharding)
    shape = canonical_shape(shape)
    dtype = user_dtype(dtype, float)
    require_float("normal", dtype, "a float or complex")  # the message of JAX's inner normal
    n = operator.index(n)
    m = n if m is None else operator.index(m)
    if n < 0 or m < 0:
        raise ValueError(f"negative dimensions are not allowed, got n={n} and m={m}")
    return _orthogonal_jit(key, n, m, shape, dtype)
