"""`fluxion.scipy.signal`: convolution, correlation and detrending.

Every mode is a window of the full linear convolution: with full length s1 + s2 - 1 and output
length `out` (full; in1's for "same"; |s1 - s2| + 1 for "valid"), the output starts at
(full - out) // 2 along each axis. The direct method computes exactly that window with one
`lax.conv_general_dilated` whose padding is chosen for it; the FFT method slices it.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src.numpy import fft as jnp_fft
from fluxion._src.numpy.util import (canonicalize_axis, check_arraylike, ensure_arraylike,
                                     promote_dtypes_inexact)

_MODES = ("full", "same", "valid")


def _output_window(shape1, shape2, mode: str):
    """(start, size) per axis of the requested window of the full convolution."""
    if mode not in _MODES:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    if mode == "valid":
        bigger = all(a >= b for a, b in zip(shape1, shape2))
        smaller = all(a <= b for a, b in zip(shape1, shape2))
        if not (bigger or smaller):
            raise ValueError("For 'valid' mode, one input must be at least as large as the "
                             "other in every dimension.")
    window = []
    for a, b in zip(shape1, shape2):
        full = a + b - 1
        size = {"full": full, "same": a, "valid": abs(a - b) + 1}[mode]
        window.append(((full - size) // 2, size))
    return window


def _direct_convolve(in1, in2, mode: str, precision):
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 must have the same number of dimensions")
    if in1.size == 0 or in2.size == 0:
        raise ValueError("zero-size arrays not supported in convolutions, got shapes "
                         f"{in1.shape} and {in2.shape}.")
    in1, in2 = promote_dtypes_inexact(in1, in2)
    window = _output_window(in1.shape, in2.shape, mode)
    # lax's convolution is a correlation: correlating with the reversed kernel, padded so the
    # output index o is full-convolution index o + start.
    padding = []
    for (start, size), s1, s2 in zip(window, in1.shape, in2.shape):
        low = s2 - 1 - start
        padding.append((low, size - s1 + s2 - 1 - low))
    out = lax.conv_general_dilated(in1[None, None], jnp.flip(in2)[None, None],
                                   (1,) * in1.ndim, padding, precision=precision)
    return out[0, 0]


def convolve(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """The N-dimensional convolution of two arrays (`scipy.signal.convolve`).

    Parameters
    ----------
    in1, in2 : array_like
        Arrays of the same number of dimensions.
    mode : {"full", "same", "valid"}
    method : {"auto", "direct", "fft"}
        "auto" is "direct" (a `lax.conv_general_dilated`), as in JAX.
    precision : lax.Precision, optional
        The precision of the direct convolution.
    """
    check_arraylike("convolve", in1, in2)
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method not in ("direct", "auto"):
        raise ValueError(f"Got method={method!r}; expected 'auto', 'fft', or 'direct'.")
    in1, in2 = ensure_arraylike("convolve", in1, in2)
    return _direct_convolve(in1, in2, mode, precision)


def correlate(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """The N-dimensional cross-correlation of two arrays (`scipy.signal.correlate`)."""
    check_arraylike("correlate", in1, in2)
    in1, in2 = ensure_arraylike("correlate", in1, in2)
    return convolve(in1, jnp.flip(jnp.conj(in2)), mode, method=method, precision=precision)


def _check_2d(fname: str, in1, in2, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{fname}() only supports boundary='fill', fillvalue=0")
    check_arraylike(fname, in1, in2)
    in1, in2 = ensure_arraylike(fname, in1, in2)
    if in1.ndim != 2 or in2.ndim != 2:
        raise ValueError(f"{fname}() only supports 2-dimensional inputs.")
    return in1, in2


def convolve2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0,
               precision=None):
    """The 2-D convolution of two arrays (`scipy.signal.convolve2d`); only zero fill."""
    in1, in2 = _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _direct_convolve(in1, in2, mode, precision)


def correlate2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0,
                precision=None):
    """The 2-D cross-correlation of two arrays (`scipy.signal.correlate2d`); only zero fill."""
    in1, in2 = _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    # SciPy's correlate2d is not a window of correlate's full output in two cases: "same" is
    # centred on in1 reversed (one sample later for an even kernel), and "valid" with the
    # larger second input is the convolution of in2 reversed with conj(in1).
    if mode == "same":
        return jnp.flip(_direct_convolve(jnp.flip(in1), jnp.conj(in2), mode, precision))
    if (mode == "valid" and in1.shape != in2.shape
            and all(a <= b for a, b in zip(in1.shape, in2.shape))):
        return _direct_convolve(jnp.flip(in2), jnp.conj(in1), mode, precision)
    return _direct_convolve(in1, jnp.flip(jnp.conj(in2)), mode, precision)


def fftconvolve(in1, in2, mode: str = "full", axes: Sequence[int] | None = None):
    """Convolution by the FFT (`scipy.signal.fftconvolve`).

    `axes` are the axes convolved over (default all); along the others the inputs must have the
    same length and are treated as a batch.
    """
    check_arraylike("fftconvolve", in1, in2)
    in1, in2 = promote_dtypes_inexact(in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    if mode not in _MODES:
        raise ValueError("mode must be one of ['same', 'full', 'valid']")
    if axes is None:
        axes = tuple(range(in1.ndim))
    else:
        axes = (axes,) if isinstance(axes, int) else tuple(axes)
        axes = tuple(canonicalize_axis(operator.index(a), in1.ndim) for a in axes)
        if any(in1.shape[i] != in2.shape[i] for i in range(in1.ndim) if i not in axes):
            raise ValueError(f"mapped axes must have same shape; got in1.shape={in1.shape} "
                             f"in2.shape={in2.shape} axes={axes}")
    if not axes:
        return in1 * in2
    s1 = [in1.shape[a] for a in axes]
    s2 = [in2.shape[a] for a in axes]
    window = _output_window(s1, s2, mode)
    full = [a + b - 1 for a, b in zip(s1, s2)]
    if jnp.iscomplexobj(in1):
        conv = jnp_fft.ifftn(jnp_fft.fftn(in1, full, axes) * jnp_fft.fftn(in2, full, axes),
                             full, axes)
    else:
        conv = jnp_fft.irfftn(jnp_fft.rfftn(in1, full, axes) * jnp_fft.rfftn(in2, full, axes),
                              full, axes)
    for axis, (start, size) in zip(axes, window):
        conv = lax.slice_in_dim(conv, start, start + size, 1, axis)
    return conv


def detrend(data, axis: int = -1, type: str = "linear", bp=0, overwrite_data=None):
    """Remove the mean (type "constant") or a least-squares line from each piece between
    breakpoints `bp` (type "linear") along `axis` (`scipy.signal.detrend`)."""
    if overwrite_data is not None:
        raise NotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    check_arraylike("detrend", data)
    (data,) = promote_dtypes_inexact(data)
    if type == "constant":
        return data - jnp.mean(data, axis, keepdims=True)
    axis = canonicalize_axis(axis, data.ndim)
    n = data.shape[axis]
    breaks = np.unique(np.concatenate([[0], np.atleast_1d(np.asarray(bp, dtype=int)), [n]]))
    if breaks[0] < 0 or breaks[-1] > n:
        raise ValueError("Breakpoints must be non-negative and less than length of data along "
                         "given axis.")
    pieces = []
    for lo, hi in zip(breaks[:-1], breaks[1:]):
        y = lax.slice_in_dim(data, int(lo), int(hi), 1, axis)
        pieces.append(_remove_line(y, axis))
    return lax.concatenate(pieces, axis) if len(pieces) > 1 else pieces[0]


def _remove_line(y, axis: int):
    """y minus its least-squares line in the sample index (closed form; one point: zero)."""
    n = y.shape[axis]
    if n == 1:
        return jnp.zeros_like(y)
    t = np.arange(n, dtype=np.float64)
    t = t - t.mean()
    shape = [1] * y.ndim
    shape[axis] = n
    t_arr = jnp.asarray(t.reshape(shape), jnp.real(y).dtype)
    centred = y - jnp.mean(y, axis, keepdims=True)
    slope = jnp.sum(t_arr * centred, axis, keepdims=True) / float(np.sum(t * t))
    return centred - slope * t_arr
