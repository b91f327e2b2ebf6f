"""Fast Fourier transforms: `lax.fft` and its primitive `fft_p`, lowered to `stablehlo.fft`.

The transform runs over the trailing `len(fft_lengths)` dimensions (1 to 3 of them). FFT and
IFFT map complex to complex, RFFT real to the non-redundant half spectrum, IRFFT that half
spectrum back to real. All four are linear, so the JVP applies the transform to the tangent and
the transpose rules follow JAX's conventions (the RFFT transpose is the real part of a
zero-padded FFT, the IRFFT transpose a scaled, masked, conjugated RFFT).
"""
from __future__ import annotations

import enum
import math
import operator
from typing import Sequence

import numpy as np

from fluxion._src import ad, batching, dtypes
from fluxion._src.core import ShapedArray
from fluxion._src.lax import lax
from fluxion._src.lax.base import standard_primitive
from fluxion._src.lax.structural import pad

__all__ = ["FftType", "fft", "fft_p"]


class FftType(enum.IntEnum):
    """Which FFT operation to perform."""

    FFT = 0
    "Forward complex-to-complex FFT."
    IFFT = 1
    "Inverse complex-to-complex FFT."
    RFFT = 2
    "Forward real-to-complex FFT."
    IRFFT = 3
    "Inverse real-to-complex FFT."


_TYPE_NAMES = {"fft": FftType.FFT, "ifft": FftType.IFFT, "rfft": FftType.RFFT,
               "irfft": FftType.IRFFT}


def _fft_type(fft_type) -> FftType:
    if isinstance(fft_type, FftType):
        return fft_type
    if isinstance(fft_type, str):
        if fft_type in _TYPE_NAMES or fft_type.lower() in _TYPE_NAMES and fft_type.isupper():
            return _TYPE_NAMES[fft_type.lower()]
        raise ValueError(f"Unknown FFT type '{fft_type}'")
    raise TypeError(f"Unknown FFT type value '{fft_type}'")


def _is_wide(dt: np.dtype) -> bool:
    """Whether `dt` converts to the 64-bit float family (as JAX's to_inexact_dtype does)."""
    return dt in (np.dtype(np.float64), np.dtype(np.complex128), np.dtype(np.int64),
                  np.dtype(np.uint64))


def real_input_dtype(dt) -> np.dtype:
    """The floating dtype a real input to RFFT is converted to."""
    dt = np.dtype(dt)
    if dtypes.is_inexact(dt):
        return dt
    return dtypes.canonicalize_dtype(np.float64 if _is_wide(dt) else np.float32)


def complex_input_dtype(dt) -> np.dtype:
    """The complex dtype an input to FFT/IFFT/IRFFT is converted to."""
    return dtypes.canonicalize_dtype(np.complex128 if _is_wide(np.dtype(dt)) else np.complex64)


def _complex_of(dt: np.dtype) -> np.dtype:
    return np.dtype(np.complex128 if dt == np.float64 else np.complex64)


def _real_of(dt: np.dtype) -> np.dtype:
    return np.dtype(np.float64 if dt == np.complex128 else np.float32)


def fft(x, fft_type: FftType | str, fft_lengths: Sequence[int]):
    """Fast Fourier transform of the trailing `len(fft_lengths)` dimensions of `x`.

    Parameters
    ----------
    x : array
        Real inputs are converted to complex for FFT, IFFT and IRFFT; RFFT needs a real input.
    fft_type : FftType or str
        ``FftType.FFT``, ``IFFT``, ``RFFT``, ``IRFFT`` (or their names, lower or upper case).
    fft_lengths : sequence of int
        The transform lengths of the trailing dimensions (at most 3). For IRFFT the last one is
        the length of the real output.
    """
    typ = _fft_type(fft_type)
    x_dtype = dtypes.dtype(x)
    if typ == FftType.RFFT:
        if dtypes.is_complex(x_dtype):
            raise ValueError("only real valued inputs supported for rfft")
        x = lax.convert_element_type(x, real_input_dtype(x_dtype))
    else:
        x = lax.convert_element_type(x, complex_input_dtype(x_dtype))
    fft_lengths = tuple(operator.index(n) for n in fft_lengths)
    if not fft_lengths:
        return x  # XLA has no rank-0 FFT; the empty transform is the identity.
    return fft_p.bind(x, fft_type=typ, fft_lengths=fft_lengths)


