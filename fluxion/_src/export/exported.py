"""`fluxion.export`: jitted functions as portable StableHLO artifacts that can be called later.

An `Exported` holds the function's StableHLO module as a versioned portable artifact (VHLO
bytecode, the form StableHLO's compatibility guarantees cover) plus the pytree structure and
abstract values of its inputs and outputs. Calling it binds `call_exported_p`, whose lowering
inlines the artifact's functions into the calling module, so it runs eagerly, under `jit`,
`vmap` (a loop over the batch) and `grad` (through the exported VJP).

Module calling convention (`calling_convention_version` 9): `@main` takes the flattened
arguments in order and returns the flattened results. When lowered for several platforms,
`@main` takes one more argument first, a `tensor<i32>` platform index into `platforms`, and
picks its branch with `stablehlo.case`; each platform's program is a private function.
"""
from __future__ import annotations

import itertools
import re
import weakref
from typing import Callable, Sequence

import numpy as np

from fluxion._src import ad, batching, core, dtypes, sharding_types, tree_util
from fluxion._src.compiler import backend, hlo, lowering
from fluxion._src.core import ShapedArray
from fluxion._src.export import registrations, shape_checks, shape_poly
from fluxion._src.export import shape_poly_ops  # noqa: F401 (registers dim_as_value)

CALLING_CONVENTION_VERSION = 9
_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
_MODULE_HEADER = ("module @{name} attributes {{mhlo.num_partitions = 1 : i32, "
                  "mhlo.num_replicas = 1 : i32{extra}}} {{\n")


def default_export_platform() -> str:
    """The platform `export` lowers for when none is given: the default backend's."""
    platform = backend.get_backend().platform
    return "cuda" if platform == "gpu" else platform


def canonical_platform(p: str) -> str:
    p = str(p).lower()
    p = "cuda" if p == "gpu" else p
    if p not in _PLATFORMS:
        raise ValueError(f"Unknown platform {p!r} for export; known: {_PLATFORMS}")
    return p


