"""Sharding in types on `Explicit` mesh axes (JAX's "explicit sharding").

On a mesh whose axes are `AxisType.Explicit`, the layout of every value is part of its type:
each primitive has a sharding rule that gives its result's sharding from its operands', and
ambiguous cases raise `ShardingTypeError`. fluxion's avals stay (shape, dtype, weak_type) (they
are interned and key every cache), so the shardings are computed by a separate pass over a
jaxpr (`infer_jaxpr`) or one primitive (`infer_primitive`). Its results fix the output
shardings of sharded programs: jit's and those of eager primitives.

A spec here is a tuple with one entry per dimension: the tuple of explicit mesh axes the
dimension is split over (empty: not split).
"""
from __future__ import annotations

import math
import threading

from fluxion._src import core
from fluxion._src.core import ClosedJaxpr, Jaxpr, Literal
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
        return (type(other) is ShapedArrayWithSharding and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type
                and self.sharding == other.sharding)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type, self.sharding))


def typeof(x):
    """The abstract value of `x`; for an array on a mesh with Explicit axes it carries the
    array's sharding (`float32[8@x,4@y]`)."""
    aval = core.get_aval(x)
    sharding = getattr(x, "_sharding", None) if not isinstance(x, core.Tracer) else None
    mesh = getattr(sharding, "mesh", None)
    if not has_explicit_axes(mesh):
        return aval
    spec = spec_of(sharding, len(aval.shape), explicit_names(mesh))
    return ShapedArrayWithSharding(aval, sharding, spec)


def cotangents_like_primals(cts, primals) -> list:
    """Eager cotangents laid out (and typed) as their primals on Explicit axes, as JAX's
    backward pass gives each cotangent its primal's sharding."""
    from fluxion._src.global_array import GlobalArray
    out = []
    for ct, p in zip(cts, primals):
        s = p._sharding if type(p) is GlobalArray else None
        if (s is not None and type(ct) is GlobalArray and ct._sharding != s
                and has_explicit_axes(getattr(s, "mesh", None)) and ct.shape == p.shape):
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
rules: dict = {}


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
    rule = rules.get(prim)
    if rule is None:
        rule = _call_rule if _inner_jaxpr(params, len(ins), len(out_avals)) is not None \
            else _replicated_rule
    return rule(ctx, ins, in_avals, out_avals, params)


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


def check_resolved(specs) -> list:
    for s in specs:
        if isinstance(s, Deferred):
            raise s.error()
    return specs


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
# Rules

def _replicated_rule(ctx, ins, in_avals, out_avals, params):
    return [unsharded(len(a.shape)) for a in out_avals]


def _same_as_operand_rule(ctx, ins, in_avals, out_avals, params):
    return [ins[0]] * len(out_avals)


def _each_operand_rule(ctx, ins, in_avals, out_avals, params):
    return list(ins)


def _elementwise_rule(name):
    def rule(ctx, ins, in_avals, out_avals, params):
        return [broadcast_specs(name, ins, in_avals)] * len(out_avals)
    return rule


def broadcast_specs(name, ins, in_avals) -> tuple:
    """JAX's broadcasting_sharding_rule: per dimension the operands' common entry, where a
    size-1 unsharded dimension or an unsharded one gives way to a sharded one."""
    ranked = [(s, a.shape) for s, a in zip(ins, in_avals) if a.shape]
    if not ranked:
        return ()
    ndim = len(ranked[0][1])
    out = []
    for d in range(ndim):
        entries = [s[d] for s, _ in ranked]
        if all(e == entries[0] for e in entries):
            out.append(entries[0])
            continue
        nontrivial = [s[d] for s, shape in ranked if not (shape[d] == 1 and not s[d])]
        if not nontrivial:
            out.append(())
        elif all(e == nontrivial[0] for e in nontrivial):
            out.append(nontrivial[0])
        else:
            chosen = ()
            for e in entries:
                if not chosen and e:
                    chosen = e
                elif chosen and e and e != chosen:
                    raise ShardingTypeError(
                        f"{name} got incompatible shardings for broadcasting: "
                        f"{', '.join(_fmt(s) for s, _ in ranked)}.")
            out.append(chosen)
    return tuple(out)


