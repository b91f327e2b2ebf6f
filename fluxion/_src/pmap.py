"""`pmap`: one SPMD executable run as N replicas, one per device.

The per-device function is traced once with the axis name bound (so collectives abstract-
evaluate), lowered with the collectives of that axis emitted as XLA cross-replica ops
(`lax/parallel_lowering.py`), and compiled with `num_replicas=N`. Outputs stay as per-device
buffers (`ShardedOutput`) until they are read.

Applied to traced values (under `jit`, `grad`, `vmap`, or inside another pmap) it binds the
`xla_pmap` equation instead (pmap_primitive.py), which runs through `run_pmap_equation` when
its operands are concrete.
"""
from __future__ import annotations

import functools

import numpy as np

from fluxion._src import batching, core, dtypes, nan_checks, pmap_primitive, staging
from fluxion._src.api import check_callable, fun_name
from fluxion._src.call_transforms import closure_convert
from fluxion._src.array import Array
from fluxion._src.compiler import backend, lowering
from fluxion._src.lax import parallel_lowering
from fluxion._src.traceback_util import api_boundary
from fluxion._src.tree_util import tree_flatten, tree_unflatten
from fluxion._src import tree_util
from fluxion._src.vmap import _arg_names, _check_axis, _is_axis_leaf, broadcast_prefix


_INTERNAL_AXIS_NAME = "_internal_pmap_axis_name"  # JAX's mesh axis name for an unnamed pmap


_IN_AXES_NOTE = (
    "\n\nThe 'full pytree' here is the tuple of arguments passed positionally to the pmapped "
    "function, and the value of `in_axes` must be a tree prefix of that tuple. But it was not a "
    "prefix.")
_KWARGS_NOTE = (
    "\n\nWhen some arguments are passed by keyword to the pmapped function, they are not "
    "included in the comparison to `in_axes`. Instead, each argument passed by keyword is "
    "mapped over its leading axis. See the description of `in_axes` in the `pmap` docstring.")
_CHECK_IN_AXES_NOTE = (
    "\n\nCheck that the value of the `in_axes` argument to `pmap` is a tree prefix of the tuple "
    "of arguments passed positionally to the pmapped function.")
_OUT_AXES_NOTE = (
    "\n\nThe full pytree is the output of the pmapped function. Ensure that the `out_axes` "
    "argument to `pmap` is a pytree prefix of the pmapped function's output.")


def _hashable_static(value, index: int, fun):
    try:
        hash(value)
    except TypeError:
        raise ValueError(f"Non-hashable static arguments are not supported, as this can lead to "
                         f"unexpected cache-misses. Static argument (index {index}) of type "
                         f"{type(value)} for function {fun_name(fun)} is non-hashable.") from None
    return value


def _axes_prefix(prefix, tree, name: str, note: str) -> list:
    """One axis of `prefix` per leaf of `tree`; where `prefix` is no tree prefix of `tree`,
    JAX's pytree structure error naming the key path (`name[0][1]`), then `note`."""
    try:
        return broadcast_prefix(prefix, tree, name)
    except ValueError as generic:
        error = tree_util.structure_error(prefix, tree, name, _is_axis_leaf)
        if error is None:
            raise
        raise ValueError(error.args[0] + note) from generic


def _in_axes_prefix(dyn_axes, dyn_args, kwargs) -> list:
    """The in_axes of every leaf of (positional, keyword) arguments; keyword ones map axis 0."""
    note = _IN_AXES_NOTE + (_KWARGS_NOTE if kwargs else "") + _CHECK_IN_AXES_NOTE
    return _axes_prefix((dyn_axes, {k: 0 for k in kwargs}), (dyn_args, kwargs),
                        "pmap in_axes", note)


