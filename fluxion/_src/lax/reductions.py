"""Reductions over axes: reduce_sum, reduce_prod, reduce_max, reduce_min, reduce_and/or/xor."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.config import config
from fluxion._src.core import ShapedArray
from fluxion._src.lax.base import ANY, INT_OR_BOOL, NUMBER, check_dtype, standard_primitive
from fluxion._src.lax.elementwise import emit_max_min


def _reduced_shape(opname, x, axes) -> tuple:
    axes = tuple(axes)
    if any(not 0 <= a < x.ndim for a in axes):
        raise ValueError(f"{opname}: reduction axes {axes} out of range for an array of rank {x.ndim}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"{opname}: duplicate value in 'axes' of reduction: {axes}")
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def identity_value(kind: str, dtype) -> np.ndarray:
    """The identity element of a monoid (`add`, `mul`, `max`, `min`, `and`, `or`, `xor`)."""
    dtype = np.dtype(dtype)
    if kind in ("add", "or", "xor"):
        return np.zeros((), dtype)
    if kind == "mul":
        return np.ones((), dtype)
    if kind == "and":
        return np.array(-1 if dtypes._kind(dtype) == "i" else True if dtype == dtypes.bool_ else
                        ml_dtypes.iinfo(dtype).max, dtype)
    if kind in ("max", "min"):
        sign = -1 if kind == "max" else 1
        if dtype == dtypes.bool_:
            return np.array(kind == "min", dtype)
        if dtypes.is_integer(dtype):
            info = ml_dtypes.iinfo(dtype)  # also int2/int4
            return np.array(info.min if kind == "max" else info.max, dtype)
        extreme = np.array(sign * np.inf, dtype)
        if not np.isinf(extreme.real.astype(np.float32)):
            # Narrow floats without infinities (float8_e4m3fn, ...): their largest finite value.
            info = ml_dtypes.finfo(dtype)
            extreme = np.array(info.min if kind == "max" else info.max, dtype)
        return extreme
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
    return emit_reduce(ctx, [x], [init], axes,
                       lambda b, accs, xs: [monoid_op(b, accs[0], xs[0], kind)])[0]


def monoid_op(ops, acc, x, kind: str):
    """One step of a monoid reduction's body (complex max/min lexicographic, as NumPy's)."""
    if kind in ("max", "min"):
        return emit_max_min(ops, acc, x, kind)
    return ops.op1(_HLO_OPS[kind], [acc, x], acc.aval)


def _check_f16_reduction(x, axes) -> None:
    """`jax.allow_f16_reductions(False)`: no sums of float16 or bfloat16 over a real axis."""
    if (not config.allow_f16_reductions and x.dtype in (dtypes.float16, dtypes.bfloat16)
            and not all(x.shape[d] == 1 for d in axes)):
        raise ValueError(f"reduce_sum on operand {x.str_short()} is not allowed when "
                         "jax_allow_f16_reductions=False.")


def _reduction(name: str, kind: str, allowed):
    def abstract_eval(x, *, axes, out_sharding=None):
        check_dtype(name, x, allowed)
        if kind == "add":
            _check_f16_reduction(x, axes)
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


def _reduction_pp_rule(eqn, context):
    # JAX's reductions other than reduce_sum have no out_sharding: don't print an unset one.
    params = {k: v for k, v in eqn.params.items() if not (k == "out_sharding" and v is None)}
    return core.pp_eqn_default(eqn.replace(params=params), context)


for _prim in (reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p, reduce_or_p,
              reduce_xor_p):
    core.pp_eqn_rules[_prim] = _reduction_pp_rule


# ---------------------------------------------------------------------------------------------
# Differentiation and batching rules

def _kept_dims(ndim: int, axes) -> tuple:
    return tuple(i for i in range(ndim) if i not in axes)


def _reduce_sum_transpose(ct, x, *, axes, out_sharding=None):
    aval = x.aval
    if type(ct) is ad.Zero:
        return [ad.Zero(aval)]
    from fluxion._src.lax import lax
    return [lax.broadcast_in_dim(ct, aval.shape, _kept_dims(aval.ndim, axes))]


def _reduce_chooser_jvp(prim):
    """The tangent at the chosen (max or min) elements; ties share it evenly, as in JAX."""
    def rule(primals, tangents, *, axes, out_sharding=None):
        (x,), (t,) = primals, tangents
        from fluxion._src.lax import lax
        out = prim.bind(x, axes=axes, out_sharding=out_sharding)
        if not dtypes.is_inexact(core.get_aval(x).dtype):
            return out, ad.Zero.from_primal_value(out)
        shape = core.get_aval(x).shape
        chosen = lax.eq(x, lax.broadcast_in_dim(out, shape, _kept_dims(len(shape), axes)))
        chosen = lax.convert_element_type(chosen, core.get_aval(t).dtype)
        counts = lax.reduce_sum(chosen, axes)
        return out, lax.div(lax.reduce_sum(lax.mul(t, chosen), axes), counts)
    return rule


def _reduce_prod_jvp(primals, tangents, *, axes, out_sharding=None):
    """Product rule over a balanced tree of pairwise products of the reduced elements: each
    element's tangent is scaled by the product of the others, exact even with zeros."""
    (x,), (t,) = primals, tangents
    from fluxion._src.lax import lax
    out = reduce_prod_p.bind(x, axes=axes, out_sharding=out_sharding)
    shape = core.get_aval(x).shape
    kept = _kept_dims(len(shape), axes)
    count = core.shape_size([shape[a] for a in axes])
    if count == 0 or not dtypes.is_inexact(core.get_aval(x).dtype):
        return out, ad.Zero.from_primal_value(out)
    # Reduced axes first, flattened into one: (count, *kept sizes).
    flat_shape = (count,) + tuple(shape[d] for d in kept)
    order = tuple(axes) + kept
    xs, ts = (lax.reshape(v, flat_shape, order) for v in (x, t))
    _, tangent = _product_tree(xs, ts)
    return out, lax.reshape(tangent, core.get_aval(out).shape)


