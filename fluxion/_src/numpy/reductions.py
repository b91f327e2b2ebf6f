"""Reductions of fluxion.numpy: sum, prod, max, min, all, any, mean, var, std, arg- and
cumulative reductions, and their NaN-ignoring forms, with JAX's dtype rules."""
from __future__ import annotations

import builtins
import math

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.lax import lax
from fluxion._src.lax import sorting
from fluxion._src.lax import structural
from fluxion._src.lax import windowed
from fluxion._src.lax.reductions import identity_value
from fluxion._src.numpy import ufuncs, util
from fluxion._src.numpy.creation import user_dtype
from fluxion._src.numpy.eager import eager_compiled


def _aval(x):
    return core.get_aval(x)


def _promote_integer_dtype(dtype) -> np.dtype:
    """Booleans and narrow integers accumulate in the default integer width (JAX's rule)."""
    if dtype == dtypes.bool_:
        return dtypes.default_int_dtype()
    if dtype.kind == "u" and dtype.itemsize < dtypes.default_uint_dtype().itemsize:
        return dtypes.default_uint_dtype()
    if dtype.kind == "i" and dtype.itemsize < dtypes.default_int_dtype().itemsize:
        return dtypes.default_int_dtype()
    return dtype


def _upcast_f16(dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype in (dtypes.float16, dtypes.bfloat16) else dtype


def _to_inexact(dtype) -> np.dtype:
    return util.to_inexact_dtype(np.dtype(dtype))


def _check_where(name, where):
    if where is None:
        return None
    where = util.ensure_arraylike(name, where)
    if _aval(where).dtype != dtypes.bool_:
        raise ValueError(f"jnp.{name}: where must be None or a boolean array; got "
                         f"where.dtype={_aval(where).dtype!r}.")
    return where


def _check_no_out(name, out):
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported.")


# The monoids: lax reduction, binary op, identity kind; booleans use logical forms.
_MONOIDS = {
    "add": (lax.reduce_sum, lax.add, "add"),
    "mul": (lax.reduce_prod, lax.mul, "mul"),
    "max": (lax.reduce_max, lax.max, "max"),
    "min": (lax.reduce_min, lax.min, "min"),
    "and": (lax.reduce_and, lax.bitwise_and, "and"),
    "or": (lax.reduce_or, lax.bitwise_or, "or"),
}
_BOOL_MONOID = {"add": "or", "mul": "and"}


def _reduction(a, name: str, monoid: str, *, has_identity=True, preproc=None,
               upcast_f16=False, promote_integers=False, axis=None, dtype=None, out=None,
               keepdims=False, initial=None, where=None):
    _check_no_out(name, out)
    a = util.ensure_arraylike(name, a)
    where = _check_where(name, where)
    if initial is None and not has_identity and where is not None:
        raise ValueError(f"reduction operation {name} does not have an identity, so to use a "
                         f"where mask one has to specify 'initial'")
    if preproc is not None:
        a = preproc(a)
    aval = _aval(a)
    axes = util.canonicalize_axes(axis, aval.ndim, f"jnp.{name}")
    if initial is None and not has_identity and builtins.any(aval.shape[d] == 0 for d in axes):
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    if dtype is None:
        result_dtype = _promote_integer_dtype(aval.dtype) if promote_integers else aval.dtype
    else:
        result_dtype = user_dtype(dtype, name)
    compute_dtype = (_upcast_f16(result_dtype) if upcast_f16 and dtypes.is_inexact(result_dtype)
                     else result_dtype)
    a = util.convert(a, compute_dtype)
    if compute_dtype == dtypes.bool_:
        monoid = _BOOL_MONOID.get(monoid, monoid)
    reduce_fn, binary_fn, kind = _MONOIDS[monoid]
    init = identity_value(kind, compute_dtype)
    if where is not None:
        a = util.where(where, a, lax._convert_element_type(init, compute_dtype, False))
    result = reduce_fn(a, axes)
    if initial is not None:
        initial = util.convert(initial, compute_dtype)
        if _aval(initial).shape != ():
            raise ValueError(f"initial value must be a scalar. Got array of shape "
                             f"{_aval(initial).shape}")
        result = binary_fn(initial, result)
    if keepdims:
        result = _expand_reduced(result, axes)
    return util.convert(result, result_dtype)


def _expand_reduced(x, axes):
    return structural.expand_dims(x, tuple(sorted(axes)))


def _to_numeric(x):
    return util.promote_dtypes_numeric(x)[0]


def _to_bool(x):
    return util.convert(x, dtypes.bool_)


@eager_compiled(static_argnames=('axis', 'dtype', 'out', 'keepdims', 'promote_integers'))
def sum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None,
        promote_integers: bool = True):
    """Sum over `axis` (None: all axes). Booleans and narrow integers sum in the default
    integer width unless promote_integers=False; float16 accumulates in float32."""
    return _reduction(a, "sum", "add", preproc=_to_numeric, upcast_f16=dtype is None,
                      promote_integers=promote_integers, axis=axis, dtype=dtype, out=out,
                      keepdims=keepdims, initial=initial, where=where)


