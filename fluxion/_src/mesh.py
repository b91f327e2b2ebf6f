"""Device meshes and partition specs (`fluxion.sharding.Mesh`, `AbstractMesh`, `PartitionSpec`)."""
from __future__ import annotations

import enum
import math
import threading

import numpy as np


class PartitionSpec(tuple):
    """How each array dimension is split over mesh axes: a mesh axis name, a tuple of names,
    or None (not split) per dimension; missing trailing dimensions are not split.

    Entries are normalized as in JAX: a list becomes a tuple, an empty tuple None and a
    one-name tuple that name, so `P((), ('x',))` is `P(None, 'x')`."""

    def __new__(cls, *parts):
        return super().__new__(cls, map(_canonical_part, parts))

    def __init_subclass__(cls, **kwargs):
        raise TypeError("Subclassing `jax.P` is prohibited.")

    def __repr__(self):  # JAX's form: P('x',), P('x', None), P()
        return f"P({repr(tuple(self))[1:-1]})"

    def __reduce__(self):
        return (PartitionSpec, tuple(self))

    def axes_of(self, dim: int) -> tuple:
        if dim >= len(self) or self[dim] is None:
            return ()
        p = self[dim]
        return tuple(p) if isinstance(p, (tuple, list)) else (p,)

    def used_axes(self) -> tuple:
        return tuple(a for d in range(len(self)) for a in self.axes_of(d))


P = PartitionSpec


def _canonical_part(part):
    """One PartitionSpec entry in canonical form (see `PartitionSpec`)."""
    if isinstance(part, list):
        part = tuple(part)
    if not isinstance(part, tuple):
        return part
    for name in part:
        if isinstance(name, (tuple, list)):
            raise ValueError("A tuple inside PartitionSpec cannot contain a nested tuple. Got "
                             f"partition: {part} and the nested tuple: {name}")
    if len(part) <= 1:
        return part[0] if part else None
    return part


class DuplicateSpecError(ValueError):
    """A PartitionSpec maps one mesh axis to more than one dimension (JAX's name)."""


class AxisType(enum.Enum):
    """How a mesh axis takes part in sharding: `Auto` (XLA's partitioner chooses), `Explicit`
    (the sharding is part of each value's type, see sharding_types.py) or `Manual` (shard_map)."""
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self):
        return self.name


class AbstractMesh:
    """A mesh's axis names and sizes, without devices; a concrete mesh's (`mesh.abstract_mesh`)
    also records its kind of device (`abstract_device`), which is part of its identity."""

    def __init__(self, axis_sizes, axis_names, axis_types=None, *, abstract_device=None):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        self.axis_sizes = tuple(int(s) for s in axis_sizes)
        self.axis_names = tuple(axis_names)
        if len(self.axis_sizes) != len(self.axis_names):
            raise ValueError(f"AbstractMesh: {len(self.axis_sizes)} axis sizes but "
                             f"{len(self.axis_names)} axis names")
        self.axis_types = _axis_types(axis_types, self.axis_names)
        self.abstract_device = abstract_device

    @property
    def shape(self) -> dict:
        return dict(zip(self.axis_names, self.axis_sizes))

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        return math.prod(self.axis_sizes) if self.axis_sizes else 0

    @property
    def empty(self) -> bool:
        return self.size == 0

    explicit_axes = property(lambda self: _of_type(self, AxisType.Explicit))
    auto_axes = property(lambda self: _of_type(self, AxisType.Auto))
    manual_axes = property(lambda self: _of_type(self, AxisType.Manual))

    def __eq__(self, other):
        return (type(other) is AbstractMesh and self.axis_sizes == other.axis_sizes
                and self.axis_names == other.axis_names and self.axis_types == other.axis_types
                and self.abstract_device == other.abstract_device)

    def __hash__(self):
        return hash((self.axis_sizes, self.axis_names, self.axis_types, self.abstract_device))

    @property
    def abstract_mesh(self) -> "AbstractMesh":
        return self

    def update_axis_types(self, name_to_type: dict) -> "AbstractMesh":
        return AbstractMesh(self.axis_sizes, self.axis_names,
                            tuple(name_to_type.get(n, t)
                                  for n, t in zip(self.axis_names, self.axis_types)),
                            abstract_device=self.abstract_device)

    def __repr__(self):
        axes = ", ".join(f"{n!r}: {s}" for n, s in self.shape_tuple) or "()"
        device = self.abstract_device
        kind = "" if device is None else (f", device_kind={device.device_kind}, "
                                          f"num_cores={device.num_cores}, "
                                          f"platform={device.platform}")
        return f"AbstractMesh({axes}, axis_types={_types_text(self.axis_types)}{kind})"