class Exported:
    """A function lowered to StableHLO for given abstract arguments (`jax.export.Exported`).

    Attributes
    ----------
    fun_name : str
    in_tree, out_tree : PyTreeDef
        The structure of `(args, kwargs)` and of the results.
    in_avals, out_avals : tuple of ShapedArray
        Flattened input and output types (dimensions may be symbolic).
    in_shardings_hlo, out_shardings_hlo : tuple
        One entry per input/output; None, as in JAX 0.10.2, which records named shardings
        instead (`in_shardings_jax(mesh)` / `out_shardings_jax(mesh)` give them).
    nr_devices : int
        The devices the module is partitioned for (`mhlo.num_partitions`); a call runs in a
        program partitioned over a mesh of that many devices.
    platforms : tuple of str
    calling_convention_version : int
    mlir_module_serialized : bytes
        The VHLO portable artifact.
    module_kept_var_idx : tuple of int
        The arguments the module takes (JAX drops unused ones; fluxion keeps all).
    """

    # True for an Exported read from jax.export's format: its VJP follows JAX's convention
    # (cotangents of every output in, of every input out; float0 for integers)
    _jax_vjp_convention = False

    def __init__(self, fun_name, in_tree, in_avals, out_tree, out_avals, platforms,
                 mlir_module_serialized: bytes, *, in_shardings_hlo=None,
                 out_shardings_hlo=None, nr_devices: int = 1,
                 calling_convention_version: int = CALLING_CONVENTION_VERSION,
                 module_kept_var_idx=None, uses_global_constants: bool = False,
                 ordered_effects=(), unordered_effects=(), disabled_safety_checks=(),
                 get_vjp: Callable | None = None, in_specs=None, out_specs=None,
                 mesh_axes=(), out_types=None):
        self.fun_name = fun_name
        self.in_tree = in_tree
        self.in_avals = tuple(in_avals)
        self.out_tree = out_tree
        self.out_avals = tuple(out_avals)
        self.platforms = tuple(platforms)
        self.mlir_module_serialized = bytes(mlir_module_serialized)
        self.in_shardings_hlo = tuple(in_shardings_hlo or (None,) * len(self.in_avals))
        self.out_shardings_hlo = tuple(out_shardings_hlo or (None,) * len(self.out_avals))
        self.nr_devices = nr_devices
        self.calling_convention_version = calling_convention_version
        self.module_kept_var_idx = tuple(module_kept_var_idx if module_kept_var_idx is not None
                                         else range(len(self.in_avals)))
        self.uses_global_constants = uses_global_constants
        self.ordered_effects = tuple(ordered_effects)
        self.unordered_effects = tuple(unordered_effects)
        self.disabled_safety_checks = tuple(
            registrations.as_safety_check(c) for c in disabled_safety_checks)
        self._get_vjp = get_vjp
        self._inline_text = None
        # PartitionSpec (or None: unspecified) per input / output of a multi-device export,
        # JAX's `_in_named_shardings` without their abstract mesh
        self._in_specs = tuple(in_specs or (None,) * len(self.in_avals))
        self._out_specs = tuple(out_specs or (None,) * len(self.out_avals))
        # (name, size, AxisType value) per axis of the mesh the specs name (JAX's abstract mesh)
        self._mesh_axes = tuple(tuple(a) for a in mesh_axes)
        # the outputs' specs on Explicit mesh axes (their types), as jit inferred them
        self._out_types = tuple(out_types or self._out_specs)

    def __repr__(self):
        ins = ", ".join(a.str_short() for a in self.in_avals)
        outs = ", ".join(a.str_short() for a in self.out_avals)
        return f"Exported({self.fun_name}: ({ins}) -> ({outs}), platforms={self.platforms})"

    @property
    def uses_shape_polymorphism(self) -> bool:
        return any(shape_poly.is_symbolic_shape(a.shape) for a in self.in_avals)

    def mlir_module(self, serialized: bool = True):
        """The StableHLO module: as text (with the ops' locations unless the config flag
        `jax_include_debug_info_in_dumps` is off), or as a jaxlib `ir.Module` when
        `serialized` is False."""
        module = _deserialize_module(self.mlir_module_serialized)
        if not serialized:
            return module
        from fluxion._src.config import config
        return backend.module_asm(module, config.include_debug_info_in_dumps)

    def in_shardings_jax(self, mesh) -> tuple:
        """The inputs' shardings over `mesh` (a Mesh or AbstractMesh), for `jit` or
        `device_put`: one NamedSharding per input (the exported spec over `mesh`), None where
        the sharding is unspecified."""
        return self._shardings_jax(mesh, self._in_specs, self.in_shardings_hlo, self.in_avals)

    def out_shardings_jax(self, mesh) -> tuple:
        """The outputs' shardings over `mesh`, as `in_shardings_jax` gives the inputs'."""
        return self._shardings_jax(mesh, self._out_specs, self.out_shardings_hlo,
                                   self.out_avals)

    def _shardings_jax(self, mesh, specs, hlo_shardings, avals) -> tuple:
        from fluxion._src.sharding_impls import NamedSharding, named_from_hlo
        return tuple(NamedSharding(mesh, spec) if spec is not None
                     else None if hs is None else named_from_hlo(mesh, hs, len(aval.shape))
                     for spec, hs, aval in zip(specs, hlo_shardings, avals))

    def has_vjp(self) -> bool:
        return self._get_vjp is not None

    def vjp(self) -> "Exported":
        """The exported VJP: `(*primals, *output cotangents) -> input cotangents`, flat."""
        if self._get_vjp is None:
            raise ValueError(f"No VJP is available for the exported function {self.fun_name}: "
                             "serialize it with vjp_order >= 1 to differentiate it after "
                             "deserialization.")
        return self._get_vjp()

    def serialize(self, vjp_order: int = 0, *, format: str = "fluxion") -> bytearray:
        """The serialized artifact; `vjp_order` levels of VJPs go with it so the deserialized
        function can be differentiated that many times.

        Parameters
        ----------
        vjp_order : int
        format : {"fluxion", "jax"}
            "fluxion": fluxion's documented container (docs/export.md). "jax": the
            flatbuffer of `jax.export`, which `jax.export.deserialize` reads.
        """
        if format == "jax":
            from fluxion._src.export import jax_format
            return jax_format.serialize(self, vjp_order)
        if format != "fluxion":
            raise ValueError(f"Unknown serialization format {format!r}; use 'fluxion' or 'jax'")
        if self._jax_vjp_convention:
            raise ValueError(f"{self.fun_name} was deserialized from jax.export's format; "
                             "serialize it again with format='jax'")
        from fluxion._src.export import serialization
        return serialization.serialize(self, vjp_order)

    def call(self, *args, **kwargs):
        """Run the exported function on arguments of its exported types (eagerly or under
        any transformation)."""
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if in_tree != self.in_tree:
            raise ValueError(f"The invocation args and kwargs must have the same pytree "
                             f"structure as when {self.fun_name} was exported: got {in_tree}, "
                             f"exported with {self.in_tree}")
        avals = [core.get_aval(x) for x in leaves]
        _check_call_avals(self, avals)
        outs = _call_flat(self, leaves)
        return tree_util.tree_unflatten(self.out_tree, outs)

    # -- helpers for the lowering
    def _inline_functions(self) -> tuple[str, str]:
        """(function definitions, name of the entry function), all symbols prefixed with
        `PREFIX_` (replaced per use)."""
        if self._inline_text is None:
            self._inline_text = _renamed_functions(self.mlir_module_serialized, _TOKEN)
        return self._inline_text


_TOKEN = "__fluxion_exported_TOKEN__"


def _platform_index_type(exported: Exported) -> str:
    """"i32" or "i64": the platform index argument of a multi-platform module (JAX makes it
    i64 when x64 is enabled)."""
    funcs, entry = exported._inline_functions()
    found = re.search(re.escape(entry) + r"\(%[\w#]+: tensor<(i32|i64)>", funcs)
    return found.group(1) if found else "i32"


def _check_call_avals(exported: Exported, avals) -> None:
    """The arguments of a call must have the exported dtypes and shapes."""
    if len(avals) != len(exported.in_avals):
        raise ValueError(f"Function {exported.fun_name} was exported with "
                         f"{len(exported.in_avals)} arguments but called with {len(avals)}")
    names = None
    for i, (got, want) in enumerate(zip(avals, exported.in_avals)):
        rank_differs = len(got.shape) != len(want.shape)
        dtype_differs = got.dtype != want.dtype and not (want.dtype == dtypes.float0
                                                         and got.dtype == np.bool_)
        bad_dim = None if rank_differs else next(
            (j for j, (g, w) in enumerate(zip(got.shape, want.shape))
             if type(w) is not shape_poly.DimExpr and not _same_dim(w, g)), None)
        if not (rank_differs or dtype_differs or bad_dim is not None):
            continue
        names = names or shape_checks.arg_names(exported.in_tree, len(avals))
        # JAX's messages, in JAX's order (rank, dtype, then each constant dimension)
        if rank_differs:
            raise ValueError(f"Rank mismatch for {names[i]}: expected {tuple(want.shape)} "
                             f"and called with {tuple(got.shape)}")
        if dtype_differs:
            raise ValueError(f"Dtype mismatch for {names[i]}: expected {want.dtype} and "
                             f"called with {got.dtype}")
        raise ValueError(f"Shape mismatch for {names[i]}.shape[{bad_dim}] (expected same "
                         f"constant): expected {tuple(want.shape)} and called with "
                         f"{tuple(got.shape)}")
    if exported.uses_shape_polymorphism:
        _dim_env(exported, avals)


