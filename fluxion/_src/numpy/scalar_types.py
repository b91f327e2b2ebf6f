"""Scalar types (`jnp.float32` and friends) and the dtype helpers of fluxion.numpy.

`jnp.float32` is a class that stands for its dtype wherever NumPy expects a dtype (it has a
`dtype` attribute) and, when called, makes an Array: `jnp.float32(3)` is
`jnp.asarray(3, dtype=jnp.float32)`, as in JAX.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from fluxion._src import dtypes


class _ScalarMeta(type):
    """Metaclass of the scalar types: compares and hashes like the NumPy scalar type."""

    dtype: np.dtype

    def __hash__(cls):
        return hash(cls.dtype.type)

    def __eq__(cls, other):
        return other is cls or other == cls.dtype.type

    def __ne__(cls, other):  # (`cls.__eq__` would find the instances' object.__eq__)
        return not _ScalarMeta.__eq__(cls, other)

    def __call__(cls, x):
        from fluxion._src.numpy.creation import asarray
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance):
        return isinstance(instance, cls.dtype.type)


def _scalar_type(np_type, name: str) -> type:
    cls = _ScalarMeta(name, (object,), {"dtype": np.dtype(np_type),
                                        "__doc__": f"The {name} scalar type; calling it makes an Array."})
    cls.__module__ = "fluxion.numpy"
    return cls


bool_ = _scalar_type(np.bool_, "bool")
int8 = _scalar_type(np.int8, "int8")
int16 = _scalar_type(np.int16, "int16")
int32 = _scalar_type(np.int32, "int32")
int64 = _scalar_type(np.int64, "int64")
uint8 = _scalar_type(np.uint8, "uint8")
uint16 = _scalar_type(np.uint16, "uint16")
uint32 = _scalar_type(np.uint32, "uint32")
uint64 = _scalar_type(np.uint64, "uint64")
bfloat16 = _scalar_type(ml_dtypes.bfloat16, "bfloat16")
float16 = _scalar_type(np.float16, "float16")
float32 = _scalar_type(np.float32, "float32")
float64 = _scalar_type(np.float64, "float64")
complex64 = _scalar_type(np.complex64, "complex64")
complex128 = _scalar_type(np.complex128, "complex128")

int_ = int64
uint = uint64
float_ = float64
complex_ = complex128
single, double = float32, float64
csingle, cdouble = complex64, complex128

# The abstract categories are NumPy's.
generic, number, inexact, floating, complexfloating = (
    np.generic, np.number, np.inexact, np.floating, np.complexfloating)
integer, signedinteger, unsignedinteger = np.integer, np.signedinteger, np.unsignedinteger

dtype = np.dtype
can_cast = np.can_cast
iinfo = ml_dtypes.iinfo
finfo = ml_dtypes.finfo


def _as_dtype_or_category(x):
    if isinstance(x, _ScalarMeta):
        return x.dtype
    return x


def issubdtype(arg1, arg2) -> bool:
    """True if `arg1` is a dtype of the category (or the dtype) `arg2`; bfloat16 is floating."""
    return dtypes.issubdtype(_as_dtype_or_category(arg1), _as_dtype_or_category(arg2))


def result_type(*args) -> np.dtype:
    """The dtype that the arguments (arrays, scalars, dtypes) promote to, under JAX's rules."""
    return dtypes.result_type(*args)


def promote_types(a, b) -> np.dtype:
    """The dtype two dtypes promote to (Python scalar types count as weak)."""
    return dtypes.promote_types(a, b)


_KINDS = {
    "bool": lambda dt: dt == dtypes.bool_,
    "signed integer": lambda dt: dt.kind == "i",
    "unsigned integer": lambda dt: dt.kind == "u",
    "integral": lambda dt: dt.kind in "iu",
    "real floating": dtypes.is_float,
    "complex floating": dtypes.is_complex,
    "numeric": lambda dt: dt.kind in "iufc" or dt == dtypes.bfloat16,
}


def isdtype(dtype, kind) -> bool:
    """Array-API `isdtype`: is `dtype` of `kind` (a kind name, a dtype, or a tuple of them)?"""
    the_dtype = np.dtype(dtype)
    for k in kind if isinstance(kind, tuple) else (kind,):
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"Unrecognized kind={k!r}; expected one of {list(_KINDS)}, or a "
                                 "dtype.")
            if _KINDS[k](the_dtype):
                return True
        elif the_dtype == np.dtype(k):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# The remaining names of jax.numpy's type namespace.

object_, flexible, character = np.object_, np.flexible, np.character
ComplexWarning = np.exceptions.ComplexWarning

# The narrow ml_dtypes types (see dtypes.SMALL_FLOAT_DTYPES and INTN_DTYPES).
float8_e3m4 = _scalar_type(ml_dtypes.float8_e3m4, "float8_e3m4")
float8_e4m3 = _scalar_type(ml_dtypes.float8_e4m3, "float8_e4m3")
float8_e4m3b11fnuz = _scalar_type(ml_dtypes.float8_e4m3b11fnuz, "float8_e4m3b11fnuz")
float8_e4m3fn = _scalar_type(ml_dtypes.float8_e4m3fn, "float8_e4m3fn")
float8_e4m3fnuz = _scalar_type(ml_dtypes.float8_e4m3fnuz, "float8_e4m3fnuz")
float8_e5m2 = _scalar_type(ml_dtypes.float8_e5m2, "float8_e5m2")
float8_e5m2fnuz = _scalar_type(ml_dtypes.float8_e5m2fnuz, "float8_e5m2fnuz")
float8_e8m0fnu = _scalar_type(ml_dtypes.float8_e8m0fnu, "float8_e8m0fnu")
float4_e2m1fn = _scalar_type(ml_dtypes.float4_e2m1fn, "float4_e2m1fn")
float6_e2m3fn = _scalar_type(ml_dtypes.float6_e2m3fn, "float6_e2m3fn")
float6_e3m2fn = _scalar_type(ml_dtypes.float6_e3m2fn, "float6_e3m2fn")
int2 = _scalar_type(ml_dtypes.int2, "int2")
int4 = _scalar_type(ml_dtypes.int4, "int4")
uint2 = _scalar_type(ml_dtypes.uint2, "uint2")
uint4 = _scalar_type(ml_dtypes.uint4, "uint4")
int1 = _scalar_type(ml_dtypes.int1, "int1")
uint1 = _scalar_type(ml_dtypes.uint1, "uint1")
