"""Device meshes for `Mesh` (`jax.experimental.mesh_utils`).

fluxion runs on CPU and GPU backends, where the mesh is the device list reshaped (GPU
devices sorted by their global id first, as XLA numbers them by topology). TPU topologies
(and the contiguous-submesh and axis-splitting options that only matter there) are not
modelled; `device_kind_handler_dict` lets a caller register a builder for a device kind.
"""
from __future__ import annotations

import collections
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["create_device_mesh", "create_hybrid_device_mesh", "device_kind_handler_dict"]

# device_kind -> fun(mesh_shape, devices, *, contiguous_submeshes) -> np.ndarray | None
device_kind_handler_dict: dict[str, Callable[..., np.ndarray | None]] = {}


def _int_sizes(mesh_shape) -> tuple[int, ...] | None:
    try:
        return tuple(int(s) for s in mesh_shape)
    except (TypeError, ValueError):
        return None


def _all_devices():
    from fluxion._src.api import devices
    return devices()


def create_device_mesh(mesh_shape: Sequence[int], devices: Sequence[Any] | None = None, *,
                       contiguous_submeshes: bool = False,
                       allow_split_physical_axes: bool = False) -> np.ndarray:
    """An array of devices of shape `mesh_shape`, to build a `Mesh` from.

    Parameters
    ----------
    mesh_shape : sequence of int, the logical mesh shape (axes by increasing communication).
    devices : sequence of devices (default: `fluxion.devices()`).
    contiguous_submeshes, allow_split_physical_axes : bool, TPU topology options; CPU and GPU
        meshes do not depend on them.

    Returns
    -------
    np.ndarray of devices with shape `mesh_shape`.

    Raises
    ------
    ValueError: if `mesh_shape` is not a sequence of ints or its product is not the number
        of devices.
    """
    if devices is None:
        devices = _all_devices()
    shape = _int_sizes(mesh_shape)
    if shape is None:
        raise ValueError("`mesh_shape` passed to `create_device_mesh` should be a sequence of"
                         f" ints. Got {mesh_shape}")
    if math.prod(shape) != len(devices):
        raise ValueError(f"Number of devices {len(devices)} must equal the product "
                         f"of mesh_shape {shape}")
    last = devices[-1]
    handler = device_kind_handler_dict.get(last.device_kind)
    if handler is not None:
        mesh = handler(shape, devices, contiguous_submeshes=contiguous_submeshes)
        if mesh is not None:
            return mesh
    if last.platform == "tpu":
        raise NotImplementedError(
            "create_device_mesh: fluxion does not model TPU topologies; pass a mesh built "
            "with np.asarray(devices).reshape(mesh_shape) or register a builder in "
            "device_kind_handler_dict")
    if last.platform == "gpu":
        # jax.devices() lists devices by process; ids follow XLA's topology-aware numbering.
        return np.asarray(sorted(devices, key=lambda d: d.id)).reshape(shape)
    return np.asarray(devices).reshape(shape)


def _nested_blocks(grid: np.ndarray, meshes: list) -> list:
    """`grid` of granule numbers as nested lists of their meshes, for np.block."""
    if grid.ndim == 0:
        return meshes[int(grid)]
    return [_nested_blocks(g, meshes) for g in grid]


def create_hybrid_device_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int],
                              devices: Sequence[Any] | None = None, *,
                              process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """A device mesh for hybrid parallelism: fast-network meshes of shape `mesh_shape`
    inside each granule (slice, or process), tiled over a `dcn_mesh_shape` grid of granules.

    Parameters
    ----------
    mesh_shape : sequence of int, the mesh within one granule.
    dcn_mesh_shape : sequence of int, the grid of granules (same number of axes).
    devices : sequence of devices (default: `fluxion.devices()`).
    process_is_granule : bool, group devices by `process_index` instead of `slice_index`.
    should_sort_granules_by_key : bool, order granules by their key.
    allow_split_physical_axes : bool, as in `create_device_mesh`.

    Returns
    -------
    np.ndarray of devices with shape `mesh_shape * dcn_mesh_shape` (elementwise).

    Raises
    ------
    ValueError: if devices lack the granule attribute, the number of granules is not the
        product of `dcn_mesh_shape`, or a granule's device count is not that of `mesh_shape`.
    """
    if devices is None:
        devices = _all_devices()
    attr = "process_index" if process_is_granule else "slice_index"
    if not hasattr(devices[0], attr):
        raise ValueError(f"Device {devices[0]} does not have attribute {attr}. See"
                         " `process_is_granule` option.")
    by_key = collections.defaultdict(list)
    for d in devices:
        by_key[getattr(d, attr)].append(d)
    keys = sorted(by_key) if should_sort_granules_by_key else list(by_key)
    granules = [by_key[k] for k in keys]
    if math.prod(dcn_mesh_shape) != len(granules):
        raise ValueError(f"Number of slices {len(granules)} must equal the product of "
                         f"dcn_mesh_shape {dcn_mesh_shape}")
    meshes = [create_device_mesh(mesh_shape, g,
                                 allow_split_physical_axes=allow_split_physical_axes)
              for g in granules]
    grid = np.arange(len(granules)).reshape(dcn_mesh_shape)
    return np.block(_nested_blocks(grid, meshes))
