"""Activation functions and friends (`fluxion.nn`), written with fluxion.numpy."""
from __future__ import annotations

import math
import operator
import warnings

import numpy as np

from fluxion._src import dtypes
from fluxion._src.custom_derivatives import custom_jvp
from fluxion._src.traceback_util import user_stacklevel


def _jnp():
    import fluxion.numpy as jnp
    return jnp


@custom_jvp
def relu(x):
    """max(x, 0); its derivative at 0 is 0, as in JAX."""
    jnp = _jnp()
    return jnp.maximum(x, 0)


@relu.defjvp
def _relu_jvp(primals, tangents):
    jnp = _jnp()
    (x,), (t,) = primals, tangents
    return relu(x), jnp.where(x > 0, t, jnp.zeros_like(t))


@custom_jvp
def relu6(x):
    """min(max(x, 0), 6); its derivative is 0 at 0 and 6, as in JAX."""
    jnp = _jnp()
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


@relu6.defjvp
def _relu6_jvp(primals, tangents):
    jnp = _jnp()
    (x,), (t,) = primals, tangents
    return relu6(x), jnp.where((x > 0) & (x < 6), t, jnp.zeros_like(t))


def sigmoid(x):
    """Logistic sigmoid 1 / (1 + exp(-x))."""
    from fluxion._src.lax import lax
    return lax.logistic(_jnp().asarray(x))  # integers are refused, as by JAX


def _inexact(x):
    jnp = _jnp()
    x = jnp.asarray(x)
    return x if dtypes.is_inexact(x.dtype) else x.astype(dtypes.default_float_dtype())


def log_sigmoid(x):
    """log(sigmoid(x)), computed stably as -softplus(-x)."""
    return -softplus(-_inexact(x))


def softplus(x):
    """log(1 + exp(x)), computed stably."""
    jnp = _jnp()
    return jnp.logaddexp(_inexact(x), 0.0)


def silu(x):
    """x * sigmoid(x)."""
    x = _jnp().asarray(x)
    return x * sigmoid(x)


swish = silu


def gelu(x, approximate: bool = True):
    """Gaussian error linear unit; the tanh approximation by default, as in JAX."""
    jnp = _jnp()
    x = _inexact(x)
    # The constants have x's dtype and are not weakly typed: neither is the result (JAX's).
    if approximate:
        sqrt_2_over_pi = np.asarray(math.sqrt(2 / math.pi), x.dtype)
        return 0.5 * x * (1 + jnp.tanh(sqrt_2_over_pi * (x + 0.044715 * x ** 3)))
    from fluxion._src.lax import lax
    # erfc, not 1 + erf: for x below about -4, 1 + erf(x / sqrt 2) rounds to 0 in float32.
    return x * (lax.erfc(-x * np.asarray(math.sqrt(0.5), x.dtype)) / 2)


def elu(x, alpha=1.0):
    """x if x > 0 else alpha * (exp(x) - 1)."""
    jnp = _jnp()
    x = _inexact(x)
    safe = jnp.where(x > 0, 0.0, x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(safe))


def leaky_relu(x, negative_slope=1e-2):
    """x if x >= 0 else negative_slope * x."""
    jnp = _jnp()
    x = _inexact(x)
    return jnp.where(x >= 0, x, negative_slope * x)


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * min(exp(x / alpha) - 1, 0)."""
    jnp = _jnp()
    x = _inexact(x)
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


def selu(x):
    """Scaled ELU with the self-normalizing constants."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


def hard_tanh(x):
    """Clip x to [-1, 1] (integers stay integers; the derivative at +-1 is 1, as in JAX)."""
    jnp = _jnp()
    x = jnp.asarray(x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False, where=None):
    """log(sum(b * exp(a))) over `axis`, computed stably (the max is subtracted first)."""
    jnp = _jnp()
    from fluxion._src.lax.stop_gradient import stop_gradient
    from fluxion._src.numpy.util import canonicalize_axes, promote_dtypes_inexact
    if where is not None:  # masked-out entries must not reach exp (their 0 * inf cotangent)
        a = jnp.where(where, a, 0)
    if b is None:
        (a,) = promote_dtypes_inexact(a)  # int32 -> float32 even with x64, as JAX
    else:
        a, b = promote_dtypes_inexact(a, b)  # an integer b takes a's float type
        a, b = jnp.broadcast_arrays(a, b)
        a = jnp.where(b != 0, a, -np.inf)  # a zero weight drops its term, even at a = inf
    axes = canonicalize_axes(axis, a.ndim, "logsumexp")
    complex_input = jnp.iscomplexobj(a)
    real = jnp.real(a) if complex_input else a  # the shift is real: it must keep the phase
    # Reduce without keepdims and broadcast back only for the subtraction: the program is then
    # the one JAX emits (no size-1 dimensions carried through the scalar tail).
    amax = jnp.max(real, axis=axes, where=where, initial=-np.inf) if where is not None or \
        not a.size else jnp.max(real, axis=axes)
    amax = stop_gradient(jnp.where(jnp.isfinite(amax), amax, 0.0))
    exp = jnp.exp(a - jnp.expand_dims(amax, axes))
    if b is not None:
        exp = exp * b
    total = jnp.sum(exp, axis=axes, where=where) if where is not None else jnp.sum(exp, axis=axes)
    sign = jnp.sign(total)
    # A complex sum keeps its phase in the log, unless the sign is returned separately.
    magnitude = total if complex_input and not return_sign else jnp.abs(total)
    out = jnp.log(magnitude) + amax
    if keepdims:
        out = jnp.expand_dims(out, axes)
        sign = jnp.expand_dims(sign, axes)
    if return_sign:
        return out, sign
    if b is not None and not jnp.iscomplexobj(out):
        out = jnp.where(sign < 0, np.nan, out)  # the log of a negative sum
    return out


