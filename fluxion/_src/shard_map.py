"""`shard_map`: run a per-block function on every device of a mesh, with collectives over the
mesh axes. Each call binds `shard_map_p` (shard_map_spmd.py): eagerly it runs as a one-equation
partitioned program, under `jit` it is part of the enclosing one; its outputs are global Arrays
laid out as `out_specs` say."""
from __future__ import annotations

import functools
import inspect

import numpy as np

from fluxion._src import core, staging, tree_util
from fluxion._src.api import check_callable
from fluxion._src.mesh import AxisType, DuplicateSpecError, Mesh, PartitionSpec
from fluxion._src.sharding_impls import NamedSharding
from fluxion._src.smap import Infer
from fluxion._src.shard_map_spmd import inside_body, newly_manual, shard_map_p
from fluxion._src.shard_map_vma import check_out_vma
from fluxion._src.traceback_util import api_boundary
from fluxion._src.tree_util import tree_flatten, tree_unflatten


def _is_spec_leaf(s) -> bool:
    return s is None or isinstance(s, PartitionSpec)


def _spec_leaves(specs, tree, what, none_is_static: bool = False):
    """One PartitionSpec per leaf of `tree`, `specs` being a pytree prefix of it. A None spec
    is P() (replicated), or with `none_is_static` None: the leaves it covers are passed to
    the body as they are (in_specs, as in JAX)."""
    def mismatch(p, t):
        error = tree_util.structure_error(specs, tree, f"shard_map {what}", _is_spec_leaf)
        return error or ValueError(f"shard_map {what} must be a pytree prefix of the value "
                                   f"(PartitionSpec or None leaves), got {specs!r}")
    flat = tree_util.broadcast_prefix(specs, tree, _is_spec_leaf, mismatch)
    return [s if s is not None or none_is_static else PartitionSpec() for s in flat]


def _spec_paths(specs, tree, path=()) -> list:
    """For each leaf, the key path (JAX's `keystr`) of the spec `_spec_leaves` gives it."""
    if _is_spec_leaf(specs):
        return [tree_util.keystr(path)] * len(tree_flatten(tree)[0])
    out = []
    for (key, s), (_, t) in zip(tree_util._keyed_children(specs), tree_util._keyed_children(tree)):
        out += _spec_paths(s, t, (*path, key))
    return out


def _check_ranks(f, kind: str, specs, tree, flat_specs, avals) -> None:
    """JAX's ValueError naming every spec (`kind`: "in" or "out") longer than the rank of the
    value it lays out."""
    leaf_paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(tree)[0]]
    fails = [(sp_path, sp, leaf, a) for sp_path, sp, leaf, a
             in zip(_spec_paths(specs, tree), flat_specs, leaf_paths, avals)
             if sp is not None and len(sp) > a.ndim]
    if not fails:
        return
    name = getattr(f, "__name__", str(f))
    msgs = [f"{kind}_specs{sp_path} is {sp} which has length {len(sp)}, but "
            f"{_value_text(f, name, kind, leaf, len(tree))} has shape {a.str_short(short_dtypes=False)}, "
            f"which has rank "
            f"{a.ndim} (and {a.ndim} < {len(sp)})" for sp_path, sp, leaf, a in fails]
    if len(msgs) > 1:
        msgs = [f"* {m}" for m in msgs]
    msg = (f"shard_map applied to the function '{name}' was given an {kind}_specs entry which "
           f"is too long to be compatible with the corresponding {kind}put value from the "
           "function:\n\n" + "\n\n".join(msgs) + "\n\n"
           f"Entries in {kind}_specs must be of length no greater than the number of axes in "
           f"the corresponding {kind}put value.\n\nEither revise the spec to be shorter, or "
           f"modify '{name}' so that its {kind}puts have sufficient rank.")
    if any(a.ndim == 0 for *_, a in fails):
        msg += (f"\n\nFor scalar values (rank 0), consider using an {kind}_specs entry of "
                "`P()`, where `P = jax.sharding.PartitionSpec`.")
        if kind == "out":
            msg += (" In particular, for rank 0 outputs which are not constant over the mesh, "
                    "add at least one (singleton) axis to them so that they can be "
                    "concatenated using out_specs.")
    raise ValueError(msg)


