"""The core: abstract values, primitives, traces and tracers, and the typed IR (the jaxpr).

Tracing is "stackless": one trace is current at a time (`current_trace()`); every trace knows
the trace that was current when it started (`parent`). A primitive's `bind` hands its arguments
to the current trace; a trace treats a value that is not one of its own tracers as a constant
and, where it needs to compute on plain values, binds at its parent.
"""
from __future__ import annotations

import itertools
import operator
import sys
import threading
from typing import Any, Callable, Sequence

import numpy as np

from fluxion._src import dtypes
from fluxion._src.errors import (ConcretizationTypeError, TracerArrayConversionError,
                                 TracerBoolConversionError, TracerIntegerConversionError,
                                 UnexpectedTracerError)


# ---------------------------------------------------------------------------------------------
# Abstract values

class ShapedArray:
    """The abstract value of an array: shape, dtype and weak type (JAX's `core.ShapedArray`)."""

    __slots__ = ("shape", "dtype", "weak_type", "_hash")
    array_abstraction_level = 1

    def __init__(self, shape, dtype, weak_type: bool = False):
        self.shape = tuple(shape)
        self.dtype = dtype if type(dtype) is np.dtype else np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self._hash = None

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def update(self, shape=None, dtype=None, weak_type=None) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak_type(self) -> "ShapedArray":
        return self.update(weak_type=False) if self.weak_type else self

    def __eq__(self, other):
        return (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((self.shape, self.dtype, self.weak_type))
        return h

    def str_short(self, short_dtypes: bool = True) -> str:
        name = short_dtype_name(self.dtype) if short_dtypes else self.dtype.name
        return f"{name}[{','.join(str(d) for d in self.shape)}]"

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short(short_dtypes=False)}{weak})"

    __str__ = __repr__

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]


_SHORT_NAMES = {"bool": "bool", "bfloat16": "bf16", "float16": "f16", "float32": "f32",
                "float64": "f64", "complex64": "c64", "complex128": "c128", "int8": "i8",
                "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
                "uint32": "u32", "uint64": "u64"}


def short_dtype_name(dtype) -> str:
    if dtype == dtypes.float0:
        return "float0"
    return _SHORT_NAMES.get(np.dtype(dtype).name, np.dtype(dtype).name)


def _scalar_aval(x) -> ShapedArray:
    t = type(x)
    if t is bool:
        return ShapedArray((), dtypes.bool_, False)
    if t is int:
        return ShapedArray((), dtypes.default_int_dtype(), True)
    if t is float:
        return ShapedArray((), dtypes.default_float_dtype(), True)
    return ShapedArray((), dtypes.default_complex_dtype(), True)


_aval_handlers: dict[type, Callable[[Any], ShapedArray]] = {
    bool: _scalar_aval, int: _scalar_aval, float: _scalar_aval, complex: _scalar_aval,
}


def _numpy_aval(x) -> ShapedArray:
    return ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype), False)


def get_aval(x) -> ShapedArray:
    """The abstract value of a tracer, array, NumPy value or Python scalar."""
    handler = _aval_handlers.get(type(x))
    if handler is not None:
        return handler(x)
    if isinstance(x, Tracer):
        return x.aval
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    if isinstance(x, (np.ndarray, np.generic)):
        return _numpy_aval(x)
    raise TypeError(f"Value {x!r} of type {type(x).__name__} is not a valid fluxion type: "
                    "expected an array, a NumPy value or a Python scalar.")


def register_aval_handler(cls: type, handler: Callable[[Any], ShapedArray]) -> None:
    _aval_handlers[cls] = handler


def valid_jaxtype(x) -> bool:
    try:
        get_aval(x)
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Primitives

class Primitive:
    """A primitive operation: `bind` hands it to the current trace, which applies its rules."""

    multiple_results = False

    def __init__(self, name: str):
        self.name = name
        self.impl: Callable | None = None
        self.abstract_eval: Callable | None = None

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        return _trace_state.trace.process_primitive(self, args, params)

    def def_impl(self, impl: Callable) -> Callable:
        self.impl = impl
        return impl

    def def_abstract_eval(self, abstract_eval: Callable) -> Callable:
        self.abstract_eval = abstract_eval
        return abstract_eval

    def abstract_eval_avals(self, avals, params):
        """Output avals as a list, whatever `multiple_results` is."""
        if self.abstract_eval is None:
            raise NotImplementedError(f"Abstract evaluation for '{self.name}' not implemented")
        out = self.abstract_eval(*avals, **params)
        if self.multiple_results:
            return list(out)
        return [out]

    def impl_fallback(self, *args, **params):
        raise NotImplementedError(f"Evaluation rule for '{self.name}' not implemented")


