"""`sparsify` (`jax.experimental.sparse.transform`)."""
from fluxion._src.sparse.transform import sparsify as sparsify  # noqa: F401
