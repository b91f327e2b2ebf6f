"""Compiled executables as bytes (`jax.experimental.serialize_executable`).

`serialize(compiled)` writes what a `Compiled` needs to run without tracing or XLA: the
executable as jaxlib serializes it (the persistent compilation cache's entry format, with its
checksum), the program's StableHLO text, the abstract inputs and outputs, the donation mask
and the program's constants (as `.npy` data, never pickled objects). The pytree structures
come back separately, as in JAX: fluxion's treedefs pickle, so callers may store them too.

Blob layout (integers little-endian)::

    b"FLXEXEC\\0"  uint32 format version  uint64 n  n bytes of JSON metadata
    per constant: uint64 n, n bytes of `.npy`
    the rest: a compilation-cache entry (see compilation_cache.py) holding the executable
"""
from __future__ import annotations

import hashlib
import io
import json
import struct
from types import SimpleNamespace

import numpy as np

from fluxion._src.core import ShapedArray

MAGIC = b"FLXEXEC\0"
VERSION = 1
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


def _unsupported() -> ValueError:
    return ValueError("Compilation does not support serialization")


def _aval_json(a) -> list:
    if not isinstance(a, ShapedArray):
        raise ValueError(f"serialize: an executable taking or returning {a} (not an array) "
                         "cannot be serialized")
    return [list(a.shape), np.dtype(a.dtype).name, bool(a.weak_type)]


def _aval_from_json(x) -> ShapedArray:
    shape, dtype, weak = x
    return ShapedArray(tuple(shape), np.dtype(dtype), weak)


def serialize(compiled):
    """`(bytes, in_tree, out_tree)` for a `Compiled` (`jit(f).lower(...).compile()`).

    Load it again with `deserialize_and_load(bytes, in_tree, out_tree)`, in this process or
    another one with the same jaxlib. Programs with host callbacks and partitioned programs
    cannot be serialized (ValueError).
    """
    from fluxion._src.api import Compiled
    from fluxion._src.compiler import backend, compilation_cache
    from fluxion._src.dispatch import CompiledFunction
    if not isinstance(compiled, Compiled):
        raise TypeError(f"serialize takes a Compiled (jit(f).lower(...).compile()), got "
                        f"{type(compiled).__name__}")
    fn, traced = compiled._compiled, compiled._traced
    if type(fn) is not CompiledFunction or type(fn.executable) is not backend.Executable:
        raise _unsupported()
    exe = fn.executable
    if getattr(exe.text, "host_callbacks", None):
        raise ValueError("Compilation does not support serialization: the program calls back "
                         "into Python (pure_callback, io_callback, debug.print), and Python "
                         "functions are not serialized")
    constvars = traced.jaxpr.jaxpr.constvars
    if len(constvars) != len(fn.const_bufs):
        raise _unsupported()
    from fluxion._src.array import Array
    consts = [np.asarray(Array(b, v.aval)) for b, v in zip(fn.const_bufs, constvars)]
    meta = {
        "name": exe.name,
        "platform": backend.backend_of(exe.device).platform,
        "device_id": int(exe.device.id),
        "pinned": compiled._device is not None,
        "in_avals": [_aval_json(a) for a in fn.in_avals],
        "out_avals": [_aval_json(a) for a in fn.out_avals],
        "const_avals": [_aval_json(v.aval) for v in constvars],
        "donate_mask": None if traced.donate_mask is None else
        [bool(d) for d in traced.donate_mask],
        "text": str(exe.text),
    }
    meta_bytes = json.dumps(meta).encode()
    out = io.BytesIO()
    out.write(MAGIC + _U32.pack(VERSION) + _U64.pack(len(meta_bytes)) + meta_bytes)
    digest = hashlib.sha256(meta_bytes)
    for c in consts:
        f = io.BytesIO()
        np.save(f, np.ascontiguousarray(c), allow_pickle=False)
        data = f.getvalue()
        digest.update(data)
        out.write(_U64.pack(len(data)) + data)
    # jaxlib re-serializes a deserialized CPU executable without its compiled kernels (it
    # then fails with "Function ... not found"), so a loaded one keeps the bytes it came from.
    payload = getattr(compiled, "_executable_bytes", None) or exe.loaded.serialize()
    out.write(compilation_cache.encode_entry(digest.digest(), payload))
    return out.getvalue(), traced.in_tree, traced.out_tree


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = memoryview(data), 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("deserialize_and_load: the serialized executable is truncated")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def u64(self) -> int:
        return _U64.unpack(self.take(8))[0]


