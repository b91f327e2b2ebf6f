"""`jit`, `make_jaxpr`, `eval_shape` and device placement."""
from __future__ import annotations

import warnings
import weakref
import functools
import inspect
import logging
import operator
import sys
import time
from typing import Any, Callable

import numpy as np

import optree

from fluxion._src import cache_misses, nan_checks, profiling, source_info, transfer_guard
from fluxion._src import config_flags, core, dtypes, monitoring, placement, staging, tree_util
from fluxion._src import batching, key_flow
from fluxion._src.array import Array, make_array, unshared
from fluxion._src.caches import BoundedDict, compile_lock
from fluxion._src.compiler import backend
from fluxion._src.config import config
from fluxion._src.core import ClosedJaxpr, ShapedArray
from fluxion._src.export.shape_poly import DimExpr, dimension_as_value, is_symbolic_shape
from fluxion._src.call_transforms import closure_convert
from fluxion._src.traceback_util import api_boundary, strip_internal_frames
from fluxion._src import dispatch
from fluxion._src.dispatch import (CompiledFunction, compile_closed_jaxpr,
                                   jit_p, lower_closed_jaxpr)
from fluxion._src.tree_util import (tree_flatten, tree_flatten_unordered, tree_leaves, tree_map,
                                   tree_unflatten)

logger = logging.getLogger("fluxion")


class ShapeDtypeStruct:
    """A shape, dtype and weak type standing in for an array (`jax.ShapeDtypeStruct`)."""

    __slots__ = ("shape", "dtype", "sharding", "weak_type")

    def __init__(self, shape, dtype, sharding=None, weak_type: bool = False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.sharding = sharding
        self.weak_type = weak_type

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    @classmethod
    def like(cls, x) -> "ShapeDtypeStruct":
        """The shape, dtype and weak type of `x` (an array, tracer, NumPy or Python value, or
        ShapeDtypeStruct), with the sharding of an Array committed to its devices."""
        aval = core.get_aval(x)
        if isinstance(x, ShapeDtypeStruct):
            sharding = x.sharding
        elif not isinstance(x, core.Tracer) and getattr(x, "committed", False):
            sharding = x.sharding
        else:
            sharding = None
        return cls(aval.shape, aval.dtype, sharding=sharding, weak_type=aval.weak_type)

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def update(self, **kwargs) -> "ShapeDtypeStruct":
        """A copy with the given fields (shape, dtype, sharding, weak_type) replaced."""
        fields = {k: getattr(self, k) for k in ("shape", "dtype", "sharding", "weak_type")}
        unknown = set(kwargs) - set(fields)
        if unknown:
            raise TypeError(f"ShapeDtypeStruct.update got unexpected fields {sorted(unknown)}")
        fields.update(kwargs)
        return ShapeDtypeStruct(**fields)


core.register_aval_handler(ShapeDtypeStruct, lambda s: ShapedArray(
    s.shape, dtypes.canonicalize_dtype(s.dtype), s.weak_type))


def _reject_masked_array(x):
    # its mask would be dropped silently (jnp.array, which copies, takes the data as JAX's does)
    raise ValueError("numpy masked arrays are not supported as direct inputs to JAX functions. "
                     "Use arr.filled() to convert the value to a standard numpy array.")


core.register_aval_handler(np.ma.MaskedArray, _reject_masked_array)


def abstractify_args(fun, leaves, in_tree, static_pos=()) -> tuple:
    """The avals of flat argument leaves; a TypeError naming the argument for an invalid one."""
    try:
        avals = tuple(map(core.get_aval, leaves))
    except TypeError:
        raise _invalid_argument_error(fun, leaves, in_tree, static_pos) from None
    for i, x in enumerate(leaves):
        if isinstance(x, np.ma.MaskedArray):  # a subclass of it
            _reject_masked_array(x)
        if type(x) is int and not dtypes.fits_default_int(x):
            path = optree.tree_paths(tree_unflatten(in_tree, leaves), none_is_leaf=False,
                                     namespace=tree_util.NAMESPACE)[i]
            raise OverflowError(
                "An overflow was encountered while parsing an argument to a jitted computation, "
                f"whose argument path is {_argument_path(fun, path, static_pos)}. Got "
                f"{type(x)} with value {x}")
    return avals


def _invalid_argument_error(fun, leaves, in_tree, static_pos) -> TypeError:
    paths = optree.tree_paths(tree_unflatten(in_tree, leaves), none_is_leaf=False,
                              namespace=tree_util.NAMESPACE)
    leaf, path = next((x, p) for x, p in zip(leaves, paths) if not core.valid_jaxtype(x))
    return TypeError(
        f"Error interpreting argument to {fun_name(fun)} as an abstract array. The problematic "
        f"value is of type {type(leaf)} ({leaf!r}) and was passed to the function at path "
        f"{_argument_path(fun, path, static_pos)}.\nThis typically means that a jit-wrapped "
        "function was called with a non-array argument, and this argument was not marked as "
        "static using the static_argnums or static_argnames parameters of jit.")


def _single_device_of(*shardings):
    """The device if every sharding given (pytrees of them, None for unspecified) is a
    SingleDeviceSharding of that one device, else None."""
    from fluxion._src.sharding_impls import Sharding, SingleDeviceSharding
    found = set()
    for tree in shardings:
        if tree is None:
            continue
        for s in tree_leaves(tree, is_leaf=lambda s: isinstance(s, Sharding)):
            if not isinstance(s, SingleDeviceSharding):
                return None
            found.add(s._device)
    return found.pop() if len(found) == 1 else None


def _describer(fun, name: str, n_leaves: int, in_tree, static_pos):
    """A function giving `(name, argument names)` of a jitted function's flat arguments,
    for error messages (JAX's names: `x`, `params['w']`, `args[1]`)."""
    qualname = getattr(fun, "__qualname__", None) or name
    try:  # the compiled function lives in caches weakly keyed by `fun`: no strong reference
        fun_ref = weakref.ref(fun)
    except TypeError:
        fun_ref = lambda: None  # noqa: E731

    def describe():
        fun = fun_ref()
        if fun is None:
            return qualname, None
        paths = optree.tree_paths(tree_unflatten(in_tree, [0] * n_leaves),
                                  none_is_leaf=False, namespace=tree_util.NAMESPACE)
        return qualname, [_argument_path(fun, p, static_pos) for p in paths]
    return describe


def _argument_path(fun, path: tuple, static_pos) -> str:
    """A leaf's path, like JAX's: the parameter's name, then `[key]` per container level."""
    kind, top, *rest = path  # kind 0: positional arguments, 1: keyword arguments
    if kind == 1:
        name = str(top)
    else:
        position = top
        for static in sorted(i for i, _ in static_pos):
            if static <= position:
                position += 1
        name = _positional_name(fun, position)
    return name + "".join(f"[{k!r}]" for k in rest)


def _positional_name(fun, position: int) -> str:
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return f"args[{position}]"
    for i, p in enumerate(params):
        if p.kind == p.VAR_POSITIONAL:
            return f"{p.name}[{position - i}]"
        if i == position and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            return p.name
    return f"args[{position}]"


# ---------------------------------------------------------------------------------------------
# Static arguments

def _normalize_static(fun, static_argnums, static_argnames, what: str = "static_argnums"):
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    static_argnums = tuple(static_argnums or ())
    static_argnames = tuple(static_argnames or ())
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        if what == "donate_argnums" and static_argnames:  # names cannot be mapped to positions
            raise ValueError(f"Getting the signature of function {fun} failed. Pass "
                             "donate_argnums instead of donate_argnames.") from None
        return static_argnums, static_argnames
    _validate_argnames(params, static_argnames, what.replace("argnums", "argnames"))
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not any(p.kind == p.VAR_KEYWORD for p in params):
        named = {p.name for p in params if p.kind != p.POSITIONAL_ONLY}
        invalid = set(static_argnames) - named
        if invalid:  # JAX's check, when jit is applied
            kind = "donate_argnames" if what == "donate_argnums" else "static_argnames"
            raise ValueError(f"Jitted function has invalid argnames {invalid} in {kind}. "
                             "Function does not take these args.")
    if not any(p.kind == p.VAR_POSITIONAL for p in params):
        for i in static_argnums:
            if not -len(positional) <= i < len(positional):
                raise ValueError(f"Jitted function has {what}={static_argnums}, but only "
                                 f"accepts {len(positional)} positional arguments.")
    names = set(static_argnames)
    nums = set(static_argnums)
    for i in static_argnums:
        j = i if i >= 0 else len(positional) + i
        if 0 <= j < len(positional) and positional[j].kind == positional[j].POSITIONAL_OR_KEYWORD:
            names.add(positional[j].name)
    for n in static_argnames:
        for j, p in enumerate(positional):
            if p.name == n:
                nums.add(j)
    return tuple(sorted(nums)), tuple(sorted(names))


def _validate_argnames(params, argnames, what: str) -> None:
    """JAX's ValueError for argnames the function cannot take by keyword."""
    positional_only = {p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL)}
    if invalid := positional_only & set(argnames):
        raise ValueError(f"Jitted function has invalid argnames {invalid} in {what}. These are "
                         "positional-only")
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return
    keyword = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if invalid := set(argnames) - keyword:
        raise ValueError(f"Jitted function has invalid argnames {invalid} in {what}. Function "
                         "does not take these args.")


