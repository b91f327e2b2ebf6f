"""Argument handling shared by fluxion.numpy: conversion, promotion, broadcasting and axes."""
from __future__ import annotations

import operator
import warnings

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.export import shape_poly
from fluxion._src.array import Array
from fluxion._src.config import config
from fluxion._src.lax import lax
from fluxion._src.lax import structural


def is_arraylike(x) -> bool:
    # (an object with __jax_array__ passes, as in JAX; `as_array` converts it)
    return isinstance(x, (Array, core.Tracer, np.ndarray, np.generic, bool, int, float, complex,
                          shape_poly.DimExpr)) or hasattr(x, "__jax_array__")


_PLAIN_VALUES = (Array, core.Tracer, np.ndarray, np.generic, bool, int, float, complex)


def _converts_itself(x) -> bool:
    """An object with `__jax_array__` (not an array or scalar that happens to have one)."""
    return not isinstance(x, _PLAIN_VALUES) and hasattr(x, "__jax_array__")


def _dims_as_values(args):
    """Symbolic dimensions among `args` as traced int scalars (shape polymorphism), and objects
    with `__jax_array__` as their arrays (before their dtypes are read for promotion)."""
    if any(type(x) is shape_poly.DimExpr or _converts_itself(x) for x in args):
        return [as_array(x) if type(x) is shape_poly.DimExpr or _converts_itself(x) else x
                for x in args]
    return args


def check_arraylike(fname: str, *args) -> None:
    for i, x in enumerate(args):
        if not is_arraylike(x):
            raise TypeError(f"{fname} requires ndarray or scalar arguments, got {type(x)} at "
                            f"position {i}.")


def check_no_float0s(fname: str, *args) -> None:
    """JAX's TypeError for a float0 operand (a gradient of an integer argument)."""
    if any(getattr(x, "dtype", None) == dtypes.float0 for x in args):
        raise TypeError(
            f"Called {fname} with a float0 array. float0s do not support any operations by "
            "design because they are not compatible with non-trivial vector spaces. No implicit "
            "dtype conversion is done. You can use np.zeros_like(arr, dtype=np.float) to cast a "
            "float0 array to a regular zeros array. \nIf you didn't expect to get a float0 you "
            "might have accidentally taken a gradient with respect to an integer argument.")


def check_python_int(x) -> None:
    """A Python int must fit the default integer type (as when JAX converts it)."""
    if type(x) is int and not dtypes.fits_default_int(x):
        raise OverflowError(f"Python int {x} too large to convert to "
                            f"{dtypes.default_int_dtype().name}")


def as_array(x):
    """`x` as an Array or Tracer, keeping its weak type (JAX's `lax.asarray`)."""
    if isinstance(x, (Array, core.Tracer)):
        return x
    if type(x) is shape_poly.DimExpr:
        return shape_poly.dimension_as_value(x)
    if not isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)):
        convert = getattr(x, "__jax_array__", None)
        if convert is not None:
            return as_array(convert())
    check_python_int(x)
    return lax._convert_element_type(x, None, dtypes.is_weakly_typed(x))


def ensure_arraylike(fname: str, *args):
    """Check the arguments are array-like and convert them; one argument gives one value."""
    check_arraylike(fname, *args)
    out = [as_array(x) for x in args]
    return out[0] if len(out) == 1 else out


def convert(x, dtype, weak_type: bool = False):
    """Convert to `dtype` (canonicalized); a no-op when the type is already right."""
    return lax._convert_element_type(as_array(x), dtypes.canonicalize_dtype(dtype), weak_type)


def promote_dtypes(*args):
    """Convert arguments to their common dtype under the promotion lattice (weak types kept)."""
    if len(args) < 2:
        return [as_array(x) for x in args]
    args = _dims_as_values(args)
    for x in args:
        check_python_int(x)
    dtype, weak = dtypes.result_type_with_weak(*args)
    return [lax._convert_element_type(x, dtype, weak) for x in args]


def to_inexact_dtype(dtype) -> np.dtype:
    """JAX's fixed map to an inexact type: bools and integers of up to 32 bits become float32,
    64-bit integers float64 (then canonicalized); inexact types stay."""
    if dtypes.is_inexact(dtype):
        return dtype
    wide = dtype.itemsize == 8 and dtype.kind in "iu"
    return dtypes.canonicalize_dtype(np.float64 if wide else np.float32)


def promote_dtypes_inexact(*args):
    """Promote, then make the common dtype inexact (see to_inexact_dtype)."""
    args = _dims_as_values(args)
    for x in args:
        check_python_int(x)
    dtype, weak = dtypes.result_type_with_weak(*args)
    dtype = to_inexact_dtype(dtype)
    return [lax._convert_element_type(x, dtype, weak) for x in args]


