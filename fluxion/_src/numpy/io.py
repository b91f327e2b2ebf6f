"""Reading, writing and converting arrays in fluxion.numpy: NumPy's .npy/.npz files (never
pickled), from* constructors, DLPack, printing options, and scalar/complex predicates."""
from __future__ import annotations

import os

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.array import Array
from fluxion._src.lax import lax
from fluxion._src.numpy import creation, ufuncs, util

# Printing goes through NumPy, so NumPy's options and formatters apply.
array_repr = np.array_repr
array_str = np.array_str
get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
printoptions = np.printoptions
iterable = np.iterable

_NO_PICKLE = ("fluxion.numpy never unpickles or pickles: object arrays cannot be loaded or "
              "saved (allow_pickle must be False)")


def _refuse_pickle(kwargs) -> None:
    if kwargs.pop("allow_pickle", False):
        raise ValueError(_NO_PICKLE)


_NPY_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}


def _npy_data_size(fp) -> tuple[tuple, np.dtype, int] | None:
    """(shape, dtype, bytes of data declared) from a .npy header at `fp`'s position, or None
    where the header is not one checked here (NumPy's own reading reports its errors)."""
    if fp.read(6) != b"\x93NUMPY":
        return None
    fp.seek(-6, 1)
    try:
        reader = _NPY_HEADER_READERS.get(np.lib.format.read_magic(fp))
        if reader is None:
            return None
        shape, _, dtype = reader(fp)
    except (ValueError, EOFError, TypeError, SyntaxError):
        return None
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"The .npy header declares the shape {shape}, which has a negative "
                         "or non-integer dimension")
    count = 1
    for d in shape:
        count *= d
    return shape, dtype, count * dtype.itemsize


def _check_held(found, held: int) -> None:
    if found is None or found[1].hasobject:
        return
    shape, dtype, need = found
    if need > held:
        raise ValueError(f"The .npy file is truncated or its header is wrong: the header "
                         f"declares an array of shape {shape} and dtype {dtype} ({need} bytes "
                         f"of data), but the file holds {held} bytes after the header")


class _CheckedNpzFile(np.lib.npyio.NpzFile):
    """NumPy's NpzFile whose members' sizes are checked against their headers when read."""

    def __getitem__(self, key):
        name = self._files.get(key) if isinstance(getattr(self, "_files", None), dict) else None
        if name is not None:
            with self.zip.open(name) as member:
                found = _npy_data_size(member)
                if found is not None:
                    _check_held(found, self.zip.getinfo(name).file_size - member.tell())
        return super().__getitem__(key)


def _check_npy_size(file) -> None:
    """A .npy file's data must be as long as its header declares: checked before NumPy
    allocates the array, so a truncated file or a lying header is a clear ValueError."""
    if isinstance(file, (str, bytes)) or hasattr(file, "__fspath__"):
        with open(file, "rb") as fp:
            found = _npy_data_size(fp)
            held = os.fstat(fp.fileno()).st_size - fp.tell()
    elif hasattr(file, "seek") and hasattr(file, "tell") and getattr(file, "seekable",
                                                                     lambda: True)():
        start = file.tell()
        try:
            found = _npy_data_size(file)
            here = file.tell()
            held = file.seek(0, 2) - here
        finally:
            file.seek(start)
    else:
        return
    _check_held(found, held)


def load(file, *args, **kwargs):
    """Read arrays from a .npy or .npz file with numpy.load (allow_pickle is always False).

    A .npy file gives an Array (bfloat16 data, which NumPy stores as 2-byte voids, is restored);
    a .npz file gives NumPy's lazy NpzFile mapping. Nothing is unpickled; an array whose data
    is shorter than its header declares (a .npy file or a .npz member) raises ValueError before
    anything is allocated."""
    _refuse_pickle(kwargs)
    _check_npy_size(file)
    out = np.load(file, *args, allow_pickle=False, **kwargs)
    if type(out) is np.lib.npyio.NpzFile:
        out.__class__ = _CheckedNpzFile
    if isinstance(out, np.ndarray):
        if out.dtype == np.dtype("V2"):
            out = out.view(dtypes.bfloat16)
        try:
            out = creation.asarray(out)
        except (TypeError, AssertionError):  # a dtype fluxion has no arrays of
            pass
    return out


def _host_array(arr) -> np.ndarray:
    out = np.asarray(arr)
    if out.dtype == object:
        raise ValueError(_NO_PICKLE)
    return out


