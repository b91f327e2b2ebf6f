"""Shardings: how an array's elements are laid out over devices (`fluxion.sharding`).

A sharding maps each device to the index (a tuple of slices) of the block of a global array
it holds. `NamedSharding` says it with a mesh and a PartitionSpec; it is turned into XLA's
HloSharding (for global arrays) and Shardy's `#sdy.sharding` (for the partitioner).
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from fluxion._src.mesh import AbstractMesh, AxisType, Mesh, PartitionSpec, get_mesh


class Sharding:
    """The base class of shardings."""

    memory_kind = None

    def _devices(self, what: str) -> tuple:
        return self._device_assignment

    @property
    def device_set(self) -> set:
        return set(self._devices("device_set"))

    @property
    def addressable_devices(self) -> set:
        from fluxion._src.api import process_index
        me = process_index()
        return {d for d in self._devices("addressable_devices") if d.process_index == me}

    @property
    def is_fully_addressable(self) -> bool:
        return len(self.addressable_devices) == len(self._devices("is_fully_addressable"))

    @property
    def num_devices(self) -> int:
        return len(self._devices("num_devices"))

    def devices_indices_map(self, global_shape) -> dict:
        """device -> the index (tuple of slices) of the block it holds."""
        return dict(zip(self._device_assignment, self._indices(tuple(global_shape))))

    def addressable_devices_indices_map(self, global_shape) -> dict:
        local = self.addressable_devices
        return {d: i for d, i in self.devices_indices_map(global_shape).items() if d in local}

    def shard_shape(self, global_shape) -> tuple:
        index = self._indices(tuple(global_shape))[0]
        return tuple(len(range(*s.indices(n))) for s, n in zip(index, global_shape))

    def is_equivalent_to(self, other, ndim: int) -> bool:
        return (isinstance(other, Sharding)
                and self._device_assignment == other._device_assignment
                and self._hlo_sharding(ndim) == other._hlo_sharding(ndim))

    def with_memory_kind(self, kind):
        """A copy of this sharding naming memory `kind`."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy._memory_kind = _checked_memory_kind(_first_device(self), kind)
        return copy

    # Subclasses define `_device_assignment` (a tuple of devices: XLA's partition order),
    # `_hlo_text(ndim)` and `is_fully_replicated`.
    def _hlo_sharding(self, ndim: int):
        from fluxion._src.compiler import backend
        xla_client, _ = backend._jaxlib()
        return _parse_hlo(xla_client, self._hlo_text(ndim))

    def _indices(self, shape: tuple) -> list:
        return _indices_from_hlo(self._hlo_sharding(len(shape)), shape, len(self._device_assignment))


def _first_device(sharding):
    devices = getattr(sharding, "_device_assignment", None)
    return devices[0] if devices else None  # (a sharding of types may have no devices)


def _memory_kind(sharding):
    """The kind of memory a sharding names: the one asked for, else its devices' default
    ('device'; None without devices), as JAX's. fluxion places every array in the default."""
    kind = sharding.__dict__.get("_memory_kind")
    if kind is not None:
        return kind
    device = _first_device(sharding)
    if device is None:
        return None
    try:
        return device.default_memory().kind
    except Exception:  # a device kind without memory spaces (a stand-in device)
        return "device"


def _memory_kind_suffix(sharding) -> str:
    kind = sharding.memory_kind
    return "" if kind is None else f", memory_kind={kind}"  # JAX's repr


def _checked_memory_kind(device, kind):
    """`kind` (None: the default), after checking that `device` can address it."""
    if kind is None or device is None:
        return kind
    try:
        kinds = [m.kind for m in device.addressable_memories()]
    except Exception:
        kinds = ["device"]
    if kind not in kinds:
        raise ValueError(f"Could not find memory addressable by device {device.device_kind}. "
                         f"Device {device.device_kind} can address the following memory kinds: "
                         f"{', '.join(kinds)}. Got memory kind: {kind}")
    return kind


