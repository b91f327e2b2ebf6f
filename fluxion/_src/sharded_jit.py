"""Programs partitioned over a mesh by XLA: `jit` with shardings, `with_sharding_constraint`.

A jaxpr is lowered to one StableHLO module for the whole (global) arrays, with Shardy
annotations: `sdy.mesh`, an `sdy.sharding` on every argument and on each result whose
sharding is given, and `sdy.sharding_constraint` ops. XLA's SPMD partitioner (Shardy, as in
JAX) splits it into the per-device program and inserts the collectives. It runs on global
arrays (`global_array.GlobalArray`), one buffer per mesh device in row-major mesh order.
"""
from __future__ import annotations

import threading

import numpy as np

from fluxion._src import core
from fluxion._src.compiler import backend, lowering
from fluxion._src.core import ClosedJaxpr, Jaxpr, ShapedArray
from fluxion._src.global_array import (GlobalArray, check_divisible, device_put_sharded_value,
                                       jaxlib_sharding)
from fluxion._src.mesh import Mesh, PartitionSpec
from fluxion._src import ad, batching, sharding_impls, sharding_types
from fluxion._src.sharding_impls import NamedSharding, Sharding
from fluxion._src.state.discharge import has_state
from fluxion._src.state.stateful_call import StatefulFunction, StatefulPlan
from fluxion._src.state.types import Ref

# ---------------------------------------------------------------------------------------------
# with_sharding_constraint

sharding_constraint_p = core.Primitive("sharding_constraint")

# .mesh: the mesh of the sharded module being lowered; .manual: the mesh axes that are manual
# in the shard_map body being lowered
_lowering = threading.local()


def sharding_constraint(x, sharding: Sharding):
    return sharding_constraint_p.bind(x, sharding=sharding)


def _constraint_impl(x, *, sharding):
    if isinstance(sharding, sharding_impls.AxesTypes):
        s = getattr(x, "_sharding", None)
        if type(x) is not GlobalArray or not isinstance(s, NamedSharding):
            return x
        return device_put_sharded_value(x, NamedSharding(sharding.retype(s.mesh), s.spec))
    return device_put_sharded_value(x, sharding)


def _constraint_abstract_eval(aval, *, sharding):
    if isinstance(sharding, NamedSharding):
        sharding.check_rank(len(aval.shape), "with_sharding_constraint arguments")
    return aval


def _constraint_lowering(ctx, x, *, sharding):
    mesh = getattr(_lowering, "mesh", None)
    if mesh is None or not isinstance(sharding, NamedSharding):
        return x  # a single-device program: nothing to constrain
    if sharding.mesh.shape_tuple != mesh.shape_tuple:
        raise ValueError(f"with_sharding_constraint: sharding {sharding!r} uses a mesh other than "
                         f"the program's {mesh!r}")
    manual = [a for a in sharding.spec.used_axes() if a in getattr(_lowering, "manual", ())]
    if manual:
        raise ValueError(f"with_sharding_constraint inside shard_map: {sharding!r} names the "
                         f"manual mesh axes {manual}; it may only name the axes left to the "
                         f"partitioner (not in shard_map's axis_names)")
    aval = ctx.avals_out[0]
    return ctx.op1("sdy.sharding_constraint", [x], aval,
                   {"sharding": sharding.sdy_text(len(aval.shape))})


def _constraint_batch(args, dims, *, sharding):
    (x,), (d,) = args, dims
    if d is None or not isinstance(sharding, NamedSharding):
        return sharding_constraint(x, sharding), d
    spec = list(sharding.spec) + [None] * (x.ndim - 1 - len(sharding.spec))
    spec.insert(d, None)
    return sharding_constraint(x, NamedSharding(sharding.mesh, PartitionSpec(*spec))), d


sharding_constraint_p.def_impl(_constraint_impl)
sharding_constraint_p.def_abstract_eval(_constraint_abstract_eval)
lowering.register_lowering(sharding_constraint_p, _constraint_lowering)
ad.deflinear(sharding_constraint_p,
             lambda ct, x, *, sharding: [sharding_constraint(ct, sharding)])
batching.primitive_batchers[sharding_constraint_p] = _constraint_batch


# ---------------------------------------------------------------------------------------------
# sharding_like: a cotangent typed as its primal on Explicit axes

sharding_like_p = core.Primitive("sharding_like")


