"""Set operations of fluxion.numpy: unique (and the Array API unique_*), union1d, intersect1d,
setdiff1d, setxor1d and isin.

Their result sizes depend on the values, so outside `size=` they need concrete inputs (JAX's
ConcretizationTypeError under a transformation); with `size=` results are truncated or padded
with `fill_value`, which makes them traceable.
"""
from __future__ import annotations

import math
import operator
from typing import NamedTuple

import numpy as np

from fluxion._src import core, dtypes
from fluxion import lax
from fluxion._src.numpy import util
from fluxion._src.numpy.eager import eager_compiled

UNIQUE_SIZE_HINT = (
    "When jax.numpy.unique() is called with size=None (the default), it requires concrete input "
    "to be able to determine the output size. Use the size and fill_value arguments to specify "
    "the size of the output for use within transformations.")


def _jnp():
    import fluxion.numpy as jnp
    return jnp


def _static_size(size, where: str):
    if size is None:
        return None
    return operator.index(core.concrete_or_error(size, f"The error arose in {where}"))


def _concrete_mask_indices(mask, where: str):
    value = core.concrete_or_error(mask, where)
    return np.nonzero(np.asarray(value))[0]


def _positions(n: int):
    return lax.iota(dtypes.default_int_dtype(), n)


def _unique_sorted_mask(ar, axis: int, equal_nan: bool):
    """Sort the slices of `ar` along `axis`; mask marks the first of each run of equal slices."""
    jnp = _jnp()
    aux = jnp.moveaxis(ar, axis, 0)
    if dtypes.is_complex(aux.dtype):
        # Complex NaNs sort by their other part; one canonical NaN (JAX's) keeps them in one
        # run, which equal_nan=True then merges.
        aux = jnp.where(jnp.isnan(aux), jnp.array(complex(np.nan, 0), aux.dtype), aux)
    n = aux.shape[0]
    if aux.ndim == 1:
        perm = jnp.argsort(aux) if n else jnp.zeros(0, dtypes.default_int_dtype())
        aux = aux[perm] if n else aux
    else:
        flat = aux.reshape(n, math.prod(aux.shape[1:]))  # (-1 is ambiguous when n is 0)
        if flat.shape[1] and n:
            perm = jnp.lexsort(flat.T[::-1])
        else:
            perm = _positions(n)
        aux = aux[perm]
    if n:
        if equal_nan and dtypes.is_inexact(aux.dtype):
            def neq(x, y):
                return ~((x == y) | (jnp.isnan(x) & jnp.isnan(y)))
        else:
            neq = jnp.not_equal
        changed = neq(aux[1:], aux[:-1])
        if aux.ndim > 1:
            changed = jnp.any(changed, axis=tuple(range(1, aux.ndim)))
        mask = jnp.concatenate([jnp.ones(1, bool), changed])
    else:
        mask = jnp.zeros(0, bool)
    return aux, mask, perm


def _unique(ar, axis, return_index=False, return_inverse=False, return_counts=False,
            equal_nan=True, size=None, fill_value=None, inverse_shape=None):
    jnp = _jnp()
    axis = util.canonicalize_axis(axis, ar.ndim)
    n = ar.shape[axis]
    if n == 0 and size and fill_value is None:
        raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, "
                         "fill_value must be specified")
    aux, mask, perm = _unique_sorted_mask(ar, axis, equal_nan)
    int_dtype = dtypes.default_int_dtype()
    if size is None:
        ind = _concrete_mask_indices(mask, "The error arose in jnp.unique(). " + UNIQUE_SIZE_HINT)
        ind = jnp.asarray(ind.astype(np.int64), dtype=int_dtype)
        out_len = int(ind.shape[0])
    else:
        ind = jnp.nonzero(mask, size=size)[0]
        out_len = size
    result = aux[ind] if n else aux  # slices of zero width are equal: one of them is kept
    if size is not None and fill_value is not None:
        fill = util.convert(fill_value, result.dtype)
        if result.shape[0]:
            valid = (_positions(size) < jnp.sum(mask)).reshape((size,) + (1,) * (result.ndim - 1))
            result = jnp.where(valid, result, fill)
        else:
            result = jnp.broadcast_to(fill, (size, *result.shape[1:]))
    result = jnp.moveaxis(result, 0, axis)
    ret = (result,)
    if return_index:
        # Zero-sized input has no first indices: with `size` they are zero padding, like counts.
        ret += (perm[ind] if n else jnp.zeros(0 if size is None else size, int_dtype),)
    if return_inverse:
        if n:
            imask = jnp.cumsum(mask, dtype=int_dtype) - 1
            inv = jnp.zeros(n, int_dtype).at[perm].set(imask)
        else:
            inv = jnp.zeros(n, int_dtype)
        if inverse_shape is not None:
            inv = inv.reshape(inverse_shape)
        ret += (inv,)
    if return_counts:
        if n:
            seg = jnp.cumsum(mask, dtype=int_dtype) - 1
            counts = jnp.zeros(out_len, int_dtype).at[seg].add(1, mode="drop")
        else:
            counts = jnp.zeros(0 if size is None else size, int_dtype)
        ret += (counts,)
    return ret[0] if len(ret) == 1 else ret


