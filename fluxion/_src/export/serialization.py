"""The binary container of a serialized `Exported` (docs/export.md describes it).

Layout (integers little-endian)::

    b"FLXEXPRT"                 8 bytes, magic
    uint32 format version       currently 2
    uint32 section count
    per section:
        uint16 name length, name (UTF-8)
        uint64 data length, data
    32 bytes                    SHA-256 of everything before it (version 2)

Version 1 (the same without the checksum) is still read.

Sections: "meta" (UTF-8 JSON: names, pytree structures, avals, platforms, ...), "module" (the
StableHLO portable artifact, VHLO bytecode), and optionally "vjp" (a whole nested container:
the exported VJP, itself possibly carrying its own). Nothing is unpickled or evaluated: the
JSON is data, pytree structures are rebuilt from tuples, lists, dicts, None and the custom
nodes registered with `export.register_pytree_node_serialization`. Every
length, the checksum and the metadata's types are checked before anything is used; a bad
container is a ValueError saying what is wrong.
"""
from __future__ import annotations

import base64
import hashlib
import json
import struct
from typing import Callable

import numpy as np

from fluxion._src.export import registrations, shape_poly
from fluxion._src import core, dtypes, tree_util
from fluxion._src.core import ShapedArray

MAGIC = b"FLXEXPRT"
FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_DIGEST = 32  # bytes of the SHA-256 trailer
_REQUIRED_SECTIONS = ("meta", "module")


def walk_tree(treedef, on_node: Callable, on_leaf: Callable):
    """Fold `treedef` bottom-up without building its nodes (a custom node's constructor may
    need real leaves): `on_node(node_type, aux_data, folded_children)`, `on_leaf()`."""
    return treedef.walk([None] * treedef.num_leaves,
                        lambda kind, aux, children: on_node(kind, aux, list(children)),
                        lambda _: on_leaf())


def check_dict_keys(keys, allowed=(str, int)) -> None:
    """JAX's TypeError for a dict key serialization cannot store."""
    for k in keys:
        if type(k) not in allowed:
            raise TypeError("Serialization is supported only for dictionaries with string "
                            f"keys{' (and int keys, in fluxion)' if int in allowed else ''}. "
                            f"Found key {k} of type {type(k)}.")


def _encode_tree(treedef) -> object:
    return walk_tree(treedef, _encode_node, lambda: {"t": "leaf"})


def _encode_node(kind, aux, children):
    if kind is type(None):
        return {"t": "none"}
    if kind is tuple:
        return {"t": "tuple", "c": children}
    if kind is list:
        return {"t": "list", "c": children}
    if kind is dict:  # aux: the keys, in the order of the children
        check_dict_keys(aux)
        return {"t": "dict", "k": [[type(k).__name__, k] for k in aux], "c": children}
    name, data = registrations.serialize_aux(kind, aux)
    return {"t": "custom", "n": name, "a": base64.b64encode(data).decode("ascii"),
            "c": children}


def _decode_node(d, next_leaf):
    t = d["t"]
    if t == "leaf":
        return next_leaf()
    if t == "none":
        return None
    if t == "tuple":
        return tuple(_decode_node(c, next_leaf) for c in d["c"])
    if t == "list":
        return [_decode_node(c, next_leaf) for c in d["c"]]
    if t == "dict":
        keys = [int(k) if kind == "int" else str(k) for kind, k in d["k"]]
        return {k: _decode_node(c, next_leaf) for k, c in zip(keys, d["c"])}
    if t == "custom":
        return registrations.deserialize_node(d["n"], base64.b64decode(d["a"], validate=True),
                                              [_decode_node(c, next_leaf) for c in d["c"]])
    raise ValueError(f"corrupt serialized pytree node kind {t!r}")


