"""Operators and methods shared by `Array` and every `Tracer`, defined once in terms of jnp."""
from __future__ import annotations

import math
import operator

import numpy as np

from fluxion._src import core, dispatch
from fluxion._src.array import Array
from fluxion._src.config import config
from fluxion._src.lax import elementwise as ew, lax
from fluxion._src.numpy import (array_view, linalg_ops, manipulation, reductions, searching,
                                ufuncs, util)
from fluxion._src.traceback_util import strip_internal_frames


def _unwrap(other):
    convert = getattr(other, "__jax_array__", None)
    return convert() if convert is not None else other


def _binary_operator(fn, symbol: str, swap: bool = False, reject=()):
    """An operator method: NotImplemented for non-arrays, except TypeError for `reject` types
    (sequences, where Python would otherwise concatenate or compare elementwise)."""
    def op(self, other):
        other = _unwrap(other)
        if util.is_arraylike(other):
            try:
                return fn(other, self) if swap else fn(self, other)
            except Exception as e:  # the user's line, not fluxion's frames
                strip_internal_frames(e)
                raise
        if type(other) in reject:
            left, right = (other, self) if swap else (self, other)
            raise TypeError(f"unsupported operand type(s) for {symbol}: "
                            f"{type(left).__name__!r} and {type(right).__name__!r}")
        return NotImplemented
    return op


# Off while debug_nans/debug_infs check every primitive (nan_checks turns it off).
shortcuts_enabled = True


def _eager_shortcut(general, prim, kinds: str, swap: bool = False, scalar_kinds: str = "fc"):
    """`general` (an Array operator method) with shortcuts for the commonest eager cases.

    When both operands are Arrays of one strongly typed aval whose dtype kind is in `kinds`,
    or the other operand is a Python float (or an int of magnitude at most 2**24, exact in every
    float type) and the Array's dtype is a strong type of a kind in `scalar_kinds`, promotion
    leaves the Array's dtype as it is and the operator is `prim` itself (the scalar becoming a
    value of that dtype, as promotion converts it). Then call the executable that
    `dispatch.apply_primitive` compiles for it, with no tracing machinery in between.
    """
    cache = dispatch._primitive_cache

    def op(self, other):
        if core._trace_state.trace is core.eval_trace and shortcuts_enabled:
            try:
                aval = self.aval
            except AttributeError:  # an Array over several devices: no shortcut
                return general(self, other)
            kind = aval.dtype.kind
            if type(other) is Array:
                if other.aval is aval and not aval.weak_type and kind in kinds:
                    operands = (other, self) if swap else (self, other)
                    # The key as apply_primitive builds it: (primitive, params, x64, *avals).
                    call = cache.get((prim, (), config.trace_key, aval, aval))
                    if call is not None:
                        return call(operands)
                    return dispatch.apply_primitive(prim, operands, {})
            elif not aval.weak_type and kind in scalar_kinds and (
                    type(other) is float or (type(other) is int and -_EXACT <= other <= _EXACT)):
                scalar = _float_operand(float(other), aval.dtype)
                operands = (scalar, self) if swap else (self, scalar)
                call = cache.get((prim, (), config.trace_key, *map(_aval_of, operands)))
                if call is not None:
                    return call(operands)
                return dispatch.apply_primitive(prim, operands, {})
        try:
            return general(self, other)
        except Exception as e:
            strip_internal_frames(e)
            raise
    return op


_EXACT = 2 ** 24  # Python ints up to this magnitude convert exactly to every float type


_aval_of = operator.attrgetter("aval")
_float_operands: dict = {}  # (dtype, value, sign) -> the value as a device scalar of dtype


def _float_operand(value: float, dtype):
    """`value` converted to `dtype` as promotion converts it, cached (the sign is part of the
    key, since 0.0 == -0.0)."""
    key = (dtype, value, math.copysign(1.0, value))
    scalar = _float_operands.get(key)
    if scalar is None:
        if len(_float_operands) > 4096:  # NaNs never hit: keep the cache bounded
            _float_operands.clear()
        scalar = _float_operands[key] = lax._convert_element_type(value, dtype, False)
    return scalar


_SEQUENCES = (tuple, list)
_CONTAINERS = (dict, list, set, tuple)

