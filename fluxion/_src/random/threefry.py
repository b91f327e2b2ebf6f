"""The Threefry-2x32 block cipher as a primitive, and the counters JAX's PRNG feeds it.

`threefry2x32_p(k1, k2, x1, x2)` encrypts the counter pairs (x1, x2) under the key (k1, k2),
elementwise over broadcast uint32 operands (Salmon et al., "Parallel random numbers: as easy as
1, 2, 3", SC 2011: 20 rounds, key injection every 4). As in JAX, it lowers to the unrolled
round function in general and to a 5-iteration loop on CPU. The outputs are integers, so its
tangents are symbolic zeros.

`iota_2x32_shape_p` gives, for an array shape, the row-major index of every element as a
64-bit number split into (high, low) uint32 words: the counters of the partitionable layout.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import ad, batching, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray
from fluxion._src.export.shape_poly import DimExpr, broadcast_shapes
from fluxion._src.lax.base import broadcast_operands, broadcasting_shape, standard_primitive

# Rotation amounts of the two alternating groups of four rounds, and the key-schedule parity
# constant (Threefry's C240).
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KS_PARITY = 0x1BD11BDA


def _threefry2x32_abstract_eval(k1, k2, x1, x2):
    avals = (k1, k2, x1, x2)
    if any(a.dtype != dtypes.uint32 for a in avals):
        got = ", ".join(a.str_short() for a in avals)
        raise TypeError(f"Arguments to threefry2x32 must have uint32 type, got [{got}]")
    shape = broadcasting_shape("threefry2x32", avals)
    aval = ShapedArray(shape, dtypes.uint32)
    return [aval, aval]


def _threefry2x32_unrolled_lowering(ctx, k1, k2, x1, x2):
    shape = ctx.avals_out[0].shape
    k1, k2, x1, x2 = broadcast_operands(ctx, [k1, k2, x1, x2])

    def const(v):
        return ctx.constant(np.uint32(v), dtypes.uint32, shape)

    def rotate_left(v, d):
        return ctx.or_(ctx.shift_left(v, const(d)), ctx.shift_right_logical(v, const(32 - d)))

    ks = (k1, k2, ctx.xor(ctx.xor(k1, k2), const(_KS_PARITY)))
    x = [ctx.add(x1, ks[0]), ctx.add(x2, ks[1])]
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x[0] = ctx.add(x[0], x[1])
            x[1] = ctx.xor(x[0], rotate_left(x[1], r))
        # Key injection: subkey s = block + 1 is (ks[s % 3], ks[(s + 1) % 3] + s).
        s = block + 1
        x[0] = ctx.add(x[0], ks[s % 3])
        x[1] = ctx.add(ctx.add(x[1], ks[(s + 1) % 3]), const(s))
    return x


def _threefry2x32_rolled(k1, k2, x1, x2):
    """The cipher as a loop of 5 blocks of 4 rounds, the structure of JAX's CPU lowering.

    XLA then fuses the code that consumes the random bits as it does for JAX, which keeps
    even results derived through long fused chains (e.g. a norm of normal samples) equal to
    JAX's to the last bit. (The unrolled form runs faster on CPU, but XLA fuses it with its
    consumers and may then round some of them differently.)"""
    import fluxion.numpy as jnp
    from fluxion._src.lax import control_flow, lax

    shape = broadcast_shapes(*(np.shape(v) for v in (k1, k2, x1, x2)))
    x1, x2 = jnp.broadcast_to(x1, shape), jnp.broadcast_to(x2, shape)
    # The loop runs on flat arrays: XLA:CPU compiles a rank-4 loop body several times slower
    # than the same body in one dimension (3.6 s against 0.7 s of CPU for f32[3,3,4,6]).
    flat = len(shape) > 1 and all(isinstance(d, int) for d in shape) and all(
        np.ndim(k) == 0 for k in (k1, k2))
    if flat:
        x1, x2 = jnp.reshape(x1, (-1,)), jnp.reshape(x2, (-1,))
    u32 = dtypes.uint32
    rotations = [lax._convert_element_type(np.array(r, np.uint32), u32) for r in _ROTATIONS]
    ks = [k1, k2, k1 ^ k2 ^ np.uint32(_KS_PARITY)]
    x = [x1 + ks[0], x2 + ks[1]]

    def rotate_left(v, d):
        return lax.shift_left(v, d) | lax.shift_right_logical(v, np.uint32(32) - d)

    def block(i, state):
        (x0, x1), ks, rots = state
        for j in range(4):
            x0 = x0 + x1
            x1 = x0 ^ rotate_left(x1, rots[0][j])
        injected = [x0 + ks[0], x1 + ks[1] + lax._convert_element_type(i + 1, u32)]
        return injected, ks[1:] + ks[:1], rots[1:] + rots[:1]

    x, _, _ = control_flow.fori_loop(0, 5, block, (x, ks[1:] + ks[:1], rotations))
    return [jnp.reshape(v, shape) for v in x] if flat else list(x)


threefry2x32_p = standard_primitive("threefry2x32", _threefry2x32_abstract_eval,
                                    _threefry2x32_unrolled_lowering, multiple_results=True)
lowering.register_lowering(threefry2x32_p, lowering.lower_fun(_threefry2x32_rolled),
                           platform="cpu")
ad.defjvp_zero(threefry2x32_p)
batching.defbroadcasting(threefry2x32_p)


def threefry2x32(k1, k2, x1, x2):
    """Threefry-2x32 of the counter words (x1, x2) under key words (k1, k2); all uint32."""
    return threefry2x32_p.bind(k1, k2, x1, x2)


# ---------------------------------------------------------------------------------------------
# Counters

def _iota_2x32_shape_abstract_eval(*, shape):
    aval = ShapedArray(shape, dtypes.uint32)
    return [aval, aval]


def _iota_2x32_shape_lowering(ctx, *, shape):
    # The flat index, sum_d iota_d * stride_d, in 64-bit arithmetic (whatever the x64 flag).
    u64 = ShapedArray(shape, dtypes.uint64)
    strides, stride = [], 1
    for d in reversed(shape):
        strides.append(stride)
        stride = stride * d  # a symbolic dimension makes a symbolic stride
    flat = None
    for dim, stride in enumerate(reversed(strides)):
        term = ctx.iota(u64, dim)
        if isinstance(stride, DimExpr):
            term = ctx.mul(ctx.broadcast(ctx.convert(ctx.dim_value(stride), dtypes.uint64),
                                         shape), term)
        elif stride != 1:
            term = ctx.mul(ctx.constant(np.uint64(stride), dtypes.uint64, shape), term)
        flat = term if flat is None else ctx.add(flat, term)
    high = ctx.shift_right_logical(flat, ctx.constant(np.uint64(32), dtypes.uint64, shape))
    return [ctx.convert(high, dtypes.uint32), ctx.convert(flat, dtypes.uint32)]


iota_2x32_shape_p = standard_primitive("iota_2x32_shape", _iota_2x32_shape_abstract_eval,
                                       _iota_2x32_shape_lowering, multiple_results=True)
ad.defjvp_zero(iota_2x32_shape_p)


def iota_2x32_shape(shape):
    """(high, low) uint32 words of the row-major index of each element of `shape`."""
    shape = tuple(shape)
    if not shape:
        from fluxion._src.lax import lax
        zero = lax._convert_element_type(0, dtypes.uint32)
        return zero, zero
    return iota_2x32_shape_p.bind(shape=shape)
