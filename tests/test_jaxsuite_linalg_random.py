"""Behaviours found by running JAX 0.10.2's linalg, random and solver test files against
fluxion: each checked here against JAX directly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp


@pytest.mark.parametrize("axis", [range(2), np.array([0, 1]), np.int64(1), [0, 1]])
@pytest.mark.parametrize("name", ["expand_dims", "squeeze"])
def test_axis_given_as_any_integer_iterable(name, axis):
    x = np.ones((1, 1, 3), np.float32)
    want = getattr(jnp, name)(x, axis)
    ours = getattr(fnp, name)
    assert ours(x, axis).shape == want.shape
    assert fluxion.jit(lambda v: ours(v, axis))(x).shape == want.shape


def test_moveaxis_source_as_range():
    x = np.zeros((1, 2, 3), np.float32)
    want = jnp.moveaxis(x, range(2), (1, 2))
    assert fnp.moveaxis(x, range(2), (1, 2)).shape == want.shape


@pytest.mark.parametrize("fmt", ["bcoo", "bcsr"])
def test_sparse_from_scipy_sparse(fmt):
    import importlib
    import jax.experimental.sparse as jsparse
    import scipy.sparse as sps
    mat = sps.random(5, 4, density=0.4, random_state=0, dtype=np.float32)
    cls_name = fmt.upper()
    ours_cls = getattr(importlib.import_module(f"fluxion.experimental.sparse.{fmt}"), cls_name)
    ours = ours_cls.from_scipy_sparse(mat)
    theirs = getattr(jsparse, cls_name).from_scipy_sparse(mat)
    assert (ours.shape, ours.nse, ours.dtype) == (theirs.shape, theirs.nse, theirs.dtype)
    assert ours.indices.dtype == theirs.indices.dtype
    np.testing.assert_array_equal(ours.todense(), theirs.todense())
    np.testing.assert_array_equal(fluxion.jit(lambda m: m.todense())(ours), mat.toarray())
    with pytest.raises(NotImplementedError):
        ours_cls.from_scipy_sparse(mat, n_batch=1)