def promote_dtypes_numeric(*args):
    """Promote, then make a boolean common dtype int32."""
    args = _dims_as_values(args)
    for x in args:
        check_python_int(x)
    dtype, weak = dtypes.result_type_with_weak(*args)
    if dtype == dtypes.bool_:
        dtype = dtypes.int32  # as JAX's to_numeric_dtype, with or without x64
    return [lax._convert_element_type(x, dtype, weak) for x in args]


def broadcast_shapes(*shapes) -> tuple:
    try:
        return shape_poly.broadcast_shapes(*shapes)
    except ValueError:
        err = ValueError(f"Incompatible shapes for broadcasting: shapes={list(shapes)}")
        core.note_user_line(err)
        raise err from None


def canonicalize_shape(shape, context: str = "") -> tuple:
    """A shape as a tuple of Python ints; an int stands for a 1-D shape."""
    if isinstance(shape, (core.Tracer, Array, np.ndarray)) and np.ndim(shape) == 0 or isinstance(
            shape, (int, np.integer, float, np.floating)) or type(shape) is shape_poly.DimExpr:
        shape = (shape,)
    try:
        dims = tuple(operator.index(core.concrete_or_error(d, context)) if isinstance(d, core.Tracer)
                     else core.canonicalize_dim(d) for d in shape)
    except TypeError:
        traced = isinstance(shape, (tuple, list)) and any(
            isinstance(d, core.Tracer) for d in shape)
        hint = ("\nIf using `jit`, try using `static_argnums` or applying `jit` to smaller "
                "subfunctions.") if traced else ""
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{tuple(shape) if isinstance(shape, list) else shape!r}.{hint}") from None
    if any(d < 0 for d in dims):
        raise TypeError(f"Shapes must have nonnegative dimensions, got {dims}.")
    return dims


def broadcast_to(x, shape) -> object:
    """Broadcast `x` to `shape` with NumPy's rules (leading dims added, size-1 dims expanded)."""
    x = as_array(x)
    shape = canonicalize_shape(shape)
    aval = core.get_aval(x)
    if aval.shape == shape:
        return x
    ndim = len(shape)
    lead = ndim - aval.ndim
    if lead < 0:
        raise ValueError(f"Cannot broadcast to shape with fewer dimensions: "
                         f"arr_shape={aval.shape} shape={shape}")  # JAX's words
    if any(d != 1 and d != s for d, s in zip(aval.shape, shape[lead:])):
        raise ValueError(f"Incompatible shapes for broadcasting: {aval.shape} and requested "
                         f"shape {shape}")
    # broadcast_in_dim expands size-1 operand dimensions itself.
    return lax.broadcast_in_dim(x, shape, tuple(range(lead, ndim)))


def broadcast_arrays(*args) -> list:
    """Broadcast every argument to their common shape."""
    args = [as_array(x) for x in args]
    shapes = [core.get_aval(x).shape for x in args]
    if all(s == shapes[0] for s in shapes):
        return args
    shape = broadcast_shapes(*shapes)
    return [broadcast_to(x, shape) for x in args]


def broadcast_arrays_for_op(fname: str, *args):
    """Broadcast to a common shape, leaving rank-0 operands alone (lax broadcasts them).

    Incompatible shapes raise TypeError, as the elementwise lax operations do in JAX (or, for
    operands of different ranks, ValueError, as JAX's rank promotion does)."""
    shapes = [core.get_aval(x).shape for x in args]
    longest = max(shapes, key=len)
    if all(s == longest or s == () for s in shapes):
        return list(args)  # lax broadcasts rank-0 operands itself
    if config.numpy_rank_promotion != "allow":
        check_rank_promotion(fname, shapes)
    try:
        shape = shape_poly.broadcast_shapes(*shapes)
    except ValueError:
        if len({len(s) for s in shapes if s}) > 1:  # JAX's rank promotion fails first
            err = ValueError(f"Incompatible shapes for broadcasting: shapes={list(shapes)}")
        else:
            err = TypeError(f"{fname} got incompatible shapes for broadcasting: "
                            f"{', '.join(map(str, shapes))}.")
        core.note_user_line(err)
        raise err from None
    return [x if s == shape or s == () else broadcast_to(x, shape) for x, s in zip(args, shapes)]


def check_rank_promotion(fname: str, shapes) -> None:
    """Warn or raise, as `config.numpy_rank_promotion` says, when operands of several
    non-zero ranks would be broadcast to a common rank (JAX's promote_shapes)."""
    if len({len(s) for s in shapes if s}) < 2:
        return
    shown = " ".join(map(str, shapes))
    if config.numpy_rank_promotion == "warn":
        warnings.warn(f"Following NumPy automatic rank promotion for {fname} on shapes {shown}. "
                      "Set the jax_numpy_rank_promotion config option to 'allow' to disable "
                      "this warning; for more information, see "
                      "https://docs.jax.dev/en/latest/rank_promotion_warning.html.",
                      stacklevel=3)
    elif config.numpy_rank_promotion == "raise":
        err = ValueError(f"Operands could not be broadcast together for {fname} on shapes "
                         f"{shown} and with the config option jax_numpy_rank_promotion='raise'. "
                         "For more information, see "
                         "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")
        core.note_user_line(err)
        raise err


