"""Sharding in types on `Explicit` mesh axes (JAX's "explicit sharding").

On a mesh whose axes are `AxisType.Explicit`, the layout of every value is part of its type:
each primitive has a sharding rule that gives its result's sharding from its operands', and
ambiguous cases raise `ShardingTypeError`. fluxion's avals stay (shape, dtype, weak_type) (they
are interned and key every cache), so the shardings are computed by a separate pass over a
jaxpr (`infer_jaxpr`) or one primitive (`infer_primitive`) with the rules of
sharding_rules.py. Its results fix the output shardings of sharded programs: jit's and those
of eager primitives.

A spec here is a tuple with one entry per dimension: the tuple of explicit mesh axes the
dimension is split over (empty: not split).
"""
from __future__ import annotations

import math
import threading

from fluxion._src import core, dtypes
from fluxion._src.core import ClosedJaxpr, Literal
from fluxion._src.mesh import AxisType, PartitionSpec


class ShardingTypeError(Exception):
    """An operation whose result sharding on Explicit mesh axes is ambiguous or inconsistent."""


class Deferred:
    """The spec of a result whose sharding is ambiguous: an error unless an `out_sharding`
    (a sharding constraint right after it) resolves it."""

    __slots__ = ("message",)

    def __init__(self, message: str):
        self.message = message

    def error(self) -> ShardingTypeError:
        return ShardingTypeError(self.message)


def explicit_names(mesh) -> frozenset:
    return frozenset(n for n, t in zip(mesh.axis_names, mesh.axis_types)
                     if t is AxisType.Explicit)


def has_explicit_axes(mesh) -> bool:
    return mesh is not None and AxisType.Explicit in mesh.axis_types


def unsharded(ndim: int) -> tuple:
    return ((),) * ndim


def spec_of(sharding, ndim: int, explicit) -> tuple:
    """The spec (explicit axes only) of a value of rank `ndim` laid out as `sharding` (a
    NamedSharding or a PartitionSpec; anything else is unsharded)."""
    spec = sharding if isinstance(sharding, PartitionSpec) else getattr(sharding, "spec", None)
    if spec is None:
        return unsharded(ndim)
    return tuple(tuple(a for a in spec.axes_of(d) if a in explicit) for d in range(ndim))


def to_partition_spec(spec: tuple) -> PartitionSpec:
    return PartitionSpec(*[_entry(e) for e in spec])


def _entry(e: tuple):
    return None if not e else e[0] if len(e) == 1 else tuple(e)


def _fmt(spec: tuple) -> str:
    """A spec as JAX writes its partitions in messages: ('x', None)."""
    return repr(tuple(_entry(e) for e in spec))


def pspec_string(spec: tuple) -> str:
    """A spec as JAX prints a PartitionSpec: P('x', None)."""
    return "P(" + ", ".join(repr(_entry(e)) for e in spec) + ")"


def type_string(aval, spec: tuple, short_dtypes: bool = True) -> str:
    """`f32[8@x,4@y]`: the shape with each dimension's mesh axes."""
    dims = []
    for n, e in zip(aval.shape, spec):
        if not e:
            dims.append(str(n))
        elif len(e) == 1:
            dims.append(f"{n}@{e[0]}")
        else:
            dims.append(f"{n}@({','.join(e)})")
    name = core.short_dtype_name(aval.dtype) if short_dtypes else aval.dtype.name
    return f"{name}[{','.join(dims)}]"


class ShapedArrayWithSharding(core.ShapedArray):
    """What `typeof` gives for an array on a mesh with Explicit axes: its ShapedArray plus its
    sharding, printed `float32[8@x,4@y]`. (Kept apart from the interned ShapedArray: caches
    never see it.)"""

    __slots__ = ("sharding", "_spec")

    def __new__(cls, aval, sharding, spec):
        self = object.__new__(cls)
        self.shape, self.dtype, self.weak_type = aval.shape, aval.dtype, aval.weak_type
        self.sharding, self._spec = sharding, spec
        return self

    def __reduce__(self):
        return ShapedArrayWithSharding, (core.ShapedArray(self.shape, self.dtype, self.weak_type),
                                         self.sharding, self._spec)

    def str_short(self, short_dtypes: bool = False) -> str:
        return type_string(self, self._spec, short_dtypes)

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short()}{weak})"

    def __str__(self):
        return ("~" if self.weak_type else "") + self.str_short()

    def strip_sharding(self) -> core.ShapedArray:
        return core.ShapedArray(self.shape, self.dtype, self.weak_type)

    def __eq__(self, other):
        if type(other) is core.ShapedArray:  # the type of an unsharded value, as in JAX
            return not any(self._spec) and self.strip_sharding() is other
        return (type(other) is ShapedArrayWithSharding and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type
                and self.sharding == other.sharding)

    def __hash__(self):
        if not any(self._spec):
            return hash(self.strip_sharding())
        return hash((self.shape, self.dtype, self.weak_type, self.sharding))