def sharding_like(x, like):
    """`x`, laid out (on Explicit mesh axes) as `like`, an array of its shape: how a backward
    pass under `jit` gives each gradient its parameter's sharding, as JAX's does. It lowers to
    nothing; the sharding pass (sharding_rules.py) reads it."""
    return sharding_like_p.bind(x, like)


def _sharding_like_impl(x, like):
    s = getattr(like, "_sharding", None)
    if type(like) is GlobalArray and sharding_types.has_explicit_axes(getattr(s, "mesh", None)):
        return reshard(x, s)
    return x


def _sharding_like_jvp(primals, tangents):
    (x, like), (t, _) = primals, tangents
    out = sharding_like(x, like)
    return out, t if type(t) is ad.Zero else sharding_like(t, like)


def _sharding_like_transpose(ct, x, like):
    return [ct if type(ct) is ad.Zero else sharding_like(ct, like), None]


sharding_like_p.def_impl(_sharding_like_impl)
sharding_like_p.def_abstract_eval(lambda x, like: x)
lowering.register_lowering(sharding_like_p, lambda ctx, x, like: x)
ad.primitive_jvps[sharding_like_p] = _sharding_like_jvp
ad.primitive_transposes[sharding_like_p] = _sharding_like_transpose
# under vmap the hint is dropped (the batched value keeps its own layout)
batching.primitive_batchers[sharding_like_p] = lambda args, dims: (args[0], dims[0])


def with_sharding_constraint(x, shardings):
    """Ask that the values of `x` (a pytree) be laid out as `shardings` (a Sharding or a
    PartitionSpec of the current mesh, or a pytree of them): inside `jit` it steers XLA's
    partitioner; applied eagerly it moves the data. On Explicit mesh axes use `reshard`."""
    return _constrain(x, shardings, "with_sharding_constraint")


def _check_auto(s: Sharding) -> None:
    if not isinstance(s, NamedSharding):
        return
    types = dict(zip(s.mesh.axis_names, s.mesh.axis_types))
    if any(types[a] is not sharding_impls.AxisType.Auto for a in s.spec.used_axes()):
        raise ValueError(f"The spec of NamedSharding passed to with_sharding_constraint can "
                         f"only refer to Auto axes of the mesh. Got spec={s.spec} and "
                         f"mesh={s.mesh.abstract_mesh}. You probably meant to use `reshard` "
                         "API?")


def _constrain(x, shardings, what):
    from fluxion._src.tree_util import tree_flatten, tree_unflatten
    leaves, tree = tree_flatten(x)
    flat = flat_shardings(shardings, x, what)
    out = []
    for leaf, s in zip(leaves, flat):
        if s is None:
            out.append(leaf)
            continue
        s = sharding_impls.canonicalize(s, what)
        if what == "with_sharding_constraint":
            _check_auto(s)
        elif isinstance(s, NamedSharding) and sharding_types.has_explicit_axes(s.mesh) and \
                len(s.spec) < np.ndim(leaf):  # a type: written out in full, as JAX does
            s = NamedSharding(s.mesh, PartitionSpec(
                *s.spec, *[None] * (np.ndim(leaf) - len(s.spec))))
        if isinstance(s, NamedSharding):
            check_divisible(s, np.shape(leaf), f"{what} arguments")
        out.append(sharding_constraint(leaf, s))
    return tree_unflatten(tree, out)


def reshard(x, shardings):
    """`x` laid out as `shardings` (a Sharding or PartitionSpec, or a pytree of them), eagerly
    or inside `jit`. On Explicit mesh axes it sets the arrays' sharding type."""
    return _constrain(x, shardings, "reshard")


def apply_out_sharding(fun, out_sharding):
    """`fun()` with its result laid out (and typed) as `out_sharding` (a NamedSharding or a
    PartitionSpec of the current mesh; None: as it comes). An ambiguous result sharding
    inside takes it rather than raising ShardingTypeError."""
    s = canonical_out_sharding(out_sharding)
    if s is None:
        return fun()
    with sharding_types.pending_out_sharding(s):
        out = fun()
    return _constrain(out, s, "out_sharding")