def tree_with_leaves(build: Callable, leaves: list):
    """The structure of the pytree `build(next_leaf)` makes, whose leaves are `leaves` (the
    abstract values, as JAX passes them: a custom node's constructor may look at their
    shapes); ValueError when it does not take exactly that many."""
    it = iter(leaves)

    def next_leaf():
        leaf = next(it, None)
        if leaf is None:
            raise ValueError("the pytree structures do not match the number of abstract "
                             "values")
        return leaf
    tree = build(next_leaf)
    if next(it, None) is not None:
        raise ValueError("the pytree structures do not match the number of abstract values")
    return tree_util.tree_flatten(tree, is_leaf=lambda x: isinstance(x, ShapedArray))[1]


def _decode_tree(d, leaves):
    return tree_with_leaves(lambda next_leaf: _decode_node(d, next_leaf), leaves)


def _encode_aval(a) -> dict:
    # a symbolic dimension is stored as its text ("2*b + 1"), parsed back in one scope
    return {"shape": [str(d) if type(d) is shape_poly.DimExpr else int(d) for d in a.shape],
            "dtype": np.dtype(a.dtype).name, "weak_type": bool(a.weak_type)}


def _dtype(name: str):
    """The array dtype named `name` (NumPy's numeric dtypes and ml_dtypes' types only)."""
    import ml_dtypes
    kind = getattr(ml_dtypes, name, None)
    if isinstance(kind, type) and np.dtype(kind).name == name:
        return np.dtype(kind)  # bfloat16, float8_*, int4, ...: NumPy calls their kind "V"
    try:
        dt = np.dtype(name)
    except TypeError:
        raise ValueError(f"unknown dtype {name!r}") from None
    if dt.kind not in "biufc" or dt.name != name:
        raise ValueError(f"{name!r} is not an array dtype")
    return dt


def _decode_aval(d, scope) -> ShapedArray:
    shape = d["shape"]  # ints, and strings for symbolic dimensions (parsed in `scope`)
    if not isinstance(shape, list) or not all(
            (type(x) is int and x >= 0) or type(x) is str for x in shape):
        raise ValueError(f"bad shape {shape!r}")
    if type(d["weak_type"]) is not bool or type(d["dtype"]) is not str:
        raise ValueError(f"bad abstract value {d!r}")
    shape = [shape_poly.symbolic_shape(x, scope=scope)[0] if type(x) is str else x
             for x in shape]
    dtype = dtypes.float0 if d["dtype"] == "void" else _dtype(d["dtype"])
    return ShapedArray(tuple(shape), dtype, d["weak_type"])


def _encode_spec(spec):
    """A PartitionSpec as JSON: a list of None, an axis name, or a list of axis names."""
    if spec is None:
        return None
    return [list(e) if isinstance(e, tuple) else e for e in spec]


def _decode_spec(entries):
    from fluxion._src.mesh import PartitionSpec
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise ValueError(f"bad partition spec {entries!r}")
    out = []
    for e in entries:
        if isinstance(e, list) and all(type(a) is str for a in e):
            out.append(tuple(e))
        elif e is None or type(e) is str:
            out.append(e)
        else:
            raise ValueError(f"bad partition spec entry {e!r}")
    return PartitionSpec(*out)


def _decode_specs(meta, key: str, n: int):
    """The specs in `meta[key]` (absent in containers of one-device artifacts: None)."""
    specs = [_decode_spec(e) for e in meta.get(key, [None] * n)]
    if len(specs) != n:
        raise ValueError(f"{key} has {len(specs)} entries for {n} values")
    return specs


def _decode_mesh_axes(axes, nr_devices: int) -> list:
    """[(name, size, AxisType value)], whose sizes multiply to `nr_devices` (if any)."""
    if not all(isinstance(a, list) and len(a) == 3 and type(a[0]) is str and type(a[1]) is int
               and a[1] >= 1 and a[2] in (1, 2, 3) for a in axes):
        raise ValueError(f"bad mesh_axes {axes!r}")
    if axes and int(np.prod([a[1] for a in axes])) != nr_devices:
        raise ValueError(f"mesh_axes {axes!r} do not make {nr_devices} devices")
    return [tuple(a) for a in axes]