def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)
    if k > 3:
        raise ValueError(f"FFT supports at most 3 trailing dimensions, got fft_lengths "
                         f"{fft_lengths}.")
    if k > x.ndim:
        raise ValueError(f"FFT input shape {x.shape} must have at least as many input "
                         f"dimensions as fft_lengths {fft_lengths}.")
    if any(n < 0 for n in fft_lengths):
        raise ValueError(f"FFT lengths must be non-negative, got {fft_lengths}.")
    minor = x.shape[x.ndim - k:]
    if fft_type == FftType.RFFT:
        if x.dtype not in (np.float32, np.float64):
            raise ValueError(f"RFFT input must be float32 or float64, got {x.dtype}")
        if minor != fft_lengths:
            raise ValueError(f"RFFT input shape {x.shape} minor dimensions must be equal to "
                             f"fft_lengths {fft_lengths}")
        shape = x.shape[:x.ndim - k] + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        return ShapedArray(shape, _complex_of(x.dtype))
    if not dtypes.is_complex(x.dtype):
        raise ValueError(f"{fft_type.name} input must be complex64 or complex128, got "
                         f"{x.dtype}")
    if fft_type == FftType.IRFFT:
        if minor[:-1] != fft_lengths[:-1]:
            raise ValueError(f"IRFFT input shape {x.shape} minor dimensions must be equal to "
                             f"all except the last fft_length, got fft_lengths={fft_lengths}")
        # JAX leaves this to XLA, which rejects it when compiling; say it here instead.
        if minor[-1] != fft_lengths[-1] // 2 + 1:
            raise ValueError(f"IRFFT input shape {x.shape} last dimension must be "
                             f"fft_lengths[-1] // 2 + 1 = {fft_lengths[-1] // 2 + 1}, got "
                             f"fft_lengths={fft_lengths}")
        return ShapedArray(x.shape[:x.ndim - k] + fft_lengths, _real_of(x.dtype))
    if minor != fft_lengths:
        raise ValueError(f"FFT input shape {x.shape} minor dimensions must be equal to "
                         f"fft_lengths {fft_lengths}")
    return ShapedArray(x.shape, x.dtype)


def _fft_lowering(ctx, x, *, fft_type, fft_lengths):
    out = ctx.avals_out[0]
    if 0 in x.aval.shape or 0 in out.shape:
        # XLA's FFT rejects zero-sized transforms; an empty result is all there is to make.
        return ctx.broadcast(ctx.constant(0, out.dtype), out.shape)
    attrs = {"fft_type": f"#stablehlo<fft_type {fft_type.name}>",
             "fft_length": "array<i64: " + ", ".join(map(str, fft_lengths)) + ">"}
    return ctx.op1("stablehlo.fft", [x], out, attrs)


fft_p = standard_primitive("fft", _fft_abstract_eval, _fft_lowering)


# ---------------------------------------------------------------------------------------------
# Transposes

def _rfft_transpose(t, fft_lengths):
    # RFFT(x) = FFT(complex(x))[..., :n//2+1]; transposing each step: zero-pad the cotangent
    # to the full spectrum, apply FFT (its matrix is symmetric), keep the real part.
    n = fft_lengths[-1]
    keep = n // 2 + 1
    config = [(0, 0, 0)] * (t.ndim - 1) + [(0, n - keep, 0)]
    padded = pad(t, np.zeros((), t.dtype), config)
    return lax.real(fft_p.bind(padded, fft_type=FftType.FFT, fft_lengths=fft_lengths))


def _irfft_transpose(t, fft_lengths):
    # The RFFT of the cotangent, with the components IRFFT duplicates by Hermitian symmetry
    # counted twice, scaled by 1/N and conjugated (JAX's convention for complex cotangents).
    x = fft_p.bind(t, fft_type=FftType.RFFT, fft_lengths=fft_lengths)
    m = x.shape[-1]
    odd = fft_lengths[-1] % 2
    mask = np.concatenate([np.ones(1), np.full(max(0, m - 2 + odd), 2.0), np.ones(1 - odd)])[:m]
    scale = 1.0 / math.prod(fft_lengths)
    factor = lax.broadcast_in_dim(np.asarray(mask * scale, x.dtype), x.shape, (x.ndim - 1,))
    return lax.conj(lax.mul(x, factor))


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if fft_type == FftType.RFFT:
        return [_rfft_transpose(ct, fft_lengths)]
    if fft_type == FftType.IRFFT:
        return [_irfft_transpose(ct, fft_lengths)]
    # The DFT matrix is symmetric: FFT and IFFT are their own transposes.
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]


ad.deflinear(fft_p, _fft_transpose)


def _fft_batch(args, dims, *, fft_type, fft_lengths):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), 0


batching.primitive_batchers[fft_p] = _fft_batch
