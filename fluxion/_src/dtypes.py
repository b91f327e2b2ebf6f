"""Dtypes, canonicalization under the x64 flag, weak types and JAX's type-promotion lattice."""
from __future__ import annotations

import functools
import warnings

import ml_dtypes
import numpy as np

from fluxion._src.config import config
from fluxion._src.traceback_util import user_stacklevel

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

# Tangent dtype of integer and boolean values: a zero-sized void type, as in JAX.
float0 = np.dtype([("float0", np.void, 0)])

# The narrow types of ml_dtypes (JAX's float8/6/4 and 1/2/4-bit integers). They promote only
# with weakly typed values; NumPy sees them as kind 'V' (void), so their kinds are kept here.
float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, \
    float8_e5m2fnuz, float8_e8m0fnu = (np.dtype(getattr(ml_dtypes, n)) for n in (
        "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
        "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"))
float6_e2m3fn, float6_e3m2fn = np.dtype(ml_dtypes.float6_e2m3fn), np.dtype(ml_dtypes.float6_e3m2fn)
float4_e2m1fn = np.dtype(ml_dtypes.float4_e2m1fn)
int2, int4, uint2, uint4 = (np.dtype(getattr(ml_dtypes, n)) for n in ("int2", "int4", "uint2",
                                                                       "uint4"))
SMALL_FLOAT_DTYPES = (float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn,
                      float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu,
                      float6_e2m3fn, float6_e3m2fn, float4_e2m1fn)
INTN_DTYPES = (int2, int4, uint2, uint4)
if hasattr(ml_dtypes, "int1"):
    int1, uint1 = np.dtype(ml_dtypes.int1), np.dtype(ml_dtypes.uint1)
    INTN_DTYPES += (int1, uint1)
# Host copies of narrow-typed arrays go through a wider type that holds every value exactly.
NARROW_HOST_VIA = {**{dt: float32 for dt in SMALL_FLOAT_DTYPES},
                   **{dt: (uint8 if dt.name.startswith("u") else int8) for dt in INTN_DTYPES}}
_NARROW_KINDS = {**{dt: "f" for dt in SMALL_FLOAT_DTYPES},
                 **{dt: ("u" if dt.name.startswith("u") else "i") for dt in INTN_DTYPES}}

# jaxlib 0.10.2 cannot transfer float6 arrays, and XLA takes 1-bit integers for booleans
# (buffers of them mismatch their executables): these have names and scalar types only.
UNUSABLE_DTYPES = tuple(dt for dt in (float6_e2m3fn, float6_e3m2fn, *INTN_DTYPES)
                        if dt.name in ("float6_e2m3fn", "float6_e3m2fn", "int1", "uint1"))

SUPPORTED_DTYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                    bfloat16, float16, float32, float64, complex64, complex128,
                    *(dt for dt in (*SMALL_FLOAT_DTYPES, *INTN_DTYPES)
                      if dt not in UNUSABLE_DTYPES))
_SUPPORTED = frozenset(SUPPORTED_DTYPES)

_TO_32 = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}

# Dtypes of Python scalars before canonicalization; int, float and complex values are weak.
_PY_SCALAR_DTYPES = {bool: bool_, int: int64, float: float64, complex: complex128}
_WEAK_SCALAR_TYPES = (int, float, complex)


class TypePromotionError(ValueError):
    """Raised when dtypes have no common type on the promotion lattice."""


def default_int_dtype():
    return int64 if config.enable_x64 else int32


_DEFAULT_INT_BOUNDS = {False: (-2**31, 2**31 - 1), True: (-2**63, 2**63 - 1)}


def fits_default_int(x: int) -> bool:
    """Whether the Python int `x` fits the default integer type (JAX converts it so)."""
    low, high = _DEFAULT_INT_BOUNDS[config.enable_x64]
    return low <= x <= high


def default_uint_dtype():
    return uint64 if config.enable_x64 else uint32


def default_float_dtype():
    return float64 if config.enable_x64 else float32


def default_complex_dtype():
    return complex128 if config.enable_x64 else complex64


def _default_of_kind(kind: str) -> np.dtype:
    return {"b": bool_, "i": default_int_dtype(), "u": default_uint_dtype(),
            "f": default_float_dtype(), "c": default_complex_dtype()}[kind]


