"""`jax.export`'s serialized form: the flatbuffer of `jax/_src/export/serialization.fbs`.

`deserialize` reads the artifacts that `jax.export.Exported.serialize()` writes (JAX 0.10.2,
serialization versions 2-11); `serialize` writes one that `jax.export.deserialize` reads. Both
hold the same StableHLO portable artifact (VHLO bytecode) as fluxion's own container.

The reader is written here, with a bounds check on every offset and length, so that damaged
bytes give a ValueError instead of an exception deep inside a generic reader (or a loop over
a corrupt length). The writer uses the `flatbuffers` package's `Builder`.

Differences from fluxion's own convention that this module maps:

- `module_kept_var_idx`: JAX drops unused arguments from the module; the call passes only the
  kept ones (`Exported.call` does this for every Exported).
- VJPs: JAX's VJP takes `(*primals, *cotangents of every output)` (`float0` for integer
  outputs) and returns cotangents of every input; fluxion's takes and returns those of the
  inexact ones. An Exported read from JAX keeps JAX's convention (`_jax_vjp_convention`) and
  its calls adapt; fluxion's VJP is written to JAX only where the two coincide (every input and
  output inexact).
- Symbolic constraints are not stored by JAX (its deserialize uses an empty scope); the
  module's shape assertions still check them when it is called.
"""
from __future__ import annotations

import struct

import numpy as np

from fluxion._src import dtypes, tree_util
from fluxion._src.core import ShapedArray
from fluxion._src.export import registrations, shape_poly
from fluxion._src.mesh import PartitionSpec

# serialization.fbs enums
_TREE_LEAF, _TREE_NONE, _TREE_TUPLE, _TREE_LIST, _TREE_DICT, _TREE_CUSTOM = range(6)
_AVAL_SHAPED, _AVAL_TOKEN = 0, 1
_MEMORY_DEVICE = 1
_CHECK_PLATFORM, _CHECK_CUSTOM_CALL, _CHECK_SHAPE_ASSERTIONS = 0, 1, 2
_DTYPE_NAMES = {
    0: "bool", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "uint8", 6: "uint16",
    7: "uint32", 8: "uint64", 9: "float16", 10: "float32", 11: "float64", 12: "complex64",
    13: "complex128", 14: "bfloat16", 15: "int4", 16: "uint4", 17: "float8_e4m3b11fnuz",
    18: "float8_e4m3fn", 19: "float8_e4m3fnuz", 20: "float8_e5m2", 21: "float8_e5m2fnuz",
    22: "float0", 23: "float8_e4m3", 24: "float8_e3m4", 25: "float8_e8m0fnu",
    26: "float4_e2m1fn"}
_PRNG_KEY_KINDS = {27: "key<fry>", 28: "key<rbg>", 29: "key<unsafe_rbg>"}
_DTYPE_KINDS = {name: kind for kind, name in _DTYPE_NAMES.items()}

# field slots of the Exported table
(_F_SER_VERSION, _F_FUN_NAME, _F_IN_TREE, _F_IN_AVALS, _F_OUT_TREE, _F_OUT_AVALS,
 _F_NR_DEVICES_SHORT, _F_IN_SHARDINGS, _F_OUT_SHARDINGS, _F_PLATFORMS, _F_ORDERED_EFFECTS,
 _F_UNORDERED_EFFECTS, _F_DISABLED_CHECKS, _F_MODULE, _F_CC_VERSION, _F_KEPT_VAR_IDX,
 _F_USES_GLOBAL_CONSTANTS, _F_VJP, _F_NR_DEVICES, _F_UNIQUE_AVALS, _F_UNIQUE_MESHES,
 _F_UNIQUE_NAMED_SHARDINGS, _F_IN_AVALS_IDXS, _F_OUT_AVALS_IDXS, _F_IN_SHARDINGS_IDXS,
 _F_OUT_SHARDINGS_IDXS) = range(26)
_N_EXPORTED_FIELDS = 26

MIN_CALLING_CONVENTION, MAX_CALLING_CONVENTION = 9, 10
_VHLO_MAGIC = b"ML\xefR"


