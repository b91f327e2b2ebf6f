"""Array creation: array/asarray, filled arrays, ranges, and matrices built from iotas."""
from __future__ import annotations

import functools
import warnings

import numpy as np

from fluxion._src.export.shape_poly import DimExpr
from fluxion._src import core, dtypes, placement
from fluxion._src.array import Array, duplicate
from fluxion._src.lax import lax
from fluxion._src.lax import structural
from fluxion._src.numpy import ufuncs, util
from fluxion._src.numpy.eager import eager_compiled
from fluxion._src.numpy.util import canonicalize_shape
from fluxion._src.sharding_types import (accepts_out_sharding, current_abstract_mesh,
                                         has_explicit_axes)
from fluxion._src.traceback_util import user_stacklevel


def user_dtype(dtype, fun_name: str = "") -> np.dtype | None:
    """A dtype argument (None, a dtype, a scalar type or Python type) as a canonical dtype
    (an explicit 64-bit dtype with x64 disabled warns, naming `fun_name`, as in JAX)."""
    if dtype is None:
        return None
    return dtypes.check_user_dtype(dtype, fun_name.removeprefix("jnp."))


def _with_device(fun):
    """Give `fun`'s `device=` (a device or sharding) its meaning: the result is put there,
    committed (`fluxion.device_put`); without it the result is on the default device."""
    @functools.wraps(fun)
    def wrapped(*args, device=None, **kwargs):
        out = fun(*args, **kwargs)
        if device is None:
            return out
        from fluxion._src.api import device_put
        return device_put(out, device)
    return wrapped


# ---------------------------------------------------------------------------------------------
# array / asarray

def _leaves(obj) -> list:
    if isinstance(obj, (list, tuple)):
        return [leaf for item in obj for leaf in _leaves(item)]
    return [obj]


def _dims_as_values(seq):
    """`seq` with its symbolic dimensions (`jnp.array(x.shape)`) as their values."""
    if isinstance(seq, (list, tuple)):
        return type(seq)(_dims_as_values(item) for item in seq)
    if type(seq) is DimExpr:
        from fluxion._src.export.shape_poly import dimension_as_value
        return dimension_as_value(seq)
    return seq


def _sequence_to_array(seq, dtype):
    if any(type(leaf) is DimExpr for leaf in _leaves(seq)):
        seq = _dims_as_values(seq)
    leaves = _leaves(seq)
    if any(leaf is None for leaf in leaves):
        raise ValueError("None is not a valid value for jnp.array")  # JAX's class and words
    util.check_arraylike("array", *leaves)
    if dtype is None:
        dtype = dtypes.result_type(*leaves) if leaves else dtypes.default_float_dtype()
    # Python ints must fit the array's dtype when it is an integer type (uint32 max may be
    # listed for a uint32 array; [2**33, 1.0] is a float array), as in JAX.
    if dtypes.is_integer(dtype):
        for leaf in leaves:
            if type(leaf) is int:
                _check_int_fits(leaf, dtypes.canonicalize_dtype(dtype))
    if any(isinstance(leaf, core.Tracer) for leaf in leaves) or (
            placement.active and any(type(leaf) is Array and leaf.committed for leaf in leaves)):
        # traced or committed elements: stacked by fluxion (on the committed device)
        from fluxion._src.numpy.manipulation import stack
        # (stacking makes the new array: the elements need no copy of their own, as in JAX)
        return stack([array(item, dtype=dtype, copy=False) for item in seq])
    return lax._convert_element_type(np.array(seq, dtype=dtype), dtype, False)


def _numeric_host_array(obj) -> np.ndarray:
    """What NumPy makes of `obj` (a range, a memoryview, ...) when that is numeric, as JAX
    takes them; TypeError for strings, bytes, dicts, generators and the like."""
    if not isinstance(obj, (str, bytes, dict)):
        try:
            value = np.asarray(obj)
        except (TypeError, ValueError):
            value = None
        if value is not None and value.dtype in dtypes.SUPPORTED_DTYPES:
            return value
    raise TypeError(f"Unexpected input type for array: {type(obj)}; only numeric values can "
                    "become arrays")


def _check_int_fits(value: int, dtype) -> None:
    info = dtypes.iinfo(dtype)  # ml_dtypes' iinfo also knows int2 and int4
    if not info.min <= value <= info.max:
        raise OverflowError(f"Python integer {value} out of bounds for {np.dtype(dtype).name}")


