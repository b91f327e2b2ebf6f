"""jax.numpy.fft: discrete Fourier transforms on top of `lax.fft`.

Transforms over arbitrary axes move those axes last (XLA transforms trailing dimensions),
crop or zero-pad to the requested lengths, and apply `norm` ("backward", "ortho", "forward")
as a scale factor, as jax.numpy.fft does. More than three axes are done in stages of at most
three.
"""
from __future__ import annotations

import operator
from typing import Sequence

import numpy as np

from fluxion._src import dtypes
from fluxion._src.lax import lax
from fluxion._src.lax.fft import FftType, fft as lax_fft
from fluxion._src.numpy import creation, manipulation, reductions, ufuncs
from fluxion._src.numpy.util import ensure_arraylike, promote_dtypes_inexact

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
           "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _norm_factor(s, func_name: str, norm: str):
    if norm == "backward":
        return creation.array(1)
    size, = promote_dtypes_inexact(s)  # the product in floating point: no integer overflow
    if norm == "ortho":
        root = ufuncs.sqrt(reductions.prod(size))
        return root if func_name.startswith("i") else 1 / root
    if norm == "forward":
        total = reductions.prod(size)
        return total if func_name.startswith("i") else 1 / total
    raise ValueError(f'Invalid norm value {norm}; should be "backward","ortho" or "forward".')


def _transform_nd(arr, fft_type: FftType, s: Sequence[int]):
    """`lax.fft` over the trailing len(s) axes, staged when there are more than three."""
    if len(s) <= 3:
        return lax_fft(arr, fft_type, tuple(s))
    n = 2 if len(s) == 4 else 3
    rest = tuple(range(arr.ndim - len(s), arr.ndim - n))
    moved = tuple(range(arr.ndim - len(s) + n, arr.ndim))
    if fft_type in (FftType.RFFT, FftType.FFT):
        arr = lax_fft(arr, fft_type, tuple(s)[-n:])
        arr = manipulation.moveaxis(arr, rest, moved)
        arr = _transform_nd(arr, FftType.FFT, s[:-n])
        return manipulation.moveaxis(arr, moved, rest)
    arr = manipulation.moveaxis(arr, rest, moved)
    arr = _transform_nd(arr, FftType.IFFT, s[:-n])
    arr = manipulation.moveaxis(arr, moved, rest)
    return lax_fft(arr, fft_type, tuple(s)[-n:])


def _fft_core(func_name: str, fft_type: FftType, a, s, axes, norm):
    full_name = f"jax.numpy.fft.{func_name}"
    arr = ensure_arraylike(full_name, a)
    if s is not None:
        s = tuple(operator.index(n) for n in s)
        if any(n <= 0 for n in s):
            raise ValueError("Shape should be positive.")
    if s is not None and axes is not None and len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")

    given_axes = axes
    if axes is None:
        axes = range(arr.ndim) if s is None else range(arr.ndim - len(s), arr.ndim)
    axes = tuple(axes)
    if len(axes) != len(set(axes)):
        raise ValueError(f"{full_name} does not support repeated axes. Got axes {list(axes)}.")

    if given_axes is not None:
        axes = tuple(range(arr.ndim - len(axes), arr.ndim))
        arr = manipulation.moveaxis(arr, tuple(given_axes), axes)

    if s is not None:
        sizes = list(arr.shape)
        for axis, n in zip(axes, s):
            sizes[axis] = n
        if fft_type == FftType.IRFFT:
            sizes[-1] = sizes[-1] // 2 + 1
        arr = arr[tuple(slice(n) for n in sizes)]
        arr = manipulation.pad(arr, [(0, n - m) for n, m in zip(sizes, arr.shape)])
    elif fft_type == FftType.IRFFT:
        s = [arr.shape[axis] for axis in axes[:-1]]
        if axes:
            s.append(max(0, 2 * (arr.shape[axes[-1]] - 1)))
    else:
        s = [arr.shape[axis] for axis in axes]

    out = _transform_nd(arr, fft_type, s)
    if norm is not None:
        out = out * _norm_factor(creation.array(s, dtype=out.dtype), func_name, norm)
    if given_axes is not None:
        out = manipulation.moveaxis(out, axes, tuple(given_axes))
    return out


def _check_1d_axis(func_name: str, axis) -> None:
    if isinstance(axis, (list, tuple)):
        full_name = f"jax.numpy.fft.{func_name}"
        raise ValueError(f"{full_name} does not support multiple axes. Please use "
                         f"{full_name}n. Got axis = {axis!r}.")


def _fft_core_1d(func_name, fft_type, a, n, axis, norm):
    _check_1d_axis(func_name, axis)
    return _fft_core(func_name, fft_type, a, None if n is None else [n],
                     None if axis is None else [axis], norm)


