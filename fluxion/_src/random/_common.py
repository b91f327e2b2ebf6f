"""Argument checks shared by the samplers: dtypes, shapes and parameter broadcasting."""
from __future__ import annotations

import functools

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.api import jit
from fluxion._src.array import Array
from fluxion._src.numpy import util


def user_dtype(dtype, default: type, fun_name: str = "") -> np.dtype:
    """A dtype argument in canonical form (`default`, a Python type, stands in for None).

    As in JAX, an explicit 64-bit dtype with x64 disabled warns and is narrowed."""
    if dtype is None:
        dtype = default
    if isinstance(dtype, (Array, core.Tracer)):
        raise ValueError("Passing an array as a dtype argument is no longer supported; instead "
                         "of dtype=arr use dtype=arr.dtype.")
    np_dtype = dtypes.dtype(dtype)  # Python types give the canonical default of their kind
    if np_dtype not in dtypes.SUPPORTED_DTYPES:
        raise TypeError(f"JAX only supports number, bool, and string dtypes, got dtype {dtype}")
    return dtypes.check_user_dtype(np_dtype, fun_name)


def require_float(name: str, dtype, kinds: str = "a float") -> None:
    check = dtypes.is_inexact if "complex" in kinds else dtypes.is_float
    if not check(dtype):
        raise ValueError(f"dtype argument to `{name}` must be {kinds} dtype, got {dtype}")


def canonical_shape(shape) -> tuple:
    """A shape argument as a tuple of non-negative Python ints.

    A Python int `n` stands for `(n,)`; unlike jnp's shapes, a NumPy or array scalar is not
    a shape here (JAX's samplers raise TypeError for it)."""
    if shape is None:
        raise TypeError("'NoneType' object is not iterable")
    if not isinstance(shape, int) and getattr(shape, "ndim", None) == 0:  # no np.ndim: tracers
        raise TypeError("Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{shape!r}.")
    return util.canonicalize_shape(shape)


def check_shape(name: str, shape: tuple, *param_shapes) -> None:
    """ValueError unless the parameter shapes broadcast to exactly `shape`."""
    if param_shapes:
        result = util.broadcast_shapes(shape, *param_shapes)
        if result != tuple(shape):
            raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                             "argument, and the result of broadcasting the shapes must equal the "
                             f"shape argument, but got result {result} for shape argument "
                             f"{tuple(shape)}.")


def shape_from_params(name: str, shape, *params) -> tuple:
    """`shape` checked against the parameters' shapes, or their broadcast shape if None."""
    param_shapes = [np.shape(p) for p in params]
    if shape is None:
        return util.broadcast_shapes(*param_shapes) if param_shapes else ()
    shape = canonical_shape(shape)
    check_shape(name, shape, *param_shapes)
    return shape


def check_safe_to_cast(name: str, dtype, *args) -> None:
    """TypePromotionError unless each argument promotes to `dtype` without loss (e.g. a
    float64 parameter for a float32 sample)."""
    for arg in args:
        arg_dtype = dtypes.dtype(arg, canonicalize=True)
        if arg_dtype != dtype and dtypes.result_type(arg, dtype) != dtype:
            raise dtypes.TypePromotionError(
                f"In arguments to {name}, cannot safely cast argument of type {arg_dtype} to "
                f"{dtype}")


def check_out_sharding(out_sharding) -> None:
    """The public samplers (fluxion.random) take `out_sharding` themselves (a sharding
    constraint on their result, see sharding_types.accepts_out_sharding)."""
    if out_sharding is not None:
        raise NotImplementedError("out_sharding is handled by the public fluxion.random "
                                  "functions")


def static_jit(fun, num_static: int):
    """`fun` jitted with its last `num_static` positional arguments static.

    Each combination of static values gets its own jitted function of the remaining
    arguments, so that eager calls take jit's fast path (no flattening of static arguments)."""
    cache = {}

    def call(*args):
        dynamic, static = args[:-num_static], args[-num_static:]
        specialized = cache.get(static)
        if specialized is None:
            @functools.wraps(fun)
            def bound(*dyn):
                return fun(*dyn, *static)
            specialized = cache[static] = jit(bound)
        return specialized(*dynamic)
    call.__name__ = call.__qualname__ = getattr(fun, "__name__", "sampler")
    return call
