"""`jnp.ufunc` and `jnp.frompyfunc`: universal functions with reduce, accumulate, reduceat,
outer and at, and the built-in ufuncs (`jnp.add`, `jnp.maximum`, ...) as ufunc objects.

A built-in ufunc is its elementwise function itself, carrying the ufunc's methods and
attributes (`jnp.add.reduce`, `jnp.add.nin`) and counted as an instance of `jnp.ufunc`: so
`jnp.add(x, y)` costs exactly what calling `ufuncs.add` costs (an object with a `__call__`
would add a slot lookup to every call). Its methods use the dedicated reductions (sum for add.reduce,
cumsum for add.accumulate, scatter-add for add.at); a ufunc made by `frompyfunc` runs its
methods as loops over the function (fori_loop, scan), as JAX does.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.lax import lax, structural
from fluxion._src.lax import windowed
from fluxion._src.numpy import manipulation, reductions, ufuncs, util

_AT_INPLACE_MESSAGE = (
    "jax.numpy.ufunc.at() does not support inplace=True, because JAX arrays are immutable. "
    "Use inplace=False to return an updated copy of the array.")


def _aval(x):
    return core.get_aval(x)


def _one(x):
    """A scalar 1 of x's dtype and weak type."""
    aval = _aval(x)
    return lax._convert_element_type(1, aval.dtype, aval.weak_type)


class _UfuncType(type):
    """Makes the built-in ufuncs, which are plain functions, instances of `ufunc`."""

    def __instancecheck__(cls, obj):
        return type.__instancecheck__(cls, obj) or (
            cls is ufunc and type.__instancecheck__(ufunc, getattr(obj, "_ufunc", None)))


