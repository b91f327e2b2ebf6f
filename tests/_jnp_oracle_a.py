"""Shared checks of the jnp-a test files: fluxion.numpy against jax.numpy as the oracle for
values, dtypes, weak types and error classes (x64 on or off), jit against eager."""
import contextlib

import jax
import jax.numpy as jnp
import numpy as np

import fluxion
import fluxion.numpy as fnp
from _jnp_oracle import _array_leaves_only, jax_result

TOL = {np.dtype(np.float16): 2e-3, np.dtype(jnp.bfloat16): 2e-2, np.dtype(np.float32): 2e-5,
       np.dtype(np.complex64): 2e-5}


@contextlib.contextmanager
def both_x64(on: bool):
    with jax.enable_x64(on), fluxion.enable_x64(on):
        yield


def leaves(tree):
    return fluxion.tree_util.tree_leaves(tree)


def assert_same(expected, actual, rtol=None, atol=None):
    """Leaves of `actual` (fluxion) equal `expected` (JAX or NumPy): dtype, shape, weak type."""
    exp_leaves, act_leaves = jax.tree_util.tree_leaves(expected), leaves(actual)
    assert len(exp_leaves) == len(act_leaves), (expected, actual)
    for e, a in zip(exp_leaves, act_leaves):
        e_np, a_np = np.asarray(e), np.asarray(a)
        assert a_np.dtype == e_np.dtype, (a_np.dtype, e_np.dtype)
        assert a_np.shape == e_np.shape, (a_np.shape, e_np.shape)
        if hasattr(e, "weak_type"):
            assert a.weak_type == e.weak_type, (a.weak_type, e.weak_type)
        tol = TOL.get(e_np.dtype, 1e-12 if e_np.dtype.kind in "fc" else 0)
        np.testing.assert_allclose(a_np.astype(np.complex128) if a_np.dtype.kind == "c"
                                   else a_np.astype(np.float64),
                                   e_np.astype(np.complex128) if e_np.dtype.kind == "c"
                                   else e_np.astype(np.float64),
                                   rtol=rtol if rtol is not None else tol,
                                   atol=atol if atol is not None else tol)


def agree(name, *args, x64=False, rtol=None, atol=None, **kwargs):
    """fluxion.numpy.<name> matches jax.numpy.<name>: values/dtypes, or the error class."""
    with both_x64(x64):
        try:
            expected = jax_result(getattr(jnp, name), args, kwargs)
        except Exception as e:  # JAX's error class is the specification
            expected_error = type(e)
        else:
            expected_error = None
        if expected_error is not None:
            try:
                getattr(fnp, name)(*args, **kwargs)
            except Exception as e:
                assert issubclass(type(e), expected_error) or \
                    type(e).__name__ == expected_error.__name__, (type(e), expected_error)
                return None
            raise AssertionError(f"jnp.{name} raised {expected_error.__name__}; fluxion did not")
        actual = getattr(fnp, name)(*args, **kwargs)
        if not _array_leaves_only(actual):  # Python values: jit would have made them arrays
            expected = getattr(jnp, name)(*args, **kwargs)
        assert_same(expected, actual, rtol, atol)
        return actual


def jit_agrees(fun, *args, rtol=1e-6):
    """fluxion.jit(fun) equals fun called eagerly."""
    eager = fun(*args)
    jitted = fluxion.jit(fun)(*args)
    for e, j in zip(leaves(eager), leaves(jitted)):
        assert np.asarray(e).dtype == np.asarray(j).dtype
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=rtol, atol=rtol)


def vmap_agrees(fun, batch, rtol=1e-6):
    """fluxion.vmap(fun) over the leading axis equals a Python loop."""
    mapped = fluxion.vmap(fun)(batch)
    looped = [fun(batch[i]) for i in range(batch.shape[0])]
    for i, single in enumerate(looped):
        for m, s in zip(leaves(mapped), leaves(single)):
            np.testing.assert_allclose(np.asarray(m)[i], np.asarray(s), rtol=rtol, atol=rtol)
