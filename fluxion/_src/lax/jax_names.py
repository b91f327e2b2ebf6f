"""The rest of jax.lax's public names: primitive objects under JAX's names, the structural
primitives JAX 0.10.2 added (stack, unstack, tile, split), optimization_barrier, mulhi, copy_p,
random bit generation, and the small helpers and type names of jax.lax.

Each `<name>_p` exported here is the object the corresponding lax function binds.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import operator
from typing import Any, Sequence, Union

import numpy as np

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray
from fluxion._src.lax import lax
from fluxion._src.lax import structural
from fluxion._src.lax.base import ANY, INT, ORDERED, binop, standard_primitive
from fluxion._src.lax.contractions import Precision
from fluxion._src.lax.dot_algorithms import DotAlgorithm, DotAlgorithmPreset  # noqa: F401
from fluxion._src.lax.derived import derived_primitive
from fluxion._src.lax.elementwise import (  # noqa: F401  (re-exported under JAX's names)
    abs_p, acos_p, acosh_p, add_p, and_p, asin_p, asinh_p, atan2_p, atan_p, atanh_p, cbrt_p,
    ceil_p, clz_p, complex_p, conj_p, cos_p, cosh_p, digamma_p, div_p, eq_p, erf_inv_p, erf_p,
    erfc_p, exp2_p, exp_p, expm1_p, floor_p, ge_p, gt_p, imag_p, integer_pow_p, is_finite_p,
    le_p, lgamma_p, log1p_p, log_p, logistic_p, lt_p, max_p, min_p, mul_p, ne_p, neg_p,
    nextafter_p, not_p, or_p, polygamma_p, population_count_p, pow_p, real_p, rem_p, round_p,
    rsqrt_p, shift_left_p, shift_right_arithmetic_p, shift_right_logical_p, sign_p, sin_p,
    sinh_p, sqrt_p, square_p, sub_p, tan_p, tanh_p, xor_p)
from fluxion._src.lax.structural import (  # noqa: F401
    bitcast_convert_type_p, clamp_p, concatenate_p, dynamic_slice_p, dynamic_update_slice_p,
    iota_p, pad_p, reduce_precision_p, rev_p, select_n_p, slice_p, squeeze_p, transpose_p)
from fluxion._src.lax.shapes import (  # noqa: F401
    broadcast_in_dim_p, convert_element_type_p, reshape_p)
from fluxion._src.lax.contractions import dot_general_p  # noqa: F401
from fluxion._src.lax.indexing import (  # noqa: F401
    gather_p, scatter_add_p, scatter_max_p, scatter_min_p, scatter_mul_p, scatter_p,
    scatter_sub_p)
from fluxion._src.lax.reductions import (  # noqa: F401
    reduce_and_p, reduce_max_p, reduce_min_p, reduce_or_p, reduce_prod_p, reduce_sum_p,
    reduce_xor_p)
from fluxion._src.lax.stop_gradient import stop_gradient_p  # noqa: F401
from fluxion._src.lax.parallel import (  # noqa: F401  (existing objects, behaviour unchanged)
    all_gather_p, all_to_all_p, axis_index_p, pmax_p, pmin_p, ppermute_p, psum_p)

__all__ = [
    # primitive objects of existing operations
    "abs_p", "acos_p", "acosh_p", "add_p", "and_p", "asin_p", "asinh_p", "atan2_p", "atan_p",
    "atanh_p", "cbrt_p", "ceil_p", "clz_p", "complex_p", "conj_p", "cos_p", "cosh_p",
    "digamma_p", "div_p", "eq_p", "erf_inv_p", "erf_p", "erfc_p", "exp2_p", "exp_p", "expm1_p",
    "floor_p", "ge_p", "gt_p", "imag_p", "integer_pow_p", "is_finite_p", "le_p", "lgamma_p",
    "log1p_p", "log_p", "logistic_p", "lt_p", "max_p", "min_p", "mul_p", "ne_p", "neg_p",
    "nextafter_p", "not_p", "or_p", "polygamma_p", "population_count_p", "pow_p", "real_p",
    "rem_p", "round_p", "rsqrt_p", "shift_left_p", "shift_right_arithmetic_p",
    "shift_right_logical_p", "sign_p", "sin_p", "sinh_p", "sqrt_p", "square_p", "sub_p",
    "tan_p", "tanh_p", "xor_p", "bitcast_convert_type_p", "clamp_p", "concatenate_p",
    "dynamic_slice_p", "dynamic_update_slice_p", "iota_p", "pad_p", "reduce_precision_p",
    "rev_p", "select_n_p", "slice_p", "squeeze_p", "transpose_p", "broadcast_in_dim_p",
    "convert_element_type_p", "reshape_p", "dot_general_p", "gather_p", "scatter_add_p",
    "scatter_max_p", "scatter_min_p", "scatter_mul_p", "scatter_p", "scatter_sub_p",
    "reduce_and_p", "reduce_max_p", "reduce_min_p", "reduce_or_p", "reduce_prod_p",
    "reduce_sum_p", "reduce_xor_p", "stop_gradient_p", "all_gather_p", "all_to_all_p",
    "axis_index_p", "pmax_p", "pmin_p", "ppermute_p", "psum_p",
    # new operations
    "stack", "stack_p", "unstack", "unstack_p", "tile", "tile_p", "split", "split_p",
    "optimization_barrier", "optimization_barrier_p", "copy_p", "mulhi", "mulhi_p",
    "eq_to_p", "le_to_p", "lt_to_p",
    "rng_uniform", "rng_uniform_p", "rng_bit_generator", "rng_bit_generator_p",
    "RandomAlgorithm", "broadcast_shapes", "broadcast_like", "batch_matmul", "dtype", "empty",
    "index_take", "shape_as_value", "stage", "stage_p", "conv_transpose_shape_tuple",
    "DotDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "PrecisionLike",
    "AccuracyMode", "Tolerance", "DotAlgorithm", "DotAlgorithmPreset",
]


def _asarray(x):
    from fluxion._src.numpy.util import as_array
    return as_array(x)


def _canonical_axis(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


# ---------------------------------------------------------------------------------------------
# stack, unstack, tile, split: one equation each, as in JAX

def _stack_impl(*operands, axis):
    return structural.concatenate([structural.expand_dims(x, (axis,)) for x in operands], axis)


def _unstack_impl(x, *, axis):
    return [structural.squeeze(structural.slice_in_dim(x, i, i + 1, axis=axis), (axis,))
            for i in range(x.shape[axis])]


def _tile_impl(x, *, reps):
    shape = []
    dims = []
    for i, (r, d) in enumerate(zip(reps, x.shape)):
        shape += [r, d]
        dims.append(2 * i + 1)
    tiled = lax.broadcast_in_dim(x, tuple(shape), tuple(dims))
    return lax.reshape(tiled, tuple(r * d for r, d in zip(reps, x.shape)))


def _split_impl(x, *, sizes, axis):
    outs, start = [], 0
    for size in sizes:
        outs.append(structural.slice_in_dim(x, start, start + size, axis=axis))
        start += size
    return outs


stack_p = derived_primitive("stack", _stack_impl, linear=True)
unstack_p = derived_primitive("unstack", _unstack_impl, multiple_results=True, linear=True)
tile_p = derived_primitive("tile", _tile_impl, linear=True)
split_p = derived_primitive("split", _split_impl, multiple_results=True, linear=True)


def stack(operands: Sequence, axis: int = 0):
    """Stack arrays of one shape and dtype along a new `axis`."""
    operands = [_asarray(x) for x in operands]
    if not operands:
        raise ValueError("stack requires at least one operand")
    avals = [core.get_aval(x) for x in operands]
    if len({a.ndim for a in avals}) != 1:
        raise ValueError(f"Cannot stack arrays with different numbers of dimensions: got "
                         f"{', '.join(str(a.shape) for a in avals)}.")
    if len({a.shape for a in avals}) != 1:
        raise ValueError(f"stack requires operands of the same shape, got "
                         f"{[a.shape for a in avals]}")
    if len({a.dtype for a in avals}) != 1:
        raise TypeError(f"stack requires operands of the same dtype, got "
                        f"{[a.dtype.name for a in avals]}")
    axis = _canonical_axis(axis, avals[0].ndim + 1)
    return stack_p.bind(*operands, axis=axis)


def unstack(x, axis: int = 0) -> tuple:
    """Split `x` along `axis` into a tuple of arrays of one rank less."""
    x = _asarray(x)
    axis = _canonical_axis(axis, x.ndim)
    return tuple(unstack_p.bind(x, axis=axis))


def tile(operand, reps: Sequence[int]):
    """Repeat `operand` `reps[i]` times along each dimension `i`."""
    operand = _asarray(operand)
    reps = tuple(operator.index(r) for r in reps)
    if len(reps) != operand.ndim:
        raise TypeError(f"reps length must be equal to the ndim of x, got len(reps)="
                        f"{len(reps)} and x.ndim={operand.ndim}.")
    if any(r < 0 for r in reps):
        raise ValueError(f"reps must be non-negative, got {reps}")
    return tile_p.bind(operand, reps=reps)


def split(operand, sizes: Sequence[int], axis: int = 0) -> list:
    """Split `operand` along `axis` into pieces of the given `sizes` (summing to its size)."""
    operand = _asarray(operand)
    axis = _canonical_axis(axis, operand.ndim)
    sizes = tuple(operator.index(s) for s in sizes)
    if any(s < 0 for s in sizes):
        raise ValueError(f"Sizes passed to split must be nonnegative, got {list(sizes)}")
    if sum(sizes) != operand.shape[axis]:
        raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension {axis} of the "
                         f"operand shape {operand.shape}")
    return list(split_p.bind(operand, sizes=sizes, axis=axis))


# ---------------------------------------------------------------------------------------------
# optimization_barrier and copy_p

def _barrier_lowering(ctx, *xs):
    return ctx.op("stablehlo.optimization_barrier", list(xs), ctx.avals_out)


optimization_barrier_p = standard_primitive("optimization_barrier", lambda *avals: list(avals),
                                            _barrier_lowering, multiple_results=True)


def _barrier_jvp(primals, tangents):
    # Primals and tangents each go through their own barrier, so linearization can keep the
    # primal half known.
    tangents = [ad.instantiate(t) for t in tangents]
    return (optimization_barrier_p.bind(*primals), optimization_barrier_p.bind(*tangents))


ad.primitive_jvps[optimization_barrier_p] = _barrier_jvp
ad.primitive_transposes[optimization_barrier_p] = lambda cts, *args: [
    ad.instantiate(c) for c in cts]
batching.primitive_batchers[optimization_barrier_p] = (
    lambda args, dims: (optimization_barrier_p.bind(*args), list(dims)))


def optimization_barrier(operand, /):
    """Keep XLA from moving computation across this point; returns `operand` (a pytree)."""
    from fluxion._src import tree_util
    leaves, tree = tree_util.tree_flatten(operand)
    leaves = [_asarray(x) for x in leaves]
    return tree_util.tree_unflatten(tree, optimization_barrier_p.bind(*leaves))


copy_p = standard_primitive("copy", lambda x: x, lambda ctx, x: x)
ad.deflinear(copy_p, lambda ct, x: [copy_p.bind(ad.instantiate(ct))])
batching.defvectorized(copy_p)


def stage(x, /):
    """Mark a value for staging; under fluxion, as under JAX's tracing, it is `x` unchanged."""
    return _asarray(x)