def _pick_device(backend, meta, execution_devices):
    if execution_devices is not None:
        devices = list(execution_devices)
        if not devices:
            raise ValueError("execution_devices is empty")
        if devices[0].client is not backend.client:
            raise ValueError("Execution devices belong to a client other than `backend`. Got "
                             f"backend client: {backend.platform} and execution devices "
                             f"client: {devices[0].platform}")
        return devices[0]
    by_id = {d.id: d for d in backend.devices}
    return by_id.get(meta["device_id"], backend.devices[0])


def _backend_for(backend_arg, platform: str):
    from fluxion._src.compiler import backend as _backend
    if backend_arg is None:
        return _backend.get_backend(platform)
    if isinstance(backend_arg, str):
        return _backend.get_backend(backend_arg)
    for b in list(_backend._backends.values()):  # a jaxlib Client
        if b.client is backend_arg:
            return b
    raise TypeError(f"backend must be None, a platform name or a client of fluxion's, got "
                    f"{backend_arg!r}")


def deserialize_and_load(serialized: bytes, in_tree, out_tree, backend=None,
                         execution_devices=None):
    """The `Compiled` that `serialize` wrote as `serialized` (with its `in_tree` and
    `out_tree`), loaded onto `execution_devices[0]` (default: the device it was compiled
    for, or the backend's first device).

    Loading runs no Python from the bytes, but the executable is native code: load only
    bytes you trust.
    """
    from fluxion._src.api import Compiled, Traced
    from fluxion._src.compiler import backend as _backend, compilation_cache
    from fluxion._src.dispatch import CompiledFunction
    r = _Reader(serialized)
    if r.take(8) != MAGIC:
        raise ValueError("deserialize_and_load: not an executable serialized by fluxion")
    version = _U32.unpack(r.take(4))[0]
    if version != VERSION:
        raise ValueError(f"deserialize_and_load: format version {version}, this fluxion reads "
                         f"version {VERSION}")
    meta_bytes = r.take(r.u64())
    meta = json.loads(meta_bytes)
    digest = hashlib.sha256(meta_bytes)
    consts = []
    for aval in meta["const_avals"]:
        data = r.take(r.u64())
        digest.update(data)
        consts.append((np.load(io.BytesIO(data), allow_pickle=False), _aval_from_json(aval)))
    try:
        payload = compilation_cache.decode_entry(digest.digest(), bytes(r.data[r.pos:]))
    except ValueError as e:
        raise ValueError(f"deserialize_and_load: the serialized executable is corrupt: {e}") \
            from None
    b = _backend_for(backend, meta["platform"])
    device = _pick_device(b, meta, execution_devices)
    text = meta["text"]
    _backend.ensure_kernels_for(text)  # LAPACK/cuSOLVER kernels are registered before they run
    xla_client, _ = _backend._jaxlib()
    options = xla_client.CompileOptions()
    if device != b.devices[0]:
        options.device_assignment = xla_client.DeviceAssignment.create(np.array([[device.id]]))
    loaded = b.client.deserialize_executable(payload, xla_client.DeviceList((device,)),
                                             options)
    in_avals = [_aval_from_json(a) for a in meta["in_avals"]]
    out_avals = [_aval_from_json(a) for a in meta["out_avals"]]
    exe = _backend.Executable(loaded, out_avals, device, meta["name"], text)
    const_bufs = [_backend.device_put_numpy(np.asarray(c, a.dtype), a, device)
                  for c, a in consts]
    fn = CompiledFunction(exe, const_bufs, in_avals, out_avals)
    mask = meta["donate_mask"]
    name = meta["name"][4:] if meta["name"].startswith("jit_") else meta["name"]
    # Compiled reads only these of its traced program's jaxpr.
    stub = SimpleNamespace(out_avals=out_avals, jaxpr=SimpleNamespace(
        constvars=[SimpleNamespace(aval=a) for _, a in consts]))
    traced = Traced(stub, in_tree, out_tree, in_avals, name,
                    None if mask is None else tuple(mask))
    # Loaded on a device other than the default one, it runs there (arguments move to it).
    pinned = meta["pinned"] or device != b.devices[0]
    out = Compiled(fn, traced, device if pinned else None)
    out._executable_bytes = payload
    return out
