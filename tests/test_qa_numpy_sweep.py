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


def test_builtin_round_and_contains():
    for x in ([1.5, -2.7], 7.4, [3, 4]):
        _same(round(fnp.asarray(x)), round(jnp.asarray(x)))
        _same(round(fnp.asarray(x), 1), round(jnp.asarray(x), 1))
    assert round(fnp.asarray(2.5)).dtype == np.int32 and not round(fnp.asarray(2.5)).weak_type
    x = fnp.arange(4)
    assert (2 in x) and (2.0 in x) and not (7 in x)
    for bad, exc in ((fnp.zeros((2, 2)), ValueError), (fnp.asarray(1.0), ValueError)):
        with pytest.raises(exc, match="one-dimensional"):
            1 in bad  # noqa: B015
    with pytest.raises(ValueError, match="scalar"):
        fnp.arange(3) in x  # noqa: B015
    with pytest.raises(TypeError):
        None in x  # noqa: B015


def test_array_methods_view_byteswap_and_friends():
    cases = [
        lambda m: m.arange(6, dtype=m.int16).reshape(2, 3).view(m.int8),
        lambda m: m.arange(8, dtype=m.int8).reshape(2, 4).view(m.int16),
        lambda m: m.asarray([1.5, -2., 3, 4]).view(m.complex64),
        lambda m: m.asarray([1.5 + 2j, -2.]).view(m.float32),
        lambda m: m.asarray([1, 0, 1], m.int8).view(bool),
        lambda m: m.asarray(1.5).view(m.int32),
        lambda m: m.arange(5).byteswap(),
        lambda m: m.asarray([1 + 2j]).byteswap(),
        lambda m: m.asarray([1, 2, 3]).searchsorted(m.asarray([2, 5]), side="right"),
        lambda m: m.asarray([0, 3, -1]).choose([m.arange(3), m.arange(3) * 10], mode="wrap"),
        lambda m: m.arange(6).reshape(2, 3).compress(m.asarray([True, False, True]), axis=1),
        lambda m: m.sort(m.asarray([5, 1, 4, 2]).argpartition(1)[:2]),
    ]
    for case in cases:
        _same(case(fnp), case(jnp))
    with pytest.raises(ValueError):
        fnp.arange(3, dtype=fnp.int8).view(fnp.int16)
    assert fnp.arange(3).tobytes() == np.arange(3, dtype=np.int32).tobytes()
    import copy
    _same(copy.deepcopy(fnp.arange(3)), np.arange(3, dtype=np.int32))
