"""Utilities for multi-process runs, built on pmap collectives over every process's devices."""
from __future__ import annotations

import contextlib

import numpy as np

from fluxion._src.tree_util import tree_map


def _one_per_process(fn, x):
    import fluxion as fx
    from fluxion import lax
    k = fx.local_device_count()
    mapped = fx.pmap(lambda v: fn(v, k), "_mh", in_axes=None, out_axes=None, axis_size=k)
    return mapped(x)


def _identity(x):
    return x


def _gather_global(x, tiled: bool):
    """The whole value of a global Array that spans other processes' devices: a program
    replicates it over its mesh (XLA moves the blocks), then the local copy is read."""
    import fluxion as fx
    from fluxion.sharding import NamedSharding, PartitionSpec
    if not tiled:
        raise ValueError("Gathering global non-fully-addressable arrays only supports tiled=True")
    if not isinstance(x.sharding, NamedSharding):
        raise NotImplementedError(f"process_allgather of a global Array laid out as "
                                  f"{x.sharding!r} (not a NamedSharding)")
    out = fx.jit(_identity, out_shardings=NamedSharding(x.sharding.mesh, PartitionSpec()))(x)
    return np.asarray(out.addressable_data(0))


def process_allgather(in_tree, tiled: bool = False):
    """Every process's value of each leaf, stacked along a new axis 0 (concatenated along
    axis 0 if `tiled`), as host NumPy arrays on every process. A global Array that spans
    several processes' devices is gathered whole instead (only with `tiled=True`, as JAX)."""
    from fluxion import lax
    from fluxion._src.array import Array

    import fluxion as fx

    def gather(x):
        if isinstance(x, Array) and not x.is_fully_addressable:
            return _gather_global(x, tiled)
        x = np.asarray(x)
        if fx.process_count() == 1:  # as JAX: this process's value, stacked unless tiled
            return x if tiled else np.expand_dims(x, 0)

        def body(v, k):
            allv = lax.all_gather(v, "_mh")          # (k * processes, ...)
            return allv[::k]                          # the first device of each process
        out = np.asarray(_one_per_process(body, x))
        return out.reshape((-1,) + x.shape[1:]) if tiled else out
    return tree_map(gather, in_tree)


def broadcast_one_to_all(in_tree, is_source: bool | None = None):
    """Process 0's value (or the value of the process passing is_source=True) on all."""
    import fluxion as fx
    from fluxion import lax
    if is_source is None:
        is_source = fx.process_index() == 0

    def bcast(x):
        x = np.asarray(x)
        contrib = x if is_source else np.zeros_like(x)

        def body(v, k):
            first = (lax.axis_index("_mh") % k) == 0
            return lax.psum(fx.numpy.where(first, v, fx.numpy.zeros_like(v)), "_mh")
        out = np.asarray(_one_per_process(body, contrib))
        return out.astype(x.dtype)
    return tree_map(bcast, in_tree)


def sync_global_devices(name: str):
    """A barrier across all processes (named, so mismatched calls are detected)."""
    from fluxion._src import distributed
    if distributed._state:
        distributed._state["client"].wait_at_barrier(f"sync_global_devices:{name}", 300_000)


def _local_shape(shape, global_mesh, local_mesh, spec, to_global: bool) -> tuple:
    """A value's shape on the local mesh <-> on the global mesh: each dimension scales by
    how many times more devices its mesh axes have globally."""
    out = []
    for d, n in enumerate(shape):
        k = 1
        for a in spec.axes_of(d) if d < len(spec) else ():
            k *= global_mesh.shape[a] // local_mesh.shape[a]
        out.append(n * k if to_global else n // k)
    return tuple(out)


def _local_buffers(x):
    from fluxion._src.global_array import GlobalArray
    if type(x) is GlobalArray:
        return [buf for _, _, buf in x._blocks()]
    return [x._buf]


def _check_spec(spec, what):
    from fluxion.sharding import PartitionSpec
    if spec is None:
        raise ValueError("`None` is not a valid input to the pspecs argument. Please use "
                         "PartitionSpec() if you wanted to replicate your input.")
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"{what}: pspecs must be PartitionSpecs, got {spec!r}")
    return spec


def host_local_array_to_global_array(local_inputs, global_mesh, pspecs):
    """Each process's part of the data (a pytree) as global Arrays over `global_mesh` laid
    out by `pspecs` (a PartitionSpec or a pytree of them): this process's part goes on its
    devices (the local sub-mesh) and those blocks become the global Array's."""
    import fluxion as fx
    from fluxion._src import core
    from fluxion._src.global_array import from_buffers
    from fluxion.sharding import NamedSharding
    leaves, tree = fx.tree_util.tree_flatten(local_inputs)
    specs = _specs_for(pspecs, local_inputs, len(leaves))
    local_mesh = global_mesh.local_mesh
    out = []
    for x, spec in zip(leaves, specs):
        spec = _check_spec(spec, "host_local_array_to_global_array")
        local = fx.device_put(x, NamedSharding(local_mesh, spec))
        aval = core.get_aval(local)
        aval = aval.update(shape=_local_shape(aval.shape, global_mesh, local_mesh, spec, True))
        out.append(from_buffers(_local_buffers(local), aval, NamedSharding(global_mesh, spec)))
    return tree.unflatten(out)


