"""The classic jax.nn activations against JAX: values over the whole float range (where a
naive formula cancels or overflows), dtypes and weak types, jit, gradients, vmap."""
import jax
import ml_dtypes
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion.test_util import check_grads

# Ordinary values, the tails where formulas cancel or overflow, and the special values.
WIDE = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6, 0.3, -0.7, 1.0, -1.0, 2.5, -3.0, 5.5,
                 -5.5, 9.0, -9.0, 12.0, -12.0, 20.0, -20.0, 40.0, -40.0, 88.0, -88.0, 100.0,
                 -100.0, 1e4, -1e4, 3e38, -3e38, np.inf, -np.inf, np.nan])
ORDINARY = np.array([-2.3, -0.9, -0.2, 0.4, 1.1, 2.7])

ELEMENTWISE = {
    "relu": {}, "relu6": {}, "sigmoid": {}, "softplus": {}, "log_sigmoid": {}, "silu": {},
    "swish": {}, "gelu": {}, "gelu_exact": {"approximate": False}, "elu": {},
    "elu_alpha": {"alpha": 0.5}, "celu": {}, "celu_alpha": {"alpha": 2.0}, "selu": {},
    "leaky_relu": {}, "leaky_relu_slope": {"negative_slope": 0.2}, "hard_tanh": {},
}


def _fn(lib, name):
    base = name.split("_alpha")[0].split("_slope")[0].replace("_exact", "")
    return lambda x: getattr(lib.nn, base)(x, **ELEMENTWISE[name])


def _assert_close(got, want, rtol):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=1e-30)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_values_over_the_float_range(name, x64_mode):
    dtype = np.float64 if x64_mode else np.float32
    x = WIDE.astype(dtype)
    ours, theirs = _fn(fluxion, name), _fn(jax, name)
    want = theirs(x)
    rtol = 1e-12 if x64_mode else 4e-6
    _assert_close(ours(x), want, rtol)
    _assert_close(fluxion.jit(ours)(x), want, rtol)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_gradients_over_the_float_range(name):
    """No NaN or zero where JAX has a number: the tails of the derivative formulas."""
    x = WIDE[np.isfinite(WIDE) & (np.abs(WIDE) < 1e30)].astype(np.float32)
    x = x[(x != 0)]  # kinks of relu-like functions: both conventions are documented elsewhere
    if name == "gelu":  # the tanh form's 1 + tanh cancels past |x| ~ 4 in float32 (both wrong)
        x = x[np.abs(x) < 4]
    ours = fluxion.vmap(fluxion.grad(_fn(fluxion, name)))(x)
    want = jax.vmap(jax.grad(_fn(jax, name)))(x)
    _assert_close(ours, want, 2e-5)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_dtypes_weak_types_and_numerical_gradients(name):
    ours, theirs = _fn(fluxion, name), _fn(jax, name)
    for dtype in (np.float16, ml_dtypes.bfloat16, np.int32):
        x = np.array([-2, -1, 0, 1, 3]).astype(dtype)
        try:
            want = theirs(x)
        except TypeError:  # JAX's sigmoid and silu refuse integers
            with pytest.raises(TypeError, match="int32"):
                ours(x)
            continue
        got = ours(x)
        assert got.dtype == want.dtype, dtype
        np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                                   rtol=1e-2, atol=1e-3)
    assert ours(1.5).weak_type == theirs(1.5).weak_type
    check_grads(ours, (ORDINARY.astype(np.float32),), order=2, modes=("fwd", "rev"),
                atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_family_over_extreme_rows(name):
    x = np.array([[0.0, 1.0, 2.0], [1e4, -1e4, 0.0], [-np.inf, 0.0, 1.0], [88.0, 88.0, -88.0],
                  [np.inf, 1.0, 0.0]], np.float32)
    for axis in (-1, 0):
        got = getattr(fluxion.nn, name)(x, axis=axis)
        want = getattr(jax.nn, name)(x, axis=axis)
        _assert_close(got, want, 2e-6)
    g = fluxion.grad(lambda v: getattr(fluxion.nn, name)(v)[:, 1].sum())(x[:4])
    w = jax.grad(lambda v: getattr(jax.nn, name)(v)[:, 1].sum())(x[:4])
    _assert_close(g, w, 2e-5)


def test_glu_one_hot_and_logsumexp():
    x = np.linspace(-4, 4, 24).reshape(4, 6).astype(np.float32)
    for axis in (-1, 0):
        _assert_close(fluxion.nn.glu(x, axis=axis), jax.nn.glu(x, axis=axis), 2e-6)
    labels = np.array([0, 2, -1, 5, 1])
    for kwargs in ({}, {"dtype": jnp.int8}, {"axis": 0}):
        _assert_close(fluxion.nn.one_hot(labels, 4, **kwargs),
                      jax.nn.one_hot(labels, 4, **kwargs), 0)
    big = np.array([[1e30, 1e30], [-np.inf, -np.inf], [0.0, -1e4]], np.float32)
    _assert_close(fluxion.nn.logsumexp(big, axis=1), jax.nn.logsumexp(big, axis=1), 2e-6)
