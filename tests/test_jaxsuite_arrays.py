"""Arrays, meshes and partition specs where JAX 0.10.2's array_test found fluxion lacking.
Each case runs on JAX (the oracle) and on fluxion, eagerly and under jit where it applies."""
import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp

LIBS = [(jax, jjnp), (fluxion, jnp)]
IDS = ["jax", "fluxion"]


def _single_device(lib, np_):
    sharding = lib.sharding.SingleDeviceSharding(lib.devices()[0])
    return sharding, lib.device_put(np_.arange(16).reshape(8, 2), sharding)


@pytest.mark.parametrize("lib, np_", LIBS, ids=IDS)
def test_make_array_from_single_device_arrays_checks_the_dtype(lib, np_):
    sharding, arr = _single_device(lib, np_)
    made = lib.make_array_from_single_device_arrays((8, 2), sharding, [arr], dtype=np.int32)
    np.testing.assert_array_equal(made, np.arange(16).reshape(8, 2))
    with pytest.raises(ValueError, match=re.escape(
            "If `dtype` is provided to `jax.make_array_from_single_device_arrays`, it must "
            "match the dtype of the addressable shards. Got dtype=float32 and shard "
            "dtype=int32")):
        lib.make_array_from_single_device_arrays((8, 2), sharding, [arr], dtype=np.float32)


@pytest.mark.parametrize("lib, np_", LIBS, ids=IDS)
def test_make_array_from_single_device_arrays_wants_a_list(lib, np_):
    x = np_.arange(10)
    made = lib.make_array_from_single_device_arrays(x.shape, x.sharding, (x,))  # a tuple is fine
    np.testing.assert_array_equal(made, np.arange(10))
    for call in (lambda: lib.make_array_from_single_device_arrays(x.shape, x.sharding, x),
                 lambda: lib.jit(lambda t: lib.make_array_from_single_device_arrays(
                     t.shape, x.sharding, t))(x)):
        with pytest.raises(TypeError, match="jax.make_array_from_single_device_arrays `arrays` "
                                            "argument must be a list or tuple, but got"):
            call()


@pytest.mark.parametrize("lib, np_", LIBS, ids=IDS)
def test_make_array_from_single_device_arrays_refuses_traced_arrays(lib, np_):
    x = np_.arange(10)
    with pytest.raises(ValueError, match="jax.make_array_from_single_device_arrays requires a "
                                         "list of concrete arrays as input, but got types"):
        lib.jit(lambda t: lib.make_array_from_single_device_arrays(t.shape, x.sharding, [t]))(x)


@pytest.mark.parametrize("lib", [jax, fluxion], ids=IDS)
def test_partition_spec_entries_are_normalized(lib):
    P = lib.P
    assert P((), "x") == P(None, "x") and hash(P((), "x")) == hash(P(None, "x"))
    assert P(("x",)) == P("x") and P(["x", "y"]) == P(("x", "y"))
    assert repr(P((), ("x",), ["y", "z"])) == "P(None, 'x', ('y', 'z'))"
    assert P("x", "y", "z").index("z") == 2


@pytest.mark.parametrize("lib", [jax, fluxion], ids=IDS)
@pytest.mark.parametrize("parts", [("x", "y", ("z", ("a",))), ((("a", "b"), "c"),)])
def test_partition_spec_refuses_nested_tuples(lib, parts):
    with pytest.raises(ValueError, match="A tuple inside PartitionSpec cannot contain a nested "
                                         "tuple"):
        lib.P(*parts)


@pytest.mark.parametrize("lib", [jax, fluxion], ids=IDS)
def test_partition_spec_cannot_be_subclassed(lib):
    with pytest.raises(TypeError, match="Subclassing `jax.P` is prohibited"):
        type("MyP", (lib.P,), {})


@pytest.mark.parametrize("lib", [jax, fluxion], ids=IDS)
def test_empty_meshes_have_size_zero(lib):
    mesh = lib.sharding.Mesh(devices=np.empty((), dtype=object), axis_names=[])
    assert mesh.empty and mesh.size == 0
    assert mesh.abstract_mesh.empty and mesh.abstract_mesh.size == 0
    abstract = lib.sharding.AbstractMesh((), ())
    assert abstract.empty and abstract.size == 0
    one = lib.sharding.Mesh(np.array(lib.devices()[0]), ())  # a scalar mesh is not empty
    assert not one.empty and one.size == 1


@pytest.mark.parametrize("lib", [jax, fluxion], ids=IDS)
def test_mesh_axis_names_cannot_be_none(lib):
    with pytest.raises(ValueError, match=re.escape("Mesh axis names cannot be None. Got: "
                                                   "(None, 'x')")):
        lib.sharding.Mesh(lib.devices(), (None, "x"))


@pytest.mark.parametrize("lib", [jax, fluxion], ids=IDS)
def test_a_single_axis_type_is_one_axis_type(lib):
    explicit = lib.sharding.AxisType.Explicit
    mesh = lib.sharding.AbstractMesh((2,), "x", axis_types=explicit)
    assert mesh.axis_types == (explicit,)
    with pytest.raises(ValueError, match=re.escape(
            "Number of axis names should match the number of axis_types. Got "
            "axis_names=('data', 'model') and axis_types=(Explicit,)")):
        lib.make_mesh((1, 1), ("data", "model"), axis_types=explicit)


@pytest.mark.parametrize("lib", [jax, fluxion], ids=IDS)
@pytest.mark.parametrize("data, global_shape", [
    (np.arange(10).reshape(2, 5), None), ({"a": np.arange(10).reshape(2, 5)}, (2, 5)),
    ({"a": np.arange(10).reshape(2, 5)}, {"a": (2, 5)})])
def test_process_local_data_on_a_device(lib, data, global_shape):
    device = lib.devices()[0]
    out = lib.make_array_from_process_local_data(device, data, global_shape)
    lib.tree.map(np.testing.assert_array_equal, out, data)
    assert lib.tree.leaves(out)[0].sharding == lib.sharding.SingleDeviceSharding(device)


@pytest.mark.parametrize("lib", [jax, fluxion], ids=IDS)
@pytest.mark.parametrize("global_shape", [(2, 8), {"a": (2, 6)}, {"a": (2, 5), "b": (3, 5)}])
def test_process_local_data_on_a_device_checks_the_global_shape(lib, global_shape):
    with pytest.raises(ValueError):
        lib.make_array_from_process_local_data(
            lib.devices()[0], {"a": np.arange(10).reshape(2, 5)}, global_shape)