# name: (function, symbol, types rejected with TypeError instead of NotImplemented)
_ARITHMETIC = {
    "add": (ufuncs.add, "+", _SEQUENCES),
    "sub": (ufuncs.subtract, "-", ()),
    "mul": (ufuncs.multiply, "*", _SEQUENCES),
    "truediv": (ufuncs.true_divide, "/", ()),
    "floordiv": (ufuncs.floor_divide, "//", ()),
    "mod": (ufuncs.remainder, "%", ()),
    "divmod": (ufuncs.divmod, "divmod()", ()),
    "pow": (ufuncs.power, "**", ()),
    "matmul": (linalg_ops.matmul, "@", ()),
    "and": (ufuncs.bitwise_and, "&", ()),
    "or": (ufuncs.bitwise_or, "|", ()),
    "xor": (ufuncs.bitwise_xor, "^", ()),
    "lshift": (ufuncs.left_shift, "<<", ()),
    "rshift": (ufuncs.right_shift, ">>", ()),
}
_COMPARISONS = {
    "eq": (ufuncs.equal, "==", _CONTAINERS),
    "ne": (ufuncs.not_equal, "!=", _CONTAINERS),
    "lt": (ufuncs.less, "<", ()),
    "le": (ufuncs.less_equal, "<=", ()),
    "gt": (ufuncs.greater, ">", ()),
    "ge": (ufuncs.greater_equal, ">=", ()),
}


def _operators() -> dict:
    m = {}
    for name, (fn, symbol, reject) in _ARITHMETIC.items():
        m[f"__{name}__"] = _binary_operator(fn, symbol, reject=reject)
        m[f"__r{name}__"] = _binary_operator(fn, symbol, swap=True, reject=reject)
    for name, (fn, symbol, reject) in _COMPARISONS.items():
        m[f"__{name}__"] = _binary_operator(fn, symbol, reject=reject)
    # The functions themselves, not lambdas around them: one Python call less per `-x`.
    m["__neg__"] = ufuncs.negative
    m["__pos__"] = ufuncs.positive
    m["__abs__"] = ufuncs.absolute
    m["__invert__"] = ufuncs.invert
    m["__round__"] = _operator_round
    m["__contains__"] = _contains
    return m


def _operator_round(self, ndigits=None):
    """Builtin round(): like round() of a Python float, an integer when ndigits is None."""
    out = ufuncs.round(self, ndigits or 0)
    return manipulation.astype(out, int) if ndigits is None else out


def _contains(self, other):
    """`other in self` for a 1-D `self` and a scalar `other` (JAX's stricter rule than
    NumPy's, whose `in` matches rows and broadcasts)."""
    if other is None or isinstance(other, str):
        raise TypeError(f"Array.__contains__: unsupported operand type {type(other)}.")
    util.check_arraylike("Array.__contains__", other)
    if self.ndim != 1:
        raise ValueError("Array.__contains__: search array must be one-dimensional, "
                         f"got arr.shape={self.shape}.")
    if np.ndim(other) != 0:
        raise ValueError(f"Array.__contains__: query value must be a scalar, got "
                         f"shape {np.shape(other)}")
    return reductions.any(ufuncs.equal(self, other))


# ---------------------------------------------------------------------------------------------
# Methods

def _shape_args(args):
    """reshape(2, 3), reshape((2, 3)) and reshape(-1) all name a shape."""
    if len(args) == 1 and (isinstance(args[0], (tuple, list)) or np.ndim(args[0]) != 0):
        return args[0]  # (np.ndim of a tuple holding a tracer would read its value)
    return args


_plain_reshape = manipulation.reshape.__wrapped__  # without the out_sharding keyword's layer


def _reshape(self, *args, order="C", out_sharding=None):
    """The array with a new shape: `x.reshape(2, 3)` or `x.reshape((2, 3))`."""
    if out_sharding is not None:
        return manipulation.reshape(self, _shape_args(args), order=order,
                                    out_sharding=out_sharding)
    return _plain_reshape(self, _shape_args(args), order=order)


def _transpose(self, *args):
    """Axes permuted: `x.transpose()`, `x.transpose(1, 0)` or `x.transpose((1, 0))`."""
    if not args or args == (None,):  # x.transpose(None) reverses the axes too
        return manipulation.transpose(self, None)
    return manipulation.transpose(self, _shape_args(args))


def _astype(self, dtype, copy: bool = False, device=None):
    """The array converted to `dtype`."""
    return manipulation.astype(self, dtype, copy=copy)


def _take(self, indices, axis=None, out=None, mode=None, unique_indices=False,
          indices_are_sorted=False, fill_value=None):
    """Elements at `indices` along `axis` (see jnp.take)."""
    from fluxion._src.numpy import indexing
    take = getattr(indexing, "take", None)
    if take is None:
        raise NotImplementedError("Array.take needs fluxion.numpy.take, which is not available")
    return take(self, indices, axis=axis, out=out, mode=mode, unique_indices=unique_indices,
                indices_are_sorted=indices_are_sorted, fill_value=fill_value)


