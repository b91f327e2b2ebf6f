"""Signal processing (`jax.scipy.signal`)."""
from fluxion._src.scipy.signal import (  # noqa: F401
    convolve, convolve2d, correlate, correlate2d, detrend, fftconvolve)
from fluxion._src.scipy.spectral import csd, istft, stft, welch  # noqa: F401

from fluxion._src.numpy.eager import compile_eagerly as _compile_eagerly  # noqa: E402

# Outside jit each convolution runs as one cached executable per signature. The spectral
# functions and detrend stay op by op: their window, detrend and breakpoints arguments may be
# functions or Python values their computation reads.
_compile_eagerly(globals(), names=("convolve", "convolve2d", "correlate", "correlate2d",
                                   "fftconvolve"),
                 static_parameters=frozenset({"mode", "method", "precision", "boundary",
                                              "fillvalue", "axes"}))