def _hashable_static(value, what: str):
    try:
        hash(value)
    except TypeError as e:
        raise ValueError(f"Non-hashable static arguments are not supported. An error occurred "
                         f"while trying to hash an object of type {type(value)}, {value!r} "
                         f"({what}). The error was:\nTypeError: {e}") from None
    return value


def _split_args(args, kwargs, static_argnums, static_argnames):
    if not static_argnums and not static_argnames:
        return args, kwargs, (), ()
    n = len(args)
    nums = {i if i >= 0 else n + i for i in static_argnums}
    static_pos = tuple((i, _hashable_static(args[i], f"argument {i}")) for i in sorted(nums) if i < n)
    dyn_args = tuple(a for i, a in enumerate(args) if i not in nums)
    static_kw = tuple(sorted((k, _hashable_static(v, f"argument '{k}'"))
                             for k, v in kwargs.items() if k in static_argnames))
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in static_argnames} if static_kw else kwargs
    return dyn_args, dyn_kwargs, static_pos, static_kw


def _merge_args(dyn_args, static_pos):
    args = list(dyn_args)
    for i, v in static_pos:
        args.insert(i, v)
    return args


# ---------------------------------------------------------------------------------------------
# Tracing a Python function with pytree inputs and outputs

class Traced:
    """A traced function (`jit(f).trace(...)`): its closed jaxpr and the pytree structure of
    its inputs and outputs. `lower()` continues to StableHLO."""

    __slots__ = ("jaxpr", "in_tree", "out_tree", "in_avals", "name", "donate_mask",
                 "consumed_keys")

    def __init__(self, jaxpr, in_tree, out_tree, in_avals, name, donate_mask=None,
                 consumed_keys=()):
        self.jaxpr, self.in_tree, self.out_tree, self.in_avals, self.name = (
            jaxpr, in_tree, out_tree, in_avals, name)
        self.donate_mask = donate_mask
        # with `debug_key_reuse`: the input leaves that are typed keys the function consumes
        self.consumed_keys = consumed_keys

    @property
    def fun_name(self) -> str:
        return self.name

    @property
    def args_info(self):
        """The arguments as the pytree `(args, kwargs)` of `stages.ArgInfo` (aval, donated)."""
        return _args_info(self.in_tree, self.in_avals, self.donate_mask)

    @property
    def donate_argnums(self) -> tuple:
        """The indices of the donated argument leaves."""
        return _donated_leaves(self.donate_mask)

    @property
    def out_info(self):
        """The outputs as a pytree of ShapeDtypeStruct."""
        return tree_unflatten(self.out_tree, [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                                              for a in self.jaxpr.out_avals])

    @api_boundary
    def lower(self, *, lowering_platforms=None, _private_parameters=None) -> "Lowered":
        """Lower the traced function to StableHLO.

        Parameters
        ----------
        lowering_platforms : sequence of str, optional
            Lower for these platforms ("cpu", "cuda", "rocm", "tpu") rather than the default
            backend's. With several, `@main` takes a platform index first and picks its branch
            at run time (as an export does); such a lowering is for inspection or export and
            compiles only when it is for the default backend alone.
        """
        name = f"jit_{self.name}"
        if lowering_platforms is not None:
            return self._lower_for_platforms(tuple(lowering_platforms), name)
        sharded_jit = sys.modules.get("fluxion._src.sharded_jit")
        mesh = sharded_jit.needs_partitioning(self.jaxpr) if sharded_jit is not None else None
        if mesh is not None:  # constraints or shard_map inside: a partitioned program
            text = sharded_jit.lower_for_constraints(self.jaxpr, name, mesh, self.donate_mask)
            lowered = Lowered(text, self, self.donate_mask)
            lowered._compile_sharded = lambda: sharded_jit.compile_for_constraints(
                self.jaxpr, name, mesh, self.donate_mask, text=text)
            return lowered
        text = lower_closed_jaxpr(self.jaxpr, name, donated_invars=self.donate_mask)
        return Lowered(text, self, self.donate_mask)

    def _lower_for_platforms(self, platforms: tuple, name: str) -> "Lowered":
        from fluxion._src.export import exported
        platforms = tuple(exported.canonical_platform(p) for p in platforms)
        if not platforms or len(set(platforms)) != len(platforms):
            raise ValueError(f"lowering_platforms must be distinct platforms, got {platforms}")
        texts = [lower_closed_jaxpr(self.jaxpr, name, platform=p, donated_invars=self.donate_mask)
                 for p in platforms]
        if len(platforms) == 1:
            lowered = Lowered(texts[0], self, self.donate_mask)
        else:
            lowered = Lowered(exported.multi_platform_module(
                texts, platforms, self.name, self.in_avals, self.jaxpr.out_avals), self, None)
        lowered._platforms = platforms
        return lowered


def check_callable(fun) -> None:
    """JAX's TypeError for a transformation applied to something that is not a function (a
    staticmethod object, a generator function included)."""
    if isinstance(fun, staticmethod):
        raise TypeError(f"staticmethod arguments are not supported, got {fun}")
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun}")
    if inspect.isgeneratorfunction(fun):
        raise TypeError(f"Expected a function, got a generator function: {fun}")


def fun_name(fun) -> str:
    return getattr(fun, "__name__", None) or type(fun).__name__


# `debug_key_reuse`: (key_effects(args, scope), consume_arguments(args, effects),
# forward_results((args, kwargs), result, effects)), set by fluxion._src.random.keys, where
# typed keys live.
key_reuse_hooks = None


def _args_info(in_tree, in_avals, donate_mask):
    from fluxion.stages import ArgInfo
    mask = donate_mask or (False,) * len(in_avals)
    return tree_unflatten(in_tree, [ArgInfo(a, bool(d)) for a, d in zip(in_avals, mask)])


def _donated_leaves(donate_mask) -> tuple:
    return tuple(i for i, d in enumerate(donate_mask or ()) if d)


def _argument_shardings(leaves):
    """The NamedShardings of a jit's arguments (None when none has one): see shard_map's
    `argument_shardings`. Only global Arrays and tracers can have one."""
    from fluxion._src.global_array import GlobalArray
    if not any(type(x) is GlobalArray or isinstance(x, core.Tracer) for x in leaves):
        return None
    from fluxion._src.shard_map import argument_shardings
    return argument_shardings(leaves)


def trace_flat(fun, in_tree, in_avals, static_pos=(), static_kw=(), origin="jit",
               arguments=None) -> Traced:
    """Trace `fun` on the flat abstract arguments `in_avals`; `arguments` (shard_map's
    `jit_arguments`), when given, learns the input tracers."""
    config_flags.check_tracing_allowed(fun, origin)
    out_tree_box, consumed_box = [], []
    name = fun_name(fun)
    # `debug_key_reuse`: the keys the function closes over are consumed by each call, not by
    # tracing (make_jaxpr and eval_shape consume none)
    scope = key_flow.Scope() if config.debug_key_reuse and key_reuse_hooks is not None else None
    call = fun if scope is None else key_flow.in_scope(fun, scope)

    def flat_fun(*leaves):
        if arguments is not None:
            arguments.bind(leaves)
        dyn_args, dyn_kwargs = tree_unflatten(in_tree, leaves)
        out = call(*_merge_args(dyn_args, static_pos), **dyn_kwargs, **dict(static_kw))
        out_leaves, out_tree = tree_flatten(out)
        # a symbolic dimension returned (`return x.shape[0] * 2`) is its value, as in JAX
        out_leaves = [dimension_as_value(x) if type(x) is DimExpr else x for x in out_leaves]
        if staging.refs_among(out_leaves):
            from fluxion._src.state import aliasing
            aliasing.check_no_returned_refs(
                fun, origin, out_leaves, out_tree, leaves,
                aliasing._leaf_names(fun, in_tree, len(leaves)), core.current_trace())
        for leaf in out_leaves:
            if not isinstance(leaf, core.Tracer) and not core.valid_jaxtype(leaf):
                raise TypeError(f"{origin} of {name}: the function returned a value of type "
                                f"{type(leaf).__name__} ({leaf!r}), which is not a valid JAX "
                                "type; return arrays, scalars or pytrees of them.")
        out_tree_box.append(out_tree)
        if scope is not None:
            consumed_box.append(key_reuse_hooks[0]((dyn_args, dyn_kwargs), scope))
        return out_leaves

    start = time.perf_counter()
    with profiling.phase("trace", name=name), source_info.extend_name_stack(f"{origin}({name})"):
        closed = staging.trace_to_jaxpr(flat_fun, in_avals,
                                        origin=f"{origin} of {staging.describe_function(fun)}")
    monitoring.record_phase(monitoring.JAXPR_TRACE_EVENT, start, name)
    if config.enable_checks:  # `jax.enable_checks`: type-check what tracing produced
        core.check_jaxpr(closed.jaxpr)
    if config.log_compiles:
        logger.warning("Finished tracing + transforming %s for %s in %.3f sec", name, origin,
                       time.perf_counter() - start)
    return Traced(closed, in_tree, out_tree_box[0], in_avals, name,
                  consumed_keys=consumed_box[0] if consumed_box else ())


# ---------------------------------------------------------------------------------------------
# jit

class _CacheEntry:
    __slots__ = ("compiled", "out_tree", "traced", "donate_mask", "fast_call", "device")

    def __init__(self, compiled, out_tree, traced, donate_mask, device=None):
        self.compiled, self.out_tree, self.traced, self.donate_mask = (
            compiled, out_tree, traced, donate_mask)
        self.device = device
        self.fast_call = _make_fast_call(compiled, out_tree, device)


_aval_of = operator.attrgetter("aval")


def _make_fast_call(compiled: CompiledFunction, out_tree, device=None):
    """The whole call for positional Array arguments: execute, wrap, rebuild the output
    (on `device` for a jit pinned to one)."""
    single = out_tree == _LEAF_TREEDEF
    if device is not None:
        call = compiled.pinned_call(device, single)
    else:
        call = compiled.array_call(single_output=single)
    if single:
        return call
    return lambda args: out_tree.unflatten(call(args))


_LEAF_TREEDEF = tree_flatten(0)[1]


def _run(compiled: CompiledFunction, leaves, donate_mask, device=None):
    """Call `compiled` (on `device` if given); donated arguments lose their host copies, and
    cached constants are copied rather than donated."""
    if not donate_mask:
        return compiled(leaves) if device is None else compiled.call_placed(leaves, device)
    leaves = [unshared(x, aval) if donated else x
              for x, aval, donated in zip(leaves, compiled.in_avals, donate_mask)]
    outs = compiled(leaves) if device is None else compiled.call_placed(leaves, device)
    for x, donated in zip(leaves, donate_mask):
        if donated and type(x) is Array:
            x._npy = None
            if x._buf.is_deleted():
                # Released in jaxlib too: a later use then fails before XLA, which would log
                # an error line of its own for a donated buffer.
                x._buf.delete()
    return outs


def _partitioned_by_values(leaves) -> bool:
    """Whether a global Array is among the jit arguments `leaves`, or held by a Ref there."""
    if any(type(x) is not Array and hasattr(x, "_garr") for x in leaves):
        return True
    if not staging.refs_among(leaves):
        return False
    from fluxion._src import sharded_jit
    return sharded_jit.holds_global(leaves, refs_only=True)


def _closes_over_global_refs(traced: Traced) -> bool:
    """Whether the traced function closes over a Ref holding a global Array."""
    if not traced.jaxpr.consts:
        return False
    from fluxion._src import sharded_jit
    return sharded_jit.holds_global(traced.jaxpr.consts, refs_only=True)


live_jit_functions: "weakref.WeakSet[JitFunction]" = weakref.WeakSet()
JIT_CACHE_SIZE = 1024  # signatures kept per jit function (see caches.py)


# function -> {jit options: (dispatch cache, trace cache, fast-path cache)}, weakly keyed.
_caches_by_function: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _shared_caches(fun, options) -> tuple:
    """The caches of `jit(fun, **options)`: shared by every jit object of that function and
    those options (fresh ones for functions that cannot be weakly referenced or hashed)."""
    try:
        per_fun = _caches_by_function.get(fun)
        if per_fun is None:
            per_fun = _caches_by_function[fun] = {}
        caches = per_fun.get(options)
        if caches is None:
            caches = per_fun[options] = tuple(BoundedDict(JIT_CACHE_SIZE) for _ in range(3))
        return caches
    except TypeError:  # not weakly referenceable, or unhashable options or function
        return tuple(BoundedDict(JIT_CACHE_SIZE) for _ in range(3))


def _hashable_or_id(x):
    try:
        hash(x)
        return x
    except TypeError:
        return ("unhashable", id(x))


def _compiler_name(backend_name) -> str | None:
    """"iree" when `backend_name` asks for IREE; XLA (None) otherwise."""
    return "iree" if isinstance(backend_name, str) and backend_name.lower() == "iree" else None


class JitFunction:
    """A function compiled with XLA on first call for each abstract signature."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=(),
                 donate_argnames=(), inline=False, keep_unused=False, device=None, backend=None,
                 in_shardings=None, out_shardings=None, compiler_options=None):
        check_callable(fun)
        self._jit_kwargs = dict(
            static_argnums=static_argnums, static_argnames=static_argnames,
            donate_argnums=donate_argnums, donate_argnames=donate_argnames, inline=inline,
            keep_unused=keep_unused, device=device, backend=backend, in_shardings=in_shardings,
            out_shardings=out_shardings, compiler_options=compiler_options)
        self._compiler_options = dict(compiler_options) if compiler_options else None
        _check_device(device, "jit(device=...)")
        self._inline = inline
        # jit(device=) and jit(backend=) pin the program to a device: every argument moves
        # there and the results are committed to it (deprecated in JAX, as here).
        self._device = device
        if backend is not None and _compiler_name(backend) is None:
            from fluxion._src.compiler import backend as backends
            pinned = backends.get_backend(backend)  # an unknown or absent one raises
            if device is None:
                self._device = pinned.devices[0]
        if self._device is not None:
            import warnings
            from fluxion._src import placement
            warnings.warn("backend and device argument on jit is deprecated. You can use "
                          "`jax.device_put(..., jax.local_devices(backend=\"cpu\")[0])` on the "
                          "inputs to the jitted function to get the same behavior.",
                          DeprecationWarning, stacklevel=3)
            placement.activate()
        self._in_shardings, self._out_shardings = in_shardings, out_shardings
        self._in_shardings_given = in_shardings is not None
        self._out_shardings_given = out_shardings is not None
        pinned = _single_device_of(in_shardings, out_shardings)
        if pinned is not None and self._device is None:
            # Shardings that all name one device pin the program there, as jit(device=).
            from fluxion._src import placement
            placement.activate()
            self._device = pinned
            self._in_shardings_given = self._out_shardings_given = False
        self._fun = fun
        live_jit_functions.add(self)  # for fluxion.clear_caches()
        self._static_argnums, self._static_argnames = _normalize_static(
            fun, static_argnums, static_argnames)
        # Donated arguments are named or numbered like static ones, each inferred from the other.
        self._donate_argnums, self._donate_argnames = _normalize_static(
            fun, donate_argnums, donate_argnames, "donate_argnums")
        both = set(self._static_argnames) & set(self._donate_argnames)
        if both or set(self._static_argnums) & set(self._donate_argnums):
            raise ValueError("static_argnames and donate_argnames cannot intersect. Argument "
                             f"names {both or set()} appear in both static_argnames and "
                             "donate_argnames")
        # Calls with only positional Arrays and nothing static or donated skip flattening
        # (_fast_cache). `jit` objects of one function with the same options share their
        # caches, so a second `jit(f)` starts warm.
        self._cache, self._trace_cache, self._fast_cache = _shared_caches(
            fun, (self._static_argnums, self._static_argnames, self._donate_argnums,
                  self._donate_argnames, inline, keep_unused, device, backend,
                  _compiler_name(config.default_backend), _hashable_or_id(in_shardings),
                  _hashable_or_id(out_shardings),
                  _hashable_or_id(tuple(sorted((compiler_options or {}).items())))))
        self._compiler = _compiler_name(backend)  # "iree", or None for XLA
        self._fast_path_ok = not (self._static_argnums or self._static_argnames or
                                  self._donate_argnums or self._donate_argnames or
                                  self._in_shardings_given or self._out_shardings_given)

    def __reduce__(self):
        # (cloud)pickling the public function pickles this object (its closure holds `_call`)
        # with its function and options; the compiled programs stay behind.
        return _unpickle_jit_function, (self._fun, self._jit_kwargs,
                                        (self._cache, self._trace_cache, self._fast_cache))

    # -- helpers
    def _flatten(self, args, kwargs):
        dyn_args, dyn_kwargs, static_pos, static_kw = _split_args(
            args, kwargs, self._static_argnums, self._static_argnames)
        leaves, in_tree = tree_flatten((dyn_args, dyn_kwargs))
        return leaves, in_tree, static_pos, static_kw, dyn_args

    def _donate_mask(self, args, static_pos, dyn_args, kwargs):
        if not self._donate_argnums and not self._donate_argnames:
            return None
        static_idx = {i for i, _ in static_pos}
        dyn_positions = [i for i in range(len(args)) if i not in static_idx]
        mask = []
        for pos, a in zip(dyn_positions, dyn_args):
            donate = pos in self._donate_argnums
            mask.extend([donate] * len(tree_flatten(a)[0]))
        for k, v in sorted(kwargs.items()):
            if k in self._static_argnames:
                continue
            mask.extend([k in self._donate_argnames] * len(tree_flatten(v)[0]))
        return tuple(mask)

    def _get_traced(self, leaves, in_tree, static_pos, static_kw) -> Traced:
        avals = abstractify_args(self._fun, leaves, in_tree, static_pos)
        # the named axes bound around the call: the trace may read their sizes (axis_size)
        named_axes = tuple(f for f in batching._axis_env.frames if f[0] is not None)
        # arguments laid out on a mesh: a shard_map inside may infer its in_specs from them
        shardings = _argument_shardings(leaves)
        key = (in_tree, static_pos, static_kw, avals, config.trace_key, named_axes, shardings)
        traced = self._trace_cache.get(key)
        if traced is None:
            if shardings is None:
                traced = trace_flat(self._fun, in_tree, list(avals), static_pos, static_kw,
                                    "jit")
            else:
                from fluxion._src.shard_map import jit_arguments
                with jit_arguments(shardings) as arguments:
                    traced = trace_flat(self._fun, in_tree, list(avals), static_pos, static_kw,
                                        "jit", arguments=arguments)
            self._trace_cache[key] = traced
        return traced

    # -- calling
    def public_function(self) -> Callable:
        """The function `jit` returns: the dispatch fast path, then `_call`.

        A plain function rather than this object's `__call__`: calling an instance costs a
        slot lookup more per call, and the fast path is the hot loop of every jitted program.
        """
        fast_get = self._fast_cache.get
        general = self._call
        trace_state, eval_trace = core._trace_state, core.eval_trace

        def jitted(*args, **kwargs):
            try:
                if not kwargs and trace_state.trace is eval_trace and not config.disable_jit:
                    # Positional Arrays seen before with the same types. Anything else (a NumPy
                    # array, a scalar) has no `aval` and takes the general path. (A dict read
                    # by attribute may raise KeyError for the missing `aval`.)
                    try:
                        fast_call = fast_get((*map(_aval_of, args), config.trace_key))
                    except (AttributeError, KeyError):
                        # Pytrees of Arrays (a list of parameters): keyed by structure and types.
                        try:
                            leaves, treedef = tree_flatten_unordered(args)
                            fast_call = fast_get((treedef, *map(_aval_of, leaves),
                                                  config.trace_key))
                        except (AttributeError, KeyError):
                            fast_call = None
                        if fast_call is not None:
                            return fast_call(leaves)
                    if fast_call is not None:
                        return fast_call(args)
                return general(args, kwargs)
            except Exception as e:
                # Unwinding added this frame after `_call`'s boundary filtered the
                # traceback; without this the user would see it in every jit error.
                strip_internal_frames(e)
                raise

        functools.update_wrapper(jitted, self._fun)
        for name in ("lower", "trace", "eval_shape", "clear_cache", "_cache", "_fast_cache",
                     "_cache_size"):
            setattr(jitted, name, getattr(self, name))
        return jitted

    @api_boundary
    def _call(self, args, kwargs):
        if config.disable_jit:
            return self._fun(*args, **kwargs)
        if self._compiler_options:
            from fluxion._src.compiler import backend
            with backend.compiler_options(self._compiler_options):
                return self._call_compiled(args, kwargs)
        return self._call_compiled(args, kwargs)

    def _call_compiled(self, args, kwargs):
        leaves, in_tree, static_pos, static_kw, dyn_args = self._flatten(args, kwargs)
        sharded = self._in_shardings_given or self._out_shardings_given
        if staging.refs_among(leaves):
            from fluxion._src.state import aliasing
            traced = self._get_traced(leaves, in_tree, static_pos, static_kw)
            aliasing.check_ref_arguments(self._fun, leaves, in_tree, traced.jaxpr.consts)
        if core._trace_state.trace is not core.eval_trace:
            if sharded:  # the shardings become constraints on the inputs and outputs
                from fluxion._src import sharded_jit
                leaves = self._constrain(leaves, sharded_jit.in_shardings_of(
                    self, dyn_args, tree_unflatten(in_tree, leaves)[1]))
            traced = self._get_traced(leaves, in_tree, static_pos, static_kw)
            if config.debug_key_reuse:
                self._consume_keys(args, kwargs, traced)
            closed, consts = closure_convert(traced.jaxpr)
            pinned = {} if self._device is None else {"device": self._device}
            if self._inline and not pinned and not sharded:  # its equations, no jit equation
                outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *consts, *leaves)
            else:
                outs = jit_p.bind(*consts, *leaves, jaxpr=closed, name=traced.name, **pinned)
            if sharded and self._out_shardings_given:
                from fluxion._src import sharded_jit, sharding_impls
                out_struct = tree_unflatten(traced.out_tree, [0] * len(outs))
                outs = self._constrain(outs, [
                    None if s is None else sharding_impls.canonicalize(s, "jit out_shardings")
                    for s in sharded_jit.flat_shardings(self._out_shardings, out_struct,
                                                        "jit out_shardings")])
            result = tree_unflatten(traced.out_tree, outs)
            if config.debug_key_reuse:
                self._keys_returned(args, kwargs, traced, result)
            return result
        if sharded or (dispatch.sharded_apply_primitive is not None
                       and _partitioned_by_values(leaves)):
            from fluxion._src import sharded_jit
            out = sharded_jit.jit_call(self, args, kwargs, leaves, in_tree, static_pos,
                                       static_kw, dyn_args)
            if out is not sharded_jit.NO_MESH:
                return out
        key = (in_tree, static_pos, static_kw, abstractify_args(self._fun, leaves, in_tree, static_pos),
               config.trace_key)
        entry = self._cache.get(key)
        if entry is None:
            if config.explain_cache_misses:
                cache_misses.explain(self._fun, self._cache, key)
            with compile_lock:  # threads missing at once compile once
                entry = self._cache.get(key)
                if entry is None:
                    entry = self._compile(args, kwargs, leaves, in_tree, static_pos, static_kw,
                                          dyn_args)
                    self._cache[key] = entry
            if (self._fast_path_ok and not kwargs and not nan_checks.enabled()
                    and not config.debug_key_reuse):
                if all(type(x) is Array for x in args):
                    self._fast_cache[tuple(x.aval for x in args) + (config.trace_key,)] = (
                        entry.fast_call)
                elif all(type(x) is Array for x in leaves):  # leaves: those of args, in order
                    self._fast_cache[(tree_flatten_unordered(args)[1],
                                      *(x.aval for x in leaves),
                                      config.trace_key)] = entry.fast_call
        if config.no_execution:  # part of trace_key: the fast path missed
            config_flags.check_execution_allowed(f"jit({fun_name(self._fun)})")
        if config.debug_key_reuse:
            self._consume_keys(args, kwargs, entry.traced)
        outs = _run(entry.compiled, leaves, entry.donate_mask, entry.device)
        if config.debug_nans or config.debug_infs:
            nan_checks.check_jit_outputs(entry.traced, leaves, outs)
        result = entry.out_tree.unflatten(outs)
        if config.debug_key_reuse:
            self._keys_returned(args, kwargs, entry.traced, result)
        return result

    @staticmethod
    def _keys_returned(args, kwargs, traced, result) -> None:
        """`debug_key_reuse`: the keys the call returns unchanged are its argument keys."""
        if traced.consumed_keys and key_reuse_hooks is not None:
            key_reuse_hooks[2]((args, kwargs), result, traced.consumed_keys)

    def _consume_keys(self, args, kwargs, traced) -> None:
        """`debug_key_reuse`: the typed keys this call consumes (KeyReuseError if one was)."""
        if traced.consumed_keys and key_reuse_hooks is not None:
            dyn_args, dyn_kwargs, _, _ = _split_args(args, kwargs, self._static_argnums,
                                                     self._static_argnames)
            key_reuse_hooks[1]((dyn_args, dyn_kwargs), traced.consumed_keys)

    def _partitioned_by_values(self, args, kwargs) -> bool:
        """Whether `jit(f).lower(*args, **kwargs)` is partitioned by the values it takes: a
        global Array among the arguments, or in a Ref among them or closed over."""
        leaves, in_tree, static_pos, static_kw, _ = self._flatten(args, kwargs)
        if _partitioned_by_values(leaves):
            return True
        return _closes_over_global_refs(self._get_traced(leaves, in_tree, static_pos,
                                                         static_kw))

    @staticmethod
    def _constrain(values, shardings):
        from fluxion._src import sharded_jit, sharding_impls
        return [x if not isinstance(s, sharding_impls.NamedSharding)
                else sharded_jit.sharding_constraint(x, s) for x, s in zip(values, shardings)]

    def _compile(self, args, kwargs, leaves, in_tree, static_pos, static_kw, dyn_args) -> _CacheEntry:
        traced = self._get_traced(leaves, in_tree, static_pos, static_kw)
        if dispatch.sharded_apply_primitive is not None and _closes_over_global_refs(traced):
            from fluxion._src import sharded_jit  # partitioned by the Refs' values
            entry = sharded_jit.compile_jit(self, args, kwargs, leaves, in_tree, static_pos,
                                            static_kw, dyn_args)
            if entry is not False:
                return entry
        mask = self._donate_mask(args, static_pos, dyn_args, kwargs)
        compiled = compile_closed_jaxpr(traced.jaxpr, name=f"jit_{traced.name}", donated_invars=mask,
                                        compiler=self._compiler or _compiler_name(config.default_backend))
        if isinstance(compiled, CompiledFunction):
            compiled.describe = _describer(self._fun, traced.name, len(leaves), in_tree,
                                           static_pos)
        return _CacheEntry(compiled, traced.out_tree, traced, mask, self._device)

    # -- ahead of time
    @api_boundary
    def trace(self, *args, **kwargs) -> Traced:
        """Trace for these arguments, without lowering or compiling."""
        leaves, in_tree, static_pos, static_kw, dyn_args = self._flatten(args, kwargs)
        traced = self._get_traced(leaves, in_tree, static_pos, static_kw)
        mask = self._donate_mask(args, static_pos, dyn_args, kwargs)
        if mask is None:
            return traced
        return Traced(traced.jaxpr, traced.in_tree, traced.out_tree, traced.in_avals,
                      traced.name, mask)

    @api_boundary
    def lower(self, *args, **kwargs) -> "Lowered":
        """Trace and lower to StableHLO for these arguments (`.compile()` continues)."""
        if self._in_shardings_given or self._out_shardings_given or (
                dispatch.sharded_apply_primitive is not None
                and self._partitioned_by_values(args, kwargs)):
            from fluxion._src import sharded_jit
            lowered = sharded_jit.lower_jit(self, args, kwargs)
            if lowered is not None:
                lowered._compiler_options = self._compiler_options
                lowered._arg_names = None
                return lowered
        lowered = self.trace(*args, **kwargs).lower()
        lowered._device = self._device
        if self._device is None and dispatch.placing:  # compiled for the committed device
            lowered._device = placement.committed_device(tree_flatten((args, kwargs))[0])
        lowered._compiler_options = self._compiler_options
        leaves, in_tree, static_pos, _, _ = self._flatten(args, kwargs)
        names = _describer(self._fun, lowered._traced.name, len(leaves), in_tree, static_pos)()[1]
        lowered._arg_names = lambda: names
        return lowered

    def eval_shape(self, *args, **kwargs):
        """The outputs as ShapeDtypeStructs, with the jit's `out_shardings` where it has them."""
        out = self.trace(*args, **kwargs).out_info
        if self._out_shardings is None:
            return out
        from fluxion._src import sharded_jit, sharding_impls
        leaves, tree = tree_flatten(out)
        shardings = sharded_jit.flat_shardings(
            self._out_shardings, tree_unflatten(tree, [0] * len(leaves)), "jit out_shardings")
        return tree_unflatten(tree, [
            leaf if s is None else leaf.update(sharding=sharding_impls.canonicalize(
                s, "jit out_shardings")) for leaf, s in zip(leaves, shardings)])

    def clear_cache(self):
        self._cache.clear()
        self._fast_cache.clear()
        self._trace_cache.clear()

    def _cache_size(self) -> int:
        return len(self._cache)