def _flatten(self, order="C"):
    """The elements as a 1-D array."""
    return manipulation.ravel(self, order)


def _copy(self):
    """A copy of the array, in a buffer of its own."""
    return manipulation.copy(self)


def _compress(self, condition, axis=None, *, out=None, size=None, fill_value=0):
    """The slices along `axis` where `condition` is true (see jnp.compress)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to compress is not supported.")
    return searching.compress(condition, self, axis=axis, size=size, fill_value=fill_value)


def _flat(self):
    raise NotImplementedError("JAX Arrays do not implement the arr.flat property: consider "
                              "arr.flatten() instead.")


_METHODS = {
    "all": reductions.all, "any": reductions.any, "argmax": reductions.argmax,
    "argmin": reductions.argmin, "cumprod": reductions.cumprod, "cumsum": reductions.cumsum,
    "max": reductions.max, "mean": reductions.mean, "min": reductions.min,
    "prod": reductions.prod, "ptp": reductions.ptp, "std": reductions.std,
    "sum": reductions.sum, "var": reductions.var,
    "argsort": manipulation.argsort, "sort": manipulation.sort, "ravel": manipulation.ravel,
    "repeat": manipulation.repeat, "squeeze": manipulation.squeeze,
    "swapaxes": manipulation.swapaxes,
    "clip": ufuncs.clip, "conj": ufuncs.conj, "conjugate": ufuncs.conjugate,
    "round": ufuncs.round, "nonzero": ufuncs.nonzero,
    "diagonal": linalg_ops.diagonal, "dot": linalg_ops.dot, "trace": linalg_ops.trace,
    "reshape": _reshape, "transpose": _transpose, "astype": _astype, "take": _take,
    "flatten": _flatten, "copy": _copy,
    "argpartition": searching.argpartition, "searchsorted": searching.searchsorted,
    "choose": searching.choose, "compress": _compress,
    "view": array_view.view, "byteswap": array_view.byteswap,
    "__copy__": _copy, "__deepcopy__": lambda self, memo: _copy(self),
}

_PROPERTIES = {
    "T": lambda self: manipulation.transpose(self),
    "mT": lambda self: manipulation.matrix_transpose(self),
    "real": lambda self: ufuncs.real(self),
    "imag": lambda self: ufuncs.imag(self),
    "flat": _flat,
}


def _tracer_item(self, *args):
    value = core.concrete_or_error(self, "The item() method of a traced array")
    return np.asarray(value).item(*args)


def _tracer_tolist(self):
    value = core.concrete_or_error(self, "The tolist() method of a traced array")
    return np.asarray(value).tolist()


def _tracer_tobytes(self, order="C"):
    value = core.concrete_or_error(self, "The tobytes() method of a traced array")
    return np.asarray(value).tobytes(order)


# Array already has these; tracers get them here.
_TRACER_ONLY = {
    "tolist": _tracer_tolist,
    "tobytes": _tracer_tobytes,
    "nbytes": property(lambda self: self.aval.size * self.aval.dtype.itemsize),
    "itemsize": property(lambda self: self.aval.dtype.itemsize),
    "item": _tracer_item,
}


def attach(extra: dict | None = None) -> None:
    """Install the operators, methods and properties (and `extra`) on Array and Tracer."""
    members = dict(_operators())
    members.update(_METHODS)
    members.update({name: property(fn) for name, fn in _PROPERTIES.items()})
    if extra:
        members.update(extra)
    for cls in (Array, core.Tracer):
        for name, member in members.items():
            setattr(cls, name, member)
    for name, prim, kinds in (("add", ew.add_p, "iufc"), ("sub", ew.sub_p, "iufc"),
                              ("mul", ew.mul_p, "iufc"), ("truediv", ew.div_p, "fc")):
        for method, swap in ((f"__{name}__", False), (f"__r{name}__", True)):
            setattr(Array, method, _eager_shortcut(members[method], prim, kinds, swap))
    # Comparisons: floats are ordered (complex numbers only compare for equality).
    for name, prim, scalar_kinds in (("gt", ew.gt_p, "f"), ("ge", ew.ge_p, "f"),
                                     ("lt", ew.lt_p, "f"), ("le", ew.le_p, "f"),
                                     ("eq", ew.eq_p, "fc"), ("ne", ew.ne_p, "fc")):
        setattr(Array, f"__{name}__", _eager_shortcut(members[f"__{name}__"], prim, "iuf",
                                                      scalar_kinds=scalar_kinds))
    for name, member in _TRACER_ONLY.items():
        setattr(core.Tracer, name, member)


attach()
