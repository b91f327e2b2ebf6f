"""Statistics of fluxion.numpy: median, quantile, percentile and their NaN-ignoring forms,
nanvar, nanstd, nanargmax, nanargmin, cov, corrcoef, histograms, bincount and digitize."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.export import shape_poly as export_shape_poly
from fluxion._src.numpy import util
from fluxion._src.numpy.eager import eager_compiled
from fluxion._src.numpy.reductions import _check_where, _var_dtypes

_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _jnp():
    import fluxion.numpy as jnp
    return jnp


def _reduced_to_last(a, axis, keepdims):
    """Move the reduced axes of `a` to one last axis; also the shape keepdims restores."""
    jnp = _jnp()
    if axis is None:
        return a.ravel(), (1,) * a.ndim if keepdims else ()
    axes = axis if isinstance(axis, tuple) else (axis,)
    axes = tuple(util.canonicalize_axis(ax, a.ndim) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError("repeated axis")
    kept = [d for d in range(a.ndim) if d not in axes]
    moved = jnp.transpose(a, kept + list(axes))
    batch = tuple(a.shape[d] for d in kept)
    out = moved.reshape(batch + (math.prod(a.shape[d] for d in axes),))
    if keepdims:
        return out, tuple(1 if d in axes else a.shape[d] for d in range(a.ndim))
    return out, batch


def _gather_last(a, idx):
    """a[..., idx] with idx of shape (*q_shape, *batch) and a of shape (*batch, n)."""
    jnp = _jnp()
    q_ndim = idx.ndim - (a.ndim - 1)
    a_b = jnp.broadcast_to(a, idx.shape[:q_ndim] + a.shape)
    return jnp.take_along_axis(a_b, idx[..., None], axis=-1)[..., 0]


def _quantile(name, a, q, axis, method, keepdims, squash_nans, weights):
    jnp = _jnp()
    if method not in _QUANTILE_METHODS:
        raise ValueError("method can only be 'linear', 'lower', 'higher', 'midpoint', 'nearest' "
                         "or 'inverted_cdf'")
    if weights is not None:
        weights = util.as_array(weights)
        if dtypes.is_complex(weights.dtype):
            raise ValueError("Weights cannot be complex types.")
        if method != "inverted_cdf":
            raise NotImplementedError(f"{method} doesn't support weights. Only method "
                                      f"'inverted_cdf' supports weights.")
        a, weights = util.promote_dtypes_inexact(a, weights)
        if weights.shape != a.shape:
            if axis is None:
                raise ValueError("Weights shape must match 'a' shape when axis is None.")
            axes = axis if isinstance(axis, tuple) else (axis,)
            axes = tuple(util.canonicalize_axis(ax, a.ndim) for ax in axes)
            if weights.shape != tuple(a.shape[ax] for ax in axes):
                raise ValueError(f"Weights shape {weights.shape} must match reduction axes "
                                 f"{tuple(a.shape[ax] for ax in axes)}")
            ordered = jnp.transpose(weights, tuple(np.argsort(axes)))
            expanded = ordered.reshape(tuple(a.shape[d] if d in axes else 1
                                             for d in range(a.ndim)))
            weights = jnp.broadcast_to(expanded, a.shape)
    else:
        a, = util.promote_dtypes_inexact(a)
    if dtypes.is_complex(a.dtype):
        raise ValueError("quantile does not support complex input, as the operation is poorly "
                         "defined.")
    if q.ndim > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {q.shape}")
    out_dtype = a.dtype
    arr, keep_shape = _reduced_to_last(a, axis, keepdims)
    w = None if weights is None else _reduced_to_last(weights, axis, keepdims)[0]
    batch = arr.shape[:-1]
    n = arr.shape[-1]
    isnan = jnp.isnan(arr)
    if squash_nans:
        arr = jnp.where(isnan, np.nan, arr)  # positive NaNs sort last
    else:
        arr = jnp.where(jnp.any(isnan, axis=-1, keepdims=True), np.nan, arr)
    if w is not None:
        arr, w = _jnp_sort_key_val(arr, w)
    else:
        arr = jnp.sort(arr, axis=-1)
    q_b = q.reshape(q.shape + (1,) * len(batch))
    if squash_nans:
        counts = jnp.sum(~jnp.isnan(arr), axis=-1, dtype=q.dtype)
    else:
        counts = util.convert(n, q.dtype)
    if n == 0:  # nothing to reduce: NaN (numpy's median), not what a gather from nothing gives
        result = jnp.full(q.shape + batch, np.nan, out_dtype)
    elif method == "inverted_cdf":
        result = _inverted_cdf(arr, w, q_b, counts, squash_nans)
    else:
        pos = q_b * (counts - 1)
        low, high = jnp.floor(pos), jnp.ceil(pos)
        high_weight = pos - low
        low_weight = 1 - high_weight
        top = counts - 1
        int_dtype = dtypes.default_int_dtype()
        low = jnp.maximum(0, jnp.minimum(low, top)).astype(int_dtype)
        high = jnp.maximum(0, jnp.minimum(high, top)).astype(int_dtype)
        shape = q.shape + batch
        low_value = _gather_last(arr, jnp.broadcast_to(low, shape))
        high_value = _gather_last(arr, jnp.broadcast_to(high, shape))
        if method == "linear":
            result = (low_value.astype(q.dtype) * low_weight
                      + high_value.astype(q.dtype) * high_weight)
        elif method == "lower":
            result = low_value
        elif method == "higher":
            result = high_value
        elif method == "nearest":
            result = jnp.where(high_weight <= 0.5, low_value, high_value)
        else:
            result = (low_value + high_value) * util.convert(0.5, low_value.dtype, True)
    if keepdims:
        result = result.reshape(q.shape + keep_shape)
    return util.convert(result, out_dtype)


def _jnp_sort_key_val(keys, values):
    from fluxion import lax
    return lax.sort_key_val(keys, values, dimension=keys.ndim - 1)


def _inverted_cdf(arr, w, q_b, counts, squash_nans):
    jnp = _jnp()
    if w is None:
        w = jnp.ones_like(arr)
    bad = (w < 0) | jnp.isnan(w)
    nan_data = jnp.isnan(arr)
    clean = jnp.where(bad | nan_data, 0, w)
    cum = jnp.cumsum(clean, axis=-1)
    total = cum[..., -1]
    target = q_b * total
    idx = jnp.sum(cum < target[..., None], axis=-1, dtype=dtypes.default_int_dtype())
    limit = (counts - 1).astype(dtypes.default_int_dtype())
    idx = jnp.maximum(0, jnp.minimum(idx, limit))
    shape = idx.shape
    result = _gather_last(arr, jnp.broadcast_to(idx, shape))
    any_bad = jnp.any(bad, axis=-1)
    if squash_nans:
        force_nan = any_bad | (counts == 0)
    else:
        force_nan = any_bad | jnp.any(nan_data, axis=-1)
    return jnp.where(force_nan, np.nan, result)


def _check_quantile_args(name, a, q, out, overwrite_input):
    a, q = util.ensure_arraylike(name, a, q)
    if overwrite_input or out is not None:
        raise ValueError(f"jax.numpy.{name} does not support overwrite_input=True or "
                         f"out != None")
    return a, q


@eager_compiled(static_argnames=('axis', 'out', 'overwrite_input', 'method', 'keepdims'))
def quantile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False, *, weights=None):
    """q-th quantiles of `a` along `axis` (`q` scalar or 1-D, in [0, 1])."""
    a, q = _check_quantile_args("quantile", a, q, out, overwrite_input)
    return _quantile("quantile", a, q, axis, method, keepdims, False, weights)


@eager_compiled(static_argnames=('axis', 'out', 'overwrite_input', 'method', 'keepdims'))
def nanquantile(a, q, axis=None, out=None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights=None):
    """Quantiles ignoring NaNs."""
    a, q = _check_quantile_args("nanquantile", a, q, out, overwrite_input)
    return _quantile("nanquantile", a, q, axis, method, keepdims, True, weights)


@eager_compiled(static_argnames=('axis', 'out', 'overwrite_input', 'method', 'keepdims',
                                 'out_sharding'))
def percentile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False, *, weights=None, out_sharding=None):
    """q-th percentiles of `a` along `axis` (`q` in [0, 100])."""
    jnp = _jnp()
    a, q = util.ensure_arraylike("percentile", a, q)
    q = jnp.true_divide(q, 100.0)
    return quantile(a, q, axis=axis, out=out, overwrite_input=overwrite_input, method=method,
                    keepdims=keepdims, weights=weights)


@eager_compiled(static_argnames=('axis', 'out', 'overwrite_input', 'method', 'keepdims'))
def nanpercentile(a, q, axis=None, out=None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights=None):
    """Percentiles ignoring NaNs."""
    jnp = _jnp()
    a, q = util.ensure_arraylike("nanpercentile", a, q)
    q = jnp.true_divide(q, 100.0)
    return nanquantile(a, q, axis=axis, out=out, overwrite_input=overwrite_input,
                       method=method, keepdims=keepdims, weights=weights)


@eager_compiled(static_argnames=('axis', 'out', 'overwrite_input', 'keepdims'))
def median(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """Median along `axis` (the midpoint of the two middle values for even counts)."""
    a = util.ensure_arraylike("median", a)
    return quantile(a, 0.5, axis=axis, out=out, overwrite_input=overwrite_input,
                    keepdims=keepdims, method="midpoint")


@eager_compiled(static_argnames=('axis', 'out', 'overwrite_input', 'keepdims'))
def nanmedian(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """Median ignoring NaNs."""
    a = util.ensure_arraylike("nanmedian", a)
    return nanquantile(a, 0.5, axis=axis, out=out, overwrite_input=overwrite_input,
                       keepdims=keepdims, method="midpoint")


@eager_compiled(static_argnames=('axis', 'dtype', 'out', 'ddof', 'keepdims'))
def nanvar(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False,
           where=None, mean=None):
    """Variance ignoring NaNs (NaN where fewer than ddof+1 values remain)."""
    jnp = _jnp()
    a = util.ensure_arraylike("nanvar", a)
    where = _check_where("nanvar", where)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanvar is not supported.")
    if dtype is not None:
        dtype = dtypes.canonicalize_dtype(np.dtype(dtype))
    computation_dtype, dtype = _var_dtypes(a.dtype, dtype)
    a = util.convert(a, computation_dtype)
    if mean is None:
        a_mean = jnp.nanmean(a, axis, dtype=computation_dtype, keepdims=True, where=where)
    else:
        a_mean = util.convert(mean, computation_dtype)
    nan = jnp.isnan(a)
    centered = jnp.where(nan, 0, a - a_mean)
    if dtypes.is_complex(centered.dtype):
        centered = jnp.real(centered * jnp.conj(centered))
    else:
        centered = jnp.square(centered)
    normalizer = jnp.sum(~nan, axis=axis, keepdims=keepdims, where=where) - ddof
    empty = normalizer <= 0
    result = jnp.sum(centered, axis, keepdims=keepdims, where=where)
    result = jnp.where(empty, np.nan, result)
    divisor = jnp.where(empty, 1, normalizer)
    result = result / util.convert(divisor, result.dtype)
    return util.convert(result, dtype)


@eager_compiled(static_argnames=('axis', 'dtype', 'out', 'ddof', 'keepdims'))
def nanstd(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False,
           where=None, mean=None):
    """Standard deviation ignoring NaNs."""
    jnp = _jnp()
    a = util.ensure_arraylike("nanstd", a)
    where = _check_where("nanstd", where)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanstd is not supported.")
    return jnp.sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
                           where=where, mean=mean))


def _nanarg(name, fn, fill, a, axis, out, keepdims):
    jnp = _jnp()
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported.")
    a = util.ensure_arraylike(name, a)
    if not dtypes.is_inexact(a.dtype):
        return fn(a, axis=axis, keepdims=keepdims)
    nan_mask = jnp.isnan(a)
    result = fn(jnp.where(nan_mask, fill, a), axis=axis, keepdims=keepdims)
    return jnp.where(jnp.all(nan_mask, axis=axis, keepdims=keepdims), -1, result)


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def nanargmax(a, axis=None, out=None, keepdims=None):
    """Index of the maximum ignoring NaNs (-1 where a slice is all NaN)."""
    return _nanarg("nanargmax", _jnp().argmax, -np.inf, a, axis, out, keepdims)


@eager_compiled(static_argnames=('axis', 'out', 'keepdims'))
def nanargmin(a, axis=None, out=None, keepdims=None):
    """Index of the minimum ignoring NaNs (-1 where a slice is all NaN)."""
    return _nanarg("nanargmin", _jnp().argmin, np.inf, a, axis, out, keepdims)


@eager_compiled(static_argnames=('rowvar', 'bias', 'ddof', 'dtype'))
def cov(m, y=None, rowvar: bool = True, bias: bool = False, ddof=None, fweights=None,
        aweights=None, dtype=None):
    """Covariance matrix of the variables (rows of `m` when rowvar)."""
    jnp = _jnp()
    if y is not None:
        m, y = util.promote_dtypes_inexact(*util.ensure_arraylike("cov", m, y))
        if y.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
    else:
        m, = util.promote_dtypes_inexact(util.ensure_arraylike("cov", m))
    if m.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    _check_inexact_dtype("cov", dtype)
    X = jnp.atleast_2d(m)
    if not rowvar and m.ndim != 1:  # NumPy >= 2.2: a (1, n) matrix is n variables too
        X = X.T
    if X.shape[0] == 0:
        return jnp.array([]).reshape(0, 0)
    if y is not None:
        y = jnp.atleast_2d(y)
        if not rowvar and y.shape[0] != 1:  # (NumPy 2.2 changed m's rule only)
            y = y.T
        X = jnp.vstack((X, y))
    if X.shape[1] == 0:  # no observations: NaN, as numpy's 0/0 (JAX's rule)
        return jnp.full(() if X.shape[0] == 1 else (X.shape[0],) * 2, np.nan, X.dtype)
    if dtype is not None:
        X = X.astype(dtype)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    w = None
    if fweights is not None:
        fweights = util.ensure_arraylike("cov", fweights)
        if fweights.ndim > 1:
            raise RuntimeError("cannot handle multidimensional fweights")
        if fweights.shape[0] != X.shape[1]:
            raise RuntimeError("incompatible numbers of samples and fweights")
        if not dtypes.is_integer(fweights.dtype):
            raise TypeError("fweights must be integer.")
        w = jnp.abs(fweights)
    if aweights is not None:
        aweights = util.ensure_arraylike("cov", aweights)
        if aweights.ndim > 1:
            raise RuntimeError("cannot handle multidimensional aweights")
        if aweights.shape[0] != X.shape[1]:
            raise RuntimeError("incompatible numbers of samples and aweights")
        aweights = jnp.abs(aweights)  # as JAX (numpy raises for negative weights)
        w = aweights if w is None else w * aweights
    avg, w_sum = jnp.average(X, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        f = X.shape[1] - ddof
    elif ddof == 0:
        f = w_sum
    elif aweights is None:
        f = w_sum - ddof
    else:
        f = w_sum - ddof * jnp.sum(w * aweights) / w_sum
    X = X - avg[:, None]
    X_T = X.T if w is None else (X * w).T
    return jnp.true_divide(jnp.dot(X, jnp.conj(X_T)), f).squeeze()


def _check_inexact_dtype(name: str, dtype) -> None:
    if dtype is not None and not dtypes.issubdtype(dtype, np.inexact):
        raise ValueError(f"{name}: dtype must be a subclass of float or complex; got {dtype=}")


@eager_compiled(static_argnames=('rowvar', 'dtype'))
def corrcoef(x, y=None, rowvar: bool = True, dtype=None):
    """Pearson correlation coefficients (entries clipped to [-1, 1])."""
    jnp = _jnp()
    util.check_arraylike("corrcoef", x)
    _check_inexact_dtype("corrcoef", dtype)
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return jnp.divide(c, c)
    d = jnp.diag(c)
    stddev = jnp.sqrt(jnp.real(d)).astype(c.dtype)
    c = c / stddev[:, None] / stddev[None, :]
    real_part = jnp.clip(jnp.real(c), -1, 1)
    if dtypes.is_complex(c.dtype):
        from fluxion import lax
        return lax.complex(real_part, jnp.clip(jnp.imag(c), -1, 1))
    return real_part


def _check_concrete_range_order(range):
    """Raise NumPy's ValueError when a known `range` has its maximum below its minimum."""
    if isinstance(range, (list, tuple)) and len(range) == 2:
        if not all(core.is_concrete(r) for r in range):
            return  # traced bounds cannot be checked
        lo, hi = (float(np.asarray(core.concrete_or_error(r))) for r in range)
        if lo > hi:
            raise ValueError(f"max must be larger than min in range parameter, got {range}")


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """Edges of the bins `histogram` uses: `bins`+1 evenly spaced, or `bins` itself if 1-D."""
    jnp = _jnp()
    if isinstance(bins, str):
        raise NotImplementedError("string values for `bins` not implemented.")
    util.check_arraylike("histogram_bin_edges", a, bins)
    arr = util.as_array(a)
    dtype = arr.dtype if dtypes.is_inexact(arr.dtype) else dtypes.default_float_dtype()
    if np.ndim(bins) == 1 or (hasattr(bins, "ndim") and bins.ndim == 1):
        return util.convert(bins, dtype)
    bins_int = core.concrete_or_error(bins, "argument bins of histogram_bin_edges")
    bins_int = operator.index(np.asarray(bins_int).item())
    if range is None:
        # NumPy's range for no data is (0, 1); min/max of nothing has no value.
        range = [0.0, 1.0] if arr.size == 0 else [jnp.min(arr), jnp.max(arr)]
    _check_concrete_range_order(range)
    range = jnp.asarray(range, dtype=dtype) if not isinstance(range, (list, tuple)) else \
        jnp.stack([util.convert(r, dtype) for r in range]) if len(range) else jnp.zeros(0, dtype)
    if range.shape != (2,):
        raise ValueError(f"`range` must be either None or a sequence of scalars, got {range}")
    flat = jnp.ptp(range) == 0
    lo = jnp.where(flat, range[0] - 0.5, range[0])
    hi = jnp.where(flat, range[1] + 0.5, range[1])
    return jnp.linspace(lo, hi, bins_int + 1, dtype=dtype)


