"""Shape manipulation of fluxion.numpy: reshaping, transposing, joining, splitting, tiling,
flipping, rolling, padding and sorting."""
from __future__ import annotations

import builtins
import math
import warnings
import operator

import numpy as np

from fluxion._src.export import shape_poly as export_shape_poly
from fluxion._src import core, dtypes, tree_util
from fluxion._src.array import Array
from fluxion._src.lax import lax
from fluxion._src.lax import sorting
from fluxion._src.lax import structural as ls
from fluxion._src.numpy import ufuncs, util
from fluxion._src.numpy.eager import eager_compiled
from fluxion._src.numpy.creation import asarray, user_dtype, zeros
from fluxion._src.sharding_types import accepts_out_sharding


def _aval(x):
    return core.get_aval(x)


def _shape(x) -> tuple:
    return core.get_aval(x).shape


def _ndim(x) -> int:
    return core.get_aval(x).ndim


# The shape queries are NumPy's: they read `.shape`, which arrays and tracers have.
def _warn_not_arraylike(name: str, a) -> None:
    if not util.is_arraylike(a):
        warnings.warn(f"{name} requires ndarray or scalar arguments, got {type(a)} at position 0. "
                      "In a future release this will be an error.", DeprecationWarning,
                      stacklevel=3)


def ndim(a) -> int:
    """The number of dimensions of `a` (lists still work, with a DeprecationWarning as JAX)."""
    if hasattr(a, "ndim"):
        return a.ndim
    _warn_not_arraylike("ndim", a)
    return np.ndim(a)


def shape(a) -> tuple:
    """The shape of `a` (lists still work, with a DeprecationWarning as JAX)."""
    if hasattr(a, "shape"):
        return tuple(a.shape)
    _warn_not_arraylike("shape", a)
    return np.shape(a)


def size(a, axis=None) -> int:
    """The number of elements of `a`, or along `axis` (an int or a sequence of them)."""
    if hasattr(a, "shape"):
        dims = tuple(a.shape)
    else:
        _warn_not_arraylike("size", a)
        dims = np.shape(a)
    if axis is None:
        return math.prod(dims)
    axes = [util.canonicalize_axis(i, len(dims))
            for i in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis: {axis}")  # NumPy's and JAX's words
    return math.prod(dims[i] for i in axes)


# ---------------------------------------------------------------------------------------------
# Reshaping and transposing

def _new_shape(name, old_shape, new_shape) -> tuple:
    # (np.ndim of a traced shape, or of a list holding one, would read its value)
    scalar = (not isinstance(new_shape, (tuple, list)) and
              (new_shape.ndim if isinstance(new_shape, core.Tracer) else np.ndim(new_shape)) == 0)
    dims = list((new_shape,) if scalar else new_shape)
    try:
        dims = [util.static_dim(d, f"The new shape passed to jnp.{name}") for d in dims]
    except TypeError:  # a traced size (the tracer errors are TypeErrors): JAX's TypeError
        shown = dims if scalar else new_shape
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{shown!r}.\nIf using `jit`, try using `static_argnums` or applying "
                        "`jit` to smaller subfunctions.") from None
    if any(d < -1 for d in dims):
        raise TypeError(f"jnp.{name}: new sizes must be nonnegative or -1, got {tuple(dims)}")
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise TypeError(f"can only specify one unknown axis size with a `-1` value, got "
                        f"{tuple(dims)}")
    known = math.prod(d for d in dims if d != -1)
    total = math.prod(old_shape)
    if unknown:
        if type(total) is export_shape_poly.DimExpr and known != 0 and total % known != 0:
            # JAX's message (core.divide_shape_sizes), its remainder over the size with the -1
            raise export_shape_poly.InconclusiveDimensionOperation(
                f"Cannot divide evenly the sizes of shapes {tuple(old_shape)} and "
                f"{tuple(dims)}. The remainder {total % -known} should be 0.")
        if known == 0 or total % known:
            raise TypeError(f"cannot reshape array of shape {old_shape} (size {total}) into "
                            f"shape {tuple(new_shape)}")
        dims[unknown[0]] = total // known
    elif known != total:
        raise TypeError(f"cannot reshape array of shape {old_shape} (size {total}) into shape "
                        f"{tuple(dims)} (size {known})")
    return tuple(dims)


@accepts_out_sharding
def reshape(a, shape, order: str = "C", *, copy=None):
    """Give `a` a new shape with the same size; one dimension may be -1 (inferred).

    order='C' reads and writes elements in row-major order, 'F' in column-major order.
    """
    a = util.ensure_arraylike("reshape", a)
    new_shape = _new_shape("reshape", _shape(a), shape)
    if order == "C":
        return lax.reshape(a, new_shape)
    if order == "F":
        reversed_dims = tuple(reversed(range(_ndim(a))))
        flipped = lax.reshape(a, new_shape[::-1], reversed_dims)
        return ls.transpose(flipped, tuple(reversed(range(len(new_shape)))))
    if order == "A":
        raise NotImplementedError("np.reshape order=A is not implemented.")
    raise ValueError(f"Unexpected value for 'order' argument: {order}.")


def ravel(a, order: str = "C"):
    """The elements of `a` as a 1-D array."""
    a = util.ensure_arraylike("ravel", a)
    return reshape(a, (_aval(a).size,), order)


def transpose(a, axes=None):
    """Permute the axes of `a` (reverse them when `axes` is None)."""
    a = util.ensure_arraylike("transpose", a)
    nd = _ndim(a)
    if axes is None:
        perm = tuple(reversed(range(nd)))
    else:
        perm = tuple(util.canonicalize_axis(i, nd) for i in axes)
        if sorted(perm) != list(range(nd)):
            raise TypeError(f"transpose permutation isn't a permutation of operand dimensions, "
                            f"got permutation {tuple(axes)} for operand shape {_aval(a).shape}.")
    return ls.transpose(a, perm)