def _dim_env(exported: Exported, avals) -> dict:
    """Values of the dimension variables for arguments of shapes `avals` (ints, or symbolic
    dimensions of the caller's own scope), checked against every symbolic dimension of the
    exported arguments and the scope's constraints (ValueError with JAX's message)."""
    names = shape_checks.arg_names(exported.in_tree, len(avals))
    env, checks = shape_checks.solve(exported.in_avals, names,
                                     lambda i, j: avals[i].shape[j], shape_poly._INT_OPS)
    for check in checks:
        if not check.holds():
            raise ValueError(check.message())
    return env


def _same_dim(a, b) -> bool:
    if type(a) is shape_poly.DimExpr or type(b) is shape_poly.DimExpr:
        if type(a) is shape_poly.DimExpr and type(b) is shape_poly.DimExpr \
                and a.scope is not b.scope:
            return False
        return a == b
    return a == b


def _concrete_out_avals(exported: Exported, avals) -> list:
    """The output types for arguments of shapes `avals` (the exported symbolic output
    dimensions evaluated for the arguments' dimension variables)."""
    if not exported.uses_shape_polymorphism:
        return list(exported.out_avals)
    env = _dim_env(exported, avals)
    return [a.update(shape=tuple(d.evaluate(env) if type(d) is shape_poly.DimExpr else d
                                 for d in a.shape)) for a in exported.out_avals]


def export(fun_jit: Callable, *, platforms: Sequence[str] | None = None,
           disabled_checks=()) -> Callable:
    """`export(jit(f))(*args_or_specs)`: lower `f` for the arguments' abstract values.

    Parameters
    ----------
    fun_jit : a function returned by `jit` (or one of fluxion's library functions)
    platforms : sequence of str, optional
        "cpu", "cuda", "rocm" or "tpu"; default: `default_export_platform()`. With more than
        one, the module picks its branch at run time.

    Returns
    -------
    A function of arrays or `ShapeDtypeStruct`s returning an `Exported`.
    """
    fun_jit = _as_jitted(fun_jit)
    plats = tuple(canonical_platform(p) for p in (platforms or (default_export_platform(),)))
    if len(set(plats)) != len(plats):
        raise ValueError(f"platforms must not repeat, got {plats}")

    disabled_checks = tuple(registrations.as_safety_check(c) for c in disabled_checks)

    def do_export(*args, **kwargs) -> Exported:
        _check_one_scope(fun_jit, args, kwargs)
        plan = _partition_plan(fun_jit, args, kwargs)
        if plan is not None:
            return _export_partitioned(plan, _given_out_shardings(fun_jit, plan), plats,
                                       disabled_checks)
        traced = fun_jit.trace(*args, **kwargs)
        return _export_traced(traced, plats, disabled_checks, fun_jit)

    return do_export


def _partition_plan(fun_jit, args, kwargs):
    """jit's plan of a partitioned program (`sharded_jit.JitPlan`) when the jit has shardings
    or an argument is sharded over a mesh; else None."""
    from fluxion._src import sharded_jit
    from fluxion._src.sharding_impls import NamedSharding
    fun_jit = getattr(fun_jit.trace, "__self__", fun_jit)  # the JitFunction behind `jit`
    if not hasattr(fun_jit, "_flatten"):
        return None
    leaves, in_tree, static_pos, static_kw, dyn_args = fun_jit._flatten(args, kwargs)
    if not (fun_jit._in_shardings_given or fun_jit._out_shardings_given or any(
            isinstance(sharded_jit.leaf_sharding(x), NamedSharding) for x in leaves)):
        return None
    if any(shape_poly.is_symbolic_shape(getattr(x, "shape", ())) for x in leaves):
        raise NotImplementedError("Exporting a function with shardings for symbolic shapes "
                                  "(shape polymorphism on several devices) is not supported")
    return sharded_jit._plan_jit(fun_jit, args, kwargs, leaves, in_tree, static_pos,
                                 static_kw, dyn_args)


def _given_out_shardings(fun_jit, plan) -> list:
    """The jit's own out_shardings, flat (None where not given): what JAX records; the
    shardings jit infers on Explicit axes are the outputs' types instead."""
    from fluxion._src import sharded_jit
    from fluxion._src.sharding_impls import NamedSharding
    fun_jit = getattr(fun_jit.trace, "__self__", fun_jit)
    traced, out_sh = plan.traced, plan.out_shardings
    if not sharding_types.has_explicit_axes(plan.mesh):
        return out_sh
    if not fun_jit._out_shardings_given:
        return [None] * len(out_sh)
    struct = tree_util.tree_unflatten(traced.out_tree, [0] * len(out_sh))
    given = sharded_jit.flat_shardings(fun_jit._out_shardings, struct, "jit out_shardings")
    return [s if isinstance(given_s, NamedSharding) else None
            for s, given_s in zip(out_sh, given)]