# ---------------------------------------------------------------------------------------------
# Traces and tracers

class Trace:
    """Interprets primitives applied to its tracers. Subclasses implement `process_primitive`."""

    parent: "Trace | None" = None
    is_live = True

    def process_primitive(self, primitive, args, params):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__


class EvalTrace(Trace):
    """The bottom trace: primitives run on concrete values."""

    def process_primitive(self, primitive, args, params):
        for x in args:
            if isinstance(x, Tracer):
                raise escaped_tracer_error(x)
        impl = primitive.impl
        if impl is None:
            raise NotImplementedError(f"Evaluation rule for '{primitive.name}' not implemented")
        return impl(*args, **params)


class _TraceState(threading.local):
    def __init__(self):
        self.trace: Trace = eval_trace


eval_trace = EvalTrace()
_trace_state = _TraceState()


def current_trace() -> Trace:
    return _trace_state.trace


class set_current_trace:
    """Context manager making `trace` current; restores the previous one on exit."""

    __slots__ = ("trace", "prev")

    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self):
        self.prev = _trace_state.trace
        _trace_state.trace = self.trace
        return self.trace

    def __exit__(self, *exc):
        _trace_state.trace = self.prev


def escaped_tracer_error(tracer) -> UnexpectedTracerError:
    trace = getattr(tracer, "_trace", None)
    origin = getattr(trace, "origin", None) or "a transformation"
    return UnexpectedTracerError(
        f"Encountered an unexpected tracer: {tracer!r}. It was created by {origin}, which has "
        "already finished, and leaked out of it (for example by being stored in a global, a "
        "closure or an object attribute that outlived the transformed function). Return the "
        "value from the function instead of storing it.")


def user_frame_summary() -> str:
    """'file:line (function)' of the innermost stack frame outside fluxion, for error messages."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_internal_file(filename):
            return f"{filename}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return "<unknown>"


def _is_internal_file(filename: str) -> bool:
    return (f"{_PACKAGE_DIR}" in filename and "/tests/" not in filename[len(_PACKAGE_DIR):]) or (
        filename.startswith("<frozen") or "contextlib.py" in filename)


import os as _os  # noqa: E402
_PACKAGE_DIR = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))


class Tracer:
    """A value standing for an array during tracing. Array methods are attached by the numpy layer."""

    __slots__ = ("_trace", "__weakref__")
    __array_priority__ = 1000

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def to_concrete_value(self):
        """The concrete value this tracer stands for, when the trace knows it; else None."""
        return None

    def _concrete_or_raise(self, error_cls, what: str):
        value = self.to_concrete_value()
        if value is None:
            raise error_cls(self, f"The problem arose with the `{what}` function, at "
                                  f"{user_frame_summary()}.")
        return value

    def __bool__(self):
        return bool(self._concrete_or_raise(TracerBoolConversionError, "bool"))

    def __int__(self):
        return int(self._concrete_or_raise(ConcretizationTypeError, "int"))

    def __float__(self):
        return float(self._concrete_or_raise(ConcretizationTypeError, "float"))

    def __complex__(self):
        return complex(self._concrete_or_raise(ConcretizationTypeError, "complex"))

    def __index__(self):
        value = self.to_concrete_value()
        if value is None or not dtypes.is_integer(self.dtype) and self.dtype != dtypes.bool_:
            raise TracerIntegerConversionError(self, f"at {user_frame_summary()}")
        return operator.index(value)

    def __array__(self, dtype=None, copy=None):
        value = self.to_concrete_value()
        if value is None:
            raise TracerArrayConversionError(self, f"at {user_frame_summary()}")
        return np.asarray(value, dtype=dtype)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self):
        raise TypeError(f"unhashable type: {type(self).__name__} (traced arrays are not hashable)")

    def __repr__(self):
        return f"Traced<{self.aval}>with<{self._trace!r}>"

    def __reduce__(self):
        raise TypeError("traced values cannot be pickled")


def concrete_or_error(x, context: str = ""):
    """`x` as a concrete value; raises ConcretizationTypeError naming `context` if traced."""
    if isinstance(x, Tracer):
        value = x.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(x, f"{context} at {user_frame_summary()}")
        return value
    return x


def is_concrete(x) -> bool:
    return not isinstance(x, Tracer) or x.to_concrete_value() is not None


# ---------------------------------------------------------------------------------------------
# The IR

class Var:
    """A typed variable of a jaxpr. Names are given when the jaxpr is printed."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Var({self.aval.str_short()})"