class ShardedOutput(Array):
    """A pmap result: one buffer per device, stacked along axis 0 only when read.

    Passing it back to a pmap over the same devices reuses the device buffers."""

    __slots__ = ("_shards", "_devices", "_joined", "_axis_name")

    committed = True

    def __init__(self, shards, devices, aval, axis_name=_INTERNAL_AXIS_NAME):
        self._shards = list(shards)
        self._devices = tuple(devices)
        self._axis_name = axis_name
        self._joined = None
        self.aval = aval
        self._npy = None

    def _check_not_deleted(self):
        if self.is_deleted():
            raise RuntimeError(f"Array has been deleted with shape={self.aval.str_short()} "
                               "(for example donated to a pmap with donate_argnums): it can "
                               "no longer be used.")

    @property
    def _buf(self):
        if self._joined is None:
            self._check_not_deleted()
            host = np.stack([backend.to_numpy(b, self.aval.dtype) for b in self._shards])
            self._joined = backend.device_put_numpy(host, self.aval)
        return self._joined

    def _value(self):
        if self._npy is None:
            self._check_not_deleted()
            arr = np.stack([backend.to_numpy(b, self.aval.dtype) for b in self._shards])
            arr.flags.writeable = False
            self._npy = arr
        return self._npy

    @property
    def addressable_shards(self):
        """As JAX's: shard i holds rows i:i+1 of the stacked value, on the i-th device."""
        from fluxion._src.global_array import Shard
        rest = (slice(None),) * (self.aval.ndim - 1)
        return [Shard(d, (slice(i, i + 1),) + rest, 0, _shard_data(b, self.aval, d))
                for i, (d, b) in enumerate(zip(self._devices, self._shards))]

    global_shards = addressable_shards
    is_fully_replicated = property(lambda self: len(self._devices) == 1)

    @property
    def sharding(self):
        """As JAX's pmap results: a NamedSharding over a one-axis mesh of the devices, named
        as the pmap's axis."""
        from fluxion._src.mesh import Mesh, PartitionSpec
        from fluxion._src.sharding_impls import NamedSharding
        name = self._axis_name
        return NamedSharding(Mesh(np.array(self._devices, dtype=object), (name,)),
                             PartitionSpec(name))

    @property
    def devices_indices(self):
        return self._devices

    def devices(self):
        return set(self._devices)

    def block_until_ready(self):
        for b in self._shards:
            b.block_until_ready()
        return self

    def is_deleted(self):
        return any(b.is_deleted() for b in self._shards)

    def delete(self):
        for b in self._shards:
            b.delete()


def _shard_data(buf, aval, device):
    """One device's block of a pmap result, shaped (1, ...) as JAX's, on that device."""
    block = aval.update(shape=(1,) + aval.shape[1:])
    host = backend.to_numpy(buf, aval.dtype).reshape(block.shape)
    return Array(backend.device_put_numpy(host, block, device, True), block)


def _replicated_sharding(devices):
    xla_client, jax_ext = backend._jaxlib()
    return jax_ext.GSPMDSharding(xla_client.DeviceList(tuple(devices)),
                                 xla_client.HloSharding.replicate())


