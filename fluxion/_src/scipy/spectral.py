"""`fluxion.scipy.signal`'s windowed FFTs: stft, istft, csd and welch.

A signal is cut into segments of `nperseg` samples that start every `nperseg - noverlap`
samples; each segment is detrended, multiplied by the window and Fourier transformed.
Defaults follow JAX (which differs from SciPy in one: without `nperseg`, a named window spans
the whole signal).
"""
from __future__ import annotations

import operator
import warnings

import numpy as np

import fluxion.numpy as jnp
from fluxion._src import core, dtypes
from fluxion._src.numpy import fft as jnp_fft
from fluxion._src.numpy.util import (canonicalize_axis, check_arraylike, ensure_arraylike,
                                     promote_dtypes_inexact)
from fluxion._src.scipy.signal import detrend as _detrend


def _complex_dtype(dtype) -> np.dtype:
    """The complex type that holds values of `dtype` (JAX's to_complex_dtype)."""
    wide = np.dtype(dtype) in (np.float64, np.complex128)
    return dtypes.canonicalize_dtype(np.complex128 if wide else np.complex64)


def _static_int(value, what: str) -> int:
    return operator.index(core.concrete_or_error(value, what))


def _named_window(window, n: int) -> np.ndarray:
    if window == "hann":  # periodic Hann, sin^2 of n points over [0, pi)
        return np.ones(1) if n == 1 else np.sin(np.linspace(0, np.pi, n, endpoint=False)) ** 2
    try:
        from scipy.signal import get_window
    except ImportError as err:
        raise ImportError(f"scipy must be available to use window={window!r}") from err
    return get_window(window, n)


def _window(window, nperseg, length: int, dtype):
    """The window as an array of `dtype`, and the segment length it implies."""
    if isinstance(window, (str, tuple)):
        n = length if nperseg is None else nperseg
        if n > length:
            warnings.warn(f"nperseg={n} is greater than input_length={length}, using "
                          f"nperseg={length}")
            n = length
        return jnp.asarray(_named_window(window, n), dtype), n
    win = jnp.asarray(window, dtype)
    if win.ndim != 1:
        raise ValueError("window must be 1-D")
    if length < win.size:
        raise ValueError("window is longer than input signal")
    if nperseg is not None and nperseg != win.size:
        raise ValueError("value specified for nperseg is different from length of window")
    return win, win.size


def _odd_extension(x, n: int):
    if n > x.shape[-1] - 1:
        raise ValueError(f"The extension length n ({n}) is too big. It must not exceed "
                         f"x.shape[axis]-1, which is {x.shape[-1] - 1}.")
    left, right = x[..., :1], x[..., -1:]
    return jnp.concatenate([2 * left - jnp.flip(x[..., 1:n + 1], -1), x,
                            2 * right - jnp.flip(x[..., -n - 1:-1], -1)], axis=-1)


def _extend(x, boundary, n: int):
    """x extended by n samples at both ends of its last axis."""
    if boundary is None or n < 1:
        return x
    widths = [(0, 0)] * (x.ndim - 1) + [(n, n)]
    if boundary == "even":
        return jnp.pad(x, widths, "reflect")
    if boundary == "odd":
        return _odd_extension(x, n)
    if boundary == "constant":
        return jnp.pad(x, widths, "edge")
    return jnp.pad(x, widths)  # "zeros"


def _pad_to(x, length: int):
    extra = length - x.shape[-1]
    return x if extra <= 0 else jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, extra)])


def _segments(x, nperseg: int, step: int):
    """x[..., L] as x[..., nseg, nperseg]: the segments starting every `step` samples."""
    starts = np.arange(0, x.shape[-1] - nperseg + 1, step)
    return x[..., starts[:, None] + np.arange(nperseg)]


def _detrender(detrend):
    if isinstance(detrend, str):
        return lambda d: _detrend(d, axis=-1, type=detrend)
    if callable(detrend):
        return detrend
    if not detrend:
        return lambda d: d
    raise ValueError(f"Unsupported detrend type: {detrend}")


def _transform(x, win, detrend, nperseg, step, nfft, twosided):
    segments = _detrender(detrend)(_segments(x, nperseg, step)) * win
    if twosided:
        return jnp_fft.fft(segments, n=nfft)
    return jnp_fft.rfft(jnp.real(segments), n=nfft)


_BOUNDARIES = ("even", "odd", "constant", "zeros", None)


def _empty_pair_shape(x_shape, y_shape, axis):
    """The broadcast outer shape of x and y with the shorter length at `axis`."""
    outer = np.broadcast_shapes(x_shape[:axis] + x_shape[axis + 1:],
                                y_shape[:axis] + y_shape[axis + 1:])
    return outer[:axis] + (min(x_shape[axis], y_shape[axis]),) + outer[axis:]


