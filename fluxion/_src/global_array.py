"""Arrays laid out over several devices: `device_put(x, sharding)` and the outputs of sharded
`jit` programs.

A `GlobalArray` wraps a jaxlib global array (one buffer per device, with the HloSharding of
the layout). It has no `aval` attribute on purpose: every dispatch fast path (eager
primitives, `jit`) keys on `x.aval` and so misses for it, and the general paths, which know
shardings, take it. Its abstract value comes from `core.get_aval` (registered below).
"""
from __future__ import annotations

import numpy as np

from fluxion._src import core, dispatch
from fluxion._src.array import Array
from fluxion._src.compiler import backend
from fluxion._src.core import ShapedArray
from fluxion._src import sharding_impls
from fluxion._src.sharding_impls import NamedSharding, Sharding, SingleDeviceSharding


class Shard:
    """One device's block of an Array (JAX's `Shard`)."""

    __slots__ = ("device", "index", "replica_id", "_data")

    def __init__(self, device, index, replica_id, data):
        self.device, self.index, self.replica_id, self._data = device, index, replica_id, data

    @property
    def data(self) -> Array:
        return self._data

    def __repr__(self):
        return (f"Shard(device={self.device!r}, index={self.index}, replica_id={self.replica_id}, "
                f"data={self._data})")


class GlobalArray(Array):
    """An Array whose blocks live on the devices of its sharding (see module docstring)."""

    __slots__ = ("_garr", "_aval", "_sharding", "_joined")

    def __init__(self, garr, aval: ShapedArray, sharding: Sharding):
        self._garr = garr
        self._aval = aval
        self._sharding = sharding
        self._joined = None
        self._npy = None
        if dispatch.sharded_apply_primitive is None:
            from fluxion._src import sharded_jit
            dispatch.sharded_apply_primitive = sharded_jit.apply_primitive

    @property
    def aval(self):
        raise AttributeError("aval")  # see the module docstring

    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)
    ndim = property(lambda self: len(self._aval.shape))
    size = property(lambda self: self._aval.size)
    weak_type = property(lambda self: self._aval.weak_type)
    nbytes = property(lambda self: self._aval.size * self._aval.dtype.itemsize)
    itemsize = property(lambda self: self._aval.dtype.itemsize)

    @property
    def sharding(self) -> Sharding:
        return self._sharding

    @property
    def _buf(self):
        """The whole array on the default device (for code that needs one buffer)."""
        if self._joined is None:
            self._joined = backend.device_put_numpy(np.asarray(self._value()), self._aval)
        return self._joined

    def _blocks(self):
        """(device, index, buffer) for every block, in the sharding's device order."""
        indices = self._sharding._indices(self._aval.shape)
        return list(zip(self._sharding._device_assignment, indices, self._garr._arrays))

    def _value(self) -> np.ndarray:
        if self._npy is None:
            if self._garr.is_deleted():
                raise RuntimeError(f"Array has been deleted with shape={self._aval.str_short()}.")
            out = np.empty(self._aval.shape, self._aval.dtype)
            seen = set()
            for _, index, buf in self._blocks():
                key = tuple((s.start, s.stop) for s in index)
                if key not in seen:
                    seen.add(key)
                    out[index] = backend.to_numpy(buf, self._aval.dtype)
            out.flags.writeable = False
            self._npy = out
        return self._npy

    def _shards(self):
        out, replicas = [], {}
        shard_aval = None
        for device, index, buf in self._blocks():
            key = tuple((s.start, s.stop) for s in index)
            rid = replicas.get(key, 0)
            replicas[key] = rid + 1
            shape = tuple(len(range(*s.indices(n))) for s, n in zip(index, self._aval.shape))
            if shard_aval is None or shard_aval.shape != shape:
                shard_aval = self._aval.update(shape=shape)
            out.append(Shard(device, index, rid, Array(buf, shard_aval)))
        return out

    @property
    def addressable_shards(self) -> list:
        return [s for s in self._shards() if s.device.process_index == _process_index()]

    @property
    def global_shards(self) -> list:
        return self._shards()

    @property
    def is_fully_replicated(self) -> bool:
        return self._sharding.is_fully_replicated

    @property
    def is_fully_addressable(self) -> bool:
        return self._sharding.is_fully_addressable

    def devices(self) -> set:
        return set(self._sharding._device_assignment)

    @property
    def device(self):
        raise ValueError("device is not defined for an Array sharded over several devices; "
                         "use .devices() or .sharding")

    def block_until_ready(self):
        self._garr.block_until_ready()
        return self

    def is_deleted(self) -> bool:
        return self._garr.is_deleted()

    def delete(self) -> None:
        self._garr.delete()
        self._npy = self._joined = None

    def copy_to_host_async(self) -> None:
        for buf in self._garr._arrays:
            buf._copy_single_device_array_to_host_async()


def _process_index():
    from fluxion._src.api import process_index
    return process_index()


core.register_aval_handler(GlobalArray, lambda x: x._aval)


# ---------------------------------------------------------------------------------------------
# Building global arrays

def jaxlib_sharding(sharding: Sharding, ndim: int):
    xla_client, jax_ext = backend._jaxlib()
    return jax_ext.GSPMDSharding(xla_client.DeviceList(sharding._device_assignment),
                                 sharding._hlo_sharding(ndim))


