"""Foreign function interface (`jax.ffi`): call compiled handlers registered with XLA."""
from fluxion._src.ffi import (  # noqa: F401
    build_ffi_lowering_function,
    ffi_call,
    ffi_lowering,
    include_dir,
    pycapsule,
    register_ffi_target,
    register_ffi_target_as_batch_partitionable,
    register_ffi_type,
    register_ffi_type_id,
)

__all__ = ["build_ffi_lowering_function", "ffi_call", "ffi_lowering", "include_dir",
           "pycapsule", "register_ffi_target", "register_ffi_target_as_batch_partitionable",
           "register_ffi_type", "register_ffi_type_id"]