stage_p = standard_primitive("stage", lambda x: x, lambda ctx, x: x)
ad.deflinear(stage_p, lambda ct, x: [ct])
batching.defvectorized(stage_p)


# ---------------------------------------------------------------------------------------------
# mulhi: the high half of the double-width integer product

def _mulhi_lowering_fun(x, y):
    # Operands of equal rank may broadcast size-1 dimensions: give both the result's shape.
    shape = np.broadcast_shapes(x.shape, y.shape)
    x, y = (v if v.shape == shape else lax.broadcast_in_dim(v, shape, tuple(range(len(shape))))
            for v in (x, y))
    dt = x.dtype
    bits = dt.itemsize * 8
    signed = dt.kind == "i"
    if bits <= 16:
        wide = np.dtype(f"{'i' if signed else 'u'}{2 * dt.itemsize}")
        prod = lax.mul(lax.convert_element_type(x, wide), lax.convert_element_type(y, wide))
        shift = structural.full(prod.shape, bits, wide)
        hi = (lax.shift_right_arithmetic if signed else lax.shift_right_logical)(prod, shift)
        return lax.convert_element_type(hi, dt)
    # 32 and 64 bits (no wider type to use, with x64 off or at all): schoolbook multiplication
    # on half-width digits, unsigned, then the signed fix-up
    # mulhi_s(x, y) = mulhi_u(x, y) - (x < 0 ? y : 0) - (y < 0 ? x : 0).
    u = np.dtype(f"u{dt.itemsize}")
    half = bits // 2
    xu, yu = lax.bitcast_convert_type(x, u), lax.bitcast_convert_type(y, u)
    c = structural.full(x.shape, half, u)
    mask = structural.full(x.shape, (1 << half) - 1, u)
    xl, xh = lax.bitwise_and(xu, mask), lax.shift_right_logical(xu, c)
    yl, yh = lax.bitwise_and(yu, mask), lax.shift_right_logical(yu, c)
    ll, lh, hl, hh = lax.mul(xl, yl), lax.mul(xl, yh), lax.mul(xh, yl), lax.mul(xh, yh)
    mid = lax.add(lax.add(lax.shift_right_logical(ll, c), lax.bitwise_and(lh, mask)),
                  lax.bitwise_and(hl, mask))
    hi = lax.add(lax.add(hh, lax.shift_right_logical(lh, c)),
                 lax.add(lax.shift_right_logical(hl, c), lax.shift_right_logical(mid, c)))
    if not signed:
        return hi
    zero = structural.full(x.shape, 0, u)
    hi = lax.sub(hi, structural.select(lax.lt(x, structural.full(x.shape, 0, dt)), yu, zero))
    hi = lax.sub(hi, structural.select(lax.lt(y, structural.full(y.shape, 0, dt)), xu, zero))
    return lax.bitcast_convert_type(hi, dt)