def serialize(exp, vjp_order: int = 0) -> bytearray:
    meta = {
        "fun_name": exp.fun_name,
        "platforms": list(exp.platforms),
        "calling_convention_version": exp.calling_convention_version,
        "in_tree": _encode_tree(exp.in_tree),
        "out_tree": _encode_tree(exp.out_tree),
        "in_avals": [_encode_aval(a) for a in exp.in_avals],
        "out_avals": [_encode_aval(a) for a in exp.out_avals],
        "in_shardings_hlo": [None if s is None else str(s) for s in exp.in_shardings_hlo],
        "out_shardings_hlo": [None if s is None else str(s) for s in exp.out_shardings_hlo],
        "nr_devices": exp.nr_devices,
        "in_specs": [_encode_spec(p) for p in exp._in_specs],
        "out_specs": [_encode_spec(p) for p in exp._out_specs],
        "out_types": [_encode_spec(p) for p in exp._out_types],
        "mesh_axes": [list(a) for a in exp._mesh_axes],
        "module_kept_var_idx": list(exp.module_kept_var_idx),
        "uses_global_constants": exp.uses_global_constants,
        "ordered_effects": [], "unordered_effects": [],
        "disabled_safety_checks": [str(c) for c in exp.disabled_safety_checks],
    }
    scopes = {id(d.scope): d.scope for a in exp.in_avals + exp.out_avals for d in a.shape
              if type(d) is shape_poly.DimExpr}
    if scopes:
        meta["symbolic_constraints"] = list(next(iter(scopes.values())).constraints_str)
    sections = [("meta", json.dumps(meta, sort_keys=True).encode()),
                ("module", exp.mlir_module_serialized)]
    if vjp_order > 0:
        sections.append(("vjp", bytes(exp.vjp().serialize(vjp_order - 1))))
    out = bytearray(MAGIC + struct.pack("<II", FORMAT_VERSION, len(sections)))
    for name, data in sections:
        raw = name.encode()
        out += struct.pack("<H", len(raw)) + raw + struct.pack("<Q", len(data)) + data
    out += hashlib.sha256(out).digest()
    return out


def _sections(blob) -> dict:
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"deserialize takes the bytes of Exported.serialize(), got "
                        f"{type(blob).__name__}")
    blob = bytes(blob)
    if blob[:8] != MAGIC:
        raise ValueError("Not a serialized fluxion Exported (bad magic) nor a jax.export "
                         "artifact")
    if len(blob) < 16:
        raise ValueError(f"Serialized Exported is truncated ({len(blob)} bytes)")
    version, count = struct.unpack_from("<II", blob, 8)
    if version not in _READABLE_VERSIONS:
        raise ValueError(f"Serialized Exported has format version {version}; this fluxion "
                         f"reads versions {', '.join(map(str, _READABLE_VERSIONS))}")
    end = len(blob)
    if version >= 2:
        end -= _DIGEST
        if end < 16:
            raise ValueError(f"Serialized Exported is truncated ({len(blob)} bytes)")
        if hashlib.sha256(blob[:end]).digest() != blob[end:]:
            raise ValueError("Serialized Exported is truncated or corrupt (checksum mismatch)")
    pos, out = 16, {}
    try:
        for _ in range(count):
            (n,) = struct.unpack_from("<H", blob, pos)
            if pos + 2 + n > end:
                raise ValueError
            name = blob[pos + 2:pos + 2 + n].decode()
            pos += 2 + n
            (size,) = struct.unpack_from("<Q", blob, pos)
            pos += 8
            if pos + size > end or name in out:
                raise ValueError
            out[name] = blob[pos:pos + size]
            pos += size
    except (struct.error, ValueError, UnicodeDecodeError):
        raise ValueError("Serialized Exported is truncated or corrupt") from None
    if pos != end:
        raise ValueError(f"Serialized Exported is corrupt ({end - pos} bytes after its "
                         f"{count} sections)")
    missing = [name for name in _REQUIRED_SECTIONS if name not in out]
    if missing:
        raise ValueError(f"Serialized Exported is corrupt (no {' or '.join(missing)} section)")
    return out