def _export_partitioned(plan, given_out_sh, plats, disabled_checks) -> Exported:
    """The artifact of a jit partitioned over a mesh: the module jit compiles for it (Shardy
    annotations, `mhlo.num_partitions` = the mesh size), its specs and device count."""
    from fluxion._src import sharded_jit
    traced, mesh, in_sh, out_sh = plan.traced, plan.mesh, plan.in_shardings, plan.out_shardings
    if plan.stateful is not None:
        raise NotImplementedError(f"Exporting {traced.name}, which takes or closes over Refs, "
                                  "partitioned over a mesh is not supported")
    platform = default_platform_of(mesh)
    if plats != (platform,):
        raise NotImplementedError(f"A function partitioned over a mesh of {platform} devices "
                                  f"is exported for its platform only, not for {plats}")
    text = sharded_jit.lower_sharded(traced.jaxpr, f"jit_{traced.name}", mesh, in_sh, out_sh)
    if "python" in " ".join(_CUSTOM_CALL_TARGET.findall(text)).lower():
        raise ValueError(f"Cannot export {traced.name}: it calls back into Python (a host "
                         "callback such as debug.print or pure_callback), which a serialized "
                         "program cannot carry.")
    _check_custom_calls(text, disabled_checks)

    def get_vjp():
        raise NotImplementedError(f"Differentiating {traced.name}, exported for "
                                  f"{mesh.size} devices, is not supported")

    return Exported(traced.name, traced.in_tree, tuple(traced.in_avals), traced.out_tree,
                    tuple(traced.jaxpr.out_avals), plats, _serialize_module(text),
                    nr_devices=mesh.size, disabled_safety_checks=disabled_checks,
                    get_vjp=get_vjp, in_specs=[s.spec for s in in_sh],
                    out_specs=[None if s is None else s.spec for s in given_out_sh],
                    out_types=[None if s is None else s.spec for s in out_sh],
                    mesh_axes=[(name, size, t.value) for (name, size), t
                               in zip(mesh.shape_tuple, mesh.axis_types)])


def default_platform_of(mesh) -> str:
    platform = mesh.flat_devices[0].platform
    return "cuda" if platform == "gpu" else platform


def _check_one_scope(fun, args, kwargs) -> None:
    """JAX's ValueError when the arguments' symbolic dimensions come from several scopes."""
    first = None
    for path, spec in tree_util.tree_flatten_with_path((args, kwargs))[0]:
        for d in getattr(spec, "shape", ()):
            if type(d) is not shape_poly.DimExpr:
                continue
            if first is None:
                first = (d.scope, path)
            elif d.scope is not first[0]:
                raise ValueError(
                    f"Invalid mixing of symbolic scopes when exporting "
                    f"{getattr(fun, '__name__', fun)}.\nExpected current (from "
                    f"{_path_name(first[1])}) scope {id(first[0])}\nand found for '{d}' "
                    f"({_path_name(path)}) scope {id(d.scope)}\nSee https://docs.jax.dev/en/"
                    "latest/export/shape_poly.html#user-specified-symbolic-constraints.")


def _path_name(path) -> str:
    return ("args" if path[0].idx == 0 else "kwargs") + tree_util.keystr(path[1:])


def _as_jitted(fun):
    """`fun` if it is a `jit` result; fluxion's own library functions (`jnp.sin`, ...), which
    JAX defines as jitted functions, jitted here; anything else is JAX's ValueError."""
    if hasattr(fun, "trace"):
        return fun
    if callable(fun) and getattr(fun, "__module__", "").startswith("fluxion."):
        from fluxion._src import api
        return api.jit(fun)
    raise ValueError(f"Function to be exported must be the result of `jit` but is: {fun}")


def _export_traced(traced, plats, disabled_checks, fun_jit=None) -> Exported:
    closed = traced.jaxpr
    in_avals = tuple(traced.in_avals)
    texts = [_lower_for_platform(closed, in_avals, traced.in_tree, p, traced.name)
             for p in plats]
    text = texts[0] if len(plats) == 1 else multi_platform_module(texts, plats, traced.name,
                                                                   in_avals, closed.out_avals)
    _check_custom_calls(text, disabled_checks)
    artifact = _serialize_module(text)

    def get_vjp():
        return _export_vjp(traced, plats, disabled_checks)

    return Exported(traced.name, traced.in_tree, in_avals, traced.out_tree,
                    tuple(closed.out_avals), plats, artifact,
                    disabled_safety_checks=disabled_checks, get_vjp=get_vjp,
                    # JAX's flag: the module takes dimension variables (shape refinement)
                    uses_global_constants=any(shape_poly.is_symbolic_shape(a.shape)
                                              for a in in_avals))


def _check_custom_calls(text: str, disabled_checks) -> None:
    """JAX's check: an artifact may call only custom-call targets whose behaviour jaxlib keeps
    stable, and those the export allowed with `DisabledSafetyCheck.custom_call`."""
    allowed = set(registrations.STABLE_CUSTOM_CALL_TARGETS)
    allowed.update(c.is_custom_call() for c in disabled_checks if c.is_custom_call())
    bad = sorted(set(_CUSTOM_CALL_TARGET.findall(text)) - allowed)
    if bad:
        raise ValueError("Cannot serialize code with custom calls whose targets have no "
                         f"compatibility guarantees: {', '.join(bad)}. Allow one with "
                         "export(..., disabled_checks=[DisabledSafetyCheck.custom_call(name)]) "
                         "if the artifact will run with the same jaxlib.")


_CUSTOM_CALL_TARGET = re.compile(r'call_target_name = "([^"]*)"')


def _inexact(aval) -> bool:
    return dtypes.issubdtype(aval.dtype, np.inexact)


def _export_vjp(traced, plats, disabled_checks) -> Exported:
    """Export `(*primals, *cts of the inexact outputs) -> cts of the inexact inputs`."""
    from fluxion._src import api, ad_api
    closed = traced.jaxpr
    in_avals = list(traced.in_avals)
    out_avals = list(closed.out_avals)
    n_in = len(in_avals)
    diff_out = [i for i, a in enumerate(out_avals) if _inexact(a)]
    diff_in = [i for i, a in enumerate(in_avals) if _inexact(a)]

    def vjp_fun(*primals_and_cts):
        primals, cts = primals_and_cts[:n_in], primals_and_cts[n_in:]

        def flat_f(*xs):
            full = list(primals)
            for i, x in zip(diff_in, xs):
                full[i] = x
            outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *full)
            return [outs[i] for i in diff_out]
        _, pullback = ad_api.vjp(flat_f, *[primals[i] for i in diff_in])
        return list(pullback(list(cts)))

    specs = [api.ShapeDtypeStruct(a.shape, a.dtype) for a in in_avals]
    specs += [api.ShapeDtypeStruct(out_avals[i].shape, out_avals[i].dtype) for i in diff_out]
    vjp_traced = api.jit(vjp_fun).trace(*specs)
    vjp_traced.name = f"vjp_{traced.name}"
    return _export_traced(vjp_traced, plats, disabled_checks)


# ---------------------------------------------------------------------------------------------
# Lowering and the portable artifact

def _lower_for_platform(closed, in_avals, in_tree, platform: str, name: str) -> str:
    """A module whose public @main takes the flat inputs; constants are embedded."""
    module = hlo.Module(platform)
    block = hlo.Block(module, list(in_avals), [f"%arg{i}" for i in range(len(in_avals))])
    if any(shape_poly.is_symbolic_shape(a.shape) for a in in_avals):
        module.dim_env = _dimension_variables(block, in_avals, in_tree)
    outs = lowering.lower_jaxpr_into(block, closed, block.args)
    if module.__dict__.get("host_callbacks"):
        raise ValueError(f"Cannot export {name}: it calls back into Python (a host callback "
                         "such as debug.print or pure_callback), which a serialized program "
                         "cannot carry.")
    body = hlo.function_text("main", block, outs)
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "main"
    return (_MODULE_HEADER.format(name=f"jit_{safe}", extra="") + body + "\n"
            + "\n".join(module.functions) + ("\n" if module.functions else "") + "}\n")


def _dimension_variables(block, in_avals, in_tree) -> dict:
    """name -> tensor<i32> value of each dimension variable, solved from the arguments' sizes
    (`stablehlo.get_dimension_size`); every check of the sizes against the specification
    becomes a `shape_assertion` custom call, as in JAX."""
    sizes: dict = {}

    def size(i, j):
        if (i, j) not in sizes:
            sizes[i, j] = block.op1("stablehlo.get_dimension_size", [block.args[i]],
                                    ShapedArray((), np.int32), {"dimension": f"{j} : i64"})
        return sizes[i, j]
    names = shape_checks.arg_names(in_tree, len(in_avals))
    env, checks = shape_checks.solve(in_avals, names, size, block._dim_ops())
    for check in checks:
        ok = block.compare(check.lhs, check.rhs, "EQ" if check.comp == "==" else "GE")
        message, inputs = check.message_and_inputs()
        escaped = message.replace("\\", "\\\\").replace('"', '\\"')
        block.custom_call("shape_assertion", [ok, *inputs], [], has_side_effect=True,
                          api_version=2, extra_attrs={"error_message": f'"{escaped}"'})
    return env


def _ir():
    from jaxlib.mlir import ir
    backend.parse_module("module {}")  # makes the shared context
    return ir, backend._mlir_context


def _target_version() -> str:
    from jaxlib.mlir.dialects import stablehlo
    return stablehlo.get_version_from_compatibility_requirement(
        stablehlo.StablehloCompatibilityRequirement.WEEK_4)


def _serialize_module(text: str) -> bytes:
    """StableHLO text -> VHLO portable artifact bytes (CHLO ops are kept)."""
    from jaxlib import _jax
    backend.parse_module(text)  # a clear parse error here rather than inside serialization
    return bytes(_jax.mlir.serialize_portable_artifact(text, _target_version()))


def _deserialize_module(artifact: bytes):
    from jaxlib.mlir.dialects import stablehlo
    ir, ctx = _ir()
    with ctx:
        return stablehlo.deserialize_portable_artifact(ctx, artifact)


def _func_ops(module):
    from jaxlib.mlir import ir
    return [op for op in module.body.operations if op.operation.name == "func.func"]


def _rename_symbols(module, prefix: str) -> dict:
    """Prefix every function name in `module` (and every use); returns old -> new."""
    from jaxlib.mlir import ir
    renames = {}
    for op in _func_ops(module):
        old = ir.StringAttr(op.attributes["sym_name"]).value
        new = f"{prefix}_{old}"
        ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
        ir.SymbolTable.set_symbol_name(op, new)
        renames[old] = new
    return renames


