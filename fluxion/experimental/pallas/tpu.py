"""`fluxion.experimental.pallas.tpu` (``pltpu``): TPU memory spaces, compiler parameters,
scalar prefetch, semaphores and DMAs, and small vector ops. There is no TPU kernel compiler:
kernels using them run in interpret mode (sequentially, a DMA completing when it starts)."""
from fluxion._src.pallas.core import MemorySpace
from fluxion._src.pallas.tpu_core import (
    ARBITRARY, CORE_PARALLEL, PARALLEL, SUBCORE_PARALLEL, CompilerParams,
    GridDimensionSemantics, InterpretParams, PrefetchScalarGridSpec, SemaphoreType, bitcast,
    roll)
from fluxion._src.pallas.tpu_dma import async_copy, make_async_copy, sync_copy

from fluxion._src.pallas.core import SEMAPHORE  # noqa: E402

VMEM = MemorySpace("vmem")
SMEM = MemorySpace("smem")
HBM = MemorySpace("hbm")

__all__ = ["ARBITRARY", "CORE_PARALLEL", "CompilerParams", "GridDimensionSemantics", "HBM",
           "InterpretParams", "PARALLEL", "PrefetchScalarGridSpec", "SEMAPHORE", "SMEM", "SUBCORE_PARALLEL",
           "SemaphoreType", "VMEM", "async_copy", "bitcast", "make_async_copy", "roll",
           "sync_copy"]
