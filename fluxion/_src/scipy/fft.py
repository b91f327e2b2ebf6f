"""`fluxion.scipy.fft`: the type-2 discrete cosine transform and its inverse, on the FFT.

DCT-II of length N by one complex FFT of the same length (Makhoul's reordering): put the even
samples first and the odd ones reversed after them, take the FFT V, then
X_k = 2 Re(exp(-i pi k / 2N) V_k). The inverse undoes each step. Only type 2 exists, as in JAX.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src.numpy import fft as jnp_fft
from fluxion._src.numpy.util import (canonicalize_axis, ensure_arraylike,
                                     promote_dtypes_inexact)

_NORMS = (None, "backward", "ortho")


def _check(fname: str, type: int, norm) -> None:
    if type != 2:
        raise NotImplementedError("Only DCT type 2 is implemented.")
    if norm not in _NORMS:
        raise ValueError(f"jax.scipy.fft.{fname}: norm={norm!r} is not implemented")


def _along(values, axis: int, ndim: int):
    """A 1-d array shaped to broadcast along `axis` of an ndim array."""
    return lax.expand_dims(values, [a for a in range(ndim) if a != axis])


def _resize(x, n, axis: int):
    """Zero-pad or truncate `x` to length n along `axis` (n None: unchanged)."""
    if n is None:
        return x
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"invalid number of data points ({n}) specified")
    config = [(0, n - x.shape[axis] if a == axis else 0, 0) for a in range(x.ndim)]
    return lax.pad(x, jnp.zeros((), x.dtype), config)


def _ortho_scale(n: int, dtype):
    """The factors that make the backward DCT-II orthonormal: 1/sqrt(4N) first, 1/sqrt(2N)."""
    scale = np.full(n, 1.0 / math.sqrt(2.0 * n))
    scale[0] = 1.0 / math.sqrt(4.0 * n)
    return jnp.asarray(scale, dtype)


def _twiddle(n: int, axis: int, ndim: int, dtype, sign: float):
    """exp(sign * i pi k / 2N) for k = 0..N-1, shaped along `axis`."""
    k = np.arange(n)
    values = np.exp(sign * 0.5j * np.pi * k / n)
    return _along(jnp.asarray(values, dtype), axis, ndim)


def _split_complex(fn, x, **kwargs):
    return lax.complex(fn(jnp.real(x), **kwargs), fn(jnp.imag(x), **kwargs))


def _dct_1d(x, axis: int, norm):
    n = x.shape[axis]
    evens = lax.slice_in_dim(x, 0, None, 2, axis)
    odds = lax.rev(lax.slice_in_dim(x, 1, None, 2, axis), (axis,))
    spectrum = jnp_fft.fft(lax.concatenate([evens, odds], axis), axis=axis)
    out = 2 * jnp.real(spectrum * _twiddle(n, axis, x.ndim, spectrum.dtype, -1.0))
    if norm == "ortho":
        out = out * _along(_ortho_scale(n, out.dtype), axis, x.ndim)
    return out


def _idct_1d(x, axis: int, norm):
    n = x.shape[axis]
    if norm == "ortho":
        x = x / _along(_ortho_scale(n, x.dtype), axis, x.ndim)
    # Z_k = (X_k - i X_{N-k}) / 2 with X_N = 0, and V_k = Z_k exp(i pi k / 2N).
    mirrored = lax.pad(lax.rev(lax.slice_in_dim(x, 1, None, 1, axis), (axis,)),
                       jnp.zeros((), x.dtype),
                       [(1 if a == axis else 0, 0, 0) for a in range(x.ndim)])
    z = lax.complex(x, -mirrored) * 0.5
    v = jnp.real(jnp_fft.ifft(z * _twiddle(n, axis, x.ndim, z.dtype, 1.0), axis=axis))
    # Undo the reordering: x[2m] = v[m], x[2m + 1] = v[N - 1 - m].
    half = (n + 1) // 2
    evens = lax.slice_in_dim(v, 0, half, 1, axis)
    odds = lax.rev(lax.slice_in_dim(v, half, None, 1, axis), (axis,))
    if n % 2:
        odds = lax.pad(odds, jnp.zeros((), v.dtype),
                       [(0, 1 if a == axis else 0, 0) for a in range(v.ndim)])
    stacked = jnp.stack([evens, odds], axis=axis + 1)
    shape = list(v.shape[:axis]) + [2 * half] + list(v.shape[axis + 1:])
    return lax.slice_in_dim(jnp.reshape(stacked, shape), 0, n, 1, axis)


def _prepare(fname: str, x, type: int, norm):
    x = ensure_arraylike(fname, x)
    _check(fname, type, norm)
    (x,) = promote_dtypes_inexact(x)
    if x.dtype.itemsize < 4:
        x = x.astype(np.float32)  # the FFT has no half-precision types (JAX gives float32 too)
    return x


def dct(x, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The discrete cosine transform of type 2 along one axis (`scipy.fft.dct`).

    Parameters
    ----------
    x : array_like
    type : int
        Only 2 is supported.
    n : int, optional
        The transform length: `x` is zero-padded or truncated to it.
    axis : int
    norm : {None, "backward", "ortho"}
    """
    x = _prepare("dct", x, type, norm)
    if jnp.iscomplexobj(x):
        return _split_complex(dct, x, type=type, n=n, axis=axis, norm=norm)
    axis = canonicalize_axis(axis, x.ndim)
    return _dct_1d(_resize(x, n, axis), axis, norm)


