"""fluxion's device queries and jit arguments against JAX 0.10.2 (keywords, error classes)."""
import jax
import numpy as np
import pytest

import fluxion


@pytest.mark.parametrize("name", ["devices", "local_devices", "device_count",
                                  "local_device_count", "process_index", "process_count",
                                  "process_indices"])
def test_device_queries_take_jax_backend_keyword(name):
    # The keyword was named backend_name: jax code calling local_devices(backend="cpu") failed.
    got = getattr(fluxion, name)(backend="cpu")
    want = getattr(jax, name)(backend="cpu")
    assert (len(got) == len(want)) if isinstance(got, list) else got == want


def test_masked_array_arguments_to_jit_are_a_value_error():
    # The mask was dropped silently; JAX refuses masked arrays as jit arguments.
    masked = np.ma.array([1, 2], mask=[True, False])
    with pytest.raises(ValueError, match="numpy masked arrays are not supported"):
        fluxion.jit(lambda x: x * 2)(masked)
    with pytest.raises(ValueError, match="numpy masked arrays are not supported"):
        jax.jit(lambda x: x * 2)(masked)
    np.testing.assert_array_equal(fluxion.numpy.array(masked), [1, 2])  # as np.array, unmasked


_MASKED_USES = {
    "device_put": lambda lib, v: lib.device_put(v),
    "device_put to a device": lambda lib, v: lib.device_put(v, lib.devices()[0]),
    "asarray": lambda lib, v: lib.numpy.asarray(v),
    "array without copy": lambda lib, v: lib.numpy.array(v, copy=False),
    "jnp function": lambda lib, v: lib.numpy.sin(v),
    "jnp operator": lambda lib, v: lib.numpy.add(v, 1),
}


@pytest.mark.parametrize("use", sorted(_MASKED_USES))
def test_masked_arrays_are_refused_beyond_jit(use):
    masked = np.ma.array([1., 2., 3.], mask=[True, False, True])
    run = _MASKED_USES[use]
    with pytest.raises(ValueError, match="numpy masked arrays are not supported"):
        run(jax, masked)
    with pytest.raises(ValueError, match="numpy masked arrays are not supported"):
        run(fluxion, masked)


@pytest.mark.parametrize("kw", [{}, {"dtype": np.int32}, {"ndmin": 2}])
def test_jnp_array_copies_the_data_of_masked_arrays(kw):
    masked = np.ma.array([1., 2., 3.], mask=[True, False, True])
    got, want = fluxion.numpy.array(masked, **kw), jax.numpy.array(masked, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(fluxion.numpy.asarray(masked, copy=True)),
                                  [1., 2., 3.])
