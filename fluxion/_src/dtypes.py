"""Dtypes, canonicalization under the x64 flag, weak types and JAX's type-promotion lattice."""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from fluxion._src.config import config

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

# Tangent dtype of integer and boolean values: a zero-sized void type, as in JAX.
float0 = np.dtype([("float0", np.void, 0)])

SUPPORTED_DTYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                    bfloat16, float16, float32, float64, complex64, complex128)
_SUPPORTED = frozenset(SUPPORTED_DTYPES)

_TO_32 = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}
_PY_SCALAR_KIND = {bool: "b", int: "i", float: "f", complex: "c"}


def default_int_dtype():
    return int64 if config.enable_x64 else int32


def default_uint_dtype():
    return uint64 if config.enable_x64 else uint32


def default_float_dtype():
    return float64 if config.enable_x64 else float32


def default_complex_dtype():
    return complex128 if config.enable_x64 else complex64


def _default_of_kind(kind: str) -> np.dtype:
    return {"b": bool_, "i": default_int_dtype(), "u": default_uint_dtype(),
            "f": default_float_dtype(), "c": default_complex_dtype()}[kind]


def canonicalize_dtype(dtype, allow_extended: bool = False) -> np.dtype:
    """The dtype arrays of `dtype` get: 64-bit types become 32-bit unless x64 is enabled."""
    return _canonicalize(np.dtype(dtype) if not isinstance(dtype, np.dtype) else dtype,
                         config.enable_x64, allow_extended)


@functools.lru_cache(maxsize=None)
def _canonicalize(dtype: np.dtype, x64: bool, allow_extended: bool) -> np.dtype:
    if dtype == float0 and allow_extended:
        return dtype
    if dtype not in _SUPPORTED:
        raise TypeError(f"fluxion does not support dtype {dtype}")
    return dtype if x64 else _TO_32.get(dtype, dtype)


def dtype(x, canonicalize: bool = False) -> np.dtype:
    """The dtype of a value, dtype-like, or Python scalar type (JAX's `dtypes.dtype`)."""
    if x is None:
        raise ValueError("Invalid argument to dtype: None.")
    if isinstance(x, type) and x in _PY_SCALAR_KIND:
        dt = _default_of_kind(_PY_SCALAR_KIND[x]) if x is not bool else bool_
        return dt
    if isinstance(x, (bool, int, float, complex)) and type(x) in _PY_SCALAR_KIND:
        dt = _default_of_kind(_PY_SCALAR_KIND[type(x)])
    elif hasattr(x, "dtype") and not isinstance(x, type):
        dt = np.dtype(x.dtype)
    else:
        try:
            dt = np.dtype(x)
        except TypeError as e:
            raise TypeError(f"Cannot determine dtype of {x!r}") from e
    return canonicalize_dtype(dt, allow_extended=True) if canonicalize else dt


def is_python_scalar(x) -> bool:
    return type(x) in _PY_SCALAR_KIND


def is_weakly_typed(x) -> bool:
    if type(x) in _PY_SCALAR_KIND:
        return True
    return bool(getattr(x, "weak_type", False))


def issubdtype(a, b) -> bool:
    """NumPy's issubdtype, extended so that bfloat16 is a floating type."""
    a = a if isinstance(a, np.dtype) or (isinstance(a, type) and issubclass(a, np.generic)) else np.dtype(a)
    if isinstance(a, np.dtype) and a == bfloat16:
        a = np.dtype(np.float16)  # stands in for its category
        if b in (bfloat16, ml_dtypes.bfloat16):
            return True
        if b in (float16, np.float16):
            return False
    if isinstance(b, np.dtype) and b == bfloat16:
        return False
    return bool(np.issubdtype(a, b))


def is_float(dt) -> bool:
    return np.dtype(dt).kind == "f" or np.dtype(dt) == bfloat16


def is_inexact(dt) -> bool:
    return np.dtype(dt).kind in "fc" or np.dtype(dt) == bfloat16


def is_complex(dt) -> bool:
    return np.dtype(dt).kind == "c"


def is_integer(dt) -> bool:
    return np.dtype(dt).kind in "iu"


def finfo(dt):
    return ml_dtypes.finfo(np.dtype(dt))


def iinfo(dt):
    return ml_dtypes.iinfo(np.dtype(dt))