def _kind(dt: np.dtype) -> str:
    """NumPy's kind letter, with bfloat16 and the narrow ml_dtypes types (kind 'V' in NumPy)
    counted as floats or integers."""
    if dt.kind != "V":
        return dt.kind
    return "f" if dt == bfloat16 else _NARROW_KINDS.get(dt, "V")


def canonicalize_dtype(dtype, allow_extended: bool = False) -> np.dtype:
    """The dtype arrays of `dtype` get: 64-bit types become 32-bit unless x64 is enabled.

    float0 (the dtype of tangents of integers) is its own canonical form, as in JAX.
    `allow_extended` is accepted for JAX's signature; fluxion has no extended dtypes."""
    return _canonicalize(np.dtype(dtype) if not isinstance(dtype, np.dtype) else dtype,
                         config.enable_x64)


@functools.lru_cache(maxsize=None)
def _canonicalize(dtype: np.dtype, x64: bool) -> np.dtype:
    if dtype == float0:
        return dtype
    if dtype not in _SUPPORTED:
        if dtype in UNUSABLE_DTYPES:
            raise TypeError(f"fluxion does not support arrays of dtype {dtype}: XLA CPU in "
                            "jaxlib 0.10.2 cannot hold them (as in JAX)")
        raise TypeError(f"fluxion does not support dtype {dtype}")
    return dtype if x64 else _TO_32.get(dtype, dtype)


def check_user_dtype(requested, fun_name: str = "") -> np.dtype:
    """A dtype the user asked for (a dtype, its name, a scalar type or a Python type), in
    canonical form. As in JAX, an explicit 64-bit dtype with x64 disabled warns and is
    narrowed; Python types stand for their kind's default and never warn."""
    if type(requested) in (bool, int, float, complex):  # a value, not a type
        raise TypeError(f"Cannot interpret '{requested}' as a data type")
    if isinstance(requested, np.ndarray) and requested.ndim:
        raise TypeError("Cannot construct a dtype from an array")
    wanted = dtype(requested)
    canonical = canonicalize_dtype(wanted)
    if canonical != wanted:
        where = f" requested in {fun_name}" if fun_name else ""
        warnings.warn(f"Explicitly requested dtype {wanted}{where} is not available, and will "
                      f"be truncated to dtype {canonical.name}. To enable more dtypes, set the "
                      "jax_enable_x64 configuration option or the JAX_ENABLE_X64 shell "
                      "environment variable. See https://github.com/jax-ml/jax#current-gotchas "
                      "for more.", UserWarning, stacklevel=user_stacklevel())
    return canonical


def dtype(x, canonicalize: bool = False) -> np.dtype:
    """The dtype of a value, dtype-like, or Python scalar type.

    Python scalars and their types get the (canonical) default dtype of their kind; other
    dtypes are canonicalized only if `canonicalize` is set.
    """
    if x is None:
        raise ValueError("Invalid argument to dtype: None.")
    if isinstance(x, type) and x in _PY_SCALAR_DTYPES:
        return canonicalize_dtype(_PY_SCALAR_DTYPES[x])
    if type(x) in _PY_SCALAR_DTYPES:
        return canonicalize_dtype(_PY_SCALAR_DTYPES[type(x)])
    attr = getattr(x, "dtype", None)
    if isinstance(attr, np.dtype):  # arrays, NumPy scalars, and scalar types like jnp.float32
        dt = attr
    else:
        base = python_scalar_base(x)  # a subclass of int/float/complex (an IntEnum member)
        if base is not None:
            return canonicalize_dtype(_PY_SCALAR_DTYPES[base])
        try:
            dt = np.dtype(x)
        except TypeError as e:
            raise TypeError(f"Cannot determine dtype of {x!r}") from e
    return canonicalize_dtype(dt) if canonicalize else dt


def python_scalar_base(x):
    """int, float or complex for an instance of a subclass of one (an IntEnum member), as
    JAX treats them; None for anything else (NumPy scalars included)."""
    if isinstance(x, np.generic):
        return None
    for base in (int, float, complex):
        if isinstance(x, base):
            return base
    return None