def from_buffers(bufs, aval: ShapedArray, sharding: Sharding) -> GlobalArray:
    """A GlobalArray from one jaxlib buffer per device of `sharding` (in its device order)."""
    garr = backend.assemble_array(aval, jaxlib_sharding(sharding, len(aval.shape)), list(bufs))
    return GlobalArray(garr, aval, sharding)


def check_divisible(sharding: Sharding, shape, what="array") -> None:
    if isinstance(sharding, NamedSharding):
        sharding.check_rank(len(shape), what)
        for d, n in enumerate(shape):
            k = int(np.prod([sharding.mesh.shape[a] for a in sharding.spec.axes_of(d)]))
            if n % k:
                raise ValueError(f"One of {what} was given the sharding of {sharding!r}, which "
                                 f"implies that the global size of its dimension {d} should be "
                                 f"divisible by {k}, but it is equal to {n} (full shape: "
                                 f"{tuple(shape)})")


def device_put_sharded_value(x, sharding: Sharding, weak_type=None):
    """`x` (a host value or Array) laid out as `sharding`."""
    if isinstance(sharding, SingleDeviceSharding):
        from fluxion._src.array import make_array
        aval = core.get_aval(x)
        return make_array(np.asarray(x, dtype=aval.dtype), weak_type=aval.weak_type,
                          device=sharding._device)
    if type(x) is GlobalArray and x._sharding == sharding:
        return x
    aval = core.get_aval(x)
    if weak_type is not None:
        aval = aval.update(weak_type=weak_type)
    check_divisible(sharding, aval.shape, "device_put arguments")
    host = np.asarray(x, dtype=aval.dtype)
    return make_array_from_callback(aval.shape, sharding, lambda idx: host[idx], aval=aval)


def make_array_from_callback(shape, sharding, data_callback, *, aval=None) -> Array:
    """A global Array of `shape` laid out as `sharding`, whose block at each index comes from
    `data_callback(index)` (a tuple of slices)."""
    sharding = sharding_impls.canonicalize(sharding, "make_array_from_callback")
    shape = tuple(shape)
    check_divisible(sharding, shape, "make_array_from_callback")
    indices = sharding._indices(shape)
    bufs, dtype = [], None
    shard_aval = None
    for device, index in zip(sharding._device_assignment, indices):
        block = np.asarray(data_callback(index))
        if dtype is None:
            dtype = backend.canonical_numpy(block[:0] if block.ndim else block).dtype
            if aval is None:
                aval = ShapedArray(shape, dtype)
            shard_aval = aval.update(shape=sharding.shard_shape(shape))
        block = np.asarray(block, dtype=aval.dtype, order="C")
        if block.shape != shard_aval.shape:
            raise ValueError(f"make_array_from_callback: the callback returned a block of shape "
                             f"{block.shape} for index {index}, expected {shard_aval.shape}")
        bufs.append(backend.device_put_numpy(block, shard_aval, device))
    if isinstance(sharding, SingleDeviceSharding):
        return Array(bufs[0], aval)
    return from_buffers(bufs, aval, sharding)


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None) -> Array:
    """A global Array of `shape` laid out as `sharding` from one single-device Array per device
    (in the order of `sharding.addressable_devices_indices_map(shape)`)."""
    sharding = sharding_impls.canonicalize(sharding, "make_array_from_single_device_arrays")
    shape = tuple(shape)
    arrays = list(arrays)
    devices = sharding._device_assignment
    if len(arrays) != len(devices):
        raise ValueError(f"make_array_from_single_device_arrays: got {len(arrays)} arrays for a "
                         f"sharding over {len(devices)} devices")
    want = sharding.shard_shape(shape)
    bufs = []
    for a, device in zip(arrays, devices):
        if not isinstance(a, Array) or type(a) is GlobalArray:
            raise TypeError("make_array_from_single_device_arrays expects single-device Arrays, "
                            f"got {type(a).__name__}")
        if a.shape != want:
            raise ValueError(f"make_array_from_single_device_arrays: an array of shape {a.shape} "
                             f"was given where the sharding {sharding!r} of shape {shape} has "
                             f"blocks of shape {want}")
        buf = a._buf
        if a.device != device:
            buf = backend.device_put_numpy(np.asarray(a), a.aval, device)
        bufs.append(buf)
    aval = ShapedArray(shape, arrays[0].dtype if dtype is None else np.dtype(dtype))
    if isinstance(sharding, SingleDeviceSharding):
        return arrays[0]
    return from_buffers(bufs, aval, sharding)


def make_array_from_process_local_data(sharding, local_data, global_shape=None) -> Array:
    """A global Array from this process's part of the data. With one process the local data
    is the whole array."""
    sharding = sharding_impls.canonicalize(sharding, "make_array_from_process_local_data")
    local = np.asarray(local_data)
    if global_shape is not None and tuple(global_shape) != local.shape:
        from fluxion._src.api import process_count
        if process_count() == 1:
            raise ValueError(f"make_array_from_process_local_data: with one process the local "
                             f"data (shape {local.shape}) is the whole array, but global_shape="
                             f"{tuple(global_shape)}")
        raise NotImplementedError("make_array_from_process_local_data across processes is not "
                                  "supported by fluxion yet")
    return device_put_sharded_value(local, sharding)