mulhi_p = binop("mulhi", INT, lowering.lower_fun(_mulhi_lowering_fun, multiple_results=False))
ad.defjvp_zero(mulhi_p)
batching.defbroadcasting(mulhi_p)


def mulhi(x, y, /):
    """The high half of the full-width product of integers `x` and `y`."""
    return mulhi_p.bind(_asarray(x), _asarray(y))


# ---------------------------------------------------------------------------------------------
# eq_to, le_to, lt_to: comparisons under IEEE total order (-0.0 < 0.0, NaNs ordered)

def _total_order_compare(direction: str):
    def rule(ctx, x, y):
        from fluxion._src.lax.base import broadcast_operands
        x, y = broadcast_operands(ctx, [x, y])
        compare_type = "TOTALORDER" if dtypes.is_inexact(x.dtype) else None
        return ctx.compare(x, y, direction, compare_type)
    return rule


def _bool_result(*avals, **params):
    return np.dtype(np.bool_)


eq_to_p = binop("eq_to", ANY, _total_order_compare("EQ"), _bool_result)
le_to_p = binop("le_to", ORDERED, _total_order_compare("LE"), _bool_result)
lt_to_p = binop("lt_to", ORDERED, _total_order_compare("LT"), _bool_result)
for _prim in (eq_to_p, le_to_p, lt_to_p):
    ad.defjvp_zero(_prim)
    batching.defbroadcasting(_prim)