class DropVar(Var):
    """An output that nothing reads (printed as `_`)."""
    __slots__ = ()


class Literal:
    """A scalar constant written inline in a jaxpr."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.val!r})"

    def pretty(self) -> str:
        v = self.val
        if isinstance(v, (np.generic, np.ndarray)):
            v = v.item()
        text = str(v) if not isinstance(v, bool) else str(v)
        return f"{text}:{self.aval.str_short()}"


class JaxprEqn:
    __slots__ = ("invars", "outvars", "primitive", "params", "source_info")

    def __init__(self, invars, outvars, primitive, params, source_info=None):
        self.invars = invars
        self.outvars = outvars
        self.primitive = primitive
        self.params = params
        self.source_info = source_info

    def replace(self, **kw) -> "JaxprEqn":
        fields = {s: getattr(self, s) for s in self.__slots__}
        fields.update(kw)
        return JaxprEqn(**fields)

    def __repr__(self):
        return pp_eqn(self, _Names())


class Jaxpr:
    """A typed, first-order program: constvars, invars, equations and outvars."""

    __slots__ = ("constvars", "invars", "outvars", "eqns", "effects", "debug_info")

    def __init__(self, constvars, invars, outvars, eqns, effects=frozenset(), debug_info=None):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)
        self.effects = effects
        self.debug_info = debug_info

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    def __str__(self):
        return pp_jaxpr(self)

    __repr__ = __str__

    def pretty_print(self, **_) -> str:
        return pp_jaxpr(self)


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars."""

    __slots__ = ("jaxpr", "consts")

    def __init__(self, jaxpr: Jaxpr, consts: Sequence):
        self.jaxpr = jaxpr
        self.consts = list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __str__(self):
        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__

    def pretty_print(self, **_) -> str:
        return pp_jaxpr(self.jaxpr)


# ---------------------------------------------------------------------------------------------
# Pretty-printing, in JAX's format

class _Names:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.counter = itertools.count()

    def __call__(self, v) -> str:
        if isinstance(v, Literal):
            return v.pretty()
        if isinstance(v, DropVar):
            return "_"
        name = self.names.get(id(v))
        if name is None:
            name = self.names[id(v)] = _encode_name(next(self.counter))
        return name


