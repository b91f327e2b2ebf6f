"""Index helpers of fluxion.numpy: r_, c_, mgrid, ogrid, ix_, indices, the triangle and
diagonal index functions, ravel_multi_index / unravel_index and fill_diagonal."""
from __future__ import annotations

import math
import operator

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.export import shape_poly
from fluxion._src.lax import lax, structural
from fluxion._src.numpy import creation, manipulation, reductions, ufuncs, util

s_ = np.s_
index_exp = np.index_exp


def _static(value, what: str):
    return core.concrete_or_error(value, what)


def _grid_axis(s: slice, op_name: str):
    """arange for [start:stop:step]; linspace for an imaginary step (its magnitude: the count)."""
    start = _static(s.start, f"slice start of jnp.{op_name}") or 0
    stop = _static(s.stop, f"slice stop of jnp.{op_name}")
    step = _static(s.step, f"slice step of jnp.{op_name}") or 1
    if np.iscomplex(step):
        return creation.linspace(start, stop, int(abs(step)))
    return creation.arange(start, stop, step)


def _grid_axes(key, op_name: str) -> list:
    axes = [_grid_axis(k, op_name) for k in key]
    # Promotion as under "standard" promotion: arange and linspace results are never weak.
    return util.promote_dtypes(*axes)


class _Mgrid:
    """Dense multi-dimensional grids: `mgrid[0:3, 0:4]` (a complex step n gives n points)."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_axis(key, "mgrid")
        grids = creation.meshgrid(*_grid_axes(key, "mgrid"), indexing="ij", sparse=False)
        if not grids:
            return creation.arange(0)
        return manipulation.stack(grids, 0)


class _Ogrid:
    """Open (sparse) multi-dimensional grids: `ogrid[0:3, 0:4]` gives broadcastable axes."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_axis(key, "ogrid")
        return creation.meshgrid(*_grid_axes(key, "ogrid"), indexing="ij", sparse=True)


mgrid = _Mgrid()
ogrid = _Ogrid()


class _AxisConcatenator:
    """Concatenate slices, scalars and arrays along an axis, with NumPy's string directives
    ("r", "c", or "axis,ndmin,trans1d")."""

    axis: int
    ndmin: int
    trans1d: int
    op_name: str

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, -1
        if items and isinstance(items[0], str):
            directive, items = items[0], items[1:]
            if directive in ("r", "c"):
                matrix = 0 if directive == "r" else 1
            else:
                fields = directive.split(",")
                fields = fields[:3] + [str(matrix)] if len(fields) >= 4 else \
                    fields + [str(v) for v in (axis, ndmin, trans1d, matrix)[len(fields):]]
                try:
                    axis, ndmin, trans1d, matrix = map(int, fields)
                except ValueError as err:
                    raise ValueError(f"could not understand directive {directive!r}") from err
        pieces = []
        for item in items:
            if isinstance(item, slice):
                piece, item_ndim = _grid_axis(item, self.op_name), 0
            elif isinstance(item, str):
                raise ValueError("string directive must be placed at the beginning")
            else:
                piece = creation.array(item, copy=False)
                item_ndim = core.get_aval(piece).ndim
            piece = creation.array(piece, copy=False, ndmin=ndmin)
            if trans1d != -1 and ndmin - item_ndim > 0:
                # Move the original dimensions to position trans1d of the upgraded shape.
                order = tuple(range(ndmin))
                shifts = ndmin - abs(ndmin + trans1d + 1) % ndmin
                piece = manipulation.transpose(piece, order[shifts:] + order[:shifts])
            pieces.append(piece)
        out = manipulation.concatenate(tuple(pieces), axis=axis)
        if matrix != -1 and core.get_aval(out).ndim == 1:
            out = manipulation.expand_dims(out, matrix)
        return out

    def __len__(self) -> int:
        return 0


class RClass(_AxisConcatenator):
    """`r_[...]`: concatenate along the first axis (see numpy.r_)."""
    axis, ndmin, trans1d, op_name = 0, 1, -1, "r_"


class CClass(_AxisConcatenator):
    """`c_[...]`: concatenate along the last axis, as columns (see numpy.c_)."""
    axis, ndmin, trans1d, op_name = -1, 2, 0, "c_"


r_ = RClass()
c_ = CClass()


# ---------------------------------------------------------------------------------------------
# Index arrays

def _index_array(values: np.ndarray, dtype=None):
    dtype = dtype or dtypes.default_int_dtype()
    return lax._convert_element_type(np.asarray(values).astype(dtype), dtype, False)