@eager_compiled(static_argnames=('bins', 'range', 'density'))
def histogram(a, bins=10, range=None, weights=None, density=None):
    """Counts (or weights, or a density) of `a`'s values in each bin, and the bin edges."""
    jnp = _jnp()
    if weights is None:
        util.check_arraylike("histogram", a, bins)
        a, = util.promote_dtypes_inexact(util.as_array(a))
        weights = jnp.ones_like(a)
    else:
        util.check_arraylike("histogram", a, bins, weights)
        a, weights = util.promote_dtypes_inexact(a, weights)
        if weights.shape != a.shape:
            raise ValueError("weights should have the same shape as a.")
    edges = histogram_bin_edges(a, bins, range, weights)
    idx = jnp.searchsorted(edges, a, side="right")
    idx = jnp.where(a == edges[-1], edges.shape[0] - 1, idx)
    counts = jnp.zeros(edges.shape[0], weights.dtype).at[idx].add(weights)[1:]
    if density:
        counts = counts / jnp.diff(edges) / counts.sum()
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """Multidimensional histogram of N samples of D coordinates (`sample` of shape (N, D))."""
    jnp = _jnp()
    if weights is None:
        sample = util.ensure_arraylike("histogramdd", sample)
        sample, = util.promote_dtypes_inexact(sample)
    else:
        sample, weights = util.ensure_arraylike("histogramdd", sample, weights)
        if weights.shape != sample.shape[:1]:
            raise ValueError("should have one weight for each sample.")
        sample, weights = util.promote_dtypes_inexact(sample, weights)
    N, D = sample.shape
    if range is not None and (len(range) != D or builtins.any(
            r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ValueError(f"For sample.shape={(N, D)}, range must be a sequence of {D} pairs or "
                         f"Nones; got range={range}")
    try:
        if len(bins) != D:
            raise ValueError("should be a bin for each dimension.")
    except TypeError:
        bins = D * [bins]
    indices, edges_by_dim = [], []
    for i in builtins.range(D):
        column = sample[:, i]
        edges = histogram_bin_edges(column, bins[i], None if range is None else range[i],
                                    weights)
        idx = jnp.searchsorted(edges, column, side="right")
        idx = jnp.where(column == edges[-1], idx - 1, idx)
        indices.append(idx)
        edges_by_dim.append(edges)
    nbins = tuple(e.shape[0] + 1 for e in edges_by_dim)
    flat = jnp.zeros_like(indices[0])
    for idx, nb in zip(indices, nbins):
        flat = flat * nb + jnp.clip(idx, 0, nb - 1)
    hist = bincount(flat, weights, length=math.prod(nbins)).reshape(nbins)
    hist = hist[D * (slice(1, -1),)]
    if density:
        hist = hist.astype(sample.dtype)
        hist = hist / hist.sum()
        for axis in builtins.range(D):
            shape = [1] * D
            shape[axis] = -1
            hist = hist / jnp.diff(edges_by_dim[axis]).reshape(shape)
    return hist, edges_by_dim


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """Two-dimensional histogram of the points (x[i], y[i])."""
    jnp = _jnp()
    x, y = util.ensure_arraylike("histogram2d", x, y)
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n != 1 and n != 2:
        edges = jnp.asarray(bins)
        bins = [edges, edges]
    sample = jnp.transpose(jnp.stack(util.promote_dtypes(x, y)))
    hist, edges = histogramdd(sample, bins, range, weights, density)
    return hist, edges[0], edges[1]


def bincount(x, weights=None, minlength: int = 0, *, length: int | None = None,
             out_sharding=None):
    """Number of occurrences (or summed weights) of each non-negative integer in `x`.

    Under a transformation pass a static `length`; larger values are dropped.
    """
    jnp = _jnp()
    x = util.ensure_arraylike("bincount", x)
    if x.dtype == dtypes.bool_:
        x = x.astype(np.int32)
    if not dtypes.is_integer(x.dtype):
        raise TypeError(f"x argument to bincount must have an integer type; got {x.dtype}")
    if x.ndim != 1:
        raise ValueError("only 1-dimensional input supported.")
    minlength = core.concrete_or_error(minlength, "The error occurred because of argument "
                                                  "'minlength' of jnp.bincount.")
    minlength = operator.index(np.asarray(minlength).item()) if not isinstance(minlength, int) \
        else minlength
    if length is None:
        value = core.concrete_or_error(x, "The error occurred because of argument 'x' of "
                                          "jnp.bincount. To avoid this error, pass a static "
                                          "`length` argument.")
        value = np.asarray(value)
        length = builtins.max(minlength, value.size and int(value.max()) + 1)
    elif type(length) is not export_shape_poly.DimExpr:  # (a symbolic length is static too)
        length = core.concrete_or_error(length, "The error occurred because of argument "
                                                "'length' of jnp.bincount.")
        length = operator.index(length)
    if weights is None:
        weights = util.convert(1, dtypes.default_int_dtype())
    else:
        weights = util.ensure_arraylike("bincount", weights)
        if weights.shape != x.shape:
            raise ValueError("shape of weights must match shape of x.")
    return jnp.zeros((length,), weights.dtype).at[jnp.clip(x, 0)].add(weights, mode="drop")


@eager_compiled(static_argnames=('right', 'method'))
def digitize(x, bins, right: bool = False, *, method=None):
    """Index of the bin each value of `x` falls in (`bins` increasing or decreasing)."""
    jnp = _jnp()
    x, bins = util.ensure_arraylike("digitize", x, bins)
    right = bool(core.concrete_or_error(right, "right argument of jnp.digitize()"))
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}")
    if bins.shape[0] == 0:
        return jnp.zeros(x.shape, np.int32)
    side = "right" if not right else "left"
    kw = {} if method is None else {"method": method}
    return jnp.where(bins[-1] >= bins[0], jnp.searchsorted(bins, x, side=side, **kw),
                     bins.shape[0] - jnp.searchsorted(bins[::-1], x, side=side, **kw))