@functools.lru_cache(maxsize=4096)
def _parse_hlo(xla_client, text):
    return xla_client.HloSharding.from_string(text)


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""

    def __init__(self, device, *, memory_kind=None):
        self._device = device
        self._device_assignment = (device,)
        self._memory_kind = _checked_memory_kind(device, memory_kind)

    memory_kind = property(_memory_kind)
    is_fully_replicated = True
    is_fully_addressable = True

    def _hlo_text(self, ndim):
        return "{replicated}"

    def _indices(self, shape):
        return [(slice(None),) * len(shape)]

    def __eq__(self, other):
        return (type(other) is SingleDeviceSharding and other._device == self._device
                and other.memory_kind == self.memory_kind)

    def __hash__(self):
        return hash(("single", self._device, self.memory_kind))

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}{_memory_kind_suffix(self)})"


class NamedSharding(Sharding):
    """An array split over the axes of `mesh` as `spec` says (see PartitionSpec).

    `mesh` may be an AbstractMesh (no devices), as in the types of traced values
    (`fluxion.typeof(x).sharding`); such a sharding types values but places nothing."""

    def __init__(self, mesh, spec=PartitionSpec(), *, memory_kind=None):
        if not isinstance(mesh, (Mesh, AbstractMesh)):
            raise TypeError(f"NamedSharding needs a Mesh or an AbstractMesh, got "
                            f"{type(mesh).__name__}")
        if spec is None:
            spec = PartitionSpec()
        if not isinstance(spec, PartitionSpec):
            if isinstance(spec, (tuple, list)):
                spec = PartitionSpec(*spec)
            else:
                raise TypeError(f"NamedSharding spec must be a PartitionSpec, got {spec!r}")
        used = spec.used_axes()
        for a in used:
            if a not in mesh.axis_names:
                raise ValueError(f"Resource axis: {a} of {spec} is not found in mesh: "
                                 f"{tuple(mesh.axis_names)}.")
        if len(set(used)) != len(used):
            raise ValueError(f"A single NamedSharding spec specification can map every mesh "
                             f"axis to at most one positional dimension, but {spec} has "
                             f"duplicate entries")
        devices = getattr(mesh, "flat_devices", None)
        self._memory_kind = _checked_memory_kind(devices[0] if devices else None, memory_kind)
        self.mesh = mesh
        self.spec = spec
        # an AbstractMesh's sharding (a type's, `typeof(x).sharding`) has no devices
        self._device_assignment = mesh.flat_devices if isinstance(mesh, Mesh) else None
        self._hash = hash((mesh, spec))

    def _devices(self, what: str) -> tuple:
        if self._device_assignment is None:
            raise ValueError(f"{what} is not implemented for `jax.sharding.AbstractMesh`.")
        return self._device_assignment

    @property
    def is_abstract(self) -> bool:
        """Whether the mesh is an AbstractMesh (the sharding places nothing)."""
        return self._device_assignment is None

    @property
    def is_fully_replicated(self) -> bool:
        return all(self.mesh.shape[a] == 1 for a in self.spec.used_axes())

    def check_rank(self, ndim: int, what: str = "array") -> None:
        if len(self.spec) > ndim:
            raise ValueError(f"One of {what} was given the sharding of {self!r}, which implies "
                             f"that it has a rank of at least {len(self.spec)}, but it is {ndim}")

    def _hlo_text(self, ndim):
        return _named_hlo_text(self.mesh.axis_names, self.mesh.axis_sizes, self.spec, ndim)

    def sdy_text(self, ndim: int, mesh_name: str = "mesh") -> str:
        """Shardy's `#sdy.sharding<@mesh, [...]>` for a value of rank `ndim`."""
        dims = []
        for d in range(ndim):
            dims.append("{" + ", ".join(f'"{a}"' for a in self.spec.axes_of(d)) + "}")
        return f"#sdy.sharding<@{mesh_name}, [{', '.join(dims)}]>"

    def __eq__(self, other):
        return (type(other) is NamedSharding and self._hash == other._hash
                and self.mesh == other.mesh and self.spec == other.spec
                and self.memory_kind == other.memory_kind)

    def __hash__(self):
        return self._hash

    memory_kind = property(_memory_kind)

    def with_memory_kind(self, kind):
        """This sharding, naming memory `kind`."""
        return NamedSharding(self.mesh, self.spec, memory_kind=kind)

    def __repr__(self):
        return f"NamedSharding(mesh={self.mesh}, spec={self.spec!r}{_memory_kind_suffix(self)})"


