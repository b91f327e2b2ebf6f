"""Device meshes and partition specs (`fluxion.sharding.Mesh`, `PartitionSpec`)."""
from __future__ import annotations

import math

import numpy as np


class PartitionSpec(tuple):
    """How each array dimension is split over mesh axes: a mesh axis name, a tuple of names,
    or None (not split) per dimension; missing trailing dimensions are not split."""

    def __new__(cls, *parts):
        return super().__new__(cls, parts)

    def __repr__(self):
        return "PartitionSpec(" + ", ".join(repr(p) for p in self) + ")"

    def axes_of(self, dim: int) -> tuple:
        if dim >= len(self) or self[dim] is None:
            return ()
        p = self[dim]
        return tuple(p) if isinstance(p, (tuple, list)) else (p,)


P = PartitionSpec


class DuplicateSpecError(ValueError):
    """A PartitionSpec maps one mesh axis to more than one dimension (JAX's name)."""


class Mesh:
    """An n-dimensional array of devices with named axes."""

    def __init__(self, devices, axis_names):
        self.devices = np.asarray(devices, dtype=object)
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        self.axis_names = tuple(axis_names)
        if self.devices.ndim != len(self.axis_names):
            raise ValueError(f"Mesh requires the ndim of its first argument (`devices`) to equal "
                             f"the length of its second argument (`axis_names`), but got "
                             f"devices.ndim == {self.devices.ndim} and len(axis_names) == "
                             f"{len(self.axis_names)}.")

    @property
    def shape(self) -> dict:
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self) -> tuple:
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        return int(self.devices.size)

    @property
    def device_ids(self):
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names})"


def make_mesh(axis_shapes, axis_names, *, devices=None, axis_types=None):
    """A mesh of the first prod(axis_shapes) devices, in device order."""
    from fluxion._src.compiler import backend
    devices = list(devices) if devices is not None else backend.get_backend().devices
    n = math.prod(axis_shapes)
    if n > len(devices):
        raise ValueError(f"Number of devices {len(devices)} must be >= the product of mesh_shape "
                         f"{tuple(axis_shapes)}")
    arr = np.empty(n, dtype=object)
    arr[:] = devices[:n]
    return Mesh(arr.reshape(tuple(axis_shapes)), axis_names)