class _Unset:
    """The default of a keyword that may also come positionally (to tell the two apart)."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return repr(self.value)


@accepts_out_sharding
@_with_device
def array(object, dtype=None, *args, copy: bool = _Unset(True), order: str | None = _Unset("K"),
          ndmin: int = _Unset(0), device=None):
    """Create an array from an array, a scalar, or (nested) lists and tuples of them.

    Python scalars give weakly typed arrays; lists take the promoted dtype of their elements.
    With `copy` (the default) an Array gets a buffer of its own. Passing copy, order and ndmin
    positionally is deprecated (as in JAX).
    """
    keywords = {"copy": copy, "order": order, "ndmin": ndmin}
    if args:
        if len(args) > 3:
            raise TypeError(f"array() takes at most 5 positional arguments but "
                            f"{2 + len(args)} were given")
        for name in list(keywords)[:len(args)]:
            if not isinstance(keywords[name], _Unset):
                raise TypeError(f"array() got multiple values for argument '{name}'")
        warnings.warn("Passing the copy, order, and ndmin arguments to jnp.array positionally is "
                      "deprecated. Use keyword arguments instead.", DeprecationWarning,
                      stacklevel=user_stacklevel())
        keywords.update(zip(keywords, args))
    copy, order, ndmin = (v.value if isinstance(v, _Unset) else v for v in keywords.values())
    if order is not None and order not in ("K", "C"):
        raise NotImplementedError(f"array: only order='K' and 'C' are supported, got {order!r}")
    if hasattr(object, "__jax_array__"):
        object = object.__jax_array__()
    if object is None:
        raise ValueError("None is not a valid value for jnp.array")  # JAX's class and words
    if copy and isinstance(object, np.ma.MaskedArray):
        object = np.asarray(object)  # its data, as JAX's copy takes it (asarray refuses it)
    dtype = user_dtype(dtype, "array")
    if dtype == dtypes.float0 and not isinstance(object, (Array, core.Tracer)):
        return np.array(object, dtype=dtypes.float0)  # no data: NumPy's, as JAX's (XLA has none)
    weak = dtype is None and dtypes.is_weakly_typed(object)
    if isinstance(object, (Array, core.Tracer)):
        out = object
        if copy and type(out) is Array:
            # a copy is made where computations run, in a buffer of its own
            moved = placement.to_default_device(out) if placement.active else out
            out = moved if moved is not out else duplicate(out)
        elif copy:
            from fluxion._src.lax.jax_names import copy_p
            out = copy_p.bind(out)  # a new value under jvp/vmap too (JAX's copy_p)
    elif isinstance(object, (list, tuple)):
        out = _sequence_to_array(object, dtype)
    elif util.is_arraylike(object):
        if type(object) is int and dtype is not None:
            # Checked against the requested dtype, not the default int: uint32 max is fine.
            if dtypes.is_integer(dtype):
                _check_int_fits(object, dtype)
            out = lax._convert_element_type(object, dtype, False)
        else:
            out = util.as_array(object)
    elif hasattr(object, "__array__"):
        out = util.as_array(np.asarray(object))
    else:
        out = util.as_array(_numeric_host_array(object))
    out = lax._convert_element_type(out, dtype or core.get_aval(out).dtype, weak)
    ndim = core.get_aval(out).ndim
    if ndmin > ndim:
        out = lax.reshape(out, (1,) * (ndmin - ndim) + core.get_aval(out).shape)
    return out


@accepts_out_sharding
def asarray(a, dtype=None, order: str | None = None, *, copy: bool | None = None, device=None):
    """Convert `a` to an array without copying when it already is one (see `array`)."""
    return array(a, dtype=dtype, copy=bool(copy), order=order, device=device)


# ---------------------------------------------------------------------------------------------
# Filled arrays

def _filled(shape, value, dtype, weak_type: bool = False):
    if dtype == dtypes.float0:  # no data: a NumPy array, as JAX's (XLA has no float0)
        return np.zeros(shape, dtypes.float0)
    scalar = lax._convert_element_type(value, dtype, weak_type)
    return lax.broadcast_in_dim(scalar, shape, ())


def _check_shape_arg(name: str, shape) -> tuple:
    if isinstance(shape, (list, tuple)) or util.is_arraylike(shape):
        return canonicalize_shape(shape, f"The shape argument of jnp.{name}")
    raise TypeError(f"{name} requires a shape (an int or a sequence of ints), got {shape!r}")


def _shape_and_dtype(name: str, shape, dtype):
    """The shape and dtype arguments of zeros/ones/empty; an int dtype after an int shape was
    probably meant as part of the shape, which JAX's error says."""
    shape = _check_shape_arg(name, shape)
    try:
        return shape, user_dtype(dtype, name) or dtypes.default_float_dtype()
    except TypeError as e:
        if type(dtype) in (int, bool) and len(shape) == 1:
            raise TypeError(f"{e}.\n\nDid you accidentally write `jax.numpy.{name}"
                            f"({shape[0]}, {dtype})` when you meant `jax.numpy.{name}"
                            f"(({shape[0]}, {dtype}))`, i.e. with a single tuple argument for "
                            "the shape?") from None
        raise