# ---------------------------------------------------------------------------------------------
# The promotion lattice. Nodes are dtypes or the weak kinds "i*", "f*", "c*" (Python int, float,
# complex); a type promotes to every node reachable from it. Join = least upper bound.
_WEAK = ("i*", "f*", "c*")


def _lattice_edges():
    return {
        bool_: ["i*"],
        "i*": [uint8, int8],
        uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64], uint64: ["f*"],
        int8: [int16], int16: [int32], int32: [int64], int64: ["f*"],
        "f*": ["c*", bfloat16, float16],
        bfloat16: [float32], float16: [float32], float32: [float64, complex64], float64: [complex128],
        "c*": [complex64], complex64: [complex128], complex128: [],
    }


def _compute_upper_bounds():
    edges = _lattice_edges()
    upper = {}
    for node in edges:
        seen, stack = {node}, [node]
        while stack:
            for nxt in edges[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        upper[node] = seen
    return upper


_UPPER = _compute_upper_bounds()


def _join(nodes) -> object:
    common = set.intersection(*(_UPPER[n] for n in nodes))
    # The least upper bound is the element of `common` that every other element of it is above.
    for candidate in common:
        if all(other in _UPPER[candidate] for other in common):
            return candidate
    raise TypeError(f"no common type for {nodes}")


def _node(dt: np.dtype, weak: bool):
    if not weak:
        return dt
    if dt == bool_:
        return bool_
    kind = dt.kind if dt != bfloat16 else "f"
    return {"i": "i*", "u": "i*", "f": "f*", "c": "c*"}[kind]


@functools.lru_cache(maxsize=4096)
def _promote_nodes(nodes: tuple, x64: bool):
    result = _join(nodes)
    if isinstance(result, str):
        return _default_of_kind_x64(result[0], x64), True
    return _canonicalize(result, x64, False), False


def _default_of_kind_x64(kind, x64):
    return {"i": int64 if x64 else int32, "f": float64 if x64 else float32,
            "c": complex128 if x64 else complex64}[kind]


def _input_node(x):
    """Lattice node of one input of `result_type`: a value, a dtype or a Python scalar type."""
    if type(x) in _PY_SCALAR_KIND:
        return bool_ if type(x) is bool else _node(_default_of_kind(_PY_SCALAR_KIND[type(x)]), True)
    if isinstance(x, type) and x in _PY_SCALAR_KIND:
        return bool_ if x is bool else {"i": "i*", "f": "f*", "c": "c*"}[_PY_SCALAR_KIND[x]]
    if hasattr(x, "dtype") and not isinstance(x, (type, np.dtype)):
        return _node(np.dtype(x.dtype), bool(getattr(x, "weak_type", False)))
    return np.dtype(x)


def result_type_with_weak(*args) -> tuple[np.dtype, bool]:
    """Promoted (canonical dtype, weak_type) of the arguments, following JAX's lattice."""
    if not args:
        raise ValueError("at least one array or dtype is required")
    nodes = tuple(_input_node(a) for a in args)
    for n in nodes:
        if not isinstance(n, str) and n not in _SUPPORTED:
            raise TypeError(f"fluxion does not support dtype {n}")
    x64 = config.enable_x64
    dt, weak = _promote_nodes(tuple(_canon_node(n, x64) for n in nodes), x64)
    return dt, weak


def _canon_node(n, x64):
    return n if isinstance(n, str) else _canonicalize(n, x64, False)


def result_type(*args, return_weak_type_flag: bool = False):
    """`jnp.result_type`: the canonical dtype that the arguments promote to."""
    dt, weak = result_type_with_weak(*args)
    return (dt, weak) if return_weak_type_flag else dt


def promote_types(a, b) -> np.dtype:
    """`jnp.promote_types`: promotion of two dtypes (Python scalar types count as weak)."""
    result = _join((_input_node(a), _input_node(b)))
    if isinstance(result, str):
        return _default_of_kind_x64(result[0], config.enable_x64)
    return _canonicalize(result, config.enable_x64, False)


def scalar_type_of(x) -> type:
    """Python scalar type matching the kind of a value's dtype."""
    dt = dtype(x)
    if dt == bool_:
        return bool
    if is_integer(dt):
        return int
    if is_float(dt):
        return float
    return complex
