"""Host callbacks: compiled programs that call back into Python.

Three primitives share one set of rules:

- `pure_callback_p`: no effect (dead code when its results are unused);
- `io_callback_p`: an IO effect, ordered when `ordered=True`;
- `debug_callback_p`: a debug effect with no results (`fluxion.debug.callback`/`print`).

Eagerly the callback runs directly. Compiled, each equation becomes jaxlib's
`xla_ffi_python_cpu_callback` custom call (`xla_ffi_python_gpu_callback` on GPUs, which copies
operands to the host and results back); its `index` selects the Python callable in the list
handed to the compiler with the module (`host_callbacks`). Ordered callbacks take and return a
`!stablehlo.token`, chained through the block they sit in. A Python exception inside a callback
is stored and re-raised at the caller instead of XLA's error (see `SynchronousExecutable`).
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

import numpy as np

from fluxion._src import core, dtypes, effects
from fluxion._src import ad, batching, token_lowering
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray

_logger = logging.getLogger(__name__)

pure_callback_p = core.Primitive("pure_callback")
pure_callback_p.multiple_results = True
io_callback_p = core.Primitive("io_callback")
io_callback_p.multiple_results = True
debug_callback_p = core.Primitive("debug_callback")
debug_callback_p.multiple_results = True

_ALL = (pure_callback_p, io_callback_p, debug_callback_p)
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized", None)


# ---------------------------------------------------------------------------------------------
# Errors raised inside callbacks

class _Pending(threading.local):
    def __init__(self):
        self.error: BaseException | None = None


_pending = _Pending()
_pending_lock = threading.Lock()
# Set on the thread running a callback from a compiled program: its arguments come from the
# runtime's buffers and carry no weak types (JAX's), where an eager call keeps the operands'.
_from_compiled = threading.local()
_pending_global: list = []  # errors from XLA's threads, which do not see the caller's locals


def _record_error(err: BaseException) -> None:
    with _pending_lock:
        _pending_global.append(err)


def take_pending_error() -> BaseException | None:
    """The first exception raised by a callback since the last call, if any (and clear)."""
    with _pending_lock:
        if not _pending_global:
            return None
        err = _pending_global[0]
        _pending_global.clear()
    return err


# ---------------------------------------------------------------------------------------------
# Calling the user's function on host values

def _check_results(outs, result_avals, where: str) -> list[np.ndarray]:
    if outs is None:
        outs = ()
    if not isinstance(outs, (list, tuple)):
        outs = (outs,)
    outs = list(outs)
    if len(outs) != len(result_avals):
        raise _runtime_error()(f"{where} returned {len(outs)} values, but its "
                               f"result_shape_dtypes declare {len(result_avals)}")
    checked = []
    for i, (x, aval) in enumerate(zip(outs, result_avals)):
        arr = np.asarray(x)
        if arr.shape != aval.shape:
            raise _runtime_error()(f"{where} returned a value of shape {arr.shape} for result "
                                   f"{i}, but result_shape_dtypes declares {aval.str_short()}")
        if arr.dtype != aval.dtype:
            if dtypes.canonicalize_dtype(arr.dtype) == aval.dtype or (
                    np.issubdtype(arr.dtype, np.number) and np.can_cast(arr.dtype, aval.dtype, "same_kind")
                    and arr.dtype.itemsize > aval.dtype.itemsize and not _x64()):
                arr = arr.astype(aval.dtype)  # 64-bit NumPy results narrowed, as x64 is off
            else:
                raise _runtime_error()(f"{where} returned dtype {arr.dtype} for result {i}, "
                                       f"but result_shape_dtypes declares {aval.dtype}")
        checked.append(arr if arr.flags.c_contiguous else arr.copy(order="C"))
    return checked


def _x64() -> bool:
    from fluxion._src.config import config
    return config.enable_x64


def _host_fn(callback, result_avals, token: bool):
    """The callable handed to XLA: NumPy arrays in, a tuple of NumPy arrays out."""
    def host(*args):
        if token:
            args = args[1:]
        _from_compiled.active = True
        try:
            outs = _check_results(callback(*args), result_avals, _name(callback))
        except BaseException as e:  # noqa: BLE001 - every error must reach the caller
            _record_error(e)
            raise
        finally:
            _from_compiled.active = False
        return (None, *outs) if token else tuple(outs)
    return host


def _name(callback) -> str:
    return f"callback {getattr(callback, '__name__', repr(callback))}"


# ---------------------------------------------------------------------------------------------
# Rules

def _abstract_eval(*avals, result_avals, **_):
    return list(result_avals)


def _impl(*args, callback, result_avals, **_):
    from fluxion._src.array import Array
    from fluxion._src.compiler import backend
    from fluxion._src import dispatch, placement
    # Results go where a compiled call would put them: to the committed arguments' device.
    device = placement.committed_device(args) if dispatch.placing else None
    host_args = [np.asarray(a) for a in args]
    outs = _check_results(callback(*host_args), result_avals, _name(callback))
    return [Array(backend.device_put_numpy(o, a, device, device is not None), a)
            for o, a in zip(outs, result_avals)]


def _effects_of(prim):
    if prim is pure_callback_p:
        return None

    def rule(params):
        if prim is io_callback_p:
            return frozenset([effects.ordered_io_effect if params["ordered"] else effects.io_effect])
        return frozenset([effects.ordered_debug_effect if params["ordered"] else effects.debug_effect])
    return rule


def _callback_target(platform: str) -> str:
    return "xla_ffi_python_gpu_callback" if platform in ("cuda", "rocm") else \
        "xla_ffi_python_cpu_callback"


def _lowering(prim):
    side_effect = prim is not pure_callback_p

    def rule(ctx, *args, callback, result_avals, ordered, sharding=None, **_):
        module = ctx.module
        placement = _partitioned_placement(module, result_avals, ordered, sharding,
                                           prim is io_callback_p)
        callbacks = module.__dict__.setdefault("host_callbacks", [])
        index = len(callbacks)
        callbacks.append(_host_fn(callback, result_avals, token=ordered))
        config = {"index": f"{index} : ui64"}
        if not ordered:
            extra = None if placement is None else {"sdy.sharding": placement}
            return ctx.custom_call(_callback_target(ctx.platform), args, result_avals,
                                   backend_config=config, has_side_effect=side_effect,
                                   extra_attrs=extra)
        return _ordered_call(ctx, args, result_avals, index, placement)
    return rule


def _partitioned_placement(module, result_avals, ordered: bool, sharding=None,
                           io: bool = False) -> str | None:
    """Where a callback runs in a program over several devices, as Shardy's per-value
    shardings of its results (an ordered call's token first); None in a one-device program
    or a pmap (each replica calls it).

    In a `shard_map` body manual over every mesh axis the program is per device, so each
    device calls back with its own block (an empty mesh: nothing left to partition). In a
    partitioned `jit` the program is over whole arrays, so one call gets the whole value (a
    maximal sharding), on the device of `sharding` (a SingleDeviceSharding) or else the
    program's first, as JAX places them. An ordered `io_callback` keeps each device's calls
    in program order; ordered debug callbacks are refused there, as by JAX."""
    from fluxion._src import sharded_jit
    from fluxion._src.lax import parallel_lowering
    mesh = getattr(sharded_jit._lowering, "mesh", None)
    manual = getattr(sharded_jit._lowering, "manual", ()) if mesh is not None else ()
    if ordered and not io and (mesh is not None or parallel_lowering.in_replicated_program()):
        raise ValueError("The following ordered effects are not supported for more than 1 "
                         "device: ordered debug callbacks (debug.print(ordered=True), "
                         "debug.callback(ordered=True)); use the unordered form (an ordered "
                         "io_callback keeps each device's calls in order)")
    if mesh is None:
        return None
    if len(manual) == len(mesh.axis_names):
        if mesh.size == 1:  # XLA leaves a one-partition program's manual computation unlowered
            raise NotImplementedError("host callbacks in a shard_map over a mesh of one device "
                                      "are not supported (XLA cannot compile the program); "
                                      "call the body without shard_map")
        if sharding is not None:
            raise NotImplementedError("callbacks do not support specifying sharding inside "
                                      "spmd computations")
        name, declaration, ranked = "empty_mesh", "sdy.mesh @empty_mesh = <[]>", True
    elif not manual:
        position = _maximal_position(sharding, mesh)
        name, ranked = f"maximal_mesh_{position}", False
        declaration = f"sdy.mesh @{name} = <[], device_ids=[{position}]>"
    else:
        raise NotImplementedError(
            "host callbacks in a shard_map body that leaves some mesh axes automatic "
            f"(manual over {list(manual)} of {list(mesh.axis_names)}) are not supported: make "
            "the shard_map manual over every axis, or call back outside it")
    ops = module.__dict__.setdefault("module_ops", [])
    if declaration not in ops:
        ops.append(declaration)
    per_value = [f"<@{name}, [{', '.join(['{}'] * len(a.shape)) if ranked else ''}]>"
                 for a in result_avals]
    if ordered or not per_value:  # the token's (or, without results, the op's own)
        per_value.insert(0, f"<@{name}, []>")
    return "#sdy.sharding_per_value<[" + ", ".join(per_value) + "]>"


def _maximal_position(sharding, mesh) -> int:
    """The position in the program's devices of the one device a callback runs on."""
    if sharding is None:
        return 0
    from fluxion._src.sharding_impls import NamedSharding, SingleDeviceSharding
    if isinstance(sharding, NamedSharding) and not sharding.mesh.axis_names:
        return 0
    if not isinstance(sharding, SingleDeviceSharding):
        raise NotImplementedError(f"pure_callback only supports SingleDeviceSharding, but got "
                                  f"{type(sharding)}")
    device, = sharding.device_set
    devices = list(mesh.flat_devices)
    if device not in devices:
        raise ValueError(f"Sharding provided to pure_callback specifies a device {device} that "
                         f"is not in the device assignment ({devices})")
    return devices.index(device)


def _ordered_call(ctx, args, result_avals, index, placement=None):
    """A callback custom call threaded on the block's token chain (program order)."""
    from fluxion._src.compiler.hlo import Value, tensor_type
    block = ctx.block
    token = token_lowering.block_token(block)
    operands = ", ".join([token] + [a.name for a in args])
    in_types = ", ".join(["!stablehlo.token"] + [a.type for a in args])
    out_types = ["!stablehlo.token"] + [tensor_type(a) for a in result_avals]
    base = block.module.fresh()
    n = len(out_types)
    lhs = base if n == 1 else f"{base}:{n}"
    block.lines.append(
        f'{lhs} = "stablehlo.custom_call"({operands}) {{call_target_name = '
        f'"{_callback_target(ctx.platform)}", has_side_effect = true, api_version = 4 : i32, '
        f'backend_config = {{index = {index} : ui64}}'
        + ("" if placement is None else f", sdy.sharding = {placement}")
        + f'}} : ({in_types}) -> '
        + (out_types[0] if n == 1 else "(" + ", ".join(out_types) + ")"))
    block._ordered_token = base if n == 1 else f"{base}#0"
    return [Value(f"{base}#{i + 1}", a) for i, a in enumerate(result_avals)]


# ---- differentiation

def _pure_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. Please use `fluxion.custom_jvp` to use "
                     "callbacks while taking gradients.")


def _io_jvp(primals, tangents, **params):
    raise ValueError("IO callbacks do not support JVP.")


def _pure_transpose(*args, **params):
    raise ValueError("Pure callbacks do not support transpose. Please use `jax.custom_vjp` to "
                     "use callbacks while taking gradients.")


def _io_transpose(*args, **params):
    raise ValueError("IO callbacks do not support transpose.")


def _debug_jvp(primals, tangents, **params):
    debug_callback_p.bind(*primals, **params)
    return [], []


# ---- batching

def _batch(prim):
    def rule(args, dims, *, callback, result_avals, vmap_method, ordered, **params):
        size = next(core.get_aval(a).shape[d] for a, d in zip(args, dims)
                    if d is not batching.not_mapped)
        args = [a if d is batching.not_mapped else batching.moveaxis(a, d, 0)
                for a, d in zip(args, dims)]
        mapped = [d is not batching.not_mapped for d in dims]
        out_avals = tuple(ShapedArray((size, *a.shape), a.dtype, a.weak_type) for a in result_avals)
        method = vmap_method
        if prim is pure_callback_p and method is None:
            raise NotImplementedError(
                "vmap is only supported for pure_callback when vmap_method is set: pass "
                "vmap_method='sequential', 'expand_dims', 'broadcast_all' or "
                "'legacy_vectorized' to pure_callback.")
        if prim is io_callback_p and ordered:
            raise ValueError("Cannot `vmap` ordered IO callback.")
        if prim is not pure_callback_p:
            method = "sequential"  # io and debug callbacks run once per batch element
        if method in ("sequential", "sequential_unrolled"):
            new_cb = _sequential(callback, mapped, size, result_avals)
        elif method == "expand_dims":
            args = [a if m else _expand_front(a) for a, m in zip(args, mapped)]
            new_cb = callback
        elif method == "broadcast_all":
            args = [a if m else _broadcast_front(a, size) for a, m in zip(args, mapped)]
            new_cb = callback
        elif method == "legacy_vectorized":
            new_cb = callback
        else:
            raise ValueError(f"vmap_method must be one of {VMAP_METHODS}, got {vmap_method!r}")
        outs = prim.bind(*args, callback=new_cb, result_avals=out_avals if prim is not
                         debug_callback_p else (), vmap_method=vmap_method, ordered=ordered, **params)
        return outs, [0] * len(outs)
    return rule


