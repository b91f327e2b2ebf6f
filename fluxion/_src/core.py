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

from fluxion._src import basearray, dtypes
from fluxion._src import pretty_printer as pp
from fluxion._src.export.shape_poly import DimExpr, shape_size  # noqa: F401
from fluxion._src.errors import (ConcretizationTypeError, TracerArrayConversionError,
                                 TracerBoolConversionError, TracerIntegerConversionError,
                                 UnexpectedTracerError)


# ---------------------------------------------------------------------------------------------
# Abstract values

_MAX_BYTES = np.iinfo(np.int64).max


def canonicalize_dim(d):
    """A dimension as an int, or as is when symbolic (shape polymorphism's `DimExpr`)."""
    return d if type(d) is DimExpr else operator.index(d)


def _check_size_fits(shape: tuple, dtype: np.dtype) -> None:
    """XLA aborts the process on shapes whose size in bytes overflows int64; refuse them."""
    size = 1
    for d in shape:
        if type(d) is DimExpr:
            return
        size *= d
    if size * dtype.itemsize > _MAX_BYTES:
        raise ValueError(f"Shape {shape} of {dtype.name} has {size} elements, more than any "
                         f"array can hold (at most 2**63 - 1 bytes).")


class ShapedArray:
    """The abstract value of an array: shape, dtype and weak type (JAX's `core.ShapedArray`).

    Instances are interned: equal avals are the same object, so hashing and equality are
    identity (C speed) in the caches that key on avals, such as jit's dispatch cache.
    """

    __slots__ = ("shape", "dtype", "weak_type")
    array_abstraction_level = 1
    _interned: dict = {}

    def __new__(cls, shape, dtype, weak_type: bool = False):
        interned = ShapedArray._interned
        try:
            return interned[(shape, dtype, weak_type)]
        except (KeyError, TypeError):  # TypeError: a list for a shape
            pass
        shape = tuple(map(canonicalize_dim, shape))
        weak_type = bool(weak_type)
        canonical = (shape, np.dtype(dtype), weak_type)
        aval = interned.get(canonical)
        if aval is None:
            _check_size_fits(shape, canonical[1])
            aval = object.__new__(cls)
            aval.shape, aval.dtype, aval.weak_type = canonical
            interned[canonical] = aval
        try:
            interned[(shape, dtype, weak_type)] = aval
        except TypeError:
            pass
        return aval

    def __reduce__(self):
        return ShapedArray, (self.shape, self.dtype, self.weak_type)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: shape_size(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: shape_size(self.shape) * self.dtype.itemsize)

    @property
    def sharding(self):
        """The type's sharding: over an empty AbstractMesh, every dimension unsharded (the
        sharding of any value outside a mesh with Explicit axes, as in JAX)."""
        from fluxion._src.sharding_impls import unsharded_type_sharding
        return unsharded_type_sharding(len(self.shape))

    def update(self, shape=None, dtype=None, weak_type=None) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak_type(self) -> "ShapedArray":
        return self.update(weak_type=False) if self.weak_type else self

    def str_short(self, short_dtypes: bool = True) -> str:
        name = short_dtype_name(self.dtype) if short_dtypes else self.dtype.name
        return f"{name}[{','.join(str(d) for d in self.shape)}]"

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short(short_dtypes=False)}{weak})"

    def __str__(self):
        return ("~" if self.weak_type else "") + self.str_short(short_dtypes=False)

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
    return ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype, allow_extended=True), False)


def _conversion_context(what: str) -> str:
    """Where a concrete value was asked for; for int/float/complex, JAX's hint to cast."""
    hint = (f" If trying to convert the data type of a value, try using `x.astype({what})` or "
            f"`jnp.array(x, {what})` instead." if what in ("int", "float", "complex") else "")
    return f"The problem arose with the `{what}` function, at {user_frame_summary()}.{hint}"


def check_integer_conversion(aval) -> None:
    """JAX's TypeError for `operator.index` of anything but an integer scalar (booleans
    included), raised before a tracer's value is asked for."""
    if aval.shape != () or not dtypes.is_integer(aval.dtype):
        raise TypeError("Only integer scalar arrays can be converted to a scalar index.")


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
    base = dtypes.python_scalar_base(x)  # a subclass (an IntEnum member) is its base type
    if base is not None:
        return _scalar_aval(base(x))
    if getattr(x, "__jax_array__", None) is not None:
        raise ValueError("Triggering __jax_array__() during abstractification is no longer "
                         "supported. To avoid this error, either explicitly convert your object "
                         "using fluxion.numpy.array(), or register your object as a pytree.")
    raise TypeError(f"Value {x!r} of type {type(x).__name__} is not a valid fluxion type: "
                    "expected an array, a NumPy value or a Python scalar.")


