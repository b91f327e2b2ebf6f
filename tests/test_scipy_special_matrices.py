"""The special matrices of scipy.linalg against SciPy."""
import numpy as np
import pytest
import scipy.linalg as sl

import fluxion
import fluxion.scipy.linalg as fl

C = np.array([1.0, 2.5, -3.0, 4.0])
R = np.array([9.0, -1.0, 0.5])
CASES = [
    ("toeplitz", (C,)), ("toeplitz", (C, R)), ("toeplitz", (C + 1j * C[::-1],)),
    ("hankel", (C,)), ("hankel", (C, R)), ("circulant", (C,)), ("companion", (C,)),
    ("block_diag", (np.ones((2, 2)), np.arange(3.0)[None], 5.0)), ("fiedler", (C,)),
    ("fiedler_companion", (np.arange(1.0, 8.0),)), ("leslie", (C, R)),
    ("convolution_matrix", (C, 3, "full")), ("convolution_matrix", (C, 6, "same")),
    ("convolution_matrix", (C, 2, "valid")), ("convolution_matrix", (C[:2], 5, "same")),
    ("hadamard", (8,)), ("helmert", (5,)), ("helmert", (4, True)), ("hilbert", (5,)),
    ("invhilbert", (6,)), ("pascal", (5,)), ("pascal", (4, "lower")), ("pascal", (4, "upper")),
    ("invpascal", (5,)), ("invpascal", (4, "upper")), ("dft", (5,)), ("dft", (4, "sqrtn")),
]


@pytest.mark.parametrize("name,args", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_matches_scipy(name, args, x64):
    got = getattr(fl, name)(*args)
    want = getattr(sl, name)(*args)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_batched_toeplitz_and_circulant_and_jit():
    cs = np.stack([C, C[::-1]])
    np.testing.assert_allclose(fl.toeplitz(cs), np.stack([sl.toeplitz(c) for c in cs]))
    np.testing.assert_allclose(fl.circulant(cs), np.stack([sl.circulant(c) for c in cs]))
    np.testing.assert_allclose(fluxion.jit(fl.toeplitz)(C, R), sl.toeplitz(C, R))
    g = fluxion.grad(lambda c: fl.toeplitz(c).sum())(C)
    # c[0] fills the diagonal (4 entries); c[k], k > 0, sits 4 - k times below the diagonal
    # and, as r[k] = c[k], 4 - k times above it.
    np.testing.assert_allclose(g, [4, 6, 4, 2])
    with pytest.raises(ValueError):
        fl.hadamard(6)
    with pytest.raises(ValueError, match="kind"):
        fl.pascal(3, "diagonal")


@pytest.mark.parametrize("kind", [None, "lower", "upper"])
def test_pascal_is_float32_even_under_x64(kind, x64):
    # JAX builds pascal in float32 regardless of jax_enable_x64.
    assert fl.pascal(4, kind).dtype == np.float32