def _reduce_axes_rule(ctx, ins, in_avals, out_avals, params):
    axes = set(params["axes"])
    return [tuple(e for i, e in enumerate(ins[0]) if i not in axes)]


def _dot_general_rule(ctx, ins, in_avals, out_avals, params):
    lhs, rhs = ins
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    lcs, rcs = tuple(lhs[i] for i in lc), tuple(rhs[i] for i in rc)
    lbs, rbs = tuple(lhs[i] for i in lb), tuple(rhs[i] for i in rb)
    if any(l and r and l != r for l, r in zip(lbs, rbs)):
        return [Deferred(f"dot_general requires lhs batch dimensions and rhs batch dimensions "
                         f"to have the consistent sharding, got {_fmt(lbs)} and {_fmt(rbs)}.")]
    if any(l and r and l != r for l, r in zip(lcs, rcs)):
        return [Deferred(f"dot_general requires contracting dimensions to have consistent "
                         f"sharding, got {_fmt(lcs)} and {_fmt(rcs)}.")]
    if any(l and r for l, r in zip(lcs, rcs)) and not params.get(_TRANSPOSED):
        return [Deferred("Contracting dimensions are sharded and it is ambiguous how the output "
                         "should be sharded. Please specify the output sharding via the "
                         f"`out_sharding` parameter. Got lhs_contracting_spec={_fmt(lcs)} and "
                         f"rhs_contracting_spec={_fmt(rcs)}")]
    lfree = [lhs[i] for i in range(len(lhs)) if i not in set(lc) | set(lb)]
    rfree = [rhs[i] for i in range(len(rhs)) if i not in set(rc) | set(rb)]
    out = tuple(lbs) + tuple(lfree) + tuple(rfree)
    used = [a for e in out for a in e]
    if len(used) != len(set(used)):
        return [Deferred(f"dot_general: the output spec {_fmt(out)} would name a mesh axis "
                         "twice; specify the output sharding via the `out_sharding` parameter")]
    return [out]


# A key the pass adds to a dot_general's params when the equation comes from a backward pass.
# There JAX gives the cotangent its primal's sharding; here the sharded contraction sums over
# its axes (the layout of a data-parallel weight gradient), where a user's would be an error.
_TRANSPOSED = "_sharding_types_transposed"


def _from_backward_pass(source_info) -> bool:
    stack = getattr(source_info, "name_stack", "") or ""
    return "transpose" in stack


def _transpose_rule(ctx, ins, in_avals, out_avals, params):
    return [tuple(ins[0][i] for i in params["permutation"])]


def _given_sharding(ctx, params, ndim):
    s = params.get("sharding")
    return None if s is None else spec_of(s, ndim, ctx.explicit)


def _broadcast_in_dim_rule(ctx, ins, in_avals, out_avals, params):
    given = _given_sharding(ctx, params, len(out_avals[0].shape))
    if given is not None:
        return [given]
    dims = list(params["broadcast_dimensions"])
    out = [()] * len(params["shape"])
    for e, d in zip(ins[0], dims):
        # a size-1 dimension broadcast to a bigger one cannot stay split
        out[d] = e if in_avals[0].shape[dims.index(d)] == params["shape"][d] else ()
    return [tuple(out)]


def _squeeze_rule(ctx, ins, in_avals, out_avals, params):
    dims = {d % max(len(ins[0]), 1) for d in params["dimensions"]}
    return [tuple(e for i, e in enumerate(ins[0]) if i not in dims)]


