"""Type conversion and shape primitives: convert_element_type, broadcast_in_dim, reshape."""
from __future__ import annotations

import numpy as np

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.core import ShapedArray
from fluxion._src.lax.base import standard_primitive


# ---------------------------------------------------------------------------------------------
# convert_element_type

def _convert_abstract_eval(x, *, new_dtype, weak_type, sharding=None):
    if new_dtype not in dtypes.SUPPORTED_DTYPES:
        raise TypeError(f"convert_element_type: fluxion does not support dtype {new_dtype}.")
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


def _convert_jvp(primals, tangents, *, new_dtype, weak_type, sharding=None):
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type,
                                      sharding=sharding)
    if not dtypes.is_inexact(new_dtype):
        return out, ad.Zero.from_primal_value(out)
    return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type,
                                            sharding=sharding)


def _convert_transpose(ct, x, *, new_dtype, weak_type, sharding=None):
    aval = x.aval
    if type(ct) is ad.Zero or not dtypes.is_inexact(aval.dtype):
        return [ad.Zero(aval)]
    ct_aval = core.get_aval(ct)
    if (ct_aval.dtype, ct_aval.weak_type) == (aval.dtype, aval.weak_type):
        return [ct]
    return [convert_element_type_p.bind(ct, new_dtype=aval.dtype, weak_type=aval.weak_type,
                                        sharding=sharding)]


ad.primitive_jvps[convert_element_type_p] = _convert_jvp
ad.primitive_transposes[convert_element_type_p] = _convert_transpose
batching.defvectorized(convert_element_type_p)

# ---------------------------------------------------------------------------------------------
# broadcast_in_dim


def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions, sharding=None):
    if any(d < 0 for d in shape):
        raise TypeError(f"broadcast_in_dim shape must have every element be nonnegative, got "
                        f"{shape}.")
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must have length equal to "
                        f"operand ndim; got broadcast_dimensions {broadcast_dimensions} for "
                        f"operand ndim {x.ndim}.")
    if len(shape) < x.ndim:
        raise TypeError(f"broadcast_in_dim target broadcast shape must have equal or higher rank "
                        f"to the operand shape; got operand ndim {x.ndim} and target broadcast "
                        f"ndim {len(shape)}.")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must be a subset of output "
                        f"dimensions, got {broadcast_dimensions} for operand ndim {x.ndim} and "
                        f"shape {shape}.")
    if len(set(broadcast_dimensions)) != len(broadcast_dimensions):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must not contain duplicates, got "
                        f"broadcast_dimensions {broadcast_dimensions}")
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


def _broadcast_in_dim_pp_rule(eqn, context):
    # As JAX prints it: the shape (and sharding) are the let binder's type; trivial
    # broadcast_dimensions are left out.
    params = {"broadcast_dimensions": eqn.params["broadcast_dimensions"]}
    if not params["broadcast_dimensions"]:
        del params["broadcast_dimensions"]
    return core.pp_eqn_default(eqn.replace(params=params), context)


core.pp_eqn_rules[broadcast_in_dim_p] = _broadcast_in_dim_pp_rule


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions, sharding=None):
    """Sum the cotangent over the dimensions the operand was broadcast along (new ones and
    size-1 ones), then lay it out as the operand (size-1 dims restored by broadcast_in_dim,
    as JAX does)."""
    aval = x.aval
    if type(ct) is ad.Zero:
        return [ad.Zero(aval)]
    from fluxion._src.lax import lax
    kept = [d for i, d in enumerate(broadcast_dimensions) if aval.shape[i] == shape[d]]
    summed = tuple(d for d in range(len(shape)) if d not in kept)
    if summed:
        ct = lax.reduce_sum(ct, summed)
    # ct's dimensions are now the kept ones in increasing order; put them in operand order.
    order = sorted(kept)
    perm = tuple(order.index(d) for d in kept)
    if perm != tuple(range(len(perm))):
        from fluxion._src.lax import structural
        ct = structural.transpose(ct, perm)
    operand_dims_kept = tuple(i for i, d in enumerate(broadcast_dimensions) if d in kept)
    return [lax.broadcast_in_dim(ct, aval.shape, operand_dims_kept)]


def _broadcast_in_dim_batch(args, dims, *, shape, broadcast_dimensions, sharding=None):
    """The batch dimension goes right after the output dimension of the operand dimension
    before it, so the operand is never transposed."""
    (x,), (d,) = args, dims
    size = core.get_aval(x).shape[d]
    out_dim = broadcast_dimensions[d - 1] + 1 if d > 0 else 0
    shifted = tuple(b + (b >= out_dim) for b in broadcast_dimensions)
    new_dims = shifted[:d] + (out_dim,) + shifted[d:]
    new_shape = tuple(shape[:out_dim]) + (size,) + tuple(shape[out_dim:])
    return broadcast_in_dim_p.bind(x, shape=new_shape, broadcast_dimensions=new_dims,
                                   sharding=sharding), out_dim


ad.deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose)
batching.primitive_batchers[broadcast_in_dim_p] = _broadcast_in_dim_batch

# ---------------------------------------------------------------------------------------------
# reshape


def _reshape_abstract_eval(x, *, new_sizes, dimensions=None, sharding=None):
    if any(d < 0 for d in new_sizes):
        raise TypeError(f"reshape new_sizes must all be positive, got {new_sizes}.")
    if dimensions is not None and sorted(dimensions) != list(range(x.ndim)):
        raise TypeError(f"reshape dimensions must be a permutation of operand dimensions, got "
                        f"dimensions {dimensions} for shape {x.shape}.")
    size = core.shape_size(new_sizes)
    if size != x.size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} "
                        f"(size {size}) for shape {x.shape} (size {x.size}).")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def _reshape_lowering(ctx, x, *, new_sizes, dimensions=None, sharding=None):
    if dimensions is not None and list(dimensions) != list(range(x.aval.ndim)):
        x = ctx.transpose(x, dimensions)
    return ctx.reshape(x, new_sizes)


reshape_p = standard_primitive("reshape", _reshape_abstract_eval, _reshape_lowering)


def _reshape_transpose(ct, x, *, new_sizes, dimensions=None, sharding=None):
    aval = x.aval
    if type(ct) is ad.Zero:
        return [ad.Zero(aval)]
    from fluxion._src.lax import lax
    if dimensions is None:
        return [lax.reshape(ct, aval.shape)]
    from fluxion._src.lax import structural
    permuted_shape = tuple(aval.shape[d] for d in dimensions)
    return [structural.transpose(lax.reshape(ct, permuted_shape),
                                 tuple(int(i) for i in np.argsort(dimensions)))]


def _reshape_batch(args, dims, *, new_sizes, dimensions=None, sharding=None):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    size = core.get_aval(x).shape[0]
    new_dims = None if dimensions is None else (0,) + tuple(p + 1 for p in dimensions)
    return reshape_p.bind(x, new_sizes=(size,) + tuple(new_sizes), dimensions=new_dims,
                          sharding=sharding), 0


ad.deflinear(reshape_p, _reshape_transpose)
batching.primitive_batchers[reshape_p] = _reshape_batch
