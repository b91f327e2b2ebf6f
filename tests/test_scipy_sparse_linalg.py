"""scipy.sparse.linalg cg and bicgstab: solutions, pytrees, preconditioners, gradients, vmap."""
import jax
import jax.scipy.sparse.linalg as jsl
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
import fluxion.scipy.sparse.linalg as sl
from fluxion.test_util import check_grads

RNG = np.random.default_rng(0)
N = 12
_Q = RNG.standard_normal((N, N))
SPD = (_Q @ _Q.T + N * np.eye(N)).astype(np.float32)
GENERAL = (SPD + 2.0 * RNG.standard_normal((N, N))).astype(np.float32)
B = RNG.standard_normal(N).astype(np.float32)


@pytest.mark.parametrize("solver,matrix", [("cg", SPD), ("bicgstab", GENERAL)])
def test_solutions_match_numpy_and_jax(solver, matrix):
    x, info = getattr(sl, solver)(matrix, B, tol=1e-6)
    assert info is None
    np.testing.assert_allclose(x, np.linalg.solve(matrix, B), rtol=1e-4, atol=1e-4)
    want, _ = getattr(jsl, solver)(matrix, B, tol=1e-6)
    np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-6)
    as_function = fluxion.jit(lambda b: getattr(sl, solver)(lambda v: jnp.dot(matrix, v), b,
                                                            tol=1e-6)[0])
    np.testing.assert_allclose(as_function(B), x, rtol=1e-5, atol=1e-6)


def test_pytree_operands_preconditioner_and_x0():
    def A(t):
        w = jnp.dot(SPD, jnp.concatenate([t["a"], t["b"]]))
        return {"a": w[:5], "b": w[5:]}
    b = {"a": B[:5], "b": B[5:]}
    inverse_diagonal = 1.0 / np.diag(SPD)
    M = lambda t: {"a": t["a"] * inverse_diagonal[:5], "b": t["b"] * inverse_diagonal[5:]}  # noqa
    x0 = {"a": jnp.ones(5), "b": jnp.ones(N - 5)}
    x, _ = sl.cg(A, b, x0=x0, M=M, tol=1e-6)
    np.testing.assert_allclose(np.concatenate([x["a"], x["b"]]), np.linalg.solve(SPD, B),
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="matching tree structure"):
        sl.cg(A, b, x0=[jnp.ones(5)])
    with pytest.raises(ValueError, match="matching shapes"):
        sl.bicgstab(SPD, B, x0=jnp.ones(N + 1))
    with pytest.raises(ValueError, match="square matrix"):
        sl.cg(np.ones((3, 4)), np.ones(3))


def test_gradients_by_implicit_differentiation(x64):
    spd, general, b = SPD.astype(np.float64), GENERAL.astype(np.float64), B.astype(np.float64)
    check_grads(lambda b: sl.cg(spd, b, tol=1e-12)[0], (b,), order=1, modes=["fwd", "rev"])
    check_grads(lambda m: sl.bicgstab(lambda v: jnp.dot(m, v), b, tol=1e-12)[0], (general,),
                order=1, modes=["rev"], atol=1e-4, rtol=1e-4)


def test_vmap_over_right_hand_sides():
    bs = RNG.standard_normal((3, N)).astype(np.float32)
    got = fluxion.vmap(lambda b: sl.cg(SPD, b, tol=1e-6)[0])(bs)
    np.testing.assert_allclose(got, np.linalg.solve(SPD, bs.T).T, rtol=1e-4, atol=1e-4)


def test_complex_systems():
    a = SPD + 1j * np.diag(np.arange(N, dtype=np.float32))
    b = B + 1j * B[::-1]
    x, _ = sl.bicgstab(a, b, tol=1e-6)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("restart", [3, 20])
def test_gmres_matches_numpy_and_jax(restart):
    x, info = sl.gmres(GENERAL, B, tol=1e-6, restart=restart)
    assert int(info) == 0
    np.testing.assert_allclose(x, np.linalg.solve(GENERAL, B), rtol=1e-3, atol=1e-3)
    want, _ = jsl.gmres(GENERAL, B, tol=1e-6, restart=restart)
    np.testing.assert_allclose(x, want, rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="solve_method"):
        sl.gmres(GENERAL, B, solve_method="qr")


def test_gmres_gradient_and_preconditioner(x64):
    general, b = GENERAL.astype(np.float64), B.astype(np.float64)
    check_grads(lambda b: sl.gmres(general, b, tol=1e-12)[0], (b,), order=1,
                modes=["fwd", "rev"])
    inverse_diagonal = 1.0 / np.diag(general)
    x, _ = sl.gmres(lambda v: jnp.dot(general, v), b, M=lambda v: v * inverse_diagonal,
                    tol=1e-10)
    np.testing.assert_allclose(x, np.linalg.solve(general, b), rtol=1e-7)
