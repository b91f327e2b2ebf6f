"""Discrete samplers: randint, permutation, choice, categorical and geometric (JAX's
algorithms, so that samples match JAX's bit for bit)."""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

import fluxion.numpy as jnp
from fluxion._src import core, dtypes
from fluxion._src.lax import lax, sorting, structural
from fluxion._src.numpy import util
from fluxion._src.random import prng
from fluxion._src.random._common import (canonical_shape, check_out_sharding, check_shape,
                                         shape_from_params, static_jit, user_dtype)
from fluxion._src.random.basic import unstack, _uniform
from fluxion._src.random.continuous import gumbel_mode, _gumbel
from fluxion._src.random.keys import check_key


# ---------------------------------------------------------------------------------------------
# randint

def _convert_and_clip_integer(val, dtype):
    """`val` converted to integer `dtype`, clipped to its range rather than wrapped."""
    val_dtype = core.get_aval(val).dtype
    lo = max(dtypes.iinfo(dtype).min, dtypes.iinfo(val_dtype).min)
    hi = min(dtypes.iinfo(dtype).max, dtypes.iinfo(val_dtype).max)
    lo, hi = (lax._convert_element_type(np.array(v, val_dtype), val_dtype) for v in (lo, hi))
    return jnp.clip(val, lo, hi).astype(dtype)


