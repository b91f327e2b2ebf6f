"""Edges of fluxion.numpy array creation and manipulation found by a sweep against JAX 0.10.2.

NumPy gives the values; JAX (the oracle) gives dtypes and error classes.
"""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp


def test_log10_of_powers_of_ten_is_exact_in_float64(x64):
    # 1 / np.log(10) is one ulp below the correctly rounded 1/ln(10); JAX uses the latter.
    exponents = np.arange(-20, 20)
    got = np.asarray(fnp.log10(fnp.asarray(10.0 ** exponents)))
    assert (got != exponents).sum() <= 5  # JAX 0.10.2 misses 5 of these too


def test_geomspace_int_keeps_exact_powers(x64):
    want = np.geomspace(1, 256, 9, dtype=np.int64)
    got = fnp.geomspace(1, 256, 9, dtype=int)
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(fluxion.jit(
        lambda: fnp.geomspace(1, 256, 9, dtype=int))()), want)
