"""Argument handling shared by fluxion.numpy: conversion, promotion and broadcasting."""
from __future__ import annotations

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.array import Array
from fluxion._src.lax import lax


def is_arraylike(x) -> bool:
    return isinstance(x, (Array, core.Tracer, np.ndarray, np.generic, bool, int, float, complex))


def check_arraylike(fname: str, *args) -> None:
    for i, x in enumerate(args):
        if not is_arraylike(x):
            raise TypeError(f"{fname} requires ndarray or scalar arguments, got {type(x)} at "
                            f"position {i}.")


def promote_dtypes(*args):
    """Convert arguments to their common dtype under the promotion lattice (weak types kept)."""
    if len(args) < 2:
        return [lax._convert_element_type(x, None, dtypes.is_weakly_typed(x)) if not isinstance(
            x, (Array, core.Tracer)) else x for x in args]
    dtype, weak = dtypes.result_type_with_weak(*args)
    return [lax._convert_element_type(x, dtype, weak) for x in args]


def promote_dtypes_inexact(*args):
    """Promote, then make the common dtype inexact (ints and bools become the default float)."""
    dtype, weak = dtypes.result_type_with_weak(*args)
    if not dtypes.is_inexact(dtype):
        dtype = dtypes.default_float_dtype()
    return [lax._convert_element_type(x, dtype, weak) for x in args]


def promote_dtypes_numeric(*args):
    dtype, weak = dtypes.result_type_with_weak(*args)
    if dtype == dtypes.bool_:
        dtype = dtypes.default_int_dtype()
    return [lax._convert_element_type(x, dtype, weak) for x in args]


def broadcast_shapes(*shapes) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes={list(shapes)}") from None


def broadcast_to(x, shape) -> object:
    shape = tuple(shape)
    aval = core.get_aval(x)
    if aval.shape == shape:
        return x
    ndim = len(shape)
    if aval.ndim > ndim or any(d != 1 and d != s for d, s in zip(aval.shape, shape[ndim - aval.ndim:])):
        raise ValueError(f"Incompatible shapes for broadcasting: {aval.shape} and requested shape {shape}")
    keep = tuple(i for i, (d, s) in enumerate(zip(aval.shape, shape[ndim - aval.ndim:])) if d == s)
    if len(keep) != aval.ndim:
        x = lax.reshape(x, tuple(aval.shape[i] for i in keep))
    return lax.broadcast_in_dim(x, shape, tuple(ndim - aval.ndim + i for i in keep))


def broadcast_arrays_for_op(*args):
    """Broadcast to a common shape, leaving rank-0 operands alone (lax broadcasts them)."""
    shapes = [core.get_aval(x).shape for x in args]
    if all(s == shapes[0] for s in shapes):
        return list(args)
    shape = broadcast_shapes(*shapes)
    return [x if s == shape or s == () else broadcast_to(x, shape) for x, s in zip(args, shapes)]


def promote_args(fname: str, *args):
    check_arraylike(fname, *args)
    return broadcast_arrays_for_op(*promote_dtypes(*args))


def promote_args_inexact(fname: str, *args):
    check_arraylike(fname, *args)
    return broadcast_arrays_for_op(*promote_dtypes_inexact(*args))


def promote_args_numeric(fname: str, *args):
    check_arraylike(fname, *args)
    return broadcast_arrays_for_op(*promote_dtypes_numeric(*args))


def canonicalize_axis(axis: int, ndim: int) -> int:
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim
