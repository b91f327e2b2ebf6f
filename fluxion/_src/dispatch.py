"""Running things: eager primitives, compiled jaxprs, and the `jit` call primitive."""
from __future__ import annotations

import hashlib
import logging
import operator
import sys
import time
import weakref
from typing import Sequence

import numpy as np

from fluxion._src import config_flags, core, dtypes, monitoring, placement, profiling
from fluxion._src.caches import BoundedDict, compile_lock
from fluxion._src.array import Array, scalar_array
from fluxion._src.compiler import backend, lowering
from fluxion._src.config import config
from fluxion._src.core import ClosedJaxpr, Jaxpr, JaxprEqn, ShapedArray, Var

logger = logging.getLogger("fluxion")

# Whether arrays may be committed or live off the first device (see placement.py): then
# executions go through `CompiledFunction.call_placed`, unless every argument is uncommitted on
# the default device. The one check of the fast paths: any code that executes an executable
# on Arrays' buffers directly must make it (see `array_call`).
placing = placement.active


def to_device_buffer(x, aval: ShapedArray, device=None):
    """A jaxlib device buffer holding `x` (an Array, NumPy value or Python scalar)."""
    if type(x) is Array:
        return x._buf
    if isinstance(x, core.Tracer):
        raise core.escaped_tracer_error(x)
    if getattr(aval, "is_token", False):
        return x._buf
    if (config.transfer_guard or config.transfer_guard_host_to_device) and isinstance(x, np.ndarray):
        from fluxion._src import transfer_guard
        transfer_guard.check("host_to_device", f"numpy array of {aval.str_short()}")
    if not hasattr(x, "__array__") and not isinstance(x, (bool, int, float, complex)):
        # abstract stand-ins (ShapeDtypeStruct) trace but hold no data, as in JAX
        raise TypeError(f"Argument of shape {aval.str_short()} of type {type(x)} is not a valid "
                        "JAX type.")
    if aval.dtype == dtypes.float0:  # lowered as i1 (hlo.element_type): all False
        aval = ShapedArray(aval.shape, np.dtype(np.bool_))
        x = np.zeros(aval.shape, np.bool_)
    arr = np.asarray(x, dtype=aval.dtype)
    if arr.ndim == 0:
        return scalar_array(arr, aval.weak_type, device)._buf
    return backend.device_put_numpy(arr, aval, device)


_buf_of = operator.attrgetter("_buf")


def _wrap_output(buf, aval):
    """The value of an output whose aval is not an array's (a token)."""
    from fluxion._src.tokens import Token
    return Token(buf)
_aval_of = operator.attrgetter("aval")