# The types of abstract values primitives may return: ShapedArray, and those other modules add
# (the state module's AbstractRef) with `register_aval_type`.
aval_types: tuple = (ShapedArray,)


def register_aval_type(cls: type) -> None:
    global aval_types
    if cls not in aval_types:
        aval_types = aval_types + (cls,)


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
        trace = _trace_state.trace
        if trace is eval_trace and self.impl is None:  # the eager path, shortened
            return apply_primitive(self, args, params)
        return trace.process_primitive(self, args, params)

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
        try:
            out = self.abstract_eval(*avals, **params)
        except (TypeError, ValueError) as e:  # a shape or dtype error: say where and on what
            note_user_line(e, self.name, avals)
            raise
        outs = list(out) if self.multiple_results else [out]
        if not all(isinstance(o, aval_types) for o in outs):
            raise TypeError(f"abstract evaluation rule of '{self.name}' returned {out!r}; it "
                            "must return a ShapedArray (a list of them with multiple_results)")
        return outs


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

    def __reduce__(self):
        return "eval_trace"  # the one instance, by reference (pickled jitted functions)

    def process_primitive(self, primitive, args, params):
        impl = primitive.impl
        if impl is None:
            # No def_impl (lax's primitives, a user's): compile the lowering alone. A leaked
            # tracer among the arguments raises when its device buffer is asked for.
            return apply_primitive(primitive, args, params)
        for x in args:
            if isinstance(x, Tracer):
                raise escaped_tracer_error(x)
        return impl(*args, **params)


class _TraceState(threading.local):
    def __reduce__(self):
        return "_trace_state"  # the one instance, by reference (pickled jitted functions)

    def __init__(self):
        self.trace: Trace = eval_trace
        # While a jaxpr is re-evaluated (eval_jaxpr, transposition), the source info of the
        # equation being evaluated: equations it stages keep pointing at the user's line.
        self.source_info = None


apply_primitive: Callable = None  # set by dispatch, which builds on core
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
    if getattr(trace, "is_live", False):
        return inner_tracer_error(tracer)
    origin = getattr(trace, "origin", None) or "a transformation"
    return UnexpectedTracerError(
        f"Encountered an unexpected tracer: {tracer!r}. It was created by {origin}, which has "
        "already finished, and leaked out of it (for example by being stored in a global, a "
        "closure or an object attribute that outlived the transformed function). Return the "
        "value from the function instead of storing it.")


def inner_tracer_error(tracer) -> UnexpectedTracerError:
    """A tracer of a transformation reaching a transformation that encloses it: the enclosing
    one would treat it as a constant and silently drop what the inner one tracks."""
    origin = getattr(getattr(tracer, "_trace", None), "origin", None) or "a transformation"
    return UnexpectedTracerError(
        f"Encountered an unexpected tracer: {tracer!r}. It belongs to {origin}, which is still "
        "running, but reached a transformation that encloses it (for example through a "
        "closure: a custom_jvp or custom_vjp function closing over a value that is being "
        "differentiated). Pass the value to the function as an argument instead.")


def user_frame_summary() -> str:
    """'file:line:column (function)' of the innermost stack frame outside fluxion, for error
    messages."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_internal_file(filename):
            return location_summary(filename, frame.f_lineno, frame_column(frame),
                                    qualified_name(frame.f_code))
        frame = frame.f_back
    return "<unknown>"


def frame_column(frame) -> int:
    """The 0-based column where the expression a frame is executing starts (0 if unknown)."""
    code, index = frame.f_code, frame.f_lasti // 2
    for i, (_, _, column, _) in enumerate(code.co_positions()):
        if i == index:
            return column or 0
    return 0


def qualified_name(code) -> str:
    return getattr(code, "co_qualname", code.co_name)


def location_summary(file: str, line: int, column: int, function: str) -> str:
    """A source location as JAX summarizes one: `file:line:column (function)`, without the
    column where it is 0."""
    where = f"{file}:{line}:{column}" if column else f"{file}:{line}"
    return f"{where} ({function})"


def note_user_line(e: BaseException, op_name: str | None = None, avals=None) -> None:
    """Add a note to `e` naming the user's line that made `op_name` fail (once per error)."""
    if getattr(e, "_fluxion_user_line", False):
        return
    try:
        e._fluxion_user_line = True
    except AttributeError:
        return
    operands = ""
    if avals:
        operands = " on operands " + ", ".join(
            a.str_short() if isinstance(a, ShapedArray) else repr(a) for a in avals)
    what = f"{op_name}{operands} " if op_name else ""
    e.add_note(f"{what}at {user_frame_summary()}".strip())


