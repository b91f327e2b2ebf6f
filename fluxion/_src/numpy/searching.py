"""Searching and sorting functions of fluxion.numpy: searchsorted (four methods), lexsort,
partition, argpartition, sort_complex, argwhere, flatnonzero, extract, compress, select,
piecewise and choose."""
from __future__ import annotations

import numpy as np

from fluxion._src import core, dtypes
from fluxion import lax
from fluxion._src.numpy import util
from fluxion._src.numpy.eager import eager_compiled


def _jnp():
    import fluxion.numpy as jnp
    return jnp


def _total_lt(x, y):
    """x < y in the total order of lax.sort (NaNs last); complex values lexicographically."""
    jnp = _jnp()
    if dtypes.is_complex(x.dtype):
        xr, yr = jnp.real(x), jnp.real(y)
        return _total_lt(xr, yr) | ((_eq_total(xr, yr)) & _total_lt(jnp.imag(x), jnp.imag(y)))
    if dtypes.is_inexact(x.dtype):
        return (x < y) | (~jnp.isnan(x) & jnp.isnan(y))
    if x.dtype == dtypes.bool_:
        return ~x & y
    return x < y


def _eq_total(x, y):
    jnp = _jnp()
    if dtypes.is_inexact(x.dtype) and not dtypes.is_complex(x.dtype):
        return (x == y) | (jnp.isnan(x) & jnp.isnan(y))
    return x == y


def _search_index_dtype(n: int):
    return np.dtype(np.int64 if n > np.iinfo(np.int32).max else np.int32)


def _searchsorted_scan(a, v, side, out_dtype, unrolled):
    jnp = _jnp()
    n = a.shape[0]
    if n == 0:
        return jnp.zeros(v.shape, out_dtype)
    # Invariant: the answer lies in (low, high]; each level halves the interval.
    go_left = (lambda q, s: ~_total_lt(s, q)) if side == "left" else (lambda q, s: _total_lt(q, s))
    state_dtype = np.dtype(np.uint64 if out_dtype.itemsize == 8 else np.uint32)
    levels = int(np.ceil(np.log2(n + 1)))

    def body(_, state):
        low, high = state
        mid = low + (high - low) // 2
        left = go_left(v, a[mid.astype(out_dtype)])
        return jnp.where(left, low, mid), jnp.where(left, mid, high)

    from fluxion._src.lax.parallel import vary_like
    init = tuple(vary_like(c, a, v) for c in  # varying where a or v is (in a shard_map body)
                 (jnp.zeros(v.shape, state_dtype), jnp.full(v.shape, n, state_dtype)))
    if unrolled:
        state = init
        for i in range(levels):
            state = body(i, state)
    else:
        fori_loop = lax.fori_loop
        state = fori_loop(0, levels, body, init)
    return state[1].astype(out_dtype)


def _searchsorted_compare_all(a, v, side, out_dtype):
    jnp = _jnp()
    vv = v[..., None]
    hits = _total_lt(a, vv) if side == "left" else ~_total_lt(vv, a)
    return jnp.sum(hits, axis=-1, dtype=out_dtype)


def _searchsorted_sort(a, v, side, out_dtype):
    jnp = _jnp()
    n, m = a.shape[0], v.size
    flat_v = v.ravel()
    # Co-sort a and the queries; on ties queries go before (left) or after (right) a's values.
    values = jnp.concatenate([a, flat_v])
    is_query = jnp.concatenate([jnp.zeros(n, np.int32), jnp.ones(m, np.int32)])
    tag = is_query if side == "right" else 1 - is_query
    order = lax.iota(np.int32, n + m)
    _, _, perm = lax.sort([values, tag, order], num_keys=2)
    sorted_is_query = is_query[perm]
    # Position in the merged order minus the number of queries before: a's values before.
    a_before = jnp.cumsum(1 - sorted_is_query) - (1 - sorted_is_query)
    result = jnp.zeros(n + m, np.int32).at[perm].set(a_before)[n:]
    return result.astype(out_dtype).reshape(v.shape)


@eager_compiled(static_argnames=('side', 'method'))
def searchsorted(a, v, side: str = "left", sorter=None, *, method: str = "scan"):
    """Indices where `v`'s elements would be inserted into sorted 1-D `a` to keep it sorted.

    `method` is 'scan' (binary search in a loop), 'scan_unrolled', 'sort' (co-sorting) or
    'compare_all'; all give the same values.
    """
    if sorter is None:
        a, v = util.ensure_arraylike("searchsorted", a, v)
    else:
        a, v, sorter = util.ensure_arraylike("searchsorted", a, v, sorter)
    if a.ndim != 1:
        raise ValueError("a should be 1-dimensional")
    a, v = util.promote_dtypes(a, v)
    if sorter is not None:
        a = a[sorter]
    if side not in ("left", "right"):
        raise ValueError(f"{side!r} is an invalid value for keyword 'side'. Expected one of "
                         f"['left', 'right'].")
    out_dtype = _search_index_dtype(a.shape[0])
    if method == "scan":
        return _searchsorted_scan(a, v, side, out_dtype, unrolled=False)
    if method == "scan_unrolled":
        return _searchsorted_scan(a, v, side, out_dtype, unrolled=True)
    if method == "compare_all":
        return _searchsorted_compare_all(a, v, side, out_dtype)
    if method == "sort":
        return _searchsorted_sort(a, v, side, out_dtype)
    raise ValueError(f"{method!r} is an invalid value for keyword 'method'. Expected one of "
                     f"['sort', 'scan', 'scan_unrolled', 'compare_all'].")


