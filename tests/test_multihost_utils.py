"""fluxion.experimental.multihost_utils in one process (the two-process checks run in
tests/parallel/global_array_worker.py): assert_equal, live_devices, process_allgather."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion.experimental import multihost_utils as mh


def test_assert_equal_passes_on_a_consistent_tree():
    mh.assert_equal({"a": np.arange(3), "b": (1.5, jnp.ones((2, 2)))}, "unused")


def test_assert_equal_fails_like_jax_on_nan():
    jax_mh = pytest.importorskip("jax.experimental.multihost_utils")
    tree = {"x": np.array([1.0, np.nan])}
    with pytest.raises(AssertionError) as theirs:
        jax_mh.assert_equal(tree, "nan here")
    with pytest.raises(AssertionError) as ours:
        mh.assert_equal(tree, "nan here")
    assert str(ours.value) == str(theirs.value)
    assert str(ours.value).startswith("nan here. Expected: {'x': array([ 1., nan])}")


def test_process_allgather_single_process_shapes_match_jax():
    jax_mh = pytest.importorskip("jax.experimental.multihost_utils")
    tree = {"s": np.float32(2.0), "v": np.arange(3, dtype=np.int32)}
    for tiled in (False, True):
        ours, theirs = mh.process_allgather(tree, tiled), jax_mh.process_allgather(tree, tiled)
        for k in tree:
            assert np.shape(ours[k]) == np.shape(theirs[k])
            np.testing.assert_array_equal(ours[k], theirs[k])


def test_live_devices_needs_distributed():
    with pytest.raises(RuntimeError, match="not initialized"):
        with mh.live_devices(fluxion.devices()):
            pass
    assert issubclass(mh.ProcessFailureError, Exception)
