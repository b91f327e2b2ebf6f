"""Operations on raw threefry2x32 keys: uint32 arrays whose last dimension holds the 2 words.

These are JAX's `threefry_prng_impl` with `jax_threefry_partitionable=True` (the default since
JAX 0.5): `split` and `random_bits` encrypt the 64-bit row-major index of each output element,
so every element depends on its position only, not on the size of the whole draw. With the flag
off they follow JAX's original algorithm (`_original` below): a count 0..n-1 is split into two
halves that are encrypted as word pairs, so values depend on the size of the draw.
"""
from __future__ import annotations

import numpy as np

from fluxion._src.export import shape_poly
from fluxion._src import core, dtypes
from fluxion._src.config import config
from fluxion._src.lax import lax, structural
from fluxion._src.random.threefry import iota_2x32_shape, threefry2x32

KEY_SHAPE = (2,)
UINT_DTYPES = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


def _u32(value):
    return lax._convert_element_type(np.uint32(value), dtypes.uint32)


def key_words(key):
    """The two uint32 words of a single raw key (shape (2,))."""
    return structural.squeeze(structural.slice(key, (0,), (1,)), (0,)), \
        structural.squeeze(structural.slice(key, (1,), (2,)), (0,))


def seed(seed_value):
    """A raw key from an integer scalar: its high and low 32 bits (high bits 0 below 64 bits)."""
    aval = core.get_aval(seed_value)
    if aval.shape:
        raise TypeError(f"PRNG key seed must be a scalar; got {seed_value!r}.")
    if not dtypes.is_integer(aval.dtype):
        raise TypeError(f"PRNG key seed must be an integer; got {seed_value!r}")
    if config.random_seed_offset:  # `jax_random_seed_offset`: added to every seed
        seed_value = lax.add(seed_value, lax._convert_element_type(config.random_seed_offset,
                                                                    aval.dtype))
    # A logical shift by the full width of a 32-bit (or narrower) type gives 0, as in JAX.
    shift = lax._convert_element_type(32, aval.dtype)
    high = lax.shift_right_logical(seed_value, shift)
    words = [lax._convert_element_type(w, dtypes.uint32) for w in (high, seed_value)]
    return structural.concatenate([structural.expand_dims(w, (0,)) for w in words], 0)


def split(key, shape: tuple):
    """`key` split into an array of keys of `shape` (a raw key array of shape `shape + (2,)`)."""
    if not config.threefry_partitionable:
        return lax.reshape(_threefry_counts(key, 2 * _size(shape)), (*shape, 2))
    k1, k2 = key_words(key)
    counts_hi, counts_lo = iota_2x32_shape(shape)
    bits1, bits2 = threefry2x32(k1, k2, counts_hi, counts_lo)
    ndim = len(shape)
    return structural.concatenate([structural.expand_dims(bits1, (ndim,)),
                                   structural.expand_dims(bits2, (ndim,))], ndim)


def fold_in(key, data):
    """A new key from `key` and uint32 scalar `data`: the cipher of the counter pair (0, data)."""
    k1, k2 = key_words(key)
    out1, out2 = threefry2x32(k1, k2, _u32(0), data)
    return structural.concatenate([structural.expand_dims(out1, (0,)),
                                   structural.expand_dims(out2, (0,))], 0)


def random_bits(key, bit_width: int, shape: tuple):
    """Uniform random unsigned integers of `bit_width` bits and `shape` from a single raw key."""
    if bit_width not in UINT_DTYPES:
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    size = shape_poly.shape_size(shape)
    if shape_poly.known_true(lambda: size > 2 ** 64):
        raise NotImplementedError("random bits array of size exceeding 2 ** 64")
    if not config.threefry_partitionable:
        return _random_bits_original(key, bit_width, shape)
    k1, k2 = key_words(key)
    counts_hi, counts_lo = iota_2x32_shape(shape)
    bits1, bits2 = threefry2x32(k1, k2, counts_hi, counts_lo)
    dtype = UINT_DTYPES[bit_width]
    if bit_width == 64:
        high = lax._convert_element_type(bits1, dtype)
        low = lax._convert_element_type(bits2, dtype)
        return lax.bitwise_or(lax.shift_left(high, lax._convert_element_type(32, dtype)), low)
    bits = lax.bitwise_xor(bits1, bits2)
    return bits if bit_width == 32 else lax._convert_element_type(bits, dtype)


# ---------------------------------------------------------------------------------------------
# The original (non-partitionable) algorithm, for `jax_threefry_partitionable=False`.

def _size(shape: tuple) -> int:
    size = 1
    for d in shape:
        size *= int(d)
    return size


def _threefry_counts(key, n: int):
    """The cipher of the counts 0..n-1 (uint32[n]): their first and second halves (padded by
    a zero when n is odd) are encrypted as word pairs and joined again."""
    k1, k2 = key_words(key)
    counts = structural.iota(dtypes.uint32, n)
    odd = n % 2
    if odd:
        counts = structural.concatenate([counts, lax.reshape(_u32(0), (1,))], 0)
    half = (n + odd) // 2
    x1 = structural.slice(counts, (0,), (half,))
    x2 = structural.slice(counts, (half,), (2 * half,))
    y1, y2 = threefry2x32(k1, k2, x1, x2)
    out = structural.concatenate([y1, y2], 0)
    return structural.slice(out, (0,), (n,)) if odd else out


def _random_bits_original(key, bit_width: int, shape: tuple):
    size = _size(shape)
    max_count = -(-bit_width * size // 32)
    if max_count >= np.iinfo(np.uint32).max:
        raise NotImplementedError("random bits of more than 2 ** 32 words with "
                                  "jax_threefry_partitionable=False")
    bits = _threefry_counts(key, max_count)
    dtype = UINT_DTYPES[bit_width]
    if bit_width == 64:
        half = max_count // 2
        high = lax._convert_element_type(structural.slice(bits, (0,), (half,)), dtype)
        low = lax._convert_element_type(structural.slice(bits, (half,), (max_count,)), dtype)
        bits = lax.bitwise_or(lax.shift_left(high, lax._convert_element_type(32, dtype)), low)
    elif bit_width in (8, 16):
        # The uint32 words viewed as narrower integers, least significant part first.
        per_word = 32 // bit_width
        shifts = lax.mul(_u32(bit_width), structural.broadcasted_iota(dtypes.uint32,
                                                                       (1, per_word), 1))
        words = lax.broadcast_in_dim(bits, (max_count, per_word), (0,))
        parts = lax.bitwise_and(lax.shift_right_logical(words, lax.broadcast_in_dim(
            shifts, (max_count, per_word), (0, 1))), _u32(np.iinfo(dtype).max))
        parts = lax.reshape(parts, (max_count * per_word,))
        bits = structural.slice(lax._convert_element_type(parts, dtype), (0,), (size,))
    return lax.reshape(bits, shape)