@accepts_out_sharding
@_with_device
def zeros(shape, dtype=None, *, device=None):
    """An array of zeros (dtype defaults to the default float type)."""
    shape, dtype = _shape_and_dtype("zeros", shape, dtype)
    return _filled(shape, 0, dtype)


@accepts_out_sharding
@_with_device
def ones(shape, dtype=None, *, device=None):
    """An array of ones (dtype defaults to the default float type)."""
    shape, dtype = _shape_and_dtype("ones", shape, dtype)
    return _filled(shape, 1, dtype)


@accepts_out_sharding
@_with_device
def empty(shape, dtype=None, *, device=None):
    """An array of the given shape; XLA has no uninitialized memory, so it holds zeros."""
    shape, dtype = _shape_and_dtype("empty", shape, dtype)
    return _filled(shape, 0, dtype)


@accepts_out_sharding
@_with_device
def full(shape, fill_value, dtype=None, *, device=None):
    """An array of `shape` filled with `fill_value` (broadcast if it is an array)."""
    shape = _check_shape_arg("full", shape)
    if type(fill_value) is int:
        # Converted straight to `dtype` (uint32 max fits a uint32 array; a too large int wraps),
        # as JAX's lax.full does.
        return _filled(shape, fill_value, user_dtype(dtype, "full") or dtypes.default_int_dtype(),
                       dtype is None)
    fill = util.ensure_arraylike("full", fill_value)
    if np.ndim(fill) == 0:
        weak = dtype is None and dtypes.is_weakly_typed(fill_value)
        dtype = user_dtype(dtype, "full") or core.get_aval(fill).dtype
        return _filled(shape, fill, dtype, weak)
    return util.broadcast_to(asarray(fill, dtype=dtype), shape)


def _is_duck_typed(a) -> bool:
    """An object that is no array but has `shape` and `dtype` (a ShapeDtypeStruct, ...)."""
    return not util.is_arraylike(a) and hasattr(a, "shape") and hasattr(a, "dtype")


def _like_aval(name, a) -> core.ShapedArray:
    """The shape, dtype and weak type that `a` (an array or a duck-typed one) lends."""
    if _is_duck_typed(a):
        return core.ShapedArray(tuple(a.shape), dtypes.canonicalize_dtype(a.dtype),
                                weak_type=bool(getattr(a, "weak_type", False)))
    util.check_arraylike(name, a)
    return core.get_aval(util.as_array(a))


def _like(name, a, fill_value, dtype, shape):
    aval = _like_aval(name, a)
    weak = dtype is None and aval.weak_type
    dtype = user_dtype(dtype, name) or aval.dtype
    shape = aval.shape if shape is None else canonicalize_shape(shape)
    out = _filled(shape, fill_value, dtype, weak)
    sharding = getattr(a, "_sharding", None)  # a global Array's
    if shape == aval.shape and has_explicit_axes(getattr(sharding, "mesh", None)):
        from fluxion._src.sharded_jit import reshard
        return reshard(out, sharding)  # like `a`, as its type says (JAX's rule)
    if shape == aval.shape and isinstance(a, core.Tracer) and has_explicit_axes(
            current_abstract_mesh()):
        from fluxion._src.sharded_jit import sharding_like
        return sharding_like(out, a)  # traced: typed like `a` on Explicit axes too
    return placement.place_like(out, a, weak)  # on a's devices, when a is committed there


@accepts_out_sharding
@_with_device
def zeros_like(a, dtype=None, shape=None, *, device=None):
    """Zeros with the shape and dtype (and weak type) of `a`."""
    return _like("zeros_like", a, 0, dtype, shape)