class Lowered:
    """A jitted function lowered to StableHLO for one signature (`jit(f).lower(...)`)."""

    _platforms = None  # set by Traced.lower(lowering_platforms=...)

    def __init__(self, text: str, traced: Traced, donate_mask):
        self._text = text
        self._traced = traced
        self._donate_mask = donate_mask

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """The module's text, as JAX prints it.

        Parameters
        ----------
        dialect : {None, "stablehlo", "hlo"}
            StableHLO in MLIR's custom assembly form (the default), or XLA's HLO text.
        debug_info : bool
            Include the ops' source locations (`loc(...)`; HLO: their `metadata`).
        """
        if dialect in (None, "stablehlo"):
            from fluxion._src.compiler.backend import module_asm, parse_module
            return module_asm(parse_module(self._text), debug_info)
        if dialect == "hlo":
            from jaxlib import _hlo
            options = _hlo.HloPrintOptions.short_parsable()
            options.print_metadata = debug_info
            return self.compiler_ir("hlo").as_hlo_module().to_string(options)
        raise ValueError(f"unknown dialect: {dialect}")

    def compiler_ir(self, dialect: str | None = None):
        """The module as a jaxlib MLIR `ir.Module` (dialect "stablehlo", the default) or as
        an `XlaComputation` ("hlo"), as JAX gives them."""
        if dialect in (None, "stablehlo"):
            from fluxion._src.compiler.backend import parse_module
            return parse_module(self._text)
        if dialect == "hlo":
            from jaxlib import _jax
            return _jax.mlir.mlir_module_to_xla_computation(self._text, use_tuple_args=False,
                                                            return_tuple=False)
        raise ValueError(f"unknown dialect: {dialect}")

    @property
    def in_tree(self):
        return self._traced.in_tree

    @property
    def out_tree(self):
        return self._traced.out_tree

    @property
    def in_avals(self):
        """The abstract arguments as the pytree `(args, kwargs)`."""
        return tree_unflatten(self._traced.in_tree, list(self._traced.in_avals))

    @property
    def args_info(self):
        """The arguments as the pytree `(args, kwargs)` of `stages.ArgInfo` (aval, donated)."""
        return _args_info(self._traced.in_tree, self._traced.in_avals, self._donate_mask)

    @property
    def donate_argnums(self) -> tuple:
        """The indices of the donated argument leaves."""
        return _donated_leaves(self._donate_mask)

    def cost_analysis(self):
        """XLA's cost estimates (flops, bytes accessed) of the module before optimization."""
        from jaxlib import _jax
        from fluxion._src.compiler import backend
        return _jax.hlo_module_cost_analysis(backend.get_backend().client,
                                             self.compiler_ir("hlo").as_hlo_module())

    @property
    def out_info(self):
        """The outputs as ShapeDtypeStructs; as JAX's, a lowered program's carry no weak type."""
        return tree_map(lambda s: s.update(weak_type=False), self._traced.out_info)

    _compile_sharded = None  # set for partitioned programs (sharded_jit.lower_jit)
    _device = None  # the device of a jit(device=...) program
    _compiler_options = None  # the jit's
    _arg_names = None  # a function giving the flat arguments' names, for errors

    def compile(self, compiler_options: dict | None = None) -> "Compiled":
        """Compile with XLA; `compiler_options` (XLA options by name, as `jit` takes them) add
        to and override the jit's."""
        options = {**(self._compiler_options or {}), **(compiler_options or {})}
        from fluxion._src.compiler import backend
        with backend.compiler_options(options):
            return self._compile()

    def _check_platforms(self) -> None:
        from fluxion._src.export.exported import default_export_platform
        here = default_export_platform()
        if self._platforms != (here,):
            raise ValueError(
                f"Cannot compile {self._traced.name}: it was lowered for platforms "
                f"{self._platforms}, and only a lowering for this backend's platform alone "
                f"({here!r}) compiles here. To run it on several platforms, export it "
                "(fluxion.export.export(jit(f), platforms=...)) and call the Exported.")

    def _compile(self) -> "Compiled":
        if self._platforms is not None:
            self._check_platforms()
        symbolic = [a for a in self._traced.in_avals if is_symbolic_shape(a.shape)]
        if symbolic:
            raise ValueError(
                f"Cannot compile {self._traced.name}: it was lowered for symbolic shapes "
                f"({', '.join(a.str_short() for a in symbolic)}) and XLA compiles static "
                "shapes only. Lower it with concrete shapes, or export it "
                "(fluxion.export.export(jit(f))(...)) and call the Exported with arrays.")
        if self._compile_sharded is not None:
            out = Compiled(self._compile_sharded(), self._traced)
        else:
            compiled = compile_closed_jaxpr(self._traced.jaxpr, name=f"jit_{self._traced.name}",
                                            donated_invars=self._donate_mask, text=self._text)
            out = Compiled(compiled, self._traced, self._device)
        out._arg_names = self._arg_names
        return out