def unique(ar, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value=None, sorted: bool = True):
    """Sorted unique elements of `ar` (slices along `axis` if given).

    Parameters
    ----------
    return_index, return_inverse, return_counts : also return first indices, the inverse map
        and the multiplicities.
    size, fill_value : fix the output length (padding with `fill_value`, default the minimum
        unique value), which makes the function usable under jit.
    """
    arr = util.ensure_arraylike("unique", ar)
    size = _static_size(size, "jnp.unique()")
    if size is None:
        return _unique_flat_or_axis(arr, return_index, return_inverse, return_counts, axis,
                                    equal_nan, None, fill_value)
    return _unique_sized(arr, return_index, return_inverse, return_counts, axis, equal_nan,
                         size, fill_value)


def _unique_flat_or_axis(arr, return_index, return_inverse, return_counts, axis, equal_nan,
                         size, fill_value):
    inverse_shape = None
    if axis is None:
        inverse_shape = arr.shape  # a scalar input gets a scalar inverse, as in NumPy
        arr = arr.ravel()
        axis = 0
    return _unique(arr, axis, return_index, return_inverse, return_counts, equal_nan=equal_nan,
                   size=size, fill_value=fill_value, inverse_shape=inverse_shape)


# With a static size the computation is traceable: eager calls run one cached executable.
_unique_sized = eager_compiled(static_argnames=(
    "return_index", "return_inverse", "return_counts", "axis", "equal_nan", "size"))(
        _unique_flat_or_axis)


class _UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class _UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class _UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def unique_all(x, /, *, size: int | None = None, fill_value=None) -> _UniqueAllResult:
    """Array API unique_all: values, first indices, inverse indices (shape of `x`), counts."""
    x = util.ensure_arraylike("unique_all", x)
    values, indices, inverse, counts = unique(x, return_index=True, return_inverse=True,
                                              return_counts=True, equal_nan=False, size=size,
                                              fill_value=fill_value)
    return _UniqueAllResult(values, indices, inverse, counts)


def unique_counts(x, /, *, size: int | None = None, fill_value=None) -> _UniqueCountsResult:
    """Array API unique_counts: the unique values and their counts."""
    x = util.ensure_arraylike("unique_counts", x)
    values, counts = unique(x, return_counts=True, equal_nan=False, size=size,
                            fill_value=fill_value)
    return _UniqueCountsResult(values, counts)


def unique_inverse(x, /, *, size: int | None = None, fill_value=None) -> _UniqueInverseResult:
    """Array API unique_inverse: the unique values and the inverse map (shape of `x`)."""
    x = util.ensure_arraylike("unique_inverse", x)
    values, inverse = unique(x, return_inverse=True, equal_nan=False, size=size,
                             fill_value=fill_value)
    return _UniqueInverseResult(values, inverse)


def unique_values(x, /, *, size: int | None = None, fill_value=None):
    """Array API unique_values: the sorted unique values."""
    x = util.ensure_arraylike("unique_values", x)
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def _ravel_pair(name, ar1, ar2):
    jnp = _jnp()
    a, b = util.promote_dtypes(*util.ensure_arraylike(name, ar1, ar2))
    return jnp.ravel(a), jnp.ravel(b)


