"""Memory spaces (`jax.memory.Space`): where on a device an array lives.

JAX's `Space.Device` and `Space.Host` name the memory kinds "device" and "pinned_host";
`Space.Any` lets a kernel (Pallas) accept either. fluxion keeps every array in its device's
default memory (see docs/differences.md), so `device_put(x, Space.Host)` places `x` as
`device_put(x)` does.
"""
from __future__ import annotations

import enum


class MemorySpace(enum.Enum):
    """A memory space: `Device`, `Host` (pinned host memory) or `Any`."""
    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()

    def __repr__(self):
        return f"MemorySpace.{self.name}"

    # Enum hashes the member's name; members are singletons, so identity is enough.
    __hash__ = object.__hash__


Space = MemorySpace


def space_to_kind(space: MemorySpace) -> str:
    """The memory kind string of `Device` or `Host`."""
    if space is MemorySpace.Device:
        return "device"
    if space is MemorySpace.Host:
        return "pinned_host"
    raise ValueError(f"{space!r} has no memory kind: only Device and Host spaces can hold arrays")