def is_python_scalar(x) -> bool:
    return type(x) in _PY_SCALAR_DTYPES or python_scalar_base(x) is not None


def is_host_value(x) -> bool:
    """A NumPy array or scalar, or a Python scalar: a value whose type follows the x64 flag
    when it becomes an array."""
    return isinstance(x, (np.ndarray, np.generic)) or is_python_scalar(x)


def is_weakly_typed(x) -> bool:
    """Python int, float and complex values (and their subclasses') are weak; arrays carry a
    weak_type flag."""
    if type(x) in _WEAK_SCALAR_TYPES:
        return True
    weak = getattr(x, "weak_type", None)
    if weak is None:
        return python_scalar_base(x) is not None and type(x) is not bool
    return bool(weak)


class extended(np.generic):
    """Scalar category of extended dtypes (PRNG key dtypes): only for `issubdtype`."""


class prng_key(extended):
    """Scalar category of PRNG key dtypes: `issubdtype(key.dtype, prng_key)` holds."""


def _is_extended(x) -> bool:
    """Whether `x` is an extended dtype (a PRNG key dtype) or one of their categories."""
    return (isinstance(x, type) and issubclass(x, extended)) or hasattr(x, "_impl_name")


def _extended_issubdtype(a, b) -> bool:
    if hasattr(a, "_impl_name"):  # a key dtype: in the categories prng_key and extended
        return a == b or (isinstance(b, type) and b in (prng_key, extended, np.generic))
    if isinstance(a, type) and issubclass(a, extended):
        return isinstance(b, type) and issubclass(a, b)
    return False


def itemsize_bits(dtype) -> int:
    """The number of bits of one element of `dtype` (4 for int4; 8 for bool)."""
    if dtype is None:
        raise ValueError("dtype cannot be None.")
    if np.dtype(dtype) == bool_:
        return 8  # the physical layout of booleans
    if issubdtype(dtype, np.integer):
        return iinfo(dtype).bits
    if issubdtype(dtype, np.floating):
        return finfo(dtype).bits
    if issubdtype(dtype, np.complexfloating):
        return 2 * finfo(dtype).bits
    raise ValueError(f"unexpected input: {dtype=}")


def issubdtype(a, b) -> bool:
    """NumPy's issubdtype, extended so that bfloat16 is a floating type."""
    if _is_extended(a) or _is_extended(b):
        return _extended_issubdtype(a, b)
    a = a if isinstance(a, np.dtype) or (isinstance(a, type) and issubclass(a, np.generic)) else np.dtype(a)
    narrow = np.dtype(a) if not isinstance(a, np.dtype) and a in _NARROW_TYPES else a
    if isinstance(narrow, np.dtype) and narrow in _NARROW_KINDS:
        # The narrow types stand in NumPy's hierarchy where their kind puts them.
        b_dtype = _as_concrete_dtype(b)
        if b_dtype is not None:
            return narrow == b_dtype
        stand_in = {"f": np.float16, "i": np.int8, "u": np.uint8}[_NARROW_KINDS[narrow]]
        return bool(np.issubdtype(stand_in, b))
    if isinstance(b, np.dtype) and b in _NARROW_KINDS or b in _NARROW_TYPES:
        return False
    if isinstance(a, np.dtype) and a == bfloat16:
        a = np.dtype(np.float16)  # stands in for its category
        if b in (bfloat16, ml_dtypes.bfloat16):
            return True
        if b in (float16, np.float16):
            return False
    if isinstance(b, np.dtype) and b == bfloat16:
        return False
    return bool(np.issubdtype(a, b))


_NARROW_TYPES = frozenset(dt.type for dt in (*SMALL_FLOAT_DTYPES, *INTN_DTYPES))


def _as_concrete_dtype(b):
    """b as a dtype when it names one concrete dtype (not a category like np.floating)."""
    if isinstance(b, np.dtype):
        return b
    if isinstance(b, type) and issubclass(b, np.generic) and not b.__subclasses__() and \
            b not in (np.generic,):
        return np.dtype(b)
    if isinstance(b, str):
        return np.dtype(b)
    return None


def is_float(dt) -> bool:
    return _kind(np.dtype(dt)) == "f"