def sharding_impls_single(device):
    from fluxion._src.sharding_impls import single_device_sharding
    return single_device_sharding(device)


def _formats(avals, shardings) -> list:
    from fluxion._src.layout import Format, default_layout
    return [Format(default_layout(len(a.shape)), s) for a, s in zip(avals, shardings)]


class Compiled:
    """An executable for one signature; call it with arguments of that signature."""

    def __init__(self, compiled: CompiledFunction, traced: Traced, device=None):
        self._compiled = compiled
        self._traced = traced
        self._device = device

    _arg_names = None  # a function giving the flat arguments' names (JitFunction.lower)

    def __call__(self, *args, **kwargs):
        leaves, in_tree = tree_flatten((args, kwargs))
        if in_tree != self._traced.in_tree:
            raise TypeError("Function compiled with input pytree does not match the input pytree "
                            f"it was called with: compiled for {self._traced.in_tree}, called "
                            f"with {in_tree}.")
        for x in leaves:
            if isinstance(x, core.Tracer):
                raise TypeError("Cannot apply JAX transformations to a function lowered and "
                                "compiled for a particular signature. Detected argument of "
                                f"Tracer type {type(x)}.")
        self._check_types([core.get_aval(x) for x in leaves])
        if dispatch.placing and isinstance(self._compiled, CompiledFunction):
            self._check_devices(leaves)
        return self._traced.out_tree.unflatten(
            _run(self._compiled, leaves, self._traced.donate_mask, self._device))

    def _check_types(self, avals) -> None:
        """JAX's TypeError listing (up to five) arguments of another shape or dtype."""
        wanted = self._traced.in_avals
        bad = [i for i, (got, want) in enumerate(zip(avals, wanted))
               if (got.shape, got.dtype) != (want.shape, want.dtype)]
        if not bad:
            return
        names = self._arg_names() if self._arg_names is not None else None
        names = names or [f"args[{i}]" for i in range(len(avals))]
        def typ(a):  # JAX's words: float32[3,4]
            return f"{a.dtype.name}[{','.join(map(str, a.shape))}]"
        lines = [f"Argument '{names[i]}' compiled with {typ(wanted[i])} and called with "
                 f"{typ(avals[i])}" for i in bad[:5]]
        count = "The" if len(bad) < 5 else f"The first 5 of {len(bad)}"
        raise TypeError("Argument types differ from the types for which this computation was "
                        "compiled. Perhaps you are calling the compiled executable with a "
                        f"different enable_x64 mode than when it was AOT compiled? {count} "
                        "mismatches are:\n" + "\n".join(lines))

    def _check_devices(self, leaves) -> None:
        """An executable compiled ahead of time runs on its device: committed arguments
        elsewhere are an error (as in JAX), uncommitted ones move."""
        want = self._device or self._compiled.executable.device
        names = None
        for i, x in enumerate(leaves):
            if type(x) is Array and x.committed and x.device != want:
                if names is None:
                    names = self._compiled.describe()[1] if self._compiled.describe else []
                name = names[i] if i < len(names) else f"args[{i}]"
                raise ValueError(
                    "Computation was compiled for input shardings that disagree with the "
                    "shardings of arguments passed to it. Here are the 1 mismatches:\n"
                    f"Argument {name} with shape {x.aval.str_short(short_dtypes=False)}:\n"
                    f"  Passed sharding: {x.sharding!r}\n"
                    f"  Required sharding: {sharding_impls_single(want)!r}")

    in_tree = property(lambda self: self._traced.in_tree)
    out_tree = property(lambda self: self._traced.out_tree)
    in_avals = Lowered.in_avals
    _donate_mask = property(lambda self: self._traced.donate_mask)
    args_info = Lowered.args_info
    donate_argnums = Lowered.donate_argnums

    @property
    def out_info(self):
        """The outputs as ShapeDtypeStructs (no weak types, as JAX's)."""
        return tree_map(lambda s: s.update(weak_type=False), self._traced.out_info)

    def _flat_shardings(self, outputs: bool) -> list:
        exe = self._compiled
        if hasattr(exe, "in_shardings"):  # partitioned over a mesh
            return list(exe.out_shardings if outputs else exe.in_shardings)
        one = sharding_impls_single(self._device or exe.executable.device)
        return [one] * len(self._traced.jaxpr.out_avals if outputs else self._traced.in_avals)

    @property
    def input_shardings(self):
        """The arguments' shardings, as the pytree `(args, kwargs)`."""
        return tree_unflatten(self._traced.in_tree, self._flat_shardings(outputs=False))

    @property
    def output_shardings(self):
        """The results' shardings, as the pytree of the results."""
        return self._traced.out_tree.unflatten(self._flat_shardings(outputs=True))

    @property
    def input_formats(self):
        """The arguments' `Format`s (fluxion's default layout and the sharding)."""
        return tree_unflatten(self._traced.in_tree, _formats(
            self._traced.in_avals, self._flat_shardings(outputs=False)))

    @property
    def output_formats(self):
        """The results' `Format`s (fluxion's default layout and the sharding)."""
        return self._traced.out_tree.unflatten(_formats(
            self._traced.jaxpr.out_avals, self._flat_shardings(outputs=True)))

    def as_text(self) -> str:
        modules = self._compiled.executable.loaded.hlo_modules()
        return "\n".join(m.to_string() for m in modules)

    def cost_analysis(self):
        return self._compiled.executable.loaded.cost_analysis()

    def memory_analysis(self):
        return self._compiled.executable.loaded.get_compiled_memory_stats()

    def runtime_executable(self):
        """The jaxlib LoadedExecutable this runs (JAX's `Compiled.runtime_executable`)."""
        return self._compiled.executable.loaded


