"""Reductions with a user computation and windowed reductions: reduce, reduce_window (generic,
and the sum/max/min monoids), and the cumulative reductions cumsum, cumprod, cummax, cummin and
cumlogsumexp (lowered to reduce_window, which XLA rewrites into a fast scan).

A user computation is a Python function of two pytrees of scalars; it is traced once per
(function, argument types) to a jaxpr, which the lowering inlines into the op's region.
"""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

from fluxion._src import ad, batching, core, dtypes, staging
from fluxion._src.config import config
from fluxion._src.compiler.hlo import dense_i64, function_text, i64_array
from fluxion._src.export.shape_poly import DimExpr, is_symbolic_shape
from fluxion._src.compiler.lowering import register_lowering
from fluxion._src.core import ClosedJaxpr, ShapedArray
from fluxion._src.custom_derivatives import custom_jvp
from fluxion._src.lax import lax as lax_ops, structural
from fluxion._src.lax.base import (ANY, INEXACT, NUMBER, ORDERED, check_dtype,
                                   standard_primitive)
from fluxion._src.lax.convolution import (canonical_padding, check_positive, dilate_dim,
                                          padtype_to_pads, stride_dim)
from fluxion._src.lax.elementwise import ge_p, le_p
from fluxion._src.lax.reductions import (emit_reduce, identity_value, monoid_op, reduce_and_p,
                                         reduce_max_p, reduce_min_p, reduce_or_p, reduce_prod_p,
                                         reduce_sum_p, reduce_xor_p)
from fluxion._src.tree_util import tree_flatten, tree_unflatten

__all__ = ["cumlogsumexp", "cumlogsumexp_p", "cummax", "cummax_p", "cummin", "cummin_p",
           "cumprod", "cumprod_p", "cumsum", "cumsum_p", "reduce", "reduce_p", "reduce_window",
           "reduce_window_max_p", "reduce_window_min_p", "reduce_window_p",
           "reduce_window_shape_tuple", "reduce_window_sum_p", "select_and_gather_add_p",
           "select_and_scatter_add_p"]

# ---------------------------------------------------------------------------------------------
# Tracing user computations

def _computation_jaxpr(opname: str, computation, tree, flat_avals: tuple) -> ClosedJaxpr:
    """Trace `computation(xs, ys)` for two pytrees `xs`, `ys` of scalars of structure `tree`.

    Cached per hashable computation, so that eager calls reuse their compiled executables."""
    try:
        hash(computation)
    except TypeError:
        return _trace_computation(opname, computation, tree, flat_avals)
    return _cached_trace_computation(opname, computation, tree, flat_avals, config.trace_key)


def _trace_computation(opname: str, computation, tree, flat_avals: tuple) -> ClosedJaxpr:
    n = len(flat_avals)
    out_trees = []

    def flat_fun(*flat_args):
        out = computation(tree_unflatten(tree, flat_args[:n]), tree_unflatten(tree, flat_args[n:]))
        leaves, out_tree = tree_flatten(out)
        out_trees.append(out_tree)
        return leaves

    closed = staging.trace_to_jaxpr(flat_fun, flat_avals * 2, origin=f"{opname} computation")
    if any(isinstance(c, core.Tracer) for c in closed.consts):
        raise NotImplementedError(f"{opname}: the computation closes over a traced value; pass it "
                                  f"as an operand instead.")
    if out_trees[0] != tree:
        raise ValueError(f"{opname} output must have the same tree structure as the operands "
                         f"{tree} vs. {out_trees[0]}")
    expected = [a.strip_weak_type() for a in flat_avals]
    got = [a.strip_weak_type() for a in closed.out_avals]
    if got != expected:  # ValueError, the class JAX's verifier raises for this program
        raise ValueError(f"{opname} computation must return scalars of its operands' types "
                        f"{[a.str_short() for a in expected]}, got {[a.str_short() for a in got]}")
    return closed


@functools.lru_cache(maxsize=512)
def _cached_trace_computation(opname, computation, tree, flat_avals, x64: bool) -> ClosedJaxpr:
    """Keyed on the x64 flag too: the types of constants the computation makes depend on it."""
    return _trace_computation(opname, computation, tree, flat_avals)


def _flatten_operands(opname: str, operands, init_values):
    flat_operands, operand_tree = tree_flatten(operands)
    flat_inits, init_tree = tree_flatten(init_values)
    if operand_tree != init_tree:
        raise ValueError(f"Operands must have the same tree structure as init_values: "
                         f"{operand_tree} vs. {init_tree}")
    if not flat_operands:
        raise ValueError(f"{opname} must have at least one operand.")
    return flat_operands, flat_inits, operand_tree


def _concrete_scalar(x):
    """The value of a scalar known at trace time, or None."""
    if isinstance(x, core.Tracer):
        x = x.to_concrete_value()
        if x is None:
            return None
    try:
        value = np.asarray(x)
    except TypeError:
        return None
    return value if value.shape == () else None


_MONOID_FUNCTIONS = ((lax_ops.add, "add"), (lax_ops.mul, "mul"), (lax_ops.max, "max"),
                     (lax_ops.min, "min"), (lax_ops.bitwise_and, "and"),
                     (lax_ops.bitwise_or, "or"), (lax_ops.bitwise_xor, "xor"))


def _monoid_kind(computation, flat_inits) -> str | None:
    """'add', 'mul', ... when `computation` is that lax op and the init value its identity."""
    if len(flat_inits) != 1:
        return None
    kind = next((k for f, k in _MONOID_FUNCTIONS if f is computation), None)
    value = _concrete_scalar(flat_inits[0])
    if kind is None or value is None:
        return None
    dtype = core.get_aval(flat_inits[0]).dtype
    if kind in ("and", "or", "xor") and dtype.kind not in "iub":
        return None
    return kind if value == identity_value(kind, dtype) else None


# ---------------------------------------------------------------------------------------------
# reduce

