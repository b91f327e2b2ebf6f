"""Misused transformations and deleted Arrays raise JAX's error classes with clear messages."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp


@pytest.mark.parametrize("transform", [fluxion.jit, fluxion.grad, fluxion.value_and_grad,
                                       fluxion.vmap, fluxion.jacfwd, fluxion.jacrev,
                                       fluxion.hessian])
@pytest.mark.parametrize("not_a_function", [3, "f", None])
def test_transformations_require_a_callable(transform, not_a_function):
    with pytest.raises(TypeError, match="Expected a callable value, got"):
        transform(not_a_function)


def test_jvp_and_linearize_require_a_callable():
    with pytest.raises(TypeError, match="Expected a callable value"):
        fluxion.jvp(3, (1.0,), (1.0,))
    with pytest.raises(TypeError, match="Expected a callable value"):
        fluxion.linearize(3, 1.0)
    with pytest.raises(TypeError, match="Expected a callable value"):
        fluxion.vjp(3, 1.0)


@pytest.mark.parametrize("static_argnums", [3, (0, 1), -2])
def test_static_argnums_beyond_the_signature(static_argnums):
    with pytest.raises(ValueError, match=r"static_argnums=.*only accepts 1 positional"):
        fluxion.jit(lambda a: a, static_argnums=static_argnums)


def test_static_argnums_with_varargs_are_accepted():
    f = fluxion.jit(lambda *args: args[0] * args[3], static_argnums=3)
    assert float(f(2.0, 0, 0, 5)) == 10.0


@pytest.mark.parametrize("use", [
    lambda x: x + 1,
    lambda x: jnp.sin(x),
    lambda x: fluxion.jit(lambda a: a * 2)(x),
    lambda x: fluxion.jit(lambda a, b: a * b)(jnp.ones(3), x),
    lambda x: np.asarray(x),
])
def test_using_a_deleted_array_says_so(use):
    x = jnp.arange(3.0)
    x.delete()
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=f32\[3\]"):
        use(x)


def test_using_a_donated_array_says_so():
    f = fluxion.jit(lambda a: a * 2, donate_argnums=0)
    x = jnp.arange(3.0)
    f(x)
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        f(x)


@pytest.mark.parametrize("make", [
    lambda: jnp.zeros((2**40, 2**40)),
    lambda: jnp.ones((2**31, 2**31, 4), jnp.float32),
    lambda: fluxion.jit(lambda x: jnp.broadcast_to(x, (2**40, 2**40)))(1.0),
    lambda: fluxion.eval_shape(lambda: jnp.zeros((2**62, 4))),
])
def test_shapes_whose_size_overflows_are_refused_before_xla(make):
    # XLA aborts the whole process on these (JAX too).
    with pytest.raises(ValueError, match="more than any array can hold"):
        make()
