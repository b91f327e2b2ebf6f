"""Helpers shared by the linear-algebra test files: random matrices and tolerances."""
import zlib

import numpy as np


def rng_for(request):
    """A generator seeded by the test's id: a test draws the same matrices whichever tests ran
    before it in its worker process."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def random_matrix(rng, shape, dtype):
    """Standard normal entries (real and imaginary parts for complex dtypes)."""
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def tolerance(dtype, double: float = 1e-11) -> float:
    """Absolute tolerance for results in `dtype`: 1e-4 in single precision, `double` else."""
    return 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else double


def conj_transpose(x):
    """The conjugate transpose of the last two axes."""
    return np.conj(np.swapaxes(x, -1, -2))