@accepts_out_sharding
@_with_device
def ones_like(a, dtype=None, shape=None, *, device=None):
    """Ones with the shape and dtype (and weak type) of `a`."""
    return _like("ones_like", a, 1, dtype, shape)


@_with_device
def empty_like(prototype, dtype=None, shape=None, *, device=None):
    """Like `zeros_like` (XLA has no uninitialized memory)."""
    return _like("empty_like", prototype, 0, dtype, shape)


@accepts_out_sharding
@_with_device
def full_like(a, fill_value, dtype=None, shape=None, *, device=None):
    """`fill_value` broadcast to the shape of `a`, in a's dtype unless `dtype` is given."""
    if type(fill_value) is int or _is_duck_typed(a):
        # A Python int is converted straight to the result dtype, as in `full`.
        fill = fill_value if type(fill_value) is int else util.ensure_arraylike(
            "full_like", fill_value)
        if np.ndim(fill) == 0:
            return _like("full_like", a, fill, dtype, shape)
        aval = _like_aval("full_like", a)
        return util.broadcast_to(asarray(fill, dtype=user_dtype(dtype, "full_like") or aval.dtype),
                                 aval.shape if shape is None else canonicalize_shape(shape))
    a, fill = util.ensure_arraylike("full_like", a, fill_value)
    if np.ndim(fill) == 0:
        return _like("full_like", a, fill, dtype, shape)
    aval = core.get_aval(a)
    shape = aval.shape if shape is None else canonicalize_shape(shape)
    fill_dtype = user_dtype(dtype, "full_like") or aval.dtype
    return util.broadcast_to(asarray(fill, dtype=fill_dtype), shape)


# ---------------------------------------------------------------------------------------------
# Ranges

def iota(dtype, shape, dimension: int):
    """Indices along `dimension`, broadcast to `shape`."""
    return structural.broadcasted_iota(dtype, tuple(shape), dimension)


@accepts_out_sharding
@_with_device
def arange(start, stop=None, step=None, dtype=None, *, device=None):
    """Evenly spaced values in [start, stop) (all arguments must be concrete).

    The dtype is the promoted dtype of the arguments (`arange(5)` is int32, `arange(5.)`
    float32) unless `dtype` is given.
    """
    if DimExpr in (type(start), type(stop), type(step)):
        return _symbolic_arange(start, stop, step, user_dtype(dtype, "arange")
                                if dtype is not None else dtypes.default_int_dtype())
    for name, value in (("start", start), ("stop", stop), ("step", step)):
        if value is not None:
            util.check_arraylike("arange", value)
            core.concrete_or_error(value, f"It arose in the jnp.arange argument '{name}'")
    start, stop, step = (v if not isinstance(v, core.Tracer) else v.to_concrete_value()
                         for v in (start, stop, step))
    if any(v is not None and dtypes.is_complex(dtypes.dtype(v)) for v in (start, stop, step)):
        raise ValueError("Passing complex start/stop/step to jnp.arange is no longer supported "
                         "starting in JAX v0.10.0.")
    if dtype is None:
        dtype = dtypes.result_type(*(v for v in (start, stop, step) if v is not None))
    dtype = user_dtype(dtype, "arange")
    if stop is None and step is None:
        return iota(dtype, (_iota_length(start),), 0)
    if step is None and _is_zero(start):
        return iota(dtype, (_iota_length(stop),), 0)
    if step is None:
        values = np.arange(_host(start), _host(stop), dtype=_host_arange_dtype(dtype))
        return lax._convert_element_type(values.astype(dtype), dtype, False)
    return _stepped_arange(*((0, start) if stop is None else (start, stop)), step, dtype)


def _stepped_arange(start, stop, step, dtype):
    """start + step * i for i < ceil((stop - start) / step), counted in `dtype` (float32 for
    narrower floats) as JAX counts: an integer dtype truncates the step first, and float
    values are what the device's multiply-add gives (NumPy's arange counts otherwise)."""
    working = dtype
    if dtypes.is_float(dtype) and dtypes.finfo(dtype).bits < 32:
        working = np.dtype(np.float32)
    size = max(0, int(np.ceil((_host(stop) - _host(start)) / _host(step))))
    values = lax.add(lax._convert_element_type(start, working, False),
                     lax.mul(lax._convert_element_type(step, working, False),
                             iota(working, (size,), 0)))
    return lax._convert_element_type(values, dtype, False)