def _value_text(f, name: str, kind: str, leaf_path: str, n_args: int) -> str:
    """How JAX's rank error names a value: an output by its path in `f`'s result, an input
    by its path in the arguments and the parameter it is bound to (when they bind)."""
    if kind == "out":
        return f"{name}(*args){leaf_path}"
    index = int(leaf_path[1:leaf_path.index("]")])
    try:
        signature = inspect.signature(f)
        signature.bind(*[None] * n_args)
    except (TypeError, ValueError):
        return f"the passed args{leaf_path}"
    params = [p for p in signature.parameters.values()
              if p.kind not in (p.KEYWORD_ONLY, p.VAR_KEYWORD)]
    if index >= len(params) or params[index].kind == params[index].VAR_POSITIONAL:
        extra = (f", where args[{index}] is the index {index - len(params) + 1} component of "
                 f"{name}'s varargs parameter '{params[-1].name}',")
    else:
        extra = f", where args[{index}] is bound to {name}'s parameter '{params[index].name}',"
    return f"the passed args{leaf_path}{extra}"


def _check_spec(spec, mesh_shape, what, manual=None):
    """Every axis a spec names must be a mesh axis (a manual one when `manual` is given),
    used by one dimension at most."""
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"shard_map {what} entries must be PartitionSpecs, got {spec!r}")
    seen = []
    for d in range(len(spec)):
        for a in spec.axes_of(d):
            if a not in mesh_shape:
                raise ValueError(f"shard_map {what} argument must refer to mesh axes "
                                 f"{tuple(mesh_shape)}, but {what} refers to {a!r}")
            if manual is not None and a not in manual:
                raise ValueError(f"shard_map {what} argument must refer to an axis marked as "
                                 f"manual ({set(manual)}), but {what} refers to {a!r}")
            if a in seen:
                raise DuplicateSpecError(f"A single spec can map every mesh axis to at most one "
                                         f"positional dimension, but {spec} has duplicate "
                                         f"entries for `{a}`")
            seen.append(a)


def _block_shape(shape, spec, mesh_shape, what, manual=None):
    out = list(shape)
    _check_spec(spec, mesh_shape, what, manual)
    if len(spec) > len(shape):
        raise ValueError(f"shard_map {what}: spec {spec} has more entries than the rank "
                         f"{len(shape)} of the value")
    for d in range(len(shape)):
        k = int(np.prod([mesh_shape[a] for a in spec.axes_of(d)]))
        if shape[d] % k:
            raise ValueError(f"shard_map {what}: dimension {d} of size {shape[d]} is not "
                             f"divisible by the mesh axes {spec.axes_of(d)} (total size {k})")
        out[d] //= k
    return tuple(out)


def _refs_as_operands(closed):
    """Refs the body closed over become its first (replicated) operands, so the discharge
    pass can carry their values through the shard_map (see shard_map_spmd); so do an
    enclosing transformation's tracers it closed over (shard_map called inside vmap/grad on
    concrete arguments), which that transformation's rules must see as operands."""
    jaxpr = closed.jaxpr
    is_ref = [type(v.aval).__name__ == "AbstractRef" or isinstance(c, core.Tracer)
              for v, c in zip(jaxpr.constvars, closed.consts)]
    if not any(is_ref):
        return closed, []
    refs = [(v, c) for v, c, r in zip(jaxpr.constvars, closed.consts, is_ref) if r]
    plain = [(v, c) for v, c, r in zip(jaxpr.constvars, closed.consts, is_ref) if not r]
    lifted = core.Jaxpr([v for v, _ in plain], [v for v, _ in refs] + list(jaxpr.invars),
                        jaxpr.outvars, jaxpr.eqns, jaxpr.effects, jaxpr.debug_info)
    return core.ClosedJaxpr(lifted, [c for _, c in plain]), [c for _, c in refs]


