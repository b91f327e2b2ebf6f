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