class GSPMDSharding(Sharding):
    """A layout XLA chose that no PartitionSpec of the mesh describes: an HloSharding over a
    device list."""

    def __init__(self, devices, hlo_sharding):
        self._device_assignment = tuple(devices)
        self._hlo = hlo_sharding

    memory_kind = property(_memory_kind)

    def _hlo_sharding(self, ndim):
        return self._hlo

    def _hlo_text(self, ndim):
        return str(self._hlo)

    @property
    def is_fully_replicated(self):
        return self._hlo.is_replicated()

    def __eq__(self, other):
        return (type(other) is GSPMDSharding and self._device_assignment == other._device_assignment
                and self._hlo == other._hlo)

    def __hash__(self):
        return hash((self._device_assignment, str(self._hlo)))

    def __repr__(self):
        return f"GSPMDSharding({self._hlo}{_memory_kind_suffix(self)})"


@functools.lru_cache(maxsize=4096)
def _named_hlo_text(axis_names, axis_sizes, spec, ndim) -> str:
    """XLA's HloSharding text of a NamedSharding: partition ids are row-major mesh positions."""
    sizes = dict(zip(axis_names, axis_sizes))
    order, tiles = [], []
    for d in range(ndim):
        axes = spec.axes_of(d) if d < len(spec) else ()
        order += [axis_names.index(a) for a in axes]
        tiles.append(math.prod(sizes[a] for a in axes))
    rest = [i for i in range(len(axis_names)) if i not in order]
    replicated = math.prod(axis_sizes[i] for i in rest)
    if math.prod(tiles) == 1:
        return "{replicated}"
    ids = np.arange(math.prod(axis_sizes)).reshape(axis_sizes).transpose(order + rest)
    dims = tiles + ([replicated] if replicated > 1 else [])
    text = "{devices=[" + ",".join(map(str, dims)) + "]" + ",".join(map(str, ids.flat))
    return text + (" last_tile_dim_replicate}" if replicated > 1 else "}")


