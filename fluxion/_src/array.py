"""Concrete arrays: an immutable array held in a device buffer (JAX's `ArrayImpl`).

The public `fluxion.Array` is the abstract type in basearray.py, which this class, tracers
and key arrays are registered with."""
from __future__ import annotations

import numpy as np

from fluxion._src import basearray, core, dtypes
from fluxion._src.compiler import backend
from fluxion._src.core import ShapedArray
from fluxion._src.config import config
from fluxion._src.sharding_impls import single_device_sharding


class Array:
    """An immutable array on a device. Operators and methods mirror NumPy's and JAX's.

    Arrays are created by fluxion operations, `fluxion.numpy.asarray` or `fluxion.device_put`.
    """

    __slots__ = ("_buf", "aval", "_npy", "__weakref__")
    __array_priority__ = 100

    def __init__(self, buf, aval: ShapedArray):
        self._buf = buf
        self.aval = aval
        self._npy = None

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)
    nbytes = property(lambda self: self.aval.size * self.aval.dtype.itemsize)
    itemsize = property(lambda self: self.aval.dtype.itemsize)

    @property
    def __numpy_dtype__(self) -> np.dtype:
        """NumPy's protocol for `np.dtype(x)`: deprecated for arrays, as in JAX."""
        import warnings
        from fluxion._src.traceback_util import user_stacklevel
        warnings.warn("Implicit conversion of an array to a dtype is deprecated; rather than "
                      "dtype=arr use dtype=arr.dtype. In the future this will result in an "
                      "error.", DeprecationWarning, stacklevel=user_stacklevel())
        return self.dtype

    # ---- host access
    def _value(self) -> np.ndarray:
        if self._npy is None:
            if self._buf.is_deleted():
                raise RuntimeError(f"Array has been deleted with shape={self.aval.str_short()} "
                                   "(for example donated to a jitted function with "
                                   "donate_argnums): it can no longer be used.")
            if config.transfer_guard or config.transfer_guard_device_to_host:
                from fluxion._src import transfer_guard
                transfer_guard.check("device_to_host", f"array of {self.aval.str_short()}")
            if self.aval.dtype == dtypes.float0:  # held as i1 zeros; float0 has no values
                arr = np.zeros(self.aval.shape, dtypes.float0)
            elif self.aval.dtype in dtypes.NARROW_HOST_VIA:
                arr = _narrow_to_numpy(self)
            else:
                arr = backend.to_numpy(self._buf, self.aval.dtype)
            arr.flags.writeable = False
            self._npy = arr
        return self._npy

    def __array__(self, dtype=None, copy=None):
        value = self._value()
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        if copy:
            return value.copy()
        return value

    def item(self, *args):
        return self._value().item(*args)

    def tolist(self):
        return self._value().tolist()

    def tobytes(self, order="C"):
        return self._value().tobytes(order)

    def to_py(self):
        return self._value()

    def __bool__(self):
        core.check_bool_conversion(self)
        return bool(self._value())

    def __int__(self):
        core.check_scalar_conversion(self)
        return int(self._value())

    def __float__(self):
        core.check_scalar_conversion(self)
        return float(self._value())

    def __complex__(self):
        core.check_scalar_conversion(self)
        return complex(self._value())

    def __index__(self):
        core.check_integer_conversion(self.aval)
        return int(self._value())

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self):
        raise TypeError("unhashable type: 'ArrayImpl'")

    def __reduce__(self):
        return (_reconstruct, (np.asarray(self), self.weak_type))

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self._value()[()], spec)
        return format(self._value(), spec)

    def __repr__(self):
        prefix = "Array("
        dtype_text = f"dtype={self.dtype.name}" + (", weak_type=True" if self.weak_type else "")
        line_width = np.get_printoptions()["linewidth"]
        if self.size == 0:
            body = f"[], shape={self.shape}"
        else:
            body = np.array2string(self._value(), prefix=prefix, suffix=",", separator=", ",
                                   max_line_width=line_width)
        last_line_len = len(body) - body.rfind("\n") + 1
        # NumPy's layout, then JAX's quirk: a dtype that would overflow the line is pushed
        # right by the prefix width rather than wrapped.
        sep = " " * len(prefix) if last_line_len + len(dtype_text) + 2 > line_width else " "
        return f"{prefix}{body},{sep}{dtype_text})"

    def __str__(self):
        return str(self._value())

    # ---- device
    def block_until_ready(self) -> "Array":
        self._buf.block_until_ready()
        return self

    @property
    def __cuda_array_interface__(self):
        # Not provided by fluxion; JAX has it for NVidia GPU buffers only and raises this on
        # the others (so hasattr is False).
        raise AttributeError("__cuda_array_interface__ is only defined for NVidia GPU buffers.")

    def is_ready(self) -> bool:
        """Whether the computation that produces the array has finished (does not wait)."""
        return self._buf.is_ready()

    def devices(self) -> set:
        return {self._buf._sharding._device}

    @property
    def committed(self) -> bool:
        """Whether the array is committed to its device (see `fluxion.device_put`):
        computations on it run there rather than on the default device."""
        return self._buf._committed

    @property
    def device(self):
        return next(iter(self.devices()))

    @property
    def sharding(self):
        # jaxlib's ArrayImpl keeps its device in `_sharding` (its public property is defined
        # by the jax package, which fluxion does not import).
        return single_device_sharding(self._buf._sharding._device)

    @property
    def format(self):
        """Its `Format`: the default row-major layout and its sharding."""
        from fluxion._src.layout import Format, default_layout
        return Format(default_layout(self.ndim), self.sharding)

    # A single-device Array is its own only shard (sharded ones: global_array.GlobalArray).
    @property
    def addressable_shards(self) -> list:
        from fluxion._src.global_array import Shard
        return [Shard(self.device, (slice(None),) * self.ndim, 0, self)]

    global_shards = addressable_shards

    def addressable_data(self, index: int) -> "Array":
        """The block on this process's `index`-th device (the array itself here)."""
        return self.addressable_shards[index].data

    is_fully_replicated = property(lambda self: True)
    is_fully_addressable = property(lambda self: True)

    def is_deleted(self) -> bool:
        return self._buf.is_deleted()

    def platform(self) -> str:
        # From the device, not the buffer: jaxlib's crashes on a deleted buffer.
        return self.device.platform

    def clone(self) -> "Array":
        """A new Array object over the same buffer (JAX's `clone`; deleting either deletes
        both). `copy()` makes an independent copy."""
        return type(self)(self._buf.clone(), self.aval)

    @property
    def traceback(self):
        """Where the array was created, if jaxlib recorded it (else None)."""
        return self._buf.traceback

    @property
    def device_buffer(self):
        raise AttributeError("arr.device_buffer has been deprecated. Use arr.addressable_data(0)")

    @property
    def device_buffers(self):
        raise AttributeError("arr.device_buffers has been deprecated. "
                             "Use [x.data for x in arr.addressable_shards]")

    def delete(self) -> None:
        self._buf.delete()
        self._npy = None

    def unsafe_buffer_pointer(self) -> int:
        """The address of the device buffer (valid while the array lives)."""
        return self._buf.unsafe_buffer_pointer()

    def on_device_size_in_bytes(self) -> int:
        """The bytes the buffer occupies on its device."""
        return self._buf.on_device_size_in_bytes()

    def copy_to_host_async(self) -> None:
        self._buf._copy_single_device_array_to_host_async()

    def __dlpack__(self, *args, **kwargs):
        return np.asarray(self).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return np.asarray(self).__dlpack_device__()