class _Corrupt(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Reading


class _Table:
    """A flatbuffer table at `pos` of `buf`, every access bounds-checked."""
    __slots__ = ("buf", "pos", "vt", "vt_len")

    def __init__(self, buf: bytes, pos: int):
        self.buf, self.pos = buf, pos
        (soff,) = _unpack("<i", buf, pos)
        self.vt = pos - soff
        (self.vt_len,) = _unpack("<H", buf, self.vt)
        if self.vt_len < 4 or self.vt_len % 2:
            raise _Corrupt(f"bad vtable length {self.vt_len}")
        _need(buf, self.vt, self.vt_len)

    def _field(self, slot: int) -> int:
        at = 4 + 2 * slot
        if at >= self.vt_len:
            return 0
        (off,) = _unpack("<H", self.buf, self.vt + at)
        return self.pos + off if off else 0

    def scalar(self, slot: int, fmt: str, default=0):
        p = self._field(slot)
        return _unpack("<" + fmt, self.buf, p)[0] if p else default

    def _indirect(self, slot: int) -> int:
        p = self._field(slot)
        if not p:
            return 0
        (off,) = _unpack("<I", self.buf, p)
        return p + off

    def table(self, slot: int):
        p = self._indirect(slot)
        return _Table(self.buf, p) if p else None

    def _vector(self, slot: int, elem: int) -> tuple[int, int]:
        p = self._indirect(slot)
        if not p:
            return 0, 0
        (n,) = _unpack("<I", self.buf, p)
        _need(self.buf, p + 4, n * elem)
        return p + 4, n

    def string(self, slot: int) -> str | None:
        start, n = self._vector(slot, 1)
        return _decode(self.buf[start:start + n]) if start else None

    def bytes(self, slot: int) -> bytes | None:
        start, n = self._vector(slot, 1)
        return self.buf[start:start + n] if start else None

    def scalars(self, slot: int, fmt: str) -> list:
        size = struct.calcsize("<" + fmt)
        start, n = self._vector(slot, size)
        return list(struct.unpack_from(f"<{n}{fmt}", self.buf, start)) if n else []

    def _offsets(self, slot: int) -> list[int]:
        start, n = self._vector(slot, 4)
        out = []
        for i in range(n):
            p = start + 4 * i
            out.append(p + _unpack("<I", self.buf, p)[0])
        return out

    def tables(self, slot: int) -> list["_Table"]:
        return [_Table(self.buf, p) for p in self._offsets(slot)]

    def strings(self, slot: int) -> list[str]:
        out = []
        for p in self._offsets(slot):
            (n,) = _unpack("<I", self.buf, p)
            _need(self.buf, p + 4, n)
            out.append(_decode(self.buf[p + 4:p + 4 + n]))
        return out


def _need(buf, pos: int, size: int) -> None:
    if pos < 0 or size < 0 or pos + size > len(buf):
        raise _Corrupt(f"offset {pos} + {size} outside the {len(buf)} bytes")


def _unpack(fmt: str, buf, pos: int):
    _need(buf, pos, struct.calcsize(fmt))
    return struct.unpack_from(fmt, buf, pos)


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Corrupt("a string is not UTF-8") from None


def _read_dtype(kind: int):
    if kind in _PRNG_KEY_KINDS:
        raise ValueError(f"the artifact has PRNG key arrays ({_PRNG_KEY_KINDS[kind]}), which "
                         "fluxion does not support in exported functions")
    name = _DTYPE_NAMES.get(kind)
    if name is None:
        raise _Corrupt(f"unknown dtype kind {kind}")
    if name == "float0":
        return dtypes.float0
    from fluxion._src.export.serialization import _dtype
    return _dtype(name)


def _read_aval(t: _Table, scope) -> ShapedArray:
    if t.scalar(0, "b") == _AVAL_TOKEN:
        raise ValueError("the artifact has token arguments or results, which fluxion does not "
                         "support")
    dims = t.strings(1)
    shape = shape_poly.symbolic_shape(",".join(dims), scope=scope) if dims else ()
    if any(type(d) is int and d < 0 for d in shape):
        raise _Corrupt(f"negative dimension in {dims}")
    return ShapedArray(tuple(shape), _read_dtype(t.scalar(2, "b")))


def _read_tree(t: _Table, next_leaf):
    kind = t.scalar(0, "b")
    children = [_read_tree(c, next_leaf) for c in t.tables(1)]
    if kind == _TREE_LEAF:
        return next_leaf()
    if kind == _TREE_NONE:
        return None
    if kind == _TREE_TUPLE:
        return tuple(children)
    if kind == _TREE_LIST:
        return children
    if kind == _TREE_DICT:
        keys = t.strings(2)
        if len(keys) != len(children):
            raise _Corrupt("a dict node has not as many keys as children")
        return dict(zip(keys, children))
    if kind == _TREE_CUSTOM:
        name = t.string(3)
        if name is None:
            raise _Corrupt("a custom pytree node without a name")
        return registrations.deserialize_node(name, t.bytes(4) or b"", children)
    raise _Corrupt(f"unknown pytree node kind {kind}")


def _treedef(t: _Table | None, leaves):
    from fluxion._src.export.serialization import tree_with_leaves
    if t is None:
        raise _Corrupt("no pytree")
    return tree_with_leaves(lambda next_leaf: _read_tree(t, next_leaf), leaves)


def _check_mesh(mesh: _Table | None) -> None:
    """Shardings are accepted where they mean one device (fluxion runs on one)."""
    sizes = mesh.scalars(0, "I") if mesh is not None else []
    if int(np.prod(sizes, dtype=np.int64)) > 1:
        raise ValueError(f"the artifact is sharded over a mesh of axis sizes {sizes}; "
                         "fluxion runs exported functions on one device")


def _read_mesh_axes(mesh: _Table) -> tuple:
    """An AbstractMesh table as ((name, size, AxisType value), ...)."""
    sizes, names = mesh.scalars(0, "I"), mesh.strings(1)
    types = mesh.scalars(2, "B") or [1] * len(sizes)
    if not (len(sizes) == len(names) == len(types)) or not all(t in (1, 2, 3) for t in types):
        raise _Corrupt(f"bad mesh: sizes {sizes}, names {names}, types {types}")
    return tuple(zip(names, sizes, types))


def _read_spec(named: _Table) -> PartitionSpec:
    spec = named.table(1)
    if spec is None:
        raise _Corrupt("a named sharding without a partition spec")
    if spec.strings(1) or spec.strings(2):
        raise ValueError("the artifact's shardings have reduced or unreduced axes, which "
                         "fluxion's exported calls do not support")
    entries = []
    for one in spec.tables(0):
        axes = one.strings(0)
        entries.append(None if not axes else axes[0] if len(axes) == 1 else tuple(axes))
    return PartitionSpec(*entries)


def _read_shardings(t: _Table, nr_devices: int, n_in: int, n_out: int):
    """(in specs, out specs, mesh axes) of an artifact for several devices: its named
    shardings (one mesh for all), by index into the unique ones or in full."""
    unique = t.tables(_F_UNIQUE_NAMED_SHARDINGS)
    meshes = [_read_mesh_axes(m) for m in t.tables(_F_UNIQUE_MESHES)]

    def mesh_of(named: _Table):
        full = named.table(0)
        if full is not None:
            return _read_mesh_axes(full)
        i = named.scalar(3, "I")
        if i >= len(meshes):
            raise _Corrupt(f"abstract mesh index {i} out of range")
        return meshes[i]

    def shardings(idx_slot, full_slot, n):
        idxs = t.scalars(idx_slot, "I")
        if idxs:
            if max(idxs) > len(unique):
                raise _Corrupt(f"named sharding index {max(idxs)} out of range")
            tables = [None if i == 0 else unique[i - 1] for i in idxs]
        else:
            tables = [s.table(2) for s in t.tables(full_slot)] or [None] * n
        if len(tables) != n:
            raise _Corrupt(f"{len(tables)} shardings for {n} values")
        return tables
    ins = shardings(_F_IN_SHARDINGS_IDXS, _F_IN_SHARDINGS, n_in)
    outs = shardings(_F_OUT_SHARDINGS_IDXS, _F_OUT_SHARDINGS, n_out)
    axes = {mesh_of(n) for n in ins + outs if n is not None}
    if len(axes) > 1:
        raise ValueError(f"the artifact's shardings use several meshes {sorted(axes)}")
    mesh_axes = axes.pop() if axes else ()
    if mesh_axes and int(np.prod([a[1] for a in mesh_axes])) != nr_devices:
        raise _Corrupt(f"a mesh {mesh_axes} for {nr_devices} devices")
    spec = lambda n: None if n is None else _read_spec(n)  # noqa: E731
    return [spec(n) for n in ins], [spec(n) for n in outs], mesh_axes


def _check_module(module: bytes, nr_devices: int) -> None:
    """JAX's container has no checksum: a damaged module shows when it is parsed, so parse it
    now rather than at the first call. It must be partitioned for `nr_devices`."""
    from fluxion._src.export.exported import _deserialize_module, _ir
    try:
        parsed = _deserialize_module(module)
    except Exception as e:
        raise _Corrupt(f"the StableHLO portable artifact does not load: {e}") from None
    ir, ctx = _ir()
    with ctx:
        attrs = parsed.operation.attributes
        partitions = (ir.IntegerAttr(attrs["mhlo.num_partitions"]).value
                      if "mhlo.num_partitions" in attrs else 1)
    if partitions != nr_devices:
        raise ValueError(f"the artifact was exported for {nr_devices} devices but its module "
                         f"is partitioned for {partitions}")


def _read_exported(t: _Table, depth: int = 0):
    from fluxion._src.export.exported import Exported
    if depth > 64:
        raise _Corrupt("VJPs nested too deeply")
    cc = t.scalar(_F_CC_VERSION, "H")
    if not MIN_CALLING_CONVENTION <= cc <= MAX_CALLING_CONVENTION:
        raise ValueError(f"the artifact has calling convention version {cc}; fluxion reads "
                         f"jax.export's versions {MIN_CALLING_CONVENTION} to "
                         f"{MAX_CALLING_CONVENTION}")
    nr_devices = t.scalar(_F_NR_DEVICES, "I") or t.scalar(_F_NR_DEVICES_SHORT, "h")
    if nr_devices < 1:
        raise _Corrupt(f"nr_devices {nr_devices}")
    ordered = [e.string(0) for e in t.tables(_F_ORDERED_EFFECTS)]
    if ordered:
        raise ValueError(f"the artifact has ordered effects {ordered} (its module takes and "
                         "returns effect tokens), which fluxion's exported calls do not support")
    unordered = tuple(e.string(0) for e in t.tables(_F_UNORDERED_EFFECTS))

    scope = shape_poly.SymbolicScope(())  # JAX does not store the constraints
    unique = [_read_aval(a, scope) for a in t.tables(_F_UNIQUE_AVALS)]

    def avals(idx_slot, full_slot):
        idxs = t.scalars(idx_slot, "I")
        if idxs:
            if max(idxs) >= len(unique):
                raise _Corrupt(f"abstract value index {max(idxs)} out of range")
            return [unique[i] for i in idxs]
        return [_read_aval(a, scope) for a in t.tables(full_slot)]
    in_avals = avals(_F_IN_AVALS_IDXS, _F_IN_AVALS)
    out_avals = avals(_F_OUT_AVALS_IDXS, _F_OUT_AVALS)
    if nr_devices == 1:
        for mesh in t.tables(_F_UNIQUE_MESHES):
            _check_mesh(mesh)
        named = t.tables(_F_UNIQUE_NAMED_SHARDINGS)
        named += [n for s in t.tables(_F_IN_SHARDINGS) + t.tables(_F_OUT_SHARDINGS)
                  if (n := s.table(2)) is not None]
        for n in named:
            _check_mesh(n.table(0))
        in_specs, out_specs, mesh_axes = None, None, ()
    else:
        in_specs, out_specs, mesh_axes = _read_shardings(t, nr_devices, len(in_avals),
                                                         len(out_avals))

    in_tree = _treedef(t.table(_F_IN_TREE), in_avals)
    out_tree = _treedef(t.table(_F_OUT_TREE), out_avals)
    fun_name = t.string(_F_FUN_NAME)
    platforms = tuple(t.strings(_F_PLATFORMS))
    module = t.bytes(_F_MODULE)
    if fun_name is None or not platforms or module is None:
        raise _Corrupt("no function name, platforms or module")
    if not module.startswith(_VHLO_MAGIC):
        raise _Corrupt("the module is not a StableHLO portable artifact")
    _check_module(module, nr_devices)
    kept = t.scalars(_F_KEPT_VAR_IDX, "H")
    if kept != sorted(set(kept)) or (kept and kept[-1] >= len(in_avals)):
        raise _Corrupt(f"module_kept_var_idx {kept} out of range")
    checks = []
    for c in t.tables(_F_DISABLED_CHECKS):
        kind = c.scalar(0, "b")
        checks.append(registrations.DisabledSafetyCheck.platform() if kind == _CHECK_PLATFORM
                      else registrations.DisabledSafetyCheck.custom_call(c.string(1))
                      if kind == _CHECK_CUSTOM_CALL
                      else registrations.DisabledSafetyCheck.shape_assertions())
    vjp_table = t.table(_F_VJP)
    if vjp_table is not None:
        vjp = _read_exported(vjp_table, depth + 1)   # read now: damage shows at deserialize
        get_vjp = lambda: vjp  # noqa: E731
    else:
        get_vjp = None
    exp = Exported(fun_name, in_tree, in_avals, out_tree, out_avals, platforms, module,
                   nr_devices=nr_devices, in_specs=in_specs, out_specs=out_specs,
                   mesh_axes=mesh_axes, calling_convention_version=cc,
                   module_kept_var_idx=kept,
                   uses_global_constants=t.scalar(_F_USES_GLOBAL_CONSTANTS, "?", False),
                   unordered_effects=unordered, disabled_safety_checks=checks,
                   get_vjp=get_vjp)
    exp._jax_vjp_convention = True
    return exp


def looks_like_jax(blob: bytes) -> bool:
    """Whether `blob` starts like a flatbuffer whose root is a table inside it."""
    if len(blob) < 8:
        return False
    (root,) = struct.unpack_from("<I", blob, 0)
    return 4 <= root < len(blob) and root % 4 == 0


def deserialize(blob: bytes):
    """A fluxion `Exported` from the bytes of `jax.export.Exported.serialize()`."""
    try:
        return _read_exported(_Table(blob, _unpack("<I", blob, 0)[0]))
    except (_Corrupt, struct.error, RecursionError, OverflowError, MemoryError) as e:
        raise ValueError(f"Serialized jax.export artifact is truncated or corrupt ({e})") \
            from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        raise ValueError(f"Cannot load the serialized jax.export artifact: {e}") from None


# ---------------------------------------------------------------------------------------------
# Writing


def serialize(exp, vjp_order: int = 0) -> bytearray:
    """JAX's flatbuffer for `exp` (read by `jax.export.deserialize`)."""
    import flatbuffers
    builder = flatbuffers.Builder(65536)
    builder.Finish(_write_exported(builder, exp, vjp_order))
    return builder.Output()


def _vector_of_offsets(b, offsets) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _vector_of_scalars(b, values, fmt: str) -> int:
    return b.CreateNumpyVector(np.asarray(values, dtype=np.dtype("<" + fmt)))


def _write_tree(b, treedef) -> int:
    from fluxion._src.export.serialization import walk_tree
    return walk_tree(treedef, lambda kind, aux, kids: _write_node(b, kind, aux, kids),
                     lambda: _write_node(b, None, None, []))


def _write_node(b, kind, aux, kids) -> int:
    """A PyTreeDef table; `kind` None is a leaf, `kids` the children's tables."""
    from fluxion._src.export.serialization import check_dict_keys
    names = custom = None
    if kind is None:
        tag = _TREE_LEAF
    elif kind is type(None):
        tag = _TREE_NONE
    elif kind is tuple:
        tag = _TREE_TUPLE
    elif kind is list:
        tag = _TREE_LIST
    elif kind is dict:  # aux: the keys, in the order of the children
        check_dict_keys(aux, allowed=(str,))
        tag = _TREE_DICT
        names = _vector_of_offsets(b, [b.CreateString(k) for k in aux])
    else:
        name, data = registrations.serialize_aux(kind, aux)
        tag, custom = _TREE_CUSTOM, (b.CreateString(name), b.CreateByteVector(data))
    kids = _vector_of_offsets(b, kids) if kids else None
    b.StartObject(5)
    b.PrependInt8Slot(0, tag, -1)
    if kids is not None:
        b.PrependUOffsetTRelativeSlot(1, kids, 0)
    if names is not None:
        b.PrependUOffsetTRelativeSlot(2, names, 0)
    if custom is not None:
        b.PrependUOffsetTRelativeSlot(3, custom[0], 0)
        b.PrependUOffsetTRelativeSlot(4, custom[1], 0)
    return b.EndObject()


def _write_aval(b, a) -> int:
    dims = [b.CreateString(str(d)) for d in a.shape]
    shape = _vector_of_offsets(b, dims)
    name = "float0" if a.dtype == dtypes.float0 else np.dtype(a.dtype).name
    if name not in _DTYPE_KINDS:
        raise ValueError(f"jax.export's format has no dtype {name}")
    b.StartObject(4)
    b.PrependInt8Slot(0, _AVAL_SHAPED, -1)
    b.PrependUOffsetTRelativeSlot(1, shape, 0)
    b.PrependInt8Slot(2, _DTYPE_KINDS[name], -1)
    b.PrependInt8Slot(3, _MEMORY_DEVICE, -1)
    return b.EndObject()


def _write_unsharded(b) -> int:
    b.StartObject(3)
    return b.EndObject()


def _write_mesh(b, mesh_axes) -> int:
    """An AbstractMesh table (no abstract device: JAX reads it as None)."""
    sizes = _vector_of_scalars(b, [a[1] for a in mesh_axes], "u4")
    names = _vector_of_offsets(b, [b.CreateString(a[0]) for a in mesh_axes])
    types = _vector_of_scalars(b, [a[2] for a in mesh_axes], "u1")
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(0, sizes, 0)
    b.PrependUOffsetTRelativeSlot(1, names, 0)
    b.PrependUOffsetTRelativeSlot(2, types, 0)
    return b.EndObject()


def _write_spec(b, spec: PartitionSpec) -> int:
    axes_of = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    ones = []
    for axes in axes_of:
        names = _vector_of_offsets(b, [b.CreateString(a) for a in axes])
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, names, 0)
        ones.append(b.EndObject())
    partitions = _vector_of_offsets(b, ones)
    b.StartObject(3)
    b.PrependUOffsetTRelativeSlot(0, partitions, 0)
    return b.EndObject()