def _is_internal_file(filename: str) -> bool:
    return (f"{_PACKAGE_DIR}" in filename and "/tests/" not in filename[len(_PACKAGE_DIR):]) or (
        filename.startswith("<frozen") or "contextlib.py" in filename)


import os as _os  # noqa: E402
_PACKAGE_DIR = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))


def check_bool_conversion(x) -> None:
    """Raise numpy's ValueError for the truth value of an empty or multi-element array."""
    if x.size == 0:
        raise ValueError("The truth value of an empty array is ambiguous. Use `array.size > 0` "
                         "to check that an array is not empty.")
    if x.size > 1:
        raise ValueError("The truth value of an array with more than one element is ambiguous. "
                         "Use a.any() or a.all()")


def check_scalar_conversion(x) -> None:
    """Raise TypeError when int/float/complex is asked of an array that is not a scalar."""
    if x.ndim != 0:
        raise TypeError(f"Only scalar arrays can be converted to Python scalars; got "
                        f"arr.ndim={x.ndim}")


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

    @property
    def sharding(self):
        raise AttributeError(
            f"The 'sharding' attribute is not available on traced array with shape "
            f"{self.aval.str_short()}. To query sharding information on tracers, use "
            "`jax.typeof(x)`.")

    @property
    def _buf(self):
        # Reached when a leaked tracer meets jit's fast path, which reads device buffers.
        raise escaped_tracer_error(self)

    def to_concrete_value(self):
        """The concrete value this tracer stands for, when the trace knows it; else None."""
        return None

    def _concrete_or_raise(self, error_cls, what: str):
        value = self.to_concrete_value()
        if value is None:
            raise error_cls(self, _conversion_context(what))
        return value

    def __bool__(self):
        check_bool_conversion(self)
        return bool(self._concrete_or_raise(TracerBoolConversionError, "bool"))

    def __int__(self):
        check_scalar_conversion(self)
        return int(self._concrete_or_raise(ConcretizationTypeError, "int"))

    # float(), complex() and np.asarray() never read a tracer's known value, as in JAX: under
    # grad it would be the primal alone, and the derivative through it silently zero.
    def __float__(self):
        check_scalar_conversion(self)
        raise ConcretizationTypeError(self, _conversion_context("float"))

    def __complex__(self):
        check_scalar_conversion(self)
        raise ConcretizationTypeError(self, _conversion_context("complex"))

    def __index__(self):
        check_integer_conversion(self.aval)
        value = self.to_concrete_value()
        if value is None:
            raise TracerIntegerConversionError(self, f"at {user_frame_summary()}")
        return operator.index(value)

    def __array__(self, dtype=None, copy=None):
        raise TracerArrayConversionError(self, f"at {user_frame_summary()}")

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

    def _short_repr(self) -> str:
        """The tracer as JAX prints it; each kind of tracer names itself."""
        return f"{type(self).__name__}<{self.aval}>"

    def __repr__(self):
        return self._short_repr()

    def __reduce__(self):
        raise ConcretizationTypeError(
            self, "The error occurred in __reduce__: traced values cannot be pickled "
                  "(serialize the concrete result outside the transformation instead).")


basearray.Array.register(Tracer)  # isinstance(tracer, fluxion.Array), as in JAX


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
        return f"Var(id={id(self)}):{self.aval.str_short(short_dtypes=False)}"  # as JAX's


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
        if not isinstance(v, (bool, int, float, complex, Tracer)):
            v = np.asarray(v).item()
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
        return pp_eqn(self)


