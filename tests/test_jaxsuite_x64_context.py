"""enable_x64 inside differentiated and looped functions, found by running JAX 0.10.2's
x64_context_test against fluxion; each case is checked against JAX directly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp


def _sin_under_x64(lib, np_mod):
    def fun(x):
        with lib.enable_x64(True):
            return np_mod.sin(x)
    return fun


@pytest.mark.parametrize("x", [0.5, np.float32(0.5)])
@pytest.mark.parametrize("jit", [False, True])
def test_grad_of_host_scalar_with_x64_inside(x, jit):
    ours = fluxion.grad(_sin_under_x64(fluxion, fnp))
    ours = fluxion.jit(ours) if jit else ours
    theirs = jax.grad(_sin_under_x64(jax, jnp))(x)
    got = ours(x)
    assert got.dtype == theirs.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.asarray(theirs), rtol=1e-6)


def test_identity_keeps_host_primals():
    assert fluxion.jvp(lambda x: x, (1.0,), (2.0,)) == jax.jvp(lambda x: x, (1.0,), (2.0,))
    assert fluxion.vjp(lambda x: x, 1.0)[0] == 1.0


def _custom_jvp_square(lib, np_mod):
    @lib.custom_jvp
    def f(x):
        return x ** 2.

    @f.defjvp
    def f_jvp(xs, ts):
        (x,), (t,) = xs, ts
        return f(x), t * np_mod.sin(x)

    def g(x):
        with lib.enable_x64():
            return f(np_mod.array(x, np_mod.float64))
    return g


def _custom_vjp_square(lib, np_mod):
    @lib.custom_vjp
    def f(x):
        return x ** 2.

    f.defvjp(lambda x: (f(x), np_mod.sin(x)), lambda res, t: (res * t,))

    def g(x):
        with lib.enable_x64():
            return f(np_mod.array(x, np_mod.float64))
    return g


@pytest.mark.parametrize("make", [_custom_jvp_square, _custom_vjp_square])
@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("jit", [False, True])
def test_higher_grads_of_float64_loss_outside_x64(make, order, jit):
    ours, theirs = make(fluxion, fnp), make(jax, jnp)
    for _ in range(order):
        ours, theirs = fluxion.grad(ours), jax.grad(theirs)
    ours = fluxion.jit(ours) if jit else ours
    got, want = ours(5.), theirs(5.)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


def _scan_with_int64_outputs(lib, np_mod):
    def f(a):
        def body(carry, _):
            with lib.enable_x64():
                y = (carry + a).astype(np_mod.int64)
                z = y.astype(np_mod.int32)
            return carry, (z, y)
        return lib.lax.scan(body, np_mod.int32(2), np_mod.arange(4))
    return f


@pytest.mark.parametrize("jit", [False, True])
def test_scan_stacks_int64_outputs_of_an_x64_body(jit):
    ours = _scan_with_int64_outputs(fluxion, fnp)
    ours = fluxion.jit(ours) if jit else ours
    carry, (zs, ys) = ours(3)
    w_carry, (w_zs, w_ys) = jax.jit(_scan_with_int64_outputs(jax, jnp))(3)
    assert (carry.dtype, zs.dtype, ys.dtype) == (w_carry.dtype, w_zs.dtype, w_ys.dtype)
    assert ys.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(ys), np.asarray(w_ys))