def union1d(ar1, ar2, *, size: int | None = None, fill_value=None):
    """Sorted unique values in either input (flattened)."""
    jnp = _jnp()
    a, b = _ravel_pair("union1d", ar1, ar2)
    size = _static_size(size, "union1d()")
    if size is None:
        core.concrete_or_error(a, "The error arose in union1d()")
        core.concrete_or_error(b, "The error arose in union1d()")
    return unique(jnp.concatenate([a, b]), size=size, fill_value=fill_value)


def _in1d(x, y, invert: bool, method: str = "auto"):
    jnp = _jnp()
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ValueError(f"method={method!r} is not implemented; options are 'compare_all', "
                         "'binary_search', 'sort', and 'auto'")
    if y.size == 0 or x.size == 0:
        return jnp.full(x.shape, invert, bool)
    if method in ("binary_search", "sort"):
        ys = lax.sort(y)
        found = ys[jnp.clip(jnp.searchsorted(ys, x), 0, y.size - 1)] == x
    else:
        found = jnp.any(x[:, None] == y[None, :], axis=-1)
    return ~found if invert else found


@eager_compiled(static_argnames=('assume_unique', 'invert', 'method'))
def isin(element, test_elements, assume_unique: bool = False, invert: bool = False, *,
         method="auto"):
    """Boolean array of `element`'s shape: whether each element occurs in `test_elements`."""
    jnp = _jnp()
    element, test_elements = util.promote_dtypes(
        *util.ensure_arraylike("isin", element, test_elements))
    result = _in1d(jnp.ravel(element), jnp.ravel(test_elements), invert, method)
    return result.reshape(element.shape)


def _fill_to_size(values, count, size: int, fill):
    jnp = _jnp()
    return jnp.where(_positions(size) < count, values, util.convert(fill, values.dtype))


def setdiff1d(ar1, ar2, assume_unique: bool = False, *, size: int | None = None,
              fill_value=None):
    """Sorted unique values of `ar1` that are not in `ar2` (padded with 0 by default)."""
    jnp = _jnp()
    util.check_arraylike("setdiff1d", ar1, ar2)
    a = jnp.ravel(util.as_array(ar1))
    b = jnp.ravel(util.as_array(ar2))
    size = _static_size(size, "setdiff1d()")
    if size is None:
        core.concrete_or_error(a, "The error arose in setdiff1d()")
    fill = 0 if fill_value is None else fill_value
    if a.size == 0:
        return jnp.full(size or 0, util.convert(fill, a.dtype), a.dtype)
    if size is None:
        a = a if assume_unique else unique(a)
        keep = _in1d(a, b, invert=True)
        return a[_concrete_mask_indices(keep, "The error arose in setdiff1d()")]
    if assume_unique:
        keep = _in1d(a, b, invert=True)
    else:
        aux, first, _ = _unique_sorted_mask(a, 0, True)
        a = aux
        keep = first & _in1d(aux, b, invert=True)
    picked = a[jnp.nonzero(keep, size=size)[0]]
    return _fill_to_size(picked, jnp.sum(keep), size, fill)


def setxor1d(ar1, ar2, assume_unique: bool = False, *, size: int | None = None,
             fill_value=None):
    """Sorted unique values in exactly one of the inputs."""
    jnp = _jnp()
    a, b = _ravel_pair("setxor1d", ar1, ar2)
    size = _static_size(size, "setxor1d()")
    if size is None:
        core.concrete_or_error(a, "The error arose in setxor1d()")
        core.concrete_or_error(b, "The error arose in setxor1d()")
    if not assume_unique:
        a = _first_of_runs(a)
        b = _first_of_runs(b)
    aux = jnp.concatenate([a[0], b[0]]) if not assume_unique else jnp.concatenate([a, b])
    valid = (jnp.concatenate([a[1], b[1]]) if not assume_unique
             else jnp.ones(aux.shape, bool))
    # Sort valid entries first, by value; a value is kept if it differs from both neighbours.
    _, aux = lax.sort([~valid, aux], num_keys=2) if aux.size else (valid, aux)
    n_valid = jnp.sum(valid)
    pos = _positions(aux.shape[0])
    if aux.size:
        differs = aux[1:] != aux[:-1]
        left = jnp.concatenate([jnp.ones(1, bool), differs])
        right = jnp.concatenate([differs, jnp.ones(1, bool)]) | (pos + 1 >= n_valid)
        keep = left & right & (pos < n_valid)
    else:
        keep = jnp.zeros(0, bool)
    if size is None:
        return aux[_concrete_mask_indices(keep, "The error arose in setxor1d()")]
    count = jnp.sum(keep)
    if aux.size:
        picked = aux[jnp.nonzero(keep, size=size)[0]]
    else:
        picked = jnp.zeros(size, aux.dtype)
    if fill_value is None:
        valid_out = _positions(size) < count
        lowest = jnp.min(jnp.where(valid_out, picked, picked[0] if size else 0)) if size else 0
        return jnp.where(valid_out, picked, lowest)
    return _fill_to_size(picked, count, size, fill_value)


