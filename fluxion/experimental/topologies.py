"""`fluxion.experimental.topologies` (as `jax.experimental.topologies`)."""
from fluxion._src.topologies import (  # noqa: F401
    Device, TopologyDescription, get_attached_topology, get_topology_desc, make_mesh)