def ix_(*args) -> tuple:
    """Open mesh from 1-D index sequences: `a[ix_(rows, cols)]` is the sub-matrix."""
    util.check_arraylike("ix", *args)
    arrays = [util.as_array(a) for a in args]
    out = []
    for i, a in enumerate(arrays):
        aval = core.get_aval(a)
        if aval.ndim != 1:
            raise ValueError(f"Arguments to jax.numpy.ix_ must be 1-dimensional, got shape "
                             f"{aval.shape}")
        if aval.dtype == dtypes.bool_:
            raise NotImplementedError("Boolean arguments to jax.numpy.ix_ are not implemented")
        shape = [1] * len(arrays)
        shape[i] = aval.shape[0]
        if aval.size == 0:
            # NumPy gives integer indices for empty arrays.
            out.append(_index_array(np.zeros(shape, np.int64)))
        else:
            out.append(lax.broadcast_in_dim(a, tuple(shape), (i,)))
    return tuple(out)


def indices(dimensions, dtype=None, sparse: bool = False):
    """Index grids of an array of shape `dimensions` (stacked, or a tuple when sparse)."""
    dtype = creation.user_dtype(int if dtype is None else dtype, "indices")
    dims = tuple(operator.index(_static(d, "dimensions argument of jnp.indices"))
                 for d in dimensions)
    n = len(dims)
    out = []
    for i, d in enumerate(dims):
        shape = (1,) * i + (d,) + (1,) * (n - i - 1) if sparse else dims
        out.append(creation.iota(dtype, shape, i))
    if sparse:
        return tuple(out)
    return manipulation.stack(out, 0) if out else creation.array([], dtype=dtype)


def _static_dim(value, what: str) -> int:
    return operator.index(_static(value, what))


def _upper_count(n, m, k):
    """How many (i, j) with 0 <= i < n, 0 <= j < m lie on or above diagonal k (j - i >= k):
    row i holds max(0, m - k - i) of them, so the first min(n, m - k) rows hold some."""
    if k < 0:  # the complement, below diagonal k, is the transpose's part above 1 - k
        return n * m - _upper_count(m, n, 1 - k)
    if k >= m:
        return 0
    rows = shape_poly.min_dim(n, m - k)
    return rows * (rows + 1) // 2 + rows * (m - k - rows)


def _symbolic_triangle_indices(name, n, k, m):
    """The nonzeros of tril/triu of ones((n, m)), of a size known symbolically."""
    upper = name == "triu_indices"
    ones = creation.ones((n, m), dtype=np.int32)
    mask = creation.triu(ones, k) if upper else creation.tril(ones, k)
    size = _upper_count(n, m, k) if upper else _upper_count(m, n, -k)
    return ufuncs.nonzero(mask, size=size)


def _triangle_indices(np_fn, name, n, k, m):
    if shape_poly.DimExpr in (type(n), type(k), type(m)):
        return _symbolic_triangle_indices(name, n, k, n if m is None else m)
    n = _static_dim(n, f"n argument of jnp.{name}")
    k = _static_dim(k, f"k argument of jnp.{name}")
    m = n if m is None else _static_dim(m, f"m argument of jnp.{name}")
    return tuple(_index_array(i) for i in np_fn(n, k, m))


def tril_indices(n, k=0, m=None) -> tuple:
    """Row and column indices of the lower triangle of an (n, m) array, at and below
    diagonal k."""
    return _triangle_indices(np.tril_indices, "tril_indices", n, k, m)


def triu_indices(n, k=0, m=None) -> tuple:
    """Row and column indices of the upper triangle of an (n, m) array, at and above
    diagonal k."""
    return _triangle_indices(np.triu_indices, "triu_indices", n, k, m)


def _shape_of(name, arr) -> tuple:
    if hasattr(arr, "shape"):
        return tuple(arr.shape)
    return core.get_aval(util.ensure_arraylike(name, arr)).shape


def tril_indices_from(arr, k: int = 0) -> tuple:
    """tril_indices for the shape of the 2-D array `arr`."""
    shape = _shape_of("tril_indices_from", arr)
    if len(shape) != 2:
        raise ValueError("Only 2-D inputs are accepted")
    return tril_indices(shape[0], k=k, m=shape[1])


def triu_indices_from(arr, k: int = 0) -> tuple:
    """triu_indices for the shape of the 2-D array `arr`."""
    shape = _shape_of("triu_indices_from", arr)
    if len(shape) != 2:
        raise ValueError("Only 2-D inputs are accepted")
    return triu_indices(shape[0], k=k, m=shape[1])


