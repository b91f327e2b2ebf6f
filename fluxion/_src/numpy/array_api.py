"""The Python Array API (as jax.numpy provides it): `__array_api_version__`,
`__array_namespace_info__`, `Array.__array_namespace__`, `Array.to_device`, and `astype`
with `device=`."""
from __future__ import annotations

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.array import Array

__array_api_version__ = "2024.12"

# The standard's dtypes by kind; 64-bit ones only with x64 (as in JAX).
_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "integral": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_KINDS["numeric"] = (_KINDS["integral"] + _KINDS["real floating"]
                     + _KINDS["complex floating"])
_X64_ONLY = {"int64", "uint64", "float64", "complex128"}


def __array_namespace__(self, *, api_version: None | str = None):
    """The Array API namespace of fluxion arrays: fluxion.numpy."""
    if api_version is not None and api_version != __array_api_version__:
        raise ValueError(f"api_version={api_version!r} is not available; available versions "
                         f"are: {[__array_api_version__]}")
    import fluxion.numpy
    return fluxion.numpy


class ArrayNamespaceInfo:
    """Inspection utilities of the Array API namespace (`__array_namespace_info__()`)."""

    _capabilities = {
        "boolean indexing": False,  # not within transformations
        "data-dependent shapes": False,  # not within transformations
        "max dimensions": 64,
    }

    def capabilities(self) -> dict:
        return dict(self._capabilities)

    def default_device(self):
        return None  # uncommitted: arrays go to the default device

    def devices(self) -> list:
        from fluxion._src import api
        return [None, *api.devices()]

    def default_dtypes(self, *, device=None) -> dict:
        del device
        return {
            "real floating": dtypes.default_float_dtype(),
            "complex floating": dtypes.default_complex_dtype(),
            "integral": dtypes.default_int_dtype(),
            "indexing": dtypes.default_int_dtype(),
        }

    def dtypes(self, *, device=None, kind: str | tuple | None = None) -> dict:
        del device
        from fluxion._src.config import config
        if kind is None:
            names = _KINDS["bool"] + _KINDS["numeric"]
        elif isinstance(kind, tuple):
            names = tuple(n for k in kind for n in _KINDS[k])
        else:
            names = _KINDS[kind]
        return {n: np.dtype(n) for n in names
                if config.enable_x64 or n not in _X64_ONLY}


def __array_namespace_info__() -> ArrayNamespaceInfo:
    """Array API inspection namespace: capabilities, devices, dtypes, default dtypes."""
    return ArrayNamespaceInfo()


def to_device(self, device, *, stream=None):
    """This array on `device` (a copy if it lives elsewhere)."""
    if stream is not None:
        raise NotImplementedError("stream argument of array.to_device()")
    from fluxion._src import api
    return api.device_put(self, device)


def astype(x, dtype, /, *, copy: bool = False, device=None):
    """`x` converted to `dtype` (None: the default float dtype), placed on `device` if given."""
    from fluxion._src.numpy import manipulation
    out = manipulation.astype(x, dtype, copy=copy)
    if device is not None:
        from fluxion._src import api
        out = api.device_put(out, device)
    return out


for _cls in (Array, core.Tracer):
    _cls.__array_namespace__ = __array_namespace__
    _cls.to_device = to_device