def randint_impl(key, minval, maxval, shape, dtype):
    check_shape("randint", shape, np.shape(minval), np.shape(maxval))
    if not dtypes.is_integer(dtype):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    util.check_arraylike("randint", minval, maxval)
    minval, maxval = util.as_array(minval), util.as_array(maxval)
    if not dtypes.is_integer(minval.dtype):
        minval = minval.astype(int)
    if not dtypes.is_integer(maxval.dtype):
        maxval = maxval.astype(int)
    # A maxval above the dtype's range (e.g. 256 for uint8) makes the span one larger.
    dtype_max = lax._convert_element_type(np.array(dtypes.iinfo(dtype).max, dtype), dtype)
    maxval_out_of_range = lax.gt(maxval, _convert_and_clip_integer(dtype_max, maxval.dtype))
    minval = lax.broadcast_to_rank(_convert_and_clip_integer(minval, dtype), len(shape))
    maxval = lax.broadcast_to_rank(_convert_and_clip_integer(maxval, dtype), len(shape))
    nbits = dtypes.iinfo(dtype).bits
    if nbits not in (8, 16, 32, 64):
        raise TypeError(f"randint only accepts 8-, 16-, 32-, or 64-bit dtypes, got {dtype}")

    # Twice the bits a value needs, reduced modulo the span, to make the modulo bias small.
    k1, k2 = unstack(prng.split(key, (2,)))
    higher_bits = prng.random_bits(k1, nbits, shape)
    lower_bits = prng.random_bits(k2, nbits, shape)
    unsigned_dtype = prng.UINT_DTYPES[nbits]
    span = lax.convert_element_type(maxval - minval, unsigned_dtype)
    one = util.lax_const(span, 1)
    span = structural.select(maxval <= minval, structural.full_like(span, 1), span)  # then minval
    # Where the span is the whole range it wraps to 0, and the remainders below keep all bits.
    span = structural.select(maxval_out_of_range & (maxval > minval), lax.add(span, one), span)
    # (high * 2**nbits + low) % span, with 2**nbits % span computed without overflow.
    multiplier = lax.rem(util.lax_const(span, 2 ** (nbits // 2)), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher_bits, span), multiplier), lax.rem(lower_bits, span))
    offset = lax.rem(offset, span)
    return lax.add(minval, lax.convert_element_type(offset, dtype))


def _randint(key, minval, maxval, shape, dtype):
    info = dtypes.iinfo(dtype)
    sample_dtype = dtype
    if info.bits < 32:  # narrow types are sampled as int32, to avoid a large bias
        sample_dtype = dtypes.int32
        minval = jnp.clip(util.as_array(minval).astype("int32"), int(info.min), int(info.max))
        maxval = jnp.clip(util.as_array(maxval).astype("int32"), int(info.min),
                          int(info.max) + 1)
    return randint_impl(key, minval, maxval, shape, sample_dtype).astype(dtype)


_randint_jit = static_jit(_randint, 2)


def randint(key, shape, minval, maxval, dtype=None, *, out_sharding=None):
    """Uniform random integers in [minval, maxval) (default dtype int32, int64 with x64).

    minval and maxval broadcast against `shape` and are clipped to the range of `dtype`; where
    maxval <= minval the result is minval.
    """
    key, _ = check_key("randint", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, int)
    shape = canonical_shape(shape)
    if not dtypes.is_integer(dtype):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    return _randint_jit(key, minval, maxval, shape, dtype)


# ---------------------------------------------------------------------------------------------
# permutation

def _shuffle(key, x, axis):
    # Sort by random 32-bit keys, repeating with fresh keys so that ties (which a stable sort
    # keeps in order) become unlikely enough (tjablin's criterion, as in JAX and TensorFlow).
    size = math.prod(core.get_aval(x).shape)
    uint32_max = dtypes.iinfo(dtypes.uint32).max
    num_rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(uint32_max)))
    for _ in range(num_rounds):
        key, subkey = unstack(prng.split(key, (2,)))
        sort_keys = prng.random_bits(subkey, 32, core.get_aval(x).shape)
        _, x = sorting.sort_key_val(sort_keys, x, axis)
    return x


def _permutation(key, x, axis, independent):
    x = util.as_array(x)
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    ind = _shuffle(key, jnp.arange(x.shape[axis]), 0)
    return jnp.take(x, ind, axis, unique_indices=True)


def _permutation_of_range(key, n, axis):
    return _shuffle(key, jnp.arange(n), axis)


_permutation_jit = static_jit(_permutation, 2)
_permutation_of_range_jit = static_jit(_permutation_of_range, 2)


def permutation(key, x, axis=0, independent=False, *, out_sharding=None):
    """A random permutation of `x` along `axis`, or of ``arange(x)`` for an integer `x`.

    With `independent=True`, each slice along `axis` is permuted independently.
    """
    key, _ = check_key("permutation", key)
    check_out_sharding(out_sharding)
    util.check_arraylike("permutation", x)
    axis = util.canonicalize_axis(axis, np.ndim(x) or 1)
    if not np.ndim(x):
        if not dtypes.is_integer(dtypes.dtype(x)):
            raise TypeError("x must be an integer or at least 1-dimensional")
        n = int(core.concrete_or_error(x, "argument x of jax.random.permutation()"))
        return _permutation_of_range_jit(key, n, axis)
    return _permutation_jit(key, x, axis, bool(independent))


# ---------------------------------------------------------------------------------------------
# choice

def _choice(key, arr, p, shape, replace, axis, mode, n_inputs, a_is_int):
    n_draws = math.prod(shape)
    if p is None:
        if replace:
            ind = _randint(key, 0, n_inputs, shape, dtypes.default_int_dtype())
            result = ind if a_is_int else jnp.take(arr, ind, axis)
        else:
            slices = (slice(None),) * axis + (slice(n_draws),)
            source = jnp.arange(n_inputs) if a_is_int else arr
            result = _permutation(key, source, axis, False)[slices]
    else:
        if replace:
            p_cuml = jnp.cumsum(p)
            r = p_cuml[-1] * (1 - _uniform(key, 0.0, 1.0, shape, p_cuml.dtype))
            ind = jnp.searchsorted(p_cuml, r).astype(int)  # NaN-aware total order, as JAX
        else:
            # The Gumbel top-k trick.
            g = _gumbel(key, (n_inputs,), p.dtype, mode) + jnp.log(p)
            ind = sorting.top_k(g, k=n_draws)[1].astype(int)
        result = ind if a_is_int else jnp.take(arr, ind, axis)
    return result.reshape(shape if a_is_int else
                          arr.shape[0:axis] + tuple(shape) + arr.shape[axis + 1:])


_choice_jit = static_jit(_choice, 6)


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """Random samples from the elements of `a` along `axis` (or from ``arange(a)``).

    Parameters
    ----------
    key : a PRNG key.
    a : an array, or an int n standing for ``arange(n)``.
    shape : the shape of the draw (a sequence).
    replace : whether to sample with replacement.
    p : optional probabilities of the entries of `a` along `axis`.
    axis : the axis of `a` to sample along.
    mode : the Gumbel mode for sampling without replacement with `p` ("low" or "high").
    """
    key, _ = check_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError(f"shape argument of jax.random.choice must be a sequence, got {shape}")
    shape = canonical_shape(shape)
    util.check_arraylike("choice", a)
    arr = util.as_array(a)
    if arr.ndim == 0:
        n_inputs = int(core.concrete_or_error(a, "The error occurred in jax.random.choice()"))
    else:
        axis = util.canonicalize_axis(axis, arr.ndim)
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population (size "
                         f"{n_inputs}) when 'replace=False'")
    if p is not None:
        util.check_arraylike("choice", p)
        (p,) = util.promote_dtypes_inexact(p)
        if p.shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. "
                             f"p has shape {p.shape} and a.shape[axis] is {n_inputs}.")
    a_is_int = arr.ndim == 0
    # Only the Gumbel top-k draw reads `mode`; JAX checks it there alone.
    mode = gumbel_mode(mode) if p is not None and not replace else "low"
    return _choice_jit(key, None if a_is_int else arr, p, shape, bool(replace),
                       0 if a_is_int else axis, mode, n_inputs, a_is_int)