def diag_indices(n, ndim: int = 2) -> tuple:
    """`ndim` copies of arange(n): the indices of the main diagonal."""
    n = _static_dim(n, "'n' argument of jnp.diag_indices()")
    ndim = _static_dim(ndim, "'ndim' argument of jnp.diag_indices()")
    if n < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    if ndim < 0:
        raise ValueError(f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    dtype = dtypes.default_int_dtype() if n <= np.iinfo(np.int32).max else np.dtype(np.int64)
    return (creation.iota(dtype, (n,), 0),) * ndim


def diag_indices_from(arr) -> tuple:
    """diag_indices for the square array `arr` (every dimension of one length)."""
    arr = util.ensure_arraylike("diag_indices_from", arr)
    shape = core.get_aval(arr).shape
    if len(shape) < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(shape[0], len(shape))


def mask_indices(n, mask_func, k: int = 0, *, size=None) -> tuple:
    """Indices where mask_func(ones((n, n)), k) is nonzero (e.g. mask_func=jnp.triu)."""
    i, j = ufuncs.nonzero(mask_func(creation.ones((n, n)), k), size=size)
    return i, j


def ravel_multi_index(multi_index, dims, mode: str = "raise", order: str = "C", *, dtype=None):
    """Flat indices from a tuple of index arrays into an array of shape `dims`.

    mode: "raise" (indices must be concrete and in bounds), "wrap", "clip" or "ignore".
    """
    if len(multi_index) != len(dims):
        raise ValueError(f"len(multi_index)={len(multi_index)} != len(dims)={len(dims)}")
    dims = tuple(_static_dim(d, "in `dims` argument of ravel_multi_index().") for d in dims)
    util.check_arraylike("ravel_multi_index", *multi_index)
    index_arrays = [util.as_array(i) for i in multi_index]
    if dtype is None:
        dtype = dtypes.result_type(int, *index_arrays)
    else:
        dtype = creation.user_dtype(dtype, "ravel_multi_index")
    if not dtypes.is_integer(dtype):
        raise ValueError(f"dtype={dtype!r} is not an integer type.")
    if math.prod(dims) - 1 > np.iinfo(dtype).max:
        raise ValueError(f"jnp.ravel_multi_index: dtype={dtype!r} not large enough to hold "
                         f"flattened index for dims={dims}. Use the dtype argument to pass a "
                         "suitable dtype (e.g. dtype=np.min_scalar_type(prod(dims))).")
    for index in index_arrays:
        if mode == "raise":
            _static(index, "The error occurred because ravel_multi_index was jit-compiled with "
                           "mode='raise'. Use mode='wrap' or mode='clip' instead.")
        if not dtypes.is_integer(core.get_aval(index).dtype):
            raise TypeError("only int indices permitted")
    if mode == "raise":
        for i, d in zip(index_arrays, dims):
            values = np.asarray(_static(i, "ravel_multi_index"))
            if np.any((values < 0) | (values >= d)):
                raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        index_arrays = [ufuncs.clip(i, 0, d - 1) for i, d in zip(index_arrays, dims)]
    elif mode == "wrap":
        index_arrays = [ufuncs.remainder(i, d) for i, d in zip(index_arrays, dims)]
    elif mode != "ignore":
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or 'ignore'.")
    if order == "F":
        strides = np.cumprod((1,) + dims[:-1])
    elif order == "C":
        strides = np.cumprod((1,) + dims[1:][::-1])[::-1]
    else:
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
    result = creation.array(0, dtype=dtype)
    for i, stride in zip(index_arrays, strides):
        result = ufuncs.add(result, ufuncs.multiply(util.convert(i, dtype), int(stride)))
    return result


def unravel_index(indices, shape) -> tuple:
    """Index arrays into an array of `shape` from flat `indices`.

    Unlike NumPy, negative indices count from the end and out-of-bound ones are clipped."""
    flat = util.ensure_arraylike("unravel_index", indices)
    try:
        shape = list(shape)
    except TypeError:
        shape = [shape]
    if any(np.ndim(s) != 0 for s in shape):
        raise ValueError("unravel_index: shape should be a scalar or 1D sequence.")
    out = [0] * len(shape)
    for i, s in reversed(list(enumerate(shape))):
        flat, out[i] = ufuncs.divmod(flat, s)
    too_high = ufuncs.greater(flat, 0)
    if core.get_aval(flat).dtype.kind == "u":
        too_low = creation.asarray(False)
    else:
        too_low = ufuncs.less(flat, -1)
    return tuple(ufuncs.where(too_high, ufuncs.subtract(s, 1), ufuncs.where(too_low, 0, i))
                 for s, i in zip(shape, out))


def fill_diagonal(a, val, wrap: bool = False, *, inplace: bool = True):
    """A copy of `a` with its main diagonal set to `val` (repeated to fill).

    JAX arrays are immutable: pass inplace=False."""
    if inplace:
        raise NotImplementedError("JAX arrays are immutable, must use inplace=False")
    if wrap:
        raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
    a, val = util.ensure_arraylike("fill_diagonal", a, val)
    shape = core.get_aval(a).shape
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    n = min(shape)
    idx = diag_indices(n, len(shape))
    if core.get_aval(val).ndim:
        flat = manipulation.ravel(val)
        size = core.get_aval(flat).size
        if size == 0:
            return a
        flat = manipulation.tile(flat, -(-n // size))
        val = structural.slice(flat, (0,), (n,))
    return a.at[idx].set(val)


def _compile_eager_calls():  # as in manipulation.py
    from fluxion._src.numpy.eager import compile_eagerly
    compile_eagerly(globals(), names=("unravel_index",), static_parameters=frozenset({"shape"}))


_compile_eager_calls()