def _sequential(callback, mapped, size, result_avals):
    def looped(*args):
        results = []
        for i in range(size):
            outs = callback(*[a[i] if m else a for a, m in zip(args, mapped)])
            results.append(_check_results(outs, result_avals, _name(callback)))
        if not result_avals:
            return ()
        return tuple(np.stack([r[j] for r in results]) for j in range(len(result_avals)))
    looped.__name__ = getattr(callback, "__name__", "callback")
    return looped


def _expand_front(x):
    from fluxion._src import machinery_ops
    return machinery_ops.reshape(x, (1, *core.get_aval(x).shape))


def _broadcast_front(x, size):
    from fluxion._src import machinery_ops
    shape = core.get_aval(x).shape
    return machinery_ops.broadcast_in_dim(x, (size, *shape), tuple(range(1, len(shape) + 1)))


for _p in _ALL:
    _p.def_impl(_impl)
    _p.def_abstract_eval(_abstract_eval)
    lowering.register_lowering(_p, _lowering(_p))  # CPU and GPU (see _callback_target)
    batching.primitive_batchers[_p] = _batch(_p)
    _rule = _effects_of(_p)
    if _rule is not None:
        effects.declare_effects(_p, _rule)
ad.primitive_jvps[pure_callback_p] = _pure_jvp
ad.primitive_jvps[io_callback_p] = _io_jvp
ad.primitive_transposes[pure_callback_p] = _pure_transpose
ad.primitive_transposes[io_callback_p] = _io_transpose
ad.primitive_jvps[debug_callback_p] = _debug_jvp
token_lowering.install()


