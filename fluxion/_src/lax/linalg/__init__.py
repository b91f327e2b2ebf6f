"""lax.linalg: primitives with their rules, lowered to LAPACK on CPU and cuSOLVER on CUDA."""
# Importing any part registers every primitive's lowering rules, the GPU ones included.
from fluxion._src.lax.linalg import primitives, ormqr, condensed, cholesky_update  # noqa: F401
from fluxion._src.lax.linalg import cuda  # noqa: F401
