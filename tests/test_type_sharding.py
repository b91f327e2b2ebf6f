"""The sharding in a plain value's type (`typeof(x).sharding`) and where it may be passed,
against JAX 0.10.2: optax's `tree.random_like` passes it as `out_sharding=` to the samplers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_type_sharding_matches_jax(shape):
    ours = fluxion.typeof(fnp.ones(shape)).sharding
    theirs = jax.typeof(jnp.ones(shape)).sharding
    assert repr(ours) == repr(theirs)
    assert ours.spec == tuple(theirs.spec)
    assert ours.is_fully_replicated
    assert ours == fluxion.typeof(fnp.zeros(shape)).sharding
    aval = fluxion.typeof(fnp.ones(shape))
    assert (aval.itemsize, aval.nbytes) == (4, 4 * int(np.prod(shape)))


def test_type_sharding_inside_jit():
    seen = []
    fluxion.jit(lambda x: seen.append(repr(fluxion.typeof(x).sharding)) or x)(fnp.ones(3))
    expected = []
    jax.jit(lambda x: expected.append(repr(jax.typeof(x).sharding)) or x)(jnp.ones(3))
    assert seen == expected


@pytest.mark.parametrize("jitted", [False, True])
def test_type_sharding_as_out_sharding(jitted):
    def sample(fw, key):
        s = fw.typeof(fw.numpy.ones(2)).sharding
        return (fw.random.normal(key, (2,), out_sharding=s), fw.numpy.zeros(2, out_sharding=s))

    ours = (fluxion.jit(sample, static_argnums=0) if jitted else sample)(fluxion, fluxion.random.key(3))
    theirs = (jax.jit(sample, static_argnums=0) if jitted else sample)(jax, jax.random.key(3))
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_type_sharding_places_nothing():
    s = fluxion.typeof(fnp.ones(2)).sharding
    js = jax.typeof(jnp.ones(2)).sharding
    for ours, theirs in [
            (lambda: fluxion.lax.with_sharding_constraint(fnp.ones(2), s),
             lambda: jax.lax.with_sharding_constraint(jnp.ones(2), js)),
            (lambda: fluxion.jit(lambda x: x, out_shardings=s)(fnp.ones(2)),
             lambda: jax.jit(lambda x: x, out_shardings=js)(jnp.ones(2))),
            (lambda: fluxion.device_put(fnp.ones(2), s), lambda: jax.device_put(jnp.ones(2), js)),
            (lambda: s.device_set, lambda: js.device_set)]:
        with pytest.raises(ValueError) as expected:
            theirs()
        with pytest.raises(ValueError) as got:
            ours()
        if "empty NamedSharding" in str(expected.value):
            assert "empty NamedSharding" in str(got.value)