def canonical_out_sharding(out_sharding):
    """The NamedSharding `out_sharding` means, or None for no layout: None itself, or a type's
    sharding over an empty AbstractMesh (`typeof(x).sharding` of an unsharded value)."""
    if out_sharding is None:
        return None
    if isinstance(out_sharding, NamedSharding) and out_sharding.is_abstract:
        if out_sharding.mesh.empty:
            return None
        # the context mesh stands for it, as wherever a layout is needed
        return sharding_impls.canonicalize(out_sharding, "out_sharding")
    if isinstance(out_sharding, PartitionSpec):
        from fluxion._src.mesh import get_mesh
        mesh = get_mesh()
        if mesh is None:
            raise ValueError("Using PartitionSpec when you are not under a mesh context is not "
                             "allowed. Please pass a NamedSharding instance or enter into a "
                             f"mesh context via `jax.set_mesh`. Got {out_sharding}")
        return NamedSharding(mesh, out_sharding)
    if isinstance(out_sharding, Sharding):
        return out_sharding
    raise TypeError(f"out_sharding must be a NamedSharding or a PartitionSpec, got "
                    f"{out_sharding!r}")


def _is_sharding_leaf(s) -> bool:
    return s is None or isinstance(s, (Sharding, PartitionSpec))


def flat_shardings(prefix, tree, what: str) -> list:
    """One entry of `prefix` (a pytree prefix of `tree` whose leaves are shardings,
    PartitionSpecs or None) per leaf of `tree`."""
    from fluxion._src.tree_util import broadcast_prefix, node_children

    def mismatch(p, t):
        if node_children(p) is None:
            return TypeError(f"{what}: shardings must be a Sharding or a PartitionSpec (or None, "
                             f"or a pytree of them), got {p!r}")
        return ValueError(f"{what}: the shardings {prefix!r} are not a pytree prefix of the "
                          "value")
    return broadcast_prefix(prefix, tree, _is_sharding_leaf, mismatch, same_node_types=False)


# ---------------------------------------------------------------------------------------------
# Finding the mesh of a program

# primitive -> params -> a sharding over the mesh the primitive needs (shard_map_p)
mesh_primitives: dict = {}


def constraint_shardings(jaxpr) -> list:
    """The shardings of the sharding constraints (and of the other primitives that need a
    partitioned program) in `jaxpr` and its sub-jaxprs."""
    found = []

    def visit(j):
        if isinstance(j, ClosedJaxpr):
            j = j.jaxpr
        for eqn in j.eqns:
            if eqn.primitive is sharding_constraint_p:
                found.append(eqn.params["sharding"])
            elif eqn.primitive in mesh_primitives:
                found.append(mesh_primitives[eqn.primitive](eqn.params))
                continue  # the body is per device
            for v in eqn.params.values():
                for sub in (v if isinstance(v, (tuple, list)) else (v,)):
                    if isinstance(sub, (Jaxpr, ClosedJaxpr)):
                        visit(sub)

    visit(jaxpr)
    return found


def program_mesh(shardings) -> Mesh | None:
    """The one mesh the NamedShardings among `shardings` share (None if there are none)."""
    mesh = None
    for s in shardings:
        if isinstance(s, NamedSharding):
            if mesh is None:
                mesh = s.mesh
            elif s.mesh._device_key != mesh._device_key:
                raise ValueError(f"Received incompatible devices for jitted computation: "
                                 f"shardings use the meshes {mesh!r} and {s.mesh!r}")
    return mesh


# ---------------------------------------------------------------------------------------------
# Compiling and running

class ShardedExecutable:
    """A partitioned executable; called like dispatch.CompiledFunction."""

    __slots__ = ("loaded", "executable", "name", "mesh", "in_avals", "out_avals",
                 "in_shardings", "out_shardings", "handlers", "const_arrays", "text")

    def __call__(self, args) -> list:
        garrs = list(self.const_arrays)
        for x, s, aval in zip(args, self.in_shardings, self.in_avals):
            garrs.append(as_global(x, s, aval)._garr)
        outs = self.loaded.execute_sharded(garrs).consume_with_handlers(self.handlers)
        return [GlobalArray(o, a, s) for o, a, s in zip(outs, self.out_avals, self.out_shardings)]

    def array_call(self, single_output: bool):
        if single_output:
            return lambda args: self(args)[0]
        return self


def as_global(x, sharding: Sharding, aval: ShapedArray) -> GlobalArray:
    if type(x) is GlobalArray and x._sharding == sharding:
        return x
    if isinstance(x, core.Tracer):
        raise core.escaped_tracer_error(x)
    if type(x) is GlobalArray:
        return device_put_sharded_value(x, sharding)
    return device_put_sharded_value(np.asarray(x, dtype=aval.dtype), sharding, aval.weak_type)