def _refuse_host_callbacks(module) -> None:
    """An artifact never calls back into Python (`export` refuses such functions): a custom
    call to jaxlib's Python callback targets in a loaded module would run whatever callable
    of the calling program its index names, or crash the process, so it is an error."""
    from jaxlib.mlir import ir
    bad = []

    def visit(op):
        if op.name == "stablehlo.custom_call":
            target = ir.StringAttr(op.attributes["call_target_name"]).value
            if "python" in target.lower():
                bad.append(target)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    if bad:
        raise ValueError(f"The exported module calls back into Python (custom call {bad[0]!r}); "
                         "exported artifacts may not contain host callbacks, so this one was "
                         "not made by export or was modified.")


def _drop_one_device_shardings(module) -> None:
    """Remove the Shardy annotations of a jax.export artifact (`sdy.mesh`, `sdy.sharding`
    attributes, `sdy.sharding_constraint`, an identity there): fluxion runs it on one device,
    where they change nothing. Other Shardy ops are refused."""
    from jaxlib.mlir import ir
    bad, constraints = [], []

    def visit(op):
        if op.name == "sdy.sharding_constraint":
            constraints.append(op)
        elif op.name.startswith("sdy.") and op.name != "sdy.mesh":
            bad.append(op.name)
        if "sdy.sharding" in op.attributes:
            del op.attributes["sdy.sharding"]
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    if bad:
        raise ValueError(f"The exported module has Shardy operations ({bad[0]}), which fluxion "
                         "does not run.")
    for op in constraints:
        op.results[0].replace_all_uses_with(op.operands[0])
        op.erase()


def _renamed_functions(artifact: bytes, prefix: str) -> tuple[str, str]:
    from jaxlib.mlir import ir
    _, ctx = _ir()
    with ctx:
        module = _deserialize_module(artifact)
        _refuse_host_callbacks(module)
        _drop_one_device_shardings(module)
        renames = _rename_symbols(module, prefix)
        texts = []
        for op in _func_ops(module):
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
            for attr in ("arg_attrs", "res_attrs"):
                if attr in op.attributes:
                    del op.attributes[attr]
            texts.append(op.get_asm(enable_debug_info=False))
    return "\n".join(texts), renames["main"]


def multi_platform_module(texts, plats, name, in_avals, out_avals) -> str:
    """One module for several platforms: @main(platform_index, *args) with a stablehlo.case
    over the platforms' programs."""
    ir, ctx = _ir()
    funcs = []
    with ctx:
        for text, p in zip(texts, plats):
            module = backend.parse_module(text)
            _rename_symbols(module, f"_platform_{p}")
            for op in _func_ops(module):
                op.attributes["sym_visibility"] = ir.StringAttr.get("private")
                funcs.append(op.get_asm(enable_debug_info=False))
    arg_types = [hlo.tensor_type(a) for a in in_avals]
    out_types = [hlo.tensor_type(a) for a in out_avals]
    args = ", ".join(f"%arg{i}" for i in range(len(in_avals)))
    sig_in = ", ".join(arg_types)
    sig_out = ", ".join(out_types)
    n = len(out_types)
    lines = [f"  func.func public @main(%platform_index: tensor<i32>"
             + "".join(f", %arg{i}: {t}" for i, t in enumerate(arg_types))
             + f") -> ({sig_out}) {{"]
    branches = []
    for p in plats:
        res = "%r" if n == 1 else f"%r:{n}" if n else ""
        call = (f'"func.call"({args}) {{callee = @_platform_{p}_main}} : ({sig_in}) -> ({sig_out})')
        rets = ", ".join("%r" if n == 1 else f"%r#{j}" for j in range(n))
        body = (f"      {res} = {call}\n" if n else f"      {call}\n")
        body += f'      "stablehlo.return"({rets}) : ({sig_out}) -> ()'
        branches.append("{\n" + body + "\n    }")
    out = "%out" if n == 1 else f"%out:{n}" if n else ""
    case = (f'"stablehlo.case"(%platform_index) ({", ".join(branches)}) : (tensor<i32>) -> '
            f"({sig_out})")
    lines.append(f"    {out} = {case}" if n else f"    {case}")
    outs = ", ".join("%out" if n == 1 else f"%out#{j}" for j in range(n))
    lines.append(f'    "func.return"({outs}) : ({sig_out}) -> ()')
    lines.append("  }")
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "main"
    return (_MODULE_HEADER.format(name=f"jit_{safe}", extra="") + "\n".join(lines) + "\n"
            + "\n".join(funcs) + "\n}\n")


# ---------------------------------------------------------------------------------------------
# Calling an Exported: the call_exported primitive

call_exported_p = core.Primitive("call_exported")
call_exported_p.multiple_results = True


def _call_flat(exp: Exported, leaves):
    if not exp.has_vjp():
        return call_exported_p.bind(*leaves, exported=exp)
    from fluxion._src.custom_derivatives import custom_vjp
    n_in = len(leaves)

    @custom_vjp
    def call(*xs):
        return call_exported_p.bind(*xs, exported=exp)

    def fwd(*xs):  # through `call` again, so that the VJP's own VJP serves higher orders
        return call(*xs), xs

    def bwd(primals, cts):
        if exp._jax_vjp_convention:
            return _jax_convention_bwd(exp, primals, cts)
        diff_cts = [ct for ct, a in zip(cts, exp.out_avals) if _inexact(a)]
        in_cts = iter(exp.vjp().call(*primals, *diff_cts))
        return tuple(next(in_cts) if _inexact(a) else None for a in exp.in_avals[:n_in])

    call.defvjp(fwd, bwd)
    return list(call(*leaves))


