"""fluxion.numpy set operations against jax.numpy (values, dtypes, errors) and NumPy."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion.errors import ConcretizationTypeError

from _jnp_oracle_a import agree, jit_agrees, vmap_agrees

F = np.array([3, 1, 1, 2, 5, 3, np.nan, np.nan], np.float32)
I = np.array([3, 1, 1, 2, 5, 3, 7, 0], np.int32)
M = np.array([[1, 2], [3, 4], [1, 2]], np.int16)
ALL = dict(return_index=True, return_inverse=True, return_counts=True)


@pytest.mark.parametrize("x64", [False, True])
def test_unique_matches_jax(x64):
    for x in ((F, I) if x64 else (F.astype(np.float16), I.astype(np.uint8),
                                  np.array([True, False, True]),
                                  np.array([1 + 1j, 1, 1 + 1j], np.complex64))):
        agree("unique", x, x64=x64, **ALL)
        agree("unique", x, x64=x64, size=9, **ALL)
    agree("unique", I, x64=x64, size=2, fill_value=9, return_counts=True)
    agree("unique", F, equal_nan=False, return_counts=True, x64=x64)
    agree("unique", M, axis=0, x64=x64, **ALL)
    agree("unique", M, axis=1, return_inverse=True, x64=x64)
    agree("unique", M.reshape(2, 3), return_inverse=True, x64=x64)  # inverse keeps x's shape
    agree("unique", np.zeros(0, np.float32), x64=x64, **ALL)
    agree("unique", np.zeros(0, np.float32), size=3, x64=x64)  # ValueError: needs fill_value
    agree("unique", 3.0, x64=x64)


@pytest.mark.parametrize("shape,axis", [((0, 2), 0), ((3, 0, 2), 1), ((2, 0), 0), ((2, 0), 1),
                                        ((0,), None)])
def test_unique_of_empty_and_zero_width_slices(shape, axis):
    # rows of zero width are all equal: one of them is kept (it was all of them, or a
    # reshape error when the unique axis itself was empty)
    agree("unique", np.zeros(shape, np.float32), axis=axis, return_index=True,
          return_inverse=True, return_counts=True)


def test_unique_values_match_numpy():
    values, index, inverse, counts = fnp.unique(I, **ALL)
    e_values, e_index, e_inverse, e_counts = np.unique(I, **ALL)
    for a, e in ((values, e_values), (index, e_index), (inverse, e_inverse), (counts, e_counts)):
        np.testing.assert_array_equal(np.asarray(a), e)


@pytest.mark.parametrize("name", ["unique_all", "unique_counts", "unique_inverse",
                                  "unique_values"])
def test_array_api_unique(name):
    agree(name, M)
    agree(name, F, size=10)
    result = getattr(fnp, name)(M)
    if name != "unique_values":
        assert type(result).__name__.startswith("_Unique") and hasattr(result, "values")


def test_unique_needs_size_under_jit():
    with pytest.raises(ConcretizationTypeError):
        fluxion.jit(fnp.unique)(I)
    jit_agrees(lambda x: fnp.unique(x, size=8, fill_value=-1, **ALL), I)
    vmap_agrees(lambda x: fnp.unique(x, size=4, return_counts=True), I.reshape(2, 4))


A = np.array([1, 2, 2, 5, 7])
B = np.array([2, 5, 5, 9, 0, 1.5])


@pytest.mark.parametrize("name", ["union1d", "setdiff1d", "setxor1d", "intersect1d"])
def test_binary_set_ops(name):
    np_fn = getattr(np, name)
    np.testing.assert_array_equal(np.asarray(getattr(fnp, name)(A, B)), np_fn(A, B))
    agree(name, A, B, x64=True)
    agree(name, A, B, size=7)
    agree(name, A, B, size=2, fill_value=-1)
    agree(name, np.array([], np.int32), A)
    agree(name, A.astype(np.uint8), B.astype(np.int8))
    agree(name, np.array([1, 3, 4]), np.array([4, 1, 0]), assume_unique=True) \
        if name != "union1d" else None
    with pytest.raises(ConcretizationTypeError):
        fluxion.jit(getattr(fnp, name))(A, B)
    jit_agrees(lambda a, b: getattr(fnp, name)(a, b, size=6), A, B)


def test_intersect1d_indices():
    agree("intersect1d", A, B, return_indices=True)
    agree("intersect1d", A, B, return_indices=True, size=4)
    agree("intersect1d", np.array([1, 2, 3]), np.array([3, 1]), return_indices=True,
          assume_unique=True)
    values, i1, i2 = fnp.intersect1d(A, B, return_indices=True)
    np.testing.assert_array_equal(A[np.asarray(i1)], np.asarray(values))
    np.testing.assert_array_equal(B[np.asarray(i2)], np.asarray(values))


@pytest.mark.parametrize("method", ["auto", "compare_all", "binary_search", "sort"])
def test_isin(method):
    agree("isin", M, A, method=method)
    agree("isin", M, A, invert=True, method=method)
    np.testing.assert_array_equal(np.asarray(fnp.isin(M, A, method=method)), np.isin(M, A))
    agree("isin", 2, A, method=method)
    agree("isin", M, np.zeros(0), method=method)


def test_isin_errors_and_jit():
    agree("isin", M, A, method="bad")
    jit_agrees(lambda x, y: fnp.isin(x, y), M, A)


def test_unique_counts_every_complex_nan_as_one_value():
    # A complex NaN sorted by its other part, so NaNs were split into runs (6 values, not 5).
    parts = [-0.0, 0.0, 1.0, 1.0, np.nan, -np.nan]
    x = np.array([complex(a, b) for a in parts for b in parts], np.complex64)
    values = agree("unique", x, **ALL)
    assert values[0].shape == (5,) and np.isnan(values[0][-1])
    agree("unique", x, size=7, fill_value=0, **ALL)
    agree("unique", x.reshape(18, 2), axis=0, return_counts=True)
    agree("unique", x, equal_nan=False, return_counts=True)
    jit_agrees(lambda v: fnp.unique(v, size=6, fill_value=0, **ALL), x)