def _varying_shape_rule(name):
    def rule(ctx, ins, in_avals, out_avals, params):
        spec, shape = ins[0], in_avals[0].shape
        out_shape = out_avals[0].shape
        for n, m, e in zip(shape, out_shape, spec):
            if n != m and e and m % ctx.size(e):
                return [Deferred(
                    f"{name} on sharded dims where out dim ({m}) is not divisible by mesh axes "
                    f"({ctx.size(e)}) with spec ({_entry(e)!r}) is not implemented. Got input "
                    f"type={type_string(in_avals[0], spec)} and output shape={tuple(out_shape)}")
                    ] * len(out_avals)
        return [spec] * len(out_avals)
    return rule


def _split_rule(ctx, ins, in_avals, out_avals, params):
    return [_varying_shape_rule("split")(ctx, ins, in_avals, [a], params)[0]
            for a in out_avals]


def _concatenate_rule(ctx, ins, in_avals, out_avals, params):
    if any(s != ins[0] for s in ins[1:]):
        raise ShardingTypeError("All operands should have the same sharding. Got shardings "
                                + ", ".join(_fmt(s) for s in ins))
    return [ins[0]]


def _select_n_rule(ctx, ins, in_avals, out_avals, params):
    # Broadcasting's rule over `which` and the cases: fluxion's jnp broadcasts scalars and
    # smaller operands unsharded, where JAX's give them the result's sharding first.
    return [broadcast_specs("select_n", ins, in_avals)]


def _dynamic_update_slice_rule(ctx, ins, in_avals, out_avals, params):
    if ins[0] != ins[1]:
        raise ShardingTypeError(
            "dynamic_update_slice operand sharding must be equal to update sharding, got "
            f"operand sharding {type_string(in_avals[0], ins[0])} and update sharding "
            f"{type_string(in_avals[1], ins[1])}.")
    return [ins[0]]


def _iota_rule(ctx, ins, in_avals, out_avals, params):
    given = _given_sharding(ctx, params, len(out_avals[0].shape))
    return [given if given is not None else unsharded(len(out_avals[0].shape))]


def _sort_rule(ctx, ins, in_avals, out_avals, params):
    if any(s != ins[0] for s in ins[1:]):
        raise ShardingTypeError("sort operands must have the same sharding, got "
                                + ", ".join(_fmt(s) for s in ins))
    return [ins[0]] * len(out_avals)


def _gather_rule(ctx, ins, in_avals, out_avals, params):
    operand, indices = ins
    if not any(operand) and not any(indices):
        return [unsharded(len(out_avals[0].shape))]
    dn = params["dimension_numbers"]
    slice_sizes = params["slice_sizes"]
    op_shape = in_avals[0].shape
    ok = (not getattr(dn, "operand_batching_dims", ()) and not indices[-1:] != ((),)
          and all(slice_sizes[i] == op_shape[i] or not operand[i] for i in dn.start_index_map))
    if ok:
        offset_src = [i for i in range(len(operand)) if i not in dn.collapsed_slice_dims]
        batch_src = list(indices[:-1]) if indices else []
        out, it_off, it_b = [], iter(offset_src), iter(batch_src)
        for d in range(len(out_avals[0].shape)):
            if d in dn.offset_dims:
                i = next(it_off)
                out.append(operand[i] if slice_sizes[i] == op_shape[i] else ())
            else:
                out.append(next(it_b, ()))
        used = [a for e in out for a in e]
        if len(used) == len(set(used)):
            return [tuple(out)]
    return [Deferred(
        "Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather "
        "indexing as out sharding could not be resolved unambiguously (or would require "
        f"collectives on inputs). Got operand={type_string(in_avals[0], operand)}, "
        f"indices={type_string(in_avals[1], indices)}")]


def _reshape_rule(ctx, ins, in_avals, out_avals, params):
    given = _given_sharding(ctx, params, len(out_avals[0].shape))
    if given is not None:
        return [given]
    spec, shape = ins[0], tuple(in_avals[0].shape)
    new = tuple(params["new_sizes"])
    if params.get("dimensions") is not None:
        perm = params["dimensions"]
        spec, shape = tuple(spec[i] for i in perm), tuple(shape[i] for i in perm)
        if any(spec):
            return [Deferred(_reshape_message(in_avals[0], ins[0], new))]
    if not any(spec):
        return [unsharded(len(new))]
    out = reshape_spec(ctx, spec, shape, new)
    return [Deferred(_reshape_message(in_avals[0], ins[0], new)) if out is None else out]