def _check_meta(meta, in_tree, in_avals, out_tree, out_avals) -> None:
    if in_tree.num_leaves != len(in_avals) or out_tree.num_leaves != len(out_avals):
        raise ValueError("the pytree structures do not match the number of abstract values")
    kept = meta["module_kept_var_idx"]
    if not all(type(i) is int and 0 <= i < len(in_avals) for i in kept):
        raise ValueError(f"module_kept_var_idx {kept!r} out of range")
    if type(meta["fun_name"]) is not str or not all(type(p) is str for p in meta["platforms"]):
        raise ValueError("fun_name and platforms must be strings")
    from fluxion._src.export.exported import CALLING_CONVENTION_VERSION
    if meta["calling_convention_version"] != CALLING_CONVENTION_VERSION:
        raise ValueError(f"calling convention version {meta['calling_convention_version']!r}, "
                         f"this fluxion supports {CALLING_CONVENTION_VERSION}")
    if type(meta["nr_devices"]) is not int or meta["nr_devices"] < 1:
        raise ValueError(f"nr_devices {meta['nr_devices']!r}")


def deserialize(blob) -> "Exported":
    """An `Exported` from the bytes of `Exported.serialize()`, in fluxion's container or
    in `jax.export`'s flatbuffer (told apart by their first bytes).

    Raises
    ------
    ValueError
        If the bytes are not a whole, unmodified container of a version this fluxion reads."""
    from fluxion._src.export.exported import Exported
    from fluxion._src.export import jax_format
    if isinstance(blob, (bytes, bytearray, memoryview)) and bytes(blob[:8]) != MAGIC \
            and jax_format.looks_like_jax(bytes(blob)):
        return jax_format.deserialize(bytes(blob))
    sec = _sections(blob)
    try:
        meta = json.loads(sec["meta"].decode())
        constraints = meta.get("symbolic_constraints", [])
        if not isinstance(constraints, list) or not all(type(c) is str for c in constraints):
            raise ValueError(f"bad symbolic_constraints {constraints!r}")
        scope = shape_poly.SymbolicScope(constraints)
        in_avals = [_decode_aval(a, scope) for a in meta["in_avals"]]
        out_avals = [_decode_aval(a, scope) for a in meta["out_avals"]]
        in_tree = _decode_tree(meta["in_tree"], in_avals)
        out_tree = _decode_tree(meta["out_tree"], out_avals)
        _check_meta(meta, in_tree, in_avals, out_tree, out_avals)
        vjp_blob = sec.get("vjp")
        get_vjp = (lambda: deserialize(vjp_blob)) if vjp_blob is not None else None
        return Exported(
            meta["fun_name"], in_tree, in_avals, out_tree, out_avals, meta["platforms"],
            sec["module"], in_shardings_hlo=meta["in_shardings_hlo"],
            out_shardings_hlo=meta["out_shardings_hlo"], nr_devices=meta["nr_devices"],
            calling_convention_version=meta["calling_convention_version"],
            module_kept_var_idx=meta["module_kept_var_idx"],
            uses_global_constants=meta["uses_global_constants"],
            disabled_safety_checks=meta["disabled_safety_checks"], get_vjp=get_vjp,
            in_specs=_decode_specs(meta, "in_specs", len(in_avals)),
            out_specs=_decode_specs(meta, "out_specs", len(out_avals)),
            out_types=_decode_specs(meta, "out_types", len(out_avals)),
            mesh_axes=_decode_mesh_axes(meta.get("mesh_axes", []), meta["nr_devices"]))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as e:
        raise ValueError(f"Serialized Exported has corrupt metadata ({type(e).__name__}: "
                         f"{e})") from None
