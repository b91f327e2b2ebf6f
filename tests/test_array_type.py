"""`fluxion.Array` is the type of every array, concrete or traced, as `jax.Array` is."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp


def _kinds(lib, np_):
    """isinstance(value, lib.Array) and (value, np_.ndarray) for values of each kind."""
    seen = []

    def note(v):
        seen.append((isinstance(v, lib.Array), isinstance(v, np_.ndarray)))

    x = np_.ones(3)
    note(x)
    lib.jit(lambda t: note(t) or t)(x)
    lib.grad(lambda t: note(t) or t.sum())(x)
    lib.vmap(lambda t: note(t) or t)(x)
    lib.jvp(lambda t: note(t) or t, (x,), (x,))
    lib.lax.scan(lambda c, t: (note(t) or c, None), 0.0, x)
    note(lib.random.key(0))
    note(lib.random.split(lib.random.key(0)))
    for other in (np.ones(3), np.float32(1), 1.0, [1.0], None):
        note(other)
    return seen


def test_isinstance_matches_jax():
    assert _kinds(fluxion, jnp) == _kinds(jax, jjnp)


def test_tracers_are_arrays_and_concrete_values_are_not_tracers():
    def f(x):
        assert isinstance(x, fluxion.Array) and isinstance(x, fluxion.core.Tracer)
        return x
    fluxion.jit(f)(jnp.ones(2))
    x = jnp.ones(2)
    assert isinstance(x, fluxion.Array) and not isinstance(x, fluxion.core.Tracer)


def test_filtering_a_pytree_by_array_type_under_jit():
    """Library code (equinox's is_array, optax's tree utilities) splits a pytree into
    arrays and everything else with isinstance(x, jax.Array): under jit the traced leaves
    must count as arrays."""
    def scaled(lib, np_):
        def f(params):
            return lib.tree.map(lambda v: v * 2 if isinstance(v, lib.Array) else v, params)
        params = {"w": np_.arange(3.0), "b": np_.ones(2)}
        return lib.jit(f)(params)
    got, want = scaled(fluxion, jnp), scaled(jax, jjnp)
    for k in ("w", "b"):
        np.testing.assert_array_equal(got[k], want[k])


def test_abstract_type_cannot_be_instantiated():
    with pytest.raises(TypeError, match="cannot be instantiated"):
        fluxion.Array()
    assert jnp.ndarray is fluxion.Array and fluxion.typing.ArrayLike is not None


def test_buffer_queries():
    x = jnp.ones(3)
    assert x.on_device_size_in_bytes() == jjnp.ones(3).on_device_size_in_bytes() == 12
    assert isinstance(x.unsafe_buffer_pointer(), int) and x.unsafe_buffer_pointer() != 0


@pytest.mark.parametrize("np_", [jjnp, jnp], ids=["jax", "fluxion"])
def test_is_ready_after_the_computation(np_):
    lib = jax if np_ is jjnp else fluxion
    for x in (np_.arange(4), lib.jit(lambda a: a * 2)(np_.arange(4))):
        x.block_until_ready()
        assert x.is_ready() is True


@pytest.mark.parametrize("np_", [jjnp, jnp], ids=["jax", "fluxion"])
def test_an_array_as_a_numpy_dtype_is_deprecated(np_):
    x = np_.arange(4, dtype=np.int16)
    with pytest.warns(DeprecationWarning, match="Implicit conversion of an array to a dtype"):
        assert np.dtype(x) == np.int16
    with pytest.warns(DeprecationWarning, match="dtype=arr.dtype"):
        np.result_type(x)