def permute_dims(a, axes):
    """Array-API name of `transpose`."""
    return transpose(a, axes)


def matrix_transpose(x):
    """Swap the last two axes (a batch of matrices transposed)."""
    x = util.ensure_arraylike("matrix_transpose", x)
    nd = _ndim(x)
    if nd < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got "
                         f"ndim={nd}")
    return ls.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def swapaxes(a, axis1: int, axis2: int):
    """Exchange two axes."""
    a = util.ensure_arraylike("swapaxes", a)
    perm = list(range(_ndim(a)))
    i, j = util.canonicalize_axis(axis1, len(perm)), util.canonicalize_axis(axis2, len(perm))
    perm[i], perm[j] = perm[j], perm[i]
    return ls.transpose(a, tuple(perm))


def _axis_tuple(axis) -> tuple:
    """`axis` as a tuple: one integer, or any iterable of them (range, array, list)."""
    try:
        return (operator.index(axis),)
    except TypeError:
        return tuple(axis)


def _axis_list(axis, nd, name) -> tuple:
    axes = _axis_tuple(axis)
    out = tuple(util.canonicalize_axis(x, nd) for x in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {name}: {axis}")
    return out


def moveaxis(a, source, destination):
    """Move axes `source` to positions `destination`, keeping the others in order."""
    a = util.ensure_arraylike("moveaxis", a)
    nd = _ndim(a)
    src, dst = _axis_list(source, nd, "moveaxis"), _axis_list(destination, nd, "moveaxis")
    if len(src) != len(dst):
        raise ValueError("Inconsistent number of elements: {} vs {}".format(len(src), len(dst)))
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return ls.transpose(a, tuple(perm))


def expand_dims(a, axis):
    """Insert size-1 axes at positions `axis` (in the result)."""
    a = util.ensure_arraylike("expand_dims", a)
    axes = _axis_tuple(axis)
    nd_out = _ndim(a) + len(axes)
    return ls.expand_dims(a, _axis_list(axes, nd_out, "expand_dims"))


def squeeze(a, axis=None):
    """Remove size-1 axes (all of them, or those in `axis`, which must have size 1)."""
    a = util.ensure_arraylike("squeeze", a)
    dims = _shape(a)
    if axis is None:
        if export_shape_poly.is_symbolic_shape(dims):  # a symbolic size may be 1 or not
            raise ValueError("jnp.squeeze with axis=None is not supported with shape "
                             "polymorphism: pass the axes to squeeze")
        axes = tuple(i for i, d in enumerate(dims) if d == 1)
    else:
        axes = _axis_list(axis, len(dims), "squeeze")
        if any(dims[i] != 1 for i in axes):
            raise ValueError(f"cannot select an axis to squeeze out which has size not equal to "
                             f"one, got shape={dims} and dimensions={axes}")
    return ls.squeeze(a, axes)


# ---------------------------------------------------------------------------------------------
# Joining

def _as_array_list(name, arrays) -> list:
    if isinstance(arrays, (Array, core.Tracer, np.ndarray)):
        arrays = util.as_array(arrays)
        if _ndim(arrays) == 0:
            raise ValueError(f"{name}: expected a sequence of arrays, got a 0-d array")
        return [ls.index_in_dim(arrays, i, 0, keepdims=False) for i in range(_shape(arrays)[0])]
    arrays = list(arrays)
    util.check_arraylike(name, *arrays)
    return arrays


def concatenate(arrays, axis: int | None = 0, dtype=None):
    """Join arrays along an existing axis (of the flattened arrays if axis is None)."""
    arrays = _as_array_list("concatenate", arrays)
    if not arrays:
        raise ValueError("Need at least one array to concatenate.")
    if axis is None:
        return concatenate([ravel(a) for a in arrays], 0, dtype)
    arrays = [util.as_array(a) for a in arrays]
    if _ndim(arrays[0]) == 0:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    axis = util.canonicalize_axis(axis, _ndim(arrays[0]))
    arrays = util.promote_dtypes(*arrays) if dtype is None else [
        util.convert(a, user_dtype(dtype, "concatenate")) for a in arrays]
    if len(arrays) == 1:
        return arrays[0]
    return ls.concatenate(arrays, axis)


def concat(arrays, /, *, axis: int | None = 0):
    """Array-API name of `concatenate`."""
    return concatenate(arrays, axis)


@eager_compiled(static_argnames=("axis", "out", "dtype"))
def stack(arrays, axis: int = 0, out=None, dtype=None):
    """Join arrays of one shape along a new axis."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.stack is not supported.")
    arrays = [util.as_array(a) for a in _as_array_list("stack", arrays)]
    if not arrays:
        raise ValueError("Need at least one array to stack.")
    shapes = {_shape(a) for a in arrays}
    if len(shapes) != 1:
        err = ValueError(f"All input arrays must have the same shape, got "
                         f"{[_shape(a) for a in arrays]}.")
        core.note_user_line(err)
        raise err
    axis = util.canonicalize_axis(axis, _ndim(arrays[0]) + 1)
    return concatenate([ls.expand_dims(a, (axis,)) for a in arrays], axis, dtype)


@eager_compiled(static_argnames=("dtype",))
def vstack(tup, dtype=None):
    """Stack arrays row-wise (1-D arrays become rows)."""
    return concatenate([atleast_2d(a) for a in _as_array_list("vstack", tup)], 0, dtype)


@eager_compiled(static_argnames=("dtype",))
def hstack(tup, dtype=None):
    """Stack arrays column-wise (along axis 1, or axis 0 for 1-D arrays)."""
    arrays = [atleast_1d(a) for a in _as_array_list("hstack", tup)]
    axis = 0 if arrays and _ndim(arrays[0]) == 1 else 1
    return concatenate(arrays, axis, dtype)


@eager_compiled(static_argnames=("dtype",))
def dstack(tup, dtype=None):
    """Stack arrays depth-wise (along axis 2)."""
    return concatenate([atleast_3d(a) for a in _as_array_list("dstack", tup)], 2, dtype)


@eager_compiled()
def column_stack(tup):
    """Stack 1-D arrays as columns (higher-rank arrays join along axis 1)."""
    arrays = []
    for a in _as_array_list("column_stack", tup):
        a = util.as_array(a)
        arrays.append(lax.reshape(a, (_shape(a)[0], 1)) if _ndim(a) == 1 else atleast_2d(a))
    return concatenate(arrays, 1)


def append(arr, values, axis: int | None = None):
    """`values` appended to `arr` along `axis` (both flattened if axis is None)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def _atleast(arrays, make):
    outs = [make(util.ensure_arraylike("atleast_nd", a)) for a in arrays]
    return outs[0] if len(outs) == 1 else outs


def atleast_1d(*arys):
    """Arrays with at least one dimension (scalars become shape (1,))."""
    return _atleast(arys, lambda a: lax.reshape(a, (1,)) if _ndim(a) == 0 else a)


def atleast_2d(*arys):
    """Arrays with at least two dimensions (new axes are leading)."""
    return _atleast(arys, lambda a: lax.reshape(a, (1,) * (2 - _ndim(a)) + _shape(a))
                    if _ndim(a) < 2 else a)


def _to_3d(a):
    nd = _ndim(a)
    if nd == 0:
        return lax.reshape(a, (1, 1, 1))
    if nd == 1:
        return lax.reshape(a, (1, _shape(a)[0], 1))
    if nd == 2:
        return lax.reshape(a, _shape(a) + (1,))
    return a


def atleast_3d(*arys):
    """Arrays with at least three dimensions (1-D: (1, N, 1); 2-D: (M, N, 1))."""
    return _atleast(arys, _to_3d)


# ---------------------------------------------------------------------------------------------
# Splitting

def _split(name, ary, indices_or_sections, axis, equal: bool) -> list:
    ary = util.ensure_arraylike(name, ary)
    axis = util.canonicalize_axis(util.static_int(axis, f"axis argument of jnp.{name}"),
                                  _ndim(ary))
    n = _shape(ary)[axis]
    context = f"The indices_or_sections argument of jnp.{name}"
    is_dim = lambda v: type(v) is export_shape_poly.DimExpr  # noqa: E731
    if is_dim(indices_or_sections):
        raise ValueError(f"jax.numpy.{name} with a symbolic number of sections is not "
                         "supported")
    if is_dim(n) or (isinstance(indices_or_sections, (list, tuple))
                     and builtins.any(map(is_dim, indices_or_sections))):
        return _split_symbolic(ary, indices_or_sections, axis, n, equal)
    if isinstance(indices_or_sections, (list, tuple)):  # each element must be concrete
        indices_or_sections = [core.concrete_or_error(i, context) for i in indices_or_sections]
    sections = core.concrete_or_error(indices_or_sections, context)
    if np.ndim(sections) == 0:
        parts = _section_count(sections)
        if parts <= 0:
            raise ValueError("number sections must be larger than 0.")
        if equal and n % parts:
            raise ValueError("array split does not result in an equal division")
        small, extra = divmod(n, parts)
        sizes = [small + 1] * extra + [small] * (parts - extra)
        bounds = np.cumsum([0] + sizes)
    else:
        cuts = [builtins.min(builtins.max(int(i) + (n if int(i) < 0 else 0), 0), n)
                for i in np.asarray(sections).tolist()]
        bounds = [0] + cuts + [n]
    return [ls.slice_in_dim(ary, int(lo), builtins.max(int(lo), int(hi)), 1, axis)
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def _split_symbolic(ary, indices_or_sections, axis, n, equal: bool) -> list:
    """`_split` where the axis length or an index is a symbolic dimension: equal sections of
    n // parts, or cuts at indices clamped to [0, n] (the comparisons must be decidable)."""
    mx, mn = export_shape_poly.max_dim, export_shape_poly.min_dim
    if isinstance(indices_or_sections, (list, tuple)):
        cuts = [mn(mx(i + n if i < 0 else i, 0), n) for i in indices_or_sections]
        bounds = [0, *cuts, n]
    else:
        parts = _section_count(indices_or_sections)
        if parts <= 0:
            raise ValueError("number sections must be larger than 0.")
        if n % parts != 0:
            raise ValueError("array split does not result in an equal division")
        bounds = [i * (n // parts) for i in range(parts + 1)]
    return [ls.slice_in_dim(ary, lo, mx(lo, hi), 1, axis)
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def _section_count(sections) -> int:
    """The number of sections as an int; NumPy and JAX also take a float such as 2.0."""
    if isinstance(sections, (float, np.floating)) or (
            hasattr(sections, "dtype") and dtypes.is_float(sections.dtype)):
        if float(sections) != int(float(sections)):
            raise TypeError(f"the number of sections must be an integer, got {sections}")
        return int(float(sections))
    return operator.index(sections)


def split(ary, indices_or_sections, axis: int = 0) -> list:
    """Split into equal sections, or at the given indices, along `axis`."""
    return _split("split", ary, indices_or_sections, axis, equal=True)


def array_split(ary, indices_or_sections, axis: int = 0) -> list:
    """Like `split`, but sections may differ in size by one (the first ones are larger)."""
    return _split("array_split", ary, indices_or_sections, axis, equal=False)


def _split_at(name, axis):
    def fn(ary, indices_or_sections):
        a = util.ensure_arraylike(name, ary)
        if _ndim(a) <= axis:
            raise ValueError(f"{name} only works on arrays of {axis + 1} or more dimensions")
        return _split(name, a, indices_or_sections, axis, equal=True)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"`split` along axis {axis}."
    return fn


vsplit = _split_at("vsplit", 0)


def hsplit(ary, indices_or_sections) -> list:
    """`split` along axis 1 (axis 0 for 1-D arrays)."""
    a = util.ensure_arraylike("hsplit", ary)
    return _split("hsplit", a, indices_or_sections, 1 if _ndim(a) > 1 else 0, equal=True)


dsplit = _split_at("dsplit", 2)


# ---------------------------------------------------------------------------------------------
# Gathering by a static index map, as slices

def _runs(index_map: np.ndarray) -> list[tuple[int, int, int]]:
    """Split a static index sequence into runs (first index, step in {-1, 0, 1}, length)."""
    runs, i, n = [], 0, len(index_map)
    while i < n:
        step = int(index_map[i + 1] - index_map[i]) if i + 1 < n else 1
        if step not in (-1, 0, 1):
            step = 1
        length = 1
        while i + length < n and index_map[i + length] - index_map[i + length - 1] == step:
            length += 1
        runs.append((int(index_map[i]), step if length > 1 else 1, length))
        i += length
    return runs


def _take_static(a, index_map, axis: int):
    """a taken at the static indices `index_map` along `axis`, built from slices."""
    pieces = []
    for first, step, length in _runs(np.asarray(index_map, dtype=np.int64)):
        if step == 1:
            piece = ls.slice_in_dim(a, first, first + length, 1, axis)
        elif step == -1:
            piece = ls.rev(ls.slice_in_dim(a, first - length + 1, first + 1, 1, axis), (axis,))
        else:
            one = ls.slice_in_dim(a, first, first + 1, 1, axis)
            target = list(_shape(one))
            target[axis] = length
            piece = lax.broadcast_in_dim(one, tuple(target), tuple(range(len(target))))
        pieces.append(piece)
    if not pieces:
        return ls.slice_in_dim(a, 0, 0, 1, axis)
    return pieces[0] if len(pieces) == 1 else ls.concatenate(pieces, axis)


# ---------------------------------------------------------------------------------------------
# Tiling, repeating, flipping, rolling

def tile(A, reps):
    """Repeat the whole array `reps` times along each axis."""
    A = util.ensure_arraylike("tile", A)
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    reps = tuple(util.static_dim(r, "reps argument of jnp.tile") for r in reps)
    nd = builtins.max(len(reps), _ndim(A))
    reps = (1,) * (nd - len(reps)) + reps
    dims = (1,) * (nd - _ndim(A)) + _shape(A)
    interleaved = tuple(x for pair in zip(reps, dims) for x in pair)
    expanded = lax.broadcast_in_dim(lax.reshape(A, dims), interleaved, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(expanded, tuple(r * d for r, d in zip(reps, dims)))


def _repeat_each(a, count, axis):
    """Every element along `axis` `count` times (an int or a symbolic dimension)."""
    dims = _shape(a)
    expanded = dims[:axis + 1] + (count,) + dims[axis + 1:]
    out = lax.broadcast_in_dim(a, expanded, tuple(i for i in range(len(expanded))
                                                  if i != axis + 1))
    return lax.reshape(out, dims[:axis] + (dims[axis] * count,) + dims[axis + 1:])


def repeat(a, repeats, axis: int | None = None, *, total_repeat_length: int | None = None):
    """Repeat each element `repeats` times along `axis` (of the flattened array if None).

    Parameters
    ----------
    a : array_like
    repeats : int or array_like of ints
        One count for every element, or one per element along `axis`. It may be traced
        when `total_repeat_length` is given.
    axis : int, optional
    total_repeat_length : int, optional
        The length of the result along `axis`: a shorter result is truncated, a longer one
        filled with the last element of `a` along `axis` (as JAX does).
    """
    a = util.ensure_arraylike("repeat", a)
    util.check_arraylike("repeat", a, repeats)  # as JAX: a list of counts is refused
    if axis is None:
        a, axis = ravel(a), 0
    axis = util.canonicalize_axis(axis, _ndim(a))
    n = _shape(a)[axis]
    if type(repeats) is export_shape_poly.DimExpr:  # one symbolic count for every element
        if total_repeat_length is not None:
            raise ValueError("jnp.repeat with a non-constant `repeats` is supported only when "
                             "`total_repeat_length` is None")
        return _repeat_each(a, repeats, axis)
    if total_repeat_length is not None:
        total_repeat_length = core.concrete_or_error(
            total_repeat_length, "The total_repeat_length argument of jnp.repeat")
        if not core.is_concrete(repeats):
            return _repeat_traced(a, repeats, axis, n, int(total_repeat_length))
    repeats = np.asarray(core.concrete_or_error(
        repeats, "The repeats argument of jnp.repeat must be concrete (or pass "
                 "total_repeat_length)"))
    if not (np.issubdtype(repeats.dtype, np.integer) or repeats.dtype == bool):
        raise TypeError(f"jnp.repeat: repeats must be integers, got dtype {repeats.dtype}")
    if np.any(repeats < 0):
        raise ValueError(f"repeats may not contain negative values, got {repeats}")
    if repeats.ndim == 0 and total_repeat_length is None:
        return _repeat_each(a, int(repeats), axis)
    if repeats.ndim and repeats.shape not in ((n,), (1,)):
        raise ValueError(f"repeats has shape {repeats.shape}, but the axis has length {n}")
    repeats = np.broadcast_to(repeats, (n,))  # one count, shape () or (1,), for every element
    if total_repeat_length is None:
        return _take_static(a, np.repeat(np.arange(n), repeats), axis)
    return _take_static(a, _repeat_sources(repeats, int(total_repeat_length)), axis)


def _repeat_sources(repeats: np.ndarray, total: int) -> np.ndarray:
    """For each of `total` output positions, the element it repeats: element i starts at
    the sum of the counts before it; positions past the last start keep the last element."""
    starts = np.cumsum(repeats)[:-1]
    marks = np.zeros(total, np.int64)
    np.add.at(marks, starts[starts < total], 1)
    return np.cumsum(marks)


def _repeat_traced(a, repeats, axis, n, total):
    """`_repeat_sources` computed on device, for counts known only at run time."""
    from fluxion._src.numpy import indexing, reductions
    counts = util.ensure_arraylike("repeat", repeats)
    if not dtypes.is_integer(_aval(counts).dtype):
        raise TypeError(f"repeats must be integers, got {_aval(counts).dtype}")
    if _ndim(counts) > 1 or (_ndim(counts) == 1 and _shape(counts)[0] not in (n, 1)):
        raise ValueError(f"repeats has shape {_shape(counts)}, but the axis has length {n}")
    if total == 0:
        return ls.slice_in_dim(a, 0, 0, 1, axis)
    if n == 0:
        raise ValueError(f"jnp.repeat: total_repeat_length={total} positions cannot be filled "
                         "from an empty axis")
    counts = lax.broadcast_in_dim(counts, (n,), () if _ndim(counts) == 0 else (0,))
    starts = ls.slice_in_dim(reductions.cumsum(counts), 0, n - 1, 1, 0)
    marks = zeros(total, np.int32).at[starts].add(1, mode="drop")
    return indexing.take(a, reductions.cumsum(marks), axis=axis)


def flip(m, axis=None):
    """Reverse the order of elements along `axis` (all axes if None)."""
    m = util.ensure_arraylike("flip", m)
    return ls.rev(m, util.canonicalize_axes(axis, _ndim(m), "jnp.flip"))


def fliplr(m):
    """Reverse the columns (axis 1)."""
    m = util.ensure_arraylike("fliplr", m)
    if _ndim(m) < 2:
        raise ValueError("Input must be >= 2-d.")
    return ls.rev(m, (1,))


def flipud(m):
    """Reverse the rows (axis 0)."""
    m = util.ensure_arraylike("flipud", m)
    if _ndim(m) < 1:
        raise ValueError("Input must be >= 1-d.")
    return ls.rev(m, (0,))


def rot90(m, k: int = 1, axes=(0, 1)):
    """Rotate by 90 degrees k times in the plane of `axes`."""
    m = util.ensure_arraylike("rot90", m)
    if _ndim(m) < 2:
        raise ValueError("rot90 requires its first argument to have ndim at least two, but got "
                         f"first argument of shape {_shape(m)}, which has ndim {_ndim(m)}")
    ax1, ax2 = (util.canonicalize_axis(x, _ndim(m)) for x in axes)
    if ax1 == ax2:
        raise ValueError("Axes must be different")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return ls.rev(m, (ax1, ax2))
    perm = list(range(_ndim(m)))
    perm[ax1], perm[ax2] = perm[ax2], perm[ax1]
    if k == 1:
        return ls.transpose(ls.rev(m, (ax2,)), tuple(perm))
    return ls.rev(ls.transpose(m, tuple(perm)), (ax2,))


def _roll_one(a, shift, axis):
    n = _shape(a)[axis]
    if n == 0:
        return a
    if core.is_concrete(shift) and not isinstance(n, export_shape_poly.DimExpr):
        s = operator.index(core.concrete_or_error(shift, "")) % n
        return _take_static(a, (np.arange(n) - s) % n, axis)
    # A traced shift: take a window of the array concatenated with itself.
    shift = util.convert(shift, dtypes.int32)
    n_value = lax._convert_element_type(n, dtypes.int32, False)
    start = lax.sub(n_value, ufuncs.remainder(shift, n_value))
    return ls.dynamic_slice_in_dim(ls.concatenate([a, a], axis), start, n, axis)


def _shift_values(shift) -> tuple:
    """A scalar shift, or the elements of a 1-D shift array (host or traced), as a tuple."""
    ndim = np.ndim(shift)
    if ndim > 1:
        raise ValueError(f"roll: shift must be a scalar or 1-D, got shape {np.shape(shift)}")
    return (shift,) if ndim == 0 else tuple(shift[i] for i in range(np.shape(shift)[0]))


def roll(a, shift, axis=None):
    """Shift elements cyclically by `shift` along `axis` (of the flattened array if None)."""
    a = util.ensure_arraylike("roll", a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), _shape(a))
    shifts = shift if isinstance(shift, (tuple, list)) else _shift_values(shift)
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError("'shift' and 'axis' must have the same length")
    for s, ax in zip(shifts, axes):
        a = _roll_one(a, s, util.canonicalize_axis(ax, _ndim(a)))
    return a


# ---------------------------------------------------------------------------------------------
# Broadcasting

def broadcast_to(array, shape):
    """Broadcast `array` to `shape` with NumPy's rules."""
    return util.broadcast_to(util.ensure_arraylike("broadcast_to", array), shape)


def broadcast_arrays(*args) -> list:
    """Broadcast the arguments against each other."""
    util.check_arraylike("broadcast_arrays", *args)
    return util.broadcast_arrays(*args)


def broadcast_shapes(*shapes) -> tuple:
    """The shape that arrays of the given shapes broadcast to."""
    return util.broadcast_shapes(*(util.canonicalize_shape(s) for s in shapes))


# ---------------------------------------------------------------------------------------------
# Padding

def _pad_widths(pad_width, nd) -> list[tuple[int, int]]:
    if builtins.any(type(w) is export_shape_poly.DimExpr for w in tree_util.tree_leaves(
            pad_width)):
        return _symbolic_pad_widths(pad_width, nd)
    widths = np.asarray(core.concrete_or_error(pad_width, "The pad_width argument of jnp.pad"))
    if widths.dtype.kind not in "iub":
        raise TypeError(f"`pad_width` must be of integral type, got {pad_width!r}")
    widths = _pad_pairs(widths, nd, "pad_width")
    if np.any(widths < 0):
        raise ValueError("index can't contain negative values")
    return [(int(lo), int(hi)) for lo, hi in widths]


def _symbolic_pad_widths(pad_width, nd, name: str = "pad_width") -> list:
    """(before, after) per axis from widths among which are symbolic dimensions: one pair
    per axis, or one pair (or one width) for all axes."""
    def pair(p):
        p = tuple(p) if isinstance(p, (list, tuple)) else (p, p)
        if len(p) == 1:
            p = (p[0], p[0])
        return p
    if not isinstance(pad_width, (list, tuple)) or not builtins.any(
            isinstance(p, (list, tuple)) for p in pad_width):
        pairs = [pair(pad_width)] * nd
    else:
        pairs = [pair(p) for p in pad_width]
        pairs = pairs * nd if len(pairs) == 1 else pairs
    if len(pairs) != nd or builtins.any(len(p) != 2 for p in pairs):
        raise ValueError(f"jnp.pad: {name} {pad_width} does not give (before, after) for "
                         f"each of the {nd} axes")
    for p in pairs:
        for w in p:
            if type(w) is not export_shape_poly.DimExpr:
                operator.index(w)
            if w < 0:
                raise ValueError("index can't contain negative values")
    return pairs


def _pad_constant(a, widths, constant_values):
    dtype = _aval(a).dtype
    if np.ndim(constant_values) == 0:
        fill = util.scalar_like(a, constant_values)
        return ls.pad(a, fill, [(lo, hi, 0) for lo, hi in widths])
    values = _pad_pairs(constant_values, _ndim(a), "constant_values")
    # Like NumPy, pad one axis at a time, so later axes' values fill the corners.
    for axis, ((lo, hi), (v_lo, v_hi)) in enumerate(zip(widths, values)):
        for side, (amount, value) in enumerate(((lo, v_lo), (hi, v_hi))):
            if amount:
                config = [(0, 0, 0)] * _ndim(a)
                config[axis] = (0, amount, 0) if side else (amount, 0, 0)
                a = ls.pad(a, util.scalar_like(a, value), config)
    return a


def _check_axis_extendable(a, axis, lo, hi):
    if (lo or hi) and _shape(a)[axis] == 0:
        raise ValueError(f"can't extend empty axis {axis} using modes other than 'constant' "
                         "or 'empty'")


def _edge(a, axis, first: bool):
    n = _shape(a)[axis]
    return ls.slice_in_dim(a, 0, 1, 1, axis) if first else ls.slice_in_dim(a, n - 1, n, 1, axis)


def _pad_odd_reflection(a, axis, lo, hi, mode):
    """Odd reflection (2 * edge - mirror image), one period of the original axis at a time,
    each period mirrored about the edge the previous one left."""
    n = _shape(a)[axis]
    offset = 1 if mode == "reflect" else 0
    for first, amount in ((True, lo), (False, hi)):
        edge = _edge(a, axis, first)
        while amount > 0:
            chunk = min(amount, n - offset)
            amount -= chunk
            m = _shape(a)[axis]
            if first:
                piece = ls.slice_in_dim(a, offset, offset + chunk, 1, axis)
            else:
                piece = ls.slice_in_dim(a, m - offset - chunk, m - offset, 1, axis)
            piece = ufuncs.subtract(ufuncs.multiply(2, edge), ls.rev(piece, (axis,)))
            edge = _edge(piece, axis, first)
            a = ls.concatenate([piece, a] if first else [a, piece], axis)
    return a


def _pad_edge_symbolic(a, axis, lo, hi):
    """Mode 'edge' where the axis or its widths are symbolic: each edge broadcast."""
    return ls.concatenate([_along(_edge(a, axis, True), a, axis, lo), a,
                           _along(_edge(a, axis, False), a, axis, hi)], axis)


def _pad_wrap_symbolic(a, axis, lo, hi):
    """Mode 'wrap' where the axis or its widths are symbolic: whole copies of the axis and
    the remainders' slices, as JAX builds it (a remainder or a count of copies that the
    dimensions do not decide raises InconclusiveDimensionOperation)."""
    n = _shape(a)[axis]
    copies_lo, rest_lo = divmod(lo, n)
    copies_hi, rest_hi = divmod(hi, n)
    parts = []
    if rest_lo > 0:
        parts.append(ls.slice_in_dim(a, n - rest_lo, n, 1, axis))
    parts += [a] * operator.index(copies_lo + copies_hi + 1)
    if rest_hi > 0:
        parts.append(ls.slice_in_dim(a, 0, rest_hi, 1, axis))
    return ls.concatenate(parts, axis)


def _check_one_reflection(n, amount, offset, axis, first, mode):
    """A symbolic axis (or width) reflects in one piece only: JAX's ValueError unless the
    dimensions show that the axis is longer than 1 and holds the whole width."""
    try:
        decided = n > 1 and n - offset >= amount
    except export_shape_poly.InconclusiveDimensionOperation:
        decided = False
    if not decided:
        raise ValueError(
            f"Shape polymorphism is supported for jnp.pad with 'reflect' or 'symmetric' "
            f"padding mode only when it is possible to determine at lowering time that the "
            f"axis size (= {n}) is larger than 1 and larger or equal than the padding length "
            f"(= {amount}). Error while handling {'left' if first else 'right'} padding on "
            f"axis {axis} (mode {mode!r}).")


def _pad_reflection_symbolic(a, axis, lo, hi, mode, reflect_type):
    """Modes 'reflect' and 'symmetric' where the axis or its widths are symbolic: one
    mirrored slice per side (odd reflection: 2 * edge minus it)."""
    n = _shape(a)[axis]
    offset = 1 if mode == "reflect" else 0
    for first, amount in ((True, lo), (False, hi)):
        _check_one_reflection(n, amount, offset, axis, first, mode)
        m = _shape(a)[axis]
        start = offset if first else m - offset - amount
        piece = ls.rev(ls.slice_in_dim(a, start, start + amount, 1, axis), (axis,))
        if reflect_type == "odd":
            piece = ufuncs.subtract(ufuncs.multiply(2, _edge(a, axis, first)), piece)
        a = ls.concatenate([piece, a] if first else [a, piece], axis)
    return a


def _pad_by_index_map(a, widths, mode, reflect_type):
    for axis, (lo, hi) in enumerate(widths):
        if not lo and not hi:
            continue
        _check_axis_extendable(a, axis, lo, hi)
        n = _shape(a)[axis]
        if export_shape_poly.is_symbolic_shape((n, lo, hi)):
            if mode == "edge":
                a = _pad_edge_symbolic(a, axis, lo, hi)
            elif mode == "wrap":
                a = _pad_wrap_symbolic(a, axis, lo, hi)
            else:
                a = _pad_reflection_symbolic(a, axis, lo, hi, mode, reflect_type)
        elif reflect_type == "odd" and mode in ("reflect", "symmetric") and n > 1:
            a = _pad_odd_reflection(a, axis, lo, hi, mode)
        else:
            a = _take_static(a, np.pad(np.arange(n), (lo, hi), mode=mode), axis)
    return a


def _pad_pairs(values, nd: int, name: str) -> np.ndarray:
    """A concrete (before, after) pair per axis, from a scalar, one pair, or one per axis."""
    arr = np.asarray(core.concrete_or_error(values, f"The {name} argument of jnp.pad"))
    try:
        return np.broadcast_to(arr, (nd, 2))
    except ValueError:
        raise ValueError(f"jnp.pad: {name} with shape {arr.shape} cannot be broadcast to "
                         f"({nd}, 2) for an array of rank {nd}") from None


def _along(value, a, axis, count):
    """`value` (of extent 1 along `axis`) repeated `count` times along it."""
    target = list(_shape(value))
    target[axis] = count
    return lax.broadcast_in_dim(value, tuple(target), tuple(range(len(target))))


def _has_tracer(x) -> bool:
    if isinstance(x, (list, tuple)):
        return builtins.any(_has_tracer(v) for v in x)
    return isinstance(x, core.Tracer)


def _pad_end_values(end_values, nd: int) -> list:
    """linear_ramp's end values as a (before, after) pair of scalars per axis.

    Traced end values stay traced, so that their derivatives reach the ramps (taking their
    concrete value under jvp/grad would silently drop them).
    """
    if not _has_tracer(end_values):
        return [[v.item() for v in pair] for pair in _pad_pairs(end_values, nd, "end_values")]
    ends = asarray(end_values)
    try:
        ends = util.broadcast_to(ends, (nd, 2))
    except ValueError:
        raise ValueError(f"jnp.pad: end_values with shape {_shape(ends)} cannot be broadcast "
                         f"to ({nd}, 2) for an array of rank {nd}") from None
    return [[ends[axis, side] for side in range(2)] for axis in range(nd)]


def _pad_linear_ramp(a, widths, end_values):
    from fluxion._src.numpy.creation import linspace
    aval = _aval(a)
    ends = _pad_end_values(end_values, aval.ndim)
    for axis, (lo, hi) in enumerate(widths):
        _check_axis_extendable(a, axis, lo, hi)
        parts = []
        for first, amount, end in ((True, lo, ends[axis][0]), (False, hi, ends[axis][1])):
            edge = squeeze(_edge(a, axis, first), axis)
            ramp = linspace(end, edge, amount, endpoint=False, dtype=aval.dtype,
                            axis=axis)
            ramp = lax._convert_element_type(ramp, aval.dtype, aval.weak_type)
            parts.append(ramp if first else ls.rev(ramp, (axis,)))
        a = ls.concatenate([parts[0], a, parts[1]], axis)
    return a


def _stat_lengths(stat_length, nd):
    """The statistic modes' (before, after) lengths per axis (None: the whole axis); they may
    be symbolic dimensions, as in JAX."""
    if stat_length is None:
        return None
    if builtins.any(type(v) is export_shape_poly.DimExpr
                    for v in tree_util.tree_leaves(stat_length)):
        return _symbolic_pad_widths(stat_length, nd, "stat_length")
    lengths = _pad_pairs(stat_length, nd, "stat_length")
    if not np.issubdtype(lengths.dtype, np.integer):
        raise TypeError(f"jnp.pad: stat_length must be integers, got {stat_length}")
    if np.any(lengths < 0):
        raise ValueError("index can't contain negative values")
    return [(int(lo), int(hi)) for lo, hi in lengths]


def _pad_statistic(a, widths, stat_length, mode):
    from fluxion._src.numpy import reductions, statistics
    stat = {"maximum": reductions.max, "minimum": reductions.min, "mean": reductions.mean,
            "median": statistics.median}[mode]
    aval = _aval(a)
    lengths = _stat_lengths(stat_length, aval.ndim)
    for axis, (lo, hi) in enumerate(widths):
        if lengths is not None and (lengths[axis][0] == 0 or lengths[axis][1] == 0):
            raise ValueError("stat_length of 0 yields no value for padding")
        if not lo and not hi:
            continue
        _check_axis_extendable(a, axis, lo, hi)
        n = _shape(a)[axis]
        if lengths is None:
            before = after = stat(a, axis=axis, keepdims=True)
        else:
            nb, na = min(lengths[axis][0], n), min(lengths[axis][1], n)
            before = stat(ls.slice_in_dim(a, 0, nb, 1, axis), axis=axis, keepdims=True)
            after = stat(ls.slice_in_dim(a, n - na, n, 1, axis), axis=axis, keepdims=True)
        if dtypes.is_integer(aval.dtype):  # the mean or median of integers, rounded
            before, after = ufuncs.round(before), ufuncs.round(after)
        before, after = (lax._convert_element_type(v, aval.dtype, aval.weak_type)
                         for v in (before, after))
        a = ls.concatenate([_along(before, a, axis, lo), a, _along(after, a, axis, hi)], axis)
    return a


def _pad_with_function(a, widths, func, kwargs):
    """NumPy's callable mode: `func(vector, (before, after), axis, kwargs)` returns each
    zero-padded vector along each axis with its padding filled in."""
    from fluxion._src.numpy.array_edits import apply_along_axis
    padded = _pad_constant(a, widths, 0)
    for axis in range(_ndim(padded)):
        padded = apply_along_axis(func, axis, padded, widths[axis], axis, kwargs)
    return padded


_PAD_MODES = {"constant": {"constant_values"}, "empty": set(), "edge": set(), "wrap": set(),
              "reflect": {"reflect_type"}, "symmetric": {"reflect_type"},
              "linear_ramp": {"end_values"}, "maximum": {"stat_length"},
              "minimum": {"stat_length"}, "mean": {"stat_length"}, "median": {"stat_length"}}


def pad(array, pad_width, mode="constant", **kwargs):
    """Pad an array, as `numpy.pad`.

    Parameters
    ----------
    array : array_like
    pad_width : int or sequence
        Widths ``((before, after), ...)`` per axis, one pair for all axes, or one int.
    mode : str or callable
        'constant' (``constant_values``, default 0), 'empty' (zeros), 'edge', 'wrap',
        'reflect' and 'symmetric' (``reflect_type`` 'even' or 'odd'), 'linear_ramp'
        (``end_values``), 'maximum', 'minimum', 'mean', 'median' (``stat_length``), or a
        function ``f(vector, iaxis_pad_width, iaxis, kwargs)`` returning the padded vector.
    """
    array = util.ensure_arraylike("pad", array)
    widths = _pad_widths(pad_width, _ndim(array))
    if callable(mode):
        return _pad_with_function(array, widths, mode, kwargs)
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unimplemented padding mode '{mode}' for np.pad.")
    unexpected = set(kwargs) - _PAD_MODES[mode]
    if unexpected:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {unexpected}")
    if mode in ("constant", "empty"):
        return _pad_constant(array, widths, kwargs.get("constant_values", 0))
    if _ndim(array) == 0:
        return array
    if mode == "linear_ramp":
        return _pad_linear_ramp(array, widths, kwargs.get("end_values", 0))
    if mode in ("maximum", "minimum", "mean", "median"):
        return _pad_statistic(array, widths, kwargs.get("stat_length"), mode)
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    return _pad_by_index_map(array, widths, mode, reflect_type)


# ---------------------------------------------------------------------------------------------
# Sorting

def _sort_axis(name, arr, axis, kind, order):
    if kind is not None:
        raise TypeError(f"'kind' argument to {name} is not supported. Use stable=True or "
                        f"stable=False to specify sort stability.")
    if order is not None:
        raise TypeError(f"'order' argument to {name} is not supported.")
    if axis is None:
        return ravel(arr), 0
    return arr, util.canonicalize_axis(axis, _ndim(arr))


def sort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
         descending: bool = False):
    """Sorted copy along `axis` (of the flattened array if None); NaNs sort last."""
    arr, axis = _sort_axis("sort", util.ensure_arraylike("sort", a), axis, kind, order)
    result = sorting.sort(arr, dimension=axis, is_stable=stable)
    return ls.rev(result, (axis,)) if descending else result


def argsort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
            descending: bool = False, dtype=None):
    """Indices that sort `a` along `axis`; a stable sort keeps equal elements in order."""
    arr, axis = _sort_axis("argsort", util.ensure_arraylike("argsort", a), axis, kind, order)
    index_dtype = user_dtype(dtype, "argsort") if dtype is not None else dtypes.default_int_dtype()
    # laid out as `arr` on Explicit mesh axes (sort wants its operands sharded alike), as JAX
    from fluxion._src.sharded_jit import sharding_like
    indices = sharding_like(ls.broadcasted_iota(index_dtype, _shape(arr), axis), arr)
    if descending and stable:
        # Reversing first keeps equal elements in their original order after the final reversal.
        arr, indices = ls.rev(arr, (axis,)), ls.rev(indices, (axis,))
    _, perm = sorting.sort_key_val(arr, indices, dimension=axis, is_stable=stable)
    return ls.rev(perm, (axis,)) if descending else perm


# ---------------------------------------------------------------------------------------------
# Conversion helpers

def astype(x, dtype, /, *, copy: bool = False, device=None):
    """`x` converted to `dtype` (complex to real keeps the real part); with `copy`, a new
    buffer even when the dtype is x's."""
    x = util.ensure_arraylike("astype", x)
    out = util.convert(x, user_dtype(dtype, "astype"))
    if copy and out is x:
        from fluxion._src.numpy.creation import array
        return array(out, copy=True)
    return out


def copy(a, order=None):
    """A copy of `a`, in a buffer of its own (donating `a` leaves the copy intact)."""
    from fluxion._src.numpy.creation import array
    return array(util.ensure_arraylike("copy", a), copy=True)


# Outside any transformation these run as one cached executable per signature (numpy/eager.py),
# as JAX jits its jnp functions: a roll, sort or tile is several primitives, and even a lone
# reshape pays less this way than through its Python checks. Not here: those with `device` /
# `out_sharding` placements.
def _compile_eager_calls():
    from fluxion._src.numpy.eager import compile_eagerly
    compile_eagerly(globals(), {"pad": ("pad_width", "mode", "stat_length", "reflect_type")},
                    names=("pad", 
        "roll", "sort", "argsort", "tile", "split", "array_split", "hsplit", "vsplit", "dsplit",
        "flip", "fliplr", "flipud", "rot90", "repeat", "squeeze", "expand_dims", "moveaxis",
        "swapaxes", "transpose", "permute_dims", "matrix_transpose", "ravel", "broadcast_to",
        "concatenate", "concat", "append", "broadcast_arrays", "atleast_1d", "atleast_2d",
        "atleast_3d"), static_parameters=frozenset({
            "axis", "axes", "k", "shape", "reps", "indices_or_sections", "source", "destination",
            "axis1", "axis2", "order", "kind", "stable", "descending", "dtype", "repeats",
            "total_repeat_length"}))


_compile_eager_calls()