def global_array_to_host_local_array(global_inputs, global_mesh, pspecs):
    """The inverse of host_local_array_to_global_array: this process's part of each global
    Array, as an Array over the local sub-mesh of `global_mesh` laid out by `pspecs`."""
    import fluxion as fx
    from fluxion._src import core
    from fluxion._src.array import Array
    from fluxion._src.global_array import from_buffers
    from fluxion.sharding import NamedSharding
    leaves, tree = fx.tree_util.tree_flatten(global_inputs)
    specs = _specs_for(pspecs, global_inputs, len(leaves))
    local_mesh = global_mesh.local_mesh
    out = []
    for x, spec in zip(leaves, specs):
        spec = _check_spec(spec, "global_array_to_host_local_array")
        if getattr(x, "is_fully_addressable", False) and global_mesh == local_mesh:
            out.append(x)
            continue
        target = NamedSharding(global_mesh, spec)
        if not (isinstance(x, Array) and x.sharding == target):
            x = fx.jit(_identity, out_shardings=target)(x)
        aval = core.get_aval(x)
        aval = aval.update(shape=_local_shape(aval.shape, global_mesh, local_mesh, spec, False))
        out.append(from_buffers(_local_buffers(x), aval, NamedSharding(local_mesh, spec)))
    return tree.unflatten(out)


def _specs_for(pspecs, tree, n):
    from fluxion._src.sharded_jit import flat_shardings
    from fluxion.sharding import PartitionSpec
    if pspecs is None or isinstance(pspecs, PartitionSpec):
        return [pspecs] * n
    return flat_shardings(pspecs, tree, "pspecs")


def assert_equal(in_tree, fail_message: str = ""):
    """Check that every process holds the same pytree of values; AssertionError otherwise.

    As in JAX each process's leaves are gathered and compared with this process's, so a
    leaf that is not equal to itself (a NaN) fails even with one process."""
    import fluxion as fx
    from fluxion._src.array import Array
    from fluxion._src.tree_util import tree_leaves

    def expected(x):
        if isinstance(x, Array) and not x.is_fully_addressable:
            return np.asarray(x.addressable_data(0))
        x = np.asarray(x)
        if x.ndim == 0:
            x = np.expand_dims(x, axis=0)
        return np.concatenate([x] * fx.process_count())

    out = process_allgather(in_tree, tiled=True)
    want = tree_map(expected, in_tree)
    if not all(tree_leaves(tree_map(lambda a, b: bool(np.all(np.equal(a, b))), want, out))):
        raise AssertionError(f"{fail_message}. Expected: {out}; got: {in_tree}.")


class ProcessFailureError(Exception):
    """Raised by `live_devices` when processes failed inside its block; `failed_devices`
    holds their devices."""

    def __init__(self, failed_devices):
        self.failed_devices = failed_devices
        super().__init__(f"Devices failed: {failed_devices}")


def _live_devices(client, devices) -> dict:
    """The given devices whose processes are alive: device -> its process's incarnation."""
    import fluxion as fx
    process_ids = {d.process_index for d in devices}
    if fx.process_index() not in process_ids:
        raise ValueError("Provided devices do not have any local devices.")
    live = client.get_live_nodes(sorted(process_ids))
    return {d: live[d.process_index] for d in devices if d.process_index in live}


class _LiveDevices:
    """`with live_devices(devices) as alive:` runs the block on the devices (of those given)
    whose processes are alive, agreed on by every such process (a barrier among them). If a
    process fails or restarts during the block, every surviving process raises
    `ProcessFailureError` when leaving it.

    Needs `fluxion.distributed.initialize` (RuntimeError otherwise); `devices` must include
    one of this process's devices (ValueError otherwise).
    """

    def __init__(self):
        self.devices = None

    @contextlib.contextmanager
    def __call__(self, devices):
        from fluxion._src import distributed
        if not distributed._state:
            raise RuntimeError("Distributed JAX not initialized: call "
                               "fluxion.distributed.initialize() first.")
        client = distributed._state["client"]
        if not devices:
            raise ValueError("No devices provided.")
        if self.devices is None:
            self.devices = _live_devices(client, devices)
        exception = None
        try:
            yield sorted(self.devices, key=lambda d: d.id)
        except Exception as e:  # noqa: BLE001 - re-raised below, after the check
            exception = e
        finally:
            old = self.devices
            new = _live_devices(client, devices)
            self.devices = new
            failed = {d for d in old if d not in new or new[d] != old[d]}
            if failed:
                raise ProcessFailureError(failed) from exception
            if exception is not None:
                raise exception


live_devices = _LiveDevices()