# ---------------------------------------------------------------------------------------------
# categorical

def _categorical(key, logits, shape, batch_shape, axis, replace, mode):
    ndim = logits.ndim
    shape_prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        if axis >= 0:
            axis -= ndim
        logits_shape = list(shape[len(shape) - len(batch_shape):])
        logits_shape.insert(axis % ndim, logits.shape[axis])
        noise = _gumbel(key, (*shape_prefix, *logits_shape), logits.dtype, mode)
        return jnp.argmax(noise + structural.expand_dims(logits, tuple(range(len(shape_prefix)))),
                          axis=axis)
    logits = logits + _gumbel(key, logits.shape, logits.dtype, mode)
    k = math.prod(shape_prefix)
    if k > logits.shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number of "
                         f"categories ({logits.shape[axis]}).")
    _, indices = sorting.top_k(jnp.moveaxis(logits, axis, -1), k)
    dimensions = (indices.ndim - 1, *range(indices.ndim - 1))
    return lax.reshape(indices, shape, dimensions)


_categorical_jit = static_jit(_categorical, 5)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None, *,
                out_sharding=None):
    """Samples of category indices with unnormalized log-probabilities `logits` along `axis`
    (the Gumbel-max trick; without replacement, Gumbel top-k).

    `shape` defaults to the batch shape (the shape of `logits` without `axis`); a longer
    shape draws several samples per batch element.
    """
    key, _ = check_key("categorical", key)
    check_out_sharding(out_sharding)
    util.check_arraylike("categorical", logits)
    logits = util.as_array(logits)
    batch_shape = tuple(int(d) for d in np.delete(logits.shape, axis))
    if shape is None:
        shape = batch_shape
    else:
        shape = canonical_shape(shape)
        check_shape("categorical", shape, batch_shape)
    dtype = logits.dtype
    if not dtypes.is_float(dtype):
        raise ValueError(f"dtype argument to `gumbel` must be a float dtype, got {dtype}")
    return _categorical_jit(key, logits, shape, batch_shape, operator.index(axis),
                            bool(replace), gumbel_mode(mode))


# ---------------------------------------------------------------------------------------------
# geometric

def _geometric(key, p, shape, dtype):
    util.check_arraylike("geometric", p)
    (p,) = util.promote_dtypes_inexact(p)
    u = _uniform(key, 0.0, 1.0, shape, p.dtype)
    u = jnp.where(u == 0, 1, u)
    log_one_minus_p = util.broadcast_to(lax.log1p(-p), shape)
    g = lax.floor(lax.div(lax.log(u), log_one_minus_p)) + 1
    return g.astype(dtype)


_geometric_jit = static_jit(_geometric, 2)


def geometric(key, p, shape=None, dtype=None, *, out_sharding=None):
    """Geometric samples: the number of Bernoulli(p) trials up to the first success (>= 1)."""
    key, _ = check_key("geometric", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, int)
    if not dtypes.is_integer(dtype):
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    shape = shape_from_params("geometric", shape, p)
    return _geometric_jit(key, p, shape, dtype)