def _reshape_message(aval, spec, new):
    return ("This reshape is not supported. Please specify the sharding of the output via the "
            f"`out_sharding` argument of jax.lax.reshape. Got operand shape: "
            f"{type_string(aval, spec)}, new sizes: {tuple(new)}")


def reshape_spec(ctx, spec, shape, new):
    """JAX's reshape rules: size-1 dimensions come and go unsharded; one dimension split into
    several takes its axes major to minor (each part a multiple of its axes); several merged
    into one take their axes in order, when only the leading ones are sharded. None: the
    result's sharding is ambiguous."""
    if [n for n in shape if n != 1] == [n for n in new if n != 1]:
        kept = iter(e for n, e in zip(shape, spec) if n != 1)
        return tuple(() if n == 1 else next(kept) for n in new)
    out, i, j = [], 0, 0
    while i < len(shape) or j < len(new):
        if i < len(shape) and j < len(new) and shape[i] == new[j]:
            out.append(spec[i])
            i, j = i + 1, j + 1
            continue
        # find the smallest group shape[i:i2] and new[j:j2] with equal products
        i2, j2 = i + 1, j + 1
        a = shape[i] if i < len(shape) else 1
        b = new[j] if j < len(new) else 1
        while a != b:
            if a < b:
                if i2 >= len(shape):
                    return None
                a *= shape[i2]
                i2 += 1
            else:
                if j2 >= len(new):
                    return None
                b *= new[j2]
                j2 += 1
        src, dst = list(range(i, i2)), list(range(j, j2))
        if len(src) == 1:  # split one dimension into new[j:j2]
            axes = list(spec[i])
            parts = []
            for n in new[j:j2]:
                mine = []
                while n > 1 and axes:
                    k = ctx.sizes[axes[0]]
                    if n % k:
                        return None
                    n //= k
                    mine.append(axes.pop(0))
                parts.append(tuple(mine))
            if axes:
                return None
            out.extend(parts)
        elif len(dst) == 1:  # merge shape[i:i2] into one
            entries = [spec[k] for k in src]
            if all(not e for e in entries):
                out.append(())
            else:
                while entries and not entries[-1]:
                    entries.pop()
                if any(not e for e in entries):
                    return None
                merged = tuple(a for e in entries for a in e)
                if new[j] % ctx.size(merged):
                    return None
                out.append(merged)
        else:
            if any(spec[k] for k in src):
                return None
            out.extend([()] * len(dst))
        i, j = i2, j2
    return tuple(out)


def _cumulative_rule(ctx, ins, in_avals, out_avals, params):
    axis = params["axis"]
    if ins[0][axis]:
        raise ShardingTypeError(f"Input should be unsharded over the axis being reduced. Got "
                                f"input type={type_string(in_avals[0], ins[0], False)} and "
                                f"axis={axis}")
    return [ins[0]]


def _scatter_rule(ctx, ins, in_avals, out_avals, params):
    # The operand's sharding when only unsharded dimensions are scattered into and the
    # indices and updates are unsharded (a simplification of JAX's rule).
    operand, indices, updates = ins[:3]
    dn = params["dimension_numbers"]
    touched = set(getattr(dn, "scatter_dims_to_operand_dims", ()))
    if not any(indices) and not any(updates) and not any(operand[d] for d in touched):
        return [operand]
    return [Deferred("Use `.at[...].set/add/mul/...(out_sharding=)` to provide output "
                     "PartitionSpec for the scatter update as out sharding could not be "
                     "resolved unambiguously (or would require collectives on inputs). Got "
                     f"operand={type_string(in_avals[0], operand)}, "
                     f"indices={type_string(in_avals[1], indices)}, "
                     f"updates={type_string(in_avals[2], updates)}")]


