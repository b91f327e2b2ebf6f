"""Reductions over axes: reduce_sum, reduce_prod, reduce_max, reduce_min, reduce_and/or/xor."""
from __future__ import annotations

import numpy as np

from fluxion._src import dtypes
from fluxion._src.core import ShapedArray
from fluxion._src.lax.base import ANY, INT_OR_BOOL, NUMBER, check_dtype, standard_primitive


def _reduced_shape(opname, x, axes) -> tuple:
    axes = tuple(axes)
    if any(not 0 <= a < x.ndim for a in axes):
        raise ValueError(f"{opname}: reduction axes {axes} out of range for an array of rank {x.ndim}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"{opname}: duplicate value in 'axes': {axes}")
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def identity_value(kind: str, dtype) -> np.ndarray:
    """The identity element of a monoid (`add`, `mul`, `max`, `min`, `and`, `or`, `xor`)."""
    dtype = np.dtype(dtype)
    if kind in ("add", "or", "xor"):
        return np.zeros((), dtype)
    if kind == "mul":
        return np.ones((), dtype)
    if kind == "and":
        return np.array(-1 if dtype.kind == "i" else True if dtype == dtypes.bool_ else
                        np.iinfo(dtype).max, dtype)
    if kind in ("max", "min"):
        sign = -1 if kind == "max" else 1
        if dtype == dtypes.bool_:
            return np.array(kind == "min", dtype)
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            return np.array(info.min if kind == "max" else info.max, dtype)
        return np.array(sign * np.inf, dtype)
    raise ValueError(kind)


_HLO_OPS = {"add": "stablehlo.add", "mul": "stablehlo.multiply", "max": "stablehlo.maximum",
            "min": "stablehlo.minimum", "and": "stablehlo.and", "or": "stablehlo.or",
            "xor": "stablehlo.xor"}


def emit_reduce(ctx, operands, inits, axes, body) -> list:
    """A `stablehlo.reduce` over `axes`; `body(block, accs, xs)` returns the new accumulators."""
    scalar_avals = [ShapedArray((), x.dtype) for x in operands]
    region = ctx.new_block(scalar_avals + scalar_avals)
    n = len(operands)
    region.ret(body(region, region.args[:n], region.args[n:]))
    out_shape = tuple(d for i, d in enumerate(operands[0].shape) if i not in axes)
    from fluxion._src.compiler.hlo import i64_array
    return ctx.op("stablehlo.reduce", list(operands) + list(inits),
                  [ShapedArray(out_shape, x.dtype) for x in operands],
                  {"dimensions": i64_array(sorted(axes))}, [region])


def monoid_reduce(ctx, x, axes, kind: str):
    init = ctx.constant(identity_value(kind, x.dtype), x.dtype)
    op = _HLO_OPS[kind]
    return emit_reduce(ctx, [x], [init], axes,
                       lambda b, accs, xs: [b.op1(op, [accs[0], xs[0]], accs[0].aval)])[0]


def _reduction(name: str, kind: str, allowed):
    def abstract_eval(x, *, axes, out_sharding=None):
        check_dtype(name, x, allowed)
        return ShapedArray(_reduced_shape(name, x, axes), x.dtype, x.weak_type)

    def lower(ctx, x, *, axes, out_sharding=None):
        return monoid_reduce(ctx, x, axes, kind)

    return standard_primitive(name, abstract_eval, lower)


reduce_sum_p = _reduction("reduce_sum", "add", NUMBER)
reduce_prod_p = _reduction("reduce_prod", "mul", NUMBER)
reduce_max_p = _reduction("reduce_max", "max", ANY)
reduce_min_p = _reduction("reduce_min", "min", ANY)
reduce_and_p = _reduction("reduce_and", "and", INT_OR_BOOL)
reduce_or_p = _reduction("reduce_or", "or", INT_OR_BOOL)
reduce_xor_p = _reduction("reduce_xor", "xor", INT_OR_BOOL)