def leaf_sharding(x) -> Sharding | None:
    """The sharding an argument carries: a global Array's, or a ShapeDtypeStruct's (export)."""
    if type(x) is GlobalArray:
        return x._sharding
    from fluxion._src.api import ShapeDtypeStruct
    s = x.sharding if type(x) is ShapeDtypeStruct else None
    return s if isinstance(s, Sharding) else None


def arg_sharding(x, mesh: Mesh) -> NamedSharding:
    """The sharding an argument without an in_sharding gets: its own, or replicated."""
    s = leaf_sharding(x)
    if isinstance(s, NamedSharding) and s.mesh == mesh:
        return s
    if isinstance(s, NamedSharding) and s.mesh._device_key == mesh._device_key:
        return NamedSharding(mesh, s.spec)  # the same layout, typed on the program's axes
    if s is not None and not isinstance(s, NamedSharding) or isinstance(s, NamedSharding) \
            and s.mesh.flat_devices != mesh.flat_devices:
        if not s.is_fully_replicated and not isinstance(s, sharding_impls.GSPMDSharding):
            raise ValueError(f"Received incompatible devices for jitted computation: an argument "
                             f"has sharding {s!r} but the program runs on {mesh!r}")
    return NamedSharding(mesh, PartitionSpec())


def lower_sharded(closed: ClosedJaxpr, name: str, mesh: Mesh, in_shardings, out_shardings,
                  donated_invars=None) -> str:
    """The StableHLO module (with Shardy annotations) of `closed` partitioned over `mesh`."""
    jaxpr = closed.jaxpr
    n_consts = len(jaxpr.constvars)
    replicated = NamedSharding(mesh, PartitionSpec())
    arg_sh = [replicated] * n_consts + list(in_shardings)
    arg_avals = [v.aval for v in jaxpr.constvars] + [v.aval for v in jaxpr.invars]
    arg_attrs = [f"sdy.sharding = {s.sdy_text(len(a.shape))}" for s, a in zip(arg_sh, arg_avals)]
    result_attrs = [None if s is None else f"sdy.sharding = {s.sdy_text(len(v.aval.shape))}"
                    for s, v in zip(out_shardings, jaxpr.outvars)]
    mesh_text = ", ".join(f'"{a}"={n}' for a, n in mesh.shape_tuple)
    _lowering.mesh = mesh
    try:
        text = lowering.lower_jaxpr_to_module(
            jaxpr, mesh.flat_devices[0].platform, name, donated_invars,
            num_partitions=mesh.size, arg_attrs=arg_attrs, result_attrs=result_attrs,
            preamble=f"  sdy.mesh @mesh = <[{mesh_text}]>\n")
    finally:
        _lowering.mesh = None
    return text


def compile_sharded(closed: ClosedJaxpr, name: str, mesh: Mesh, in_shardings, out_shardings,
                    donated_invars=None, text: str | None = None) -> ShardedExecutable:
    """Compile `closed` partitioned over `mesh`; `in_shardings` has a NamedSharding per input,
    `out_shardings` a NamedSharding or None (XLA chooses) per output."""
    xla_client, _ = backend._jaxlib()
    jaxpr = closed.jaxpr
    replicated = NamedSharding(mesh, PartitionSpec())
    if text is None:
        text = lower_sharded(closed, name, mesh, in_shardings, out_shardings, donated_invars)
    options = xla_client.CompileOptions()
    backend.apply_compiler_options(options)
    options.num_replicas = 1
    options.num_partitions = mesh.size
    build = options.executable_build_options
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = True
    options.device_assignment = xla_client.DeviceAssignment.create(
        np.array([[d.id for d in mesh.flat_devices]]))
    client = backend.backend_of(mesh.flat_devices[0]).client
    loaded = backend.compile_and_load(client, text, xla_client.DeviceList(mesh.flat_devices),
                                      options, name)
    exe = ShardedExecutable()
    exe.loaded, exe.executable, exe.name, exe.mesh, exe.text = loaded, exe, name, mesh, text
    exe.in_avals, exe.out_avals = list(closed.in_avals), list(closed.out_avals)
    exe.in_shardings = list(in_shardings)
    chosen = loaded.get_output_shardings()
    prefer = _spec_hints(jaxpr, mesh, in_shardings)
    outs = []
    for i, (s, aval) in enumerate(zip(out_shardings, exe.out_avals)):
        if s is None:
            hs = xla_client.HloSharding.from_proto(chosen[i]) if chosen else \
                xla_client.HloSharding.replicate()
            s = sharding_impls.named_from_hlo(mesh, hs, len(aval.shape), prefer)
        outs.append(s)
    exe.out_shardings = outs
    exe.handlers = [backend.result_handler(a, jaxlib_sharding(s, len(a.shape)))
                    for a, s in zip(exe.out_avals, outs)]
    exe.const_arrays = [device_put_sharded_value(np.asarray(c, dtype=v.aval.dtype), replicated,
                                                 v.aval.weak_type)._garr
                        for c, v in zip(closed.consts, jaxpr.constvars)]
    return exe