def _reduce_abstract_eval(*avals, computation, jaxpr, dimensions):
    operands, inits = avals[:len(avals) // 2], avals[len(avals) // 2:]
    if any(a.shape != () for a in inits):
        raise ValueError(f"reduce found non-scalar initial value: {[a.shape for a in inits]}")
    if [a.dtype for a in operands] != [a.dtype for a in inits]:
        raise TypeError(f"reduce operand dtypes should match corresponding initial value dtypes, "
                        f"got operands={list(operands)} and initial_values={list(inits)}")
    if any(a.shape != operands[0].shape for a in operands):
        raise TypeError(f"reduce operands must have equal shapes, got "
                        f"{[a.shape for a in operands]}")
    ndim = operands[0].ndim
    if any(not 0 <= d < ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise ValueError(f"reduce dimensions must be distinct and in range for rank {ndim}, got "
                         f"{dimensions}")
    shape = tuple(d for i, d in enumerate(operands[0].shape) if i not in dimensions)
    return [ShapedArray(shape, op.dtype, op.weak_type and init.weak_type)
            for op, init in zip(operands, inits)]


def _reduce_lowering(ctx, *args, computation, jaxpr, dimensions):
    n = len(args) // 2
    return emit_reduce(ctx, list(args[:n]), list(args[n:]), dimensions,
                       lambda block, accs, xs: ctx.lower_jaxpr(jaxpr, list(accs) + list(xs), block))


reduce_p = standard_primitive("reduce", _reduce_abstract_eval, _reduce_lowering,
                              multiple_results=True)

_MONOID_REDUCTIONS = {"add": reduce_sum_p, "mul": reduce_prod_p, "max": reduce_max_p,
                      "min": reduce_min_p, "and": reduce_and_p, "or": reduce_or_p,
                      "xor": reduce_xor_p}


def reduce(operands, init_values, computation, dimensions):
    """Reduce `operands` over `dimensions` with `computation` (XLA's Reduce).

    Parameters
    ----------
    operands : an array or a pytree of arrays of one shape.
    init_values : scalars with the structure and dtypes of `operands`; with `computation` they
        must form a monoid (the init value is the computation's identity).
    computation : a function of two pytrees of scalars returning one such pytree.
    dimensions : the dimensions to reduce.
    """
    flat_operands, flat_inits, tree = _flatten_operands("reduce", operands, init_values)
    dimensions = tuple(operator.index(d) for d in dimensions)
    kind = _monoid_kind(computation, flat_inits)
    if kind is not None:
        weak = dtypes.is_weakly_typed(flat_operands[0]) and dtypes.is_weakly_typed(flat_inits[0])
        out = _MONOID_REDUCTIONS[kind].bind(flat_operands[0], axes=dimensions, out_sharding=None)
        return lax_ops._convert_element_type(out, core.get_aval(out).dtype, weak)
    closed = _computation_jaxpr("reduce", computation, tree,
                                tuple(core.get_aval(x) for x in flat_inits))
    outs = reduce_p.bind(*flat_operands, *flat_inits, computation=computation, jaxpr=closed,
                         dimensions=dimensions)
    return tree_unflatten(tree, outs)


# ---------------------------------------------------------------------------------------------
# reduce_window

def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None) -> tuple:
    """The output shape of a windowed reduction."""
    if base_dilation is not None:
        operand_shape = [dilate_dim(d, b) for d, b in zip(operand_shape, base_dilation)]
    if window_dilation is not None:
        window_dimensions = [dilate_dim(w, d) for w, d in zip(window_dimensions, window_dilation)]
    padded = [d + lo + hi for d, (lo, hi) in zip(operand_shape, padding)]
    return tuple(stride_dim(d, w, s) for d, w, s in zip(padded, window_dimensions, window_strides))


def _window_output_shape(opname, operand, window_dimensions, window_strides, padding,
                         base_dilation, window_dilation) -> tuple:
    if operand.ndim != len(window_dimensions):
        raise TypeError(f"{opname} got the wrong number of window_dimensions for operand: got "
                        f"operand shape {operand.shape} with window_dimensions "
                        f"{window_dimensions}.")
    for what, values in (("window_strides", window_strides), ("padding", padding),
                         ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
        if len(values) != len(window_dimensions):
            raise TypeError(f"{opname} got inconsistent {what} and window_dimensions: got "
                            f"{what} {tuple(values)} and window_dimensions {window_dimensions}.")
    for what, values in (("window_dimensions", window_dimensions),
                         ("window_strides", window_strides), ("base_dilation", base_dilation),
                         ("window_dilation", window_dilation)):
        check_positive(opname, what, values)
    dilated = [dilate_dim(d, b) for d, b in zip(operand.shape, base_dilation)]
    if any(d + lo + hi < 0 for d, (lo, hi) in zip(dilated, padding)):
        raise ValueError(f"{opname}: negative padding {padding} is larger than the (dilated) "
                         f"operand shape {tuple(dilated)}")
    return reduce_window_shape_tuple(operand.shape, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation)


def emit_reduce_window(ctx, operands, inits, body, *, window_dimensions, window_strides,
                       padding, base_dilation, window_dilation, out_avals=None) -> list:
    """A `stablehlo.reduce_window`; `body(block, args)` returns the region's results.

    The results have the types `out_avals` (default: the equation's outputs)."""
    scalar_avals = [ShapedArray((), x.dtype) for x in operands]
    region = ctx.new_block(scalar_avals + scalar_avals)
    if is_symbolic_shape(tuple(window_dimensions) + tuple(window_strides) + tuple(base_dilation)
                         + tuple(window_dilation) + tuple(d for p in padding for d in p)):
        return _emit_dynamic_reduce_window(
            ctx, operands, inits, region, body(region, region.args), window_dimensions,
            window_strides, padding, base_dilation, window_dilation,
            ctx.avals_out if out_avals is None else out_avals)
    region.ret(body(region, region.args))
    attrs = {"window_dimensions": i64_array(window_dimensions),
             "window_strides": i64_array(window_strides),
             "base_dilations": i64_array(base_dilation),
             "window_dilations": i64_array(window_dilation)}
    if window_dimensions:  # an empty dense attribute does not parse; the default is no padding
        attrs["padding"] = dense_i64([list(p) for p in padding], (len(padding), 2))
    return ctx.op("stablehlo.reduce_window", list(operands) + list(inits),
                  ctx.avals_out if out_avals is None else out_avals, attrs, [region])


_dynamic_reducers = itertools.count()


def _emit_dynamic_reduce_window(ctx, operands, inits, region, results, window_dimensions,
                                window_strides, padding, base_dilation, window_dilation,
                                out_avals) -> list:
    """Window parameters that depend on symbolic dimensions (shape polymorphism): StableHLO's
    `stablehlo.dynamic_reduce_window` custom call, which shape refinement makes static; the
    reducer is a function."""
    name = f"_dynamic_reduce_window_reducer{next(_dynamic_reducers)}"
    ctx.module.functions.append(function_text(name, region, results, visibility="private"))
    flat_padding = ctx.shape_value([d for p in padding for d in p])
    padding_value = ctx.reshape(flat_padding, (len(padding), 2))
    args = (list(operands) + list(inits)
            + [ctx.shape_value(v) for v in (window_dimensions, window_strides, base_dilation,
                                            window_dilation)] + [padding_value])
    return ctx.custom_call("stablehlo.dynamic_reduce_window", args, list(out_avals),
                           api_version=2, extra_attrs={"called_computations": f"[@{name}]"},
                           shape_operands=False)  # refinement reads its window operands


def _monoid_body(kind: str):
    return lambda block, args: [monoid_op(block, *args, kind)]


def _reduce_window_abstract_eval(*avals, jaxpr, consts, window_dimensions, window_strides,
                                 padding, base_dilation, window_dilation):
    operands, inits = avals[:len(avals) // 2], avals[len(avals) // 2:]
    if [a.dtype for a in operands] != [a.dtype for a in inits]:
        raise TypeError(f"reduce_window got inconsistent dtypes for operands and init_values: got "
                        f"operand dtypes {[a.dtype.name for a in operands]} and init_value dtypes "
                        f"{[a.dtype.name for a in inits]}.")
    if any(a.shape != () for a in inits):
        raise TypeError(f"reduce_window expected init_values to be scalars but init_values have "
                        f"shapes {[a.shape for a in inits]}.")
    if any(a.shape != operands[0].shape for a in operands):
        raise TypeError(f"reduce_window operands must have equal shapes, got "
                        f"{[a.shape for a in operands]}")
    shape = _window_output_shape("reduce_window", operands[0], window_dimensions, window_strides,
                                 padding, base_dilation, window_dilation)
    return [ShapedArray(shape, a.dtype) for a in operands]


def _reduce_window_lowering(ctx, *args, jaxpr, consts, **window):
    n = len(args) // 2
    closed = ClosedJaxpr(jaxpr, consts)
    return emit_reduce_window(ctx, args[:n], args[n:],
                              lambda block, xs: ctx.lower_jaxpr(closed, xs, block), **window)


reduce_window_p = standard_primitive("reduce_window", _reduce_window_abstract_eval,
                                     _reduce_window_lowering, multiple_results=True)


def _monoid_window_primitive(kind: str):
    name = {"add": "reduce_window_sum", "max": "reduce_window_max",
            "min": "reduce_window_min"}[kind]

    def abstract_eval(x, **window):
        if kind == "add" and not NUMBER[1](x.dtype):
            raise TypeError(f"operand to {name} must have a number dtype, got {x.dtype.name}")
        check_dtype(name, x, ANY)
        return x.update(shape=_window_output_shape(name, x, **window))

    def lowering(ctx, x, **window):
        init = ctx.constant(identity_value(kind, x.dtype), x.dtype)
        return emit_reduce_window(ctx, [x], [init], _monoid_body(kind), **window)[0]

    return standard_primitive(name, abstract_eval, lowering)


reduce_window_sum_p = _monoid_window_primitive("add")
reduce_window_max_p = _monoid_window_primitive("max")
reduce_window_min_p = _monoid_window_primitive("min")
_MONOID_WINDOW_REDUCTIONS = {"add": reduce_window_sum_p, "max": reduce_window_max_p,
                             "min": reduce_window_min_p}


def _int_tuple(opname: str, what: str, values, default_len: int | None = None) -> tuple:
    """Integers, or symbolic dimensions (a window as long as a symbolic axis, as in JAX)."""
    if values is None:
        return (1,) * default_len
    try:
        return tuple(v if isinstance(v, DimExpr) else operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{opname} {what} must be a sequence of integers, got {values!r}") from None


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """Reduce each window of `operand` with `computation` (XLA's ReduceWindow).

    Parameters
    ----------
    operand : an array or a pytree of arrays of one shape.
    init_value : scalars with the structure and dtypes of `operand`.
    computation : a function of two pytrees of scalars returning one such pytree.
    window_dimensions : the window's size in each dimension.
    window_strides : the windows' strides (default 1).
    padding : 'VALID', 'SAME', 'SAME_LOWER' or (low, high) pairs.
    base_dilation, window_dilation : dilation of the operand and of the window (default 1).
    """
    name = "reduce_window"
    flat_operands, flat_inits, tree = _flatten_operands(name, operand, init_value)
    window_dimensions = _int_tuple(name, "window_dimensions", window_dimensions)
    rank = len(window_dimensions)
    window_strides = _int_tuple(name, "window_strides", window_strides, rank)
    base_dilation = _int_tuple(name, "base_dilation", base_dilation, rank)
    window_dilation = _int_tuple(name, "window_dilation", window_dilation, rank)
    if isinstance(padding, str):
        window = [dilate_dim(w, d) for w, d in zip(window_dimensions, window_dilation)]
        padding = padtype_to_pads(core.get_aval(flat_operands[0]).shape, window, window_strides,
                                  padding)
    window = dict(window_dimensions=window_dimensions, window_strides=window_strides,
                  padding=canonical_padding(name, padding), base_dilation=base_dilation,
                  window_dilation=window_dilation)
    kind = _monoid_kind(computation, flat_inits)
    if kind in _MONOID_WINDOW_REDUCTIONS:
        return _MONOID_WINDOW_REDUCTIONS[kind].bind(flat_operands[0], **window)
    closed = _computation_jaxpr(name, computation, tree,
                                tuple(core.get_aval(x) for x in flat_inits))
    outs = reduce_window_p.bind(*flat_operands, *flat_inits, jaxpr=closed.jaxpr,
                                consts=tuple(closed.consts), **window)
    return tree_unflatten(tree, outs)


# ---------------------------------------------------------------------------------------------
# select_and_gather_add and select_and_scatter_add: the derivatives of max and min pooling.
# `select_prim` (ge or le) picks each window's first maximum (or minimum); the first gathers
# the tangent there, the second (its transpose) adds each window's cotangent there.

def _select_kind(select_prim) -> tuple[str, str]:
    """(monoid kind, comparison direction) of a select_prim."""
    if select_prim is ge_p:
        return "max", "GE"
    if select_prim is le_p:
        return "min", "LE"
    raise NotImplementedError(f"select_prim must be lax.ge_p or lax.le_p, got {select_prim}")


def _pad_edges(ctx, x, value, padding, interior=None):
    """`x` with (low, high) edge padding of `value` (negative amounts crop) and `interior`
    padding (default none)."""
    low, high = zip(*padding) if padding else ((), ())
    interior = [0] * len(low) if interior is None else interior
    shape = tuple(dilate_dim(n, i + 1) + lo + hi
                  for n, lo, hi, i in zip(x.shape, low, high, interior))
    if is_symbolic_shape(tuple(low) + tuple(high)):  # padding that depends on symbolic sizes
        return ctx.op1("stablehlo.dynamic_pad",
                       [x, ctx.constant(value, x.dtype),
                        *(ctx.shape_value(v) for v in (low, high, interior))],
                       x.aval.update(shape=shape))
    return ctx.op1("stablehlo.pad", [x, ctx.constant(value, x.dtype)], x.aval.update(shape=shape),
                   {"edge_padding_low": i64_array(low), "edge_padding_high": i64_array(high),
                    "interior_padding": i64_array(interior)})


def _select_and_gather_add_abstract_eval(tangents, operand, *, select_prim, **window):
    name = "select_and_gather_add"
    if tangents.shape != operand.shape:
        raise TypeError(f"{name} tangents and operand shapes must match, got {tangents.shape} "
                        f"and {operand.shape}.")
    check_dtype(name, operand, ORDERED, 1)
    return tangents.update(shape=_window_output_shape(name, operand, **window))


def _select_and_gather_add_lowering(ctx, tangents, operand, *, select_prim, **window):
    """A two-operand reduce_window over (operand, tangent) pairs that keeps the accumulated
    pair unless the new operand element beats it strictly: of tied extrema, the one XLA's
    reduction order meets first wins (as in JAX, which lowers it the same way)."""
    kind, direction = _select_kind(select_prim)
    inits = [ctx.constant(identity_value(kind, operand.dtype), operand.dtype),
             ctx.constant(0, tangents.dtype)]

    def body(block, args):
        acc, acc_tangent, x, x_tangent = args
        keep = block.compare(acc, x, direction)
        return [block.select(keep, acc, x), block.select(keep, acc_tangent, x_tangent)]

    out = ctx.avals_out[0]
    _, gathered = emit_reduce_window(ctx, [operand, tangents], inits, body,
                                     out_avals=[out.update(dtype=operand.dtype), out], **window)
    return gathered


def _select_and_gather_add_lowering_by_slices(ctx, tangents, operand, *, select_prim,
                                              **window):
    """For XLA:GPU, which has no variadic reduce_window: compare the window extremum with
    the strided slice of the padded operand at each window offset in turn, keeping the
    tangent at the first match (elementwise, so XLA fuses the chain into one loop). As the
    variadic lowering does, a window whose extremum is the identity (only padding or
    infinities) gives 0."""
    kind, _ = _select_kind(select_prim)
    out = ctx.avals_out[0]
    zero = ctx.constant(0, tangents.dtype, out.shape)
    if out.size == 0:
        return zero
    identity = identity_value(kind, operand.dtype)
    extremum = emit_reduce_window(ctx, [operand], [ctx.constant(identity, operand.dtype)],
                                  _monoid_body(kind), out_avals=[out.update(dtype=operand.dtype)],
                                  **window)[0]
    interior = [d - 1 for d in window["base_dilation"]]
    padded_operand = _pad_edges(ctx, operand, identity, window["padding"], interior)
    padded_tangents = _pad_edges(ctx, tangents, 0, window["padding"], interior)
    strides = window["window_strides"]
    picked, found = zero, ctx.constant(False, dtypes.bool_, out.shape)
    for offset in itertools.product(*(range(w) for w in window["window_dimensions"])):
        start = [k * d for k, d in zip(offset, window["window_dilation"])]
        limit = [lo + (n - 1) * s + 1 for lo, n, s in zip(start, out.shape, strides)]
        x = ctx.slice(padded_operand, start, limit, strides)
        hit = ctx.and_(ctx.compare(x, extremum, "EQ"), ctx.not_(found))
        picked = ctx.select(hit, ctx.slice(padded_tangents, start, limit, strides), picked)
        found = ctx.or_(found, hit)
    return ctx.select(ctx.compare(extremum, identity, "EQ"), zero, picked)


select_and_gather_add_p = standard_primitive("select_and_gather_add",
                                             _select_and_gather_add_abstract_eval,
                                             _select_and_gather_add_lowering)
register_lowering(select_and_gather_add_p, _select_and_gather_add_lowering_by_slices,
                  platform="gpu")


def _select_and_scatter_add_abstract_eval(source, operand, *, select_prim, window_dimensions,
                                          window_strides, padding):
    name = "select_and_scatter_add"
    check_dtype(name, operand, ORDERED, 1)
    ones = (1,) * len(window_dimensions)
    windows = _window_output_shape(name, operand, window_dimensions, window_strides, padding,
                                   ones, ones)
    if source.shape != windows:
        raise TypeError(f"{name} source shape {source.shape} must be the shape {windows} of "
                        f"the windows of operand shape {operand.shape}.")
    return source.update(shape=operand.shape)


def _select_and_scatter_add_lowering(ctx, source, operand, *, select_prim, window_dimensions,
                                     window_strides, padding):
    """stablehlo.select_and_scatter on the operand padded explicitly with the selection's
    identity (as JAX lowers it on CPU and GPU, where XLA's own padding is unreliable)."""
    kind, direction = _select_kind(select_prim)
    padded = any(lo or hi for lo, hi in padding)
    if padded:
        operand = _pad_edges(ctx, operand, identity_value(kind, operand.dtype), padding)
    scalar = ShapedArray((), operand.dtype)
    select = ctx.new_block([scalar, scalar])
    select.ret([select.compare(select.args[0], select.args[1], direction)])
    source_scalar = ShapedArray((), source.dtype)
    scatter = ctx.new_block([source_scalar, source_scalar])
    combine = scatter.or_ if source.dtype == dtypes.bool_ else scatter.add
    scatter.ret([combine(scatter.args[0], scatter.args[1])])
    out = ctx.op1("stablehlo.select_and_scatter",
                  [operand, source, ctx.constant(0, source.dtype)],
                  operand.aval.update(dtype=source.dtype),
                  {"window_dimensions": i64_array(window_dimensions),
                   "window_strides": i64_array(window_strides)}, [select, scatter])
    if padded:  # negated padding crops what was added and restores what was cropped
        out = _pad_edges(ctx, out, 0, [(-lo, -hi) for lo, hi in padding])
    return out


select_and_scatter_add_p = standard_primitive("select_and_scatter_add",
                                              _select_and_scatter_add_abstract_eval,
                                              _select_and_scatter_add_lowering)


# ---------------------------------------------------------------------------------------------
# Cumulative reductions

def _logaddexp_body(block, args):
    """log(exp(x) + exp(y)) without overflow; NaNs and equal infinities pass through x + y."""
    x, y = args
    delta = block.sub(x, y)
    largest = block.max(x, y)
    smooth = block.add(largest, block.log1p(block.exp(block.neg(block.abs(delta)))))
    return [block.select(block.compare(delta, delta, "NE"), block.add(x, y), smooth)]


def _check_cumulative_axis(name: str, shape, axis: int) -> None:
    if axis < 0:
        raise ValueError(f"{name}: XLA operations do not allow negative axes, got axis={axis}")
    if axis >= len(shape):
        raise ValueError(f"{name}: axis {axis} is out of bounds for array of shape {shape}")


def _cumulative(name: str, kind: str, allowed):
    body = _logaddexp_body if kind == "logaddexp" else _monoid_body(kind)

    def abstract_eval(x, *, axis, reverse):
        check_dtype(name, x, allowed)
        _check_cumulative_axis(name, x.shape, axis)
        return x

    def lowering(ctx, x, *, axis, reverse):
        n = x.shape[axis]
        if n == 0:
            return x
        if kind == "logaddexp" and dtypes.is_complex(x.aval.dtype):
            # The complex logaddexp has no region-body form here: a prefix scan instead.
            return _complex_cumlogsumexp_lowering(ctx, x, axis=axis, reverse=reverse)
        # Window i covers elements [i - n + 1, i] (or [i, i + n - 1] reversed); the padding
        # contributes identities, so each window reduces a prefix (or suffix).
        identity = -np.inf if kind == "logaddexp" else identity_value(kind, x.dtype)
        rank = x.aval.ndim
        padding = [(0, 0)] * rank
        padding[axis] = (0, n - 1) if reverse else (n - 1, 0)
        window = [1] * rank
        window[axis] = n
        return emit_reduce_window(ctx, [x], [ctx.constant(identity, x.dtype)], body,
                                  window_dimensions=window, window_strides=[1] * rank,
                                  padding=padding, base_dilation=[1] * rank,
                                  window_dilation=[1] * rank)[0]

    prim = standard_primitive(name, abstract_eval, lowering)

    def fn(operand, axis: int = 0, reverse: bool = False):
        return prim.bind(operand, axis=operator.index(axis), reverse=bool(reverse))
    fn.__name__ = fn.__qualname__ = name
    return prim, fn


cumsum_p, cumsum = _cumulative("cumsum", "add", NUMBER)
cumprod_p, cumprod = _cumulative("cumprod", "mul", NUMBER)
cummax_p, cummax = _cumulative("cummax", "max", NUMBER)
cummin_p, cummin = _cumulative("cummin", "min", NUMBER)
cumlogsumexp_p, cumlogsumexp = _cumulative("cumlogsumexp", "logaddexp", INEXACT)
cumsum.__doc__ = "Cumulative sum of `operand` along `axis` (from the end if `reverse`)."
cumprod.__doc__ = "Cumulative product of `operand` along `axis` (from the end if `reverse`)."
cummax.__doc__ = "Cumulative maximum of `operand` along `axis` (from the end if `reverse`)."
cummin.__doc__ = "Cumulative minimum of `operand` along `axis` (from the end if `reverse`)."
cumlogsumexp.__doc__ = ("Cumulative log(sum(exp(x))) of `operand` along `axis` (from the end if "
                        "`reverse`).")


# ---------------------------------------------------------------------------------------------
# Differentiation rules

def _reduce_window_sum_transpose(ct, x, *, window_dimensions, window_strides, padding,
                                 base_dilation, window_dilation):
    """Each operand element receives the cotangents of the windows that read it: the
    cotangent, dilated by the strides and padded, summed over windows (the same window
    and window dilation) placed `base_dilation` apart."""
    aval = x.aval
    if type(ct) is ad.Zero or aval.size == 0 or core.get_aval(ct).size == 0:
        return [ad.Zero(aval)]
    config = []
    for n, o, w, stride, (lo, _), base, w_dil in zip(
            aval.shape, core.get_aval(ct).shape, window_dimensions, window_strides, padding,
            base_dilation, window_dilation):
        span = dilate_dim(w, w_dil)
        low = span - 1 - lo
        high = dilate_dim(n, base) + span - 1 - dilate_dim(o, stride) - low
        config.append((low, high, stride - 1))
    padded = structural.pad(ct, np.zeros((), core.get_aval(ct).dtype), tuple(config))
    rank = aval.ndim
    return [reduce_window_sum_p.bind(padded, window_dimensions=window_dimensions,
                                     window_strides=base_dilation, padding=((0, 0),) * rank,
                                     base_dilation=(1,) * rank, window_dilation=window_dilation)]


def _reduce_window_chooser_jvp(prim, select_prim):
    """The tangent at each window's first maximum (minimum)."""
    def rule(primals, tangents, **window):
        (x,), (t,) = primals, tangents
        return prim.bind(x, **window), select_and_gather_add_p.bind(
            t, x, select_prim=select_prim, **window)
    return rule


def _select_and_gather_add_jvp(primals, tangents, **params):
    """Linear in the tangents; piecewise constant in the operand."""
    (t, x), (t_dot, _) = primals, tangents
    out = select_and_gather_add_p.bind(t, x, **params)
    if type(t_dot) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    return out, select_and_gather_add_p.bind(t_dot, x, **params)


def _select_and_gather_add_transpose(ct, t, x, *, select_prim, window_dimensions,
                                     window_strides, padding, base_dilation, window_dilation):
    if any(d != 1 for d in window_dilation):
        raise NotImplementedError(f"VJP not implemented for select_and_gather (MaxPool) with "
                                  f"window dilation, got window_dilation={window_dilation}.")
    if type(ct) is ad.Zero:
        return [ad.Zero(t.aval), None]
    dilated = any(d != 1 for d in base_dilation)
    if dilated:  # the holes hold the identity, which is never selected over an element
        kind, _ = _select_kind(select_prim)
        dtype = core.get_aval(x).dtype
        x = structural.pad(x, identity_value(kind, dtype),
                           tuple((0, 0, d - 1) for d in base_dilation))
    out = select_and_scatter_add_p.bind(ct, x, select_prim=select_prim,
                                        window_dimensions=window_dimensions,
                                        window_strides=window_strides, padding=padding)
    if dilated:
        out = structural.slice(out, (0,) * len(base_dilation), core.get_aval(out).shape,
                               base_dilation)
    return [out, None]


def _select_and_scatter_add_jvp(primals, tangents, **params):
    (source, x), (source_dot, _) = primals, tangents
    out = select_and_scatter_add_p.bind(source, x, **params)
    if type(source_dot) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    return out, select_and_scatter_add_p.bind(source_dot, x, **params)


def _select_and_scatter_add_transpose(ct, source, x, *, select_prim, window_dimensions,
                                      window_strides, padding):
    if type(ct) is ad.Zero:
        return [ad.Zero(source.aval), None]
    ones = (1,) * len(window_dimensions)
    return [select_and_gather_add_p.bind(ct, x, select_prim=select_prim,
                                         window_dimensions=window_dimensions,
                                         window_strides=window_strides, padding=padding,
                                         base_dilation=ones, window_dilation=ones), None]


def _split(values, n: int):
    return list(values[:n]), list(values[n:])


@functools.lru_cache(maxsize=256)
def _cached_jvp_computation(jaxpr, consts, scalar_avals, with_tangent, x64: bool):
    """One traced JVP computation per user computation, so eager calls reuse executables."""
    return _jvp_computation(jaxpr, consts, scalar_avals, with_tangent)


def _jvp_computation(jaxpr, consts, scalar_avals, with_tangent) -> ClosedJaxpr:
    """The computation on (primals, tangents) pairs of scalars that gives the primal result of
    `jaxpr` and its tangent; tangents only for the operands numbered in `with_tangent`."""
    n, m = len(scalar_avals), len(with_tangent)
    computation = core.jaxpr_as_fun(ClosedJaxpr(jaxpr, consts))

    def pair_jvp(*args):
        (left, left_t), (right, right_t) = (_split(side, n) for side in _split(args, n + m))
        tangents = [ad.Zero(ad.tangent_aval(a)) for a in scalar_avals] * 2
        for j, i in enumerate(with_tangent):
            tangents[i], tangents[n + i] = left_t[j], right_t[j]
        outs, out_tangents = ad.jvp_flat(computation, left + right, tangents)
        return list(outs) + [ad.instantiate(out_tangents[i]) for i in with_tangent]

    avals = list(scalar_avals) + [scalar_avals[i] for i in with_tangent]
    return staging.trace_to_jaxpr(pair_jvp, avals * 2, origin="reduce_window jvp computation")


def _reduce_window_jvp(primals, tangents, *, jaxpr, consts, **window):
    """A reduce_window over the operands and their tangents whose computation is the JVP of
    the user's (as JAX does; forward mode only, since it is not linear in the tangents)."""
    n = len(primals) // 2
    (operands, inits), (operand_tangents, init_tangents) = _split(primals, n), _split(tangents, n)
    if any(type(t) is not ad.Zero for t in init_tangents):
        raise TypeError("reduce_window jvp does not support non-zero init_value_tangent.")
    avals = [core.get_aval(x) for x in operands]
    with_tangent = tuple(i for i, a in enumerate(avals) if dtypes.is_inexact(a.dtype))
    scalar_avals = tuple(ShapedArray((), a.dtype) for a in avals)
    try:
        hash(consts)
    except TypeError:  # array constants: trace afresh
        closed = _jvp_computation(jaxpr, consts, scalar_avals, with_tangent)
    else:
        closed = _cached_jvp_computation(jaxpr, consts, scalar_avals, with_tangent,
                                         config.trace_key)
    outs = reduce_window_p.bind(
        *operands, *[ad.instantiate(operand_tangents[i]) for i in with_tangent],
        *inits, *[np.zeros((), avals[i].dtype) for i in with_tangent],
        jaxpr=closed.jaxpr, consts=tuple(closed.consts), **window)
    out_tangents = [ad.Zero.from_primal_value(o) for o in outs[:n]]
    for i, t in zip(with_tangent, outs[n:]):
        out_tangents[i] = t
    return outs[:n], out_tangents


def _reduce_window_transpose(ct, *args, **params):
    raise ValueError("Reverse-mode differentiation of reduce_window with a general computation "
                     "is not supported (as in JAX): its JVP is a reduce_window over primal and "
                     "tangent pairs, which is not linear in the tangents. Use forward mode "
                     "(jvp, jacfwd), or a sum, max or min window reduction.")


def _pairwise_tree(computation, operands, inits):
    """Reduce axis 0 of equal-shape (count, width) operands by combining halves with the
    scalar `computation` (vectorized) until one row is left; returns the rows, (width,)."""
    operands = list(operands)
    width = core.get_aval(operands[0]).shape[1]
    while core.get_aval(operands[0]).shape[0] > 1:
        count = core.get_aval(operands[0]).shape[0]
        half = (count + 1) // 2
        firsts = [structural.slice_in_dim(x, 0, half) for x in operands]
        seconds = [structural.slice_in_dim(x, half, count) for x in operands]
        if count % 2:
            seconds = [structural.pad(x, init, ((0, 1, 0), (0, 0, 0)))
                       for x, init in zip(seconds, inits)]
        flat = [lax_ops.reshape(x, (half * width,)) for x in firsts + seconds]
        outs, _ = batching.batch_flat(computation, flat, [0] * len(flat), None, half * width)
        operands = [lax_ops.reshape(x, (half, width)) for x in outs]
    return [lax_ops.reshape(x, (width,)) for x in operands]


def _reduce_jvp(primals, tangents, *, computation, jaxpr, dimensions):
    """The JVP of a balanced tree of applications of the computation (as JAX does), so that
    the tangent is built from differentiable, transposable primitives."""
    n = len(primals) // 2
    (operands, inits), (operand_tangents, init_tangents) = _split(primals, n), _split(tangents, n)
    if any(type(t) is not ad.Zero for t in init_tangents):
        raise NotImplementedError("Gradient of general lax.reduce with non-zero tangents for "
                                  "initial values to reduction not implemented")
    shape = core.get_aval(operands[0]).shape
    kept = tuple(d for d in range(len(shape)) if d not in dimensions)
    out_shape = tuple(shape[d] for d in kept)
    count = int(np.prod([shape[d] for d in dimensions], dtype=np.int64))
    if count == 0:
        outs = reduce_p.bind(*primals, computation=computation, jaxpr=jaxpr,
                             dimensions=dimensions)
        return outs, [ad.Zero.from_primal_value(o) for o in outs]
    flat_shape = (count, int(np.prod(out_shape, dtype=np.int64)))
    order = tuple(dimensions) + kept

    def flatten(x):
        if type(x) is ad.Zero:
            return ad.Zero(x.aval.update(shape=flat_shape))
        return lax_ops.reshape(x, flat_shape, order)

    def tree(*xs):
        rows = _pairwise_tree(core.jaxpr_as_fun(jaxpr), xs, inits)
        return [lax_ops.reshape(x, out_shape) for x in rows]

    outs, out_tangents = ad.jvp_flat(tree, [flatten(x) for x in operands],
                                     [flatten(t) for t in operand_tangents])
    return outs, out_tangents


def _wrap_phase(theta):
    """`theta` moved into [-pi, pi) by whole turns."""
    def const(v):
        return structural.full_like(theta, v)
    turns = lax_ops.rem(lax_ops.add(theta, const(np.pi)), const(2 * np.pi))
    turns = structural.select(lax_ops.lt(turns, const(0.0)),
                              lax_ops.add(turns, const(2 * np.pi)), turns)
    return lax_ops.sub(turns, const(np.pi))


def _complex_logaddexp(x, y):
    """log(exp(x) + exp(y)) for complex operands: the (lexicographically) larger operand plus
    log1p(exp(smaller - larger)), with the phase wrapped into [-pi, pi) as JAX does."""
    larger = lax_ops.max(x, y)
    two = structural.full_like(larger, 2)
    out = lax_ops.add(larger, lax_ops.log1p(lax_ops.exp(
        lax_ops.sub(lax_ops.add(x, y), lax_ops.mul(larger, two)))))
    return lax_ops.complex(lax_ops.real(out), _wrap_phase(lax_ops.imag(out)))


def _logaddexp_value(x, y):
    """log(exp(x) + exp(y)) without overflow, in lax operations."""
    if dtypes.is_complex(core.get_aval(x).dtype):
        return _complex_logaddexp(x, y)
    delta = lax_ops.sub(x, y)
    smooth = lax_ops.add(lax_ops.max(x, y),
                         lax_ops.log1p(lax_ops.exp(lax_ops.neg(lax_ops.abs(delta)))))
    return structural.select(lax_ops.ne(delta, delta), lax_ops.add(x, y), smooth)


def _pos_inf_to_zero(x):
    aval = core.get_aval(x)
    zero, inf = (lax_ops.broadcast_in_dim(
        lax_ops._convert_element_type(v, aval.dtype, aval.weak_type), aval.shape, ())
        for v in (0, np.inf))
    return structural.select(lax_ops.eq(x, inf), zero, x)


def _logaddexp_jvp(primals, tangents):
    # The derivative is exp(x - out) for x (and likewise y), also where x == y: the value's
    # max/abs formulation would split the tangent wrongly at ties. +inf stands in as 0 (an
    # infinite out's weight is exp(0) for the infinite operand, exp(-inf) = 0 for a -inf one);
    # NaN stays NaN (JAX's rule).
    (x, y), (tx, ty) = primals, tangents
    out = _logaddexp(x, y)
    if dtypes.is_complex(core.get_aval(out).dtype):  # holomorphic: exp(x - out), exp(y - out)
        return out, lax_ops.add(lax_ops.mul(tx, lax_ops.exp(lax_ops.sub(x, out))),
                                lax_ops.mul(ty, lax_ops.exp(lax_ops.sub(y, out))))
    safe_out = _pos_inf_to_zero(out)

    def weight(v):
        return lax_ops.exp(lax_ops.sub(_pos_inf_to_zero(v), safe_out))
    return out, lax_ops.add(lax_ops.mul(tx, weight(x)), lax_ops.mul(ty, weight(y)))


_logaddexp = custom_jvp(_logaddexp_value)
_logaddexp.defjvp(_logaddexp_jvp)


def _complex_cumlogsumexp(x, *, axis, reverse):
    # Each entry alone is log(exp(x)) too: its phase on the principal branch.
    x = lax_ops.complex(lax_ops.real(x), _wrap_phase(lax_ops.imag(x)))
    return _directed_scan(_logaddexp, x, axis, reverse)


def _complex_cumlogsumexp_lowering(ctx, x, *, axis, reverse):
    from fluxion._src.compiler.lowering import lower_fun
    return lower_fun(_complex_cumlogsumexp, multiple_results=False)(ctx, x, axis=axis,
                                                                     reverse=reverse)


def _interleave(even, odd, axis: int):
    """Elements of `even` at positions 0, 2, ... and of `odd` at 1, 3, ... along `axis`."""
    n_even, n_odd = core.get_aval(even).shape[axis], core.get_aval(odd).shape[axis]
    zero = np.zeros((), core.get_aval(even).dtype)
    rank = core.get_aval(even).ndim

    def spread(x, low, high):
        config = [(0, 0, 0)] * rank
        config[axis] = (low, high, 1)
        return structural.pad(x, zero, tuple(config))

    return lax_ops.add(spread(even, 0, n_odd - n_even + 1), spread(odd, 1, n_even - n_odd))


def _prefix_scan(combine, x, axis: int):
    """Inclusive scan of `x` along `axis` with the associative `combine`, by the odd/even
    recursion (depth log n): differentiable to any order wherever `combine` is."""
    n = core.get_aval(x).shape[axis]
    if n < 2:
        return x

    def every_other(start, stop):
        return structural.slice_in_dim(x, start, stop, 2, axis)

    odd = _prefix_scan(combine, combine(every_other(0, n - 1), every_other(1, n)), axis)
    odd_before_even = odd if n % 2 else structural.slice_in_dim(odd, 0, n // 2 - 1, 1, axis)
    even = structural.concatenate(
        [every_other(0, 1), combine(odd_before_even, every_other(2, n))], axis)
    return _interleave(even, odd, axis)


def _directed_scan(combine, x, axis: int, reverse: bool):
    """`_prefix_scan` along `axis`, from the end if `reverse` (a suffix scan)."""
    if reverse:
        return structural.rev(_prefix_scan(combine, structural.rev(x, (axis,)), axis), (axis,))
    return _prefix_scan(combine, x, axis)


def _cumulative_jvp(name, combine):
    def rule(primals, tangents, *, axis, reverse):
        # The primitive's own check, before the scan's operations would fail on a bad axis.
        _check_cumulative_axis(name, core.get_aval(primals[0]).shape, axis)
        from fluxion._src.lax.control_flow import check_constant_scan_size
        check_constant_scan_size(core.get_aval(primals[0]).shape[axis])
        def scan(x):
            return [_directed_scan(combine, x, axis, reverse)]
        (out,), (out_tangent,) = ad.jvp_flat(scan, primals, tangents)
        return out, out_tangent
    return rule


def _cumsum_transpose(ct, x, *, axis, reverse):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [cumsum_p.bind(ct, axis=axis, reverse=not reverse)]


ad.deflinear(reduce_window_sum_p, _reduce_window_sum_transpose)
ad.primitive_jvps[reduce_window_max_p] = _reduce_window_chooser_jvp(reduce_window_max_p, ge_p)
ad.primitive_jvps[reduce_window_min_p] = _reduce_window_chooser_jvp(reduce_window_min_p, le_p)
ad.primitive_jvps[select_and_gather_add_p] = _select_and_gather_add_jvp
ad.primitive_transposes[select_and_gather_add_p] = _select_and_gather_add_transpose
ad.primitive_jvps[select_and_scatter_add_p] = _select_and_scatter_add_jvp
ad.primitive_transposes[select_and_scatter_add_p] = _select_and_scatter_add_transpose
ad.primitive_jvps[reduce_window_p] = _reduce_window_jvp
ad.primitive_transposes[reduce_window_p] = _reduce_window_transpose
ad.primitive_jvps[reduce_p] = _reduce_jvp
ad.deflinear(cumsum_p, _cumsum_transpose)
ad.primitive_jvps[cumprod_p] = _cumulative_jvp("cumprod", lax_ops.mul)
ad.primitive_jvps[cummax_p] = _cumulative_jvp("cummax", lax_ops.max)
ad.primitive_jvps[cummin_p] = _cumulative_jvp("cummin", lax_ops.min)
ad.primitive_jvps[cumlogsumexp_p] = _cumulative_jvp("cumlogsumexp", _logaddexp)


# ---------------------------------------------------------------------------------------------
# Batching rules: the batch dimension gets a window of one element (or is shifted past the
# reduced or scanned axes), staying where it is.

def _insert_unit_window(bdim: int, window_dimensions, window_strides, padding,
                        base_dilation=None, window_dilation=None) -> dict:
    def insert(values, value):
        return tuple(values[:bdim]) + (value,) + tuple(values[bdim:])
    window = dict(window_dimensions=insert(window_dimensions, 1),
                  window_strides=insert(window_strides, 1), padding=insert(padding, (0, 0)))
    if base_dilation is not None:
        window.update(base_dilation=insert(base_dilation, 1),
                      window_dilation=insert(window_dilation, 1))
    return window


def _align_batch_dims(args, dims):
    """All of `args` with the batch dimension where the first batched one has it."""
    bdim, size = next((d, core.get_aval(x).shape[d]) for x, d in zip(args, dims)
                      if d is not None)
    return [batching.matchaxis(x, d, bdim, size) for x, d in zip(args, dims)], bdim


def _monoid_window_batch(prim):
    def rule(args, dims, **window):
        (x,), (bdim,) = args, dims
        return prim.bind(x, **_insert_unit_window(bdim, **window)), bdim
    return rule


def _windowed_pair_batch(prim):
    """select_and_gather_add / select_and_scatter_add: both operands batched alike."""
    def rule(args, dims, *, select_prim, **window):
        (a, b), bdim = _align_batch_dims(args, dims)
        return prim.bind(a, b, select_prim=select_prim, **_insert_unit_window(bdim, **window)), bdim
    return rule


def _check_unbatched_inits(opname: str, init_dims) -> None:
    if any(d is not None for d in init_dims):
        raise NotImplementedError(f"{opname} batching is not implemented for initial values "
                                  f"(as in JAX): only the operands may be batched.")


def _reduce_window_batch(args, dims, *, jaxpr, consts, **window):
    n = len(args) // 2
    (operands, inits), (operand_dims, init_dims) = _split(args, n), _split(dims, n)
    _check_unbatched_inits("reduce_window", init_dims)
    operands, bdim = _align_batch_dims(operands, operand_dims)
    outs = reduce_window_p.bind(*operands, *inits, jaxpr=jaxpr, consts=consts,
                                **_insert_unit_window(bdim, **window))
    return outs, [bdim] * n


def _reduce_batch(args, dims, *, computation, jaxpr, dimensions):
    n = len(args) // 2
    (operands, inits), (operand_dims, init_dims) = _split(args, n), _split(dims, n)
    _check_unbatched_inits("reduce", init_dims)
    operands, bdim = _align_batch_dims(operands, operand_dims)
    new_dimensions = tuple(d + (d >= bdim) for d in dimensions)
    outs = reduce_p.bind(*operands, *inits, computation=computation, jaxpr=jaxpr,
                         dimensions=new_dimensions)
    return outs, [bdim - sum(d < bdim for d in new_dimensions)] * n


def _cumulative_batch(prim):
    def rule(args, dims, *, axis, reverse):
        (x,), (bdim,) = args, dims
        return prim.bind(x, axis=axis + (axis >= bdim), reverse=reverse), bdim
    return rule


for _prim in (reduce_window_sum_p, reduce_window_max_p, reduce_window_min_p):
    batching.primitive_batchers[_prim] = _monoid_window_batch(_prim)
for _prim in (select_and_gather_add_p, select_and_scatter_add_p):
    batching.primitive_batchers[_prim] = _windowed_pair_batch(_prim)
batching.primitive_batchers[reduce_window_p] = _reduce_window_batch
batching.primitive_batchers[reduce_p] = _reduce_batch
for _prim in (cumsum_p, cumprod_p, cummax_p, cummin_p, cumlogsumexp_p):
    batching.primitive_batchers[_prim] = _cumulative_batch(_prim)