def _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling,
              axis, mode, boundary=None, padded=False):
    """(frequencies, segment times, per-segment spectra with segments on the last axis)."""
    if boundary not in _BOUNDARIES:
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: "
                         f"{list(_BOUNDARIES)}")
    if y is None:
        check_arraylike("spectral_helper", x)
        (x,) = promote_dtypes_inexact(x)
    else:
        check_arraylike("spectral_helper", x, y)
        x, y = promote_dtypes_inexact(x, y)
        if x.ndim != y.ndim:
            raise ValueError(f"two-arguments must have the same rank ({x.ndim} vs {y.ndim}).")
    axis = canonicalize_axis(_static_int(axis, "axis of windowed-FFT"), x.ndim)
    result_dtype = _complex_dtype(x.dtype)
    real_dtype = np.finfo(result_dtype).dtype
    if x.size == 0 or (y is not None and y.size == 0):  # empty in, empty out (as SciPy)
        shape = x.shape if y is None else _empty_pair_shape(x.shape, y.shape, axis)
        spectrum_dtype = result_dtype if (mode == "stft" or y is not None) else real_dtype
        return (jnp.zeros(shape, real_dtype), jnp.zeros(shape, real_dtype),
                jnp.zeros(shape, spectrum_dtype))
    if nperseg is not None:
        nperseg = _static_int(nperseg, "nperseg of windowed-FFT")
        if nperseg < 1:
            raise ValueError("nperseg must be a positive integer")
    win, nperseg = _window(window, nperseg, x.shape[axis], x.dtype)
    noverlap = nperseg // 2 if noverlap is None else _static_int(noverlap, "noverlap")
    nfft = nperseg if nfft is None else _static_int(nfft, "nfft of windowed-FFT")
    if nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    step = nperseg - noverlap

    x = jnp.moveaxis(x, axis, -1)
    if y is not None:
        y = jnp.moveaxis(y, axis, -1)
        length = max(x.shape[-1], y.shape[-1])
        x, y = _pad_to(x, length), _pad_to(y, length)
    x = _extend(x, boundary, nperseg // 2)
    y = None if y is None else _extend(y, boundary, nperseg // 2)
    if padded:
        extra = -(x.shape[-1] - nperseg) % step % nperseg
        x = _pad_to(x, x.shape[-1] + extra)
        y = None if y is None else _pad_to(y, y.shape[-1] + extra)

    if scaling == "density":
        scale = 1.0 / (fs * jnp.sum(win * win))
    elif scaling == "spectrum":
        scale = 1.0 / jnp.sum(win) ** 2
    else:
        raise ValueError(f"Unknown scaling: {scaling}")
    if mode == "stft":
        scale = jnp.sqrt(scale)
    twosided = not return_onesided
    if return_onesided and (jnp.iscomplexobj(x) or (y is not None and jnp.iscomplexobj(y))):
        twosided = True
        warnings.warn("Input data is complex, switching to return_onesided=False")
    if twosided:
        freqs = jnp_fft.fftfreq(nfft, 1 / fs, dtype=real_dtype)
    else:
        freqs = jnp_fft.rfftfreq(nfft, 1 / fs, dtype=real_dtype)

    result = _transform(x, win, detrend, nperseg, step, nfft, twosided)
    if y is not None:
        result = jnp.conj(result) * _transform(y, win, detrend, nperseg, step, nfft, twosided)
    elif mode == "psd":
        result = jnp.conj(result) * result
    result = result * scale
    if not twosided and mode == "psd":  # fold the negative frequencies in
        end = None if nfft % 2 else -1
        result = result.at[..., 1:end].multiply(2)
    time = jnp.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, step, dtype=real_dtype) / fs
    if boundary is not None:
        time = time - nperseg / 2 / fs
    result = result.astype(result_dtype)
    if y is None and mode != "stft":
        result = jnp.real(result)
    # (..., segments, frequencies) -> frequencies at `axis`, segments last.
    return freqs, time, jnp.moveaxis(result, -1, axis)


def stft(x, fs=1.0, window="hann", nperseg: int = 256, noverlap: int | None = None,
         nfft: int | None = None, detrend=False, return_onesided: bool = True,
         boundary: str | None = "zeros", padded: bool = True, axis: int = -1):
    """The short-time Fourier transform (`scipy.signal.stft`).

    Returns
    -------
    f : frequencies, t : segment times, Zxx : the transform, frequencies along `axis` and
    segments along the last axis.
    """
    return _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     "spectrum", axis, "stft", boundary, padded)