def _encode_name(i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    name = ""
    i += 1
    while i > 0:
        i, r = divmod(i - 1, 26)
        name = letters[r] + name
    return name


def _pp_binder(v, names) -> str:
    return f"{names(v)}:{v.aval.str_short()}"


def _pp_param(value, names, indent) -> str:
    if isinstance(value, (Jaxpr, ClosedJaxpr)):
        jaxpr = value.jaxpr if isinstance(value, ClosedJaxpr) else value
        return pp_jaxpr(jaxpr, indent + 2, _Names()).lstrip()
    if isinstance(value, tuple) and value and all(isinstance(v, (Jaxpr, ClosedJaxpr)) for v in value):
        inner = [_pp_param(v, names, indent + 2) for v in value]
        pad = " " * (indent + 2)
        return "(\n" + pad + ("\n" + pad).join(inner) + "\n" + " " * indent + ")"
    if isinstance(value, np.dtype):
        return value.name
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return str(value)


def pp_eqn(eqn: JaxprEqn, names: _Names, indent: int = 4) -> str:
    ins = " ".join(names(v) for v in eqn.invars)
    params = ""
    if eqn.params:
        items = [f"{k}={_pp_param(v, names, indent + 2)}" for k, v in sorted(eqn.params.items())]
        if any("\n" in it for it in items):
            pad = " " * (indent + 2)
            params = "[\n" + pad + ("\n" + pad).join(items) + "\n" + " " * indent + "]"
        else:
            params = "[" + " ".join(items) + "]"
    outs = " ".join(_pp_binder(v, names) for v in eqn.outvars)
    return f"{outs} = {eqn.primitive.name}{params} {ins}".rstrip()


def pp_jaxpr(jaxpr: Jaxpr, indent: int = 0, names: _Names | None = None) -> str:
    names = names or _Names()
    consts = " ".join(_pp_binder(v, names) for v in jaxpr.constvars)
    args = " ".join(_pp_binder(v, names) for v in jaxpr.invars)
    head = f"{{ lambda {consts}; {args}. let"
    eqns = [pp_eqn(e, names, indent + 4) for e in jaxpr.eqns]
    outs = "(" + "".join(names(v) + ", " for v in jaxpr.outvars).rstrip(" ")
    outs = outs + ")"
    if len(eqns) <= 1 and not any("\n" in e for e in eqns):
        body = f" {eqns[0]} " if eqns else " "
        return f"{' ' * indent}{head}{body}in {outs} }}"
    pad = " " * (indent + 4)
    body = "\n" + "\n".join(pad + e for e in eqns) + "\n"
    return f"{' ' * indent}{head}{body}{' ' * (indent + 2)}in {outs} }}"


# ---------------------------------------------------------------------------------------------
# Evaluation and checking

def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence, *args, propagate_source_info: bool = True) -> list:
    """Interpret a jaxpr by binding each equation's primitive at the current trace."""
    env: dict[int, Any] = {}

    def read(v):
        return v.val if type(v) is Literal else env[id(v)]

    for v, x in zip(jaxpr.constvars, consts):
        env[id(v)] = x
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    for v, x in zip(jaxpr.invars, args):
        env[id(v)] = x
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        out = eqn.primitive.bind(*ins, **eqn.params)
        if eqn.primitive.multiple_results:
            for v, x in zip(eqn.outvars, out):
                env[id(v)] = x
        else:
            env[id(eqn.outvars[0])] = out
    return [read(v) for v in jaxpr.outvars]


def jaxpr_as_fun(closed: ClosedJaxpr) -> Callable:
    return lambda *args: eval_jaxpr(closed.jaxpr, closed.consts, *args)


class JaxprTypeError(TypeError):
    pass


def check_jaxpr(jaxpr: Jaxpr) -> None:
    """Check that every variable is defined once before use and that every equation's output
    types are what its primitive's abstract evaluation gives. Raises JaxprTypeError."""
    defined: set[int] = set()

    def define(v):
        if isinstance(v, DropVar):
            return
        if id(v) in defined:
            raise JaxprTypeError(f"variable {v} defined twice")
        defined.add(id(v))

    def read(v, where):
        if isinstance(v, Literal):
            return v.aval
        if id(v) not in defined:
            raise JaxprTypeError(f"variable {v} used before definition in {where}")
        return v.aval

    for v in itertools.chain(jaxpr.constvars, jaxpr.invars):
        define(v)
    for eqn in jaxpr.eqns:
        in_avals = [read(v, eqn.primitive.name) for v in eqn.invars]
        if eqn.primitive.abstract_eval is not None:
            out_avals = eqn.primitive.abstract_eval_avals(in_avals, eqn.params)
            got = [v.aval for v in eqn.outvars]
            if len(out_avals) != len(got) or any(
                    a.strip_weak_type() != b.strip_weak_type() for a, b in zip(out_avals, got)):
                raise JaxprTypeError(f"equation {eqn.primitive.name} has output types {got} "
                                     f"but its rule gives {out_avals}")
        for sub in _subjaxprs(eqn.params):
            check_jaxpr(sub)
        for v in eqn.outvars:
            define(v)
    for v in jaxpr.outvars:
        read(v, "outputs")


def _subjaxprs(params):
    for value in params.values():
        if isinstance(value, ClosedJaxpr):
            yield value.jaxpr
        elif isinstance(value, Jaxpr):
            yield value
        elif isinstance(value, tuple):
            for v in value:
                if isinstance(v, ClosedJaxpr):
                    yield v.jaxpr
                elif isinstance(v, Jaxpr):
                    yield v


subjaxprs = _subjaxprs
