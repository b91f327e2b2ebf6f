"""Linear algebra (`jax.scipy.linalg`)."""
from fluxion._src.scipy.special_matrices import (  # noqa: F401
    block_diag, circulant, companion, convolution_matrix, dft, fiedler, fiedler_companion,
    hadamard, hankel, helmert, hilbert, invhilbert, invpascal, leslie, pascal, toeplitz)
