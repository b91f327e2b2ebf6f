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
