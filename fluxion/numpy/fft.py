"""fluxion.numpy.fft: discrete Fourier transforms (jax.numpy.fft)."""
from fluxion._src.numpy.fft import (  # noqa: F401
    fft, ifft, fft2, ifft2, fftn, ifftn, rfft, irfft, rfft2, irfft2, rfftn, irfftn, hfft, ihfft,
    fftfreq, rfftfreq, fftshift, ifftshift)

from fluxion._src.numpy.eager import compile_eagerly as _compile_eagerly  # noqa: E402

# Outside jit each transform runs as one cached executable per signature (the transform with
# its normalization, padding or shift). The frequency grids take no array.
_compile_eagerly(globals(), names=[n for n in dir() if not n.startswith("_")
                                   and n not in ("fftfreq", "rfftfreq")],
                 static_parameters=frozenset({"n", "axis", "norm", "s", "axes"}))