def _bound_when_called(f, mesh, in_specs, make):
    """A shard_map whose mesh (None: the context mesh) or in_specs (Infer: the arguments'
    specs) are known only from each call; `make(f, mesh=, in_specs=)` builds the rest."""
    made: dict = {}

    @functools.wraps(f)
    @api_boundary
    def wrapped(*args):
        m = mesh if mesh is not None else _context_mesh()
        specs = in_specs
        if specs is Infer:
            leaves, tree = tree_flatten(args)
            manual = _manual_axes(m, make.keywords["axis_names"], make.keywords["auto"])
            _check_explicit(m, manual)
            flat = tuple(_inferred_spec(x, manual) for x in leaves)
            specs, key = tree_unflatten(tree, list(flat)), (m, tree, flat)
        else:
            key = (m,)
        if key not in made:
            made[key] = make(f, mesh=m, in_specs=specs)
        return made[key](*args)

    return wrapped


def _context_mesh():
    from fluxion._src.mesh import get_mesh
    mesh = get_mesh()
    if mesh is None:
        raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to enter "
                         "into a mesh context")
    return mesh


def _check_explicit(mesh, manual) -> None:
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    if not all(types[a] == AxisType.Explicit for a in manual):
        axis_types = ", ".join(str(types[a]) for a in manual)
        raise TypeError("shard_map in_specs argument must be a pytree of "
                        "`jax.sharding.PartitionSpec` instances, but it was `None` when "
                        f"axis_names={frozenset(manual)} are of type {axis_types}")


# The shardings of the arguments of the jits being traced, by their tracers (id -> (tracer,
# sharding)): fluxion's traced values carry no sharding, so `in_specs=Infer` reads a jit
# input's from here (see `jit_arguments`).
_jit_argument_shardings: dict = {}


class jit_arguments:
    """While a jit traces its function: its input tracers stand for arguments laid out as
    `shardings` (each concrete argument's sharding, or None)."""

    def __init__(self, shardings):
        self.shardings, self.tracers = shardings, []

    def bind(self, tracers) -> None:
        for t, s in zip(tracers, self.shardings):
            if isinstance(t, core.Tracer):
                self.tracers.append(t)
                _jit_argument_shardings[id(t)] = (t, s)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for t in self.tracers:
            _jit_argument_shardings.pop(id(t), None)


def argument_shardings(leaves):
    """For a jit about to trace on `leaves`: each one's NamedSharding (a concrete Array's, or
    the jit argument a tracer stands for), or None when no leaf has one."""
    out, found = [], False
    for x in leaves:
        if isinstance(x, core.Tracer):
            try:
                s = _traced_argument_sharding(x) if _jit_argument_shardings else None
            except NotImplementedError:
                s = None
        else:
            s = getattr(x, "_sharding", None)
        s = s if isinstance(s, NamedSharding) else None
        found = found or s is not None
        out.append(s)
    return tuple(out) if found else None


def jit_argument_sharding(x):
    """The NamedSharding of the jit argument the tracer `x` stands for, else None."""
    if not _jit_argument_shardings:
        return None
    try:
        s = _traced_argument_sharding(x)
    except NotImplementedError:
        return None
    return s if isinstance(s, NamedSharding) else None


def _traced_argument_sharding(x):
    """The sharding of the jit argument or concrete Array the tracer `x` stands for (seen
    through JVP tracers' primals); NotImplementedError for any other traced value."""
    from fluxion._src import ad
    while isinstance(x, core.Tracer):
        found = _jit_argument_shardings.get(id(x))
        if found is not None and found[0] is x:
            return found[1]
        if not isinstance(x, ad.JVPTracer):
            raise NotImplementedError(
                "shard_map with in_specs inferred (Infer) needs concrete arguments or "
                "arguments of the enclosing jit: fluxion's other traced values carry no "
                "sharding; pass in_specs explicitly")
        x = x.primal
    return getattr(x, "sharding", None)