def _jax_convention_bwd(exp: Exported, primals, cts):
    """The cotangents of the inputs from a VJP in JAX's convention: it takes a cotangent
    for every output (float0 zeros for integer ones) and returns one for every input."""
    vjp = exp.vjp()
    flat_vjp = vjp.in_avals[len(primals):]
    full = [np.zeros(np.shape(ct), np.bool_) if want.dtype == dtypes.float0 else ct
            for ct, want in zip(cts, flat_vjp)]
    leaves = tree_util.tree_leaves(vjp.call(*primals, *full))
    return tuple(ct if _inexact(a) else None for ct, a in zip(leaves, exp.in_avals))


def _call_exported_abstract_eval(*avals, exported: Exported):
    # a float0 value (JAX's integer cotangents) is carried as bool zeros (the module's i1)
    return [a.update(dtype=np.dtype(np.bool_)) if a.dtype == dtypes.float0 else a
            for a in _concrete_out_avals(exported, avals)]


def _platform_index(exported: Exported, platform: str) -> int | None:
    platform = "cuda" if platform == "gpu" else platform
    if platform not in exported.platforms:
        if registrations.DisabledSafetyCheck.platform() in exported.disabled_safety_checks:
            return 0 if len(exported.platforms) > 1 else None
        raise ValueError(f"Function '{exported.fun_name}' was exported for platforms "
                         f"{exported.platforms} but it is used on ('{platform}',).")
    return exported.platforms.index(platform) if len(exported.platforms) > 1 else None


_uses = itertools.count()


def _program_mesh_for(exported: Exported):
    """The mesh of the partitioned program calling a multi-device `exported` (None for a
    single-device one); JAX's ValueError when the program runs on another device count."""
    if exported.nr_devices == 1:
        return None
    from fluxion._src import sharded_jit
    mesh = getattr(sharded_jit._lowering, "mesh", None)
    num_devices = 1 if mesh is None else mesh.size
    if num_devices != exported.nr_devices:
        raise ValueError(f"Function {exported.fun_name} was exported for "
                         f"{exported.nr_devices} devices and is called in a context with "
                         f"{num_devices} devices, which is not allowed.")
    return mesh


def _constrained(ctx, values, specs, mesh):
    """`values` constrained to the exported specs over the calling program's mesh."""
    if mesh is None:
        return list(values)
    from fluxion._src.sharding_impls import NamedSharding
    out = []
    for x, spec in zip(values, specs):
        if spec is not None:
            missing = [a for a in spec.used_axes() if a not in mesh.axis_names]
            if missing:
                raise ValueError(f"The exported function uses the mesh axes {missing}, which "
                                 f"the calling program's mesh {mesh!r} does not have")
            sdy = NamedSharding(mesh, spec).sdy_text(len(x.aval.shape))
            x = ctx.op1("sdy.sharding_constraint", [x], x.aval, {"sharding": sdy})
        out.append(x)
    return out


def _call_exported_lowering(ctx, *args, exported: Exported):
    index = _platform_index(exported, ctx.platform)
    mesh = _program_mesh_for(exported)
    args = _constrained(ctx, args, exported._in_specs, mesh)
    operands = [args[i] for i in exported.module_kept_var_idx]
    results = list(ctx.avals_out)
    if exported.uses_shape_polymorphism and not any(
            shape_poly.is_symbolic_shape(a.shape) for a in ctx.avals_in):
        funcs, entry = _refined_functions(exported, tuple(ctx.avals_in), index)
        index = None  # the platform argument is folded into the refined module
    else:
        funcs, entry = exported._inline_functions()
        # the caller's types may be more static than the module's (tensor<3x4x?xf32> for
        # tensor<3x?x?xf32>): convert to the module's types and back
        operands = [_with_type(ctx, x, exported.in_avals[i])
                    for x, i in zip(operands, exported.module_kept_var_idx)]
        results = [a.update(shape=e.shape) for a, e in zip(results, exported.out_avals)]
    prefix = f"_exported{next(_uses)}"
    ctx.module.functions.append(funcs.replace(_TOKEN, prefix))
    if index is not None:
        kind = np.int64 if _platform_index_type(exported) == "i64" else np.int32
        operands = [ctx.constant(kind(index), kind)] + operands
    outs = ctx.op("func.call", operands, results,
                  {"callee": "@" + entry.replace(_TOKEN, prefix)})
    outs = [_with_type(ctx, x, a) for x, a in zip(outs, ctx.avals_out)]
    return _constrained(ctx, outs, exported._out_specs, mesh)


def _with_type(ctx, value, aval):
    """`value` as a tensor of `aval`'s shape (static or `?` dimensions), same dtype."""
    wanted = value.aval.update(shape=aval.shape)
    if hlo.tensor_type(wanted) == value.type:
        return hlo.Value(value.name, wanted)  # the same MLIR type
    return ctx.op1("stablehlo.convert", [value], wanted)


_refined_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # Exported -> {key: ...}


