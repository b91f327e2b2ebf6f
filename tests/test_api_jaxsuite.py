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


@pytest.mark.parametrize("value", [np.ones((2, 3)), np.arange(3, dtype=np.int8), 1.0, 7, True,
                                   "shape_dtype_struct", "committed", "uncommitted"])
def test_shape_dtype_struct_like(value):
    # ShapeDtypeStruct.like was missing.
    def build(lib, numpy_lib):
        if not isinstance(value, str):
            return value
        if value == "shape_dtype_struct":
            return lib.ShapeDtypeStruct((4,), np.int16)
        if value == "committed":
            return lib.device_put(numpy_lib.ones(3), lib.devices()[0])
        return numpy_lib.ones(3)
    want = jax.ShapeDtypeStruct.like(build(jax, jax.numpy))
    got = fluxion.ShapeDtypeStruct.like(build(fluxion, fluxion.numpy))
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
    assert (got.sharding is None) == (want.sharding is None)
    traced = fluxion.jit(lambda x: fluxion.numpy.zeros(fluxion.ShapeDtypeStruct.like(x).shape))
    assert traced(np.ones((2, 3))).shape == (2, 3)
    assert fluxion.eval_shape(lambda x: x, got) == got