def _constraint_rule(ctx, ins, in_avals, out_avals, params):
    from fluxion._src.sharding_impls import AxesTypes
    sharding = params["sharding"]
    if isinstance(sharding, AxesTypes):  # auto_axes / explicit_axes: the layout stays
        if isinstance(ins[0], Deferred):
            raise ins[0].error()
        if sharding.axis_type is AxisType.Explicit:
            return [ins[0]]
        gone = set(ctx.mesh.axis_names if sharding.axes is None else sharding.axes)
        return [tuple(tuple(a for a in e if a not in gone) for e in ins[0])]
    mesh = getattr(sharding, "mesh", None)
    explicit = ctx.explicit & explicit_names(mesh) if mesh is not None else ctx.explicit
    return [spec_of(sharding, len(out_avals[0].shape), explicit)]


def _inner_jaxpr(params, n_in, n_out):
    found = None
    for v in params.values():
        if isinstance(v, (Jaxpr, ClosedJaxpr)):
            j = v.jaxpr if isinstance(v, ClosedJaxpr) else v
            if len(j.invars) == n_in and len(j.outvars) == n_out:
                if found is not None:
                    return None
                found = v
    return found


def _call_rule(ctx, ins, in_avals, out_avals, params):
    return infer_jaxpr(_inner_jaxpr(params, len(ins), len(out_avals)), ins, ctx)


def _agree(what, a, b):
    for x, y in zip(a, b):
        if isinstance(x, Deferred) or isinstance(y, Deferred):
            raise (x if isinstance(x, Deferred) else y).error()
        if x != y:
            raise ShardingTypeError(f"{what}: got shardings {_fmt(x)} and {_fmt(y)}, which "
                                    "must be equal")


def _cond_rule(ctx, ins, in_avals, out_avals, params):
    outs = None
    for branch in params["branches"]:
        o = infer_jaxpr(branch, ins[1:], ctx)
        if outs is None:
            outs = o
        else:
            _agree("cond branches must return values of the same sharding", outs, o)
    return outs


def _while_rule(ctx, ins, in_avals, out_avals, params):
    cn, bn = params["cond_nconsts"], params["body_nconsts"]
    carry = ins[cn + bn:]
    out = infer_jaxpr(params["body_jaxpr"], ins[cn:cn + bn] + carry, ctx)
    _agree("while_loop body_fun output and input must have identical types", carry, out)
    return carry


def _scan_rule(ctx, ins, in_avals, out_avals, params):
    nc, nk = params["num_consts"], params["num_carry"]
    consts, carry, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
    for s in xs:
        if s and s[0]:
            raise ShardingTypeError(f"scan over an axis sharded as {_fmt(s)}: the scanned "
                                    "dimension must not be sharded")
    out = infer_jaxpr(params["jaxpr"], consts + carry + [s[1:] for s in xs], ctx)
    _agree("scan body function carry input and carry output must have equal types",
           carry, out[:nk])
    return carry + [((),) + tuple(s) for s in out[nk:]]


def _shard_map_rule(ctx, ins, in_avals, out_avals, params):
    return [spec_of(s if isinstance(s, PartitionSpec) else PartitionSpec(*s), len(a.shape),
                    ctx.explicit) for s, a in zip(params["out_specs"], out_avals)]


# primitives that let an ambiguous operand's spec flow through (a dtype conversion after an
# ambiguous dot keeps it resolvable by the out_sharding constraint that follows)
_passes_deferred: set = set()
_resolves_deferred: set = set()
_backward_aware: set = set()