# ---------------------------------------------------------------------------------------------
# Running programs with callbacks

class SynchronousExecutable:
    """Wraps a loaded executable that calls back into Python: each execution waits for its
    callbacks, so their effects are done (and ordered across calls) when the call returns, and
    an exception a callback raised is re-raised here, with the callback's own traceback."""

    __slots__ = ("loaded",)

    def __init__(self, loaded):
        self.loaded = loaded

    def execute_sharded(self, bufs, with_tokens: bool = False):
        take_pending_error()
        runtime_error = _runtime_error()
        try:
            results = self.loaded.execute_sharded(bufs, with_tokens=True)
            results.consume_token().block_until_ready()
        except runtime_error as e:
            err = take_pending_error()
            if err is not None:
                raise err from None
            raise e
        return results

    def __getattr__(self, name):
        return getattr(self.loaded, name)


def _runtime_error():
    from fluxion._src.compiler import backend
    return backend.runtime_error_class()


def effects_barrier() -> None:
    """Wait until every callback of programs run so far has finished.

    Programs with callbacks wait for them before returning (`SynchronousExecutable`), so there
    is nothing in flight when this returns; it also re-raises a callback error not yet seen."""
    err = take_pending_error()
    if err is not None:
        raise err


# ---------------------------------------------------------------------------------------------
# Public API