def _write_named(b, spec: PartitionSpec, mesh_axes) -> int:
    """A NamedSharding table over the artifact's one mesh (index 0 of the unique meshes)."""
    mesh = _write_mesh(b, mesh_axes)
    spec_offset = _write_spec(b, spec)
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(0, mesh, 0)
    b.PrependUOffsetTRelativeSlot(1, spec_offset, 0)
    b.PrependUint32Slot(3, 0, 0)
    return b.EndObject()


def _write_effect(b, type_name) -> int:
    name = b.CreateString(str(type_name))  # as read from a JAX artifact
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, name, 0)
    return b.EndObject()


def _write_check(b, check: registrations.DisabledSafetyCheck) -> int:
    target = None
    if check == registrations.DisabledSafetyCheck.platform():
        kind = _CHECK_PLATFORM
    elif check.is_custom_call() is not None:
        kind, target = _CHECK_CUSTOM_CALL, b.CreateString(check.is_custom_call())
    else:
        raise ValueError(f"Cannot write the disabled safety check {check!r} in jax.export's "
                         "format")
    b.StartObject(2)
    b.PrependInt8Slot(0, kind, -1)
    if target is not None:
        b.PrependUOffsetTRelativeSlot(1, target, 0)
    return b.EndObject()


def _jax_vjp(exp):
    """`exp.vjp()` in JAX's convention (see the module docstring)."""
    vjp = exp.vjp()
    if getattr(exp, "_jax_vjp_convention", False):
        return vjp
    from fluxion._src.export.exported import Exported, _inexact
    if any(a.dtype == dtypes.float0 for a in exp.in_avals + exp.out_avals):
        raise ValueError(f"Cannot serialize {exp.fun_name} in jax.export's format with a "
                         "vjp_order above 1: its function has integer or boolean inputs or "
                         "outputs (serialize it in fluxion's format)")
    if all(_inexact(a) for a in exp.in_avals + exp.out_avals):
        # the same function; JAX's custom_vjp wants the cotangents as a tuple
        out_tree = tree_util.tree_structure(tuple(range(vjp.out_tree.num_leaves)))
        return Exported(vjp.fun_name, vjp.in_tree, vjp.in_avals, out_tree, vjp.out_avals,
                        vjp.platforms, vjp.mlir_module_serialized,
                        calling_convention_version=vjp.calling_convention_version,
                        module_kept_var_idx=vjp.module_kept_var_idx,
                        uses_global_constants=vjp.uses_global_constants,
                        disabled_safety_checks=vjp.disabled_safety_checks,
                        get_vjp=vjp._get_vjp)
    return _export_float0_vjp(exp, vjp)