class Jaxpr:
    """A typed, first-order program: constvars, invars, equations and outvars."""

    __slots__ = ("constvars", "invars", "outvars", "eqns", "debug_info")

    def __init__(self, constvars, invars, outvars, eqns, effects=None, debug_info=None):
        # `effects` is accepted for JAX compatibility; they are always read off the equations.
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)
        self.debug_info = debug_info

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    @property
    def effects(self) -> frozenset:
        """The effects of the equations, nested jaxprs included (as JAX's `Jaxpr.effects`)."""
        from fluxion._src import effects
        return effects.jaxpr_effects(self)

    def replace(self, **fields) -> "Jaxpr":
        """A copy with some of constvars, invars, outvars, eqns, effects, debug_info replaced."""
        fields.pop("effects", None)  # read off the equations
        unknown = set(fields) - set(self.__slots__)
        if unknown:
            raise TypeError(f"Jaxpr.replace() got unexpected keyword arguments {sorted(unknown)}")
        current = {name: getattr(self, name) for name in self.__slots__}
        return Jaxpr(**{**current, **fields})

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

    literals = property(lambda self: self.consts)  # JAX's alias
    constvars = property(lambda self: self.jaxpr.constvars)
    invars = property(lambda self: self.jaxpr.invars)
    outvars = property(lambda self: self.jaxpr.outvars)
    debug_info = property(lambda self: self.jaxpr.debug_info)
    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)
    effects = property(lambda self: self.jaxpr.effects)

    def map_jaxpr(self, f) -> "ClosedJaxpr":
        """`f` applied to the jaxpr, with the same consts."""
        return ClosedJaxpr(f(self.jaxpr), self.consts)

    def replace(self, *, jaxpr=None, consts=None) -> "ClosedJaxpr":
        return ClosedJaxpr(self.jaxpr if jaxpr is None else jaxpr,
                           self.consts if consts is None else consts)

    def __str__(self):
        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__

    def pretty_print(self, **_) -> str:
        return pp_jaxpr(self.jaxpr)


# ---------------------------------------------------------------------------------------------
# Pretty-printing, in JAX's format

class PpContext:
    """Names variables as they are first printed (a, b, ..., z, ba, ...), across nested jaxprs.

    Jaxprs that occur more than once, or nested ones with many equations, are printed once
    before the top-level jaxpr (`let name = { ... } in`) and referred to by name."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.keep_alive: list = []  # names are keyed by id(); keep the objects alive meanwhile
        self.counter = itertools.count()
        self.shared_jaxprs: dict[int, str] = {}
        self.shared_names: set[str] = set()

    def __call__(self, v) -> str:
        if isinstance(v, Literal):
            return v.pretty()
        if isinstance(v, DropVar):
            return "_"
        name = self.names.get(id(v))
        if name is None:
            name = self.names[id(v)] = self._fresh()
            self.keep_alive.append(v)
        return name

    def _fresh(self) -> str:
        while True:
            name = _encode_name(next(self.counter))
            if name not in self.shared_names:
                return name

    def suggest_same_names(self, inner_vars, outer_vars) -> None:
        """Name a sub-jaxpr's binders after the outer atoms they stand for (as JAX does for jit)."""
        if len(inner_vars) != len(outer_vars):
            return
        used = set()
        for inner, outer in zip(inner_vars, outer_vars):
            if (type(outer) is Var and id(outer) not in used and type(inner) is Var
                    and id(inner) not in self.names):
                used.add(id(outer))
                self.names[id(inner)] = self(outer)
                self.keep_alive.append(inner)


# primitive -> rule(eqn, context) -> pp.Doc, for primitives that print specially (e.g. `jit`)
pp_eqn_rules: dict = {}


