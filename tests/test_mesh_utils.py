"""fluxion.experimental.mesh_utils against JAX 0.10's on this process's device and on stand-in
CPU/GPU devices (the functions read only a device's platform, kind, id and granule keys).
A real 8-device mesh is checked in tests/test_explicit_axes.py's 8-device child."""
import dataclasses

import jax.experimental.mesh_utils as jax_mesh_utils
import numpy as np
import pytest

import fluxion
from fluxion.experimental import mesh_utils


@dataclasses.dataclass(frozen=True)
class FakeDevice:
    id: int
    platform: str = "cpu"
    device_kind: str = "cpu"
    slice_index: int = 0
    process_index: int = 0


def ids(mesh):
    return np.vectorize(lambda d: d.id)(mesh)


def test_single_device_mesh_builds_a_sharding_mesh():
    mesh = mesh_utils.create_device_mesh((1, 1))
    assert mesh.shape == (1, 1) and mesh[0, 0] == fluxion.devices()[0]
    assert fluxion.sharding.Mesh(mesh, ("x", "y")).shape == {"x": 1, "y": 1}
    hybrid = mesh_utils.create_hybrid_device_mesh((1,), (1,), process_is_granule=True)
    assert hybrid.shape == (1,) and hybrid[0] == fluxion.devices()[0]


@pytest.mark.parametrize("platform", ["cpu", "gpu"])
def test_orderings_match_jax(platform):
    devs = [FakeDevice(i, platform, platform) for i in (5, 2, 7, 0, 3, 6, 1, 4)]
    for shape in [(8,), (2, 4), (2, 2, 2), (1, 8)]:
        got = mesh_utils.create_device_mesh(shape, devs)
        want = jax_mesh_utils.create_device_mesh(shape, devs)
        assert got.shape == want.shape == shape
        np.testing.assert_array_equal(ids(got), ids(want))
    if platform == "gpu":  # sorted by id
        np.testing.assert_array_equal(ids(mesh_utils.create_device_mesh((2, 4), devs)),
                                      np.arange(8).reshape(2, 4))
    else:  # in the order given
        assert list(mesh_utils.create_device_mesh((8,), devs)) == devs


def test_hybrid_mesh_tiles_granules_as_jax():
    devs = [FakeDevice(i, slice_index=s, process_index=1 - s)
            for i, s in zip(range(8), [1, 0, 1, 0, 0, 1, 1, 0])]
    cases = [((2, 2), (2, 1), {}), ((4, 1), (1, 2), {}), ((1, 4), (2, 1), {}),
             ((2, 2), (1, 2), {"process_is_granule": True}),
             ((2, 2), (2, 1), {"should_sort_granules_by_key": False})]
    for mesh_shape, dcn, kw in cases:
        got = mesh_utils.create_hybrid_device_mesh(mesh_shape, dcn, devs, **kw)
        want = jax_mesh_utils.create_hybrid_device_mesh(mesh_shape, dcn, devs, **kw)
        np.testing.assert_array_equal(ids(got), ids(want))
    # slice 0 = devices 1, 3, 4, 7 fill the first block
    got = mesh_utils.create_hybrid_device_mesh((2, 2), (2, 1), devs)
    np.testing.assert_array_equal(ids(got)[:2], [[1, 3], [4, 7]])


def test_errors_as_jax():
    devs = [FakeDevice(i) for i in range(4)]
    for mod in (mesh_utils, jax_mesh_utils):
        with pytest.raises(ValueError, match=r"Number of devices 4 must equal the product "
                                             r"of mesh_shape \(2, 3\)"):
            mod.create_device_mesh((2, 3), devs)
        with pytest.raises(ValueError, match="should be a sequence of ints"):
            mod.create_device_mesh(("a", 2), devs)
        with pytest.raises(ValueError, match="Number of slices 1 must equal the product"):
            mod.create_hybrid_device_mesh((2, 2), (2, 1), devs)
        with pytest.raises(ValueError, match="does not have attribute slice_index"):
            mod.create_hybrid_device_mesh((1,), (1,))
    with pytest.raises(ValueError, match="Number of devices 1 must equal"):
        mesh_utils.create_device_mesh((2,))
    with pytest.raises(NotImplementedError, match="TPU"):
        mesh_utils.create_device_mesh((2,), [FakeDevice(0, "tpu", "TPU v4")] * 2)


def test_device_kind_handlers_are_consulted():
    devs = [FakeDevice(i, device_kind="custom") for i in range(4)]
    mesh_utils.device_kind_handler_dict["custom"] = (
        lambda shape, devices, contiguous_submeshes: np.asarray(devices[::-1]).reshape(shape))
    try:
        np.testing.assert_array_equal(ids(mesh_utils.create_device_mesh((2, 2), devs)),
                                      [[3, 2], [1, 0]])
    finally:
        del mesh_utils.device_kind_handler_dict["custom"]