def _spec_hints(jaxpr, mesh: Mesh, in_shardings) -> list:
    """Specs to name the layouts XLA chose for the outputs by: the out_specs of the program's
    shard_maps, then its inputs' specs (without trailing Nones, as JAX names XLA's choices)."""
    hints = [spec for eqn in jaxpr.eqns if eqn.primitive.name == "shard_map"
             and eqn.params["mesh"] == mesh for spec in eqn.params["out_specs"]]
    hints += [s.spec for s in in_shardings if isinstance(s, NamedSharding) and s.mesh == mesh]
    return list(dict.fromkeys(_trimmed(spec) for spec in hints))


def _trimmed(spec: PartitionSpec) -> PartitionSpec:
    entries = list(spec)
    while entries and entries[-1] is None:
        entries.pop()
    return PartitionSpec(*entries)


def needs_partitioning(closed: ClosedJaxpr) -> Mesh | None:
    """The mesh of the sharding constraints inside `closed`, if it has any."""
    found = constraint_shardings(closed)
    return program_mesh(found) if found else None


def compile_for_constraints(closed: ClosedJaxpr, name: str, mesh: Mesh, donated=None,
                            text: str | None = None):
    """A program whose only shardings are constraints inside it: plain inputs replicated."""
    in_sh = [NamedSharding(mesh, PartitionSpec())] * len(closed.in_avals)
    return compile_sharded(closed, name, mesh, in_sh, explicit_out_shardings(
        closed, mesh, in_sh, [None] * len(closed.out_avals)), donated, text=text)


def lower_for_constraints(closed: ClosedJaxpr, name: str, mesh: Mesh, donated=None) -> str:
    in_sh = [NamedSharding(mesh, PartitionSpec())] * len(closed.in_avals)
    return lower_sharded(closed, name, mesh, in_sh, explicit_out_shardings(
        closed, mesh, in_sh, [None] * len(closed.out_avals)), donated)


# ---------------------------------------------------------------------------------------------
# Eager primitives and jit calls whose arguments include global arrays

_primitive_cache: dict = {}
NO_MESH = object()


def has_global(values) -> bool:
    for x in values:
        if type(x) is GlobalArray:
            return True
    return False


def apply_primitive(prim: core.Primitive, args, params):
    """Run one primitive on arguments among which are global arrays, as a partitioned
    program (NotImplemented when there are none)."""
    if not has_global(args):
        return NotImplemented
    from fluxion._src import dispatch
    from fluxion._src.config import config
    shardings = [x._sharding if type(x) is GlobalArray else None for x in args]
    mesh = program_mesh(shardings)
    if mesh is None:
        return NotImplemented
    avals = tuple(core.get_aval(x) for x in args)
    try:
        structural = core.structural_params_key(params)
        key = (prim, tuple(params.items()) if structural is None else structural,
               config.trace_key, avals, tuple(shardings), sharding_types.current_pending())
        exe = _primitive_cache.get(key)
    except TypeError:
        key, exe = None, None
    if exe is None:
        jaxpr = dispatch.primitive_jaxpr(prim, avals, params)
        in_sh = [arg_sharding(x, mesh) for x in args]
        exe = compile_sharded(jaxpr, prim.name, mesh, in_sh,
                              _explicit_out_shardings_of_primitive(prim, params, avals, in_sh,
                                                                   mesh))
        if key is not None:
            if len(_primitive_cache) > 1024:
                _primitive_cache.clear()
            _primitive_cache[key] = exe
    outs = exe(args)
    return outs if prim.multiple_results else outs[0]