def _masked_max(x, axis, where):
    jnp = _jnp()
    from fluxion._src.lax.stop_gradient import stop_gradient
    if where is None and x.size:
        return stop_gradient(jnp.max(x, axis=axis, keepdims=True))
    return stop_gradient(jnp.max(x, axis=axis, keepdims=True, where=where, initial=-np.inf))


def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) along `axis`; with `where`, masked-out entries are -inf and take no
    part in the normalization."""
    jnp = _jnp()
    x = _inexact(x)
    if where is not None:
        x = jnp.where(where, x, -np.inf)
    shifted = x - _masked_max(x, axis, where)
    total = jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True, where=where)
    result = shifted - jnp.log(total)
    return result if where is None else jnp.where(where, result, -np.inf)


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) along `axis`; with `where`, masked-out entries are 0 and take no
    part in the normalization."""
    jnp = _jnp()
    x = _inexact(x)
    if where is not None:
        x = jnp.where(where, x, -np.inf)
    unnormalized = jnp.exp(x - _masked_max(x, axis, where))
    result = unnormalized / jnp.sum(unnormalized, axis=axis, keepdims=True, where=where)
    return result if where is None else jnp.where(where, result, 0.0)


def one_hot(x, num_classes: int, *, dtype=None, axis=-1):
    """One-hot encode integer array `x` along a new axis of size num_classes.

    `axis` is a position in the result, or the name of a mapped axis (vmap's axis_name,
    shard_map's mesh axes) of size num_classes: then each instance compares `x` with its
    index along that axis."""
    jnp = _jnp()
    from fluxion._src import core
    from fluxion._src.lax import parallel, structural
    from fluxion._src.numpy.util import canonicalize_axis
    num_classes = core.concrete_or_error(
        num_classes, "The error arose in jax.nn.one_hot argument `num_classes`")
    x = jnp.asarray(x)
    if not dtypes.is_integer(x.dtype):
        warnings.warn(f"jax.nn.one_hot input should be integer-typed; got dtype={x.dtype}",
                      DeprecationWarning, stacklevel=user_stacklevel())
    dtype = dtypes.default_float_dtype() if dtype is None else dtype
    if isinstance(axis, (str, tuple)):
        axis_size = parallel.axis_size(axis)
        if num_classes != axis_size:
            raise ValueError(f"Expected num_classes to match the size of axis {axis}, but "
                             f"{num_classes} != {axis_size}")
        return (x == parallel.axis_index(axis)).astype(dtype)
    axis = canonicalize_axis(operator.index(axis), x.ndim + 1)
    shape = [1] * x.ndim
    shape.insert(axis, num_classes)
    classes = structural.broadcasted_iota(x.dtype, tuple(shape), axis)
    return (jnp.expand_dims(x, axis) == classes).astype(dtype)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm: str = "fast"):
    """(x - mean) / sqrt(variance + epsilon) along `axis`, over the entries `where` selects.

    `algorithm="fast"` (JAX's default) takes the variance as mean(x**2) - mean**2 clipped at
    0; `"stable"` as mean((x - mean)**2)."""
    jnp = _jnp()
    from fluxion._src.lax import lax
    x = _inexact(x)
    if mean is None:
        mean = jnp.mean(x, axis=axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(x - mean), axis=axis, keepdims=True, where=where)
        elif algorithm == "fast":
            variance = jnp.mean(jnp.square(x), axis=axis, keepdims=True, where=where) - \
                jnp.square(mean)
            variance = jnp.clip(variance, 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.subtract(x, mean) * lax.rsqrt(variance + epsilon)