def _inferred_spec(x, manual) -> PartitionSpec:
    """The spec of `x` on the manual axes: its sharding's, with other axes dropped."""
    if isinstance(x, core.Tracer):
        sharding = _traced_argument_sharding(x)
    else:
        sharding = getattr(x, "sharding", None)
    if not isinstance(sharding, NamedSharding):
        return PartitionSpec()
    out = []
    for entry in sharding.spec:
        names = entry if isinstance(entry, tuple) else (entry,)
        kept = tuple(n for n in names if n is not None and n in manual)
        out.append(None if not kept else kept[0] if len(kept) == 1 else kept)
    while out and out[-1] is None:
        out.pop()
    return PartitionSpec(*out)


def _check_context_mesh(mesh) -> None:
    """A mesh passed to shard_map must be the context mesh, when there is one (as in JAX)."""
    from fluxion._src.mesh import get_abstract_mesh
    context = get_abstract_mesh()
    if not context.empty and mesh.abstract_mesh != context:
        raise ValueError(f"The context mesh {context} should match the mesh passed to "
                         f"shard_map {mesh}")


def _check_specs_match_arguments(mesh, manual, specs, leaves, avals) -> None:
    """Over a mesh whose axes are all Explicit and all manual, each concrete argument must be
    laid out as its in_spec says: JAX's ValueError otherwise (an array's type there carries
    its sharding). Traced arguments carry no sharding in fluxion and are not checked."""
    from fluxion._src import sharding_types
    if set(manual) != set(mesh.axis_names) or not all(
            t == AxisType.Explicit for t in mesh.axis_types):
        return
    for x, spec, aval in zip(leaves, specs, avals):
        if isinstance(x, core.Tracer) or not hasattr(aval, "shape"):
            continue
        sharding = getattr(x, "_sharding", None)
        mesh_of_x = getattr(sharding, "mesh", None)
        have = sharding_types.spec_of(
            sharding, aval.ndim,
            sharding_types.explicit_names(mesh_of_x) if mesh_of_x is not None else ())
        want = sharding_types.spec_of(spec, aval.ndim, set(mesh.axis_names))
        if have != want:
            raise ValueError(
                f"in_specs passed to shard_map: {sharding_types.to_partition_spec(want)!r} does "
                f"not match the specs of the input: "
                f"{sharding_types.to_partition_spec(have)!r} for arg: "
                f"{sharding_types.typeof(x)}. `in_specs` is an optional argument so you can "
                "omit specifying it and shard_map will infer the in_specs from the arguments. "
                "If you want to reshard your inputs, you can use `jax.reshard` on the "
                "arguments and then pass those args to shard_map.")


def _manual_axes(mesh, axis_names, auto) -> tuple:
    """The mesh axes the body is manual over, in mesh order: `axis_names` (all axes when
    empty), less the `auto` axes of the older API."""
    for what, names in (("axis_names", axis_names), ("auto", auto)):
        if not isinstance(names, (set, frozenset)):
            raise TypeError(f"`{what}` argument of shard_map should be of type `frozenset` or "
                            f"`set`. Got type: {type(names)}")
    names = set(axis_names) or set(mesh.axis_names)
    if not names <= set(mesh.axis_names) or not set(auto) <= set(mesh.axis_names):
        raise ValueError(f"shard_map requires axis_names={frozenset(axis_names or auto)} to be "
                         f"a subset of mesh.axis_names={frozenset(mesh.axis_names)}")
    manual = tuple(a for a in mesh.axis_names if a in names and a not in auto)
    if not manual:
        raise ValueError("shard_map needs at least one manual mesh axis; `auto` names them all")
    return manual


