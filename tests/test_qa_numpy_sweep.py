"""Regression tests from a differential sweep of fluxion.numpy / lax against JAX.

Each test groups a few checks that once differed from JAX 0.10.2 (the oracle).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp


def _same(got, want):
    """Equal values, dtypes and shapes (NaNs equal)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    np.testing.assert_array_equal(got, want)


def test_take_along_axis_mode_drop():
    idx = np.array([0, 4, -4, -1])
    want = [jnp.take_along_axis(jnp.arange(4.), idx, axis=0, mode="drop"),
            jnp.take_along_axis(jnp.arange(4), idx, axis=0, mode="drop", fill_value=-7)]
    got = [fnp.take_along_axis(fnp.arange(4.), idx, axis=0, mode="drop"),
           fnp.take_along_axis(fnp.arange(4), idx, axis=0, mode="drop", fill_value=-7)]
    for g, w in zip(got, want):
        _same(g, w)