def _fft_core_2d(func_name, fft_type, a, s, axes, norm):
    if len(axes) != 2:
        raise ValueError(f"jax.numpy.fft.{func_name} only supports 2 axes. Got axes = "
                         f"{axes!r}.")
    return _fft_core(func_name, fft_type, a, s, axes, norm)


def fft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """One-dimensional discrete Fourier transform along `axis` (NumPy's `fft.fft`)."""
    return _fft_core_1d("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """One-dimensional inverse discrete Fourier transform along `axis`."""
    return _fft_core_1d("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """One-dimensional discrete Fourier transform of a real input (half spectrum)."""
    return _fft_core_1d("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """Inverse of `rfft`: a real signal of length `n` (default 2*(m-1)) from a half spectrum."""
    return _fft_core_1d("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """Transform of a Hermitian-symmetric signal given by its first half: a real spectrum."""
    conj_a = ufuncs.conj(a)
    _check_1d_axis("hfft", axis)
    nn = (conj_a.shape[axis] - 1) * 2 if n is None else n
    return _fft_core_1d("hfft", FftType.IRFFT, conj_a, n, axis, norm) * nn


def ihfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """Inverse of `hfft`: the half spectrum of a real signal, conjugated and scaled by 1/n."""
    _check_1d_axis("ihfft", axis)
    arr = creation.asarray(a)
    nn = arr.shape[axis] if n is None else n
    out = _fft_core_1d("ihfft", FftType.RFFT, arr, n, axis, norm)
    return ufuncs.conj(out) * (1 / nn)


def fft2(a, s=None, axes: Sequence[int] = (-2, -1), norm: str | None = None):
    """Two-dimensional discrete Fourier transform over `axes`."""
    return _fft_core_2d("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s=None, axes: Sequence[int] = (-2, -1), norm: str | None = None):
    """Two-dimensional inverse discrete Fourier transform over `axes`."""
    return _fft_core_2d("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s=None, axes: Sequence[int] = (-2, -1), norm: str | None = None):
    """Two-dimensional discrete Fourier transform of a real input."""
    return _fft_core_2d("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s=None, axes: Sequence[int] = (-2, -1), norm: str | None = None):
    """Inverse of `rfft2`."""
    return _fft_core_2d("irfft2", FftType.IRFFT, a, s, axes, norm)


def fftn(a, s=None, axes: Sequence[int] | None = None, norm: str | None = None):
    """N-dimensional discrete Fourier transform over `axes` (default: all, or the last len(s))."""
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s=None, axes: Sequence[int] | None = None, norm: str | None = None):
    """N-dimensional inverse discrete Fourier transform."""
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes: Sequence[int] | None = None, norm: str | None = None):
    """N-dimensional discrete Fourier transform of a real input (half spectrum on the last
    axis)."""
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes: Sequence[int] | None = None, norm: str | None = None):
    """Inverse of `rfftn`."""
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


def _check_freq_args(name: str, n, d) -> None:
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of jax.numpy.fft.{name} only takes an int. "
                         f"Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of jax.numpy.fft.{name} only takes a single value. "
                         f"Got d = {list(d)}.")


def _float_dtype_for(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dtypes.is_inexact(dt):
        return np.dtype(dtypes.finfo(dt).dtype)
    return dtypes.canonicalize_dtype(np.float64 if dt.itemsize == 8 else np.float32)


def fftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """Sample frequencies of `fft` for a window of length `n` and sample spacing `d`."""
    dtype = dtype or dtypes.default_float_dtype()
    _check_freq_args("fftfreq", n, d)
    out_dtype = dtype
    dtype = _float_dtype_for(dtype)
    i = creation.arange(n, dtype=dtype, device=device)
    k = (i + n // 2) % n - n // 2
    result = k.astype(dtype) / creation.array(d * n, dtype=dtype)
    return result.astype(out_dtype)


def rfftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """Sample frequencies of `rfft` for a window of length `n` and sample spacing `d`."""
    dtype = dtype or dtypes.default_float_dtype()
    _check_freq_args("rfftfreq", n, d)
    k = creation.arange(0, n // 2 + 1, dtype=dtype, device=device)
    return k / creation.array(d * n, dtype=dtype)


def _shifts(x, axes, sign: int):
    if axes is None:
        axes = tuple(range(x.ndim))
        return [sign * (dim // 2) for dim in x.shape], axes
    if isinstance(axes, int):
        return sign * (x.shape[axes] // 2), axes
    return [sign * (x.shape[ax] // 2) for ax in axes], axes


def fftshift(x, axes=None):
    """Move the zero-frequency term to the center of the spectrum."""
    x = ensure_arraylike("fftshift", x)
    shift, axes = _shifts(x, axes, 1)
    return manipulation.roll(x, shift, axes)


def ifftshift(x, axes=None):
    """Inverse of `fftshift`."""
    x = ensure_arraylike("ifftshift", x)
    shift, axes = _shifts(x, axes, -1)
    return manipulation.roll(x, shift, axes)