def _product_tree(x, t):
    """The product over axis 0 of `x` and its tangent given `t`, both keeping axis 0 (size 1)."""
    from fluxion._src.lax import lax, structural
    while core.get_aval(x).shape[0] > 1:
        shape = core.get_aval(x).shape
        if shape[0] % 2:
            config = ((0, 1, 0),) + ((0, 0, 0),) * (len(shape) - 1)
            x = structural.pad(x, np.ones((), core.get_aval(x).dtype), config)
            t = structural.pad(t, np.zeros((), core.get_aval(t).dtype), config)
        half = core.get_aval(x).shape[0] // 2
        (x_lo, x_hi), (t_lo, t_hi) = (
            (structural.slice_in_dim(v, 0, half), structural.slice_in_dim(v, half, 2 * half))
            for v in (x, t))
        x, t = lax.mul(x_lo, x_hi), lax.add(lax.mul(t_lo, x_hi), lax.mul(x_lo, t_hi))
    return x, t


def _reducer_batch(prim):
    """Reduce the same axes of the batched operand; the batch dimension stays (shifted left
    by the reduced axes before it)."""
    def rule(args, dims, *, axes, out_sharding=None):
        (x,), (d,) = args, dims
        new_axes = tuple(a + (a >= d) for a in axes)
        out_dim = d - sum(a < d for a in axes)
        return prim.bind(x, axes=new_axes, out_sharding=out_sharding), out_dim
    return rule


ad.deflinear(reduce_sum_p, _reduce_sum_transpose)
ad.primitive_jvps[reduce_prod_p] = _reduce_prod_jvp
ad.primitive_jvps[reduce_max_p] = _reduce_chooser_jvp(reduce_max_p)
ad.primitive_jvps[reduce_min_p] = _reduce_chooser_jvp(reduce_min_p)
for _prim in (reduce_and_p, reduce_or_p, reduce_xor_p):
    ad.defjvp_zero(_prim)
for _prim in (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p,
              reduce_or_p, reduce_xor_p):
    batching.primitive_batchers[_prim] = _reducer_batch(_prim)
