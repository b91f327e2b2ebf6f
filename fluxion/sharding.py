"""Meshes, partition specs and shardings (`jax.sharding`)."""
from fluxion._src.mesh import (Mesh, AbstractMesh, PartitionSpec, AxisType, get_mesh,  # noqa: F401
                               set_mesh, use_mesh, use_abstract_mesh)
from fluxion._src.sharding_impls import (Sharding, NamedSharding,  # noqa: F401
                                         SingleDeviceSharding, make_single_device_sharding,
                                         get_abstract_mesh, auto_axes, explicit_axes)
from fluxion._src.sharded_jit import reshard  # noqa: F401
from fluxion._src.runtime_names import AbstractDevice  # noqa: E402,F401
from fluxion._src.smap import Infer  # noqa: E402,F401
from fluxion._src.sharding_types import ShardingTypeError  # noqa: F401
from fluxion._src.shard_map_vma import ManualAxisType  # noqa: E402,F401
