"""DLPack interchange (`jax.dlpack`): Arrays from other libraries' arrays and back.

fluxion Arrays export DLPack themselves (`Array.__dlpack__`), so `np.from_dlpack(x)` and other
libraries' `from_dlpack` take them directly.
"""
import numpy as _np

from fluxion._src import dtypes as _dtypes
from fluxion._src.numpy.io import from_dlpack  # noqa: F401

_SUPPORTED = frozenset(_np.dtype(t) for t in (
    _np.int8, _np.int16, _np.int32, _np.int64, _np.uint8, _np.uint16, _np.uint32, _np.uint64,
    _np.float16, _dtypes.bfloat16, _np.float32, _np.float64, _np.complex64, _np.complex128,
    _np.bool_))


def is_supported_dtype(dtype) -> bool:
    """Whether arrays of `dtype` can be exchanged through DLPack."""
    if dtype is None:  # NumPy would read None as float64
        raise TypeError(f"Expected a string or dtype-like object; got {dtype=}")
    return _np.dtype(dtype) in _SUPPORTED
