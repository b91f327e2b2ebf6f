"""Shardings of single-device Arrays, in the test process's one device (the 8-device cases are
tests/parallel/cases_sharding.py)."""
import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion.sharding import (AbstractMesh, NamedSharding, PartitionSpec as P,
                              SingleDeviceSharding, Sharding)


def test_single_device_array_sharding_and_shards():
    x = jnp.arange(6.0).reshape(2, 3)
    s = x.sharding
    assert isinstance(s, SingleDeviceSharding) and isinstance(s, Sharding)
    assert s == SingleDeviceSharding(jax.devices()[0]) and s.device_set == {jax.devices()[0]}
    assert s.is_fully_replicated and x.is_fully_replicated and x.is_fully_addressable
    (shard,) = x.addressable_shards
    assert shard.device == jax.devices()[0] and shard.index == (slice(None), slice(None))
    assert shard.replica_id == 0
    np.testing.assert_array_equal(np.asarray(shard.data), np.arange(6.0).reshape(2, 3))
    assert len(x.global_shards) == 1


def test_device_put_with_single_device_and_one_device_mesh():
    a = np.arange(4.0, dtype=np.float32)
    x = jax.device_put(a, SingleDeviceSharding(jax.devices()[0]))
    assert x.sharding == SingleDeviceSharding(jax.devices()[0])
    mesh = jax.make_mesh((1,), ("x",))
    y = jax.device_put(a, NamedSharding(mesh, P("x")))
    assert y.sharding == NamedSharding(mesh, P("x"))
    assert y.is_fully_replicated
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda t: t * 2)(y)), a * 2)
    z = jax.jit(lambda t: jax.sharding.reshard(t + 1, NamedSharding(mesh, P("x"))))(a)
    np.testing.assert_array_equal(np.asarray(z), a + 1)
    auto = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    z = jax.jit(lambda t: jax.lax.with_sharding_constraint(t + 1, NamedSharding(auto, P("x"))))(a)
    np.testing.assert_array_equal(np.asarray(z), a + 1)
    with pytest.raises(ValueError, match="only refer to Auto axes"):  # Explicit: as JAX
        jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P("x")))


def test_abstract_mesh_and_errors():
    m = AbstractMesh((2, 4), ("a", "b"))
    assert m.shape == {"a": 2, "b": 4} and m.size == 8
    with pytest.raises(ValueError, match="must be >="):
        jax.make_mesh((len(jax.devices()) + 1,), ("x",))
    with pytest.raises(TypeError, match="Sharding or a PartitionSpec"):
        jax.lax.with_sharding_constraint(jnp.ones(2), "x")


def test_partition_spec_repr_is_jaxs():
    import importlib
    real_jax_sharding = importlib.import_module("jax.sharding")
    for parts in [(), ("i",), ("a", "b"), (None, "a"), (("a", "b"), None)]:
        assert repr(P(*parts)) == repr(real_jax_sharding.PartitionSpec(*parts))


def _sharding_reprs(lib):
    """Printed forms and memory kinds of single-device and one-device-mesh shardings."""
    from importlib import import_module
    sharding = import_module(f"{lib.__name__}.sharding")
    device = lib.devices()[0]
    x = lib.numpy.arange(3.0)
    mesh = lib.make_mesh((1,), ("i",))
    named = sharding.NamedSharding(mesh, sharding.PartitionSpec("i"))
    shardings = [x.sharding, lib.jit(lambda a: a * 2)(x).sharding,
                 sharding.SingleDeviceSharding(device),
                 sharding.SingleDeviceSharding(device, memory_kind="device"),
                 sharding.SingleDeviceSharding(device, memory_kind="pinned_host"),
                 named, lib.device_put(x, named).sharding,
                 named.with_memory_kind("pinned_host")]
    return ([(repr(s), s.memory_kind) for s in shardings],
            shardings[2] == shardings[3], shardings[2] == shardings[4])


def test_sharding_repr_and_memory_kind_are_jaxs():
    import jax as real_jax
    assert _sharding_reprs(jax) == _sharding_reprs(real_jax)


def test_unknown_memory_kind_raises_value_error():
    with pytest.raises(ValueError, match="Got memory kind: bogus"):
        SingleDeviceSharding(jax.devices()[0], memory_kind="bogus")
