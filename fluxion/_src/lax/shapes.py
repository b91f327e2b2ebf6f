"""Type conversion and shape primitives: convert_element_type, broadcast_in_dim, reshape."""
from __future__ import annotations

import numpy as np

from fluxion._src import dtypes
from fluxion._src.core import ShapedArray
from fluxion._src.lax.base import standard_primitive


def _canonical_shape(opname: str, shape) -> tuple:
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"{opname}: shape must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in shape):
        raise TypeError(f"{opname}: shape {shape} has negative dimensions")
    return shape


# ---------------------------------------------------------------------------------------------
# convert_element_type

def _convert_abstract_eval(x, *, new_dtype, weak_type, sharding=None):
    return ShapedArray(x.shape, new_dtype, weak_type)


def _convert_lowering(ctx, x, *, new_dtype, weak_type, sharding=None):
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        x = ctx.op1("stablehlo.real", [x], x.aval.update(
            dtype=np.float32 if x.dtype == dtypes.complex64 else np.float64))
    if new_dtype == dtypes.bool_ and x.dtype != dtypes.bool_:
        return ctx.compare(x, ctx.constant(0, x.dtype, x.shape), "NE")
    return ctx.convert(x, new_dtype)


convert_element_type_p = standard_primitive("convert_element_type", _convert_abstract_eval,
                                            _convert_lowering)

# ---------------------------------------------------------------------------------------------
# broadcast_in_dim


def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions, sharding=None):
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must have length equal to the "
                        f"operand ndim; got broadcast_dimensions {broadcast_dimensions} for "
                        f"operand ndim {x.ndim}.")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must be in range(0, {len(shape)}); "
                        f"got {broadcast_dimensions}")
    if list(broadcast_dimensions) != sorted(set(broadcast_dimensions)):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must be strictly increasing; "
                        f"got broadcast_dimensions {broadcast_dimensions}")
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] != 1 and x.shape[i] != shape[d]:
            raise TypeError(f"broadcast_in_dim operand dimension sizes must either be 1, or be "
                            f"equal to their corresponding dimensions in the target broadcast "
                            f"shape; got operand of shape {x.shape}, target broadcast shape "
                            f"{shape}, broadcast_dimensions {broadcast_dimensions}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _broadcast_in_dim_lowering(ctx, x, *, shape, broadcast_dimensions, sharding=None):
    return ctx.broadcast_in_dim(x, shape, broadcast_dimensions)


broadcast_in_dim_p = standard_primitive("broadcast_in_dim", _broadcast_in_dim_abstract_eval,
                                        _broadcast_in_dim_lowering)

# ---------------------------------------------------------------------------------------------
# reshape


def _reshape_abstract_eval(x, *, new_sizes, dimensions=None, sharding=None):
    size = int(np.prod(new_sizes, dtype=np.int64))
    if size != x.size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} "
                        f"(size {size}) for shape {x.shape} (size {x.size}).")
    if dimensions is not None and sorted(dimensions) != list(range(x.ndim)):
        raise TypeError(f"reshape dimensions must be a permutation of range({x.ndim}), got {dimensions}")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def _reshape_lowering(ctx, x, *, new_sizes, dimensions=None, sharding=None):
    if dimensions is not None and list(dimensions) != list(range(x.aval.ndim)):
        x = ctx.transpose(x, dimensions)
    return ctx.reshape(x, new_sizes)


reshape_p = standard_primitive("reshape", _reshape_abstract_eval, _reshape_lowering)
