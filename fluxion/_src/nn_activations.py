"""More of `fluxion.nn`: the newer activations, logmeanexp, and dot-product attention."""
from __future__ import annotations

import math

import numpy as np

import fluxion.numpy as jnp
from fluxion._src import dtypes
from fluxion._src.custom_derivatives import custom_jvp
from fluxion._src.nn_functions import _inexact, logsumexp, relu6, sigmoid, softmax, softplus
from fluxion._src.numpy.eager import eager_compiled


@eager_compiled()
def identity(x):
    """The identity function, as an array."""
    return jnp.asarray(x)


@eager_compiled()
def tanh(x, /):
    """Hyperbolic tangent (`jnp.tanh`)."""
    return jnp.tanh(x)


@eager_compiled(static_argnames=("axis",))
def glu(x, axis: int = -1):
    """Gated linear unit: the first half of `x` along `axis` times sigmoid of the second."""
    x = jnp.asarray(x)
    if x.shape[axis] % 2:
        raise ValueError(f"glu: the size of axis {axis} must be even, got {x.shape[axis]}")
    first, second = jnp.split(x, 2, axis)
    return first * sigmoid(second)


@eager_compiled()
def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    return relu6(x + 3.0) / 6.0


@eager_compiled()
def hard_silu(x):
    """x * hard_sigmoid(x) (also called hard_swish)."""
    x = jnp.asarray(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


@eager_compiled()
def mish(x):
    """x * tanh(softplus(x))."""
    x = jnp.asarray(x)
    return x * jnp.tanh(softplus(x))


@eager_compiled()
def soft_sign(x):
    """x / (|x| + 1)."""
    x = jnp.asarray(x)
    return x / (jnp.abs(x) + 1)


@eager_compiled()
def squareplus(x, b=4):
    """(x + sqrt(x**2 + b)) / 2, a smooth relu."""
    x, b = jnp.asarray(x), jnp.asarray(b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


@eager_compiled()
def sparse_plus(x):
    """0 for x <= -1, x for x >= 1, (x + 1)**2 / 4 between."""
    x = jnp.asarray(x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


@eager_compiled()
def sparse_sigmoid(x):
    """clip((x + 1) / 2, 0, 1), the derivative of sparse_plus."""
    return 0.5 * jnp.clip(jnp.asarray(x) + 1.0, 0.0, 2.0)


@custom_jvp
def log1mexp(x):
    """log(1 - exp(-x)) for x > 0, accurate on both sides of log(2)."""
    x = _inexact(x)
    return jnp.where(x < math.log(2.0), jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


@log1mexp.defjvp
def _log1mexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1mexp(x), t / jnp.expm1(x)


@eager_compiled(static_argnames=("axis", "keepdims"))
def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
    """log(mean(exp(x))) over `axis`, computed stably; `where` selects the entries."""
    x = _inexact(x)
    lse = logsumexp(x, axis=axis, keepdims=keepdims, where=where)
    if where is None:
        axes = range(x.ndim) if axis is None else np.atleast_1d(axis)
        count = math.prod(x.shape[int(a)] for a in axes)
        return lse - np.log(count).astype(lse.dtype)
    count = jnp.sum(jnp.broadcast_to(where, x.shape), axis=axis, keepdims=keepdims,
                    dtype=lse.dtype)
    return lse - jnp.log(count)


# ---------------------------------------------------------------------------------------------
# Attention

def _as_4d(x):
    x = jnp.asarray(x)
    return x if x.ndim >= 4 else jnp.expand_dims(x, tuple(range(4 - x.ndim)))


def _check(t, shape, dtype, name):
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {t.ndim}")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"{name} dtype should be {dtype}, but got {t.dtype}")
    if any(want != -1 and got != want for got, want in zip(t.shape, shape)):
        raise ValueError(f"{name} shape should be {list(shape)}: but got {t.shape}")


def _large_negative(dtype):
    # Finite in float32 (the softmax runs there), so masked logits never make inf - inf.
    top = min(float(jnp.finfo(dtype).max), float(np.finfo(np.float32).max))
    return jnp.asarray(-0.7 * top, dtype=dtype)


def _attention_mask(mask, is_causal, q_lengths, kv_lengths, window, T, S):
    """The combined boolean mask, broadcastable to (B, N, T, S), or None."""
    combined = None

    def both(a, b):
        return b if a is None else jnp.logical_and(a, b)
    if mask is not None:
        combined = mask
    q_pos = jnp.arange(T)[:, None]
    k_pos = jnp.arange(S)[None, :]
    if is_causal:
        combined = both(combined, (k_pos <= q_pos)[None, None])
    if window is not None:
        left, right = window
        combined = both(combined, ((q_pos <= k_pos + left) & (q_pos >= k_pos - right))[None, None])
    if q_lengths is not None or kv_lengths is not None:
        valid = jnp.ones((1, T, S), bool)
        if q_lengths is not None:
            valid = valid & (jnp.arange(T)[None, :, None] < q_lengths[:, None, None])
        if kv_lengths is not None:
            valid = valid & (jnp.arange(S)[None, None, :] < kv_lengths[:, None, None])
        combined = both(combined, valid[:, None])
    return combined


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal: bool = False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual: bool = False):
    """Scaled dot-product attention, softmax(Q K^T * scale + bias) V, per head.

    Parameters
    ----------
    query : array (B, T, N, H) or (T, N, H)
    key, value : arrays (B, S, K, H) or (S, K, H); N must be a multiple of K (grouped heads).
    bias : array broadcastable to (B, N, T, S), added to the logits.
    mask : boolean array broadcastable to (B, N, T, S); False entries are masked out.
    scale : float, default 1/sqrt(H).
    is_causal : bool
        Mask out keys after each query position.
    query_seq_lengths, key_value_seq_lengths : int32 arrays (B,)
        Valid lengths; positions past them are masked (padded queries give zeros).
    local_window_size : int or (left, right)
        Each query attends to keys within this many positions to its left and right.
    implementation : None or 'xla'
        'cudnn' needs a GPU and is not available.
    return_residual : bool
        Also return the logsumexp of the logits, shape (B, T, N).
    """
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: implementation={implementation!r} is not "
                         "available in fluxion (it needs cuDNN on a GPU); use None or 'xla'.")
    out_shape = jnp.shape(query)
    q, k, v = _as_4d(query), _as_4d(key), _as_4d(value)
    bias = None if bias is None else _as_4d(bias)
    mask = None if mask is None else _as_4d(mask)
    q_len = None if query_seq_lengths is None else jnp.asarray(query_seq_lengths)
    kv_len = None if key_value_seq_lengths is None else jnp.asarray(key_value_seq_lengths)
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    B, S, K, H = k.shape
    _check(v, (B, S, K, H), k.dtype, "value")
    _check(q, (B, -1, -1, H), k.dtype, "query")
    _check(mask, (-1,) * 4, np.dtype(bool), "mask")
    _check(bias, (-1,) * 4, None, "bias")
    _check(q_len, (B,), np.dtype("int32"), "query_seq_lengths")
    _check(kv_len, (B,), np.dtype("int32"), "key_value_seq_lengths")
    T, N = q.shape[1], q.shape[2]
    if N % K:
        raise ValueError(f"The number of query heads must be a multiple of key/value heads, but "
                         f"got {N} vs {K}")
    scale = 1.0 / math.sqrt(H) if scale is None else scale
    if N != K:  # grouped-query attention: each key/value head serves N // K query heads
        k, v = jnp.repeat(k, N // K, axis=2), jnp.repeat(v, N // K, axis=2)
    logits_dtype = dtypes.promote_types(q.dtype, np.float32)
    logits = jnp.einsum("btnh,bsnh->bnts", q, k, preferred_element_type=logits_dtype)
    logits = logits * jnp.asarray(scale, logits.dtype)
    if bias is not None:
        logits = (logits + bias).astype(logits.dtype)
    combined = _attention_mask(mask, is_causal, q_len, kv_len, local_window_size, T, S)
    if combined is not None:
        logits = jnp.where(combined, logits, _large_negative(logits.dtype))
    logits = logits.astype(np.float32)
    probs = softmax(logits, axis=-1).astype(k.dtype)
    encoded = jnp.einsum("bnts,bsnh->btnh", probs, v)
    if q_len is not None:
        valid = jnp.arange(T)[None, :] < q_len[:, None]
        encoded = encoded * valid[:, :, None, None].astype(encoded.dtype)
    encoded = encoded.reshape(out_shape)
    if not return_residual:
        return encoded
    from fluxion._src.lax.stop_gradient import stop_gradient
    lse = jnp.transpose(logsumexp(logits, axis=-1).astype(k.dtype), (0, 2, 1))
    return encoded, stop_gradient(lse.reshape(out_shape[:-1]))


# ---------------------------------------------------------------------------------------------
# Block-scaled matrix products

import dataclasses as _dataclasses  # noqa: E402


@_dataclasses.dataclass
class BlockScaleConfig:
    """How an operand is quantized for a block-scaled product: `block_size` elements of
    `data_type` share one scale of `scale_type`."""

    mode: str
    block_size: int
    data_type: object
    scale_type: object
    global_scale: object = None
    infer_only: bool = False


def get_scaled_dot_general_config(mode: str, global_scale=None) -> BlockScaleConfig:
    """The block-scaling configuration of 'mxfp8' (32-element blocks of float8_e4m3fn with
    float8_e8m0fnu scales) or 'nvfp4' (16 of float4_e2m1fn with float8_e4m3fn scales)."""
    import ml_dtypes
    if mode == "mxfp8":
        return BlockScaleConfig(mode, 32, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu,
                                None, False)
    if mode == "nvfp4":
        scale = jnp.array([1.0], np.float32) if global_scale is None else global_scale
        return BlockScaleConfig(mode, 16, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn,
                                scale, False)
    raise ValueError(f"Unsupported mode: {mode}")


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """sum_k lhs[b,m,k] * rhs[b,n,k], each element times the scale of its block of the
    contracting dimension: (B, M, K) x (B, N, K) with scales (B, M, K/bs), (B, N, K/bs).

    On the CPU the operands are dequantized to float32 and multiplied there (JAX's
    implementation needs cuDNN)."""
    lhs, rhs = jnp.asarray(lhs), jnp.asarray(rhs)
    lhs_scales, rhs_scales = jnp.asarray(lhs_scales), jnp.asarray(rhs_scales)
    if lhs.ndim != 3 or rhs.ndim != 3 or lhs.shape[2] != rhs.shape[2]:
        raise ValueError(f"scaled_matmul expects (B, M, K) and (B, N, K) operands, got "
                         f"{lhs.shape} and {rhs.shape}")
    blocks = lhs_scales.shape[-1]
    if lhs.shape[2] % blocks or rhs_scales.shape[-1] != blocks:
        raise ValueError(f"scaled_matmul: scales {lhs_scales.shape} and {rhs_scales.shape} do "
                         f"not divide the contracting size {lhs.shape[2]} into blocks")
    size = lhs.shape[2] // blocks

    def dequantized(x, scales):
        return x.astype(np.float32) * jnp.repeat(scales.astype(np.float32), size, axis=-1)
    out = jnp.einsum("bmk,bnk->bmn", dequantized(lhs, lhs_scales), dequantized(rhs, rhs_scales))
    return out.astype(preferred_element_type)


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32,
                       configs=None, implementation=None):
    """A dot_general meant for block-scaled low-precision operands; without cuDNN (on the
    CPU) it is computed as lax.dot_general in preferred_element_type, as JAX does there."""
    if implementation not in (None, "xla"):
        raise ValueError(f"scaled_dot_general: implementation={implementation!r} needs cuDNN "
                         "on a GPU, which fluxion does not have")
    if np.dtype(preferred_element_type) not in (np.float32, np.float16, dtypes.bfloat16):
        raise TypeError(f"Only support preferred_element_type in (f32, bf16, f16), but got "
                        f"{preferred_element_type}")
    from fluxion import lax
    return lax.dot_general(lhs, rhs, dimension_numbers,
                           preferred_element_type=preferred_element_type)
