"""Contractions: dot_general."""
from __future__ import annotations

import enum

import numpy as np

from fluxion._src import dtypes
from fluxion._src.core import ShapedArray
from fluxion._src.lax.base import check_dtype, standard_primitive


class Precision(enum.Enum):
    """Precision of matmul-like ops on accelerators (`lax.Precision`)."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    def __repr__(self):
        return f"Precision.{self.name}"

    def __str__(self):
        return self.name


def canonicalize_precision(precision):
    """None, a Precision or a pair of them (strings accepted) -> None or a pair."""
    if precision is None:
        return None
    if isinstance(precision, str):
        precision = Precision[precision.upper()] if precision.upper() in Precision.__members__ else {
            "bfloat16": Precision.DEFAULT, "tensorfloat32": Precision.HIGH,
            "float32": Precision.HIGHEST}[precision.lower()]
    if isinstance(precision, Precision):
        return (precision, precision)
    if isinstance(precision, (tuple, list)) and len(precision) == 2:
        return tuple(canonicalize_precision(p)[0] if p is not None else Precision.DEFAULT
                     for p in precision)
    raise ValueError(f"precision must be None, a Precision, a string or a pair of them; got {precision!r}")


_NUMBER_OR_BOOL = ("number or boolean", lambda dt: dt.kind in "iufcb" or dt == dtypes.bfloat16)


def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision=None,
                               preferred_element_type=None, out_sharding=None):
    (lc, rc), (lb, rb) = dimension_numbers
    check_dtype("dot_general", lhs, _NUMBER_OR_BOOL, 0)
    if lhs.dtype != rhs.dtype and preferred_element_type is None:
        raise TypeError(f"dot_general requires operands of the same dtype, got {lhs.dtype.name} "
                        f"and {rhs.dtype.name}.")
    for name, dims, aval in (("lhs contracting", lc, lhs), ("rhs contracting", rc, rhs),
                             ("lhs batch", lb, lhs), ("rhs batch", rb, rhs)):
        if any(not 0 <= d < aval.ndim for d in dims) or len(set(dims)) != len(dims):
            raise TypeError(f"dot_general requires {name} dimensions to be distinct and in range "
                            f"for rank {aval.ndim}; got {tuple(dims)}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError(f"dot_general requires equal numbers of lhs and rhs contracting and batch "
                        f"dimensions, got {dimension_numbers}")
    if [lhs.shape[d] for d in lb] != [rhs.shape[d] for d in rb]:
        raise TypeError(f"dot_general requires lhs batch dimensions and rhs batch dimensions to "
                        f"have the same shape, got {[lhs.shape[d] for d in lb]} and "
                        f"{[rhs.shape[d] for d in rb]}.")
    if [lhs.shape[d] for d in lc] != [rhs.shape[d] for d in rc]:
        raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                        f"got {[lhs.shape[d] for d in lc]} and {[rhs.shape[d] for d in rc]}.")
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    shape = (tuple(lhs.shape[d] for d in lb) + tuple(lhs.shape[d] for d in lfree)
             + tuple(rhs.shape[d] for d in rfree))
    dtype = np.dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type and preferred_element_type is None)


def _dot_general_lowering(ctx, lhs, rhs, *, dimension_numbers, precision=None,
                          preferred_element_type=None, out_sharding=None):
    out_dtype = ctx.avals_out[0].dtype
    names = None if precision is None else [p.name for p in precision]
    if lhs.dtype == dtypes.bool_:
        # XLA has no boolean dot: compute in int32 and compare.
        li, ri = ctx.convert(lhs, np.int32), ctx.convert(rhs, np.int32)
        out = ctx.dot_general(li, ri, dimension_numbers, names, np.int32)
        return ctx.convert(out, out_dtype) if out_dtype != dtypes.bool_ else ctx.compare(
            out, ctx.constant(0, np.int32, out.shape), "NE")
    if rhs.dtype != lhs.dtype:
        rhs = ctx.convert(rhs, lhs.dtype)
    return ctx.dot_general(lhs, rhs, dimension_numbers, names, out_dtype)


dot_general_p = standard_primitive("dot_general", _dot_general_abstract_eval, _dot_general_lowering)