def _register():
    from fluxion._src.lax import base, control_flow, contractions, indexing, shapes, sorting
    from fluxion._src.lax import structural, reductions, windowed
    from fluxion._src import sharded_jit
    for p in base.elementwise_primitives:
        rules[p] = _elementwise_rule(p.name)
    for name in ("integer_pow", "reduce_precision", "copy", "stop_gradient", "clamp",
                 "is_finite", "real", "imag", "conj", "complex", "nextafter", "pvary",
                 "logistic", "erf_inv", "polygamma", "zeta", "igamma", "igammac",
                 "igamma_grad_a", "random_gamma_grad", "bessel_i1e", "bessel_i0e", "lgamma",
                 "digamma"):
        p = _find(name)
        if p is not None:
            rules.setdefault(p, _elementwise_rule(name))
    rules[shapes.convert_element_type_p] = _same_as_operand_rule
    # the ops jnp puts between an ambiguous contraction and its out_sharding constraint
    _passes_deferred.update([shapes.convert_element_type_p, structural.transpose_p,
                             shapes.reshape_p, structural.squeeze_p])
    for name in ("copy", "reduce_precision", "rev"):
        if _find(name) is not None:
            rules[_find(name)] = _same_as_operand_rule
    for name in ("optimization_barrier", "device_put"):  # several operands, each unchanged
        if _find(name) is not None:
            rules[_find(name)] = _each_operand_rule
    for p in (reductions.reduce_sum_p, reductions.reduce_prod_p, reductions.reduce_max_p,
              reductions.reduce_min_p, reductions.reduce_and_p, reductions.reduce_or_p,
              reductions.reduce_xor_p, sorting.argmax_p, sorting.argmin_p):
        rules[p] = _reduce_axes_rule
    rules[contractions.dot_general_p] = _dot_general_rule
    _backward_aware.add(contractions.dot_general_p)
    rules[structural.transpose_p] = _transpose_rule
    rules[shapes.broadcast_in_dim_p] = _broadcast_in_dim_rule
    rules[shapes.reshape_p] = _reshape_rule
    rules[structural.squeeze_p] = _squeeze_rule
    rules[structural.slice_p] = _varying_shape_rule("slicing")
    rules[structural.pad_p] = _varying_shape_rule("padding")
    rules[structural.dynamic_slice_p] = _varying_shape_rule("dynamic_slice")
    rules[structural.dynamic_update_slice_p] = _dynamic_update_slice_rule
    rules[structural.concatenate_p] = _concatenate_rule
    rules[structural.select_n_p] = _select_n_rule
    rules[structural.iota_p] = _iota_rule
    rules[sorting.sort_p] = _sort_rule
    for p in (windowed.cumsum_p, windowed.cumprod_p, windowed.cummax_p, windowed.cummin_p,
              windowed.cumlogsumexp_p):
        rules[p] = _cumulative_rule
    for p in (indexing.scatter_p, indexing.scatter_add_p, indexing.scatter_sub_p,
              indexing.scatter_mul_p, indexing.scatter_min_p, indexing.scatter_max_p):
        rules[p] = _scatter_rule
    rules[indexing.gather_p] = _gather_rule
    split = _find("split")
    if split is not None:
        rules[split] = _split_rule
    rules[sharded_jit.sharding_constraint_p] = _constraint_rule
    _resolves_deferred.add(sharded_jit.sharding_constraint_p)
    rules[control_flow.cond_p] = _cond_rule
    rules[control_flow.while_p] = _while_rule
    rules[control_flow.scan_p] = _scan_rule
    try:
        from fluxion._src.shard_map import shard_map_p
        rules[shard_map_p] = _shard_map_rule
    except ImportError:
        pass


def _find(name):
    from fluxion._src.lax import (elementwise, structural, special, stop_gradient, derived,
                                  jax_names, shapes, parallel, device_put)
    for mod in (elementwise, structural, special, stop_gradient, derived, jax_names, shapes,
                parallel, device_put):
        p = getattr(mod, f"{name}_p", None)
        if isinstance(p, core.Primitive):
            return p
    return None


_registered = [False]


def ensure_rules():
    if not _registered[0]:
        _registered[0] = True
        _register()


# ---------------------------------------------------------------------------------------------
# The `out_sharding=` keyword of array-making functions

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
            from fluxion._src.sharded_jit import apply_out_sharding
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
