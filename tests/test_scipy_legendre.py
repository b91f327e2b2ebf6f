"""`scipy.special.lpmn` and `lpmn_values` (deprecated in JAX, still served) against SciPy's
`lpmv`, finite differences and JAX."""
import math
import warnings

import jax
import jax.numpy as jax_jnp
import numpy as np
import pytest
import scipy.special

import fluxion
import fluxion.scipy.special as fsp

X = np.linspace(-0.97, 0.97, 9)
L = 6


def _quiet(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return getattr(fsp, name), getattr(jax.scipy.special, name)


def _reference(x, normalized=False):
    m, l = np.meshgrid(np.arange(L + 1), np.arange(L + 1), indexing="ij")
    values = scipy.special.lpmv(m[..., None], l[..., None], x[None, None, :])
    if normalized:
        factor = np.vectorize(lambda m, l: math.sqrt(
            (2 * l + 1) / (4 * math.pi) * math.factorial(l - m) / math.factorial(l + m))
            if m <= l else 0.0)(m, l)
        values = values * factor[..., None]
    return np.where((m <= l)[..., None], values, 0.0)


def test_access_warns_as_in_jax():
    with pytest.warns(DeprecationWarning, match="lpmn_values is deprecated"):
        fsp.lpmn_values  # noqa: B018


@pytest.mark.parametrize("normalized", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_match_scipy(normalized, dtype, x64):
    lpmn_values, _ = _quiet("lpmn_values")
    out = lpmn_values(L, L, X.astype(dtype), normalized)
    assert out.dtype == dtype and out.shape == (L + 1, L + 1, len(X))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, _reference(X, normalized), rtol=tol, atol=tol)
    np.testing.assert_allclose(fluxion.jit(lpmn_values, static_argnums=(0, 1, 3))(
        L, L, X.astype(dtype), normalized), out, rtol=tol, atol=tol)


def test_derivatives_match_finite_differences_and_jax_at_the_ends():
    lpmn, jax_lpmn = _quiet("lpmn")
    values, derivatives = lpmn(L, L, X.astype(np.float32))
    h = 1e-6
    expected = (_reference(X + h) - _reference(X - h)) / (2 * h)
    np.testing.assert_allclose(values, _reference(X), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(derivatives, expected, rtol=1e-4, atol=1e-3)
    # At z = +-1 the m = 1 derivatives are infinite and the others finite, as in JAX's.
    ends = np.array([-1.0, 0.0, 1.0], np.float32)
    ours, theirs = lpmn(3, 3, ends)[1], jax_lpmn(3, 3, jax_jnp.asarray(ends))[1]
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-5)


def test_errors_match_jax():
    lpmn, jax_lpmn = _quiet("lpmn")
    for args, error in [((2, 3, np.ones(2, np.float32)), NotImplementedError),
                        ((2, 2, np.ones(2, np.int32)), TypeError),
                        ((2, 2, np.ones((2, 2), np.float32)), ValueError)]:
        with pytest.raises(error):
            jax_lpmn(*args)
        with pytest.raises(error):
            lpmn(*args)