def _indices_from_hlo(hs, shape, num_devices) -> list:
    """The block index of each partition (in partition order) under HloSharding `hs`."""
    full = (slice(None),) * len(shape)
    if hs.is_replicated() or not shape:
        return [full] * num_devices
    dims = list(hs.tile_assignment_dimensions())
    if hs.subgroup_types() and not hs.replicate_on_last_tile_dim():
        raise NotImplementedError(f"sharding {hs} (manual or unreduced subgroups) has no "
                                  "per-device index")
    tile = np.asarray(hs.tile_assignment_devices()).reshape(dims)
    if hs.replicate_on_last_tile_dim():
        dims = dims[:-1]
    out = [None] * num_devices
    for pos in itertools.product(*[range(n) for n in tile.shape]):
        block = pos[:len(shape)]
        index = []
        for d, (n, k, i) in enumerate(zip(shape, dims, block)):
            if k == 1:
                index.append(slice(None))
            else:
                step = -(-n // k)
                index.append(slice(i * step, min((i + 1) * step, n)))
        out[int(tile[pos])] = tuple(index)
    return out


def named_from_hlo(mesh: Mesh, hs, ndim: int, prefer=()) -> Sharding:
    """The NamedSharding of `mesh` whose HloSharding is `hs` (its spec without trailing Nones,
    as JAX writes the shardings XLA picks), or a GSPMDSharding when none is. The specs in
    `prefer` (the program's input and shard_map output specs) come first, so a spec naming a
    size-1 mesh axis keeps its name, as JAX's propagated shardings do."""
    if hs.is_replicated():
        return NamedSharding(mesh, PartitionSpec())
    if not hs.is_tiled():
        return GSPMDSharding(mesh.flat_devices, hs)
    for spec in prefer:
        if len(spec) <= ndim and _parse_hlo_of(mesh, spec, ndim) == hs:
            return NamedSharding(mesh, spec)
    tiles = list(hs.tile_assignment_dimensions())[:ndim]
    sizes = mesh.shape
    names = mesh.axis_names

    def choices(d, free):
        if d == ndim:
            yield []
            return
        for r in range(len(free) + 1):
            for combo in itertools.permutations(free, r):
                if math.prod(sizes[a] for a in combo) != tiles[d]:
                    continue
                rest = [a for a in free if a not in combo]
                for tail in choices(d + 1, rest):
                    yield [combo] + tail

    if len(names) <= 6:
        for parts in choices(0, list(names)):
            entries = [None if not c else (c[0] if len(c) == 1 else tuple(c)) for c in parts]
            while entries and entries[-1] is None:
                entries.pop()
            spec = PartitionSpec(*entries)
            if _parse_hlo_of(mesh, spec, ndim) == hs:
                return NamedSharding(mesh, spec)
    return GSPMDSharding(mesh.flat_devices, hs)


def _parse_hlo_of(mesh, spec, ndim):
    from fluxion._src.compiler import backend
    xla_client, _ = backend._jaxlib()
    return _parse_hlo(xla_client, _named_hlo_text(mesh.axis_names, mesh.axis_sizes, spec, ndim))


def canonicalize(sharding, what: str = "sharding"):
    """A Sharding from what the user passed: a Sharding, or a PartitionSpec (or None) of the
    mesh set with `set_mesh` / `with mesh:`."""
    if isinstance(sharding, NamedSharding) and sharding.is_abstract:
        if sharding.mesh.empty:
            raise ValueError(f"One of {what} leaf specifications got an empty NamedSharding: "
                             f"{sharding!r} which is not allowed.")
        return NamedSharding(_concrete_mesh(sharding.mesh, what), sharding.spec)
    if isinstance(sharding, Sharding):
        return sharding
    if isinstance(sharding, PartitionSpec):
        mesh = get_mesh()
        if mesh is None:
            raise ValueError(f"{what}: using a bare PartitionSpec {sharding} requires a mesh; "
                             "use a NamedSharding, or set one with fluxion.set_mesh(mesh) or "
                             "`with mesh:`")
        return NamedSharding(mesh, sharding)
    raise TypeError(f"{what} must be a Sharding or a PartitionSpec, got {sharding!r}")


@functools.lru_cache(maxsize=64)
def unsharded_type_sharding(ndim: int) -> NamedSharding:
    """The sharding in the type of an unsharded value of rank `ndim`: no mesh axes, and
    `P(None, ...)` (JAX's `typeof(x).sharding` outside a mesh)."""
    return NamedSharding(AbstractMesh((), (), axis_types=()), PartitionSpec(*[None] * ndim))


def _concrete_mesh(abstract, what: str) -> Mesh:
    """The context mesh (`set_mesh`) standing for `abstract`, typed as it is."""
    mesh = get_mesh()
    if mesh is None or mesh.shape_tuple != abstract.shape_tuple:
        raise ValueError(f"{what}: a NamedSharding of {abstract} needs a context mesh of that "
                         f"shape (set one with `jax.set_mesh`); the context mesh is {mesh}")
    return mesh.update_axis_types(dict(zip(abstract.axis_names, abstract.axis_types)))


_single = {}


def single_device_sharding(device) -> SingleDeviceSharding:
    s = _single.get(device)
    if s is None:
        s = _single[device] = SingleDeviceSharding(device)
    return s


def make_single_device_sharding(device) -> SingleDeviceSharding:
    return single_device_sharding(device)


def get_abstract_mesh():
    """The abstract mesh in effect (`use_abstract_mesh`, `set_mesh`); empty when none is."""
    from fluxion._src.mesh import get_abstract_mesh as current
    return current()


class AxesTypes:
    """The `sharding` of a sharding constraint that changes only the types of mesh axes: its
    value keeps its layout, typed with `axes` of its mesh as `axis_type` (auto_axes and
    explicit_axes). It adds nothing to the lowered program."""

    def __init__(self, axes, axis_type):
        self.axes = None if axes is None else tuple(axes)
        self.axis_type = axis_type

    def retype(self, mesh):
        names = mesh.axis_names if self.axes is None else self.axes
        return mesh.update_axis_types({n: self.axis_type for n in names})

    def __eq__(self, other):
        return (type(other) is AxesTypes and self.axes == other.axes
                and self.axis_type == other.axis_type)

    def __hash__(self):
        return hash((self.axes, self.axis_type))

    def __repr__(self):
        return f"AxesTypes({self.axes}, {self.axis_type!r})"


def _retype(tree, axes, axis_type):
    from fluxion._src import core
    from fluxion._src.array import Array
    from fluxion._src.sharded_jit import sharding_constraint
    from fluxion._src.tree_util import tree_map
    marker = AxesTypes(axes, axis_type)
    return tree_map(lambda x: sharding_constraint(x, marker)
                    if isinstance(x, (Array, core.Tracer)) else x, tree)


def _call_with_axis_types(fun, args, kwargs, axes, axis_type):
    """`fun(*args, **kwargs)` with the mesh axes `axes` (default: all) of type `axis_type`,
    in its arguments' types and in the abstract mesh in effect."""
    from fluxion._src.mesh import use_abstract_mesh
    args, kwargs = _retype((args, kwargs), axes, axis_type)
    mesh = get_abstract_mesh()
    if mesh.empty:
        return fun(*args, **kwargs)
    names = mesh.axis_names if axes is None else axes
    with use_abstract_mesh(mesh.update_axis_types({n: axis_type for n in names})):
        return fun(*args, **kwargs)


def _axes_tuple(axes):
    return None if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)