def _explicit_out_shardings_of_primitive(prim, params, avals, in_sh, mesh) -> list:
    """The result shardings of one eager primitive: on Explicit axes its sharding rule's,
    else XLA's choice (None)."""
    n_out = len(prim.abstract_eval_avals(list(avals), params))
    if not sharding_types.has_explicit_axes(mesh):
        return [None] * n_out
    sharding_types.ensure_rules()
    ctx = sharding_types.Context(mesh)
    specs = sharding_types.infer_primitive(
        prim, params, avals, [sharding_types.spec_of(s, len(a.shape), ctx.explicit)
                              for s, a in zip(in_sh, avals)], ctx)
    pending = sharding_types.current_pending()
    out = []
    for s, aval in zip(specs, prim.abstract_eval_avals(list(avals), params)):
        if isinstance(s, sharding_types.Deferred):
            if pending is None or len(pending.spec) > len(aval.shape):
                raise s.error()
            s = sharding_types.spec_of(pending, len(aval.shape), ctx.explicit)
        out.append(NamedSharding(mesh, sharding_types.to_partition_spec(s)))
    return out


def explicit_out_shardings(closed, mesh, in_sh, out_sh) -> list:
    """jit's output shardings: those given, else on Explicit axes the sharding rules'."""
    if not sharding_types.has_explicit_axes(mesh) or all(s is not None for s in out_sh):
        return out_sh
    sharding_types.ensure_rules()
    ctx = sharding_types.Context(mesh)
    specs = sharding_types.infer_jaxpr(
        closed, [sharding_types.spec_of(s, len(a.shape), ctx.explicit)
                 for s, a in zip(in_sh, closed.in_avals)], ctx)
    out = []
    for given, spec, aval in zip(out_sh, specs, closed.out_avals):
        if given is not None:
            out.append(given)
            continue
        if isinstance(spec, sharding_types.Deferred):
            pending = sharding_types.current_pending()  # an eager call with out_sharding
            if pending is None or len(pending.spec) > len(aval.shape):
                raise spec.error()
            spec = sharding_types.spec_of(pending, len(aval.shape), ctx.explicit)
        out.append(NamedSharding(mesh, sharding_types.to_partition_spec(spec)))
    return out


def jit_call(jit_fun, args, kwargs, leaves, in_tree, static_pos, static_kw, dyn_args):
    """`JitFunction._call` for a function with in/out shardings or global-array arguments.
    Returns the outputs, or NO_MESH when no mesh is involved (the plain path then runs)."""
    from fluxion._src.api import _CacheEntry, abstractify_args, _run
    from fluxion._src.caches import compile_lock
    from fluxion._src.config import config
    arg_sh = tuple(value_sharding(x) for x in leaves)
    key = ("sharded", in_tree, static_pos, static_kw,
           abstractify_args(jit_fun._fun, leaves, in_tree, static_pos), config.trace_key,
           arg_sh, _current_mesh_key(jit_fun), sharding_types.current_pending())
    entry = jit_fun._cache.get(key)
    if entry is None:
        with compile_lock:
            entry = jit_fun._cache.get(key)
            if entry is None:
                entry = compile_jit(jit_fun, args, kwargs, leaves, in_tree, static_pos,
                                    static_kw, dyn_args)
                jit_fun._cache[key] = entry
    if entry is False:
        return NO_MESH
    return entry.out_tree.unflatten(_run(entry.compiled, leaves, entry.donate_mask))


def _current_mesh_key(jit_fun):
    if not (jit_fun._in_shardings_given or jit_fun._out_shardings_given):
        return None
    from fluxion._src.mesh import get_mesh
    return get_mesh()  # bare PartitionSpecs mean this mesh


def in_shardings_of(jit_fun, dyn_args, kwargs) -> list:
    flat = []
    if jit_fun._in_shardings_given:
        spec = jit_fun._in_shardings
        if isinstance(spec, list):
            spec = tuple(spec)
        if _is_sharding_leaf(spec):
            spec = (spec,) * len(dyn_args)
        elif isinstance(spec, tuple) and len(spec) != len(dyn_args):
            raise ValueError(f"jit in_shardings has {len(spec)} entries but the function was "
                             f"called with {len(dyn_args)} positional arguments")
        flat = flat_shardings(spec, tuple(dyn_args), "jit in_shardings")
    else:
        from fluxion._src.tree_util import tree_flatten
        flat = [None] * len(tree_flatten(tuple(dyn_args))[0])
    from fluxion._src.tree_util import tree_flatten
    flat += [None] * len(tree_flatten(kwargs)[0])
    return [None if s is None else sharding_impls.canonicalize(s, "jit in_shardings") for s in flat]