def _export_float0_vjp(exp, vjp):
    """A VJP that takes a cotangent for every output and returns one for every input, the
    integer ones float0 (lowered, as JAX lowers float0, to i1 tensors): fluxion's VJP
    wrapped and exported again."""
    from fluxion._src import api
    from fluxion._src.export.exported import _export_traced, _inexact
    n_in = len(exp.in_avals)

    def jax_convention_vjp(*args):
        primals, cts = args[:n_in], args[n_in:]
        diff_cts = [ct for ct, a in zip(cts, exp.out_avals) if _inexact(a)]
        in_cts = iter(vjp.call(*primals, *diff_cts))
        return tuple(next(in_cts) if _inexact(a) else _bool_zeros(a.shape)
                     for a in exp.in_avals)

    specs = [api.ShapeDtypeStruct(a.shape, a.dtype) for a in exp.in_avals]
    specs += [api.ShapeDtypeStruct(a.shape, a.dtype if _inexact(a) else np.bool_)
              for a in exp.out_avals]
    traced = api.jit(jax_convention_vjp).trace(*specs)
    traced.name = vjp.fun_name
    out = _export_traced(traced, vjp.platforms, vjp.disabled_safety_checks)
    out.in_avals = out.in_avals[:n_in] + tuple(
        a if _inexact(o) else a.update(dtype=dtypes.float0)
        for a, o in zip(out.in_avals[n_in:], exp.out_avals))
    out.out_avals = tuple(a if _inexact(i) else a.update(dtype=dtypes.float0)
                          for a, i in zip(out.out_avals, exp.in_avals))
    return out


