"""`fluxion.experimental.pallas` (``pl``): kernels over Refs mapped over a grid (`pallas_call`)."""
from fluxion._src.pallas.core import (  # noqa: F401
    ANY, Blocked, BoundedSlice, Element, BlockSpec, CostEstimate, GridSpec, MemorySpace, ScratchShape, Slice,
    cdiv, ds, dslice, multiple_of, squeezed)
from fluxion._src.pallas.kernel_ops import (  # noqa: F401
    broadcast_to, debug_print, empty, empty_like, loop, num_programs, program_id, run_scoped,
    run_state, when)
from fluxion._src.pallas.pallas_call import pallas_call, pallas_call_p  # noqa: F401