def _trace_on_args_mesh(jit_fun, leaves, in_tree, static_pos, static_kw):
    """jit's trace; with arguments on Explicit mesh axes and no mesh in effect, it is traced
    under their abstract mesh (as JAX does: gradients then take their parameters' types)."""
    from fluxion._src.mesh import get_abstract_mesh, use_abstract_mesh
    mesh = program_mesh([value_sharding(x) for x in leaves])
    if not sharding_types.has_explicit_axes(mesh) or not get_abstract_mesh().empty:
        return jit_fun._get_traced(leaves, in_tree, static_pos, static_kw)
    from fluxion._src.api import _argument_shardings, abstractify_args, trace_flat
    from fluxion._src.shard_map import jit_arguments
    avals = abstractify_args(jit_fun._fun, leaves, in_tree, static_pos)
    # once per compiled program: not cached
    with use_abstract_mesh(mesh.abstract_mesh), \
            jit_arguments(_argument_shardings(leaves) or ()) as arguments:
        return trace_flat(jit_fun._fun, in_tree, list(avals), static_pos, static_kw, "jit",
                          arguments=arguments)


class JitPlan:
    """What a partitioned jit call compiles: `program` (the traced jaxpr, or for one with Refs
    its discharged form: Ref constants' values first, Refs' new values as extra outputs) with
    a sharding per input and output and its donated inputs; `stateful` is the StatefulPlan
    that runs it with Refs (None without Refs); `donate_mask` is the jit arguments'."""

    __slots__ = ("traced", "program", "mesh", "in_shardings", "out_shardings", "donated",
                 "stateful", "donate_mask")

    def compile(self, name: str, text: str | None = None):
        exe = compile_sharded(self.program, name, self.mesh, self.in_shardings,
                              self.out_shardings, self.donated, text=text)
        return exe if self.stateful is None else ShardedStatefulFunction(exe, self.stateful)

    def lower(self, name: str) -> str:
        return lower_sharded(self.program, name, self.mesh, self.in_shardings,
                             self.out_shardings, self.donated)


class ShardedStatefulFunction(StatefulFunction):
    """A partitioned discharged program called with Refs (see StatefulFunction); it reports
    the shardings of the function's own arguments and results."""

    __slots__ = ()

    in_shardings = property(lambda self: self.compiled.in_shardings[len(self.ref_consts):])
    out_shardings = property(lambda self: self.compiled.out_shardings[:self.n_out])


def held_value(x):
    """The value a jit argument stands for: a Ref's contents, else the argument itself."""
    return x._read_value() if type(x) is Ref else x


def holds_global(values, refs_only: bool = False) -> bool:
    """Whether one of `values` is a global Array or a Ref holding one (only the latter with
    `refs_only`)."""
    for x in values:
        if type(x) is Ref:
            x = x._value
        elif refs_only:
            continue
        if type(x) is GlobalArray:
            return True
    return False


def value_sharding(x):
    """The sharding of an argument (`leaf_sharding`), or of the value a Ref holds."""
    return leaf_sharding(held_value(x))


def _check_ref_shardings(leaves, in_sh) -> None:
    """A Ref argument is not moved: its value must already be laid out as the in_sharding
    given for it (JAX's ValueError otherwise)."""
    for x, s in zip(leaves, in_sh):
        if type(x) is not Ref or s is None:
            continue
        held = x._read_value().sharding
        if not s.is_equivalent_to(held, x.ndim):
            raise ValueError(f"Sharding passed to jit does not match the sharding on the "
                             f"respective arg. Got jit sharding: {s!r},\narg sharding: "
                             f"{held!r} for arg type: {x.aval}")


def _check_refs_on_mesh(values, mesh: Mesh) -> None:
    """A Ref's value is not moved onto the program's devices: one held on a single device
    cannot join a program over several (JAX's ValueError), unless it is uncommitted under
    `set_mesh` of this mesh (JAX would have made it on the mesh, replicated, as it now is)."""
    if mesh.size == 1:
        return
    for x in values:
        if type(x) is not Ref:
            continue
        held = x._read_value()
        if type(held) is GlobalArray or _made_under_mesh(held, mesh):
            continue
        raise ValueError(
            f"Received incompatible devices for jitted computation: a Ref of type {x.aval} "
            f"holds a value on {held.sharding!r}, but the program runs on the {mesh.size} "
            f"devices of {mesh!r}; put the Ref's value on the mesh first (device_put with "
            "a sharding)")


def _made_under_mesh(value, mesh: Mesh) -> bool:
    from fluxion._src.mesh import get_mesh
    context = get_mesh()
    return (not getattr(value, "committed", True) and context is not None
            and context._device_key == mesh._device_key)


