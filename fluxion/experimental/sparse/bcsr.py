"""The BCSR format (`jax.experimental.sparse.bcsr`): the array class and its operations."""
from fluxion._src.sparse.bcsr import (  # noqa: F401
    BCSR as BCSR,
    bcsr_dot_general as bcsr_dot_general,
    bcsr_fromdense as bcsr_fromdense,
    bcsr_todense as bcsr_todense,
)
