"""`fluxion.nn.initializers`: parameter initializers whose draws equal jax.nn.initializers'.

Each factory returns `init(key, shape, dtype=..., out_sharding=None)`. The random calls, their
order and the arithmetic follow JAX's, so a key gives the same bits in both frameworks.
"""
from __future__ import annotations

import math
from typing import Any, Protocol, Sequence

import numpy as np

import fluxion.numpy as jnp
from fluxion import random
from fluxion._src import dtypes

__all__ = ["Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform",
           "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal",
           "lecun_uniform", "normal", "ones", "orthogonal", "truncated_normal", "uniform",
           "variance_scaling", "xavier_normal", "xavier_uniform", "zeros"]


class Initializer(Protocol):
    """What an initializer is: called with a key, a shape and a dtype, returns an array."""

    def __call__(self, key: Any, shape: Sequence[int], dtype: Any = None,
                 out_sharding: Any = None) -> Any:
        ...


def _dtype(dtype):
    return dtypes.default_float_dtype() if dtype is None else dtype


def _no_sharding(out_sharding, name):
    if out_sharding is not None:
        raise NotImplementedError(f"nn.initializers.{name}: out_sharding is not supported")


def zeros(key, shape, dtype=None, out_sharding=None):
    """An initializer of zeros, laid out as `out_sharding` when given."""
    return jnp.zeros(shape, _dtype(dtype), out_sharding=out_sharding)


def ones(key, shape, dtype=None, out_sharding=None):
    """An initializer of ones, laid out as `out_sharding` when given."""
    return jnp.ones(shape, _dtype(dtype), out_sharding=out_sharding)


def constant(value, dtype=None) -> Initializer:
    """An initializer filling with `value` (laid out as the call's `out_sharding`)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        return jnp.full(shape, value, dtype=_dtype(dtype), out_sharding=out_sharding)
    return init


def uniform(scale=1e-2, dtype=None) -> Initializer:
    """Uniform on [0, scale)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _dtype(dtype)
        return random.uniform(key, shape, dtype, out_sharding=out_sharding) * jnp.array(scale, dtype)
    return init


def normal(stddev=1e-2, dtype=None) -> Initializer:
    """Normal with mean 0 and standard deviation `stddev`."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _dtype(dtype)
        return random.normal(key, shape, dtype, out_sharding=out_sharding) * jnp.array(stddev, dtype)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0) -> Initializer:
    """A normal truncated to [lower, upper] standard deviations, times `stddev`."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _dtype(dtype)
        return random.truncated_normal(key, lower, upper, shape, dtype,
                                       out_sharding=out_sharding) * jnp.array(stddev, dtype)
    return init


def _product(shape, axes):
    return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)


def _fans(shape, in_axis, out_axis, batch_axis) -> tuple[float, float]:
    """(fan_in, fan_out): the input/output sizes times the receptive field."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")
    in_size, out_size = _product(shape, in_axis), _product(shape, out_axis)
    receptive = math.prod(shape) / in_size / out_size / _product(shape, batch_axis)
    return in_size * receptive, out_size * receptive


def _complex_uniform(key, shape, dtype):
    """Uniform on the unit disk scaled to unit variance (JAX's draw order)."""
    key_r, key_theta = random.split(key)
    real = np.array(0, dtype).real.dtype
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real)).astype(dtype)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key, upper, shape, dtype):
    key_r, key_theta = random.split(key)
    real = np.array(0, dtype).real.dtype
    t = (1 - jnp.exp(jnp.array(-(upper ** 2), dtype))) * random.uniform(
        key_r, shape, real).astype(dtype)
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


# The standard deviation of a unit normal truncated to [-2, 2], and its complex counterpart.
_TRUNCATED_STDDEV = 0.87962566103423978
_COMPLEX_TRUNCATED_STDDEV = 0.95311164380491208


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None) -> Initializer:
    """Draws with variance scale / n, n from the weight shape's fans.

    Parameters
    ----------
    scale : float
    mode : "fan_in", "fan_out", "fan_avg" or "fan_geo_avg"
    distribution : "truncated_normal", "normal" or "uniform"
    in_axis, out_axis, batch_axis : axes (ints or sequences) of the weight shape.
    """
    def init(key, shape, dtype=dtype, out_sharding=None):
        shape = tuple(int(d) for d in shape)
        dtype = _dtype(dtype)
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        denominators = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
                        "fan_geo_avg": (fan_in * fan_out) ** 0.5}
        if mode not in denominators:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominators[mode], dtype=dtype)
        real = jnp.issubdtype(dtype, np.floating)
        if distribution == "truncated_normal":
            if real:
                stddev = jnp.sqrt(variance) / jnp.array(_TRUNCATED_STDDEV, dtype)
                return random.truncated_normal(key, -2, 2, shape, dtype,
                                               out_sharding=out_sharding) * stddev
            stddev = jnp.sqrt(variance) / jnp.array(_COMPLEX_TRUNCATED_STDDEV, dtype)
            return _complex_truncated_normal(key, 2, shape, dtype) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dtype, out_sharding=out_sharding) * jnp.sqrt(variance)
        if distribution == "uniform":
            if real:
                return random.uniform(key, shape, dtype, -1,
                                      out_sharding=out_sharding) * jnp.sqrt(3 * variance)
            return _complex_uniform(key, shape, dtype) * jnp.sqrt(variance)
        raise ValueError(f"invalid distribution for variance scaling initializer: {distribution}")
    return init


def _scaled(scale, mode, distribution):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
        return variance_scaling(scale, mode, distribution, in_axis=in_axis, out_axis=out_axis,
                                batch_axis=batch_axis, dtype=dtype)
    factory.__doc__ = f"variance_scaling({scale}, {mode!r}, {distribution!r})."
    return factory


glorot_uniform = xavier_uniform = _scaled(1.0, "fan_avg", "uniform")
glorot_normal = xavier_normal = _scaled(1.0, "fan_avg", "truncated_normal")
lecun_uniform = _scaled(1.0, "fan_in", "uniform")
lecun_normal = _scaled(1.0, "fan_in", "truncated_normal")
he_uniform = kaiming_uniform = _scaled(2.0, "fan_in", "uniform")
he_normal = kaiming_normal = _scaled(2.0, "fan_in", "truncated_normal")
for _name in ("glorot_uniform", "glorot_normal", "lecun_uniform", "lecun_normal", "he_uniform",
              "he_normal"):
    globals()[_name].__name__ = _name


def orthogonal(scale=1.0, column_axis=-1, dtype=None) -> Initializer:
    """A (semi-)orthogonal matrix along `column_axis` against the other axes, times `scale`."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding, "orthogonal")
        dtype = _dtype(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype=dtype)
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        q = random.orthogonal(key, n_rows, (), dtype, n_cols)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (n_cols,))
        return jnp.array(scale, dtype) * jnp.moveaxis(q, -1, column_axis)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None) -> Initializer:
    """Convolution kernels (3-5 D) that are orthogonal at the spatial centre, zero elsewhere."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding, "delta_orthogonal")
        dtype = _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        matrix = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype=dtype).at[centre].set(matrix)
    return init