# ---------------------------------------------------------------------------------------------
# Random number generation in XLA

class RandomAlgorithm(enum.IntEnum):
    """Which algorithm `rng_bit_generator` uses."""

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __repr__(self):
        return f"{self.__class__.__name__}.{self.name}"

    __str__ = __repr__


_RNG_ALGORITHM_NAMES = {RandomAlgorithm.RNG_DEFAULT: "DEFAULT",
                        RandomAlgorithm.RNG_THREE_FRY: "THREE_FRY",
                        RandomAlgorithm.RNG_PHILOX: "PHILOX"}


def _rng_bit_generator_abstract_eval(key, *, shape, dtype, algorithm):
    if key.dtype != np.uint32 and key.dtype != np.uint64:
        raise TypeError(f"rng_bit_generator key must have dtype uint32 or uint64, got "
                        f"{key.dtype}")
    if key.ndim != 1:
        raise TypeError(f"rng_bit_generator key must be a vector, got shape {key.shape}")
    if np.dtype(dtype) not in (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32,
                                                       np.uint64)):
        raise TypeError(f"rng_bit_generator: unsupported dtype {np.dtype(dtype)}; must be an "
                        "unsigned integer type")
    _check_rng_state_size(key, algorithm)
    return [ShapedArray(key.shape, key.dtype), ShapedArray(shape, np.dtype(dtype))]


