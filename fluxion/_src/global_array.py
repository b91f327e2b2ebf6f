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
            from fluxion._src import placement, sharded_jit
            dispatch.sharded_apply_primitive = sharded_jit.apply_primitive
            placement.activate()  # its shards are committed Arrays on several devices

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
    def format(self):
        """Its `Format`: the default row-major layout and its sharding."""
        from fluxion._src.layout import Format, default_layout
        return Format(default_layout(self.ndim), self._sharding)

    @property
    def _buf(self):
        """The whole array on the default device (for code that needs one buffer)."""
        if self._joined is None:
            self._joined = backend.device_put_numpy(np.asarray(self._value()), self._aval)
        return self._joined

    def _blocks(self, addressable_only: bool = True):
        """(device, index, buffer) for every block this process holds, in the sharding's
        device order; with `addressable_only=False` also the other processes' blocks, whose
        buffer is None."""
        me = _process_index()
        indices = self._sharding._indices(self._aval.shape)
        bufs = iter(self._garr._arrays)  # one per addressable device, in the same order
        out = []
        for device, index in zip(self._sharding._device_assignment, indices):
            if device.process_index == me:
                out.append((device, index, next(bufs)))
            elif not addressable_only:
                out.append((device, index, None))
        return out

    def _value(self) -> np.ndarray:
        if self._npy is None:
            if self._garr.is_deleted():
                raise RuntimeError(f"Array has been deleted with shape={self._aval.str_short()}.")
            if not (self._sharding.is_fully_addressable or self._sharding.is_fully_replicated):
                raise RuntimeError(
                    "Fetching value for `jax.Array` that spans non-addressable (non process "
                    "local) devices is not possible. You can use "
                    "`fluxion.experimental.multihost_utils.process_allgather` to print the "
                    "global array or use `.addressable_shards` method of jax.Array to inspect "
                    "the addressable (process local) shards.")
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

    def __repr__(self):
        if self._sharding.is_fully_addressable or self._sharding.is_fully_replicated:
            return super().__repr__()
        dtype_text = f"dtype={self.dtype.name}" + (", weak_type=True" if self.weak_type else "")
        return f"Array(shape={self.shape}, {dtype_text})"

    def _shards(self, addressable_only: bool):
        """Shards of the blocks (another process's have data None); replica ids count the
        copies of each block over the whole device assignment."""
        out, replicas = [], {}
        shard_aval = None
        for device, index, buf in self._blocks(addressable_only=False):
            key = tuple((s.start, s.stop) for s in index)
            rid = replicas.get(key, 0)
            replicas[key] = rid + 1
            if buf is None:
                if not addressable_only:
                    out.append(Shard(device, index, rid, None))
                continue
            shape = tuple(len(range(*s.indices(n))) for s, n in zip(index, self._aval.shape))
            if shard_aval is None or shard_aval.shape != shape:
                shard_aval = self._aval.update(shape=shape)
            out.append(Shard(device, index, rid, Array(buf, shard_aval)))
        return out

    @property
    def addressable_shards(self) -> list:
        return self._shards(addressable_only=True)

    @property
    def global_shards(self) -> list:
        return self._shards(addressable_only=False)

    @property
    def is_fully_replicated(self) -> bool:
        return self._sharding.is_fully_replicated

    @property
    def is_fully_addressable(self) -> bool:
        return self._sharding.is_fully_addressable

    def devices(self) -> set:
        return set(self._sharding._device_assignment)

    committed = True

    @property
    def device(self):
        raise ValueError("device is not defined for an Array sharded over several devices; "
                         "use .devices() or .sharding")

    def block_until_ready(self):
        self._garr.block_until_ready()
        return self

    def is_ready(self) -> bool:
        return self._garr.is_ready()

    def is_deleted(self) -> bool:
        return self._garr.is_deleted()

    def delete(self) -> None:
        self._garr.delete()
        self._npy = self._joined = None

    def platform(self) -> str:
        return self._sharding._device_assignment[0].platform

    def clone(self) -> "GlobalArray":
        return GlobalArray(self._garr.clone(), self._aval, self._sharding)

    @property
    def traceback(self):
        return self._garr.traceback

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
                          device=sharding._device, committed=True)
    if type(x) is GlobalArray and x._sharding == sharding:
        return x
    if type(x) is GlobalArray and _same_layout(x._sharding, sharding):
        return GlobalArray(x._garr, x._aval, sharding)  # only the mesh's axis types differ
    aval = core.get_aval(x)
    if weak_type is not None:
        aval = aval.update(weak_type=weak_type)
    check_divisible(sharding, aval.shape, "device_put arguments")
    host = np.asarray(x, dtype=aval.dtype)
    return make_array_from_callback(aval.shape, sharding, lambda idx: host[idx], aval=aval)