def _flat_result_avals(result_shape_dtypes):
    from fluxion import tree_util
    leaves, tree = tree_util.tree_flatten(result_shape_dtypes)
    avals = []
    for x in leaves:
        shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
        if shape is None or dtype is None:
            raise TypeError(f"result_shape_dtypes must hold objects with .shape and .dtype "
                            f"(e.g. fluxion.ShapeDtypeStruct), got {x!r}")
        if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
            raise ValueError(f"result_shape_dtypes shapes must have non-negative integer "
                             f"dimensions, got {tuple(shape)}")
        dtype = np.dtype(dtype)
        canonical = dtypes.canonicalize_dtype(dtype)
        if canonical != dtype and dtype != dtypes.float0:
            raise ValueError("result_shape_dtypes cannot specify 64-bit types when "
                             "`jax_enable_x64` is disabled")
        avals.append(ShapedArray(tuple(shape), canonical))
    return tuple(avals), tree


def _as_fluxion_array(x, weak_type: bool):
    """A host value handed to a callback as an Array (as JAX hands it jax.Arrays), with its
    operand's weak type when called eagerly."""
    from fluxion._src.array import Array
    from fluxion._src.compiler import backend
    if isinstance(x, Array):
        return x
    arr = np.asarray(x)
    weak_type = weak_type and not getattr(_from_compiled, "active", False)
    aval = core.ShapedArray(arr.shape, arr.dtype, weak_type)
    return Array(backend.device_put_numpy(arr, aval, None), aval)


# The API each callback primitive serves, named in the log record of a callback's exception.
_API_NAMES = {"pure_callback": "jax.pure_callback", "io_callback": "jax.io_callback",
              "debug_callback": "jax.debug.callback"}


def _flat_callback(callback, in_tree, out_tree, weak_types=None, static=None, api_name=None):
    """`callback` taking and returning flat leaves; its exceptions are logged (at ERROR, with
    the traceback, as `{api_name} failed`, as JAX logs them) before they propagate."""
    from fluxion import tree_util

    def flat(*leaves):
        if weak_types is not None:
            leaves = [_as_fluxion_array(x, w) for x, w in zip(leaves, weak_types)]
        if static:  # the static arguments back in their places
            dyn = iter(leaves)
            leaves = [static[i] if i in static else next(dyn)
                      for i in range(len(leaves) + len(static))]
        args, kwargs = tree_util.tree_unflatten(in_tree, list(leaves))
        try:
            out = callback(*args, **kwargs)
        except BaseException:
            if api_name is not None:
                _logger.exception(f"{api_name} failed")
            raise
        if out_tree is None:
            return ()
        out_leaves, got = tree_util.tree_flatten(out)
        # As JAX, only the leaves count: [[x]] serves for a declared [x].
        if len(out_leaves) != out_tree.num_leaves:
            raise _runtime_error()(f"{_name(callback)} returned a pytree of structure {got}, "
                                   f"but result_shape_dtypes has structure {out_tree}")
        return out_leaves
    flat.__name__ = getattr(callback, "__name__", "callback")
    return flat


