"""The binary container of a serialized `Exported` (docs/export.md describes it).

Layout (integers little-endian)::

    b"FLXEXPRT"                 8 bytes, magic
    uint32 format version       currently 1
    uint32 section count
    per section:
        uint16 name length, name (UTF-8)
        uint64 data length, data

Sections: "meta" (UTF-8 JSON: names, pytree structures, avals, platforms, ...), "module" (the
StableHLO portable artifact, VHLO bytecode), and optionally "vjp" (a whole nested container:
the exported VJP, itself possibly carrying its own). Nothing is unpickled or evaluated: the
JSON is data, pytree structures are rebuilt from tuples, lists, dicts and None only.
"""
from __future__ import annotations

import json
import struct

import numpy as np

from fluxion._src.export import shape_poly
from fluxion._src import core, dtypes, tree_util
from fluxion._src.core import ShapedArray

MAGIC = b"FLXEXPRT"
FORMAT_VERSION = 1


class _Leaf:
    __slots__ = ()


def _encode_tree(treedef) -> object:
    n = treedef.num_leaves
    leaf = _Leaf()
    example = tree_util.tree_unflatten(treedef, [leaf] * n)
    return _encode_node(example, leaf)


def _encode_node(x, leaf):
    if x is leaf:
        return {"t": "leaf"}
    if x is None:
        return {"t": "none"}
    if type(x) is tuple:
        return {"t": "tuple", "c": [_encode_node(c, leaf) for c in x]}
    if type(x) is list:
        return {"t": "list", "c": [_encode_node(c, leaf) for c in x]}
    if type(x) is dict:
        keys = sorted(x)
        for k in keys:
            if type(k) not in (str, int):
                raise ValueError(f"Cannot serialize a pytree with dict key {k!r}: only str and "
                                 "int keys are supported.")
        return {"t": "dict", "k": [[type(k).__name__, k] for k in keys],
                "c": [_encode_node(x[k], leaf) for k in keys]}
    raise ValueError(f"Cannot serialize a pytree node of type {type(x).__name__}: exported "
                     "functions that are serialized may only take and return tuples, lists, "
                     "dicts, None and arrays.")


def _decode_node(d, leaf):
    t = d["t"]
    if t == "leaf":
        return leaf
    if t == "none":
        return None
    if t == "tuple":
        return tuple(_decode_node(c, leaf) for c in d["c"])
    if t == "list":
        return [_decode_node(c, leaf) for c in d["c"]]
    if t == "dict":
        keys = [int(k) if kind == "int" else str(k) for kind, k in d["k"]]
        return {k: _decode_node(c, leaf) for k, c in zip(keys, d["c"])}
    raise ValueError(f"corrupt serialized pytree node kind {t!r}")


def _decode_tree(d):
    leaf = _Leaf()
    _, treedef = tree_util.tree_flatten(_decode_node(d, leaf), is_leaf=lambda x: x is leaf)
    return treedef


def _encode_aval(a) -> dict:
    # a symbolic dimension is stored as its text ("2*b + 1"), parsed back in one scope
    return {"shape": [str(d) if type(d) is shape_poly.DimExpr else int(d) for d in a.shape],
            "dtype": np.dtype(a.dtype).name, "weak_type": bool(a.weak_type)}


def _dtype(name: str):
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name))


def _decode_aval(d, scope) -> ShapedArray:
    shape = tuple(shape_poly.symbolic_shape(x, scope=scope)[0] if isinstance(x, str) else int(x)
                  for x in d["shape"])
    dtype = dtypes.float0 if d["dtype"] == "void" else _dtype(d["dtype"])
    return ShapedArray(shape, dtype, d["weak_type"])


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
    return out


def _sections(blob: bytes) -> dict:
    blob = bytes(blob)
    if blob[:8] != MAGIC:
        raise ValueError("Not a serialized fluxion Exported (bad magic); jax.export's "
                         "flatbuffer format is not read.")
    if len(blob) < 16:
        raise ValueError("Serialized Exported is truncated")
    version, count = struct.unpack_from("<II", blob, 8)
    if version != FORMAT_VERSION:
        raise ValueError(f"Serialized Exported has format version {version}; this fluxion "
                         f"reads version {FORMAT_VERSION}")
    pos, out = 16, {}
    try:
        for _ in range(count):
            (n,) = struct.unpack_from("<H", blob, pos)
            name = blob[pos + 2:pos + 2 + n].decode()
            pos += 2 + n
            (size,) = struct.unpack_from("<Q", blob, pos)
            pos += 8
            if pos + size > len(blob):
                raise ValueError
            out[name] = blob[pos:pos + size]
            pos += size
    except (struct.error, ValueError, UnicodeDecodeError):
        raise ValueError("Serialized Exported is truncated or corrupt") from None
    return out


def deserialize(blob) -> "Exported":
    """An `Exported` from the bytes of `Exported.serialize()`."""
    from fluxion._src.export.exported import Exported
    sec = _sections(blob)
    meta = json.loads(sec["meta"].decode())
    vjp_blob = sec.get("vjp")
    get_vjp = (lambda: deserialize(vjp_blob)) if vjp_blob is not None else None
    scope = shape_poly.SymbolicScope(meta.get("symbolic_constraints", ()))
    return Exported(
        meta["fun_name"], _decode_tree(meta["in_tree"]),
        [_decode_aval(a, scope) for a in meta["in_avals"]], _decode_tree(meta["out_tree"]),
        [_decode_aval(a, scope) for a in meta["out_avals"]], meta["platforms"], sec["module"],
        in_shardings_hlo=meta["in_shardings_hlo"], out_shardings_hlo=meta["out_shardings_hlo"],
        nr_devices=meta["nr_devices"],
        calling_convention_version=meta["calling_convention_version"],
        module_kept_var_idx=meta["module_kept_var_idx"],
        uses_global_constants=meta["uses_global_constants"],
        disabled_safety_checks=meta["disabled_safety_checks"], get_vjp=get_vjp)
