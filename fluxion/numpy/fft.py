"""fluxion.numpy.fft: discrete Fourier transforms (jax.numpy.fft)."""
from fluxion._src.numpy.fft import (  # noqa: F401
    fft, ifft, fft2, ifft2, fftn, ifftn, rfft, irfft, rfft2, irfft2, rfftn, irfftn, hfft, ihfft,
    fftfreq, rfftfreq, fftshift, ifftshift)
