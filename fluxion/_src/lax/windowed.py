"""Reductions with a user computation and windowed reductions: reduce, reduce_window (generic,
and the sum/max/min monoids), and the cumulative reductions cumsum, cumprod, cummax, cummin and
cumlogsumexp (lowered to reduce_window, which XLA rewrites into a fast scan).

A user computation is a Python function of two pytrees of scalars; it is traced once per
(function, argument types) to a jaxpr, which the lowering inlines into the op's region.
"""
from __future__ import annotations

import functools
import operator

import numpy as np

from fluxion._src import core, dtypes, staging
from fluxion._src.config import config
from fluxion._src.compiler.hlo import dense_i64, i64_array
from fluxion._src.core import ClosedJaxpr, ShapedArray
from fluxion._src.lax import lax as lax_ops
from fluxion._src.lax.base import ANY, FLOAT, NUMBER, check_dtype, standard_primitive
from fluxion._src.lax.convolution import (canonical_padding, check_positive, dilate_dim,
                                          padtype_to_pads, stride_dim)
from fluxion._src.lax.reductions import (emit_reduce, identity_value, reduce_and_p, reduce_max_p,
                                         reduce_min_p, reduce_or_p, reduce_prod_p, reduce_sum_p,
                                         reduce_xor_p)
from fluxion._src.tree_util import tree_flatten, tree_unflatten

__all__ = ["cumlogsumexp", "cumlogsumexp_p", "cummax", "cummax_p", "cummin", "cummin_p",
           "cumprod", "cumprod_p", "cumsum", "cumsum_p", "reduce", "reduce_p", "reduce_window",
           "reduce_window_max_p", "reduce_window_min_p", "reduce_window_p",
           "reduce_window_shape_tuple", "reduce_window_sum_p"]

_MONOID_OPS = {"add": "stablehlo.add", "mul": "stablehlo.multiply", "max": "stablehlo.maximum",
               "min": "stablehlo.minimum"}


# ---------------------------------------------------------------------------------------------
# Tracing user computations

def _computation_jaxpr(opname: str, computation, tree, flat_avals: tuple) -> ClosedJaxpr:
    """Trace `computation(xs, ys)` for two pytrees `xs`, `ys` of scalars of structure `tree`.

    Cached per hashable computation, so that eager calls reuse their compiled executables."""
    try:
        hash(computation)
    except TypeError:
        return _trace_computation(opname, computation, tree, flat_avals)
    return _cached_trace_computation(opname, computation, tree, flat_avals, config.enable_x64)


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
        raise ValueError(f"{opname} computation must return the structure of its operands "
                         f"{tree}, got {out_trees[0]}")
    expected = [a.strip_weak_type() for a in flat_avals]
    got = [a.strip_weak_type() for a in closed.out_avals]
    if got != expected:
        raise TypeError(f"{opname} computation must return scalars of its operands' types "
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
                       padding, base_dilation, window_dilation) -> list:
    """A `stablehlo.reduce_window`; `body(block, args)` returns the region's results."""
    scalar_avals = [ShapedArray((), x.dtype) for x in operands]
    region = ctx.new_block(scalar_avals + scalar_avals)
    region.ret(body(region, region.args))
    attrs = {"window_dimensions": i64_array(window_dimensions),
             "window_strides": i64_array(window_strides),
             "base_dilations": i64_array(base_dilation),
             "window_dilations": i64_array(window_dilation)}
    if window_dimensions:  # an empty dense attribute does not parse; the default is no padding
        attrs["padding"] = dense_i64([list(p) for p in padding], (len(padding), 2))
    return ctx.op("stablehlo.reduce_window", list(operands) + list(inits), ctx.avals_out, attrs,
                  [region])


def _monoid_body(kind: str):
    op = _MONOID_OPS[kind]
    return lambda block, args: [block.op1(op, list(args), args[0].aval)]


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
    if values is None:
        return (1,) * default_len
    try:
        return tuple(operator.index(v) for v in values)
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
# Cumulative reductions

def _logaddexp_body(block, args):
    """log(exp(x) + exp(y)) without overflow; NaNs and equal infinities pass through x + y."""
    x, y = args
    delta = block.sub(x, y)
    largest = block.max(x, y)
    smooth = block.add(largest, block.log1p(block.exp(block.neg(block.abs(delta)))))
    return [block.select(block.compare(delta, delta, "NE"), block.add(x, y), smooth)]


def _cumulative(name: str, kind: str, allowed):
    body = _logaddexp_body if kind == "logaddexp" else _monoid_body(kind)

    def abstract_eval(x, *, axis, reverse):
        check_dtype(name, x, allowed)
        if axis < 0:
            raise ValueError(f"{name}: XLA operations do not allow negative axes, got axis={axis}")
        if axis >= x.ndim:
            raise ValueError(f"{name}: axis {axis} is out of bounds for array of shape {x.shape}")
        return x

    def lowering(ctx, x, *, axis, reverse):
        n = x.shape[axis]
        if n == 0:
            return x
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
cumlogsumexp_p, cumlogsumexp = _cumulative("cumlogsumexp", "logaddexp", FLOAT)
cumsum.__doc__ = "Cumulative sum of `operand` along `axis` (from the end if `reverse`)."
cumprod.__doc__ = "Cumulative product of `operand` along `axis` (from the end if `reverse`)."
cummax.__doc__ = "Cumulative maximum of `operand` along `axis` (from the end if `reverse`)."
cummin.__doc__ = "Cumulative minimum of `operand` along `axis` (from the end if `reverse`)."
cumlogsumexp.__doc__ = ("Cumulative log(sum(exp(x))) of `operand` along `axis` (from the end if "
                        "`reverse`).")