class CompiledFunction:
    """An executable for a closed jaxpr with its constants already on the device.

    It runs where its arguments are (see placement.py): copies of it for other devices are
    made on demand (`on_device`)."""

    __slots__ = ("executable", "const_bufs", "in_avals", "out_avals", "describe", "relower",
                 "_devices")

    def __init__(self, executable, const_bufs, in_avals, out_avals):
        self.executable = executable
        self.const_bufs = const_bufs
        self.in_avals = in_avals
        self.out_avals = out_avals
        self.describe = None  # () -> (function name, argument names), for error messages
        self.relower = None  # platform -> module text, for devices of another platform
        self._devices = None  # device -> CompiledFunction

    def __call__(self, args: Sequence) -> list[Array]:
        if placing:
            return self.call_placed(args)
        bufs = [x._buf if type(x) is Array else to_device_buffer(x, aval)
                for x, aval in zip(args, self.in_avals)]
        if self.const_bufs:
            bufs = self.const_bufs + bufs
        executable = self.executable
        try:
            with profiling.phase("execute", name=executable.name):
                outs = executable.loaded.execute_sharded(bufs).consume_with_handlers(
                    executable.handlers)
        except backend.runtime_error_class():
            raise_if_deleted(bufs, self.in_avals, len(self.const_bufs))
            raise
        return [Array(b, a) if type(a) is ShapedArray else _wrap_output(b, a)
                for b, a in zip(outs, self.out_avals)]

    def direct_parts(self):
        """`(execute, handlers, out_aval)` of a program of one result and no constants: what
        an eager call on Arrays' buffers needs and nothing more. None for any other program."""
        if (len(self.out_avals) != 1 or self.const_bufs
                or type(self.out_avals[0]) is not ShapedArray):
            return None
        return (self.executable.loaded.execute_sharded, self.executable.handlers,
                self.out_avals[0])

    def call_placed(self, args: Sequence, device=None) -> list[Array]:
        """Run on the device the arguments' placement picks, or on `device` (moving every
        argument there, committing the results: `jit(device=...)`)."""
        bufs, target, committed = placement.place(args, self.in_avals, device,
                                                  self.describe or self._describe)
        executable = self.executable
        fn = self if target is executable.device or target == executable.device else (
            self.on_device(target))
        executable = fn.executable
        handlers = (executable.committed_handlers if committed
                    and executable.handlers is not None else executable.handlers)
        if fn.const_bufs:
            bufs = fn.const_bufs + bufs
        try:
            if profiling._active:
                with profiling.phase("execute", name=executable.name):
                    outs = executable.loaded.execute_sharded(bufs).consume_with_handlers(
                        handlers)
            else:
                outs = executable.loaded.execute_sharded(bufs).consume_with_handlers(handlers)
        except backend.runtime_error_class():
            raise_if_deleted(bufs, self.in_avals, len(fn.const_bufs))
            raise
        return [Array(b, a) if type(a) is ShapedArray else _wrap_output(b, a)
                for b, a in zip(outs, self.out_avals)]

    def _describe(self):
        return self.executable.name, None

    def on_device(self, device) -> "CompiledFunction":
        """This program compiled for `device`, its constants copied there."""
        fn = self._devices.get(device) if self._devices is not None else None
        if fn is not None:
            return fn
        with compile_lock:
            if self._devices is None:
                self._devices = {}
            fn = self._devices.get(device)
            if fn is None:
                fn = self._devices[device] = self._compile_for(device)
        return fn

    def _compile_for(self, device) -> "CompiledFunction":
        exe = self.executable
        if not isinstance(exe, backend.Executable):
            raise NotImplementedError(f"{exe.name} was compiled by a backend that runs on "
                                      f"{exe.device} only; it cannot run on {device}")
        text = exe.text
        if backend.backend_of(device).platform != backend.backend_of(exe.device).platform:
            if self.relower is None:
                raise NotImplementedError(f"{exe.name} cannot be moved to {device}, a device "
                                          f"of another platform than {exe.device}")
            text = self.relower(backend.backend_of(device).platform)
        new = backend.compile_module(text, self.out_avals, device=device, name=exe.name)
        consts = [backend.copy_to_device(b, device) for b in self.const_bufs]
        fn = CompiledFunction(new, consts, self.in_avals, self.out_avals)
        fn.describe, fn.relower = self.describe, self.relower
        return fn

    def array_call(self, single_output: bool):
        """A faster `__call__` for arguments that are all Arrays: the dispatch fast paths.

        With `single_output` it returns the one output Array, otherwise the list of them."""
        if any(type(a) is not ShapedArray for a in self.out_avals):  # tokens among them
            return (lambda args: self(args)[0]) if single_output else self
        execute = self.executable.loaded.execute_sharded
        handlers = self.executable.handlers
        out_avals, in_avals = self.out_avals, self.in_avals
        consts = list(self.const_bufs)
        runtime_error = backend.runtime_error_class()
        placed = self.call_placed
        # Placing, arguments all uncommitted on the default device, which is this program's,
        # still take the fast path: their buffers carry this very sharding object.
        device = self.executable.device
        home = backend.backend_of(device).sharding(device)
        if single_output and not consts:
            (aval,) = out_avals

            if len(in_avals) == 1:  # unary ops: no list building on the hottest path
                def call_unary(args):
                    if placing and (placement.default_sharding is not home
                                    or args[0]._buf._sharding is not home):
                        return placed(args)[0]
                    bufs = [args[0]._buf]
                    try:
                        return Array(execute(bufs).consume_with_handlers(handlers)[0], aval)
                    except runtime_error:
                        raise_if_deleted(bufs, in_avals, 0)
                        raise
                return call_unary

            if len(in_avals) == 2:  # binary ops
                def call_binary(args):
                    if placing and (placement.default_sharding is not home
                                    or args[0]._buf._sharding is not home
                                    or args[1]._buf._sharding is not home):
                        return placed(args)[0]
                    bufs = [args[0]._buf, args[1]._buf]
                    try:
                        return Array(execute(bufs).consume_with_handlers(handlers)[0], aval)
                    except runtime_error:
                        raise_if_deleted(bufs, in_avals, 0)
                        raise
                return call_binary

            def call_one(args):
                if placing and not _at_home(args, home):
                    return placed(args)[0]
                bufs = list(map(_buf_of, args))
                try:
                    return Array(execute(bufs).consume_with_handlers(handlers)[0], aval)
                except runtime_error:
                    raise_if_deleted(bufs, in_avals, 0)
                    raise
            return call_one

        def call(args):
            if placing and not _at_home(args, home):
                outs = placed(args)
                return outs[0] if single_output else outs
            bufs = [*consts, *map(_buf_of, args)]
            try:
                outs = execute(bufs).consume_with_handlers(handlers)
            except runtime_error:
                raise_if_deleted(bufs, in_avals, len(consts))
                raise
            outs = list(map(Array, outs, out_avals))
            return outs[0] if single_output else outs
        return call

    def pinned_call(self, device, single_output: bool):
        """`array_call` for `jit(device=...)`: always on `device`, results committed."""
        def call(args):
            outs = self.call_placed(args, device)
            return outs[0] if single_output else outs
        return call


