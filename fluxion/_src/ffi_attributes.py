"""Python values as MLIR attribute text: the static keyword arguments of an FFI call.

The encoding follows JAX's `mlir.ir_attribute`: a Python `int` is `i64`, a `float` `f64`, a
`bool` `i1`; a NumPy scalar keeps its dtype; a NumPy array (0-d included) is a dense tensor;
a string (or bytes) a string; a dtype a type; a dict a dictionary; a tuple or list an array.
XLA's FFI decodes these from the custom call's `backend_config` dictionary.
"""
from __future__ import annotations

import re

import numpy as np

from fluxion._src.compiler.hlo import element_type

_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*\Z")
_PYTHON_SCALARS = {bool: np.dtype(np.bool_), int: np.dtype(np.int64),
                   float: np.dtype(np.float64)}


def string_literal(s) -> str:
    """`s` (str or bytes) as an MLIR string literal."""
    data = s.encode() if isinstance(s, str) else bytes(s)
    out = []
    for b in data:
        c = chr(b)
        if 0x20 <= b < 0x7F and c not in '"\\':
            out.append(c)
        else:
            out.append(f"\\{b:02X}")
    return '"' + "".join(out) + '"'


def attribute_name(name: str) -> str:
    return name if _BARE_NAME.match(name) else string_literal(name)


def _float_bits(value, dtype: np.dtype) -> str:
    """A float as its bit pattern (exact, and fine for inf and NaN)."""
    arr = np.asarray(value, dtype=dtype)
    bits = int(arr.view(f"u{dtype.itemsize}"))
    return f"0x{bits:0{2 * dtype.itemsize}X}"


def _scalar(value, dtype: np.dtype) -> str:
    etype = element_type(dtype)
    if dtype == np.bool_:
        return "true" if bool(value) else "false"
    if dtype.kind in "iu":
        return f"{int(value)} : {etype}"
    if dtype.kind == "f" or etype.startswith(("f", "bf")):
        return f"{_float_bits(value, dtype)} : {etype}"
    raise TypeError(f"Unsupported scalar attribute type: {type(value)}")


def _dense(arr: np.ndarray) -> str:
    if 0 in arr.strides and arr.size > 0:
        raise ValueError("NumPy arrays with zero strides are not supported as MLIR attributes")
    etype = element_type(arr.dtype)  # TypeError for dtypes without an MLIR type
    shape = "".join(f"{d}x" for d in arr.shape)
    if arr.size == 0:
        body = "[]"
    elif arr.dtype == np.bool_:
        body = _nested(arr.tolist(), lambda v: "true" if v else "false")
    else:
        data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False)
        body = f'"0x{data.tobytes().hex().upper()}"'
    return f"dense<{body}> : tensor<{shape}{etype}>"


def _nested(x, fmt) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_nested(v, fmt) for v in x) + "]"
    return fmt(x)


def attribute_text(value) -> str:
    """The MLIR attribute text for `value`; TypeError for a type with no attribute form."""
    if isinstance(value, np.ndarray):
        return _dense(value)
    if isinstance(value, (str, bytes)):
        return string_literal(value)
    if isinstance(value, np.generic):
        return _scalar(value, value.dtype)
    for t, dtype in _PYTHON_SCALARS.items():  # bool before int: bool is an int
        if isinstance(value, t):
            if t is int and not np.iinfo(np.int64).min <= value <= np.iinfo(np.int64).max:
                raise OverflowError(f"Python int {value} too large to convert to int64")
            return _scalar(value, dtype)
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return element_type(np.dtype(value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{attribute_name(str(k))} = {attribute_text(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(attribute_text(v) for v in value) + "]"
    raise TypeError(f"No attribute handler defined for type: {type(value)}")
