"""Exporting jitted functions as portable StableHLO artifacts (`jax.export`)."""
from fluxion._src.export.exported import (  # noqa: F401
    Exported, export, default_export_platform, call_exported_p,
    CALLING_CONVENTION_VERSION as maximum_supported_calling_convention_version)

minimum_supported_calling_convention_version = 9
from fluxion._src.export.serialization import deserialize  # noqa: F401
from fluxion._src.export.registrations import (  # noqa: F401
    DisabledSafetyCheck, register_pytree_node_serialization, register_namedtuple_serialization)
from fluxion._src.export.shape_poly import (  # noqa: F401
    symbolic_shape, symbolic_args_specs, SymbolicScope, DimExpr,
    InconclusiveDimensionOperation, is_symbolic_dim)
