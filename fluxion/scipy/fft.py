"""Discrete cosine transforms (`jax.scipy.fft`)."""
from fluxion._src.scipy.fft import dct, dctn, idct, idctn  # noqa: F401