def _symbolic_arange(start, stop, step, dtype):
    """arange with a symbolic dimension among its bounds: start + step * iota of a size that
    is a dimension expression (the step's sign must be decidable), as in JAX."""
    from fluxion._src.export import shape_poly
    start, stop = (0, start) if stop is None else (start, stop)
    step = 1 if step is None else step
    if not all(type(v) is DimExpr or isinstance(v, (int, np.integer)) for v in (start, stop, step)):
        raise ValueError("In arange with non-constant arguments all of start, stop, and step "
                         "must be either dimension expressions or integers: "
                         f"start={start}, stop={stop}, step={step}")
    if step == 0:
        raise ValueError("arange has step == 0")
    try:
        positive = step > 0
    except shape_poly.InconclusiveDimensionOperation as e:
        raise shape_poly.InconclusiveDimensionOperation(
            f"In arange with non-constant arguments the step ({step}) must be resolved "
            f"statically if it is > 0 or < 0.\nDetails: {e}") from None
    gap, distance = (step, stop - start) if positive else (-step, start - stop)
    size = shape_poly.max_dim(0, distance + gap - 1) // gap
    def value(v):
        return lax.convert_element_type(shape_poly.dimension_as_value(v), dtype)
    return lax.add(value(start), lax.mul(value(step), iota(dtype, (size,), 0)))


def _host_arange_dtype(dtype):
    """The NumPy dtype to count in (steps of 1): integers in int64, then wrapped like a cast."""
    return np.int64 if dtypes.is_integer(dtype) else None  # then wrapped like a cast


def _host(x):
    return np.asarray(x).item() if isinstance(x, Array) else x


def _is_zero(x) -> bool:
    return np.ndim(x) == 0 and _host(x) == 0


def _iota_length(stop) -> int:
    stop = _host(stop)
    if np.ndim(stop) != 0:
        raise ValueError(f"arange: the range bounds must be scalars, got shape {np.shape(stop)}")
    return max(0, int(np.ceil(stop)))


# linspace and logspace run as one program when eager, as JAX jits them: op by op, XLA rounded
# differently from the fused program under jit (2.0 vs 1.999 in float16, one ulp in float32).
@_with_device
@eager_compiled(static_argnames=('num', 'endpoint', 'retstep', 'dtype', 'axis'))
def linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype=None, axis: int = 0, *, device=None):
    """`num` evenly spaced values from start to stop (inclusive when endpoint=True).

    Array bounds give one sequence per element, laid out along `axis`; integer dtypes floor.
    """
    if type(num) is not DimExpr:  # (a symbolic dimension is a static count too)
        num = util.static_int(num, "'num' argument of jnp.linspace")
    axis = util.static_int(axis, "'axis' argument of jnp.linspace")
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    start, stop = util.ensure_arraylike("linspace", start, stop)
    dtype = user_dtype(dtype, "linspace") or _to_inexact(dtypes.result_type(start, stop))
    compute_dtype = _to_inexact(dtype)
    start, stop = util.broadcast_arrays(util.convert(start, compute_dtype),
                                        util.convert(stop, compute_dtype))
    bounds_shape = core.get_aval(start).shape
    axis = util.canonicalize_axis(axis, len(bounds_shape) + 1)
    out_shape = bounds_shape[:axis] + (num,) + bounds_shape[axis:]
    divisions = num - 1 if endpoint else num
    if num == 0:
        delta = util.convert(np.nan, compute_dtype)
        out = zeros(out_shape, compute_dtype)
    elif num == 1:
        delta = util.convert(np.nan, compute_dtype) if endpoint else stop - start
        out = structural.expand_dims(start, (axis,))
    else:
        delta = (stop - start) / util.convert(divisions, compute_dtype)
        real_dtype = np.dtype(dtypes.finfo(compute_dtype).dtype)
        fraction_shape = (1,) * axis + (divisions,) + (1,) * (len(bounds_shape) - axis)
        steps = lax.reshape(iota(real_dtype, (divisions,), 0), fraction_shape)
        lo, hi = (structural.expand_dims(b, (axis,)) for b in (start, stop))
        if dtypes.is_integer(dtype):
            # NumPy's start + i * step: exact where the steps are, so the floor below does not
            # turn -3 into -4 (JAX's blend gives linspace(-7, 3, 6, dtype=int)[2] == -4).
            out = lo + util.convert(steps, compute_dtype) * structural.expand_dims(delta, (axis,))
        else:
            # start * (1 - t) + stop * t is exact at both ends, unlike start + t * (stop - start).
            fraction = util.convert(steps / util.convert(divisions, real_dtype), compute_dtype)
            out = lo * (1 - fraction) + hi * fraction
        if endpoint:
            out = structural.concatenate([out, hi], axis)
    if dtypes.is_integer(dtype) and not dtypes.is_integer(core.get_aval(out).dtype):
        out = lax.floor(out)
    out = util.convert(out, dtype)
    return (out, delta) if retstep else out