def is_inexact(dt) -> bool:
    return _kind(np.dtype(dt)) in "fc"


def is_complex(dt) -> bool:
    return np.dtype(dt).kind == "c"


def is_integer(dt) -> bool:
    return _kind(np.dtype(dt)) in "iu"


def finfo(dt):
    return ml_dtypes.finfo(np.dtype(dt))


def iinfo(dt):
    return ml_dtypes.iinfo(np.dtype(dt))


# ---------------------------------------------------------------------------------------------
# The promotion lattice. Nodes are dtypes or the weak kinds "i*", "f*", "c*" (Python int,
# float, complex, and weak-typed arrays); a type promotes to every node reachable from it.
# Join = least upper bound.

# The dtype each weak kind stands for before canonicalization (that of the Python scalar type).
_WEAK_NODE_DTYPE = {"i*": int64, "f*": float64, "c*": complex128}


def _lattice_edges(x64: bool) -> dict:
    return {
        bool_: ["i*"],
        "i*": [uint8, int8, *INTN_DTYPES],
        uint8: [int16, uint16], uint16: [int32, uint32],
        # Without x64, uint32 and int32 meet at int32 rather than forming an int64.
        uint32: [int64, uint64] if x64 else [int32, uint64],
        uint64: ["f*"],
        int8: [int16], int16: [int32], int32: [int64], int64: ["f*"],
        "f*": ["c*", bfloat16, float16, *SMALL_FLOAT_DTYPES],
        bfloat16: [float32], float16: [float32], float32: [float64, complex64], float64: [complex128],
        "c*": [complex64], complex64: [complex128], complex128: [],
        # The narrow types are leaves: they promote with weak values only.
        **{dt: [] for dt in (*SMALL_FLOAT_DTYPES, *INTN_DTYPES)},
    }


def _strict_lattice_edges() -> dict:
    """`jax_numpy_dtype_promotion='strict'`: weak values promote to any type of their kind
    (or a wider kind); distinct strong types never promote to one another."""
    edges = {node: [] for node in _lattice_edges(True)}
    edges["i*"] = ["f*", *(dt for dt in edges if isinstance(dt, np.dtype) and _kind(dt) in "iu")]
    edges["f*"] = ["c*", *(dt for dt in edges if isinstance(dt, np.dtype) and _kind(dt) == "f")]
    edges["c*"] = [complex64, complex128]
    return edges


def _upper_bounds_of(edges: dict) -> dict:
    """Each node's upper bounds: itself and every node reachable along `edges`."""
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


# Keyed by x64 (the standard lattice) or "strict".
_UPPER_BOUNDS = {x64: _upper_bounds_of(_lattice_edges(x64)) for x64 in (False, True)}
_UPPER_BOUNDS["strict"] = _upper_bounds_of(_strict_lattice_edges())


def _lattice() -> object:
    """The key of the promotion lattice in force: "strict", or the x64 flag."""
    return "strict" if config.numpy_dtype_promotion == "strict" else config.enable_x64


def _node_name(n) -> str:
    return str({"i*": int, "f*": float, "c*": complex}.get(n, n))


@functools.lru_cache(maxsize=4096)
def _least_upper_bound(lattice, *nodes):
    upper = _UPPER_BOUNDS[lattice]
    for n in nodes:
        if n not in upper:
            raise ValueError(f"dtype={n!r} is not a valid dtype for type promotion.")
    common = set.intersection(*(upper[n] for n in nodes))
    # A node that is one of the inputs and above all the others is the bound; otherwise the
    # bound is the common upper bound that every other common upper bound is above.
    least = (common & set(nodes)) or {c for c in common if common <= upper[c]}
    if len(least) != 1:
        if lattice == "strict":
            names = tuple(_node_name(n) for n in nodes)
            raise TypePromotionError(
                f"Input dtypes {names} have no available implicit dtype promotion path when "
                "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the desired "
                "output type, or set jax_numpy_dtype_promotion=standard.")
        names = ", ".join(str(n) for n in nodes)
        raise TypePromotionError(f"Input dtypes ({names}) have no available implicit dtype "
                                 "promotion path. Try explicitly casting inputs to the desired "
                                 "output type.")
    return least.pop()