def typeof(x):
    """The abstract value of `x`. A concrete value's carries its sharding as JAX's type does
    (`.sharding`: a NamedSharding of the abstract mesh, naming its Explicit axes only), printed
    `float32[8@x,4@y]`; so does a jit argument's while the jit traces; any other traced
    value's is the plain ShapedArray (whose `.sharding` is over an empty AbstractMesh)."""
    from fluxion._src.mesh import AbstractMesh
    from fluxion._src.random.keys import KeyShapedArray, PRNGKeyArray
    from fluxion._src.sharding_impls import NamedSharding
    if isinstance(x, PRNGKeyArray):  # a pytree over its key data, typed as JAX types keys
        return KeyShapedArray(x.shape)
    aval = core.get_aval(x)
    if type(aval) is not core.ShapedArray:
        return aval
    if isinstance(x, core.Tracer):  # only a jit's argument's sharding is known while tracing
        from fluxion._src.shard_map import jit_argument_sharding
        sharding = jit_argument_sharding(x)
        if sharding is None:
            return aval
    else:
        sharding = getattr(x, "_sharding", None)
    mesh = getattr(sharding, "mesh", None)
    spec = spec_of(sharding, len(aval.shape), explicit_names(mesh) if mesh is not None else ())
    abstract = mesh.abstract_mesh if mesh is not None else AbstractMesh((), ())
    return ShapedArrayWithSharding(aval, NamedSharding(abstract, to_partition_spec(spec)), spec)


def current_abstract_mesh():
    from fluxion._src.mesh import get_abstract_mesh
    return get_abstract_mesh()


def cotangents_like_primals(cts, primals) -> list:
    """Eager cotangents laid out (and typed) as their primals on Explicit axes, as JAX's
    backward pass gives each cotangent its primal's sharding (also a cotangent that never met
    the primal, as a linear function's, computed on one device)."""
    from fluxion._src.global_array import GlobalArray
    out = []
    for ct, p in zip(cts, primals):
        s = p._sharding if type(p) is GlobalArray else None
        placed = ct._sharding != s if type(ct) is GlobalArray else not isinstance(ct, core.Tracer)
        aval = core.get_aval(ct)
        if (s is not None and placed and has_explicit_axes(getattr(s, "mesh", None))
                and aval.shape == p.shape and aval.dtype != dtypes.float0):
            from fluxion._src.sharded_jit import reshard
            ct = reshard(ct, s)
        out.append(ct)
    return out


class Context:
    """The mesh a pass runs on: its explicit axes and their sizes."""

    def __init__(self, mesh):
        self.mesh = mesh
        self.explicit = explicit_names(mesh)
        self.sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))

    def size(self, entry: tuple) -> int:
        return math.prod(self.sizes[a] for a in entry)


# primitive -> rule(ctx, in_specs, in_avals, out_avals, params) -> list of out specs
# (sharding_rules.py fills these registries)
rules: dict = {}
fallback_rule = [None]  # for primitives without a rule
# primitives that let an ambiguous operand's spec flow through (a dtype conversion or transpose
# after an ambiguous dot keeps it resolvable by the out_sharding constraint that follows)
_passes_deferred: set = set()
_resolves_deferred: set = set()  # the sharding constraint: it settles an ambiguous operand
_backward_aware: set = set()  # rules that read _TRANSPOSED


# A key the pass adds to a dot_general's params when the equation comes from a backward pass.
# There JAX gives the cotangent its primal's sharding; here the sharded contraction sums over
# its axes (the layout of a data-parallel weight gradient), where a user's would be an error.
_TRANSPOSED = "_sharding_types_transposed"


def _from_backward_pass(source_info) -> bool:
    stack = getattr(source_info, "name_stack", "") or ""
    return "transpose" in stack


_registered = [False]


def ensure_rules():
    """Register the rules (sharding_rules.py imports the lax modules, so not at import)."""
    if not _registered[0]:
        _registered[0] = True
        from fluxion._src import sharding_rules
        sharding_rules.register()


def infer_primitive(prim, params, in_avals, in_specs, ctx: Context) -> list:
    """The out specs of one application of `prim` (Deferred entries where ambiguous), run
    eagerly (in a backward pass if the trace state's location says so)."""
    out_avals = prim.abstract_eval_avals(list(in_avals), params)
    if prim in _backward_aware and _from_backward_pass(core._trace_state.source_info):
        params = dict(params, **{_TRANSPOSED: True})
    return _apply(prim, params, list(in_avals), list(out_avals), list(in_specs), ctx)