_NO_FUNCTION = object()  # `jit(static_argnums=...)` without a function returns a decorator


def jit(fun: Callable = _NO_FUNCTION, *, in_shardings=None, out_shardings=None, static_argnums=(),
        static_argnames=(), donate_argnums=(), donate_argnames=(), inline=False,
        keep_unused=False, device=None, backend=None, compiler_options=None):
    """Compile `fun` with XLA, once per abstract signature of its arguments.

    Parameters
    ----------
    fun : callable
        A function of arrays (or pytrees of arrays) returning arrays or pytrees of arrays.
    static_argnums, static_argnames : int or str, or sequences of them
        Arguments treated as compile-time constants; they must be hashable, and each new
        value compiles anew.
    donate_argnums, donate_argnames : int or str, or sequences of them
        Arguments whose buffers XLA may reuse for outputs; they are invalid after the call.
    in_shardings, out_shardings : Sharding, PartitionSpec, None, or pytree prefixes of them
        How the positional arguments and the outputs are laid out over a mesh (None: the
        argument's own sharding / XLA's choice). The program is then partitioned by XLA.
    compiler_options : dict, optional
        XLA options by name (its debug options, or ``optimization_level`` and the other
        build options JAX sets); XLA rejects an unknown name when compiling.

    Returns
    -------
    A callable with the same signature, plus `.lower(*args)` for ahead-of-time compilation.
    """
    from fluxion._src.layout import strip_formats  # Format(layout, sharding) leaves
    in_shardings = strip_formats(in_shardings, "jit in_shardings")
    out_shardings = strip_formats(out_shardings, "jit out_shardings")
    kwargs = dict(in_shardings=in_shardings, out_shardings=out_shardings,
                  static_argnums=static_argnums, static_argnames=static_argnames,
                  donate_argnums=donate_argnums, donate_argnames=donate_argnames, inline=inline,
                  keep_unused=keep_unused, device=device, backend=backend,
                  compiler_options=compiler_options)
    if fun is _NO_FUNCTION:
        return lambda f: JitFunction(f, **kwargs).public_function()
    return JitFunction(fun, **kwargs).public_function()


def _unpickle_jit_function(fun, jit_kwargs, caches):
    """Rebuild a pickled `JitFunction` around `caches`, the (empty) caches that the pickled
    public function's closure refers to, so that its fast path and `_call` share them."""
    jit_function = JitFunction(fun, **jit_kwargs)
    jit_function._cache, jit_function._trace_cache, jit_function._fast_cache = caches
    return jit_function


# ---------------------------------------------------------------------------------------------
# Inspection

def make_jaxpr(fun: Callable, static_argnums=(), return_shape: bool = False, axis_env=None):
    """A function that returns the closed jaxpr of `fun` traced on its arguments' types.

    `axis_env`, a sequence of `(axis_name, size)` pairs, binds axis names for collectives
    (`psum`, `axis_index`, ...) as an enclosing `pmap` would.
    """
    from fluxion._src.batching import bind_axes
    static_argnums, _ = _normalize_static(fun, static_argnums, ())
    axis_env = [(name, operator.index(size)) for name, size in (axis_env or ())]

    @functools.wraps(fun)
    @api_boundary
    def make(*args, **kwargs):
        dyn_args, dyn_kwargs, static_pos, static_kw = _split_args(args, kwargs, static_argnums, ())
        leaves, in_tree = tree_flatten((dyn_args, dyn_kwargs))
        avals = list(abstractify_args(fun, leaves, in_tree, static_pos))
        with bind_axes(axis_env):
            traced = trace_flat(fun, in_tree, avals, static_pos, static_kw, "make_jaxpr")
        if return_shape:
            shapes = tree_unflatten(traced.out_tree, [
                ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in traced.jaxpr.out_avals])
            return traced.jaxpr, shapes
        return traced.jaxpr

    return make


