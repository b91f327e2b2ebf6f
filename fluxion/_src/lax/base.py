"""Helpers for defining primitives: one call gives a primitive its eager impl, abstract eval
and lowering; the n-ary elementwise family shares its shape, dtype and weak-type rules."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray
from fluxion._src.dispatch import default_impl


def standard_primitive(name: str, abstract_eval: Callable, lowering_rule: Callable | None = None,
                       multiple_results: bool = False) -> core.Primitive:
    """A primitive run eagerly by compiling its lowering, with the given rules."""
    prim = core.Primitive(name)
    prim.multiple_results = multiple_results
    prim.def_abstract_eval(abstract_eval)
    default_impl(prim)
    if lowering_rule is not None:
        lowering.register_lowering(prim, lowering_rule)
    return prim


# ---------------------------------------------------------------------------------------------
# dtype predicates used by the elementwise rules

def _is_float(dt): return dtypes.is_float(dt)
def _is_complex(dt): return dt.kind == "c"
def _is_int(dt): return dt.kind in "iu"
def _is_bool(dt): return dt == dtypes.bool_


ANY = ("any", lambda dt: dt != dtypes.float0)
NUMBER = ("number", lambda dt: dt.kind in "iufc" or dt == dtypes.bfloat16)
FLOAT = ("floating", _is_float)
INEXACT = ("inexact", lambda dt: _is_float(dt) or _is_complex(dt))
COMPLEX = ("complex", _is_complex)
INT = ("integer", _is_int)
INT_OR_BOOL = ("integer or boolean", lambda dt: _is_int(dt) or _is_bool(dt))
SIGNED_OR_FLOAT = ("signed number", lambda dt: dt.kind in "ifc" or dt == dtypes.bfloat16)
REAL = ("real number", lambda dt: dt.kind in "iuf" or dt == dtypes.bfloat16)
FLOAT_OR_INT = REAL
ORDERED = ("ordered", lambda dt: dt.kind in "iufb" or dt == dtypes.bfloat16)


def check_dtype(opname: str, aval: ShapedArray, allowed, position: int | None = None) -> None:
    desc, pred = allowed
    if not pred(aval.dtype):
        where = f" (operand {position})" if position is not None else ""
        raise TypeError(f"{opname} does not accept dtype {aval.dtype.name}{where}; it accepts "
                        f"{desc} dtypes.")


def broadcasting_shape(opname: str, avals: Sequence[ShapedArray]) -> tuple:
    """Operands must have equal shapes, except that rank-0 operands broadcast."""
    shapes = {a.shape for a in avals if a.shape != ()}
    if len(shapes) > 1:
        ranks = {len(s) for s in shapes}
        if len(ranks) > 1:
            raise TypeError(f"{opname}: arrays must have the same number of dimensions, got "
                            f"{', '.join(str(a.shape) for a in avals)}")
        raise TypeError(f"{opname} got incompatible shapes for broadcasting: "
                        f"{', '.join(str(a.shape) for a in avals)}")
    return next(iter(shapes)) if shapes else ()


def naryop_abstract_eval(opname: str, operand_dtypes: Sequence, result_dtype: Callable | None = None,
                         same_dtypes: bool = True):
    """Abstract eval rule for an elementwise op: checks dtypes, equal dtypes, shapes."""
    def rule(*avals, **params):
        for i, (aval, allowed) in enumerate(zip(avals, operand_dtypes)):
            check_dtype(opname, aval, allowed, i if len(avals) > 1 else None)
        if same_dtypes and len({a.dtype for a in avals}) > 1:
            got = ", ".join(a.dtype.name for a in avals)
            raise TypeError(f"lax.{opname} requires arguments to have the same dtypes, got {got}.")
        shape = broadcasting_shape(opname, avals)
        dtype = result_dtype(*avals, **params) if result_dtype else avals[0].dtype
        weak = all(a.weak_type for a in avals) and dtype != dtypes.bool_
        return ShapedArray(shape, dtype, weak)
    return rule


def broadcast_operands(ctx, operands) -> list:
    """Broadcast rank-0 operands to the output shape (for elementwise lowerings)."""
    shape = ctx.avals_out[0].shape
    return [x if x.shape == shape else ctx.broadcast_in_dim(x, shape, ()) for x in operands]


def hlo_elementwise(op_name: str) -> Callable:
    """Lowering that emits the StableHLO (or CHLO) op `op_name` on broadcast operands."""
    def rule(ctx, *operands, **params):
        return ctx.op1(op_name, broadcast_operands(ctx, operands), ctx.avals_out[0])
    return rule


def naryop(name: str, operand_dtypes: Sequence, lowering_rule: Callable | str,
           result_dtype: Callable | None = None, same_dtypes: bool = True) -> core.Primitive:
    rule = hlo_elementwise(lowering_rule) if isinstance(lowering_rule, str) else lowering_rule
    return standard_primitive(name, naryop_abstract_eval(name, operand_dtypes, result_dtype, same_dtypes), rule)


def unop(name: str, allowed, lowering_rule, result_dtype=None) -> core.Primitive:
    return naryop(name, [allowed], lowering_rule, result_dtype)


def binop(name: str, allowed, lowering_rule, result_dtype=None) -> core.Primitive:
    return naryop(name, [allowed, allowed], lowering_rule, result_dtype)

