"""Signal processing (`jax.scipy.signal`)."""
from fluxion._src.scipy.signal import (  # noqa: F401
    convolve, convolve2d, correlate, correlate2d, detrend, fftconvolve)
from fluxion._src.scipy.spectral import csd, istft, stft, welch  # noqa: F401