def _first_of_runs(x):
    """Sorted `x` with a mask of the first element of each run (its unique values)."""
    aux, first, _ = _unique_sorted_mask(x, 0, True)
    return aux, first


def intersect1d(ar1, ar2, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value=None):
    """Sorted unique values in both inputs; optionally their first indices in each input."""
    jnp = _jnp()
    a, b = _ravel_pair("intersect1d", ar1, ar2)
    size = _static_size(size, "intersect1d()")
    if size is None:
        core.concrete_or_error(a, "The error arose in intersect1d()")
        core.concrete_or_error(b, "The error arose in intersect1d()")
    int_dtype = dtypes.default_int_dtype()
    if assume_unique:
        ua, ia, va = a, _positions(a.size), jnp.ones(a.shape, bool)
        ub, ib, vb = b, _positions(b.size), jnp.ones(b.shape, bool)
    else:
        ua, va, pa = _unique_sorted_mask(a, 0, True)
        ub, vb, pb = _unique_sorted_mask(b, 0, True)
        ia, ib = pa.astype(int_dtype), pb.astype(int_dtype)
    na = a.size
    aux = jnp.concatenate([ua, ub])
    valid = jnp.concatenate([va, vb])
    src = _positions(aux.shape[0])
    if aux.size:
        _, aux, order = lax.sort([~valid, aux, src], num_keys=2)
        nv = jnp.sum(valid)
        keep = (aux[1:] == aux[:-1]) & (_positions(aux.shape[0] - 1) + 1 < nv)
    else:
        order = src
        keep = jnp.zeros(0, bool)
    if size is None:
        idx = _concrete_mask_indices(keep, "The error arose in intersect1d()")
        vals = aux[idx]
        if not return_indices:
            return vals
        i1 = order[idx]
        i2 = order[idx + 1] - na
        if not assume_unique:
            i1, i2 = ia[i1], ib[i2]
        return vals, i1.astype(int_dtype), i2.astype(int_dtype)
    count = jnp.sum(keep)
    valid_out = _positions(size) < count
    if aux.size > 1:
        idx = jnp.nonzero(keep, size=size)[0]
        vals = aux[idx]
    else:
        idx = jnp.zeros(size, int_dtype)
        vals = jnp.zeros(size, aux.dtype)
    if fill_value is None:
        lowest = jnp.min(jnp.where(valid_out, vals, jnp.max(vals))) if size else None
        vals = jnp.where(valid_out, vals, lowest) if size else vals
    else:
        vals = _fill_to_size(vals, count, size, fill_value)
    if not return_indices:
        return vals
    if aux.size > 1:
        i1 = order[idx]
        i2 = order[jnp.minimum(idx + 1, aux.shape[0] - 1)] - na
        if not assume_unique:
            i1 = ia[jnp.clip(i1, 0, max(na - 1, 0))] if na else i1
            i2 = ib[jnp.clip(i2, 0, max(b.size - 1, 0))] if b.size else i2
    else:
        i1 = jnp.zeros(size, int_dtype)
        i2 = jnp.zeros(size, int_dtype)
    i1 = jnp.where(valid_out, i1, na).astype(int_dtype)
    i2 = jnp.where(valid_out, i2, b.size).astype(int_dtype)
    return vals, i1, i2