@eager_compiled(static_argnames=('axis', 'dtype', 'out', 'keepdims', 'promote_integers'))
def prod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None,
         promote_integers: bool = True):
    """Product over `axis` (dtype rules as for `sum`)."""
    return _reduction(a, "prod", "mul", preproc=_to_numeric, upcast_f16=dtype is None,
                      promote_integers=promote_integers, axis=axis, dtype=dtype, out=out,
                      keepdims=keepdims, initial=initial, where=where)


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def max(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Maximum over `axis` (NaN if any element is NaN); empty reductions need `initial`."""
    return _reduction(a, "max", "max", has_identity=False, axis=axis, out=out,
                      keepdims=keepdims, initial=initial, where=where)


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def min(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Minimum over `axis` (NaN if any element is NaN); empty reductions need `initial`."""
    return _reduction(a, "min", "min", has_identity=False, axis=axis, out=out,
                      keepdims=keepdims, initial=initial, where=where)


amax, amin = max, min


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def all(a, axis=None, out=None, keepdims: bool = False, *, where=None):
    """True if every element over `axis` is nonzero."""
    return _reduction(a, "all", "and", preproc=_to_bool, axis=axis, out=out,
                      keepdims=keepdims, where=where)


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def any(a, axis=None, out=None, keepdims: bool = False, *, where=None):
    """True if some element over `axis` is nonzero."""
    return _reduction(a, "any", "or", preproc=_to_bool, axis=axis, out=out,
                      keepdims=keepdims, where=where)


def _count(a, axes, keepdims, where, dtype):
    """How many elements each reduction covers, as an array of `dtype`."""
    if where is None:
        shape = _aval(a).shape
        return lax._convert_element_type(math.prod(shape[d] for d in axes), dtype, False)
    return sum(util.broadcast_to(where, _aval(a).shape), tuple(axes), dtype=dtype,
               keepdims=keepdims)


@eager_compiled(static_argnames=('axis', 'dtype', 'out', 'keepdims'))
def mean(a, axis=None, dtype=None, out=None, keepdims: bool = False, *, where=None):
    """Arithmetic mean over `axis`; integers average as the default float type."""
    _check_no_out("mean", out)
    a = util.ensure_arraylike("mean", a)
    where = _check_where("mean", where)
    axes = util.canonicalize_axes(axis, _aval(a).ndim, "jnp.mean")
    result_dtype = user_dtype(dtype, "mean") if dtype is not None else _to_inexact(_aval(a).dtype)
    compute_dtype = _upcast_f16(result_dtype) if dtype is None and dtypes.is_inexact(
        result_dtype) else result_dtype
    total = sum(a, axes, dtype=compute_dtype, keepdims=keepdims, where=where)
    count = _count(a, axes, keepdims, where, compute_dtype)
    return util.convert(lax.div(total, count), result_dtype)


_mean = mean


def _var_dtypes(a_dtype, dtype):
    """(computation dtype, result dtype) of var/std."""
    if dtype is not None:
        if not dtypes.is_complex(dtype) and dtypes.is_complex(a_dtype):
            raise ValueError("jax.numpy.var does not yet support real dtype parameters when "
                             "computing the variance of an array of complex values.")
        return _upcast_f16(dtype), dtype
    if not dtypes.is_inexact(a_dtype):
        result = _to_inexact(a_dtype)
        return _upcast_f16(result), result
    real = dtypes.finfo(a_dtype).dtype if dtypes.is_complex(a_dtype) else a_dtype
    return _upcast_f16(a_dtype), np.dtype(real)


@eager_compiled(static_argnames=('axis', 'dtype', 'out', 'ddof', 'keepdims', 'correction'))
def var(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False, *,
        where=None, mean=None, correction=None):
    """Variance over `axis`: sum(|a - mean|**2) / (N - correction); correction is ddof."""
    _check_no_out("var", out)
    if correction is None:
        correction = ddof
    elif not isinstance(ddof, int) or ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    a = util.ensure_arraylike("var", a)
    where = _check_where("var", where)
    axes = util.canonicalize_axes(axis, _aval(a).ndim, "jnp.var")
    compute_dtype, result_dtype = _var_dtypes(_aval(a).dtype, user_dtype(dtype, "var"))
    a = util.convert(a, compute_dtype)
    if mean is None:
        center = _mean(a, axes, dtype=compute_dtype, keepdims=True, where=where)
    else:
        center = util.convert(util.ensure_arraylike("var", mean), compute_dtype)
    centered = ufuncs.subtract(a, center)
    if dtypes.is_complex(compute_dtype):
        centered = lax.real(lax.mul(centered, lax.conj(centered)))
    else:
        centered = lax.square(centered)
    sum_dtype = _aval(centered).dtype
    count = _count(a, axes, keepdims, where, sum_dtype)
    normalizer = lax.sub(count, lax._convert_element_type(correction, sum_dtype, False))
    total = sum(centered, axes, dtype=sum_dtype, keepdims=keepdims, where=where)
    result = util.convert(ufuncs.true_divide(total, normalizer), result_dtype)
    return util.where(lax.gt(normalizer, util.scalar_like(normalizer, 0)), result, np.nan)


@eager_compiled(static_argnames=('axis', 'dtype', 'out', 'ddof', 'keepdims', 'correction'))
def std(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False, *,
        where=None, mean=None, correction=None):
    """Standard deviation over `axis`: the square root of `var`."""
    _check_no_out("std", out)
    where = _check_where("std", where)
    if dtype is not None:
        wanted, dtype = dtype, user_dtype(dtype, "std")  # (var then gets it canonical)
        if not dtypes.is_inexact(dtype):
            raise ValueError(f"dtype argument to jnp.std must be inexact; got {wanted}")
    return lax.sqrt(var(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean,
                        correction=correction))


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def ptp(a, axis=None, out=None, keepdims: bool = False):
    """Peak to peak: max - min over `axis`."""
    _check_no_out("ptp", out)
    a = util.ensure_arraylike("ptp", a)
    return lax.sub(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


@eager_compiled(static_argnames=('axis', 'keepdims'))
def count_nonzero(a, axis=None, keepdims: bool = False):
    """Number of nonzero elements over `axis`, in the default integer type."""
    a = util.ensure_arraylike("count_nonzero", a)
    return sum(util.to_bool(a), axis, dtype=dtypes.default_int_dtype(), keepdims=keepdims)


@eager_compiled(static_argnames=('axis', 'returned', 'keepdims'))
def average(a, axis=None, weights=None, returned: bool = False, keepdims: bool = False):
    """Weighted mean over `axis`; `returned` also gives the sum of the weights."""
    a = util.ensure_arraylike("average", a)
    axes = util.canonicalize_axes(axis, _aval(a).ndim, "jnp.average")
    if weights is None:
        (a,) = util.promote_dtypes_inexact(a)
        avg = mean(a, axes, keepdims=keepdims)
        weights_sum = lax._convert_element_type(math.prod(_aval(a).shape[d] for d in axes),
                                                _aval(avg).dtype, False)
    else:
        a, weights = util.promote_dtypes_inexact(a, util.ensure_arraylike("average", weights))
        a_shape, w_shape = _aval(a).shape, _aval(weights).shape
        if a_shape != w_shape:
            if axis is None:
                raise ValueError("Axis must be specified when shapes of a and weights differ.")
            if w_shape != tuple(a_shape[d] for d in axes):
                raise ValueError("Shape of weights must be consistent with shape of a along "
                                 "specified axis.")
            weights = _weights_along(weights, axes, a_shape)
        weights_sum = sum(weights, axes, keepdims=keepdims)
        avg = ufuncs.true_divide(sum(ufuncs.multiply(a, weights), axes, keepdims=keepdims),
                                 weights_sum)
    if returned:
        if _aval(avg).shape != _aval(weights_sum).shape:
            weights_sum = util.broadcast_to(weights_sum, _aval(avg).shape)
        return avg, weights_sum
    return avg


def _weights_along(weights, axes, a_shape):
    """Weights given for `axes` (in that order), laid out to broadcast against a."""
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    weights = structural.transpose(weights, tuple(order))
    return lax.broadcast_in_dim(weights, a_shape, tuple(sorted(axes)))


# ---------------------------------------------------------------------------------------------
# NaN-ignoring reductions

def _nan_reduction(name, reduction, a, fill, nan_if_all_nan, axis, keepdims, where, **kwargs):
    a = util.ensure_arraylike(name, a)
    where = _check_where(name, where)
    dt = _aval(a).dtype
    if not dtypes.is_inexact(dt):
        return reduction(a, axis=axis, keepdims=keepdims, where=where, **kwargs)
    filled = util.where(ufuncs.isnan(a), lax._convert_element_type(fill, dt, False), a)
    out = reduction(filled, axis=axis, keepdims=keepdims, where=where, **kwargs)
    if nan_if_all_nan:
        all_nan = all(ufuncs.isnan(a), axis=axis, keepdims=keepdims)
        return util.where(all_nan, lax._convert_element_type(np.nan, dt, False), out)
    return out


@eager_compiled(static_argnames=('axis', 'dtype', 'out', 'keepdims'))
def nansum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Sum treating NaNs as zero."""
    _check_no_out("nansum", out)
    return _nan_reduction("nansum", sum, a, 0, False, axis, keepdims, where, dtype=dtype,
                          initial=initial)


@eager_compiled(static_argnames=('axis', 'dtype', 'out', 'keepdims'))
def nanprod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Product treating NaNs as one."""
    _check_no_out("nanprod", out)
    return _nan_reduction("nanprod", prod, a, 1, False, axis, keepdims, where, dtype=dtype,
                          initial=initial)


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def nanmax(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Maximum ignoring NaNs (NaN where every element is NaN)."""
    _check_no_out("nanmax", out)
    return _nan_reduction("nanmax", max, a, -np.inf, initial is None, axis, keepdims, where,
                          initial=initial)


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def nanmin(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Minimum ignoring NaNs (NaN where every element is NaN)."""
    _check_no_out("nanmin", out)
    return _nan_reduction("nanmin", min, a, np.inf, initial is None, axis, keepdims, where,
                          initial=initial)


@eager_compiled(static_argnames=('axis', 'dtype', 'out', 'keepdims'))
def nanmean(a, axis=None, dtype=None, out=None, keepdims: bool = False, where=None):
    """Mean of the non-NaN elements."""
    _check_no_out("nanmean", out)
    a = util.ensure_arraylike("nanmean", a)
    where = _check_where("nanmean", where)
    dt = _aval(a).dtype
    if not dtypes.is_inexact(dt):
        return mean(a, axis, dtype, keepdims=keepdims, where=where)
    dtype = user_dtype(dtype, "nanmean") if dtype is not None else dt
    count = sum(ufuncs.logical_not(ufuncs.isnan(a)), axis, dtype=dtype, keepdims=keepdims,
                where=where)
    total = nansum(a, axis, dtype=dtype, keepdims=keepdims, where=where)
    return lax.div(total, count)


# ---------------------------------------------------------------------------------------------
# Arg- and cumulative reductions

def _arg_extreme(name, lax_fn, a, axis, out, keepdims):
    _check_no_out(name, out)
    a = util.ensure_arraylike(name, a)
    if axis is None:
        from fluxion._src.numpy.manipulation import ravel
        dims = tuple(range(_aval(a).ndim))
        a, axis = ravel(a), 0
    else:
        axis = util.canonicalize_axis(util.static_int(axis, f"axis argument of jnp.{name}"),
                                      _aval(a).ndim)
        dims = (axis,)
    if _aval(a).shape[axis] == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    result = lax_fn(a, axis, dtypes.default_int_dtype())
    return _expand_reduced(result, dims) if keepdims else result


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def argmax(a, axis=None, out=None, keepdims=None):
    """Index of the maximum along `axis` (of the flattened array if None); first on ties."""
    return _arg_extreme("argmax", sorting.argmax, a, axis, out, bool(keepdims))


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def argmin(a, axis=None, out=None, keepdims=None):
    """Index of the minimum along `axis` (of the flattened array if None); first on ties."""
    return _arg_extreme("argmin", sorting.argmin, a, axis, out, bool(keepdims))


def _cumulative(name, scan_name, a, axis, dtype, out, fill_nan=False, fill=0):
    _check_no_out(name, out)
    a = util.ensure_arraylike(name, a)
    if axis is None or _aval(a).ndim == 0:
        a = lax.reshape(a, (_aval(a).size,))
        axis = 0
    axis = util.canonicalize_axis(util.static_int(axis, f"axis argument of jnp.{name}"),
                                  _aval(a).ndim)
    if fill_nan and dtypes.is_inexact(_aval(a).dtype):
        a = util.where(ufuncs.isnan(a), lax._convert_element_type(fill, _aval(a).dtype, False), a)
    if dtype is None:
        result_dtype = _promote_integer_dtype(_aval(a).dtype) if _aval(a).dtype == dtypes.bool_ \
            else _aval(a).dtype
        compute_dtype = result_dtype
    else:
        result_dtype = user_dtype(dtype, name)
        if result_dtype == dtypes.bool_:
            a = util.to_bool(a)
            compute_dtype = _promote_integer_dtype(result_dtype)
        else:
            compute_dtype = result_dtype
    result = getattr(windowed, scan_name)(util.convert(a, compute_dtype), axis)
    return util.convert(result, result_dtype)


@eager_compiled(static_argnames=('axis', 'dtype', 'out'))
def cumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum along `axis` (of the flattened array if None)."""
    return _cumulative("cumsum", "cumsum", a, axis, dtype, out)


@eager_compiled(static_argnames=('axis', 'dtype', 'out'))
def cumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product along `axis` (of the flattened array if None)."""
    return _cumulative("cumprod", "cumprod", a, axis, dtype, out)


@eager_compiled(static_argnames=('axis', 'dtype', 'out'))
def nancumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum treating NaNs as zero."""
    return _cumulative("nancumsum", "cumsum", a, axis, dtype, out, fill_nan=True, fill=0)


@eager_compiled(static_argnames=('axis', 'dtype', 'out'))
def nancumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product treating NaNs as one."""
    return _cumulative("nancumprod", "cumprod", a, axis, dtype, out, fill_nan=True, fill=1)