def shard_map(f=None, /, *, out_specs, in_specs=Infer, mesh: Mesh | None = None,
              check_vma: bool = True, check_rep=None, axis_names=frozenset(),
              auto=frozenset()):
    """Map `f` over blocks of its inputs laid out on `mesh` by `in_specs`; `f` sees one block
    per device and may use collectives over the mesh axis names; `out_specs` say how the
    output blocks assemble into global arrays (an axis absent from a spec means the output is
    the same on every device of that axis).

    With `check_vma` (default; `check_rep` is its older name), an output whose spec leaves out
    a mesh axis the output may vary over (as inferred from `in_specs` and the collectives in
    `f`) is a ValueError; `check_vma=False` trusts `out_specs`.

    `axis_names` (a set, default all mesh axes) names the axes `f` is manual over; along the
    other axes `f` sees whole values, which XLA's partitioner splits (`with_sharding_constraint`
    inside may name them). `auto` (older API) names those other axes instead.

    `mesh=None` takes the mesh set with `fluxion.set_mesh` when called; `in_specs=Infer`
    (the default) reads each argument's spec from its sharding, which needs every manual axis
    to be Explicit."""
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_vma=check_vma, check_rep=check_rep, axis_names=axis_names,
                                 auto=auto)
    check_callable(f)
    if mesh is None or in_specs is Infer:
        return _bound_when_called(f, mesh, in_specs, functools.partial(
            shard_map, out_specs=out_specs, check_vma=check_vma, check_rep=check_rep,
            axis_names=axis_names, auto=auto))
    requested = _manual_axes(mesh, axis_names, auto)
    check = bool(check_vma) and (check_rep is None or bool(check_rep))
    mesh_shape = mesh.shape
    cache: dict = {}

    @functools.wraps(f)
    @api_boundary
    def wrapped(*args):
        # Nested in another shard_map's body, the axes it made manual stay as they are.
        manual = newly_manual(requested)
        all_leaves, in_tree = tree_flatten(args)
        all_specs = _spec_leaves(in_specs if not isinstance(in_specs, PartitionSpec)
                                 or len(args) != 1 else (in_specs,), args, "in_specs",
                                 none_is_static=True)
        static = tuple(s is None for s in all_specs)
        leaves = [x for x, st in zip(all_leaves, static) if not st]
        specs = [sp for sp, st in zip(all_specs, static) if not st]
        gavals = [core.get_aval(x) for x in leaves]
        _check_context_mesh(mesh)
        _check_ranks(f, "in", in_specs, args, all_specs,
                     [None if st else core.get_aval(x) for x, st in zip(all_leaves, static)])
        bavals = [a.update(shape=_block_shape(a.shape, s, mesh_shape, "in_specs", manual))
                  for a, s in zip(gavals, specs)]
        _check_specs_match_arguments(mesh, manual, specs, leaves, gavals)
        key = (manual, in_tree, static, tuple(bavals), tuple(specs))
        entry = None if any(static) else cache.get(key)  # static leaves are this call's
        if entry is None:
            box = []

            def flat_fun(*xs):
                dyn = iter(xs)
                full = [x if st else next(dyn) for x, st in zip(all_leaves, static)]
                out = f(*tree_unflatten(in_tree, full))
                out_leaves, out_tree = tree_flatten(out)
                box.append((out, out_tree))
                return out_leaves

            with inside_body(mesh, manual):
                closed = staging.trace_to_jaxpr(flat_fun, bavals, origin="shard_map")
            out, out_tree = box[0]
            ospecs = _spec_leaves(out_specs, out, "out_specs")
            _check_ranks(f, "out", out_specs, out, ospecs, closed.out_avals)
            for spec in ospecs:
                _check_spec(spec, mesh_shape, "out_specs", manual)
            if check:
                check_out_vma(f, mesh, manual, specs, ospecs,
                              _spec_paths(out_specs, out), closed)
            entry = (closed, out_tree, ospecs)
            if not any(static) and not any(isinstance(c, core.Tracer) for c in closed.consts):
                cache[key] = entry  # a body holding this trace's tracers is traced anew
        closed, out_tree, ospecs = entry
        closed, ref_consts = _refs_as_operands(closed)
        outs = shard_map_p.bind(*ref_consts, *leaves, jaxpr=closed, mesh=mesh,
                                in_specs=(PartitionSpec(),) * len(ref_consts) + tuple(specs),
                                out_specs=tuple(ospecs), manual_axes=manual)
        return tree_unflatten(out_tree, outs)

    return wrapped