def _apply(prim, params, in_avals, out_avals, ins, ctx):
    if prim in _resolves_deferred:
        return rules[prim](ctx, ins, in_avals, out_avals, params)
    for s in ins:
        if isinstance(s, Deferred) and prim not in _passes_deferred:
            raise s.error()
    if any(isinstance(s, Deferred) for s in ins):
        return [next(s for s in ins if isinstance(s, Deferred))] * len(out_avals)
    rule = rules.get(prim, fallback_rule[0])
    outs = rule(ctx, ins, in_avals, out_avals, params)
    for spec, aval in zip(outs, out_avals):
        if not isinstance(spec, Deferred):
            used = [a for e in spec for a in e]
            if len(used) != len(set(used)):
                raise ShardingTypeError(
                    f"{prim.name} operation with inputs: "
                    f"{', '.join(type_string(a, s) for a, s in zip(in_avals, ins))} produces an "
                    f"illegally sharded result: {type_string(aval, spec)}")
    return outs


def infer_jaxpr(jaxpr, in_specs, ctx: Context) -> list:
    """The out specs of `jaxpr` given its inputs' specs (constants are replicated)."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    env = {}

    def read(v):
        if type(v) is Literal:
            return unsharded(len(v.aval.shape))
        s = env.get(v)
        return unsharded(len(v.aval.shape)) if s is None else s

    for v, s in zip(jaxpr.invars, in_specs):
        env[v] = s
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        params = eqn.params
        if eqn.primitive in _backward_aware and _from_backward_pass(eqn.source_info):
            params = dict(params, **{_TRANSPOSED: True})
        try:
            outs = _apply(eqn.primitive, params, [v.aval for v in eqn.invars],
                          [v.aval for v in eqn.outvars], ins, ctx)
        except ShardingTypeError as e:
            raise ShardingTypeError(_with_location(str(e), eqn)) from None
        for v, s in zip(eqn.outvars, outs):
            if isinstance(s, Deferred):
                s = Deferred(_with_location(s.message, eqn))
            env[v] = s
    return [read(v) for v in jaxpr.outvars]


def _with_location(message: str, eqn) -> str:
    info = getattr(eqn, "source_info", None)
    if info is None or " (at " in message:
        return message
    return f"{message} (at {info.summary()})"


# ---------------------------------------------------------------------------------------------
# out_sharding= of an eager call: the sharding an ambiguous eager result takes

_pending = threading.local()


class pending_out_sharding:
    """While an eager function with `out_sharding` runs, ambiguous results take that layout."""

    def __init__(self, sharding):
        self.sharding = sharding

    def __enter__(self):
        self.previous = getattr(_pending, "sharding", None)
        _pending.sharding = self.sharding

    def __exit__(self, *exc):
        _pending.sharding = self.previous
        return False


def current_pending():
    return getattr(_pending, "sharding", None)


# ---------------------------------------------------------------------------------------------
# The `out_sharding=` keyword of array-making functions

def apply_out_sharding(fun, out_sharding):
    """`fun()` laid out (and typed) as `out_sharding` (sharded_jit.apply_out_sharding, which
    builds on this module)."""
    from fluxion._src.sharded_jit import apply_out_sharding as apply
    return apply(fun, out_sharding)


def accepts_out_sharding(fun):
    """Decorator: give `fun` JAX's keyword `out_sharding` (a NamedSharding, or a PartitionSpec
    of the current mesh): its result is laid out, and typed, as it says."""
    import functools
    import inspect

    from fluxion._src.traceback_util import strip_internal_frames

    @functools.wraps(fun)
    def wrapper(*args, out_sharding=None, **kwargs):
        try:
            if out_sharding is None:
                return fun(*args, **kwargs)
            if kwargs.get("device") is not None:
                raise ValueError(f"Only one of `device` or `out_sharding` can be set. Got "
                                 f"device={kwargs['device']} and out_sharding={out_sharding}")
            return apply_out_sharding(lambda: fun(*args, **kwargs), out_sharding)
        except Exception as e:  # leaves with the user's line, not fluxion's frames
            strip_internal_frames(e)
            raise

    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return wrapper
    if "out_sharding" not in sig.parameters:
        params = list(sig.parameters.values())
        extra = inspect.Parameter("out_sharding", inspect.Parameter.KEYWORD_ONLY, default=None)
        at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
        params.insert(at, extra)
        try:
            wrapper.__signature__ = sig.replace(parameters=params)
        except ValueError:
            pass
    else:
        wrapper.__signature__ = sig
    return wrapper