def _per_device_buffers(x, axis, devices, aval, inner=1, donated=False):
    """One buffer per device: the slices of x along `axis` (or x itself when axis is None);
    with `inner` replicas per slice (a pmap nested in the body), device r gets slice r // inner.

    x's own buffers go in where they are laid out so already (a pmap's mapped result along
    axis 0, a result replicated over these devices), and, when donated, an unmapped
    single-device Array's buffer on the first device: as in JAX, donating them deletes x."""
    if (axis == 0 and inner == 1 and type(x) is ShardedOutput and x._devices == tuple(devices)
            and not x.is_deleted()):
        return x._shards
    if axis is None and aval.dtype != dtypes.float0:
        own = _own_replicated_buffers(x, devices, aval)
        if own is not None:
            return own
        if donated and _donatable_on(x, devices[0], aval):
            host = np.asarray(x, dtype=aval.dtype)
            return [x._buf] + [backend.device_put_numpy(host, aval, d) for d in devices[1:]]
    if aval.dtype == dtypes.float0:
        host = np.zeros(np.shape(x), np.bool_)
        aval = _device_aval(aval)
    else:
        host = np.asarray(x, dtype=aval.dtype)
    if axis is None:
        return [backend.device_put_numpy(host, aval, d) for d in devices]
    return [backend.device_put_numpy(np.ascontiguousarray(np.take(host, r // inner, axis=axis)),
                                     aval, d)
            for r, d in enumerate(devices)]


def _own_replicated_buffers(x, devices, aval):
    """The buffers of `x` if it is a global Array replicated over exactly `devices` (a pmap's
    `out_axes=None` result), else None."""
    from fluxion._src.global_array import GlobalArray
    if (type(x) is not GlobalArray or x.dtype != aval.dtype or x.is_deleted()
            or not x.is_fully_replicated
            or tuple(x.sharding._device_assignment) != tuple(devices)):
        return None
    return [buf for _, _, buf in x._blocks()]


def _donatable_on(x, device, aval) -> bool:
    """Whether `x` is a single-device Array on `device` whose buffer may be donated (not one
    of the cached scalars other Arrays share)."""
    from fluxion._src.array import _shared_ids
    return (type(x) is Array and id(x) not in _shared_ids and x.dtype == aval.dtype
            and not x.is_deleted() and x.device == device)


def _forget_donated(leaves, donated) -> None:
    """Donated arguments whose buffers XLA took lose their host copies and count as deleted,
    as after jit's donation."""
    from fluxion._src.global_array import GlobalArray
    for x, d in zip(leaves, donated):
        if not d or not isinstance(x, Array) or not x.is_deleted():
            continue
        x._npy = None
        if type(x) is ShardedOutput:
            x._joined = None
        elif type(x) is GlobalArray:
            x._joined = None
            x.delete()
        else:
            x._buf.delete()


_replicated_shardings: dict = {}


def _replicated_result(bufs, aval, devices, axis_name):
    """An `out_axes=None` result, as JAX's: replicated over the pmap's devices, a
    NamedSharding with P() over a one-axis mesh of them named as the pmap's axis."""
    from fluxion._src import global_array
    from fluxion._src.mesh import Mesh, PartitionSpec
    from fluxion._src.sharding_impls import NamedSharding
    name = axis_name if isinstance(axis_name, str) else _INTERNAL_AXIS_NAME
    key = (tuple(d.id for d in devices), name)
    sharding = _replicated_shardings.get(key)
    if sharding is None:
        mesh = Mesh(np.array(devices, dtype=object), (name,))
        sharding = _replicated_shardings[key] = NamedSharding(mesh, PartitionSpec())
    return global_array.from_buffers(bufs, aval, sharding)


def _device_aval(aval):
    """XLA has no float0: its values travel as i1 (all False), as jit's arguments do."""
    return aval.update(dtype=np.dtype(np.bool_)) if aval.dtype == dtypes.float0 else aval


def _float0_result(aval, n, target):
    """A float0 result holds no data: NumPy zeros of its shape, as JAX returns."""
    shape = aval.shape if target is None else aval.shape[:target] + (n,) + aval.shape[target:]
    return np.zeros(shape, dtypes.float0)


class _Compiled:
    __slots__ = ("loaded", "in_avals", "out_avals", "sharding", "devices", "text", "consts",
                 "constvars", "const_arrays")


def lower_replicated(closed, axes, platform, donated=None, name="pmap") -> str:
    """The module of `closed` run as replicas laid out by the (name, size) `axes`."""
    # Some lowerings retrace their bodies (scan), so the axes stay bound while lowering.
    named = [(a, s) for a, s in axes if a is not parallel_lowering.EXTRA_REPLICAS]
    with parallel_lowering.replica_axes(axes), batching.bind_axes(named):
        text = lowering.lower_jaxpr_to_module(closed.jaxpr, platform, name, donated)
    n = int(np.prod([s for _, s in axes]))
    return lowering.with_text(text, text.replace("mhlo.num_replicas = 1 : i32",
                                                 f"mhlo.num_replicas = {n} : i32", 1))


def _compile(closed, axes, devices, donated, text=None):
    """Compile `closed` as len(devices) replicas; `axes` are the (name, size) replica axes."""
    xla_client, _ = backend._jaxlib()
    n = len(devices)
    if text is None:
        text = lower_replicated(closed, axes, devices[0].platform, donated)
    options = xla_client.CompileOptions()
    options.num_replicas = n
    options.num_partitions = 1
    options.device_assignment = xla_client.DeviceAssignment.create(
        np.array([[d.id] for d in devices]))
    backend.apply_compiler_options(options)  # a jit's compiler_options, for a pmap inside it
    client = backend.backend_of(devices[0]).client
    loaded = backend.compile_and_load(client, text, xla_client.DeviceList(tuple(devices)),
                                      options, "pmap")
    c = _Compiled()
    c.loaded, c.in_avals, c.out_avals, c.devices, c.text = (
        loaded, closed.in_avals, closed.out_avals, tuple(devices), text)
    c.sharding = _replicated_sharding(devices)
    c.consts, c.constvars, c.const_arrays = closed.consts, closed.jaxpr.constvars, None
    return c


def _mapped_size(sizes, axis_size):
    if not sizes:
        if axis_size is None:
            raise ValueError("pmap requires at least one argument with a mapped axis "
                             "(or axis_size=...)")
        return axis_size
    distinct = {s for s, *_ in sizes}
    if axis_size is not None:
        distinct.add(axis_size)
    if len(distinct) > 1:
        lines = [f"  * one axis had size {s}: axis {d} of argument {w} of type {a.str_short()};"
                 for s, d, w, a in sizes]
        raise ValueError("pmap got inconsistent sizes for array axes to be mapped:\n" + "\n".join(lines))
    return distinct.pop()


def _is_ref_aval(aval) -> bool:
    return type(aval).__name__ == "AbstractRef"  # no import: state builds on this module's users


def _is_ref(x) -> bool:
    return _is_ref_aval(core.get_aval(x))


def _discharged(closed):
    """A pmap body with Refs (unmapped arguments, closed over, or its own) as a pure program:
    closed-over Refs become leading inputs, and every input Ref's final value an output (the
    first device's is stored back). Returns (program, closed-over Refs), or (closed, None)
    when the body has no Refs."""
    from fluxion._src.state.discharge import discharge_state, has_state
    if not has_state(closed.jaxpr):
        return closed, None
    jaxpr = closed.jaxpr
    is_ref = [_is_ref_aval(v.aval) for v in jaxpr.constvars]
    refs = [(v, c) for v, c, r in zip(jaxpr.constvars, closed.consts, is_ref) if r]
    plain = [(v, c) for v, c, r in zip(jaxpr.constvars, closed.consts, is_ref) if not r]
    lifted = core.Jaxpr([v for v, _ in plain], [v for v, _ in refs] + list(jaxpr.invars),
                        jaxpr.outvars, jaxpr.eqns, jaxpr.effects, jaxpr.debug_info)
    mask = [True] * len(refs) + [_is_ref_aval(v.aval) for v in jaxpr.invars]
    return discharge_state(lifted, [c for _, c in plain], mask), [c for _, c in refs]


def _has_refs(closed, leaves) -> bool:
    return (any(_is_ref_aval(v.aval) for v in closed.jaxpr.constvars)
            or any(_is_ref(x) for x in leaves))


def _replica_devices(num_replicas, devices, platform):
    """The devices of a program of `num_replicas` replicas (JAX's error when too few exist)."""
    from fluxion._src.compiler import backend as be
    if devices is not None:
        devs = list(devices)
        if len(devs) != num_replicas:
            raise ValueError(f"pmap got {len(devs)} devices but the computation needs "
                             f"{num_replicas} replicas")
        return devs
    available = be.get_backend(platform).devices
    if num_replicas > len(available):
        raise ValueError(f"compiling computation that requires {num_replicas} logical devices, "
                         f"but only {len(available)} XLA devices are available "
                         f"(num_replicas={num_replicas})")
    return list(available[:num_replicas])


def _compile_eager(closed, out_ax, out_tree, axis_name, n_global, devs, global_devs, devices,
                   platform, donated_leaves):
    """The cache entry of an eager pmap call: (executable, out_tree, out_axes, closed-over
    Refs, devices, replicas per slice, which operands are donated)."""
    closed, ref_consts = _discharged(closed)
    if ref_consts is not None:
        donated_leaves = [False] * len(ref_consts) + donated_leaves
    inner = pmap_primitive.jaxpr_replicas(closed)
    if inner > 1:  # a pmap in the body: its replicas sit inside each of ours
        if global_devs is not devs or devices is not None:
            raise NotImplementedError("nested pmap with devices= or across processes is not "
                                      "supported by fluxion")
        devs = global_devs = _replica_devices(n_global * inner, None, platform)
    axes = [(axis_name, n_global)]
    if inner > 1:
        axes.append((parallel_lowering.EXTRA_REPLICAS, inner))
    exe = _compile(closed, axes, global_devs, donated_leaves if any(donated_leaves) else None)
    return exe, out_tree, out_ax, ref_consts, devs, inner, tuple(donated_leaves)


def _execute(exe, leaves, dims, out_ax, devs, n, inner, axis_name=None, donated=None):
    """Run a compiled pmap: operands sliced onto the devices, mapped results kept there,
    unmapped ones replicated over them."""
    from fluxion._src import placement
    from fluxion._src.compiler import backend as be
    placement.activate()  # its results are committed to their devices
    donated = donated or (False,) * len(leaves)
    garrs = []
    for x, d, aval, don in zip(leaves, dims, exe.in_avals, donated):
        bufs = _per_device_buffers(x, d, devs, aval, inner, don)
        garrs.append(be.assemble_array(_device_aval(aval), exe.sharding, bufs))
    if exe.const_arrays is None:
        exe.const_arrays = [
            be.assemble_array(_device_aval(v.aval), exe.sharding,
                              _per_device_buffers(c, None, devs, v.aval))
            for c, v in zip(exe.consts, exe.constvars)]
    garrs = exe.const_arrays + garrs
    outs = exe.loaded.execute_sharded(garrs).disassemble_into_single_device_arrays()
    if any(donated):
        _forget_donated(leaves, donated)
    results = []
    for bufs, aval, target in zip(outs, exe.out_avals, out_ax):
        if aval.dtype == dtypes.float0:
            results.append(_float0_result(aval, n, target))
            continue
        if target is None:
            results.append(_replicated_result(bufs, aval, devs, axis_name))
            continue
        out = ShardedOutput(bufs[::inner], devs[::inner], aval.update(shape=(n,) + aval.shape),
                            axis_name if isinstance(axis_name, str) else _INTERNAL_AXIS_NAME)
        results.append(out if target == 0 else batching.moveaxis(out, 0, target))
    if nan_checks.enabled():
        nan_checks.check_sharded_outputs(results)
    return results


_equation_cache: dict = {}


def run_pmap_equation(args, params):
    """Apply an `xla_pmap` equation to concrete operands as its own replicated executable."""
    from fluxion._src.config import config
    jaxpr, n = params["jaxpr"], params["axis_size"]
    devices, platform = params["devices"], params["backend"]
    key = (id(jaxpr), params["axis_name"], n, params["in_axes"],
           None if devices is None else tuple(d.id for d in devices), platform, config.trace_key)
    entry = _equation_cache.get(key)
    if entry is None or entry[0] is not jaxpr:
        inner = pmap_primitive.jaxpr_replicas(jaxpr)
        devs = _replica_devices(n * inner, devices, platform)
        axes = [(params["axis_name"], n)]
        if inner > 1:
            axes.append((parallel_lowering.EXTRA_REPLICAS, inner))
        if len(_equation_cache) > 256:
            _equation_cache.clear()
        entry = _equation_cache[key] = (jaxpr, _compile(jaxpr, axes, devs, None), devs, inner)
    _, exe, devs, inner = entry
    return _execute(exe, args, params["in_axes"], params["out_axes"], devs, n, inner,
                    params["axis_name"])


def _check_axes_leaves(axes, what: str) -> None:
    """JAX's TypeError for an axis spec with a leaf other than an int or None (a bool)."""
    from fluxion._src.tree_util import tree_leaves
    if any(type(a) is bool or not isinstance(a, (int, np.integer))
           for a in tree_leaves(axes)):
        raise TypeError(f"pmap {what} must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {axes}.")


def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=(),
         global_arg_shapes=None):
    """Map `fun` over axis `in_axes` of its arguments, one slice per device, as one SPMD
    executable; collectives over `axis_name` become XLA cross-replica collectives.

    Parameters follow `jax.pmap`: `in_axes`/`out_axes` as in vmap,
    `static_broadcasted_argnums` are hashable arguments passed unchanged to every
    device, `devices` picks the devices (default the first N of the backend), `donate_argnums`
    lets XLA reuse those input buffers for outputs. It works under `jit`, `grad`, `vmap` and
    inside another pmap (the axes multiply into replica groups).
    """
    check_callable(fun)
    if devices is not None and len(devices) == 0:
        raise ValueError("'devices' argument to pmap must be non-empty, or None.")
    _check_axes_leaves(in_axes, "in_axes")
    _check_axes_leaves(out_axes, "out_axes")
    platform = backend
    if isinstance(static_broadcasted_argnums, int):
        static_broadcasted_argnums = (static_broadcasted_argnums,)
    static = tuple(static_broadcasted_argnums)
    if isinstance(donate_argnums, int):
        donate_argnums = (donate_argnums,)
    donate = tuple(donate_argnums)
    if isinstance(in_axes, list):
        in_axes_spec = tuple(in_axes)
    else:
        in_axes_spec = in_axes
    cache: dict = {}

    @functools.wraps(fun)
    @api_boundary
    def pmapped(*args, **kwargs):
        from fluxion._src.compiler import backend as be
        for i in static:
            if i >= len(args):
                plural = "" if len(args) == 1 else "s"
                raise ValueError(f"pmapped function has static_broadcasted_argnums={static} but "
                                 f"was called with only {len(args)} positional argument{plural}. "
                                 "All static broadcasted arguments must be passed positionally.")
        dyn_idx = [i for i in range(len(args)) if i not in static]
        dyn_args = tuple(args[i] for i in dyn_idx)
        static_vals = tuple((i, _hashable_static(args[i], i, fun)) for i in static)
        if isinstance(in_axes_spec, tuple) and not static:
            dyn_axes = in_axes_spec  # a prefix of the positional arguments, as in JAX
        elif isinstance(in_axes_spec, tuple):
            if len(in_axes_spec) != len(args):
                raise ValueError(f"pmap in_axes must be an int, None, or a tuple of entries "
                                 f"corresponding to the positional arguments passed to the "
                                 f"function, but got len(in_axes)={len(in_axes_spec)}, "
                                 f"len(args)={len(args)}")
            dyn_axes = tuple(in_axes_spec[i] for i in dyn_idx)
        else:
            dyn_axes = (in_axes_spec,) * len(dyn_args)
        leaves, in_tree = tree_flatten((dyn_args, kwargs))
        traced = any(isinstance(x, core.Tracer) for x in leaves)
        axes = _in_axes_prefix(dyn_axes, dyn_args, kwargs)
        names = _arg_names(fun, len(args))
        where = []
        for i, a in zip(dyn_idx, dyn_args):
            where += [names[i]] * len(tree_flatten(a)[0])
        for k, v in sorted(kwargs.items()):
            where += [k] * len(tree_flatten(v)[0])
        dims, sizes, avals = [], [], []
        for x, ax, w in zip(leaves, axes, where):
            aval = core.get_aval(x)
            if ax is not None and _is_ref_aval(aval):  # JAX's class
                raise ValueError(f"pmap: a Ref ({aval.str_short()}, argument {w}) can only be "
                                 "passed unmapped (in_axes=None); pass its value "
                                 "(`ref[...]`) to map over it")
            d = _check_axis(ax, aval.ndim, aval.shape, w)
            dims.append(d)
            if d is not None:
                sizes.append((aval.shape[d], d, w, aval))
                aval = aval.update(shape=aval.shape[:d] + aval.shape[d + 1:])
            avals.append(aval.update(weak_type=aval.weak_type))
        n = _mapped_size(sizes, axis_size)
        if devices is not None:
            devs = list(devices)
            if len(devs) != n:
                raise ValueError(f"Leading axis size of input to pmapped function must equal the "
                                 f"number of local devices passed to pmap. Got axis_size={n}, "
                                 f"num_local_devices={len(devs)}.")
        else:
            available = be.get_backend(platform).devices
            if n > len(available):
                raise ValueError(f"compiling computation that requires {n} logical devices, but "
                                 f"only {len(available)} XLA devices are available "
                                 f"(num_replicas={n})")
            devs = list(available[:n])
        # Across processes the mapped axis spans every process's devices (process-major);
        # this process supplies and receives the slices of its own devices only.
        all_devs = sorted(be.get_backend(platform).client.devices(),
                          key=lambda d: (d.process_index, d.id))
        global_devs = all_devs if len(all_devs) > len(be.get_backend(platform).devices) else devs
        if global_devs is not devs and devices is None and n != len(devs):
            raise ValueError("in a multi-process run pmap maps over all local devices")
        n_global = len(global_devs)
        donated_leaves = []
        for i, a in zip(dyn_idx, dyn_args):
            donated_leaves += [i in donate] * len(tree_flatten(a)[0])
        donated_leaves += [False] * (len(leaves) - len(donated_leaves))
        key = (in_tree, tuple(avals), tuple(dims), n, tuple(d.id for d in global_devs),
               static_vals, traced)
        entry = cache.get(key)
        if entry is None:
            box = []

            def flat_fun(*xs):
                a, kw = tree_unflatten(in_tree, xs)
                full = list(a)
                for i, v in static_vals:
                    full.insert(i, v)
                out = fun(*full, **kw)
                out_leaves, out_tree = tree_flatten(out)
                box.append((out, out_tree))
                return out_leaves

            with batching.extend_axis_env(axis_name, n_global):
                closed = staging.trace_to_jaxpr(flat_fun, avals, origin="pmap")
            out, out_tree = box[0]
            out_ax = _axes_prefix(out_axes, out, "pmap out_axes", _OUT_AXES_NOTE)
            for t in out_ax:
                if t is not None and not isinstance(t, int):
                    raise TypeError(f"pmap out_axes must be ints or None, got {t!r}")
            out_ax = [None if t is None else t % (a.ndim + 1)
                      for t, a in zip(out_ax, closed.out_avals)]
            # A body closing over an enclosing transformation's tracers (pmap called inside
            # vmap/grad/jit on concrete arguments) binds the equation too, those tracers its
            # unmapped operands; its trace holds them, so it is not cached.
            closes_over_tracers = any(isinstance(c, core.Tracer) for c in closed.consts)
            if traced or closes_over_tracers:
                if global_devs is not devs:
                    raise NotImplementedError("pmap under jit, grad or vmap in a multi-process "
                                              "run is not supported by fluxion")
                if _has_refs(closed, leaves):
                    raise NotImplementedError("pmap of Refs under jit, grad or vmap is not "
                                              "supported by fluxion yet")
                entry = (closed, out_tree, out_ax)
                if not closes_over_tracers:
                    cache[key] = entry
            else:
                entry = cache[key] = _compile_eager(closed, out_ax, out_tree, axis_name,
                                                    n_global, devs, global_devs, devices, platform,
                                                    donated_leaves)
        if len(entry) == 3:  # the traced entry: bind the equation
            closed, out_tree, out_ax = entry
            converted, consts = closure_convert(closed)
            outs = pmap_primitive.xla_pmap_p.bind(
                *consts, *leaves, jaxpr=converted, axis_name=axis_name, axis_size=n,
                in_axes=(None,) * len(consts) + tuple(dims), out_axes=tuple(out_ax),
                devices=None if devices is None else tuple(devices), backend=platform,
                name=fun_name(fun))
            return tree_unflatten(out_tree, outs)
        exe, out_tree, out_ax, ref_consts, devs, inner, donated = entry
        refs = None
        if ref_consts is not None:  # Refs go in as their values; the new values come back
            refs = list(ref_consts) + [x for x in leaves if _is_ref(x)]
            leaves = ([r._read_value() for r in ref_consts]
                      + [x._read_value() if _is_ref(x) else x for x in leaves])
            dims = [None] * len(ref_consts) + dims
            out_ax = list(out_ax) + [None] * len(refs)
        results = _execute(exe, leaves, dims, out_ax, devs, n, inner, axis_name, donated)
        if refs is not None:
            n_out = len(results) - len(refs)
            for r, v in zip(refs, results[n_out:]):
                r._store(v)
            results = results[:n_out]
        return tree_unflatten(out_tree, results)

    def lower(*args, **kwargs):
        """Ahead-of-time lowering for these arguments (Arrays or ShapeDtypeStructs), as
        `jit(f).lower`: the pmap as one program of one replica per device (see
        docs/parallelism.md); `.compile()` gives an executable taking the same arguments."""
        from fluxion._src.api import jit
        return jit(pmapped, static_argnums=static, donate_argnums=donate).lower(*args, **kwargs)

    pmapped.lower = lower
    pmapped.__name__ = f"pmap({fun_name(fun)})"
    return pmapped