class ufunc(metaclass=_UfuncType):
    """A universal function: elementwise `func` of `nin` arrays with `nout` results, with
    NumPy's ufunc methods (`reduce`, `accumulate`, `reduceat`, `outer`, `at`).

    `call`, `reduce`, `accumulate`, `at` and `reduceat` optionally give faster
    implementations of those methods; otherwise they are loops over `func`.
    """

    def __init__(self, func: Callable[..., Any], /, nin: int, nout: int, *,
                 name: str | None = None, nargs: int | None = None, identity: Any = None,
                 call: Callable[..., Any] | None = None, reduce: Callable[..., Any] | None = None,
                 accumulate: Callable[..., Any] | None = None,
                 at: Callable[..., Any] | None = None,
                 reduceat: Callable[..., Any] | None = None):
        self.__doc__ = func.__doc__
        self.__name__ = name or func.__name__
        self._props = {
            "func": func, "nin": operator.index(nin), "nout": operator.index(nout),
            "nargs": operator.index(nargs or nin), "identity": identity, "call": call,
            "reduce": reduce, "accumulate": accumulate, "at": at, "reduceat": reduceat,
        }

    _func = property(lambda self: self._props["func"])
    nin = property(lambda self: self._props["nin"])
    nout = property(lambda self: self._props["nout"])
    nargs = property(lambda self: self._props["nargs"])
    identity = property(lambda self: self._props["identity"])

    def _key(self):
        return (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ufunc) and self._key() == other._key()

    def __repr__(self) -> str:
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=None):
        util.check_arraylike(self.__name__, *args)
        if out is not None:
            raise NotImplementedError(f"out argument of {self}")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}")
        call = self._props["call"]
        if call is not None:
            return call(*args)
        from fluxion._src.numpy.vectorize import vectorize
        return vectorize(self._func)(*args)

    def _check_binary(self, method: str) -> None:
        if self.nin != 2:
            raise ValueError(f"{method} only supported for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value")

    def _result_dtype(self, *args):
        from fluxion._src.api import eval_shape
        return np.dtype(eval_shape(self._func, *(_one(a) for a in args)).dtype)

    # -----------------------------------------------------------------------------------------
    # reduce

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims: bool = False, initial=None,
               where=None):
        """Reduce `a` along `axis` by applying the ufunc repeatedly."""
        util.check_arraylike(f"{self.__name__}.reduce", a)
        self._check_binary("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        if initial is not None:
            util.check_arraylike(f"{self.__name__}.reduce", initial)
        if where is not None:
            util.check_arraylike(f"{self.__name__}.reduce", where)
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an "
                                 "identity, so to use a where mask one has to specify 'initial'.")
            where_dtype = _aval(util.as_array(where)).dtype
            if where_dtype != dtypes.bool_:
                raise ValueError(f"where argument must have dtype=bool; got dtype={where_dtype}")
        if axis is not None and not isinstance(axis, tuple):
            axis = util.static_int(axis, f"axis argument of {self.__name__}.reduce")
        reduce = self._props["reduce"] or self._reduce_via_loop
        return reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

    def _reduce_via_loop(self, arr, axis=0, dtype=None, keepdims=False, initial=None,
                         where=None):
        from fluxion._src.lax.control_flow import fori_loop
        arr = util.as_array(arr)
        if initial is None:
            initial = self.identity
        if dtype is None:
            dtype = self._result_dtype(arr, arr)
        if where is not None:
            where = util.broadcast_to(where, _aval(arr).shape)
        if isinstance(axis, tuple):
            raise NotImplementedError("tuple of axes")
        shape = _aval(arr).shape
        if axis is None:
            final_shape = (1,) * len(shape) if keepdims else ()
            arr = manipulation.ravel(arr)
            if where is not None:
                where = manipulation.ravel(where)
            axis = 0
        else:
            axis = util.canonicalize_axis(axis, len(shape))
            final_shape = shape[:axis] + ((1,) if keepdims else ()) + shape[axis + 1:]
        if axis != 0:
            arr = manipulation.moveaxis(arr, axis, 0)
            if where is not None:
                where = manipulation.moveaxis(where, axis, 0)
        length = _aval(arr).shape[0]
        if length == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} which "
                                 "has no identity")
            return lax.broadcast_in_dim(lax._convert_element_type(initial, dtype, False),
                                        final_shape, ())

        def body(i, acc):
            step = self(acc, util.convert(arr[i], dtype))
            return step if where is None else util.where(where[i], step, acc)

        if initial is None:
            start, acc = 1, arr[0]
        else:
            start, acc = 0, initial
        acc = util.broadcast_to(util.convert(acc, dtype), _aval(arr).shape[1:])
        result = fori_loop(start, length, body, acc)
        if keepdims:
            result = lax.reshape(result, final_shape)
        return result

    # -----------------------------------------------------------------------------------------
    # accumulate

    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running results of reduce along `axis`."""
        self._check_binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        accumulate = self._props["accumulate"] or self._accumulate_via_scan
        return accumulate(a, axis=axis, dtype=dtype)

    def _accumulate_via_scan(self, arr, axis=0, dtype=None):
        from fluxion._src.lax.control_flow import scan
        util.check_arraylike(f"{self.__name__}.accumulate", arr)
        arr = util.as_array(arr)
        if dtype is None:
            dtype = self._result_dtype(arr, arr)
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        axis = util.canonicalize_axis(axis, _aval(arr).ndim)
        if _aval(arr).size == 0:
            return lax.broadcast_in_dim(lax._convert_element_type(0, dtype, False),
                                        _aval(arr).shape, ())
        arr = manipulation.moveaxis(arr, axis, 0)
        first = util.convert(arr[0], dtype)

        def step(carry, x):
            acc = self(carry, util.convert(x, dtype))
            return acc, acc

        _, rest = scan(step, first, structural.slice_in_dim(arr, 1, _aval(arr).shape[0], 1, 0))
        result = structural.concatenate([lax.reshape(first, (1,) + _aval(first).shape),
                                         util.convert(rest, dtype)], 0)
        return manipulation.moveaxis(result, 0, axis)

    # -----------------------------------------------------------------------------------------
    # at

    def at(self, a, indices, b=None, /, *, inplace: bool = True):
        """A copy of `a` with the ufunc applied at `indices` (with `b` as second operand);
        repeated indices apply repeatedly. Pass inplace=False."""
        if inplace:
            raise NotImplementedError(_AT_INPLACE_MESSAGE)
        at = self._props["at"] or self._at_via_scan
        return at(a, indices) if b is None else at(a, indices, b)

    def _at_via_scan(self, a, indices, *args):
        from fluxion._src.lax.control_flow import scan
        util.check_arraylike(f"{self.__name__}.at", a, *args)
        dtype = self._result_dtype(util.as_array(a), *(util.as_array(x) for x in args))
        a = util.convert(a, dtype)
        args = tuple(util.convert(x, dtype) for x in args)
        if isinstance(indices, list):
            indices = tuple(indices) if any(isinstance(i, (slice, list)) for i in indices) else \
                (util.as_array(np.asarray(indices)),)
        if not isinstance(indices, tuple):
            indices = (indices,)
        if not indices:
            return a
        shapes = [np.shape(i) for i in indices if not isinstance(i, slice)]
        shape = util.broadcast_shapes(*shapes) if shapes else ()
        if not shape:
            return a.at[indices].set(self(a.at[indices].get(), *args))
        count = math.prod(shape)
        if args:
            tail = _aval(args[0]).shape[len(shape):]
            arg = util.broadcast_to(args[0], shape + tail)
            args = (lax.reshape(arg, (count,) + tail),)
        flat = [i if isinstance(i, slice) else
                lax.reshape(util.broadcast_to(util.as_array(i), shape), (count,))
                for i in indices]

        def step(carry, i):
            idx = tuple(ind if isinstance(ind, slice) else ind[i] for ind in flat)
            return carry.at[idx].set(self(carry.at[idx].get(), *(x[i] for x in args))), None

        from fluxion._src.numpy.creation import arange
        result, _ = scan(step, a, arange(count))
        return result

    # -----------------------------------------------------------------------------------------
    # reduceat

    def reduceat(self, a, indices, axis: int = 0, dtype=None, out=None):
        """Reductions over the slices [indices[i], indices[i+1]) along `axis`."""
        self._check_binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        reduceat = self._props["reduceat"] or self._reduceat_via_loop
        return reduceat(a, indices, axis=axis, dtype=dtype)

    def _reduceat_via_loop(self, a, indices, axis=0, dtype=None):
        from fluxion._src.lax.control_flow import fori_loop
        from fluxion._src.numpy.indexing import take
        util.check_arraylike(f"{self.__name__}.reduceat", a, indices)
        a = util.as_array(a)
        indices = util.as_array(indices)
        if _aval(a).ndim == 0:
            raise ValueError(f"reduceat: a must have 1 or more dimension, got a.shape="
                             f"{_aval(a).shape}")
        if _aval(indices).ndim != 1:
            raise ValueError(f"reduceat: indices must be one-dimensional, got indices.shape="
                             f"{_aval(indices).shape}")
        if dtype is None:
            dtype = _aval(a).dtype
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        axis = util.canonicalize_axis(axis, _aval(a).ndim)
        result = take(a, indices, axis=axis)
        n = _aval(a).shape[axis]
        bounds = manipulation.append(indices, n)
        other = tuple(d for d in range(_aval(result).ndim) if d != axis)
        bounds = structural.expand_dims(bounds, other)
        starts = structural.slice_in_dim(bounds, 0, _aval(bounds).shape[axis] - 1, 1, axis)
        ends = structural.slice_in_dim(bounds, 1, _aval(bounds).shape[axis], 1, axis)

        def body(i, acc):
            inside = ufuncs.logical_and(ufuncs.greater(i, starts), ufuncs.less(i, ends))
            row = take(a, structural.expand_dims(i, (0,)), axis=axis)
            return util.where(inside, self(acc, row), acc)

        return fori_loop(0, n, body, result)

    # -----------------------------------------------------------------------------------------
    # outer

    def outer(self, A, B, /):
        """The ufunc applied to every pair of elements: shape A.shape + B.shape."""
        self._check_binary("outer")
        util.check_arraylike(f"{self.__name__}.outer", A, B)
        from fluxion._src.vmap import vmap
        A, B = util.as_array(A), util.as_array(B)
        a_shape, b_shape = _aval(A).shape, _aval(B).shape
        flat_a = lax.reshape(A, (math.prod(a_shape),))
        flat_b = lax.reshape(B, (math.prod(b_shape),))
        pair = lambda a, b: self(a, b)  # noqa: E731  (vmap inspects a function's signature)
        result = vmap(vmap(pair, (None, 0)), (0, None))(flat_a, flat_b)
        return lax.reshape(result, a_shape + b_shape)


def frompyfunc(func: Callable[..., Any], /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """A ufunc from an elementwise function of `nin` scalars (vectorized with vmap)."""
    return ufunc(func, nin, nout, identity=identity)


# ---------------------------------------------------------------------------------------------
# Built-in ufuncs

def _builtin(func, nin, identity=None, **methods):
    """`func` with the methods and attributes of its ufunc attached (see the module doc)."""
    u = ufunc(func, nin, 1, name=func.__name__, identity=identity, call=func, **methods)
    func._ufunc = u
    for name in ("reduce", "accumulate", "reduceat", "outer", "at"):
        setattr(func, name, getattr(u, name))
    func.nin, func.nout, func.nargs, func.identity = u.nin, u.nout, u.nargs, u.identity
    return func


def _reduce_with(reduction):
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        return reduction(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                         where=where)
    return reduce


def _monoid_reduce(name, monoid, *, has_identity=True, preproc=None):
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        return reductions._reduction(a, name, monoid, has_identity=has_identity,
                                     preproc=preproc, axis=axis, dtype=dtype,
                                     keepdims=keepdims, initial=initial, where=where)
    return reduce


def _require_integer(name):
    def check(x):
        dt = _aval(x).dtype
        if not (dtypes.is_integer(dt) or dt == dtypes.bool_):
            raise ValueError(f"jnp.{name}.reduce requires integer or boolean dtype, got {dt}")
        return x
    return check


def _to_bool(x):
    return util.convert(x, dtypes.bool_)


def _reduce_bitwise_xor(a, axis=0, dtype=None, keepdims=False, initial=None, where=None,
                        *, to_bool=False):
    name = "logical_xor" if to_bool else "bitwise_xor"
    a = util.ensure_arraylike(name, a)
    a = _to_bool(a) if to_bool else _require_integer(name)(a)
    aval = _aval(a)
    axes = util.canonicalize_axes(axis, aval.ndim, f"jnp.{name}.reduce")
    dt = aval.dtype if dtype is None else np.dtype(dtype)
    a = util.convert(a, dt)
    if where is not None:
        a = util.where(where, a, lax._convert_element_type(0, dt, False))
    result = lax.reduce_xor(a, axes)
    if initial is not None:
        result = lax.bitwise_xor(util.convert(initial, dt), result)
    if keepdims:
        result = structural.expand_dims(result, tuple(sorted(axes)))
    return result


def _logsumexp(a, axis=0, dtype=None, keepdims=False, initial=None, where=None, *, base2=False):
    from fluxion._src.nn_functions import logsumexp
    name = "logaddexp2" if base2 else "logaddexp"
    a = util.ensure_arraylike(name, a)
    (a,) = util.promote_dtypes_inexact(a)
    scale = np.log(2) if base2 else 1.0
    if base2:
        a = lax.mul(a, util.lax_const(a, scale))
    if where is not None:
        where = util.broadcast_to(where, _aval(a).shape)
    axes = util.canonicalize_axes(axis, _aval(a).ndim, f"jnp.{name}.reduce")
    if where is None and any(_aval(a).shape[d] == 0 for d in axes):
        # An empty reduction is the identity, -inf: a mask makes logsumexp start from it.
        where = lax.broadcast_in_dim(lax._convert_element_type(True, dtypes.bool_, False),
                                     _aval(a).shape, ())
    result = logsumexp(a, axis=axes, keepdims=keepdims, where=where)
    if initial is not None:
        initial = util.convert(initial, _aval(result).dtype)
        if base2:
            initial = lax.mul(initial, util.lax_const(initial, scale))
        result = ufuncs.logaddexp(initial, result)
    if base2:
        result = lax.div(result, util.lax_const(result, scale))
    return result


def _logical_xor_reduce(a, **kwargs):
    return _reduce_bitwise_xor(a, to_bool=True, **kwargs)


def _logsumexp2(a, **kwargs):
    return _logsumexp(a, base2=True, **kwargs)


def _cumulative_with(scan_name):
    def accumulate(a, axis=0, dtype=None):
        util.check_arraylike("accumulate", a)
        a = util.as_array(a)
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        axis = util.canonicalize_axis(axis, _aval(a).ndim)
        if dtype is not None:
            a = util.convert(a, dtype)
        return getattr(windowed, scan_name)(a, axis)
    return accumulate


def _bool_as_int_at(method: str):
    """add.at / multiply.at: a scatter-add / scatter-mul (booleans combine as integers)."""
    def at(a, indices, b):
        a = util.ensure_arraylike(method, a)
        if _aval(a).dtype == dtypes.bool_:
            as_int = util.convert(a, np.int32)
            b = util.convert(util.convert(b, dtypes.bool_), np.int32)
            return util.convert(getattr(as_int.at[indices], method)(b), dtypes.bool_)
        return getattr(a.at[indices], method)(b)
    return at


def _subtract_at(a, indices, b):
    return util.ensure_arraylike("subtract", a).at[indices].subtract(b)


add = _builtin(ufuncs.add, 2, identity=0, reduce=_reduce_with(reductions.sum),
               accumulate=lambda a, axis=0, dtype=None: reductions.cumsum(a, axis=axis, dtype=dtype),
               at=_bool_as_int_at("add"))
multiply = _builtin(ufuncs.multiply, 2, identity=1, reduce=_reduce_with(reductions.prod),
                    accumulate=lambda a, axis=0, dtype=None: reductions.cumprod(a, axis=axis,
                                                                               dtype=dtype),
                    at=_bool_as_int_at("multiply"))
subtract = _builtin(ufuncs.subtract, 2, at=_subtract_at)
maximum = _builtin(ufuncs.maximum, 2, reduce=_monoid_reduce("max", "max", has_identity=False),
                   accumulate=_cumulative_with("cummax"))
minimum = _builtin(ufuncs.minimum, 2, reduce=_monoid_reduce("min", "min", has_identity=False),
                   accumulate=_cumulative_with("cummin"))
bitwise_and = _builtin(ufuncs.bitwise_and, 2, identity=-1,
                       reduce=_monoid_reduce("reduce_bitwise_and", "and",
                                             preproc=_require_integer("bitwise_and")))
bitwise_or = _builtin(ufuncs.bitwise_or, 2, identity=0,
                      reduce=_monoid_reduce("reduce_bitwise_or", "or",
                                            preproc=_require_integer("bitwise_or")))
bitwise_xor = _builtin(ufuncs.bitwise_xor, 2, identity=0, reduce=_reduce_bitwise_xor)
logical_and = _builtin(ufuncs.logical_and, 2, identity=True,
                       reduce=_monoid_reduce("reduce_logical_and", "and", preproc=_to_bool))
logical_or = _builtin(ufuncs.logical_or, 2, identity=False,
                      reduce=_monoid_reduce("reduce_logical_or", "or", preproc=_to_bool))
logical_xor = _builtin(ufuncs.logical_xor, 2, identity=False, reduce=_logical_xor_reduce)
logaddexp = _builtin(ufuncs.logaddexp, 2, identity=-np.inf, reduce=_logsumexp)
logaddexp2 = _builtin(ufuncs.logaddexp2, 2, identity=-np.inf, reduce=_logsumexp2)
negative = _builtin(ufuncs.negative, 1)
