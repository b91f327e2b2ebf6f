"""Helpers for defining primitives: one call gives a primitive its eager impl, abstract eval
and lowering; the n-ary elementwise family shares its shape, dtype and weak-type rules."""
from __future__ import annotations

from typing import Callable, Sequence

from fluxion._src import core, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray
from fluxion._src import dispatch  # noqa: F401  (eager execution of primitives without an impl)


def standard_primitive(name: str, abstract_eval: Callable, lowering_rule: Callable | None = None,
                       multiple_results: bool = False) -> core.Primitive:
    """A primitive run eagerly by compiling its lowering, with the given rules."""
    prim = core.Primitive(name)
    prim.multiple_results = multiple_results
    prim.def_abstract_eval(abstract_eval)
    if lowering_rule is not None:
        lowering.register_lowering(prim, lowering_rule)
    return prim


# ---------------------------------------------------------------------------------------------
# Accepted dtype sets: (the NumPy categories they stand for, as JAX names them; predicate).

def _is_bool(dt): return dt == dtypes.bool_
def _is_int(dt): return dtypes.is_integer(dt)  # int2/int4 are kind 'V' to NumPy
def _is_signed_int(dt): return dtypes.is_integer(dt) and dtypes._kind(dt) == "i"
def _is_float(dt): return dtypes.is_float(dt)
def _is_complex(dt): return dt.kind == "c"


ANY = ("integer, floating, complexfloating, bool",
       lambda dt: _is_int(dt) or _is_float(dt) or _is_complex(dt) or _is_bool(dt))
NUMBER = ("integer, floating, complexfloating",
          lambda dt: _is_int(dt) or _is_float(dt) or _is_complex(dt))
FLOAT = ("floating", _is_float)
INEXACT = ("floating, complexfloating", lambda dt: _is_float(dt) or _is_complex(dt))
COMPLEX = ("complexfloating", _is_complex)
INT = ("integer", _is_int)
INT_OR_BOOL = ("integer, bool", lambda dt: _is_int(dt) or _is_bool(dt))
SIGNED_OR_INEXACT = ("signedinteger, floating, complexfloating",
                     lambda dt: _is_signed_int(dt) or _is_float(dt) or _is_complex(dt))
REAL = ("integer, floating", lambda dt: _is_int(dt) or _is_float(dt))
ORDERED = ("integer, floating, bool", lambda dt: _is_int(dt) or _is_float(dt) or _is_bool(dt))
# The element types `complex` combines (and `conj` accepts besides complex types).
COMPLEX_PARTS = ("float32, float64", lambda dt: dt in (dtypes.float32, dtypes.float64))
COMPLEX_OR_PARTS = ("float32, float64, complexfloating",
                    lambda dt: _is_complex(dt) or dt in (dtypes.float32, dtypes.float64))


def check_dtype(opname: str, aval: ShapedArray, allowed, position: int | None = None) -> None:
    """TypeError unless `aval`'s dtype is in the `allowed` set (worded as JAX words it)."""
    desc, pred = allowed
    if aval.dtype == dtypes.float0:
        where = f" at position {position}" if position is not None else ""
        raise TypeError(f"Called {opname} with a float0 array{where}. float0s do not support any "
                        "operations by design, because they are not compatible with non-trivial "
                        "vector spaces. No implicit dtype conversion is done.")
    if not pred(aval.dtype):
        if position is None:
            raise TypeError(f"{opname} does not accept dtype {aval.dtype.name}. Accepted dtypes "
                            f"are subtypes of {desc}.")
        raise TypeError(f"{opname} does not accept dtype {aval.dtype.name} at position "
                        f"{position}. Accepted dtypes at position {position} are subtypes of "
                        f"{desc}.")


def check_same_dtypes(opname: str, avals: Sequence[ShapedArray]) -> None:
    if len({a.dtype for a in avals}) > 1:
        got = ", ".join(a.dtype.name for a in avals)
        raise TypeError(f"lax.{opname} requires arguments to have the same dtypes, got {got}.")


def broadcasting_shape(opname: str, avals: Sequence[ShapedArray]) -> tuple:
    """The result shape of an elementwise op: rank-0 operands broadcast to any shape, and the
    others must have one rank and, per dimension, equal sizes or size 1."""
    shapes = [a.shape for a in avals if a.shape != ()]
    if not shapes:
        return ()
    ranks = sorted({len(s) for s in shapes})
    if len(ranks) > 1:
        raise TypeError(f"{opname}: arrays must have the same number of dimensions, got "
                        f"{{{', '.join(map(str, ranks))}}}")
    result = []
    for sizes in zip(*shapes):
        not_one = {d for d in sizes if d != 1}
        if len(not_one) > 1:
            raise TypeError(f"{opname} got incompatible shapes for broadcasting: "
                            f"{', '.join(str(s) for s in shapes)}.")
        result.append(not_one.pop() if not_one else 1)
    return tuple(result)


def naryop_abstract_eval(opname: str, operand_dtypes: Sequence, result_dtype: Callable | None = None,
                         same_dtypes: bool = True):
    """Abstract eval rule for an elementwise op: checks dtypes, equal dtypes, shapes. The result
    is weakly typed if every operand is."""
    def rule(*avals, **params):
        for i, (aval, allowed) in enumerate(zip(avals, operand_dtypes)):
            check_dtype(opname, aval, allowed, i if len(avals) > 1 else None)
        if same_dtypes:
            check_same_dtypes(opname, avals)
        shape = broadcasting_shape(opname, avals)
        dtype = result_dtype(*avals, **params) if result_dtype else avals[0].dtype
        return ShapedArray(shape, dtype, all(a.weak_type for a in avals))
    return rule


def broadcast_operands(ctx, operands) -> list:
    """Broadcast operands to the output shape (rank-0 ones, and size-1 dimensions)."""
    shape = ctx.avals_out[0].shape
    return [x if x.shape == shape else
            ctx.broadcast_in_dim(x, shape, range(len(shape)) if x.shape else ())
            for x in operands]


def hlo_elementwise(op_name: str) -> Callable:
    """Lowering that emits the StableHLO (or CHLO) op `op_name` on broadcast operands."""
    def rule(ctx, *operands, **params):
        return ctx.op1(op_name, broadcast_operands(ctx, operands), ctx.avals_out[0])
    return rule


# every primitive made by naryop (their sharding rule is broadcasting's: sharding_types.py)
elementwise_primitives: list = []


def naryop(name: str, operand_dtypes: Sequence, lowering_rule: Callable | str,
           result_dtype: Callable | None = None, same_dtypes: bool = True) -> core.Primitive:
    rule = hlo_elementwise(lowering_rule) if isinstance(lowering_rule, str) else lowering_rule
    prim = standard_primitive(name, naryop_abstract_eval(name, operand_dtypes, result_dtype,
                                                         same_dtypes), rule)
    elementwise_primitives.append(prim)
    return prim


def unop(name: str, allowed, lowering_rule, result_dtype=None) -> core.Primitive:
    return naryop(name, [allowed], lowering_rule, result_dtype)


def binop(name: str, allowed, lowering_rule, result_dtype=None) -> core.Primitive:
    return naryop(name, [allowed, allowed], lowering_rule, result_dtype)