def _check_rng_state_size(key, algorithm):
    """XLA's state is a vector of 64-bit words (a uint32 key is viewed as pairs): two for
    THREE_FRY, two or three for PHILOX and the CPU default; refuse other sizes before XLA's
    verifier fails on them."""
    n = key.shape[0]
    words = n if key.dtype == np.uint64 else (n // 2 if n % 2 == 0 else None)
    allowed = (2,) if algorithm == RandomAlgorithm.RNG_THREE_FRY else (2, 3)
    if words not in allowed:
        sizes = " or ".join(f"uint32[{2 * w}] / uint64[{w}]" for w in allowed)
        raise TypeError(f"rng_bit_generator with {algorithm.name} needs a key of {sizes}, "
                        f"got {key.dtype}{list(key.shape)}")


def _rng_bit_generator_lowering(ctx, key, *, shape, dtype, algorithm):
    attrs = {"rng_algorithm": f"#stablehlo<rng_algorithm {_RNG_ALGORITHM_NAMES[algorithm]}>"}
    key_aval, bits_aval = ctx.avals_out
    # XLA's CPU expansion wants a u64 state: view a u32[2k] key as u64[k] (as JAX does).
    wide_key = key.dtype == np.uint32 and key.shape[0] % 2 == 0
    if wide_key:
        pairs = ctx.reshape(key, (key.shape[0] // 2, 2))
        key = ctx.bitcast_convert(pairs, ShapedArray((key.shape[0] // 2,), np.dtype(np.uint64)))
    narrow = np.dtype(dtype).itemsize < 4
    gen_aval = ShapedArray(shape, np.dtype(np.uint32)) if narrow else bits_aval
    new_key, bits = ctx.op("stablehlo.rng_bit_generator", [key], [key.aval, gen_aval], attrs)
    if wide_key:
        pairs = ctx.bitcast_convert(new_key, ShapedArray((key.shape[0], 2), np.dtype(np.uint32)))
        new_key = ctx.reshape(pairs, key_aval.shape)
    if narrow:
        bits = ctx.convert(bits, bits_aval.dtype)
    return [new_key, bits]


rng_bit_generator_p = standard_primitive("rng_bit_generator", _rng_bit_generator_abstract_eval,
                                         _rng_bit_generator_lowering, multiple_results=True)
ad.defjvp_zero(rng_bit_generator_p)


def _rng_bit_generator_batching_rule(args, dims, *, shape, dtype, algorithm):
    """One generator call per key, in a loop over the keys (a program of constant size):
    each batch element gets exactly what an unbatched call with its own key gives (JAX
    0.10.2 instead draws every element's bits from the first key)."""
    from fluxion._src.lax import control_flow  # control flow is built on this module
    key, = args
    dim, = dims
    if dim is batching.not_mapped:
        return rng_bit_generator_p.bind(key, shape=shape, dtype=dtype,
                                        algorithm=algorithm), [dim, dim]
    keys = batching.moveaxis(key, dim, 0)
    new_keys, bits = control_flow.map(
        lambda k: tuple(rng_bit_generator_p.bind(k, shape=shape, dtype=dtype,
                                                 algorithm=algorithm)), keys)
    return [new_keys, bits], [0, 0]


batching.primitive_batchers[rng_bit_generator_p] = _rng_bit_generator_batching_rule


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT, *,
                      out_sharding=None):
    """Stateless random bits from XLA's RngBitGenerator: returns (new_key, bits).

    The bits depend on the XLA backend and algorithm; they are not JAX's threefry stream.
    """
    del out_sharding
    shape = tuple(operator.index(d) for d in shape)
    key = _asarray(key)
    new_key, bits = rng_bit_generator_p.bind(key, shape=shape,
                                             dtype=dtypes.canonicalize_dtype(dtype),
                                             algorithm=RandomAlgorithm(algorithm))
    return new_key, bits


def _rng_uniform_abstract_eval(a, b, *, shape):
    if a.dtype != b.dtype:
        raise ValueError(f"Arguments to rng_uniform must have identical dtypes, got "
                         f"{a.dtype} and {b.dtype}.")
    if a.shape != () or b.shape != ():
        raise ValueError(f"Arguments to rng_uniform must be scalars; got shapes {a.shape} "
                         f"and {b.shape}.")
    return ShapedArray(shape, a.dtype, a.weak_type and b.weak_type)


def _rng_uniform_lowering(ctx, a, b, *, shape):
    shape_value = ctx.constant(np.asarray(shape, np.int64), np.int64)
    return ctx.op1("stablehlo.rng", [a, b, shape_value], ctx.avals_out[0],
                   {"rng_distribution": "#stablehlo<rng_distribution UNIFORM>"})


rng_uniform_p = standard_primitive("rng_uniform", _rng_uniform_abstract_eval,
                                   _rng_uniform_lowering)


def rng_uniform(a, b, shape):
    """Stateful pseudorandom values in [a, b) from XLA's RNG (not reproducible across runs of
    different programs; prefer fluxion.random)."""
    return rng_uniform_p.bind(_asarray(a), _asarray(b),
                              shape=tuple(operator.index(d) for d in shape))


# ---------------------------------------------------------------------------------------------
# Small helpers

def broadcast_shapes(*shapes) -> tuple:
    """The shape that arrays of the given shapes broadcast to (NumPy rules)."""
    from fluxion._src.numpy.util import broadcast_shapes as _broadcast_shapes
    for shape in shapes:
        try:
            dims = [core.canonicalize_dim(d) for d in shape]
        except TypeError:
            raise TypeError("Shapes must be 1D sequences of concrete values of integer type, "
                            f"got {shape}.") from None
        if any(type(d) is int and d < 0 for d in dims):
            raise TypeError("Only non-negative indices are allowed when broadcasting static "
                            f"shapes, but got shape {shape}.")
    return _broadcast_shapes(*shapes)


def broadcast_like(arr, like_arr):
    """`arr` broadcast to the shape of `like_arr` (with NumPy's trailing alignment)."""
    arr = _asarray(arr)
    shape = np.shape(like_arr) if not hasattr(like_arr, "shape") else tuple(like_arr.shape)
    if arr.shape == shape:
        return arr
    return lax.broadcast_in_dim(arr, shape, tuple(range(len(shape) - arr.ndim, len(shape))))


def batch_matmul(lhs, rhs, precision=None):
    """Batched matrix product of arrays of shape (..., m, k) and (..., k, n), equal batch
    dimensions."""
    lhs, rhs = _asarray(lhs), _asarray(rhs)
    if lhs.ndim < 2 or rhs.ndim < 2:
        raise ValueError(f"Arguments to batch_matmul must be at least 2D, got {lhs.ndim}, "
                         f"{rhs.ndim}")
    if lhs.ndim != rhs.ndim:
        raise ValueError(f"Arguments to batch_matmul must have same ndim, got {lhs.ndim}, "
                         f"{rhs.ndim}")
    batch = tuple(range(lhs.ndim - 2))
    return lax.dot_general(lhs, rhs, (((lhs.ndim - 1,), (rhs.ndim - 2,)), (batch, batch)),
                       precision=precision)


def dtype(x) -> np.dtype:
    """The dtype of `x` (a Python scalar gives JAX's default type of its kind)."""
    return dtypes.dtype(x, canonicalize=True)


def empty(shape, dtype, *, out_sharding=None):
    """An array of `shape` and `dtype` (its values are zeros, as in JAX)."""
    del out_sharding
    return structural.full(shape, 0, dtype)


def index_take(src, idxs, axes: Sequence[int]):
    """`src[idxs[0], idxs[1], ...]` along `axes`, one index array per axis (wrapping
    negative indices)."""
    from fluxion._src.numpy import indexing as np_indexing
    src = _asarray(src)
    axes = tuple(operator.index(a) for a in axes)
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: got {len(idxs)} index arrays for {len(axes)} axes")
    index = [slice(None)] * src.ndim
    for ax, ix in zip(axes, idxs):
        ix = _asarray(ix)
        size = structural.full(ix.shape, src.shape[ax], ix.dtype)
        index[ax] = lax.rem(lax.add(lax.rem(ix, size), size), size)
    del np_indexing
    return src[tuple(index)]


def shape_as_value(shape):
    """`shape` as an int32 array; symbolic dimensions (shape polymorphism) become values
    computed from the actual shapes."""
    from fluxion._src.export import shape_poly
    if all(shape_poly.is_constant_dim(d) for d in shape):
        sizes = [operator.index(d) for d in shape]
        if any(d > np.iinfo(np.int32).max for d in sizes):
            return np.asarray(sizes, np.int64)  # a NumPy array, int64 even without x64 (JAX)
        return _asarray(np.asarray(sizes, np.int32))
    # Symbolic sizes are values of the default integer type (int64 with x64), as in JAX.
    dtype = dtypes.canonicalize_dtype(np.dtype(np.int64))
    dims = [lax.convert_element_type(shape_poly.dimension_as_value(d), dtype) for d in shape]
    return structural.concatenate([structural.expand_dims(d, (0,)) for d in dims], 0)


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    """The output shape of `conv_transpose` for the given operand shapes and options."""
    from fluxion._src.lax import convolution
    lhs_perm, rhs_perm, out_perm = convolution.conv_general_permutations(dimension_numbers)
    lhs_trans = np.take(lhs_shape, lhs_perm)
    rhs_trans = np.take(rhs_shape, rhs_perm)
    if isinstance(padding, str):
        padding = [convolution._conv_transpose_padding(k, s, padding)
                   for k, s in zip(rhs_trans[2:], window_strides)]
    # The transposed convolution's output: (in - 1) * stride - kernel + 2, plus its padding.
    spatial = [(i - 1) * s - k + 2 + np.sum(pad)
               for i, k, s, pad in zip(lhs_trans[2:], rhs_trans[2:], window_strides, padding)]
    out_trans = (lhs_trans[0], rhs_trans[0], *spatial)
    return tuple(np.take(out_trans, np.argsort(out_perm)))


# ---------------------------------------------------------------------------------------------
# Type names of jax.lax's signatures

DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]],
                            tuple[Sequence[int], Sequence[int]]]
ConvGeneralDilatedDimensionNumbers = Union[tuple[str, str, str], Any, None]


class AccuracyMode(enum.Enum):
    """How accurately a transcendental function is computed (see `Tolerance`)."""

    HIGHEST = 1
    DEFAULT = 2


class Tolerance:
    """Accuracy tolerance of a transcendental op: at least one of atol, rtol, ulps."""

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        if atol < 0.0 or rtol < 0.0 or ulps < 0.0:
            raise ValueError("Tolerances must be non-negative.")
        if atol == 0.0 and rtol == 0.0 and ulps == 0:
            raise ValueError("At least one of atol, rtol, or ulps must be set.")
        self.atol, self.rtol, self.ulps = atol, rtol, ulps

    def __eq__(self, other):
        return isinstance(other, Tolerance) and (self.atol, self.rtol, self.ulps) == (
            other.atol, other.rtol, other.ulps)

    def __hash__(self):
        return hash((self.atol, self.rtol, self.ulps))

    def __repr__(self):
        return f"Tolerance(atol={self.atol}, rtol={self.rtol}, ulps={self.ulps})"


PrecisionLike = Union[None, str, Precision, tuple[str, str], tuple[Precision, Precision],
                      DotAlgorithm, DotAlgorithmPreset]

del dataclasses, math