def _required_keyword(kwargs, name, given):
    """`given` (the decorator's), else the call's keyword `name` (taken out of `kwargs`); one
    of them is required, as in JAX."""
    if given is not None:
        return given
    if name not in kwargs:
        raise TypeError(f"Missing required keyword argument: '{name}'")
    return kwargs.pop(name)


def auto_axes(fun=None, *, axes=None, out_sharding=None):
    """`fun` run with the mesh axes `axes` (default: all) of type `Auto`: on them XLA's
    partitioner lays out its values, so no ShardingTypeError arises there; its outputs are
    then laid out (and typed) as `out_sharding`, given here or as a keyword of each call."""
    if fun is None:
        return lambda f: auto_axes(f, axes=axes, out_sharding=out_sharding)
    from fluxion._src.mesh import AxisType
    names = _axes_tuple(axes)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        from fluxion._src.sharded_jit import reshard
        sharding = _required_keyword(kwargs, "out_sharding", out_sharding)
        if get_abstract_mesh().empty and not _names_a_mesh(sharding):
            return fun(*args, **kwargs)
        out = _call_with_axis_types(fun, args, kwargs, names, AxisType.Auto)
        return reshard(out, sharding)
    return wrapped


def _names_a_mesh(shardings) -> bool:
    from fluxion._src.tree_util import tree_leaves
    return any(isinstance(s, NamedSharding) for s in tree_leaves(shardings))


def explicit_axes(fun=None, *, axes=None, in_sharding=None):
    """`fun` run with the mesh axes `axes` (default: all) of type `Explicit`, its inputs laid
    out as `in_sharding` (given here or as a keyword of each call); its outputs go back to
    `Auto` on those axes. Needs a context mesh (`set_mesh`)."""
    if fun is None:
        return lambda f: explicit_axes(f, axes=axes, in_sharding=in_sharding)
    from fluxion._src.mesh import AxisType
    names = _axes_tuple(axes)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        from fluxion._src.sharded_jit import reshard
        sharding = _required_keyword(kwargs, "in_sharding", in_sharding)
        if get_abstract_mesh().empty:
            raise ValueError("Context mesh cannot be empty. Please use `jax.set_mesh` API to "
                             "enter into a mesh context when using `explicit_axes` API.")
        args = reshard(args, sharding)
        out = _call_with_axis_types(fun, args, kwargs, names, AxisType.Explicit)
        return _retype(out, names, AxisType.Auto)
    return wrapped