def _same_layout(a, b) -> bool:
    mesh_a, mesh_b = getattr(a, "mesh", None), getattr(b, "mesh", None)
    return (mesh_a is not None and mesh_b is not None and type(a) is type(b)
            and mesh_a._device_key == mesh_b._device_key and a.spec == b.spec)


def _addressable(sharding: Sharding, shape) -> list:
    """(device, index) of this process's devices of `sharding`, in its device order."""
    me = _process_index()
    return [(d, i) for d, i in zip(sharding._device_assignment, sharding._indices(shape))
            if d.process_index == me]


def make_array_from_callback(shape, sharding, data_callback, *, aval=None) -> Array:
    """A global Array of `shape` laid out as `sharding`, whose block at each index comes from
    `data_callback(index)` (a tuple of slices); in a multi-process run each process is asked
    only for the blocks of its own devices."""
    sharding = sharding_impls.canonicalize(sharding, "make_array_from_callback")
    shape = tuple(shape)
    check_divisible(sharding, shape, "make_array_from_callback")
    local = _addressable(sharding, shape)
    if not local:
        raise ValueError(f"make_array_from_callback: the sharding {sharding!r} has no device "
                         f"of this process")
    bufs, dtype = [], None
    shard_aval = None
    for device, index in local:
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
        bufs.append(backend.device_put_numpy(block, shard_aval, device, True))
    if isinstance(sharding, SingleDeviceSharding):
        return Array(bufs[0], aval)
    return from_buffers(bufs, aval, sharding)


def _check_single_device_arrays(arrays, dtype) -> None:
    """JAX's refusals (and words) for `arrays` that are not a list of concrete arrays, or whose
    dtype is not the `dtype` given."""
    if not isinstance(arrays, (list, tuple)):
        raise TypeError("jax.make_array_from_single_device_arrays `arrays` argument must be a "
                        f"list or tuple, but got {type(arrays)}.")
    if any(isinstance(a, core.Tracer) for a in arrays):
        raise ValueError("jax.make_array_from_single_device_arrays requires a list of concrete "
                         f"arrays as input, but got types {set(map(type, arrays))}")
    if dtype is not None:
        for a in arrays:
            if np.dtype(a.dtype) != np.dtype(dtype):
                raise ValueError(
                    "If `dtype` is provided to `jax.make_array_from_single_device_arrays`, it "
                    "must match the dtype of the addressable shards. Got "
                    f"dtype={np.dtype(dtype)} and shard dtype={np.dtype(a.dtype)}.")


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None) -> Array:
    """A global Array of `shape` laid out as `sharding` from one single-device Array per
    device of this process (in the order of `sharding.addressable_devices_indices_map(shape)`)."""
    sharding = sharding_impls.canonicalize(sharding, "make_array_from_single_device_arrays")
    shape = tuple(shape)
    _check_single_device_arrays(arrays, dtype)
    arrays = list(arrays)
    devices = [d for d, _ in _addressable(sharding, shape)]
    if len(arrays) != len(devices):
        raise ValueError(f"make_array_from_single_device_arrays: got {len(arrays)} arrays for a "
                         f"sharding over {len(devices)} devices of this process")
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