basearray.Array.register(Array)


def _reconstruct(value, weak_type):
    return make_array(value, weak_type=weak_type)


def make_array(value, dtype=None, weak_type: bool = False, device=None,
               committed: bool = False) -> Array:
    """Copy a host value to `device` (default: the default device) as an Array of its
    canonical dtype, committed to it if `committed`."""
    arr = backend.canonical_numpy(value, dtype)
    aval = ShapedArray(arr.shape, arr.dtype, weak_type)
    out = Array(backend.device_put_numpy(arr, aval, device, committed), aval)
    if not arr.flags.writeable or arr.base is not None or arr is not value:
        out._npy = arr  # a private host copy: keep it, so reading back needs no transfer
    return out


_scalar_cache: dict = {}
_shared_ids: set = set()  # id() of the Arrays in _scalar_cache


def scalar_array(value: np.ndarray, weak_type: bool, device=None) -> Array:
    """An uncommitted device Array for a rank-0 host value of a canonical dtype on `device`
    (default: the default device), cached: arrays are immutable, and Python scalars recur
    (constants in operators, hyperparameters to jit). Donation must not consume a cached
    Array: see `unshared`."""
    if device is None and config.default_device is not None:
        device = backend.default_device()
    key = (value.dtype, weak_type, value.tobytes(), device)  # bytes tell -0.0 from 0.0
    cached = _scalar_cache.get(key)
    if cached is None:
        if len(_scalar_cache) > 4096:
            _scalar_cache.clear()
            _shared_ids.clear()
        cached = _scalar_cache[key] = make_array(value, weak_type=weak_type, device=device)
        _shared_ids.add(id(cached))
    return cached


def duplicate(x: Array) -> Array:
    """`x` in a buffer of its own: donating or deleting one leaves the other (a copy)."""
    return Array(backend.duplicate(x._buf), x.aval)


def unshared(x, aval: ShapedArray):
    """`x` (an argument of type `aval` about to be donated) as an Array that no cache holds:
    a cached scalar Array is copied, and a host value gets a buffer of its own."""
    if type(x) is Array:
        if id(x) not in _shared_ids:
            return x
        return make_array(x._value(), weak_type=aval.weak_type, device=x.device)
    if isinstance(x, (core.Tracer, Array)):  # a Tracer, or an Array over several devices
        return x
    return Array(backend.device_put_numpy(np.asarray(x, dtype=aval.dtype), aval), aval)


core.register_aval_handler(Array, lambda x: x.aval)

# JAX's concrete array type is `ArrayImpl`; messages that name the type (`unsupported operand
# type(s) for +: 'ArrayImpl' and 'dict'`) and `type(x)` read the same here.
Array.__name__ = Array.__qualname__ = "ArrayImpl"
ArrayImpl = Array


def _narrow_to_numpy(x: "Array") -> np.ndarray:
    """A host copy of an Array of a narrow ml_dtypes type, which DLPack cannot carry: XLA
    converts it exactly to a wider type, and NumPy converts that back."""
    from fluxion._src.lax import lax
    # Eagerly, even while a trace asks for this value (as a constant of the traced function).
    with core.set_current_trace(core.eval_trace):
        wide = lax._convert_element_type(x, dtypes.NARROW_HOST_VIA[x.aval.dtype], False)
    return np.asarray(wide).astype(x.aval.dtype)