def _abstract_device(device):
    """JAX's description of a mesh's devices: kind, core count (TPU and GPU) and platform."""
    from fluxion._src.runtime_names import AbstractDevice
    if device is None:
        return None
    cores = {"tpu": "num_cores", "gpu": "core_count"}.get(device.platform)
    return AbstractDevice(device.device_kind, getattr(device, cores, None) if cores else None,
                          device.platform)


def _of_type(mesh, kind) -> tuple:
    return tuple(n for n, t in zip(mesh.axis_names, mesh.axis_types) if t is kind)


def _types_text(types) -> str:
    return "(" + ", ".join(t.name for t in types) + ("," if len(types) == 1 else "") + ")"


def _axis_types(axis_types, axis_names: tuple) -> tuple:
    """One AxisType per axis name (all Auto by default); a single AxisType is one axis's."""
    if axis_types is None:
        return (AxisType.Auto,) * len(axis_names)
    axis_types = (axis_types,) if isinstance(axis_types, AxisType) else tuple(axis_types)
    if not all(isinstance(t, AxisType) for t in axis_types):
        raise TypeError(f"axis_types must be AxisType values, got {axis_types}")
    if len(axis_types) != len(axis_names):
        raise ValueError("Number of axis names should match the number of axis_types. Got "
                         f"axis_names={axis_names} and axis_types={axis_types}")
    return axis_types


class Mesh:
    """An n-dimensional array of devices with named axes.

    Used as a context manager (`with mesh:`) it is the mesh that bare PartitionSpecs refer to,
    as with `set_mesh`."""

    def __init__(self, devices, axis_names, axis_types=None):
        self.devices = np.asarray(devices, dtype=object)
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        self.axis_names = tuple(axis_names)
        if any(name is None for name in self.axis_names):
            raise ValueError(f"Mesh axis names cannot be None. Got: {self.axis_names}")
        if self.devices.ndim != len(self.axis_names):
            raise ValueError(f"Mesh requires the ndim of its first argument (`devices`) to equal "
                             f"the length of its second argument (`axis_names`), but got "
                             f"devices.ndim == {self.devices.ndim} and len(axis_names) == "
                             f"{len(self.axis_names)}.")
        if len(set(self.axis_names)) != len(self.axis_names):
            raise ValueError(f"Mesh axis names must be unique, got {self.axis_names}")
        self.axis_types = _axis_types(axis_types, self.axis_names)
        # The empty mesh: no axes, and its 0-d device array holds None.
        self._empty = not self.axis_names and self.devices.flat[0] is None
        # Meshes that differ only in axis types hold data alike (`_device_key`) but type it
        # differently, so they are not equal (as in JAX).
        self._device_key = (tuple(getattr(d, "id", None) for d in self.devices.flat),
                            self.devices.shape, self.axis_names)
        self._key = self._device_key + (self.axis_types,)
        self._hash = hash(self._key)

    @property
    def shape(self) -> dict:
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self) -> tuple:
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        return 0 if self._empty else int(self.devices.size)

    @property
    def empty(self) -> bool:
        return self.size == 0

    @property
    def device_ids(self):
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def flat_devices(self) -> tuple:
        """The devices in row-major mesh order: XLA's partition order for this mesh."""
        return tuple(self.devices.flat)

    @property
    def local_devices(self) -> list:
        from fluxion._src.api import process_index
        me = process_index()
        return [d for d in self.devices.flat if d.process_index == me]

    @property
    def local_mesh(self) -> "Mesh":
        """The sub-mesh of this process's devices (they must form a contiguous block)."""
        from fluxion._src.api import process_index
        me = process_index()
        local = np.vectorize(lambda d: d.process_index == me, otypes=[bool])(self.devices)
        block = []
        for axis in range(local.ndim):
            hits = np.flatnonzero(local.any(axis=tuple(a for a in range(local.ndim) if a != axis)))
            if hits.size == 0:
                raise ValueError("the mesh has no device of this process")
            block.append(slice(int(hits[0]), int(hits[-1]) + 1))
        if not local[tuple(block)].all():
            raise ValueError("Devices connected to a single host must form a contiguous "
                             "subcube of the global device mesh")
        return Mesh(self.devices[tuple(block)], self.axis_names, self.axis_types)

    @property
    def abstract_mesh(self) -> AbstractMesh:
        if not self.axis_names:
            return AbstractMesh((), ())
        return AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types,
                            abstract_device=_abstract_device(self.devices.flat[0]))

    explicit_axes = property(lambda self: _of_type(self, AxisType.Explicit))
    auto_axes = property(lambda self: _of_type(self, AxisType.Auto))
    manual_axes = property(lambda self: _of_type(self, AxisType.Manual))

    def update_axis_types(self, name_to_type: dict) -> "Mesh":
        """This mesh with the types of the named axes replaced."""
        return Mesh(self.devices, self.axis_names,
                    tuple(name_to_type.get(n, t)
                          for n, t in zip(self.axis_names, self.axis_types)))

    def __eq__(self, other):
        return type(other) is Mesh and self._key == other._key

    def __hash__(self):
        return self._hash

    def __enter__(self):
        _mesh_stack().append(self)
        return self

    def __exit__(self, *exc):
        _mesh_stack().pop()
        return False

    def __repr__(self):
        return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}, "
                f"axis_types={_types_text(self.axis_types)})")

    def __str__(self):
        return (f"Mesh({', '.join(f'{n!r}: {s}' for n, s in self.shape_tuple)}, "
                f"axis_types={_types_text(self.axis_types)})")


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None):
    """A mesh of the first prod(axis_shapes) devices, in device order.

    Its axes are `AxisType.Explicit` unless `axis_types` says otherwise (as in JAX 0.10)."""
    from fluxion._src.compiler import backend
    axis_shapes = tuple(axis_shapes)
    if isinstance(axis_names, str):
        axis_names = (axis_names,)
    if len(axis_shapes) != len(axis_names):
        raise ValueError(f"Length of axis_shapes {axis_shapes} must match the length of "
                         f"axis_names {tuple(axis_names)}")
    devices = list(devices) if devices is not None else backend.get_backend().devices
    n = math.prod(axis_shapes)
    if n > len(devices):
        raise ValueError(f"Number of devices {len(devices)} must be >= the product of mesh_shape "
                         f"{axis_shapes}")
    arr = np.empty(n, dtype=object)
    arr[:] = devices[:n]
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(axis_shapes)
    return Mesh(arr.reshape(axis_shapes), axis_names, axis_types)


