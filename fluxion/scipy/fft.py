"""Discrete cosine transforms (`jax.scipy.fft`)."""
from fluxion._src.scipy.fft import dct, dctn, idct, idctn  # noqa: F401

from fluxion._src.numpy.eager import compile_eagerly as _compile_eagerly  # noqa: E402

# Outside jit each transform runs as one cached executable per signature.
_compile_eagerly(globals(), static_parameters=frozenset({"type", "n", "axis", "norm", "s",
                                                         "axes"}))
