"""Bit-level reinterpretation of arrays: the `view` and `byteswap` Array methods."""
from __future__ import annotations

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.lax import lax, structural
from fluxion._src.numpy import manipulation, ufuncs


def view(self, dtype=None, type=None):
    """The array's bits read as `dtype`.

    Equal item sizes keep the shape; otherwise the last axis is rescaled by the ratio of the
    item sizes (booleans count as one byte; a 0-d array needs equal sizes).
    """
    if type is not None:
        raise NotImplementedError("`type` argument of array.view() is not supported.")
    if dtype is None:
        return self
    dtype = dtypes.canonicalize_dtype(dtypes.dtype(dtype))
    aval = core.get_aval(self)
    shape, src = aval.shape, np.dtype(aval.dtype)
    bits_in, bits_out = dtypes.itemsize_bits(src), dtypes.itemsize_bits(dtype)
    if not shape:
        if bits_in != bits_out:
            raise ValueError("view() of a 0d array is only supported if the itemsize is "
                             "unchanged.")
        return manipulation.squeeze(view(manipulation.expand_dims(self, 0), dtype), 0)
    if (shape[-1] * bits_in) % bits_out:
        raise ValueError("When changing to a larger dtype, its size must be a divisor of the "
                         "total size in bytes of the last axis of the array.")
    if src == dtype:
        return self
    if src == np.bool_:
        return view(lax.convert_element_type(self, np.uint8), dtype)
    if dtypes.issubdtype(src, np.complexfloating):
        # Interleave real and imaginary parts, as they lie in memory.
        parts = manipulation.stack([ufuncs.real(self), ufuncs.imag(self)], axis=-1)
        return view(manipulation.reshape(parts, shape[:-1] + (2 * shape[-1],)), dtype)
    if dtype == np.bool_:
        return lax.convert_element_type(view(self, np.uint8), np.bool_)
    if dtypes.issubdtype(dtype, np.complexfloating):
        real = view(self, np.finfo(dtype).dtype)
        return lax.complex(real[..., 0::2], real[..., 1::2])
    if bits_in < bits_out:
        factor = bits_out // bits_in
        grouped = manipulation.reshape(self, shape[:-1] + (shape[-1] // factor, factor))
        return lax.bitcast_convert_type(grouped, dtype)
    out = lax.bitcast_convert_type(self, dtype)
    if bits_in > bits_out:
        out_shape = core.get_aval(out).shape
        out = manipulation.reshape(out, out_shape[:-2] + (out_shape[-2] * out_shape[-1],))
    return out


def byteswap(self, inplace: bool = False):
    """The array with the bytes of each element reversed (little- to big-endian)."""
    if inplace:
        raise ValueError("Array.byteswap() does not support inplace=True: arrays are "
                         "immutable.")
    aval = core.get_aval(self)
    if dtypes.issubdtype(aval.dtype, np.complexfloating):
        return lax.complex(byteswap(ufuncs.real(self)), byteswap(ufuncs.imag(self)))
    if np.dtype(aval.dtype).itemsize == 1:
        return manipulation.copy(self)
    as_bytes = lax.bitcast_convert_type(self, np.uint8)
    return lax.bitcast_convert_type(structural.rev(as_bytes, (len(aval.shape),)), aval.dtype)

