"""`fluxion.experimental.pallas.tpu` (``pltpu``): TPU memory spaces, compiler parameters,
scalar prefetch, semaphores and DMAs, and small vector ops. There is no TPU kernel compiler:
kernels using them run in interpret mode (sequentially, a DMA completing when it starts)."""
from fluxion._src.pallas.core import SEMAPHORE
from fluxion._src.pallas.core import MemorySpace as _MemorySpace
from fluxion._src.pallas.tpu_core import (
    ARBITRARY, CORE_PARALLEL, PARALLEL, SUBCORE_PARALLEL, CompilerParams,
    GridDimensionSemantics, InterpretParams, PrefetchScalarGridSpec, SemaphoreType, bitcast,
    einshape, is_tpu_device, load, roll, store, touch, with_memory_space_constraint)
from fluxion._src.pallas.tpu_dma import async_copy, make_async_copy, sync_copy

VMEM = _MemorySpace("vmem")
VMEM_SHARED = _MemorySpace("vmem_shared")
SMEM = _MemorySpace("smem")
CMEM = _MemorySpace("cmem")
HBM = _MemorySpace("hbm")


class MemorySpace:
    """The TPU memory spaces (``pltpu.MemorySpace.VMEM``, ...), each callable as
    ``(shape, dtype)`` to make a scratch buffer."""
    VMEM, VMEM_SHARED, SMEM, CMEM, SEMAPHORE, HBM = VMEM, VMEM_SHARED, SMEM, CMEM, SEMAPHORE, HBM


__all__ = ["ARBITRARY", "CMEM", "CORE_PARALLEL", "CompilerParams", "GridDimensionSemantics",
           "HBM", "InterpretParams", "MemorySpace", "PARALLEL", "PrefetchScalarGridSpec",
           "SEMAPHORE", "SMEM", "SUBCORE_PARALLEL", "SemaphoreType", "VMEM", "VMEM_SHARED",
           "async_copy", "bitcast", "einshape", "is_tpu_device", "load", "make_async_copy", "roll", "store",
           "sync_copy", "touch", "with_memory_space_constraint"]