def _discharged_shardings(stateful: StatefulPlan, ref_const_values, mesh: Mesh, in_sh,
                          out_sh) -> tuple[list, list]:
    """The input and output shardings of the discharged program: a Ref's value comes in laid
    out as it is held, and its new value goes back out the same way."""
    const_sh = [arg_sharding(v, mesh) for v in ref_const_values]
    ref_in_sh = [in_sh[i] for i in stateful.ref_in_positions]
    return const_sh + list(in_sh), list(out_sh) + const_sh + ref_in_sh


def _plan_jit(jit_fun, args, kwargs, leaves, in_tree, static_pos, static_kw,
              dyn_args) -> JitPlan | None:
    """The program, mesh and shardings of a partitioned jit call (None: no mesh)."""
    from fluxion._src.tree_util import tree_unflatten
    traced = _trace_on_args_mesh(jit_fun, leaves, in_tree, static_pos, static_kw)
    stateful = StatefulPlan(traced.jaxpr) if has_state(traced.jaxpr.jaxpr) else None
    mask = jit_fun._donate_mask(args, static_pos, dyn_args, kwargs)
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in dict(static_kw)}
    in_sh = in_shardings_of(jit_fun, dyn_args, dyn_kwargs)
    n_out = len(traced.jaxpr.out_avals)
    if jit_fun._out_shardings_given:
        out_struct = tree_unflatten(traced.out_tree, [0] * n_out)
        out_sh = [None if s is None else sharding_impls.canonicalize(s, "jit out_shardings")
                  for s in flat_shardings(jit_fun._out_shardings, out_struct, "jit out_shardings")]
    else:
        out_sh = [None] * n_out
    ref_consts = [] if stateful is None else [r._read_value() for r in stateful.ref_consts]
    arg_sh = [value_sharding(x) for x in [*ref_consts, *leaves]]
    mesh = program_mesh([*in_sh, *out_sh, *arg_sh, *constraint_shardings(traced.jaxpr)])
    if mesh is None:
        return None
    _check_ref_shardings(leaves, in_sh)
    in_sh = [s if isinstance(s, NamedSharding) else arg_sharding(held_value(x), mesh)
             for s, x in zip(in_sh, leaves)]
    for s, aval in zip(in_sh, traced.jaxpr.in_avals):
        check_divisible(s, aval.shape, "pjit arguments")
    out_sh = [s if isinstance(s, NamedSharding) else None for s in out_sh]
    plan = JitPlan()
    plan.traced, plan.mesh, plan.stateful, plan.donate_mask = traced, mesh, stateful, mask
    plan.program, plan.donated = traced.jaxpr, mask
    if stateful is not None:
        _check_refs_on_mesh([*stateful.ref_consts, *leaves], mesh)
        in_sh, out_sh = _discharged_shardings(stateful, ref_consts, mesh, in_sh, out_sh)
        plan.program, plan.donated = stateful.discharged, stateful.donated(mask)
    out_sh = explicit_out_shardings(plan.program, mesh, in_sh, out_sh)
    for s, aval in zip(out_sh, plan.program.out_avals):
        if s is not None:
            check_divisible(s, aval.shape, "pjit outputs")
    plan.in_shardings, plan.out_shardings = in_sh, out_sh
    return plan


def compile_jit(jit_fun, args, kwargs, leaves, in_tree, static_pos, static_kw, dyn_args):
    from fluxion._src.api import _CacheEntry
    plan = _plan_jit(jit_fun, args, kwargs, leaves, in_tree, static_pos, static_kw, dyn_args)
    if plan is None:
        return False
    compiled = plan.compile(f"jit_{plan.traced.name}")
    return _CacheEntry(compiled, plan.traced.out_tree, plan.traced, plan.donate_mask)


def lower_jit(jit_fun, args, kwargs):
    """`jit(f).lower(*args)` for a partitioned program (None when no mesh is involved)."""
    from fluxion._src.api import Lowered
    leaves, in_tree, static_pos, static_kw, dyn_args = jit_fun._flatten(args, kwargs)
    plan = _plan_jit(jit_fun, args, kwargs, leaves, in_tree, static_pos, static_kw, dyn_args)
    if plan is None:
        return None
    name = f"jit_{plan.traced.name}"
    text = plan.lower(name)
    lowered = Lowered(text, plan.traced, plan.donate_mask)
    lowered._compile_sharded = lambda: plan.compile(name, text=text)
    return lowered