# ---- the mesh that bare PartitionSpecs refer to

_state = threading.local()
_global_mesh = [None]


def _mesh_stack() -> list:
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    return stack


def get_mesh():
    """The mesh set by `set_mesh` or a `with mesh:` block, or None."""
    stack = _mesh_stack()
    return stack[-1] if stack else _global_mesh[0]


class set_mesh:
    """Make `mesh` the mesh that bare PartitionSpecs refer to: for the rest of the program, or
    only inside a `with set_mesh(mesh):` block."""

    def __init__(self, mesh):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"set_mesh expects a Mesh, got {type(mesh).__name__}")
        self._previous = _global_mesh[0]
        _global_mesh[0] = mesh
        self.mesh = mesh

    def __enter__(self):
        return self.mesh

    def __exit__(self, *exc):
        _global_mesh[0] = self._previous
        return False


use_mesh = set_mesh


_abstract_state = threading.local()


class use_abstract_mesh:
    """Inside `with use_abstract_mesh(abstract_mesh):`, `get_abstract_mesh()` is that mesh."""

    def __init__(self, mesh):
        if not isinstance(mesh, AbstractMesh):
            raise ValueError(f"Expected mesh of type AbstractMesh, got {type(mesh).__name__}")
        self.mesh = mesh

    def __enter__(self):
        stack = _abstract_stack()
        stack.append(self.mesh)
        return self.mesh

    def __exit__(self, *exc):
        _abstract_stack().pop()
        return False


def _abstract_stack() -> list:
    stack = getattr(_abstract_state, "stack", None)
    if stack is None:
        stack = _abstract_state.stack = []
    return stack


def get_abstract_mesh() -> AbstractMesh:
    """The abstract mesh of `use_abstract_mesh`, else that of the mesh set with `set_mesh` or
    `with mesh:` (an empty AbstractMesh when there is none)."""
    stack = _abstract_stack()
    if stack:
        return stack[-1]
    mesh = get_mesh()
    return mesh.abstract_mesh if mesh is not None else AbstractMesh((), ())