def _bool_zeros(shape):
    from fluxion._src.lax import structural
    return structural.full(shape, False, np.bool_)


def _write_exported(b, exp, vjp_order: int) -> int:
    if exp.ordered_effects:
        raise ValueError("Cannot serialize an Exported with ordered effects")
    fun_name = b.CreateString(exp.fun_name)
    in_tree = _write_tree(b, exp.in_tree)
    out_tree = _write_tree(b, exp.out_tree)
    unique: dict = {}
    for a in exp.in_avals + exp.out_avals:
        unique.setdefault((tuple(str(d) for d in a.shape), str(a.dtype)), a)
    keys = list(unique)
    in_avals = _vector_of_offsets(b, [_write_aval(b, a) for a in exp.in_avals])
    out_avals = _vector_of_offsets(b, [_write_aval(b, a) for a in exp.out_avals])
    in_sh = _vector_of_offsets(b, [_write_unsharded(b) for _ in exp.in_avals])
    out_sh = _vector_of_offsets(b, [_write_unsharded(b) for _ in exp.out_avals])
    platforms = _vector_of_offsets(b, [b.CreateString(p) for p in exp.platforms])
    no_effects = _vector_of_offsets(b, [])
    unordered = _vector_of_offsets(b, [_write_effect(b, e) for e in exp.unordered_effects])
    checks = _vector_of_offsets(b, [_write_check(b, c) for c in exp.disabled_safety_checks])
    module = b.CreateByteVector(bytes(exp.mlir_module_serialized))
    kept = _vector_of_scalars(b, exp.module_kept_var_idx, "u2")
    vjp = _write_exported(b, _jax_vjp(exp), vjp_order - 1) if vjp_order > 0 else None
    unique_avals = _vector_of_offsets(b, [_write_aval(b, unique[k]) for k in keys])
    # the named shardings of a multi-device artifact, each distinct spec once
    specs = list(dict.fromkeys(s for s in exp._in_specs + exp._out_specs if s is not None))
    meshes = _vector_of_offsets(b, [_write_mesh(b, exp._mesh_axes)] if specs else [])
    named = _vector_of_offsets(b, [_write_named(b, s, exp._mesh_axes) for s in specs])

    def idxs(avals):
        return [keys.index((tuple(str(d) for d in a.shape), str(a.dtype))) for a in avals]
    in_idxs = _vector_of_scalars(b, idxs(exp.in_avals), "u4")
    out_idxs = _vector_of_scalars(b, idxs(exp.out_avals), "u4")
    in_sh_idxs = _vector_of_scalars(b, [0 if s is None else 1 + specs.index(s)
                                        for s in exp._in_specs], "u4")
    out_sh_idxs = _vector_of_scalars(b, [0 if s is None else 1 + specs.index(s)
                                         for s in exp._out_specs], "u4")
    uses_global = bool(exp.uses_global_constants or exp.uses_shape_polymorphism
                       or len(exp.platforms) > 1)

    b.StartObject(_N_EXPORTED_FIELDS)
    b.PrependUint16Slot(_F_SER_VERSION, 3, 0)   # as JAX 0.10.2 writes (see its comment)
    b.PrependUOffsetTRelativeSlot(_F_FUN_NAME, fun_name, 0)
    b.PrependUOffsetTRelativeSlot(_F_IN_TREE, in_tree, 0)
    b.PrependUOffsetTRelativeSlot(_F_IN_AVALS, in_avals, 0)
    b.PrependUOffsetTRelativeSlot(_F_OUT_TREE, out_tree, 0)
    b.PrependUOffsetTRelativeSlot(_F_OUT_AVALS, out_avals, 0)
    b.PrependUOffsetTRelativeSlot(_F_IN_SHARDINGS, in_sh, 0)
    b.PrependUOffsetTRelativeSlot(_F_OUT_SHARDINGS, out_sh, 0)
    b.PrependUOffsetTRelativeSlot(_F_PLATFORMS, platforms, 0)
    b.PrependUOffsetTRelativeSlot(_F_ORDERED_EFFECTS, no_effects, 0)
    b.PrependUOffsetTRelativeSlot(_F_UNORDERED_EFFECTS, unordered, 0)
    b.PrependUOffsetTRelativeSlot(_F_DISABLED_CHECKS, checks, 0)
    b.PrependUOffsetTRelativeSlot(_F_MODULE, module, 0)
    b.PrependUint16Slot(_F_CC_VERSION, exp.calling_convention_version, 0)
    b.PrependUOffsetTRelativeSlot(_F_KEPT_VAR_IDX, kept, 0)
    b.PrependBoolSlot(_F_USES_GLOBAL_CONSTANTS, uses_global, False)
    if vjp is not None:
        b.PrependUOffsetTRelativeSlot(_F_VJP, vjp, 0)
    b.PrependUint32Slot(_F_NR_DEVICES, exp.nr_devices, 0)
    b.PrependUOffsetTRelativeSlot(_F_UNIQUE_AVALS, unique_avals, 0)
    b.PrependUOffsetTRelativeSlot(_F_UNIQUE_MESHES, meshes, 0)
    b.PrependUOffsetTRelativeSlot(_F_UNIQUE_NAMED_SHARDINGS, named, 0)
    b.PrependUOffsetTRelativeSlot(_F_IN_AVALS_IDXS, in_idxs, 0)
    b.PrependUOffsetTRelativeSlot(_F_OUT_AVALS_IDXS, out_idxs, 0)
    b.PrependUOffsetTRelativeSlot(_F_IN_SHARDINGS_IDXS, in_sh_idxs, 0)
    b.PrependUOffsetTRelativeSlot(_F_OUT_SHARDINGS_IDXS, out_sh_idxs, 0)
    return b.EndObject()
