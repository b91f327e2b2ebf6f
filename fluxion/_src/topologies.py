"""Device topologies (`jax.experimental.topologies`): the attached devices, and meshes of them.

Compile-only topologies (`get_topology_desc`) exist in XLA only for TPUs and GPUs; on CPU JAX
raises NotImplementedError, and so does fluxion, for every platform (it has no TPU/GPU
compile-only clients)."""
from __future__ import annotations

from collections.abc import Sequence

from fluxion._src.runtime_names import Device  # noqa: F401


class TopologyDescription:
    """The devices of a topology."""

    def __init__(self, devices: list):
        self.devices: list = devices


def get_attached_topology(platform=None) -> TopologyDescription:
    """The topology of the devices of `platform` (default: the default backend's)."""
    from fluxion._src.api import devices
    return TopologyDescription(devices(platform))


def get_topology_desc(topology_name: str = "", platform: str | None = None,
                      **kwargs) -> TopologyDescription:
    """A compile-only topology named `topology_name` of `platform` (not available in
    fluxion: raises as JAX does where XLA has no such topology)."""
    if platform == "tpu" or platform is None:
        raise RuntimeError("JAX TPU support not installed; cannot generate TPU topology. See "
                           "https://github.com/jax-ml/jax#installation")
    raise NotImplementedError(f"topology not implemented for {platform}")


def make_mesh(topo: TopologyDescription, mesh_shape: Sequence[int], axis_names: tuple,
              *, contiguous_submeshes: bool = False):
    """A `Mesh` of shape `mesh_shape` over the devices of `topo`."""
    from fluxion._src.mesh import Mesh
    from fluxion._src.mesh_utils import create_device_mesh
    devices = create_device_mesh(mesh_shape, list(topo.devices),
                                 contiguous_submeshes=contiguous_submeshes)
    return Mesh(devices, axis_names)