@eager_compiled(static_argnames=('axis',))
def lexsort(keys, axis: int = -1):
    """Indirect stable sort by several keys; the last key is the primary one."""
    jnp = _jnp()
    key_tuple = tuple(keys)
    if len(key_tuple) == 0:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    key_arrays = [util.as_array(k) for k in key_tuple]
    util.check_arraylike("lexsort", *key_arrays)
    if len({k.shape for k in key_arrays}) > 1:
        raise ValueError("all keys need to be the same shape")
    shape = key_arrays[0].shape
    if len(shape) == 0:
        return jnp.array(0, dtypes.default_int_dtype())
    axis = util.canonicalize_axis(axis, len(shape))
    iota = lax.broadcasted_iota(dtypes.default_int_dtype(), shape, axis)
    return lax.sort([*key_arrays[::-1], iota], dimension=axis,
                        num_keys=len(key_arrays))[-1]


def _partition_setup(name, a, kth, axis):
    arr = util.ensure_arraylike(name, a)
    if dtypes.is_complex(arr.dtype):
        raise NotImplementedError(f"jnp.{name} for complex dtype is not implemented.")
    axis = util.canonicalize_axis(axis, arr.ndim)
    kth = util.canonicalize_axis(kth, arr.shape[axis])
    return _jnp().swapaxes(arr, axis, -1), axis, kth


def _negated_for_bottom(arr):
    if arr.dtype.kind == "u":
        return -(arr + 1)
    return -arr


@eager_compiled(static_argnames=('kth', 'axis'))
def partition(a, kth: int, axis: int = -1):
    """Copy of `a` where the element at `kth` is in its sorted place, smaller ones before.

    As in JAX, the first kth+1 entries come out ascending and the rest descending.
    """
    arr, axis, kth = _partition_setup("partition", a, kth, axis)
    if arr.dtype.kind == "u":
        bottom = -lax.top_k(-(arr + 1), kth + 1)[0] - 1
    else:
        bottom = -lax.top_k(-arr, kth + 1)[0]
    top = lax.top_k(arr, arr.shape[-1] - kth - 1)[0]
    return _jnp().swapaxes(lax.concatenate([bottom, top], arr.ndim - 1), -1, axis)


@eager_compiled(static_argnames=('kth', 'axis'))
def argpartition(a, kth: int, axis: int = -1):
    """Indices that partition `a` as `partition` does."""
    jnp = _jnp()
    arr, axis, kth = _partition_setup("argpartition", a, kth, axis)
    bottom_ind = lax.top_k(_negated_for_bottom(arr), kth + 1)[1]
    # The remaining positions, in increasing order, via a proxy that zeroes the chosen ones.
    chosen = jnp.any(bottom_ind[..., :, None] == lax.iota(bottom_ind.dtype, arr.shape[-1]),
                     axis=-2)
    proxy = jnp.where(chosen, 0.0, 1.0).astype(np.float32)
    top_ind = lax.top_k(proxy, arr.shape[-1] - kth - 1)[1]
    return jnp.swapaxes(lax.concatenate([bottom_ind, top_ind], arr.ndim - 1), -1, axis)


@eager_compiled(static_argnames=())
def sort_complex(a):
    """Sort by real part then imaginary part; the result is complex."""
    a = util.ensure_arraylike("sort_complex", a)
    out = lax.sort(a, dimension=a.ndim - 1) if a.ndim else a  # the last axis, as NumPy
    if dtypes.is_complex(out.dtype):
        return out
    # JAX's to_complex_dtype: 64-bit types become complex128, narrower ones complex64.
    return util.convert(out, np.complex128 if out.dtype.itemsize == 8 else np.complex64)


def argwhere(a, *, size: int | None = None, fill_value=None):
    """Indices of the nonzero elements, one row per element (shape (N, a.ndim))."""
    jnp = _jnp()
    a = util.ensure_arraylike("argwhere", a)
    result = jnp.transpose(jnp.vstack(jnp.nonzero(jnp.atleast_1d(a), size=size,
                                                   fill_value=fill_value)))
    if a.ndim == 0:
        return result[:0].reshape(result.shape[0], 0)
    return result


def flatnonzero(a, *, size: int | None = None, fill_value=None):
    """Indices of the nonzero elements of the flattened array."""
    jnp = _jnp()
    a = util.ensure_arraylike("flatnonzero", a)
    return jnp.nonzero(jnp.ravel(a), size=size, fill_value=fill_value)[0]


