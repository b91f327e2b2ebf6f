"""fluxion.experimental.ode.odeint against closed forms, scipy's solve_ivp and JAX 0.10's
odeint (values and adjoint gradients wrt y0, t and args); jit, vmap and pytree states."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental.ode import odeint as jax_odeint
from scipy.integrate import solve_ivp

import fluxion
import fluxion.numpy as jnp
from fluxion.experimental.ode import odeint

TS = np.array([0.5, 0.9, 1.6, 2.0], np.float32)


def decay(y, t, a):
    return -a * y


def oscillator(mod):
    def f(state, t, w):
        return {"x": state["v"], "v": -w["w2"] * state["x"]}
    return f


def close(a, b, rtol=2e-5, atol=2e-6):
    la, lb = fluxion.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def test_decay_matches_its_closed_form_with_analytic_gradients():
    y0, a = np.array([1., -2.], np.float32), np.float32(0.8)
    ys = odeint(decay, y0, TS, a)
    exact = y0 * np.exp(-a * (TS - TS[0]))[:, None]
    np.testing.assert_allclose(np.asarray(ys), exact, rtol=1e-5, atol=1e-6)
    w = np.array([[1., 2.], [0.5, -1.], [3., 1.], [-2., 0.25]], np.float32)
    g_y0, g_t, g_a = fluxion.grad(lambda y0, t, a: (odeint(decay, y0, t, a) * w).sum(),
                                  argnums=(0, 1, 2))(y0, TS, a)
    # y_i = y0 exp(-a (t_i - t_0))
    e = np.exp(-a * (TS - TS[0]))
    np.testing.assert_allclose(np.asarray(g_y0), (w * e[:, None]).sum(0), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(g_a), -((TS - TS[0])[:, None] * exact * w).sum(),
                               rtol=1e-4)
    dt = -a * (exact * w).sum(1)
    dt[0] = -dt[1:].sum()
    np.testing.assert_allclose(np.asarray(g_t), dt, rtol=1e-4, atol=1e-5)


def test_pytree_state_and_args_match_scipy_and_jax():
    state = {"x": np.array([1., 0.], np.float32), "v": np.array([0., 2.], np.float32)}
    w = {"w2": np.float32(3.)}
    ys = odeint(oscillator(fluxion), state, TS, w)
    ref = solve_ivp(lambda t, s: np.concatenate([s[2:], -3. * s[:2]]), (TS[0], TS[-1]),
                    np.concatenate([state["x"], state["v"]]).astype(np.float64),
                    t_eval=TS, rtol=1e-10, atol=1e-12).y.T
    np.testing.assert_allclose(np.asarray(ys["x"]), ref[:, :2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ys["v"]), ref[:, 2:], rtol=1e-5, atol=1e-6)
    close(ys, jax_odeint(oscillator(jax), state, TS, w))

    def loss(mod, solve):
        def f(s, t, w):
            out = solve(oscillator(mod), s, t, w)
            return (out["x"] ** 2).sum() + (out["v"] * t[:, None]).sum()
        return f
    got = fluxion.grad(loss(fluxion, odeint), argnums=(0, 1, 2))(state, TS, w)
    want = jax.grad(loss(jax, jax_odeint), argnums=(0, 1, 2))(state, TS, w)
    close(got, want, rtol=1e-4, atol=1e-5)


def test_nonlinear_system_matches_scipy_and_tolerances_and_hmax_as_jax():
    def lotka(y, t, p):
        return jnp.stack([p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]])

    def jlotka(y, t, p):
        return jjnp.stack([p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]])
    p = np.array([1.1, 0.4, 0.4, 0.1], np.float32)
    y0 = np.array([10., 5.], np.float32)
    ts = np.linspace(0., 5., 6).astype(np.float32)
    ref = solve_ivp(lambda t, y: np.asarray(lotka(y, t, p.astype(np.float64))), (0., 5.),
                    y0.astype(np.float64), t_eval=ts, rtol=1e-10, atol=1e-10).y.T
    np.testing.assert_allclose(np.asarray(odeint(lotka, y0, ts, p)), ref, rtol=1e-4)
    for kw in ({"rtol": 1e-3, "atol": 1e-3}, {"rtol": 1e-3, "atol": 1e-3, "hmax": 0.2},
               {"mxstep": 3}):
        close(odeint(lotka, y0, ts, p, **kw), jax_odeint(jlotka, y0, ts, p, **kw), rtol=1e-4)


def test_closed_over_traced_values_get_gradients():
    y0 = np.array([1., 2.], np.float32)

    def loss(mod, solve):
        def f(a, b):
            return solve(lambda y, t: -a * y + b * mod.numpy.sin(t), y0, TS).sum()
        return f
    got = fluxion.grad(loss(fluxion, odeint), argnums=(0, 1))(0.7, 0.3)
    want = jax.grad(loss(jax, jax_odeint), argnums=(0, 1))(0.7, 0.3)
    close(got, want, rtol=1e-4)


def test_jit_and_vmap():
    y0s = np.array([[1., 2.], [0.5, -1.], [3., 0.]], np.float32)
    solve = fluxion.jit(lambda y0, a: odeint(decay, y0, TS, a))
    got = fluxion.vmap(solve, in_axes=(0, None))(y0s, 0.6)
    want = np.stack([np.asarray(odeint(decay, y0, TS, 0.6)) for y0 in y0s])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(solve(y0s[1], 0.6)), want[1], rtol=1e-6)
    grads = fluxion.jit(fluxion.vmap(fluxion.grad(lambda a, y0: odeint(decay, y0, TS, a).sum()),
                                     in_axes=(None, 0)))(0.6, y0s)
    t = TS - TS[0]
    exact = np.array([-(t * y0.sum() * np.exp(-0.6 * t)).sum() for y0 in y0s])
    np.testing.assert_allclose(np.asarray(grads), exact, rtol=1e-4)


def test_errors():
    with pytest.raises(TypeError, match="t must be an array of floats"):
        odeint(decay, np.ones(2, np.float32), np.arange(3), 0.5)
    with pytest.raises(TypeError, match="must be arrays or scalars"):
        odeint(decay, np.ones(2, np.float32), TS, "a")


def test_ravel_pytree_as_jax():
    from jax.flatten_util import ravel_pytree as jax_ravel
    from fluxion.flatten_util import ravel_pytree
    tree = {"a": np.ones((2, 3), np.float32), "b": (np.arange(3, dtype=np.int32), 2.5)}
    flat, unravel = ravel_pytree(tree)
    jflat, _ = jax_ravel(tree)
    assert flat.dtype == jflat.dtype and flat.shape == (10,)
    np.testing.assert_array_equal(np.asarray(flat), np.asarray(jflat))
    back = unravel(flat * 2)
    assert back["b"][0].dtype == np.int32 and back["a"].shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(back["b"][0]), [0, 2, 4])
    with pytest.raises(TypeError, match="expected dtype float32"):
        unravel(np.zeros(10, np.int32))
    assert ravel_pytree({})[0].shape == (0,) and ravel_pytree({})[0].dtype == np.float32
    # equal layouts give equal unravel functions; jacobians and vmap go through them
    assert ravel_pytree({"a": np.zeros((2, 3), np.float32), "b": (np.ones(3, np.int32), 0.)})[1] \
        == unravel
    same, undo = ravel_pytree((np.ones(2, np.float32), np.ones((), np.float32)))
    jac = fluxion.jacobian(lambda v: ravel_pytree(tuple(x * 3 for x in undo(v)))[0])(same)
    np.testing.assert_array_equal(np.asarray(jac), 3 * np.eye(3))
    rows = fluxion.vmap(undo)(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(rows[1]), [2., 5.])
