"""Out-of-place editing and reshaping helpers of fluxion.numpy: block, insert, delete, resize,
rollaxis, unstack, trim_zeros, apply_along_axis, apply_over_axes, put, put_along_axis, place,
packbits, unpackbits, vander, diagflat, array_equiv and geomspace."""
from __future__ import annotations

import math
import operator

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.array import Array
from fluxion._src.lax import lax, structural
from fluxion._src.numpy import creation, manipulation, reductions, ufuncs, util
from fluxion._src.numpy.eager import eager_compiled


def _aval(x):
    return core.get_aval(x)


def _tile_to_size(flat, size: int):
    """The 1-D `flat` repeated and cut to `size` elements."""
    n = _aval(flat).shape[0]
    if n != size:
        flat = manipulation.tile(flat, -(-size // n))
        flat = structural.slice(flat, (0,), (size,))
    return flat


# ---------------------------------------------------------------------------------------------
# Joining and reshaping

def _block(xs):
    if isinstance(xs, tuple):
        raise ValueError(f"jax.numpy.block does not allow tuples, got {xs}")
    if isinstance(xs, list):
        if not xs:
            raise ValueError("jax.numpy.block does not allow empty list arguments")
        parts, depths = zip(*(_block(x) for x in xs))
        if any(d != depths[0] for d in depths[1:]):
            raise ValueError("Mismatched list depths in jax.numpy.block")
        rank = max(depths[0], max(_aval(p).ndim for p in parts))
        parts = [lax.reshape(p, (1,) * (rank - _aval(p).ndim) + _aval(p).shape) for p in parts]
        return manipulation.concatenate(parts, axis=-depths[0]), depths[0] + 1
    return creation.asarray(xs), 1


def block(arrays):
    """Assemble an array from nested lists of blocks (the innermost lists join on the last
    axis)."""
    return _block(arrays)[0]


def resize(a, new_shape):
    """An array of `new_shape` filled with the elements of `a`, repeated as needed."""
    util.check_arraylike("resize", a)
    new_shape = (new_shape,) if np.ndim(new_shape) == 0 else tuple(new_shape)
    new_shape = tuple(operator.index(d) for d in new_shape)
    if any(d < 0 for d in new_shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    flat = manipulation.ravel(a)
    size = math.prod(new_shape)
    if _aval(flat).size == 0 or size == 0:
        return creation.zeros_like(flat, shape=new_shape)
    return manipulation.reshape(_tile_to_size(flat, size), new_shape)


def rollaxis(a, axis: int, start: int = 0):
    """Move `axis` to before position `start` (prefer moveaxis)."""
    a = util.ensure_arraylike("rollaxis", a)
    start = util.static_int(start, "'start' argument of jnp.rollaxis()")
    nd = _aval(a).ndim
    axis = util.canonicalize_axis(axis, nd)
    if not -nd <= start <= nd:
        raise ValueError(f"start={start} must satisfy {-nd}<=start<={nd}")
    if start < 0:
        start += nd
    if start > axis:
        start -= 1
    return manipulation.moveaxis(a, axis, start)


def unstack(x, /, *, axis: int = 0) -> tuple:
    """The slices of `x` along `axis`, as a tuple."""
    x = util.ensure_arraylike("unstack", x)
    aval = _aval(x)
    if aval.ndim == 0:
        raise ValueError("Unstack requires arrays with rank > 0, however a scalar array was "
                         "passed.")
    axis = util.canonicalize_axis(axis, aval.ndim)
    return tuple(structural.squeeze(structural.slice_in_dim(x, i, i + 1, 1, axis), (axis,))
                 for i in range(aval.shape[axis]))


def trim_zeros(filt, trim: str = "fb", axis=None):
    """`filt` without its leading ('f') and/or trailing ('b') all-zero slices (concrete input)."""
    filt = util.ensure_arraylike("trim_zeros", filt)
    value = np.asarray(core.concrete_or_error(filt, "Error arose in the `filt` argument of "
                                                    "trim_zeros()"))
    axes = set(util.canonicalize_axes(axis, value.ndim, "trim_zeros"))
    trim = trim.lower()
    if not axes or ("f" not in trim and "b" not in trim):
        return filt
    index = []
    for ax in range(value.ndim):
        if ax not in axes:
            index.append(slice(None))
            continue
        nonzero = value.any(axis=tuple(i for i in range(value.ndim) if i != ax))
        if not nonzero.any():
            index.append(slice(0, 0))
            continue
        start = int(nonzero.argmax()) if "f" in trim else None
        stop = value.shape[ax] - int(nonzero[::-1].argmax()) if "b" in trim else None
        index.append(slice(start, stop))
    return filt[tuple(index)]


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """func1d applied to every 1-D slice of `arr` along `axis` (vectorized with vmap)."""
    from fluxion._src.vmap import vmap
    util.check_arraylike("apply_along_axis", arr)
    nd = np.ndim(arr)
    axis = util.canonicalize_axis(axis, nd)

    def func(x):
        return func1d(x, *args, **kwargs)

    for i in range(1, nd - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(arr)


def apply_over_axes(func, a, axes):
    """Apply func(a, axis) for each axis in turn; a reduced axis is kept with length 1."""
    a = util.ensure_arraylike("apply_over_axes", a)
    for axis in axes:
        b = func(a, axis)
        if _aval(b).ndim == _aval(a).ndim:
            a = b
        elif _aval(b).ndim == _aval(a).ndim - 1:
            a = manipulation.expand_dims(b, axis)
        else:
            raise ValueError("function is not returning an array of the correct shape")
    return a


# ---------------------------------------------------------------------------------------------
# Insert and delete

def insert(arr, obj, values, axis=None):
    """A copy of `arr` with `values` inserted before the indices `obj` along `axis`."""
    a, _, values = util.ensure_arraylike("insert", arr, 0 if isinstance(obj, slice) else obj,
                                         values)
    if axis is None:
        a = manipulation.ravel(a)
        axis = 0
    axis = util.canonicalize_axis(util.static_int(axis, "axis argument of jnp.insert()"),
                                  _aval(a).ndim)
    n_input = _aval(a).shape[axis]
    if isinstance(obj, slice):
        positions = creation.arange(*obj.indices(n_input))
    else:
        positions = creation.asarray(obj)
    if _aval(positions).ndim > 1:
        raise ValueError("jnp.insert(): obj must be a slice, a one-dimensional array, or a "
                         f"scalar; got {obj}")
    if not dtypes.is_integer(_aval(positions).dtype):
        if _aval(positions).size == 0 and not isinstance(obj, (Array, core.Tracer)):
            positions = util.convert(positions, dtypes.default_int_dtype())
        else:
            raise ValueError(f"jnp.insert(): index array must be integer typed; got {obj}")
    values = creation.array(values, ndmin=_aval(a).ndim, dtype=_aval(a).dtype, copy=False)
    if _aval(positions).size == 1:
        index = manipulation.ravel(positions)[0]
        if _aval(positions).ndim == 0:
            values = manipulation.moveaxis(values, 0, axis)
        positions = creation.full(_aval(values).shape[axis], index)
    n_insert = util.broadcast_shapes(_aval(positions).shape, (_aval(values).shape[axis],))[0]
    out_shape = list(_aval(a).shape)
    out_shape[axis] += n_insert
    out = creation.zeros_like(a, shape=tuple(out_shape))
    positions = ufuncs.where(ufuncs.less(positions, 0), ufuncs.add(positions, n_input), positions)
    positions = ufuncs.clip(positions, 0, n_input)
    # The k-th inserted value (in order of position) lands k places further on.
    order = manipulation.argsort(positions)
    value_at = positions.at[order].add(creation.arange(n_insert, dtype=_aval(positions).dtype))
    kept = creation.ones(n_input + n_insert, dtype=bool).at[value_at].set(False)
    kept_at = ufuncs.nonzero(kept, size=n_input)[0]
    lead = (slice(None),) * axis
    out = out.at[lead + (value_at,)].set(values)
    return out.at[lead + (kept_at,)].set(a)


def delete(arr, obj, axis=None, *, assume_unique_indices: bool = False):
    """A copy of `arr` without the entries at `obj` (an int, slice, index or mask array) along
    `axis`."""
    a = util.ensure_arraylike("delete", arr)
    if axis is None:
        a = manipulation.ravel(a)
        axis = 0
    axis = util.canonicalize_axis(axis, _aval(a).ndim)
    n = _aval(a).shape[axis]
    lead = (slice(None),) * axis
    try:
        index = operator.index(obj)
    except TypeError:
        pass
    else:
        index = util.canonicalize_axis(index, n)
        return manipulation.concatenate([a[lead + (slice(0, index),)],
                                         a[lead + (slice(index + 1, None),)]], axis=axis)
    if isinstance(obj, slice):
        obj = np.arange(n)[obj]
        assume_unique_indices = True
    util.check_arraylike("delete", a, obj)
    convert = getattr(obj, "__jax_array__", None)
    if convert is not None:
        obj = convert()
    if assume_unique_indices and dtypes.is_integer(np.result_type(obj) if not isinstance(
            obj, (Array, core.Tracer)) else _aval(obj).dtype):
        drop = manipulation.ravel(creation.asarray(obj))
        drop = ufuncs.clip(ufuncs.where(ufuncs.less(drop, 0), ufuncs.add(drop, n), drop), 0, n)
        drop = manipulation.sort(drop)
        m = _aval(drop).shape[0]
        drop = ufuncs.subtract(drop, creation.arange(m, dtype=_aval(drop).dtype))
        keep = creation.arange(n - m, dtype=_aval(drop).dtype)
        shift = reductions.sum(ufuncs.greater_equal(keep[None, :], drop[:, None]), axis=0,
                               dtype=_aval(keep).dtype)
        return a[lead + (ufuncs.add(keep, shift),)]
    values = np.asarray(core.concrete_or_error(obj, "'obj' array argument of jnp.delete()"))
    if dtypes.is_integer(values.dtype):
        mask = np.ones(n, dtype=bool)
        mask[values] = False
    elif values.dtype == bool:
        if values.shape != (n,):
            raise ValueError("np.delete(arr, obj): for boolean indices, obj must be "
                             "one-dimensional with length matching specified axis.")
        mask = ~values
    else:
        raise ValueError(f"np.delete(arr, obj): got obj.dtype={values.dtype}; must be integer "
                         "or bool.")
    return a[lead + (mask,)]


# ---------------------------------------------------------------------------------------------
# put, put_along_axis, place

def put(a, ind, v, mode=None, *, inplace: bool = True):
    """A copy of `a` with the flat positions `ind` set to `v` (repeated as needed).

    Negative positions count from the end; out-of-bound ones are clipped as by
    unravel_index (mode None, as in JAX), or moved in by mode 'clip' or 'wrap'."""
    if inplace:
        raise ValueError("jax.numpy.put cannot modify arrays in-place, because JAX arrays are "
                         "immutable. Pass inplace=False to instead return an updated array.")
    arr, ind, _ = util.ensure_arraylike("put", a, ind, v)
    ind = manipulation.ravel(ind)
    v = manipulation.ravel(v)
    size = _aval(arr).size
    if not size or not _aval(ind).size or not _aval(v).size:
        return arr
    v = _tile_to_size(v, _aval(ind).shape[0])
    if mode is None:
        scatter_mode = "drop"
    elif mode == "clip":
        ind, scatter_mode = ufuncs.clip(ind, 0, size - 1), "promise_in_bounds"
    elif mode == "wrap":
        ind, scatter_mode = ufuncs.remainder(ind, size), "promise_in_bounds"
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.put is not supported.")
    else:
        raise ValueError(f"mode should be one of 'wrap' or 'clip'; got mode={mode!r}")
    from fluxion._src.numpy.index_tricks import unravel_index
    return arr.at[unravel_index(ind, _aval(arr).shape)].set(v, mode=scatter_mode)


def put_along_axis(arr, indices, values, axis, inplace: bool = True, *, mode=None):
    """A copy of `arr` with values put at `indices` along `axis` (see take_along_axis)."""
    if inplace:
        raise ValueError("jax.numpy.put_along_axis cannot modify arrays in-place, because JAX "
                         "arrays are immutable. Pass inplace=False to instead return an updated "
                         "array.")
    arr, indices, values = util.ensure_arraylike("put_along_axis", arr, indices, values)
    original_shape = _aval(arr).shape
    original_axis = axis
    if axis is None:
        arr = manipulation.ravel(arr)
        axis = 0
    if _aval(arr).ndim != _aval(indices).ndim:
        raise ValueError("put_along_axis arguments 'arr' and 'indices' must have same ndim. Got "
                         f"arr.ndim={_aval(arr).ndim} and indices.ndim={_aval(indices).ndim}.")
    try:
        values = util.broadcast_to(values, _aval(indices).shape)
    except ValueError:
        raise ValueError("put_along_axis argument 'values' must be broadcastable to 'indices'. "
                         f"Got values.shape={_aval(values).shape} and "
                         f"indices.shape={_aval(indices).shape}.") from None
    from fluxion._src.numpy.index_tricks import indices as index_grids
    axis = util.canonicalize_axis(axis, _aval(arr).ndim)
    idx = list(index_grids(_aval(arr).shape, sparse=True))
    idx[axis] = indices
    result = arr.at[tuple(idx)].set(values, mode=mode)
    if original_axis is None:
        result = manipulation.reshape(result, original_shape)
    return result


def place(arr, mask, vals, *, inplace: bool = True):
    """A copy of `arr` with the positions where `mask` is true set to `vals`, in order
    (repeated as needed)."""
    data, mask, vals = util.ensure_arraylike("place", arr, mask, vals)
    vals = manipulation.ravel(vals)
    if inplace:
        raise ValueError("jax.numpy.place cannot modify arrays in-place, because JAX arrays are "
                         "immutable. Pass inplace=False to instead return an updated array.")
    if _aval(data).size != _aval(mask).size:
        raise ValueError("place: arr and mask must be the same size")
    if not _aval(vals).size:
        raise ValueError("Cannot place values from an empty array")
    if not _aval(data).size:
        return data
    size = _aval(mask).size
    positions = ufuncs.nonzero(manipulation.ravel(mask), size=size, fill_value=size)[0]
    vals = _tile_to_size(vals, size)
    flat = manipulation.ravel(data).at[positions].set(vals, mode="drop")
    return manipulation.reshape(flat, _aval(data).shape)


# ---------------------------------------------------------------------------------------------
# Bits

def _bit_weights(bitorder: str):
    weights = np.arange(8, dtype=np.uint8)
    return weights[::-1].copy() if bitorder == "big" else weights


def packbits(a, axis=None, bitorder: str = "big"):
    """Pack the truth values of `a` into uint8 bytes along `axis` (padding with zeros)."""
    a = util.ensure_arraylike("packbits", a)
    dt = _aval(a).dtype
    if not (dtypes.is_integer(dt) or dt == dtypes.bool_):
        raise TypeError("Expected an input array of integer or boolean data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    bits = lax._convert_element_type(util.to_bool(a), np.uint8, False)
    if axis is None:
        bits = manipulation.ravel(bits)
        axis = 0
    bits = manipulation.swapaxes(bits, axis, -1)
    shape = _aval(bits).shape
    remainder = shape[-1] % 8
    if remainder:
        bits = structural.pad(bits, lax._convert_element_type(0, np.uint8, False),
                              [(0, 0, 0)] * (len(shape) - 1) + [(0, 8 - remainder, 0)])
        shape = _aval(bits).shape
    bits = lax.reshape(bits, shape[:-1] + (shape[-1] // 8, 8))
    shifted = ufuncs.left_shift(bits, lax._convert_element_type(_bit_weights(bitorder), np.uint8,
                                                                False))
    packed = reductions.sum(shifted, axis=-1, dtype=np.uint8)
    return manipulation.swapaxes(packed, axis, -1)


def unpackbits(a, axis=None, count=None, bitorder: str = "big"):
    """The bits of the uint8 array `a` along `axis`, as uint8 zeros and ones (`count` of them
    per axis, padding or cutting)."""
    a = util.ensure_arraylike("unpackbits", a)
    if _aval(a).dtype != np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    masks = lax._convert_element_type(
        (np.uint8(1) << _bit_weights(bitorder)).astype(np.uint8), np.uint8, False)
    if axis is None:
        a = manipulation.ravel(a)
        axis = 0
    a = manipulation.swapaxes(a, axis, -1)
    shape = _aval(a).shape
    expanded = lax.broadcast_in_dim(a, shape + (8,), tuple(range(len(shape))))
    bits = ufuncs.greater(ufuncs.bitwise_and(expanded, masks), lax._convert_element_type(
        0, np.uint8, False))
    bits = lax.reshape(lax._convert_element_type(bits, np.uint8, False),
                       shape[:-1] + (shape[-1] * 8,))
    if count is not None:
        count = util.static_int(count, "'count' argument of jnp.unpackbits")
        length = _aval(bits).shape[-1]
        if count > length:
            bits = manipulation.pad(bits, [(0, 0)] * (len(shape) - 1) + [(0, count - length)])
        else:
            bits = bits[..., :count]
    return manipulation.swapaxes(bits, axis, -1)


# ---------------------------------------------------------------------------------------------
# Matrices, comparisons, ranges

def vander(x, N=None, increasing: bool = False):
    """The Vandermonde matrix of the 1-D `x`: columns are powers of x (decreasing by default)."""
    x = util.ensure_arraylike("vander", x)
    if _aval(x).ndim != 1:
        raise ValueError("x must be a one-dimensional array")
    N = _aval(x).shape[0] if N is None else util.static_int(N, "'N' argument of jnp.vander()")
    if N < 0:
        raise ValueError("N must be nonnegative")
    powers = creation.iota(_aval(x).dtype, (N,), 0)
    if not increasing:
        powers = lax.sub(lax._convert_element_type(N - 1, _aval(x).dtype, False), powers)
    return ufuncs.power(x[:, None], powers[None, :])


def diagflat(v, k: int = 0):
    """A 2-D array with the flattened `v` on diagonal k."""
    util.check_arraylike("diagflat", v)
    flat = manipulation.ravel(v)
    n = _aval(flat).shape[0]
    size = n + abs(k)
    i = np.arange(n)
    positions = i + k + i * size if k >= 0 else i + (i - k) * size
    out = creation.zeros(size * size, dtype=_aval(flat).dtype).at[positions].set(flat)
    return manipulation.reshape(out, (size, size))


def array_equiv(a1, a2):
    """True if the arrays are equal elementwise after broadcasting."""
    a1, a2 = creation.asarray(a1), creation.asarray(a2)
    try:
        eq = ufuncs.equal(a1, a2)
    except ValueError:  # as in JAX, shapes that do not broadcast raise TypeError from equal
        return creation.array(False)
    return reductions.all(eq)


def _exact_ends(seq, start, stop, endpoint: bool):
    """`seq` (sequences along axis 0) with its first entries start and, when it ends at stop,
    its last entries stop, as NumPy sets them: 10 ** log10(x) need not give back x."""
    num, bounds = _aval(seq).shape[0], _aval(seq).shape[1:]
    if num == 0:
        return seq
    first, last = (lax.broadcast_in_dim(util.broadcast_to(v, bounds), (1,) + bounds,
                                        tuple(range(1, 1 + len(bounds)))) for v in (start, stop))
    if endpoint and num > 1:
        return structural.concatenate([first, structural.slice_in_dim(seq, 1, num - 1, 1, 0),
                                       last], 0)
    return structural.concatenate([first, structural.slice_in_dim(seq, 1, num, 1, 0)], 0)


# One program when eager, as JAX's jitted geomspace: run op by op, float16 results rounded
# between the ops and geomspace(1, 128, 8, dtype=uint8) gave 31 where jit gives 32.
@eager_compiled(static_argnames=('num', 'endpoint', 'dtype', 'axis'))
def geomspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None, axis: int = 0):
    """`num` numbers spaced evenly on a log scale from start to stop (signs kept)."""
    num = util.static_int(num, "'num' argument of jnp.geomspace")
    axis = util.static_int(axis, "'axis' argument of jnp.geomspace")
    start, stop = util.ensure_arraylike("geomspace", start, stop)
    if dtype is None:
        dtype = util.to_inexact_dtype(dtypes.result_type(start, stop))
    else:
        dtype = creation.user_dtype(dtype, "geomspace")
    compute_dtype = util.to_inexact_dtype(dtype)
    start, stop = util.convert(start, compute_dtype), util.convert(stop, compute_dtype)
    sign = ufuncs.sign(start)
    out = ufuncs.multiply(sign, creation.logspace(
        ufuncs.log10(ufuncs.divide(start, sign)), ufuncs.log10(ufuncs.divide(stop, sign)), num,
        endpoint=endpoint, base=10.0, dtype=compute_dtype, axis=0))
    out = _exact_ends(out, start, stop, endpoint)
    axis = util.canonicalize_axis(axis, _aval(out).ndim)
    if axis:
        out = manipulation.moveaxis(out, 0, axis)
    return util.convert(out, dtype)


def _compile_eager_calls():  # as in manipulation.py
    from fluxion._src.numpy.eager import compile_eagerly
    compile_eagerly(globals(), names=("diagflat", "vander", "unstack", "resize"),
                    static_parameters=frozenset({"k", "N", "increasing", "axis", "new_shape"}))


_compile_eager_calls()
