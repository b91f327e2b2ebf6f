"""scipy.special behaviours found by running JAX 0.10.2's own scipy tests against fluxion, each
checked here against SciPy or JAX directly."""
import jax
import jax.scipy.special as jsp
import numpy as np
import pytest
import scipy.special as osp
import scipy.stats

import fluxion
import fluxion.numpy as fnp
import fluxion.scipy.special as fsp
import fluxion.scipy.stats
import fluxion.scipy.sparse.linalg
import fluxion.image
import fluxion.scipy.optimize
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


def test_gamma_pdf_under_debug_nans():
    # log(-1) inside the density (masked out of its result) raised under debug_nans; JAX
    # evaluates outside the support at a stand-in point.
    with fluxion.debug_nans(True):
        assert float(fluxion.scipy.stats.gamma.pdf(0.0, 1.0, 1.0)) == 0.0
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    for name, args in [("gamma", (1.5,)), ("chi2", (3.0,)), ("beta", (2.0, 3.0))]:
        g = fluxion.grad(lambda x: getattr(fluxion.scipy.stats, name).logpdf(x, *args).sum())(x)
        assert not np.isnan(np.asarray(g)).any()


def test_debug_nans_checks_an_eager_jnp_function_by_its_outputs():
    # Internal NaNs that never reach the result are not errors (JAX checks its jitted jnp
    # functions' outputs); a NaN result is, named by the primitive that made it.
    x = fnp.array([1.0, -1.0])
    with fluxion.debug_nans(True):
        np.testing.assert_array_equal(np.asarray(fsp.xlogy(0.0, x)), [0.0, 0.0])
        with pytest.raises(FloatingPointError, match="sqrt"):
            fnp.sqrt(x)


@pytest.mark.parametrize("shape", [(0,), (0, 2, 3), (4, 0)])
def test_rankdata_along_an_empty_axis(shape):
    x = np.zeros(shape, np.float32)
    for axis in range(len(shape)):
        for method in ["average", "min", "max", "dense", "ordinal"]:
            ours = fluxion.scipy.stats.rankdata(x, method=method, axis=axis)
            theirs = jax.scipy.stats.rankdata(x, method=method, axis=axis)
            assert ours.shape == theirs.shape and ours.dtype == theirs.dtype


@pytest.mark.parametrize("shape", [(5,), (5, 6), (5, 6, 7)])
@pytest.mark.parametrize("nan_policy", ["propagate", "omit"])
def test_sem_keepdims_with_axis_none(shape, nan_policy):
    x = np.random.RandomState(0).rand(*shape)
    ours = fluxion.scipy.stats.sem(x, axis=None, keepdims=True, nan_policy=nan_policy)
    want = scipy.stats.sem(x, axis=None, keepdims=True, nan_policy=nan_policy)
    assert ours.shape == want.shape
    np.testing.assert_allclose(np.asarray(ours), want, rtol=1e-5)


@pytest.mark.parametrize("n_shape,x_shape", [((4,), (3, 1)), ((3, 1), (2, 1, 4)), ((), ())])
def test_polygamma_broadcasts_n_and_x(n_shape, x_shape):
    rng = np.random.RandomState(0)
    n = np.asarray(rng.randint(0, 4, size=n_shape), np.int32)
    x = np.asarray(rng.rand(*x_shape) + 0.5, np.float32)
    ours = fsp.polygamma(n, x)
    assert ours.shape == np.broadcast_shapes(n_shape, x_shape)
    np.testing.assert_allclose(np.asarray(ours), osp.polygamma(n, x), rtol=1e-4)


def test_sparse_solvers_take_matmul_operators():
    class Operator:  # an object with `@` and a shape, as a sparse matrix
        def __init__(self, a):
            self.a, self.shape = a, a.shape

        def __matmul__(self, x):
            return self.a @ x

    a, b = np.array([[4.0, 1.0], [1.0, 3.0]], np.float32), np.array([1.0, 2.0], np.float32)
    for solver in (fluxion.scipy.sparse.linalg.cg, fluxion.scipy.sparse.linalg.bicgstab,
                   fluxion.scipy.sparse.linalg.gmres):
        np.testing.assert_allclose(np.asarray(solver(Operator(fnp.asarray(a)), b)[0]),
                                   np.linalg.solve(a, b), rtol=1e-5)


def test_int_and_float_subclasses_are_python_scalars():
    import enum

    class Color(enum.IntEnum):
        RED = 42

    class Length(float):
        pass

    cases = [lambda M, L: M.array(Color.RED), lambda M, L: M.add(Color.RED, 1),
             lambda M, L: M.add(M.ones(2, np.int8), Color.RED),
             lambda M, L: L.jit(lambda x: x)(Color.RED), lambda M, L: M.asarray(Length(2.5)),
             lambda M, L: M.multiply(np.float16(1), Length(2.0))]
    for case in cases:
        ours, theirs = case(fnp, fluxion), case(jax.numpy, jax)
        assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize("shape", [[10.5, 17], (10.0, 17)])
def test_image_resize_refuses_fractional_sizes(shape):
    with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values"):
        fluxion.image.resize(np.ones((3, 4)), shape, "bicubic")
    assert fluxion.image.resize(np.ones((3, 4)), np.array([10, 17]), "nearest").shape == (10, 17)


LBFGS = "l-bfgs-experimental-do-not-rely-on-this"


def _rosenbrock(np_):
    return lambda x: np_.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@pytest.mark.parametrize("options", [{}, {"maxiter": 3}, {"maxfun": 10}, {"maxcor": 3},
                                     {"ftol": 1e-3}, {"gtol": 1e-2, "norm": 2}])
def test_lbfgs_matches_jax(options):
    import jax.scipy.optimize as jso
    jax.config.update("jax_enable_x64", True)
    try:
        with fluxion.enable_x64():
            for d in (5, 10):
                x0 = np.linspace(-1.2, 1.0, d)
                ours = fluxion.scipy.optimize.minimize(_rosenbrock(fnp), x0, method=LBFGS,
                                                       options=options)
                theirs = jso.minimize(_rosenbrock(jax.numpy), x0, method=LBFGS, options=options)
                np.testing.assert_allclose(np.asarray(ours.x), np.asarray(theirs.x), atol=1e-9)
                for field in ("status", "nit", "nfev", "njev", "success"):
                    assert int(getattr(ours, field)) == int(getattr(theirs, field)), field
    finally:
        jax.config.update("jax_enable_x64", False)


def test_lbfgs_converges_under_jit_and_for_complex_input():
    a = np.diag(np.arange(1.0, 6.0)).astype(np.float32)
    quadratic = lambda x: 0.5 * x @ a @ x - x.sum()
    run = fluxion.jit(lambda x0: fluxion.scipy.optimize.minimize(quadratic, x0, method=LBFGS))
    result = run(np.zeros(5, np.float32))
    assert bool(result.success) and int(result.status) == 0
    np.testing.assert_allclose(np.asarray(result.x), 1 / np.arange(1.0, 6.0), rtol=1e-4)
    target = np.complex64(1 + 2j)
    z = fluxion.scipy.optimize.minimize(lambda z: fnp.sum(fnp.abs(z - target) ** 2),
                                        np.zeros(3, np.complex64), method=LBFGS).x
    np.testing.assert_allclose(np.asarray(z), np.full(3, target), atol=1e-4)
    with pytest.raises(ValueError, match="not recognized"):
        fluxion.scipy.optimize.minimize(quadratic, np.zeros(5), method="CG")
