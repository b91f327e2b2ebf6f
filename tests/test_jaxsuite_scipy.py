"""scipy.special behaviours found by running JAX 0.10.2's own scipy tests against fluxion, each
checked here against SciPy or JAX directly."""
import jax
import jax.scipy.special as jsp
import numpy as np
import pytest
import scipy.special as osp

import fluxion
import fluxion.numpy as fnp
import fluxion.scipy.special as fsp
from fluxion.test_util import check_grads


def test_logsumexp_gradient_ignores_masked_entries():
    # A masked 100 overflowed exp and its zero cotangent made 0 * inf = NaN.
    x = np.array([0.0, 0.0, 0.0, 0.0, 100.0], np.float32)
    g = fluxion.grad(lambda x: fsp.logsumexp(x, where=fnp.arange(5) < 4))(x)
    np.testing.assert_array_equal(np.asarray(g), [0.25, 0.25, 0.25, 0.25, 0.0])


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_second_derivatives_at_zero(name):
    # The y-tangent x / y was cut to 0 at x = 0, losing the mixed derivative 1 / y.
    check_grads(getattr(fsp, name), (0.0, 3.0), order=2)
    ours = fluxion.hessian(getattr(fsp, name), argnums=(0, 1))(0.0, 3.0)
    theirs = jax.hessian(getattr(jsp, name), argnums=(0, 1))(0.0, 3.0)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)
    assert float(fluxion.grad(getattr(fsp, name), argnums=1)(0.0, 0.0 if name == "xlogy"
                                                            else -1.0)) == 0.0


@pytest.mark.parametrize("d", [1, 2, 5])
def test_multigammaln_under_rank_promotion_raise(d):
    a = np.random.RandomState(d).rand(3, 4, 1).astype(np.float32) + (d - 1) / 2 + 0.5
    with fluxion.numpy_rank_promotion("raise"):
        np.testing.assert_allclose(np.asarray(fsp.multigammaln(a, d)), osp.multigammaln(a, d),
                                   rtol=1e-4)


def test_sici_complex_message_as_jax():
    with pytest.raises(ValueError, match="Argument `x` to sici must be real-valued"):
        fsp.sici(np.array([1 + 1j]))


@pytest.mark.parametrize("l_max", [1, 3, 5])
def test_sph_harm_y_for_any_polar_angle(l_max):
    # The Legendre factor is |sin theta|: odd orders had the wrong sign for theta < 0.
    rng = np.random.RandomState(l_max)
    m = rng.randint(-l_max, l_max + 1, size=40).astype(np.int32)
    n = np.maximum(abs(m), rng.randint(0, l_max + 1, size=40)).astype(np.int32)
    theta, phi = np.linspace(-7, 7, 40), np.linspace(-4.0, 5.0, 40)
    np.testing.assert_allclose(np.asarray(fsp.sph_harm_y(n, m, theta, phi, n_max=l_max)),
                               osp.sph_harm_y(n, m, theta, phi), atol=1e-6)


def test_config_x64_enabled():
    assert fluxion.config.x64_enabled is False
    with fluxion.enable_x64():
        assert fluxion.config.x64_enabled is True
