"""`fluxion.experimental.pallas` (``pl``): a Pallas-style kernel language, emulated on the CPU."""
from fluxion._src.pallas.emulation import (  # noqa: F401
    ANY, BlockRef, Blocked, Element, BlockSpec, CostEstimate, GridSpec, MemorySpace, ScratchShape, Slice,
    broadcast_to, cdiv, debug_print, ds, dslice, empty, empty_like, loop, multiple_of,
    num_programs, pallas_call, program_id, run_scoped, run_state, squeezed, when)