def _at_home(args, home) -> bool:
    """Whether every argument is uncommitted on the default device, whose sharding is `home`."""
    if placement.default_sharding is not home:
        return False
    for x in args:
        if x._buf._sharding is not home:
            return False
    return True


def raise_if_deleted(bufs, in_avals, num_consts: int) -> None:
    """After a failed execution, explain it: a RuntimeError naming the argument that was
    deleted or donated (jaxlib's own message only counts shards), or an error naming the
    devices of arguments that are not on the program's device."""
    for i, buf in enumerate(bufs[num_consts:]):
        if buf.is_deleted():
            aval = in_avals[i] if i < len(in_avals) else None
            what = f" with shape={aval.str_short()}" if aval is not None else ""
            raise RuntimeError(f"Array has been deleted{what} (argument {i}; for example donated "
                               "to a jitted function with donate_argnums): it can no longer be "
                               "used.") from None
    _raise_if_other_devices(bufs[num_consts:])


def _raise_if_other_devices(bufs) -> None:
    where = {}
    for i, buf in enumerate(bufs):
        sharding = getattr(buf, "_sharding", None)  # jaxlib's ArrayImpl (see Array.sharding)
        if sharding is None:
            continue
        devs = [sharding._device] if hasattr(sharding, "_device") else sharding.device_set
        where[i] = sorted(devs, key=lambda d: d.id)
    found = {d for devs in where.values() for d in devs}
    if len(found) <= 1:
        return
    listing = ", ".join(f"argument {i} on {', '.join(str(d) for d in devs)}"
                        for i, devs in where.items())
    raise ValueError(f"Received incompatible devices for jitted computation: {listing}. "
                     "device_put the arguments onto one device.") from None


# (compile, lower, apply), set by the state module: the first two take the arguments of the
# functions below and return None for a jaxpr without Refs, else the result for its
# discharged version; `apply(prim, args, params)` runs a primitive applied to Refs.
discharge_hooks = None


def lower_closed_jaxpr(closed: ClosedJaxpr, name: str, platform: str | None = None,
                       donated_invars=None) -> str:
    if discharge_hooks is not None:
        text = discharge_hooks[1](closed, name, platform, donated_invars)
        if text is not None:
            return text
    platform = platform or backend.get_backend().platform
    if "fluxion._src.pmap_primitive" in sys.modules:
        from fluxion._src import replicated_jit
        text = replicated_jit.maybe_lower(closed, name, platform)
        if text is not None:
            return text
    return lowering.lower_jaxpr_to_module(closed.jaxpr, platform, name, donated_invars)


