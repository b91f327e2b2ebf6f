"""The basic samplers every other one builds on: bits, uniform, normal, bernoulli, rademacher.

They follow JAX's algorithms op for op, so that samples match JAX's bit for bit. Each public
sampler checks its arguments, then calls a jitted implementation (one compiled executable per
shape and dtype) on the raw key data; implementations call each other's un-jitted forms.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import dtypes
from fluxion._src.lax import lax, structural
from fluxion._src.random import prng
from fluxion._src.random._common import (canonical_shape, check_out_sharding, check_safe_to_cast,
                                         check_shape, require_float, shape_from_params, static_jit,
                                         user_dtype)
from fluxion._src.random.keys import check_key


def float_sampler_args(name: str, key, shape, dtype, out_sharding, *params):
    """The checks every float sampler with parameters makes: (raw key, shape, dtype).

    `shape` None means the broadcast shape of `params`, which must promote to `dtype` safely."""
    key, _ = check_key(name, key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, float)
    require_float(name, dtype)
    shape = shape_from_params(name, shape, *params)
    check_safe_to_cast(name, dtype, *params)
    return key, shape, dtype


def const(dtype, value):
    """A strongly typed scalar `value` of `dtype`."""
    return lax._convert_element_type(np.asarray(value, dtype), dtype)


def unstack(keys):
    """The raw keys along the leading axis of raw key data."""
    return [structural.index_in_dim(keys, i, 0, keepdims=False) for i in range(keys.shape[0])]


# ---------------------------------------------------------------------------------------------
# bits

_random_bits_jit = static_jit(prng.random_bits, 2)


def bits(key, shape=(), dtype=None, *, out_sharding=None):
    """Uniform random bits as unsigned integers (default uint32, or uint64 with x64 enabled)."""
    key, _ = check_key("bits", key)
    check_out_sharding(out_sharding)
    dtype = dtypes.default_uint_dtype() if dtype is None else user_dtype(dtype, None)
    if not dtypes.issubdtype(dtype, np.unsignedinteger):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    return _random_bits_jit(key, dtype.itemsize * 8, canonical_shape(shape))


# ---------------------------------------------------------------------------------------------
# uniform and normal

def _uniform(key, minval, maxval, shape, dtype):
    minval = lax.broadcast_to_rank(lax.convert_element_type(minval, dtype), len(shape))
    maxval = lax.broadcast_to_rank(lax.convert_element_type(maxval, dtype), len(shape))
    finfo = dtypes.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    if nbits not in (8, 16, 32, 64):
        raise TypeError(f"uniform only accepts 8-, 16-, 32-, or 64-bit dtypes, got {dtype}.")
    # Random mantissa bits under the exponent of 1.0 make a float in [1, 2); subtract 1. Types
    # with fewer than 8 mantissa bits draw 8 random bits.
    rng_bits = nbits if nmant >= 8 else 8
    bits_ = prng.random_bits(key, rng_bits, shape)
    uint_dtype = prng.UINT_DTYPES[nbits]
    if rng_bits != nbits:
        bits_ = lax.convert_element_type(bits_, uint_dtype)
    float_bits = lax.shift_right_logical(bits_, const(uint_dtype, rng_bits - nmant))
    one_bits = np.array(1.0, dtype).view(uint_dtype)
    float_bits = lax.bitwise_or(float_bits, const(uint_dtype, one_bits))
    floats = lax.bitcast_convert_type(float_bits, dtype) - const(dtype, 1.0)
    return lax.max(minval, lax.reshape(floats * (maxval - minval) + minval, shape))


_uniform_jit = static_jit(_uniform, 2)


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0, *, out_sharding=None):
    """Uniform random floats in [minval, maxval).

    Parameters
    ----------
    key : a PRNG key.
    shape : the result shape (default ``()``).
    dtype : a float dtype (default float32, or float64 with x64 enabled).
    minval, maxval : the bounds, inclusive and exclusive; they broadcast against `shape`.
    """
    key, _ = check_key("uniform", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, float)
    shape = canonical_shape(shape)
    if not dtypes.is_float(dtype):
        raise ValueError(f"dtype argument to `uniform` must be a float dtype, got {dtype}")
    return _uniform_jit(key, minval, maxval, shape, dtype)


def _normal_real(key, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    u = _uniform(key, lo, np.array(1.0, dtype), shape, dtype)
    return lax.mul(const(dtype, np.sqrt(2)), lax.erf_inv(u))


def _normal(key, shape, dtype):
    if not dtypes.is_complex(dtype):
        return _normal_real(key, shape, dtype)
    real_dtype = np.array(0, dtype).real.dtype
    key_re, key_im = unstack(prng.split(key, (2,)))
    re = lax.convert_element_type(_normal_real(key_re, shape, real_dtype), dtype)
    im = lax.convert_element_type(_normal_real(key_im, shape, real_dtype), dtype)
    return (re + 1j * im) / const(dtype, np.sqrt(2))


_normal_jit = static_jit(_normal, 2)


def normal(key, shape=(), dtype=None, *, out_sharding=None):
    """Standard normal samples (for complex dtypes, real and imaginary parts each have
    variance 1/2)."""
    key, _ = check_key("normal", key)
    check_out_sharding(out_sharding)
    shape = canonical_shape(shape)
    dtype = user_dtype(dtype, float)
    require_float("normal", dtype, "a float or complex")
    return _normal_jit(key, shape, dtype)


# ---------------------------------------------------------------------------------------------
# bernoulli and rademacher

def _bernoulli(key, p, shape, mode):
    if shape is None:
        shape = np.shape(p)
    else:
        check_shape("bernoulli", shape, np.shape(p))
    dtype = p.dtype
    if mode == "high":
        draws = _uniform(key, 0.0, 1.0, (2,) + tuple(shape), dtype)
        u1, u2 = draws[0], draws[1]
        u2 = u2 * (2 ** -dtypes.finfo(dtype).nmant)  # the resolution of one uniform draw
        return u2 < p - u1
    return _uniform(key, 0.0, 1.0, shape, dtype) < p


_bernoulli_jit = static_jit(_bernoulli, 2)


def bernoulli(key, p=0.5, shape=None, mode="low", *, out_sharding=None):
    """Boolean samples that are True with probability `p`.

    `mode="high"` spends twice the random bits, for correct sampling of small `p`.
    """
    if shape is not None:
        shape = canonical_shape(shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got {mode=}, expected 'high' or 'low'")
    key, _ = check_key("bernoulli", key)
    check_out_sharding(out_sharding)
    dtype = dtypes.dtype(p, canonicalize=True)
    if not dtypes.is_float(dtype):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dtype}.")
    p = lax.convert_element_type(p, dtype)
    return _bernoulli_jit(key, p, shape, mode)


def _rademacher(key, shape, dtype):
    p = lax.convert_element_type(0.5, dtypes.default_float_dtype())
    samples = lax.convert_element_type(_bernoulli(key, p, shape, "low"), dtype)
    return lax.convert_element_type(2 * samples - 1, dtype)


_rademacher_jit = static_jit(_rademacher, 2)


def rademacher(key, shape=(), dtype=None, *, out_sharding=None):
    """Random signs, -1 or +1 with equal probability (default dtype int32)."""
    key, _ = check_key("rademacher", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, int)
    return _rademacher_jit(key, canonical_shape(shape), dtype)
