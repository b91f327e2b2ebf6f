"""`fluxion.experimental.pallas.tpu` (``pltpu``): the TPU memory spaces, for scratch buffers
(``pltpu.VMEM((8, 128), jnp.float32)``) and block specs. There is no TPU kernel compiler:
kernels using them run in interpret mode."""
from fluxion._src.pallas.core import MemorySpace

VMEM = MemorySpace("vmem")
SMEM = MemorySpace("smem")
HBM = MemorySpace("hbm")

__all__ = ["HBM", "SMEM", "VMEM"]