@api_boundary
def eval_shape(fun: Callable, *args, **kwargs):
    """The output shapes and dtypes of `fun(*args, **kwargs)`, computed without running it."""
    own = getattr(fun, "eval_shape", None)
    if own is not None and hasattr(fun, "lower"):  # a jitted function: its static arguments
        return own(*args, **kwargs)
    leaves, in_tree = tree_flatten((args, kwargs))
    avals = list(abstractify_args(fun, leaves, in_tree))
    traced = trace_flat(fun, in_tree, avals, origin="eval_shape")
    return tree_unflatten(traced.out_tree, [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                                            for a in traced.jaxpr.out_avals])


# ---------------------------------------------------------------------------------------------
# Devices and transfers

# The public device functions take JAX's keyword `backend`, which shadows the module.
_get_backend = backend.get_backend


def devices(backend: str | None = None) -> list:
    """The devices of a backend (default: the default backend), of every process."""
    return list(_get_backend(backend).client.devices())


def local_devices(process_index=None, backend=None, host_id=None) -> list:
    """The devices this process (or `process_index`; `host_id` is its old name) drives."""
    b = _get_backend(backend)
    if process_index is None:
        process_index = host_id
    if process_index is None:
        return list(b.devices)
    found = [d for d in b.client.devices() if d.process_index == process_index]
    if not found:
        raise ValueError(f"Unknown process_index {process_index}")
    return found


def device_count(backend=None) -> int:
    return len(devices(backend))


def local_device_count(backend=None) -> int:
    return len(_get_backend(backend).devices)


def default_backend() -> str:
    """The platform name of the default backend: 'cpu' or 'gpu'."""
    platform = _get_backend().platform
    return "gpu" if platform in ("cuda", "rocm") else platform


def process_index(backend=None) -> int:
    return _get_backend(backend).client.process_index()


def process_count(backend=None) -> int:
    return len({d.process_index for d in _get_backend(backend).client.devices()})


def process_indices(backend=None) -> list[int]:
    """The indices of the processes taking part in the computation."""
    return sorted({d.process_index for d in _get_backend(backend).client.devices()})


def _renamed(old: str, new):
    def alias(backend=None):
        warnings.warn(f"fluxion.{old} has been renamed to fluxion.{new.__name__}. This alias will "
                      "eventually be removed; please update your code.", UserWarning,
                      stacklevel=2)
        return new(backend)
    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated alias of `{new.__name__}`."
    return alias


host_id = _renamed("host_id", process_index)
host_count = _renamed("host_count", process_count)
host_ids = _renamed("host_ids", process_indices)


def _check_device(device, where: str) -> None:
    """`device` must be None or a device (Shardings take device_put's sharded path)."""
    if device is not None and not (hasattr(device, "platform") and hasattr(device, "client")):
        raise ValueError(f"{where} only accepts None or a device (one of fluxion.devices()). "
                         f"Received invalid value: {device!r}")


def _is_device(d) -> bool:
    return hasattr(d, "platform") and hasattr(d, "client")


def _is_sharding_tree(device) -> bool:
    """Whether `device` is a Sharding, a PartitionSpec, or a pytree of them and devices."""
    from fluxion._src.mesh import PartitionSpec
    from fluxion._src.sharding_impls import Sharding
    kinds = (Sharding, PartitionSpec)
    leaves = tree_leaves(device, is_leaf=lambda d: isinstance(d, kinds))
    return bool(leaves) and all(isinstance(d, kinds) or _is_device(d) for d in leaves)


def _placement_prefix(prefix, tree) -> list:
    """One entry of `prefix` (a pytree prefix of `tree` with device or sharding leaves) per
    leaf of `tree`."""
    from fluxion._src.mesh import PartitionSpec
    from fluxion._src.sharding_impls import Sharding
    from fluxion._src.tree_util import broadcast_prefix

    def mismatch(p, t):
        return ValueError("device_put device specification must be a tree prefix of the "
                          f"corresponding value, got specification {prefix!r} for value "
                          f"tree {tree_flatten(tree)[1]}.")
    def is_placement(p):
        return p is None or _is_device(p) or isinstance(p, (Sharding, PartitionSpec))
    return broadcast_prefix(prefix, tree, is_placement, mismatch)


def device_put(x, device=None, *, donate=False, may_alias=None):
    """Copy a pytree of values to `device` (default: the first device) as Arrays.

    `device` may also be a Sharding (or a PartitionSpec of the mesh set with `set_mesh`), or
    a pytree of them matching `x`: the result is then laid out over that sharding's devices.
    A `fluxion.memory.Space` (Device or Host) places `x` as `device=None` does."""
    from fluxion._src import memory, sharding_impls
    from fluxion._src.layout import strip_formats
    from fluxion._src.mesh import PartitionSpec
    device = strip_formats(device, "device_put")
    if isinstance(device, memory.Space):
        memory.space_to_kind(device)  # raises for Space.Any
        device = None  # one memory space per device here: Device and Host place alike
    if device is not None and not hasattr(device, "platform") and _is_sharding_tree(device):
        return _device_put_sharded(x, device)
    _check_device(device, "device_put")
    leaves, treedef = tree_flatten(x)
    traced = [i for i, leaf in enumerate(leaves) if isinstance(leaf, core.Tracer)]
    if traced:  # inside a transformation: one device_put equation for the traced leaves
        from fluxion._src.lax.device_put import bind_traced
        moved = bind_traced([leaves[i] for i in traced], device)
        leaves = list(leaves)
        for i, y in zip(traced, moved):
            leaves[i] = y
        x = tree_unflatten(treedef, leaves)

    def put(leaf):
        if isinstance(leaf, core.Tracer):
            return leaf
        if device is None:  # Arrays stay as they are; host values go to the default device
            if isinstance(leaf, Array):
                return leaf
            aval = core.get_aval(leaf)
            return make_array(np.asarray(leaf, dtype=aval.dtype), weak_type=aval.weak_type)
        if type(leaf) is Array:
            if hasattr(device, "platform") and leaf.device != device:
                with transfer_guard.explicit():
                    transfer_guard.check("device_to_device", f"aval={leaf.aval!r}, dst_sharding="
                                         f"SingleDeviceSharding(device={device!r})")
            return placement.commit(leaf, device)
        aval = core.get_aval(leaf)
        return make_array(np.asarray(leaf, dtype=aval.dtype), weak_type=aval.weak_type,
                          device=device, committed=True)
    return tree_map(put, x)


def _device_put_sharded(x, shardings):
    from fluxion._src import sharding_impls
    from fluxion._src.global_array import device_put_sharded_value
    from fluxion._src.mesh import PartitionSpec
    from fluxion._src.sharded_jit import sharding_constraint
    leaves, tree = tree_flatten(x)
    if isinstance(shardings, (sharding_impls.Sharding, PartitionSpec)):
        flat = [shardings] * len(leaves)
    else:
        flat = _placement_prefix(shardings, x)
    out = []
    for leaf, s in zip(leaves, flat):
        if s is None or _is_device(s):
            out.append(device_put(leaf, s))
            continue
        if isinstance(s, sharding_impls.SingleDeviceSharding):  # commits to the device
            out.append(device_put(leaf, s._device))
            continue
        s = sharding_impls.canonicalize(s, "device_put")
        if isinstance(leaf, core.Tracer):
            out.append(sharding_constraint(leaf, s))
        else:
            out.append(device_put_sharded_value(leaf, s))
    return tree_unflatten(tree, out)


def device_get(x):
    """Copy a pytree of Arrays to the host as NumPy arrays (other leaves are returned as is)."""
    def get(leaf):
        if isinstance(leaf, Array):
            return np.asarray(leaf)
        return leaf
    with transfer_guard.explicit():
        return tree_map(get, x)


def block_until_ready(x):
    for leaf in tree_flatten(x)[0]:
        if isinstance(leaf, Array):
            leaf.block_until_ready()
    return x