def _bind_callback(prim, callback, result_shape_dtypes, args, kwargs, vmap_method, ordered,
                   static_ok=False, sharding=None):
    """`static_ok`: arguments that are not arrays (strings, functions, None) reach the
    callback as they are instead of being an error (JAX's debug callbacks)."""
    from fluxion import tree_util
    if not callable(callback):
        raise TypeError(f"callback must be callable, got {callback!r}")
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"vmap_method must be one of {VMAP_METHODS}, got {vmap_method!r}")
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    if result_shape_dtypes is None:
        result_avals, out_tree = (), None
    else:
        result_avals, out_tree = _flat_result_avals(result_shape_dtypes)
    static = {i: x for i, x in enumerate(leaves)
              if static_ok and not core.valid_jaxtype(x)} if static_ok else {}
    leaves = [_as_operand(x) for i, x in enumerate(leaves) if i not in static]
    flat_cb = _flat_callback(callback, in_tree, out_tree,
                             [core.get_aval(x).weak_type for x in leaves], static,
                             _API_NAMES.get(prim.name))
    placed = {} if sharding is None else {"sharding": sharding}
    outs = prim.bind(*leaves, callback=flat_cb, result_avals=result_avals,
                     vmap_method=vmap_method, ordered=ordered, **placed)
    if out_tree is None:
        return None
    return tree_util.tree_unflatten(out_tree, list(outs))


def _as_operand(x):
    if isinstance(x, core.Tracer) or hasattr(x, "_buf"):
        return x
    import fluxion.numpy as jnp
    return jnp.asarray(x)


def pure_callback(callback: Callable, result_shape_dtypes: Any, *args,
                  sharding=None, vmap_method: str | None = None, vectorized=None, **kwargs):
    """Call a pure Python function from inside traced code (JAX's `jax.pure_callback`).

    Parameters
    ----------
    callback : callable taking NumPy arrays (the pytree of `args`/`kwargs`) and returning
        values matching `result_shape_dtypes`.
    result_shape_dtypes : pytree of objects with `.shape` and `.dtype`.
    vmap_method : how the call is batched under `vmap`: "sequential" (one call per element),
        "sequential_unrolled", "expand_dims" (unbatched arguments get a leading 1),
        "broadcast_all" (unbatched arguments broadcast), "legacy_vectorized", or None (vmap
        is an error).
    """
    if vectorized is not None:
        if vmap_method is not None:
            raise ValueError("the vectorized and vmap_method arguments of pure_callback are "
                             "mutually exclusive")
        vmap_method = "legacy_vectorized" if vectorized else "sequential"
    return _bind_callback(pure_callback_p, callback, result_shape_dtypes, args, kwargs,
                          vmap_method, False, sharding=sharding)


def io_callback(callback: Callable, result_shape_dtypes: Any, *args, sharding=None,
                ordered: bool = False, **kwargs):
    """Call a Python function with side effects from traced code (`jax.experimental.io_callback`).

    With `ordered=True` calls happen in program order (and cannot be batched by vmap)."""
    return _bind_callback(io_callback_p, callback, result_shape_dtypes, args, kwargs,
                          "sequential", bool(ordered), sharding=sharding)


def debug_callback(callback: Callable | None = None, *args, ordered: bool = False,
                   partitioned: bool = False, **kwargs):
    """Call `callback(*args, **kwargs)` for its side effects (`jax.debug.callback`); under vmap
    it is called once per batch element. `partitioned` is accepted as in JAX: the callback
    receives whole arrays here either way.

    Without `callback` (JAX's two-call form, `debug.callback(ordered=True)(cb, x)`) it returns
    the function that makes the call with these options."""
    def call(callback, *args, **kwargs):
        _bind_callback(debug_callback_p, callback, None, args, kwargs, "sequential",
                       bool(ordered), static_ok=True)

    if callback is not None:
        return call(callback, *args, **kwargs)
    if args or kwargs:
        raise TypeError("debug_callback received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return call