def _node(dt: np.dtype, weak: bool):
    """The lattice node of a (dtype, weak_type) pair; weak bools are just bools."""
    if not weak or dt == bool_:
        return dt
    return {"i": "i*", "u": "i*", "f": "f*", "c": "c*"}[_kind(dt)]


def _node_dtype(node, x64: bool) -> np.dtype:
    """The canonical dtype a promotion result stands for (a weak kind: its default dtype)."""
    return _canonicalize(_WEAK_NODE_DTYPE.get(node, node), x64)


def _dtype_and_weak(x) -> tuple[np.dtype, bool]:
    """(dtype, weak_type) of one input of promotion: a value, a dtype-like, or a Python scalar
    type. Everything but arrays and tracers (whose dtype is already fixed) is canonicalized."""
    aval = getattr(x, "aval", None)
    if aval is not None and hasattr(aval, "weak_type"):
        return aval.dtype, aval.weak_type
    if type(x) in _PY_SCALAR_DTYPES:
        return canonicalize_dtype(_PY_SCALAR_DTYPES[type(x)]), type(x) is not bool
    if any(x is t for t in _WEAK_SCALAR_TYPES):
        return canonicalize_dtype(_PY_SCALAR_DTYPES[x]), True
    base = python_scalar_base(x)
    if base is not None:
        return canonicalize_dtype(_PY_SCALAR_DTYPES[base]), True
    dt = dtype(x)
    if dt not in _SUPPORTED:
        raise TypeError(f"Value {x!r} with dtype {dt} is not a valid fluxion array type. Only "
                        "arrays of numeric types are supported.")
    return canonicalize_dtype(dt), False


@functools.lru_cache(maxsize=4096)
def _promote(inputs: tuple, x64: bool, strict: bool = False) -> tuple[np.dtype, bool]:
    dts = {dt for dt, _ in inputs}
    all_weak = all(weak for _, weak in inputs)
    lattice = "strict" if strict else x64
    if len(inputs) == 1:
        dt, weak = inputs[0]
    elif len(dts) == 1 and not all_weak:
        dt, weak = inputs[0][0], False
    elif all_weak and not strict:
        # Join the dtypes themselves and keep the result weak: two weak int16s give a weak
        # int16, not a default-width int.
        dt, weak = _node_dtype(_least_upper_bound(lattice, *dts), x64), True
    else:
        bound = _least_upper_bound(lattice, *{_node(dt, weak) for dt, weak in inputs})
        dt, weak = _node_dtype(bound, x64), isinstance(bound, str)
    return dt, weak and dt != bool_


def result_type_with_weak(*args) -> tuple[np.dtype, bool]:
    """(dtype, weak_type) that the arguments of an operation are promoted to (JAX's
    `lattice_result_type`); weak results keep the width the lattice gives."""
    if not args:
        raise ValueError("at least one array or dtype is required")
    return _promote(tuple(_dtype_and_weak(a) for a in args), config.enable_x64,
                    config.numpy_dtype_promotion == "strict")


def result_type(*args, return_weak_type_flag: bool = False):
    """`jnp.result_type`: the canonical dtype that the arguments promote to.

    `None` stands for the default float dtype; a weakly typed result is reported as the
    default dtype of its kind.
    """
    dt, weak = result_type_with_weak(*(default_float_dtype() if a is None else a for a in args))
    if weak:
        dt = _default_of_kind(_kind(dt))
    return (dt, weak) if return_weak_type_flag else dt


def promote_types(a, b) -> np.dtype:
    """`jnp.promote_types`: the dtype two dtypes promote to, without canonicalization.

    Python's int, float and complex count as weak types, whose join with themselves is
    int64, float64 and complex128 (as `np.dtype(int)` etc.).
    """
    nodes = [_promote_types_node(t) for t in (a, b)]
    bound = _least_upper_bound(_lattice(), *nodes)
    return _WEAK_NODE_DTYPE.get(bound, bound)


def _promote_types_node(t):
    for scalar_type, node in ((int, "i*"), (float, "f*"), (complex, "c*")):
        if t is scalar_type:
            return node
    return np.dtype(t)


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