def _encode_name(i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    name = ""
    while not name or i:
        i, r = divmod(i, 26)
        name = letters[r] + name
    return name


def pp_vars(vs, context: PpContext, separator: str = "", print_shapes: bool = False) -> pp.Doc:
    items = [pp.text(context(v) + (":" + v.aval.str_short() if print_shapes else "")) for v in vs]
    return pp.nest(2, pp.group(pp.join(pp.text(separator) + pp.group(pp.brk()), items)))


def _pp_param(value, context: PpContext) -> pp.Doc:
    if isinstance(value, (Jaxpr, ClosedJaxpr)):
        return pp_jaxpr_doc(value.jaxpr if isinstance(value, ClosedJaxpr) else value, context)
    if isinstance(value, tuple) and value and all(isinstance(v, (Jaxpr, ClosedJaxpr)) for v in value):
        inner = [_pp_param(v, context) for v in value]
        return pp.group(pp.nest(2, pp.text("(") + pp.brk("") + pp.join(pp.brk(), inner))
                        + pp.brk("") + pp.text(")"))
    if isinstance(value, np.dtype):
        return pp.text(value.name)
    if callable(value) and hasattr(value, "__name__"):
        return pp.text(value.__name__)
    return pp.text(str(value))


def pp_params(params: dict, context: PpContext, order: Sequence[str] | None = None) -> pp.Doc:
    keys = sorted(params) if order is None else order
    if not keys:
        return pp.nil
    items = [pp.text(f"{k}=") + _pp_param(params[k], context) for k in keys]
    return pp.group(pp.nest(2, pp.text("[") + pp.brk("") + pp.join(pp.brk(), items))
                    + pp.brk("") + pp.text("]"))


def pp_eqn_default(eqn: JaxprEqn, context: PpContext,
                   param_order: Sequence[str] | None = None) -> pp.Doc:
    """`outs = prim[params] ins`, params sorted by name unless `param_order` lists them."""
    lhs = pp_vars(eqn.outvars, context, print_shapes=True)
    rhs = [pp.text(eqn.primitive.name), pp_params(eqn.params, context, param_order),
           pp.text(" ") + pp_vars(eqn.invars, context)]
    if not eqn.outvars:
        return pp.concat(rhs)
    return pp.concat([lhs, pp.text(" = "), *rhs])


def pp_eqn_doc(eqn: JaxprEqn, context: PpContext) -> pp.Doc:
    rule = pp_eqn_rules.get(eqn.primitive, pp_eqn_default)
    return rule(eqn, context)


def pp_eqn(eqn: JaxprEqn, context: PpContext | None = None) -> str:
    return pp_eqn_doc(eqn, context or PpContext()).format()


def _pp_jaxpr_skeleton(jaxpr: Jaxpr, context: PpContext) -> pp.Doc:
    constvars = pp_vars(jaxpr.constvars, context, print_shapes=True)
    invars = pp_vars(jaxpr.invars, context, print_shapes=True)
    eqns = pp.join(pp.brk("; "), [pp_eqn_doc(e, context) for e in jaxpr.eqns])
    outvars = pp.concat([pp.text("("), pp_vars(jaxpr.outvars, context, separator=","),
                         pp.text(",)" if len(jaxpr.outvars) == 1 else ")")])
    body = pp.concat([pp.text("{ lambda "), constvars, pp.text("; "), invars, pp.text(". let"),
                      pp.nest(2, pp.brk() + eqns), pp.brk(), pp.text("in "), outvars])
    return pp.group(pp.nest(2, body) + pp.text(" }"))  # " }" inside the group, as JAX's


def pp_jaxpr_doc(jaxpr: Jaxpr, context: PpContext) -> pp.Doc:
    name = context.shared_jaxprs.get(id(jaxpr))
    if name is not None:
        return pp.text(name)
    return _pp_jaxpr_skeleton(jaxpr, context)


def _share_jaxprs(top: Jaxpr, context: PpContext) -> list[tuple[str, Jaxpr]]:
    """The sub-jaxprs printed once up front: those used twice, and big nested ones."""
    counts: dict[int, int] = {}
    jaxprs: dict[int, Jaxpr] = {}
    names: dict[int, str] = {}
    queue = [top]
    while queue:
        jaxpr = queue.pop(0)
        jaxprs[id(jaxpr)] = jaxpr
        big = jaxpr is not top and len(jaxpr.eqns) > 10
        counts[id(jaxpr)] = counts.get(id(jaxpr), 0) + (2 if big else 1)
        for eqn in jaxpr.eqns:
            name = eqn.params.get("name")
            for sub in _subjaxprs(eqn.params):
                queue.append(sub)
                if isinstance(name, str):
                    names.setdefault(id(sub), name.strip("<>"))
    used: dict[str, int] = {}
    shared = []
    for key, count in counts.items():
        if count == 1:
            continue
        name = names.get(key, "jaxpr")
        n = used.get(name, 0)
        used[name] = n + 1
        if n:
            name += str(n)
            used[name] = used.get(name, 0) + 1
        context.shared_names.add(name)
        context.shared_jaxprs[key] = name
        shared.append((name, jaxprs[key]))
    return shared


def _name_unused_binders(jaxpr: Jaxpr, context: PpContext) -> None:
    """Print the top-level equations' outputs that nothing reads as `_`, as JAX does."""
    used = {id(v) for v in jaxpr.outvars if type(v) is Var}
    for eqn in reversed(jaxpr.eqns):
        for v in eqn.outvars:
            if type(v) is Var and id(v) not in used:
                context.names[id(v)] = "_"
                context.keep_alive.append(v)
        used.update(id(v) for v in eqn.invars if type(v) is Var)


def pp_jaxpr(jaxpr: Jaxpr, width: int = 80) -> str:
    """`jaxpr` in JAX's text format."""
    context = PpContext()
    _name_unused_binders(jaxpr, context)
    docs = []
    for name, sub in _share_jaxprs(jaxpr, context):
        docs += [pp.text(f"let {name} = "), _pp_jaxpr_skeleton(sub, context), pp.text(" in"), pp.brk()]
    docs.append(_pp_jaxpr_skeleton(jaxpr, context))
    return pp.concat(docs).format(width)


# ---------------------------------------------------------------------------------------------
# Evaluation and checking

def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence, *args, propagate_source_info: bool = True) -> list:
    """Interpret a jaxpr by binding each equation's primitive at the current trace.

    `propagate_source_info` is accepted for JAX compatibility: equations always run under
    their own source info."""
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    return eval_jaxpr_with(jaxpr, consts, args, _bind_equation)


