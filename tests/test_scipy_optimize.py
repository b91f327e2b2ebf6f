"""scipy.optimize.minimize (BFGS) takes the same steps as jax.scipy.optimize.minimize."""
import jax
import jax.numpy as jjnp
import jax.scipy.optimize as jopt
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
import fluxion.scipy.optimize as opt


def rosenbrock(m):
    return lambda x: m.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def quadratic(m):
    a = np.array([[3.0, 0.5, 0.0], [0.5, 2.0, 0.3], [0.0, 0.3, 1.0]], np.float32)
    return lambda x: 0.5 * m.dot(x, m.dot(a, x)) - m.sum(x) + m.sum(m.cos(x)) * 0.1


@pytest.mark.parametrize("problem,n", [(rosenbrock, 2), (rosenbrock, 10), (quadratic, 3)])
def test_bfgs_matches_jax_iterates(problem, n):
    # (In float32 a long run's round-off can steer the two apart, as it would two BLAS.)
    x0 = np.linspace(-1.0, 1.5, n).astype(np.float32)
    ours = fluxion.jit(lambda x: opt.minimize(problem(jnp), x, method="BFGS"))(x0)
    theirs = jax.jit(lambda x: jopt.minimize(problem(jjnp), x, method="BFGS"))(x0)
    assert int(ours.nit) == int(theirs.nit)
    assert int(ours.nfev) == int(theirs.nfev)
    assert bool(ours.success) == bool(theirs.success)
    assert int(ours.status) == int(theirs.status)
    np.testing.assert_allclose(ours.x, theirs.x, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.fun, theirs.fun, rtol=1e-4)


def test_minimize_converges_eagerly_with_args_and_options(x64):
    target = np.arange(4.0)
    res = opt.minimize(lambda x, c: jnp.sum((x - c) ** 2 * jnp.arange(1.0, 5.0)), np.zeros(4),
                       args=(target,), method="bfgs", options={"gtol": 1e-6, "maxiter": 50})
    assert bool(res.success) and int(res.status) == 0
    grad = 2 * (np.asarray(res.x) - target) * np.arange(1.0, 5.0)
    assert np.abs(grad).max() < 1e-3
    assert res.hess_inv.shape == (4, 4)


def test_errors():
    with pytest.raises(ValueError, match="not recognized"):
        opt.minimize(lambda x: jnp.sum(x ** 2), np.zeros(2), method="Nelder-Mead")
    with pytest.raises(TypeError, match="must be a tuple"):
        opt.minimize(lambda x, c: jnp.sum(x ** 2), np.zeros(2), args=1.0, method="BFGS")
    with pytest.raises(ValueError, match="one-dimensional"):
        opt.minimize(lambda x: jnp.sum(x ** 2), np.zeros((2, 2)), method="BFGS")
