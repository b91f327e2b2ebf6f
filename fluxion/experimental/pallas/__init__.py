"""`fluxion.experimental.pallas` (``pl``): kernels over Refs mapped over a grid (`pallas_call`)."""
from fluxion._src.pallas.core import (  # noqa: F401
    ANY, HOST, BlockDim, Blocked, BoundedSlice, Buffered, CompilerParams, DeviceIdType, Element,
    BlockSpec, CostEstimate, GridSpec, MemorySpace, RevisitMode, ScratchShape, Slice, Squeezed,
    align_to, cdiv, ds, dslice, multiple_of, next_power_of_2, no_block_spec, squeezed,
    strides_from_shape)
from fluxion._src.pallas.kernel_ops import (  # noqa: F401
    broadcast_to, debug_check, debug_print, delay, empty, empty_like, empty_ref_like,
    enable_debug_checks, loop,
    num_programs, program_id, reciprocal, run_scoped, run_state, when, with_scoped)
from fluxion._src.pallas.pallas_call import pallas_call, pallas_call_p  # noqa: F401
from fluxion._src.pallas.tpu_dma import (  # noqa: F401
    semaphore_read, semaphore_signal, semaphore_wait)