def _to_inexact(dtype) -> np.dtype:
    return util.to_inexact_dtype(np.dtype(dtype))


@eager_compiled(static_argnames=('num', 'endpoint', 'dtype', 'axis'))
def logspace(start, stop, num: int = 50, endpoint: bool = True, base=10.0, dtype=None,
             axis: int = 0):
    """`base ** linspace(start, stop, ...)`."""
    num = util.static_int(num, "'num' argument of jnp.logspace")
    axis = util.static_int(axis, "'axis' argument of jnp.logspace")
    start, stop, base = util.ensure_arraylike("logspace", start, stop, base)
    dtype = user_dtype(dtype, "logspace") or _to_inexact(dtypes.result_type(start, stop))
    compute_dtype = _to_inexact(dtype)
    # As NumPy: start, stop and base take the rank of their broadcast, and each base applies to
    # the whole sequence it sits beside (its axis is inserted where the sequences run).
    ndim = len(util.broadcast_shapes(*(core.get_aval(v).shape for v in (start, stop, base))))
    start, stop, base = (_with_leading_ones(v, ndim) for v in (start, stop, base))
    exponents = linspace(util.convert(start, compute_dtype), util.convert(stop, compute_dtype),
                         num, endpoint=endpoint, axis=axis)
    base = structural.expand_dims(base, (util.canonicalize_axis(axis, ndim + 1),))
    return util.convert(ufuncs.power(base, exponents), dtype)


def _with_leading_ones(x, ndim: int):
    shape = core.get_aval(x).shape
    return lax.reshape(x, (1,) * (ndim - len(shape)) + shape)


# ---------------------------------------------------------------------------------------------
# Matrices

def _diagonal_mask(rows: int, cols: int, k, compare):
    """Boolean (rows, cols) mask of `compare(col - row, k)`."""
    offset = ufuncs.subtract(iota(dtypes.int32, (rows, cols), 1),
                             iota(dtypes.int32, (rows, cols), 0))
    return compare(offset, k)


def _matrix_dims(name, N, M):
    """N and M as Python ints; a traced or non-integer one raises JAX's TypeError (its words:
    eye names the argument, tri shows both)."""
    def dim(value, shown, where):
        try:
            return util.static_dim(value, where)
        except TypeError:  # the tracer errors are TypeErrors too
            suffix = f" {where}." if name == "eye" else ""
            raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, "
                            f"got {shown!r}.{suffix}") from None
    both = (N, N if M is None else M)
    shown = lambda one: (one,) if name == "eye" else both
    N = dim(N, shown(N), "argument of 'N' jnp.eye()")
    M = N if M is None else dim(M, shown(M), "argument 'M' of jnp.eye()")
    if N < 0 or M < 0:
        raise ValueError(f"negative dimensions are not allowed, got N={N} and M={M}")
    return N, M


def _int_offset(k, rows: int, cols: int, error=TypeError, check_int32: bool = True):
    """The diagonal offset `k` of a (rows, cols) matrix as an int32 scalar; `error` (JAX's class
    for the caller) when `k` is not an integer. A Python int outside int32 is an OverflowError
    if `check_int32` (JAX's rule); static offsets past the matrix are clamped to its edges
    (the mask is the same; wrapping to int32 had moved the diagonal)."""
    if type(k) is DimExpr:  # a symbolic offset (shape polymorphism), as a traced value
        return util.convert(k.dimension_as_value(), dtypes.int32)
    if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
        if check_int32:
            util.check_python_int(k)
        k = min(max(int(k), -rows), cols)
        return lax._convert_element_type(k, dtypes.int32, False)
    if not (dtypes.is_integer(dtypes.dtype(k)) or dtypes.dtype(k) == np.bool_):
        raise error(f"k must be a scalar integer; got {k}")
    return util.convert(k, dtypes.int32)