def idct(x, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of `dct` (type 2) along one axis (`scipy.fft.idct`)."""
    x = _prepare("idct", x, type, norm)
    if jnp.iscomplexobj(x):
        return _split_complex(idct, x, type=type, n=n, axis=axis, norm=norm)
    axis = canonicalize_axis(axis, x.ndim)
    return _idct_1d(_resize(x, n, axis), axis, norm)


def _shape_and_axes(x, s, axes):
    if s is not None:
        try:
            s = [operator.index(s)]
        except TypeError:
            s = [operator.index(v) for v in s]
        if len(s) > x.ndim:
            raise ValueError(f"s must have at most x.ndim ({x.ndim}) elements, got {len(s)}")
    if axes is None:
        axes = tuple(range(x.ndim - len(s), x.ndim)) if s is not None else tuple(range(x.ndim))
    else:
        axes = tuple(canonicalize_axis(a, x.ndim) for a in
                     ([axes] if isinstance(axes, int) else axes))
        if len(set(axes)) != len(axes):
            raise ValueError("repeated axes in `axes`")
    if s is not None and len(s) != len(axes):
        raise ValueError("when given, axes and shape arguments have to be of the same length")
    return (s if s is not None else [None] * len(axes)), axes


def dctn(x, type: int = 2, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None):
    """The type-2 DCT over several axes (`scipy.fft.dctn`): `dct` along each axis in turn.

    `s` gives the length along each transformed axis; without `axes` the last len(s) axes (or
    all axes) are transformed.
    """
    x = _prepare("dctn", x, type, norm)
    if jnp.iscomplexobj(x):
        return _split_complex(dctn, x, type=type, s=s, axes=axes, norm=norm)
    sizes, axes = _shape_and_axes(x, s, axes)
    for size, axis in zip(sizes, axes):
        x = _dct_1d(_resize(x, size, axis), axis, norm)
    return x


def idctn(x, type: int = 2, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None):
    """The inverse of `dctn` (`scipy.fft.idctn`)."""
    x = _prepare("idctn", x, type, norm)
    if jnp.iscomplexobj(x):
        return _split_complex(idctn, x, type=type, s=s, axes=axes, norm=norm)
    sizes, axes = _shape_and_axes(x, s, axes)
    for size, axis in zip(sizes, axes):
        x = _idct_1d(_resize(x, size, axis), axis, norm)
    return x