def _same_type_arrays(args) -> bool:
    """All arguments are arrays or tracers of one shape, dtype and weak type: nothing to do."""
    aval = getattr(args[0], "aval", None)
    # Weak operands may still change type (a weak bool becomes strong). Avals are interned,
    # so `is` compares them.
    if type(aval) is not core.ShapedArray or aval.weak_type:
        return False
    for x in args[1:]:
        if getattr(x, "aval", None) is not aval:
            return False
    return True


def promote_args(fname: str, *args):
    if args and _same_type_arrays(args):
        return list(args)
    check_arraylike(fname, *args)
    check_no_float0s(fname, *args)
    return broadcast_arrays_for_op(fname, *promote_dtypes(*args))


def promote_args_inexact(fname: str, *args):
    if args and _same_type_arrays(args) and dtypes.is_inexact(args[0].aval.dtype):
        return list(args)
    check_arraylike(fname, *args)
    check_no_float0s(fname, *args)
    return broadcast_arrays_for_op(fname, *promote_dtypes_inexact(*args))


def promote_args_numeric(fname: str, *args):
    check_arraylike(fname, *args)
    check_no_float0s(fname, *args)
    return broadcast_arrays_for_op(fname, *promote_dtypes_numeric(*args))


def canonicalize_axis(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for array of dimension "
                                      f"{ndim}")
    return axis % ndim


def canonicalize_axes(axis, ndim: int, fname: str = "") -> tuple:
    """`axis` (None, an int or a sequence of ints) as a tuple of non-negative axes.

    None means every axis; repeated axes raise ValueError."""
    if axis is None:
        return tuple(range(ndim))
    axis = core.concrete_or_error(axis, f"The axis argument of {fname or 'this function'} must "
                                        "be known statically")
    if isinstance(axis, (tuple, list, np.ndarray)):
        axes = tuple(canonicalize_axis(a, ndim) for a in axis)
    else:
        axes = (canonicalize_axis(axis, ndim),)
    if len(set(axes)) != len(axes):
        raise ValueError(f"duplicate value in 'axis': {axis}")
    return axes


def to_bool(x):
    """Nonzero test, keeping booleans as they are."""
    x = as_array(x)
    if core.get_aval(x).dtype == dtypes.bool_:
        return x
    return lax.ne(x, lax._convert_element_type(0, core.get_aval(x).dtype, False))


def scalar_like(x, value):
    """A scalar `value` of x's dtype and weak type."""
    aval = core.get_aval(x)
    return lax._convert_element_type(value, aval.dtype, aval.weak_type)


def lax_const(x, value):
    """A scalar for computing with x that is weakly typed only when x is a weakly typed
    scalar (JAX's `lax._const`, which decides the weak type of many jnp results)."""
    aval = core.get_aval(x)
    return lax._convert_element_type(value, aval.dtype, aval.weak_type and aval.ndim == 0)


def select(pred, on_true, on_false):
    """lax.select where rank-0 cases broadcast to the shape of the others (pred may stay rank 0)."""
    shapes = {core.get_aval(x).shape for x in (pred, on_true, on_false)} - {()}
    if len(shapes) > 1:
        raise ValueError(f"select: incompatible shapes {sorted(shapes)}")
    if shapes:
        (shape,) = shapes
        on_true, on_false = (x if core.get_aval(x).shape == shape else
                             lax.broadcast_in_dim(x, shape, ()) for x in (on_true, on_false))
    return structural.select_n(pred, on_false, on_true)


def where(condition, x, y):
    """Three-argument `where`: promotes x and y, broadcasts all three, selects."""
    check_arraylike("where", condition, x, y)
    condition = to_bool(condition)
    x, y = promote_dtypes(x, y)
    if core.get_aval(condition).ndim == 0:
        x, y = broadcast_arrays(x, y)
    else:
        condition, x, y = broadcast_arrays(condition, x, y)
    if core.get_aval(x).size == 0:
        return x
    return select(condition, x, y)


def static_dim(value, what: str):
    """A dimension: a Python int from a concrete value, or a symbolic dimension as is."""
    if type(value) is shape_poly.DimExpr:
        return value
    return static_int(value, what)


def static_int(value, what: str) -> int:
    """A Python int from a concrete value; traced values raise ConcretizationTypeError."""
    return operator.index(core.concrete_or_error(value, what))
