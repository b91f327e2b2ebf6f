"""Runtime names at fluxion's top level: `Device`, `Shard`, `copy_to_host_async`."""
from __future__ import annotations

import dataclasses

from fluxion._src.compiler import backend
from fluxion._src.global_array import Shard  # noqa: F401
from fluxion._src.tree_util import tree_leaves

# The class of jaxlib's devices (what `fluxion.devices()` returns).
Device = backend._jaxlib()[1].Device


def copy_to_host_async(x):
    """Start copying every Array leaf of the pytree `x` to the host; returns `x`.

    Leaves without a `copy_to_host_async` method are left alone."""
    for leaf in tree_leaves(x):
        try:
            copy = leaf.copy_to_host_async
        except AttributeError:
            continue
        copy()
    return x


@dataclasses.dataclass(frozen=True, slots=True)
class AbstractDevice:
    """A device described by its kind, core count and platform, without a concrete device
    (JAX's `jax.sharding.AbstractDevice`)."""

    device_kind: str
    num_cores: int | None
    platform: str

    def __repr__(self):
        return (f"AbstractDevice(device_kind={self.device_kind}, num_cores={self.num_cores}, "
                f"platform={self.platform})")