@_with_device
def eye(N, M=None, k=0, dtype=None, *, device=None):
    """An N x M matrix with ones on the k-th diagonal and zeros elsewhere."""
    N, M = _matrix_dims("eye", N, M)
    mask = _diagonal_mask(N, M, _int_offset(k, N, M, ValueError, check_int32=False),
                          ufuncs.equal)
    return util.convert(mask, user_dtype(dtype, "eye") or dtypes.default_float_dtype())


def identity(n, dtype=None):
    """The n x n identity matrix."""
    return eye(n, dtype=dtype)


def tri(N, M=None, k: int = 0, dtype=None):
    """An N x M matrix with ones at and below the k-th diagonal."""
    N, M = _matrix_dims("tri", N, M)
    mask = _diagonal_mask(N, M, _int_offset(k, N, M), ufuncs.less_equal)
    return util.convert(mask, user_dtype(dtype, "tri") or dtypes.default_float_dtype())


def _triangle(name, m, k, compare):
    m = util.ensure_arraylike(name, m)
    aval = core.get_aval(m)
    if aval.ndim < 2:
        raise ValueError(f"{name} requires an array of at least two dimensions, got shape "
                         f"{aval.shape}")
    if type(k) is not DimExpr:
        k = util.static_int(k, f"'k' argument of jnp.{name}")
    rows, cols = aval.shape[-2:]
    mask = _diagonal_mask(rows, cols, _int_offset(k, rows, cols), getattr(ufuncs, compare))
    mask = util.broadcast_to(mask, aval.shape)
    return util.select(mask, m, zeros_like(m))


def tril(m, k: int = 0):
    """Lower triangle of the last two axes of `m`: zeros above the k-th diagonal."""
    return _triangle("tril", m, k, "less_equal")


def triu(m, k: int = 0):
    """Upper triangle of the last two axes of `m`: zeros below the k-th diagonal."""
    return _triangle("triu", m, k, "greater_equal")


def diag(v, k: int = 0):
    """The k-th diagonal of a 2-D array, or a 2-D array with a 1-D array on its k-th diagonal."""
    v = util.ensure_arraylike("diag", v)
    k = util.static_int(k, "'k' argument of jnp.diag")
    aval = core.get_aval(v)
    if aval.ndim == 2:
        from fluxion._src.numpy.linalg_ops import diagonal
        return diagonal(v, offset=k)
    if aval.ndim != 1:
        raise ValueError("diag input must be 1d or 2d")
    n = aval.shape[0] + abs(k)
    # Entry (i, i + k) holds v[i] for k >= 0; entry (j - k, j) holds v[j] for k < 0: pad v
    # to length n and broadcast it along the axis that indexes it.
    padded = structural.pad(v, util.scalar_like(v, 0), ((0, abs(k), 0),))
    along = (0,) if k >= 0 else (1,)
    values = lax.broadcast_in_dim(padded, (n, n), along)
    mask = _diagonal_mask(n, n, _int_offset(k, n, n), ufuncs.equal)
    return util.select(mask, values, zeros_like(values))


def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list:
    """Coordinate arrays from 1-D coordinate vectors ('xy': Cartesian, 'ij': matrix indexing)."""
    util.check_arraylike("meshgrid", *xi)
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
    arrays = [util.as_array(x) for x in xi]
    shapes = [core.get_aval(a).shape for a in arrays]
    if any(len(s) != 1 for s in shapes):
        raise ValueError(f"Arguments to jax.numpy.meshgrid must be 1D, got shapes {shapes}")
    ndim = len(arrays)
    sizes = [s[0] for s in shapes]
    dims = list(range(ndim))
    if indexing == "xy" and ndim >= 2:
        # Cartesian indexing: the first two vectors vary along the second and first axes.
        dims[0], dims[1] = 1, 0
        sizes[0], sizes[1] = sizes[1], sizes[0]
    outs = []
    for a, d in zip(arrays, dims):
        shape = tuple(sizes[j] if j == d or not sparse else 1 for j in range(ndim))
        outs.append(lax.broadcast_in_dim(a, shape, (d,)))
    return outs


def _compile_eager_calls():  # as in manipulation.py
    from fluxion._src.numpy.eager import compile_eagerly
    compile_eagerly(globals(), names=("diag", "tril", "triu"),
                    static_parameters=frozenset({"k"}))


_compile_eager_calls()
