"""Computation follows data: which device a computation runs on, and moving arguments there.

An Array is *committed* to its device when the user put it there (`device_put(x, device)` or
a SingleDeviceSharding, a creation function's `device=`, `jit(device=...)`); the results of a
computation with a committed argument are committed too. Everything else is *uncommitted*:
created on the default device (`fluxion.default_device`, the `jax_default_device` flag, else
the backend's first device), and free to move. A computation runs on the device of its
committed arguments, which must agree, else on the default device; uncommitted arguments
elsewhere are copied there first, so XLA never sees a buffer on the wrong device.

Until something is committed, placed off the first device, or the default device is set,
every Array is uncommitted on the first device: dispatch then skips this module and runs its
executables directly (`dispatch.placing` is False, its one check per call).
"""
from __future__ import annotations

from fluxion._src.array import Array
from fluxion._src.compiler import backend
from fluxion._src.config import config

active = False
# Called once placement turns active: caches of direct executions (which skip the placement
# check) empty themselves.
on_activate: list = []


def activate() -> None:
    """Switch dispatch to placement-aware execution (for good: placed arrays may live on)."""
    global active
    if not active:
        active = True
        import sys
        dispatch = sys.modules.get("fluxion._src.dispatch")
        if dispatch is not None:  # else it reads `active` when it is imported
            dispatch.placing = True
        for hook in on_activate:
            hook()


# The default device and its sharding, while the flag does not change (reset by _on_config).
# `default_sharding` alone is what dispatch's fast paths compare buffers' `_sharding` with:
# a buffer with that very object is uncommitted on the default device.
_default = None
default_sharding = None
_shardings: dict = {}  # device -> the sharding of uncommitted buffers fluxion makes there


def _on_config(name, value) -> None:
    global _default, default_sharding
    if name == "default_device":
        _default = default_sharding = None
        if value is not None:
            activate()


config._listeners.append(_on_config)
if config.default_device is not None:  # set in the environment
    activate()


def sharding_of(device):
    s = _shardings.get(device)
    if s is None:
        s = _shardings[device] = backend.backend_of(device).sharding(device)
    return s


def default_target() -> tuple:
    """(the default device, its sharding)."""
    global _default, default_sharding
    if _default is None:
        device = backend.default_device()
        _default = (device, sharding_of(device))
        default_sharding = _default[1]
    return _default


def place(args, in_avals, device=None, describe=None) -> tuple:
    """`(buffers, device, committed)` for running a computation on `args`.

    The device is `device` if given (everything moves there, as `jit(device=...)` does),
    else that of the committed Array arguments, else the default device. `committed` says
    whether the results are committed. Committed arguments on different devices raise
    ValueError naming them (`describe()` gives the function's name and the arguments')."""
    bufs = []
    committed = device is not None
    for x, aval in zip(args, in_avals):
        if type(x) is Array:
            buf = x._buf
            if buf._committed:
                committed = True
        else:
            buf = None  # converted once the device is known
        bufs.append(buf)
    if device is not None:
        target, sharding = device, sharding_of(device)
    elif committed:
        target = committed_device(args, in_avals, describe)
        sharding = sharding_of(target)
    else:
        target, sharding = default_target()
    for i, buf in enumerate(bufs):
        if buf is None:
            from fluxion._src.dispatch import to_device_buffer
            buf = bufs[i] = to_device_buffer(args[i], in_avals[i], target)
        s = buf._sharding
        if s is not sharding and s._device != target:
            bufs[i] = move(buf, target, in_avals[i])
    return bufs, target, committed


def committed_device(args, in_avals=None, describe=None):
    """The device of the committed Arrays among `args` (None if there is none); ValueError
    if they are on different devices."""
    target = first = None
    for i, x in enumerate(args):
        if type(x) is Array:
            buf = x._buf
            if buf._committed:
                d = buf._sharding._device
                if target is None:
                    target, first = d, i
                elif d != target:
                    if in_avals is None:
                        in_avals = [getattr(a, "aval", None) for a in args]
                    raise incompatible_devices_error(args, in_avals, first, i, describe)
    return target


# Copies of rank-0 buffers on other devices, by (id of the source, device): the cached
# scalar constants of operators (`x + 1`) would otherwise be copied at every call. Each
# entry holds its source, so the id stays valid.
_scalar_copies: dict = {}


def move(buf, device, aval=None):
    """`buf` copied to `device` (rank-0 copies are cached)."""
    if aval is None or getattr(aval, "shape", None) != ():
        return backend.copy_to_device(buf, device)
    key = (id(buf), device)
    hit = _scalar_copies.get(key)
    if hit is not None and hit[0] is buf and not hit[1].is_deleted():
        return hit[1]
    out = backend.copy_to_device(buf, device)
    if len(_scalar_copies) >= 1024:
        _scalar_copies.clear()
    _scalar_copies[key] = (buf, out)
    return out


def _device_text(device) -> str:
    return f"device ids [{device.id}] on platform {device.platform.upper()}"


def incompatible_devices_error(args, in_avals, i: int, j: int, describe=None) -> ValueError:
    """JAX's error for committed arguments `i` and `j` on different devices."""
    fun, names = describe() if describe is not None else ("computation", None)
    parts = []
    for k in (i, j):
        name = names[k] if names is not None and k < len(names) else f"args[{k}]"
        shape = in_avals[k].str_short(short_dtypes=False)
        parts.append(f"argument {name} of {fun} with shape {shape} and with "
                     f"{_device_text(args[k]._buf._sharding._device)}")
    return ValueError("Received incompatible devices for jitted computation. Got "
                      + " and ".join(parts))


def commit(x: Array, device) -> Array:
    """`x` committed to `device` (moved there if it lives elsewhere)."""
    activate()
    buf = backend.committed_copy(backend.copy_to_device(x._buf, device))
    if buf is x._buf:
        return x
    out = Array(buf, x.aval)
    out._npy = x._npy
    return out


def to_default_device(x: Array) -> Array:
    """An uncommitted Array `x` copied to the default device, as a computation on it would
    leave it (committed ones, and those already there, are returned as they are)."""
    buf = x._buf
    if buf._committed:
        return x
    target = backend.default_device()
    if buf._sharding._device == target:
        return x
    return Array(move(buf, target, x.aval), x.aval)


def like_sharding(x, shape, weak_type: bool):
    """The sharding a `*_like` creation (`lax.full_like`, `jnp.zeros_like`, ...) takes from
    its example `x`, as JAX's `full_like` chooses it: `x`'s own when `x` is a concrete array
    (or a duck-typed one with a sharding) committed to its devices, the result is not weakly
    typed, and the result has `x`'s shape or `x` is replicated; else None (the default
    device, uncommitted)."""
    from fluxion._src import core
    if weak_type or isinstance(x, core.Tracer) or not getattr(x, "committed", True):
        return None
    sharding = getattr(x, "sharding", None)
    if sharding is None:
        return None
    if tuple(shape) != tuple(x.shape) and not sharding.is_fully_replicated:
        return None
    return sharding


def place_like(out, x, weak_type: bool):
    """`out`, a freshly made concrete array, put where `like_sharding` says (a traced `out`
    is left to the enclosing computation, as JAX ignores the sharding under `jit`)."""
    from fluxion._src import core
    if isinstance(out, core.Tracer):
        return out
    sharding = like_sharding(x, out.shape, weak_type)
    if sharding is None:
        return out
    from fluxion._src.api import device_put
    return device_put(out, sharding)