def _bind_equation(eqn: JaxprEqn, ins: list) -> Sequence:
    out = eqn.primitive.bind(*ins, **eqn.params)
    return out if eqn.primitive.multiple_results else (out,)


def eval_jaxpr_with(jaxpr: Jaxpr, consts: Sequence, args: Sequence,
                    eval_eqn: Callable[[JaxprEqn, list], Sequence]) -> list:
    """Interpret a jaxpr, each equation's outputs computed by `eval_eqn(eqn, inputs)`.

    The interpreters that do more than bind (checkify's error threading, debug_nans' re-run)
    share this loop; each equation runs under its own source info, as in `eval_jaxpr`."""
    env: dict[int, Any] = {}

    def read(v):
        return v.val if type(v) is Literal else env[id(v)]

    for v, x in zip(jaxpr.constvars, consts):
        env[id(v)] = x
    for v, x in zip(jaxpr.invars, args):
        env[id(v)] = x
    state = _trace_state
    outer_info = state.source_info
    try:
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            state.source_info = eqn.source_info or outer_info
            for v, x in zip(eqn.outvars, eval_eqn(eqn, ins)):
                env[id(v)] = x
    finally:
        state.source_info = outer_info
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


# ---------------------------------------------------------------------------------------------
# Structural identity of jaxprs, for caches that must not depend on object identity

class _Identity:
    """A hashable stand-in comparing `obj` by identity (and keeping it alive)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is _Identity and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


def _literal_key(lit: Literal) -> tuple:
    value = np.asarray(lit.val)
    return ("literal", lit.aval, value.dtype, value.tobytes())  # bytes tell -0.0 from 0.0


def _param_key(value):
    if isinstance(value, ClosedJaxpr):
        return ("closed", jaxpr_fingerprint(value.jaxpr),
                tuple(_Identity(c) for c in value.consts))
    if isinstance(value, Jaxpr):
        return ("jaxpr", jaxpr_fingerprint(value))
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_param_key(v) for v in value))
    if value is None or isinstance(value, (bool, int, float, complex, str, np.dtype, ShapedArray,
                                           np.generic)):
        return value if not isinstance(value, float) else (float, repr(value))
    structural_key = getattr(type(value), "structural_key", None)
    if structural_key is not None:  # objects holding jaxprs that say how to compare them
        return (type(value), structural_key(value))
    return _Identity(value)  # functions, arrays and anything else: by identity


def jaxpr_fingerprint(jaxpr: Jaxpr) -> tuple:
    """A hashable value that two jaxprs share when they compute the same thing in the same way.

    Variables are numbered by first appearance; avals, primitives and plain-data params are
    compared by value, nested jaxprs by their fingerprints, and functions and constant values
    by identity. Equal fingerprints mean one compiled executable serves both jaxprs."""
    numbers: dict[int, int] = {}

    def atom(x):
        if isinstance(x, Literal):
            return _literal_key(x)
        return numbers[id(x)]

    def bind(v):
        numbers[id(v)] = len(numbers)
        return v.aval

    head = (tuple(bind(v) for v in jaxpr.constvars), tuple(bind(v) for v in jaxpr.invars))
    eqns = tuple(
        (eqn.primitive, tuple(atom(x) for x in eqn.invars),
         tuple(sorted((k, _param_key(v)) for k, v in eqn.params.items())),
         tuple(bind(v) for v in eqn.outvars))
        for eqn in jaxpr.eqns)
    return head, eqns, tuple(atom(x) for x in jaxpr.outvars)


def structural_params_key(params: dict):
    """`params` as a hashable key with their jaxprs compared structurally; None when no param
    holds a jaxpr (then the params themselves are the key)."""
    if not any(True for _ in _subjaxprs(params)):
        return None
    return tuple((k, _param_key(v)) for k, v in params.items())