def save(file, arr, allow_pickle: bool = False):
    """Write one array to a .npy file with numpy.save (never pickled)."""
    if allow_pickle:
        raise ValueError(_NO_PICKLE)
    return np.save(file, _host_array(arr), allow_pickle=False)


def savez(file, *args, allow_pickle: bool = False, **kwds):
    """Write several arrays to an uncompressed .npz file with numpy.savez (never pickled)."""
    if allow_pickle:
        raise ValueError(_NO_PICKLE)
    return np.savez(file, *(_host_array(a) for a in args),
                    **{k: _host_array(v) for k, v in kwds.items()})


def frombuffer(buffer, dtype=float, count: int = -1, offset: int = 0):
    """An array from the bytes of `buffer` (see numpy.frombuffer)."""
    return creation.asarray(np.frombuffer(buffer=buffer, dtype=dtype, count=count,
                                          offset=offset))


def fromstring(string: str, dtype=float, count: int = -1, *, sep: str):
    """An array from the numbers in text `string` separated by `sep`."""
    return creation.asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromfile(*args, **kwargs):
    """Not provided: reading a file is a side effect (use jnp.asarray(np.fromfile(...)))."""
    raise NotImplementedError(
        "jnp.fromfile() is not implemented because it may be non-pure and thus unsafe for use "
        "with JIT and other JAX transformations. Consider using jnp.asarray(np.fromfile(...)) "
        "instead, although care should be taken if np.fromfile is used within a jax "
        "transformations because of its potential side-effect of consuming the file object.")


def fromiter(*args, **kwargs):
    """Not provided: consuming an iterator is a side effect (use jnp.asarray(np.fromiter(...)))."""
    raise NotImplementedError(
        "jnp.fromiter() is not implemented because it may be non-pure and thus unsafe for use "
        "with JIT and other JAX transformations. Consider using jnp.asarray(np.fromiter(...)) "
        "instead, although care should be taken if np.fromiter is used within a jax "
        "transformations because of its potential side-effect of consuming the iterable object.")


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """function(*index_grids) over an array of `shape`, evaluated once with vmap."""
    from fluxion._src.vmap import vmap
    shape = util.canonicalize_shape(shape, "shape argument of jnp.fromfunction()")
    for i in range(len(shape)):
        in_axes = [0 if i == j else None for j in range(len(shape))]
        function = vmap(function, in_axes=tuple(in_axes[::-1]))
    return function(*(creation.arange(s, dtype=dtype) for s in shape), **kwargs)


def from_dlpack(x, /, *, device=None, copy=None):
    """An Array from any object with __dlpack__ (NumPy arrays, fluxion Arrays, torch tensors on
    CPU, ...). The data are copied into a new device buffer."""
    if device is not None:
        from fluxion._src.api import device_put
        return device_put(from_dlpack(x, copy=copy), device)
    if isinstance(x, Array):
        return x
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack requires an object with __dlpack__ and "
                        f"__dlpack_device__ methods, got {type(x)}")
    if copy is False:
        raise ValueError("Specified copy=False for an input which requires a copy: "
                         "fluxion.numpy.from_dlpack always copies into a device buffer")
    return creation.asarray(np.from_dlpack(x))


def isscalar(element) -> bool:
    """True for Python and NumPy scalars and for 0-d arrays (NumPy says False for those)."""
    if np.isscalar(element):
        return True
    if isinstance(element, (np.ndarray, Array, core.Tracer)):
        return element.ndim == 0
    if getattr(element, "__jax_array__", None) is not None:
        return core.get_aval(creation.asarray(element)).ndim == 0
    return False


def iscomplex(x):
    """Elementwise: is the imaginary part nonzero."""
    i = ufuncs.imag(x)
    return lax.ne(i, util.lax_const(i, 0))


def isreal(x):
    """Elementwise: is the imaginary part zero."""
    i = ufuncs.imag(x)
    return lax.eq(i, util.lax_const(i, 0))


def iscomplexobj(x) -> bool:
    """True if x has a complex dtype (whatever its values)."""
    if isinstance(x, (complex, np.complexfloating)):
        return True
    if x is None or isinstance(x, (bool, int, float, str, np.generic)):
        return False
    try:
        typ = x.dtype.type
    except AttributeError:
        typ = core.get_aval(creation.asarray(x)).dtype.type
    return issubclass(typ, np.complexfloating)


def isrealobj(x) -> bool:
    """True unless x has a complex dtype."""
    return not iscomplexobj(x)