def _refined_functions(exported: Exported, avals, index) -> tuple[str, str]:
    """The exported functions specialized to arguments of concrete shapes `avals`: a wrapper
    @main of static types calls the polymorphic @main, and StableHLO's shape refinement
    (jaxlib's `refine_polymorphic_shapes`) propagates the static shapes through it."""
    per_exported = _refined_cache.setdefault(exported, {})
    hit = per_exported.get((avals, index))
    if hit is not None:
        return hit
    from jaxlib.mlir import ir
    text = _static_wrapper(exported, avals, _concrete_out_avals(exported, avals), index)
    refined = _refine(text, exported.fun_name, avals)
    _, ctx = _ir()
    with ctx:
        module = ir.Module.parse(refined)
        renames = _rename_symbols(module, _TOKEN)
        texts = []
        for op in _func_ops(module):
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
            texts.append(op.get_asm(enable_debug_info=False))
    result = ("\n".join(texts), renames["main"])
    per_exported[(avals, index)] = result
    return result


def _static_wrapper(exported: Exported, avals, out_avals, index) -> str:
    """A module whose public @main has the static types `avals -> out_avals` and calls the
    exported (polymorphic) @main."""
    funcs, entry = exported._inline_functions()
    funcs, entry = funcs.replace(_TOKEN, "poly"), entry.replace(_TOKEN, "poly")
    kept = exported.module_kept_var_idx  # the module takes these arguments only
    avals = [avals[i] for i in kept]
    dyn_in = [hlo.tensor_type(exported.in_avals[i]) for i in kept]
    dyn_out = [hlo.tensor_type(a) for a in exported.out_avals]
    lines = [f"  func.func public @main("
             + ", ".join(f"%arg{i}: {hlo.tensor_type(a)}" for i, a in enumerate(avals))
             + f") -> ({', '.join(hlo.tensor_type(a) for a in out_avals)}) {{"]
    operands = []
    index_type = f"tensor<{_platform_index_type(exported)}>"
    if index is not None:
        lines.append(f'    %platform = "stablehlo.constant"() {{value = dense<{index}> : '
                     f'{index_type}}} : () -> {index_type}')
        operands.append("%platform")
    for i, (a, t) in enumerate(zip(avals, dyn_in)):
        lines.append(f'    %in{i} = "stablehlo.convert"(%arg{i}) : ({hlo.tensor_type(a)}) -> {t}')
        operands.append(f"%in{i}")
    sig_in = ", ".join(([index_type] if index is not None else []) + dyn_in)
    n = len(dyn_out)
    res = "" if n == 0 else "%r = " if n == 1 else f"%r:{n} = "  # (no results: no name)
    lines.append(f'    {res}"func.call"({", ".join(operands)}) {{callee = @{entry}}} : '
                 f"({sig_in}) -> ({', '.join(dyn_out)})")
    rets = []
    for j, (a, t) in enumerate(zip(out_avals, dyn_out)):
        r = "%r" if n == 1 else f"%r#{j}"
        lines.append(f'    %out{j} = "stablehlo.convert"({r}) : ({t}) -> {hlo.tensor_type(a)}')
        rets.append(f"%out{j}")
    lines.append(f'    "func.return"({", ".join(rets)}) : '
                 f"({', '.join(hlo.tensor_type(a) for a in out_avals)}) -> ()")
    lines.append("  }")
    return "module @refine {\n" + "\n".join(lines) + "\n" + funcs + "\n}\n"


def _refine(text: str, fun_name: str, avals) -> str:
    """StableHLO shape refinement (jaxlib's `refine_polymorphic_shapes`), which also evaluates
    the module's `shape_assertion`s: a failing one is a ValueError with its message."""
    from jaxlib import _jax
    try:
        return _jax.mlir.refine_polymorphic_shapes(
            text.encode(), enable_shape_assertions=True, validate_static_shapes=True)
    except Exception as e:
        found = re.search(r"(Input shapes do not match .*?for more details\.)", str(e), re.S)
        if found:
            raise ValueError(found.group(1)) from None
        raise ValueError(f"Shape refinement of the exported function {fun_name} for "
                         f"arguments {[a.str_short() for a in avals]} failed: {e}") from None


def _call_exported_batch(vals, dims, *, exported: Exported):
    """vmap: a loop over the batch (the artifact has fixed or symbolic shapes of its own)."""
    from fluxion._src.lax import control_flow
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not batching.not_mapped)
    batched = [batching.moveaxis(v, d, 0) if d is not batching.not_mapped else None
               for v, d in zip(vals, dims)]

    def one(xs):
        it = iter(xs)
        full = [next(it) if b is not None else v for v, b in zip(vals, batched)]
        return call_exported_p.bind(*full, exported=exported)

    outs = control_flow.map(one, [b for b in batched if b is not None])
    del size
    return list(outs), [0] * len(outs)


call_exported_p.def_abstract_eval(_call_exported_abstract_eval)
lowering.register_lowering(call_exported_p, _call_exported_lowering)
batching.primitive_batchers[call_exported_p] = _call_exported_batch


def _no_jvp(primals, tangents, *, exported):
    raise ValueError(f"Cannot differentiate the exported function {exported.fun_name}: it "
                     "has no VJP (it was deserialized from bytes serialized with vjp_order=0).")


ad.primitive_jvps[call_exported_p] = _no_jvp


def _call_exported_sharding_rule(ctx, in_specs, in_avals, out_avals, params):
    """On Explicit mesh axes the results have the exported output types (unsharded where the
    artifact records none)."""
    types = params["exported"]._out_types
    return [sharding_types.spec_of(spec, len(a.shape), ctx.explicit)
            for spec, a in zip(types, out_avals)]


sharding_types.rules[call_exported_p] = _call_exported_sharding_rule
