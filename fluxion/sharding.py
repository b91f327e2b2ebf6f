"""Meshes and partition specs (the part of `jax.sharding` fluxion has so far)."""
from fluxion._src.mesh import Mesh, PartitionSpec  # noqa: F401