def compile_closed_jaxpr(closed: ClosedJaxpr, name: str = "main", donated_invars=None,
                         text: str | None = None, compiler: str | None = None) -> CompiledFunction:
    """Lower (unless `text` is given) and compile with XLA, or with IREE for compiler="iree".

    A jaxpr with Refs is discharged first; one with sharding constraints is compiled
    partitioned over their mesh."""
    if discharge_hooks is not None:
        stateful = discharge_hooks[0](closed, name, donated_invars, text, compiler)
        if stateful is not None:
            return stateful
    sharded_jit = sys.modules.get("fluxion._src.sharded_jit")
    if text is None and sharded_jit is not None:
        mesh = sharded_jit.needs_partitioning(closed)
        if mesh is not None:
            return sharded_jit.compile_for_constraints(closed, name, mesh, donated_invars)
    if compiler != "iree" and "fluxion._src.pmap_primitive" in sys.modules:
        from fluxion._src import replicated_jit  # a program holding pmaps runs as replicas
        replicated = replicated_jit.maybe_compile(closed, name, text)
        if replicated is not None:
            return replicated
    start = time.perf_counter()
    # With placement on, compile for the default device (and its platform) at once.
    device = backend.default_device() if placing and compiler != "iree" else None
    if text is None:
        platform = None if device is None else backend.backend_of(device).platform
        with profiling.phase("lower", name=name):
            text = lower_closed_jaxpr(closed, name, platform, donated_invars=donated_invars)
        monitoring.record_phase(monitoring.JAXPR_TO_MLIR_MODULE_EVENT, start, name)
    elif device is not None and backend.backend_of(device) is not backend.get_backend():
        device = None  # text lowered for the default backend's platform
    if config.log_compiles:
        logger.warning("Finished jaxpr to StableHLO lowering of %s in %.3f sec", name,
                       time.perf_counter() - start)
    out_avals = closed.out_avals
    compile_start = time.perf_counter()
    with profiling.phase("compile", name=name):
        if compiler == "iree":
            from fluxion._src.compiler import iree_backend
            arg_avals = [v.aval for v in closed.jaxpr.constvars] + list(closed.in_avals)
            exe = iree_backend.compile_module(text, arg_avals, out_avals, name=name)
        else:
            exe = backend.compile_module(text, out_avals, device=device, name=name)
    monitoring.record_phase(monitoring.BACKEND_COMPILE_EVENT, compile_start, name)
    const_bufs = [_constant_buffer(c, v.aval, exe.device)
                  for c, v in zip(closed.consts, closed.jaxpr.constvars)]
    compiled = CompiledFunction(exe, const_bufs, closed.in_avals, out_avals)
    compiled.relower = lambda platform: lower_closed_jaxpr(closed, name, platform,
                                                           donated_invars=donated_invars)
    return compiled


# Device copies of large host constants, by content: a function closing over a big NumPy
# array keeps one device copy however often it is retraced. Entries live while an executable
# holds them (weak values).
_constant_buffers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_CONTENT_KEYED_BYTES = 1 << 16


def _constant_buffer(c, aval: ShapedArray, device):
    if type(c) is not np.ndarray or c.nbytes < _CONTENT_KEYED_BYTES:
        buf = to_device_buffer(c, aval, device)
        if getattr(buf, "_sharding", None) is not None and buf._sharding._device != device:
            buf = backend.copy_to_device(buf, device)  # an Array constant from elsewhere
        return buf
    host = np.ascontiguousarray(c, dtype=aval.dtype)
    key = (aval, device, hashlib.blake2b(memoryview(host).cast("B"), digest_size=16).digest())
    buf = _constant_buffers.get(key)
    if buf is None:
        buf = _constant_buffers[key] = to_device_buffer(host, aval, device)
    return buf


# ---------------------------------------------------------------------------------------------
# Eager primitives: each (primitive, input types, params) compiles once.

# (primitive, params, x64, *avals) -> compiled call
_primitive_cache: dict = BoundedDict(1024)


def apply_primitive(prim: core.Primitive, args: Sequence, params: dict):
    """Run one primitive on concrete values by compiling it alone (cached)."""
    # Params come in the order the primitive's wrapper passes them, so no sorting is needed.
    param_key = tuple(params.items()) if params else ()
    try:
        key = (prim, param_key, config.trace_key, *map(_aval_of, args))
        call = _primitive_cache.get(key)
    except (AttributeError, TypeError):  # not all Arrays, or an unhashable param
        call = None
    else:
        # Objects from elsewhere with an `aval` (another library's arrays) are not cached: the
        # general path rejects them.
        if call is None and all(type(a) is ShapedArray for a in key[3:]):
            call = _compile_uncached(prim, key, params)
    if call is not None:
        return call(args)
    return _apply_primitive_general(prim, args, params, param_key)