def csd(x, y, fs=1.0, window="hann", nperseg: int | None = None, noverlap: int | None = None,
        nfft: int | None = None, detrend="constant", return_onesided: bool = True,
        scaling: str = "density", axis: int = -1, average: str = "mean"):
    """The cross power spectral density by Welch's method (`scipy.signal.csd`); y None gives
    the power spectral density of x. `average` is "mean" or "median" over segments."""
    freqs, _, pxy = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend,
                              return_onesided, scaling, axis, "psd")
    if y is not None:
        pxy = pxy + 0j
    if pxy.ndim >= 2 and pxy.size > 0:
        if pxy.shape[-1] > 1:
            if average == "median":
                n = pxy.shape[-1]
                bias = 1 + sum(1.0 / (k + 1) - 1.0 / k for k in range(2, n, 2))
                if jnp.iscomplexobj(pxy):
                    pxy = (jnp.median(jnp.real(pxy), axis=-1)
                           + 1j * jnp.median(jnp.imag(pxy), axis=-1))
                else:
                    pxy = jnp.median(pxy, axis=-1)
                pxy = pxy / jnp.asarray(bias, pxy.dtype)
            elif average == "mean":
                pxy = jnp.mean(pxy, axis=-1)
            else:
                raise ValueError(f'average must be "median" or "mean", got {average}')
        else:
            pxy = jnp.reshape(pxy, pxy.shape[:-1])
    return freqs, pxy


def welch(x, fs=1.0, window="hann", nperseg: int | None = None, noverlap: int | None = None,
          nfft: int | None = None, detrend="constant", return_onesided: bool = True,
          scaling: str = "density", axis: int = -1, average: str = "mean"):
    """The power spectral density by Welch's method (`scipy.signal.welch`)."""
    freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap,
                     nfft=nfft, detrend=detrend, return_onesided=return_onesided,
                     scaling=scaling, axis=axis, average=average)
    return freqs, jnp.real(pxx)


def _overlap_add(frames, step: int):
    """frames[..., nseg, nperseg] summed into one signal, segment j starting at j * step."""
    nseg, nperseg = frames.shape[-2:]
    out = jnp.zeros(frames.shape[:-2] + (step * (nseg - 1) + nperseg,), frames.dtype)
    index = np.arange(nseg)[:, None] * step + np.arange(nperseg)
    return out.at[..., index].add(frames)


def istft(Zxx, fs=1.0, window="hann", nperseg: int | None = None, noverlap: int | None = None,
          nfft: int | None = None, input_onesided: bool = True, boundary: bool = True,
          time_axis: int = -1, freq_axis: int = -2):
    """The inverse short-time Fourier transform (`scipy.signal.istft`), by weighted
    overlap-add. Returns (times, signal)."""
    Zxx = ensure_arraylike("istft", Zxx)
    if Zxx.ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    freq_axis = canonicalize_axis(freq_axis, Zxx.ndim)
    time_axis = canonicalize_axis(time_axis, Zxx.ndim)
    if freq_axis == time_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    Zxx = Zxx.astype(_complex_dtype(Zxx.dtype))
    n_default = 2 * (Zxx.shape[freq_axis] - 1) if input_onesided else Zxx.shape[freq_axis]
    nperseg = _static_int(n_default if nperseg is None else nperseg,
                          "nperseg: segment length of STFT")
    if nperseg < 1:
        raise ValueError("nperseg must be a positive integer")
    if nfft is None:
        nfft = n_default + 1 if input_onesided and nperseg == n_default + 1 else n_default
    else:
        nfft = _static_int(nfft, "nfft of STFT")
    if nfft < nperseg:
        raise ValueError(f"FFT length ({nfft}) must be longer than nperseg ({nperseg}).")
    noverlap = nperseg // 2 if noverlap is None else _static_int(noverlap, "noverlap of STFT")
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    step = nperseg - noverlap

    others = [a for a in range(Zxx.ndim) if a not in (freq_axis, time_axis)]
    Zxx = jnp.transpose(Zxx, others + [time_axis, freq_axis])  # (..., segments, frequencies)
    inverse = jnp_fft.irfft if input_onesided else jnp_fft.ifft
    frames = inverse(Zxx, n=nfft, axis=-1)[..., :nperseg]
    if isinstance(window, (str, tuple)):
        win = jnp.asarray(_named_window(window, nperseg), frames.dtype)
    else:
        win = jnp.asarray(window)
        if win.ndim != 1:
            raise ValueError("window must be 1-D")
        if win.shape[0] != nperseg:
            raise ValueError(f"window must have length of {nperseg}")
        win = win.astype(frames.dtype)
    frames = frames * jnp.sum(win)
    x = _overlap_add(frames * win, step)
    norm = _overlap_add(jnp.broadcast_to(win * win, frames.shape[-2:]), step)
    if boundary:
        half = nperseg // 2
        x, norm = x[..., half:x.shape[-1] - half], norm[half:norm.shape[-1] - half]
    x = x / jnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and time_axis != Zxx.ndim - 1:
        if freq_axis < time_axis:
            time_axis -= 1
        x = jnp.moveaxis(x, -1, time_axis)
    time = jnp.arange(x.shape[0], dtype=np.finfo(x.dtype).dtype) / fs
    return time, x