def compress(condition, a, axis: int | None = None, *, size: int | None = None,
             fill_value=0, out=None):
    """Slices of `a` along `axis` where the 1-D `condition` is true."""
    jnp = _jnp()
    condition, arr = util.ensure_arraylike("compress", condition, a)
    condition = condition.astype(bool)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    if condition.ndim != 1:
        raise ValueError("condition must be a 1D array")
    if axis is None:
        axis = 0
        arr = jnp.ravel(arr)
    else:
        arr = jnp.moveaxis(arr, axis, 0)
    condition, extra = condition[:arr.shape[0]], condition[arr.shape[0]:]
    arr = arr[:condition.shape[0]]
    if size is None:
        if jnp.any(extra):
            raise ValueError("condition contains entries that are out of bounds")
        result = arr[condition]
    else:
        idx = jnp.nonzero(condition, size=size)[0]
        valid = (lax.iota(idx.dtype, size) < jnp.sum(condition)).reshape(
            (size,) + (1,) * (arr.ndim - 1))
        result = jnp.where(valid, arr[idx], util.convert(fill_value, arr.dtype))
    return jnp.moveaxis(result, 0, axis)


def extract(condition, arr, *, size: int | None = None, fill_value=0):
    """Elements of `arr` where `condition` (flattened) is true."""
    jnp = _jnp()
    condition, arr = util.ensure_arraylike("extract", condition, arr)
    return compress(jnp.ravel(condition), jnp.ravel(arr), size=size, fill_value=fill_value)


@eager_compiled(static_argnames=())
def select(condlist, choicelist, default=0):
    """Elementwise choice from `choicelist` by the first true condition in `condlist`."""
    jnp = _jnp()
    if len(condlist) != len(choicelist):
        raise ValueError(f"condlist must have length equal to choicelist ({len(condlist)} vs "
                         f"{len(choicelist)})")
    if len(condlist) == 0:
        raise ValueError("condlist must be non-empty")
    util.check_arraylike("select", *condlist, *choicelist, default)
    conds = [util.as_array(c).astype(bool) for c in condlist]
    choices = util.promote_dtypes(default, *map(util.as_array, choicelist))
    shape = util.broadcast_shapes(*(c.shape for c in conds), *(c.shape for c in choices))
    conds = [jnp.broadcast_to(c, shape) for c in conds]
    choices = [jnp.broadcast_to(c, shape) for c in choices]
    # Later cases are overridden by earlier ones: fold from the back.
    result = choices[0]
    for cond, choice in zip(conds[::-1], choices[:0:-1]):
        result = jnp.where(cond, choice, result)
    return result


def piecewise(x, condlist, funclist, *args, **kw):
    """Evaluate `funclist[i]` (a function or constant) where `condlist[i]` is true.

    One extra function in `funclist` gives the value where no condition holds.
    """
    jnp = _jnp()
    x = util.ensure_arraylike("piecewise", x)
    if isinstance(condlist, (bool, np.bool_)) or (not isinstance(condlist, (list, tuple))
                                                  and jnp.ndim(condlist) < 2):
        condlist = [condlist]
    conds = [jnp.asarray(c) for c in condlist]
    nc, nf = len(conds), len(funclist)
    if nf == nc + 1:
        funclist = list(funclist)
        default = funclist.pop()
        funclist = [default] + funclist
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are "
                         f"expected; got {nf}")
    # The branch index is the last true condition (numpy's rule), 0 for none.
    index = jnp.zeros(x.shape, np.int32)
    for i, c in enumerate(conds, start=1):
        index = jnp.where(jnp.broadcast_to(c, x.shape), i, index)
    out = jnp.zeros(x.shape, x.dtype)
    for i, f in enumerate(funclist):
        value = f(x, *args, **kw) if callable(f) else f
        value = jnp.broadcast_to(util.convert(value, x.dtype), x.shape)
        out = jnp.where(index == i, value, out)
    return out


def choose(a, choices, out=None, mode: str = "raise"):
    """Build an array from `choices` indexed elementwise by `a` (mode 'raise', 'wrap', 'clip').

    Under a transformation mode='raise' cannot check its indices, as in JAX.
    """
    jnp = _jnp()
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    a = util.ensure_arraylike("choose", a)
    util.check_arraylike("choose", *choices)
    if not dtypes.is_integer(a.dtype):
        raise ValueError("`a` array must be integer typed")
    n = len(choices)
    if mode == "raise":
        value = core.concrete_or_error(a, "The error occurred because jnp.choose was jit-"
                                          "compiled with mode='raise'. Use mode='wrap' or "
                                          "mode='clip' instead.")
        value = np.asarray(value)
        if np.any((value < 0) | (value >= n)):
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        a = a % n
    elif mode == "clip":
        a = jnp.clip(a, 0, n - 1)
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    arrays = util.promote_dtypes(*choices)
    a, *arrays = util.broadcast_arrays(a, *arrays)
    stacked = jnp.stack(arrays)
    out = stacked[(a,) + tuple(np.indices(a.shape, sparse=True))] if a.ndim else stacked[a]
    return util.convert(out, out.dtype, weak_type=False)