def _compile_uncached(prim, key, params):
    """Compile for a key that missed the cache. Primitives with jaxpr params (control flow)
    are cached by the jaxprs' structure, not identity: eager code traces a fresh body on each
    call, and equal bodies must share one executable (and not pile up in the cache)."""
    if config.no_execution:  # part of the key, so cached calls miss and come here
        config_flags.check_execution_allowed(f"jit({prim.name})")
    structural = core.structural_params_key(params)
    if structural is not None:
        key = (prim, structural, *key[2:])
    with compile_lock:
        call = _primitive_cache.get(key)
        if call is None:
            compiled = _compile_primitive(prim, key[3:], params)
            call = _primitive_cache[key] = compiled.array_call(not prim.multiple_results)
    return call


# Set (to sharded_jit.apply_primitive) once an array sharded over several devices exists.
sharded_apply_primitive = None


def _apply_primitive_general(prim, args, params, param_key):
    """apply_primitive for NumPy values and Python scalars among the arguments."""
    if config.no_execution:
        config_flags.check_execution_allowed(f"jit({prim.name})")
    if sharded_apply_primitive is not None:
        out = sharded_apply_primitive(prim, args, params)
        if out is not NotImplemented:
            return out
    avals = tuple([core.get_aval(x) for x in args])
    if discharge_hooks is not None and any(type(a) is not ShapedArray for a in avals):
        return discharge_hooks[2](prim, args, params)  # Refs among the arguments
    try:
        structural = core.structural_params_key(params)  # see _compile_uncached
        key = (prim, param_key if structural is None else structural, config.trace_key, avals)
        compiled = _primitive_cache.get(key)
    except TypeError:  # an unhashable param: compile without caching
        key, compiled = None, None
    if compiled is None:
        with compile_lock:
            compiled = _primitive_cache.get(key) if key is not None else None
            if compiled is None:
                compiled = _compile_primitive(prim, avals, params)
                if key is not None:
                    _primitive_cache[key] = compiled
    outs = compiled(args)
    return outs if prim.multiple_results else outs[0]


def primitive_jaxpr(prim, avals, params) -> ClosedJaxpr:
    """A closed jaxpr applying `prim` once to inputs of types `avals`."""
    invars = [Var(a) for a in avals]
    out_avals = prim.abstract_eval_avals(list(avals), params)
    outvars = [Var(a) for a in out_avals]
    return ClosedJaxpr(Jaxpr([], invars, outvars, [JaxprEqn(invars, outvars, prim, params)]), [])


def _compile_primitive(prim, avals, params) -> CompiledFunction:
    return compile_closed_jaxpr(primitive_jaxpr(prim, avals, params), name=prim.name)


core.apply_primitive = apply_primitive


# ---------------------------------------------------------------------------------------------
# The call primitive that `jit` binds when it is applied under another transformation.

jit_p = core.Primitive("jit")
jit_p.multiple_results = True

_jaxpr_cache: dict = BoundedDict(1024)


def _jit_impl(*args, jaxpr: ClosedJaxpr, name: str, donated_invars=None, device=None, **_):
    if config.no_execution:
        config_flags.check_execution_allowed(f"jit({name})")
    key = (id(jaxpr), config.trace_key)
    entry = _jaxpr_cache.get(key)
    if entry is None or entry[0] is not jaxpr:
        with compile_lock:
            entry = _jaxpr_cache.get(key)
            if entry is None or entry[0] is not jaxpr:
                entry = (jaxpr, compile_closed_jaxpr(jaxpr, name=f"jit_{name}"))
                _jaxpr_cache[key] = entry
    if device is not None:  # jit(device=...) under a transformation
        return entry[1].call_placed(args, device)
    return entry[1](args)


def _jit_abstract_eval(*avals, jaxpr: ClosedJaxpr, **_):
    return jaxpr.out_avals


def _jit_lowering(ctx, *args, jaxpr: ClosedJaxpr, **_):
    return ctx.lower_jaxpr(jaxpr, args)


def _jit_pp_rule(eqn: JaxprEqn, context: core.PpContext):
    # As JAX prints it: name first, and the inner binders named after the outer atoms.
    inner = eqn.params["jaxpr"].jaxpr
    if id(inner) not in context.shared_jaxprs:
        context.suggest_same_names(inner.invars, eqn.invars)
        context.suggest_same_names(inner.outvars, eqn.outvars)
    others = sorted(k for k in eqn.params if k != "name")
    return core.pp_eqn_default(eqn, context, ["name", *others])


jit_p.def_impl(_jit_impl)
jit_p.def_abstract_eval(_jit_abstract_eval)
lowering.register_lowering(jit_p, _jit_lowering)
core.pp_eqn_rules[jit_p] = _jit_pp_rule