def _process_slices(sharding: Sharding, dim: int, ndim: int):
    """How many distinct process-level parts dimension `dim` splits into (None if the
    processes' blocks do not tile it evenly, JAX's "non-uniform" sharding)."""
    if sharding.is_fully_addressable or sharding.is_fully_replicated:
        return 1
    n = sharding.num_devices
    per_process: dict = {}
    for d, index in sharding.devices_indices_map((n,) * ndim).items():
        per_process.setdefault(d.process_index, set()).add((index[dim].start, index[dim].stop))
    sizes = {len(v) for v in per_process.values()}
    unique = {frozenset(v) for v in per_process.values()}
    if len(sizes) != 1 or sum(len(u) for u in unique) != len(set().union(*unique)):
        return None
    return len(unique)


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """A global Array from this process's part of the data (or a pytree of them, with
    `sharding` and `global_shape` pytree prefixes of it).

    Along each dimension `local_data` holds either the whole global extent or exactly the
    indices this process's devices hold (packed in order); `global_shape` defaults to the
    local shape times the number of process-level parts of each dimension. A device stands
    for its single-device sharding (as in JAX)."""
    from fluxion._src.api import _is_device
    from fluxion._src.tree_util import tree_flatten
    if _is_device(sharding):
        sharding = sharding_impls.single_device_sharding(sharding)
    leaves, tree = tree_flatten(local_data)
    if len(leaves) == 1 and tree_flatten(leaves[0])[1] == tree:
        return _from_process_local_data(sharding, local_data, global_shape)
    from fluxion._src.sharded_jit import flat_shardings
    shardings = flat_shardings(sharding, local_data, "make_array_from_process_local_data")
    shapes = _shape_prefix(global_shape, local_data)
    return tree.unflatten([_from_process_local_data(s, x, g)
                           for s, x, g in zip(shardings, leaves, shapes)])


def _shape_prefix(global_shape, tree) -> list:
    """One global shape (a tuple of ints, or None) per leaf of `tree`."""
    from fluxion._src.tree_util import broadcast_prefix

    def is_shape(g):
        return g is None or (isinstance(g, tuple) and all(isinstance(n, int) for n in g))

    def mismatch(g, t):
        return ValueError(f"make_array_from_process_local_data: global_shape {global_shape!r} "
                          "is not a pytree prefix of the local data")
    return broadcast_prefix(global_shape, tree, is_shape, mismatch, same_node_types=False)


def _from_process_local_data(sharding, local_data, global_shape) -> Array:
    sharding = sharding_impls.canonicalize(sharding, "make_array_from_process_local_data")
    local = np.asarray(local_data)
    from fluxion._src.api import process_count
    if process_count() == 1:
        if global_shape is not None and tuple(global_shape) != local.shape:
            raise ValueError(f"When calling `make_array_from_process_local_data` on a single "
                             f"process, global_shape should be None or equal to "
                             f"local_data.shape.Got global_shape={tuple(global_shape)} and "
                             f"local_data.shape={local.shape}.")
        return device_put_sharded_value(local, sharding)
    ndim = local.ndim
    if global_shape is None:
        parts = [_process_slices(sharding, d, ndim) for d in range(ndim)]
        global_shape = tuple(None if p is None else n * p for n, p in zip(local.shape, parts))
        if None in global_shape:
            raise ValueError(f"Unable to compute global_shape due to non-uniform sharding. "
                             f"Specify global shape directly. Partially computed "
                             f"global_shape={global_shape}.")
    global_shape = tuple(global_shape)
    if len(global_shape) != ndim:
        raise ValueError(f"make_array_from_process_local_data: global_shape {global_shape} and "
                         f"the local data's shape {local.shape} differ in rank")
    check_divisible(sharding, global_shape, "make_array_from_process_local_data")
    mine = _addressable(sharding, global_shape)
    shard_shape = sharding.shard_shape(global_shape)
    # per dimension: the sorted distinct block starts this process holds
    starts = [sorted({index[d].start or 0 for _, index in mine}) for d in range(ndim)]
    full = [n == g for n, g in zip(local.shape, global_shape)]
    for d in range(ndim):
        if not full[d] and local.shape[d] != len(starts[d]) * shard_shape[d]:
            raise ValueError(f"Invalid host data, each dimension should match either global or "
                             f"process shape. In dimension {d}, the process data has "
                             f"{local.shape[d]} elements. Process addresses "
                             f"{len(starts[d]) * shard_shape[d]} elements and "
                             f"global_shape={global_shape}.")

    def block(index):
        where = []
        for d, sl in enumerate(index):
            if full[d]:
                where.append(sl)
            else:
                k = starts[d].index(sl.start or 0) * shard_shape[d]
                where.append(slice(k, k + shard_shape[d]))
        return local[tuple(where)]

    return make_array_from_callback(global_shape, sharding, block)
