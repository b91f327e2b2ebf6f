"""Bad input catalogue: what comes from disk (issue 16, item 5) and exported functions.

Serialized `Exported` artifacts truncated, tampered with or forged; exported functions called
with the wrong arguments; compilation-cache entries truncated or tampered with (a miss with a
warning, never a crash nor an unverified executable); `.npy`/`.npz`/pickle files for
`jnp.load` (pickles are refused, never run).

fluxion's artifact container is its own (JAX's is a flatbuffer), so the artifact cases name
fluxion's class; cases about calls compare with JAX.
"""
import builtins
import glob
import hashlib
import io
import json
import os
import pickle
import struct
import tempfile
import warnings

import numpy as np

from catalogue import Case, family_test


def np_(m):
    return m.numpy


# ---------------------------------------------------------------------------------------------
# Exported artifacts

def _exported(m, vjp=False):
    f = m.jit(lambda x, y: {"s": np_(m).sin(x) + y})
    return m.export.export(f)(np_(m).ones(2, np.float32), np_(m).ones((), np.float32))


def _blob(m, vjp_order=0):
    return bytes(_exported(m).serialize(vjp_order))


def _call(m, exp):
    out = exp.call(np_(m).ones(2, np.float32), np_(m).ones((), np.float32))
    return out["s"]


def _load_and_call(m, blob):
    return _call(m, m.export.deserialize(blob))


def _sections(blob):
    """[(name, data)] of a container (any version)."""
    pos, out = 16, []
    for _ in range(struct.unpack_from("<I", blob, 12)[0]):
        (n,) = struct.unpack_from("<H", blob, pos)
        name = blob[pos + 2:pos + 2 + n].decode()
        (size,) = struct.unpack_from("<Q", blob, pos + 2 + n)
        pos += 10 + n
        out.append((name, blob[pos:pos + size]))
        pos += size
    return out


def _container(sections, version=2):
    """A well-formed container with a valid checksum around `sections` (a forger's view)."""
    out = b"FLXEXPRT" + struct.pack("<II", version, len(sections))
    for name, data in sections:
        out += struct.pack("<H", len(name)) + name.encode() + struct.pack("<Q", len(data)) + data
    return out + hashlib.sha256(out).digest() if version >= 2 else out


def _with_meta(m, edit):
    """The artifact with its metadata edited by `edit(meta)` and the checksum made valid."""
    secs = dict(_sections(_blob(m)))
    meta = json.loads(secs["meta"])
    edit(meta)
    secs["meta"] = json.dumps(meta).encode()
    return _container(list(secs.items()))


def _flip(blob, where):
    b = bytearray(blob)
    b[where] ^= 0x5A
    return bytes(b)


def _module_offset(blob):
    return blob.index(b"ML\xefR") + 20


def _set(key, value):
    return lambda meta: meta.__setitem__(key, value)


def _forged_module(m, text):
    """An artifact whose module is `text` (with the real metadata), checksum valid."""
    from fluxion._src.export import exported as ex
    secs = dict(_sections(_blob(m)))
    secs["module"] = ex._serialize_module(text)
    return _container(list(secs.items()))


_CALLBACK_MODULE = """module @m {
  func.func public @main(%arg0: tensor<2xf32>, %arg1: tensor<f32>) -> (tensor<2xf32>) {
    %0 = "stablehlo.custom_call"(%arg0) {call_target_name = "xla_ffi_python_cpu_callback",
      has_side_effect = false, api_version = 4 : i32, backend_config = {index = 0 : ui64}}
      : (tensor<2xf32>) -> tensor<2xf32>
    "func.return"(%0) : (tensor<2xf32>) -> ()
  }
}"""


def _forged_callback_in_program(m):
    # The calling program has a callback of its own: the forged custom call must not reach it.
    ran = []
    exp = m.export.deserialize(_forged_module(m, _CALLBACK_MODULE))

    def mine(y):
        ran.append(1)
        return y
    f = m.jit(lambda x: exp.call(m.pure_callback(mine, m.ShapeDtypeStruct((2,), np.float32), x),
                                 np_(m).float32(1))["s"])
    try:
        return f(np_(m).ones(2, np.float32))
    finally:
        assert len(ran) <= 1, "the forged custom call ran the program's callback"


def _version1(m):
    blob = _blob(m)
    return _load_and_call(m, blob[:8] + struct.pack("<I", 1) + blob[12:-32])


def _deep_tree(m, depth):
    """The artifact with an input tree nested `depth` tuples deep."""
    secs = dict(_sections(_blob(m)))
    meta = json.loads(secs["meta"])
    meta["in_tree"] = "@"
    deep = '{"t": "tuple", "c": [' * depth + '{"t": "leaf"}' + "]}" * depth
    secs["meta"] = json.dumps(meta).replace('"@"', deep).encode()
    return m.export.deserialize(_container(list(secs.items())))


EXPORT_CASES = [
    # whole-container damage: checksum, lengths, magic, version
    Case("export_empty", lambda m: m.export.deserialize(b""), raises=ValueError,
         match="bad magic", jax_ok=False),
    Case("export_not_bytes", lambda m: m.export.deserialize("FLXEXPRT"), raises=TypeError,
         match="bytes", jax_ok=False),
    Case("export_truncated_header", lambda m: m.export.deserialize(_blob(m)[:12]),
         raises=ValueError, match="truncated", jax_ok=False),
    Case("export_truncated_half", lambda m: m.export.deserialize(_blob(m)[:200]),
         raises=ValueError, match="truncated", jax_ok=False),
    Case("export_truncated_last_byte", lambda m: m.export.deserialize(_blob(m)[:-1]),
         raises=ValueError, match="checksum", jax_ok=False),
    Case("export_trailing_bytes", lambda m: m.export.deserialize(_blob(m) + b"\0"),
         raises=ValueError, match="checksum", jax_ok=False),
    Case("export_flipped_module_byte", lambda m: _load_and_call(
        m, _flip(_blob(m), _module_offset(_blob(m)))), raises=ValueError, match="checksum",
         jax_ok=False),
    Case("export_flipped_meta_byte", lambda m: m.export.deserialize(_flip(_blob(m), 40)),
         raises=ValueError, match="checksum", jax_ok=False),
    Case("export_flipped_checksum", lambda m: m.export.deserialize(_flip(_blob(m), -1)),
         raises=ValueError, match="checksum", jax_ok=False),
    Case("export_flipped_vjp_byte", lambda m: m.export.deserialize(_flip(_blob(m, 1), -100)),
         raises=ValueError, match="checksum", jax_ok=False),
    Case("export_bad_magic", lambda m: m.export.deserialize(b"XXXXXXXX" + _blob(m)[8:]),
         raises=ValueError, match="bad magic", jax_ok=False),
    Case("export_future_version", lambda m: m.export.deserialize(
        _blob(m)[:8] + struct.pack("<I", 99) + _blob(m)[12:]), raises=ValueError,
         match="format version 99", jax_ok=False),
    # well-formed containers (valid checksum) with bad contents
    Case("export_section_past_end", lambda m: m.export.deserialize(
        _container([("meta", b"{}")])[:-32 - 2] + hashlib.sha256(
            _container([("meta", b"{}")])[:-32 - 2]).digest()), raises=ValueError,
         match="truncated or corrupt", jax_ok=False),
    Case("export_no_module_section", lambda m: m.export.deserialize(
        _container([s for s in _sections(_blob(m)) if s[0] != "module"])), raises=ValueError,
         match="no module section", jax_ok=False),
    Case("export_duplicate_section", lambda m: m.export.deserialize(
        _container(_sections(_blob(m)) + [("meta", b"{}")])), raises=ValueError,
         match="corrupt", jax_ok=False),
    Case("export_meta_not_json", lambda m: m.export.deserialize(
        _container([("meta", b"\xff{"), ("module", b"")])), raises=ValueError,
         match="corrupt metadata", jax_ok=False),
    Case("export_meta_is_a_list", lambda m: m.export.deserialize(
        _container([("meta", b"[1]"), ("module", b"")])), raises=ValueError,
         match="corrupt metadata", jax_ok=False),
    Case("export_meta_deeply_nested_json", lambda m: _deep_tree(m, 200_000), raises=ValueError,
         match="corrupt metadata", jax_ok=False),
    Case("export_meta_missing_key", lambda m: m.export.deserialize(
        _with_meta(m, lambda meta: meta.pop("in_avals"))), raises=ValueError,
         match="corrupt metadata.*in_avals", jax_ok=False),
    Case("export_meta_object_dtype", lambda m: m.export.deserialize(_with_meta(
        m, lambda meta: meta["in_avals"][0].__setitem__("dtype", "object"))), raises=ValueError,
         match="not an array dtype", jax_ok=False),
    Case("export_meta_structured_dtype", lambda m: m.export.deserialize(_with_meta(
        m, lambda meta: meta["in_avals"][0].__setitem__("dtype", "f4,i4"))), raises=ValueError,
         match="corrupt metadata", jax_ok=False),
    Case("export_meta_unknown_dtype", lambda m: m.export.deserialize(_with_meta(
        m, lambda meta: meta["in_avals"][0].__setitem__("dtype", "__class__"))),
         raises=ValueError, match="unknown dtype", jax_ok=False),
    Case("export_meta_negative_dim", lambda m: m.export.deserialize(_with_meta(
        m, lambda meta: meta["in_avals"][0].__setitem__("shape", [-5]))), raises=ValueError,
         match="bad shape", jax_ok=False),
    Case("export_meta_huge_shape", lambda m: m.export.deserialize(_with_meta(
        m, lambda meta: meta["in_avals"][0].__setitem__("shape", [2**62, 2**62]))),
         raises=ValueError, match="elements", jax_ok=False),
    Case("export_meta_bad_tree_kind", lambda m: m.export.deserialize(
        _with_meta(m, _set("in_tree", {"t": "object"}))), raises=ValueError,
         match="node kind 'object'", jax_ok=False),
    Case("export_meta_deep_tree", lambda m: _deep_tree(m, 400), raises=ValueError,
         match="corrupt metadata", jax_ok=False),
    Case("export_meta_leaf_count", lambda m: m.export.deserialize(_with_meta(
        m, _set("out_tree", {"t": "tuple", "c": [{"t": "leaf"}, {"t": "leaf"}]}))),
         raises=ValueError, match="number of abstract values", jax_ok=False),
    Case("export_meta_kept_var_idx", lambda m: m.export.deserialize(
        _with_meta(m, _set("module_kept_var_idx", [0, 7]))), raises=ValueError,
         match="out of range", jax_ok=False),
    Case("export_meta_calling_convention", lambda m: m.export.deserialize(
        _with_meta(m, _set("calling_convention_version", 99))), raises=ValueError,
         match="calling convention version 99", jax_ok=False),
    Case("export_meta_nr_devices", lambda m: m.export.deserialize(
        _with_meta(m, _set("nr_devices", 0))), raises=ValueError, match="nr_devices",
         jax_ok=False),
    # the metadata lies about the module's types: XLA's verifier refuses the call
    Case("export_meta_lies_about_shape", lambda m: m.export.deserialize(_with_meta(
        m, lambda meta: meta["in_avals"][0].__setitem__("shape", [3]))).call(
            np_(m).ones(3, np.float32), np_(m).ones((), np.float32))["s"],
         raises=RuntimeError, match="type mismatch", jax_ok=False),
    Case("export_module_garbage", lambda m: _load_and_call(m, _container(
        [(n, b"ML\xefR" + bytes(64) if n == "module" else d) for n, d in _sections(_blob(m))])),
         raises=ValueError, match="deserialize module", jax_ok=False),
    Case("export_module_forged_callback", lambda m: _load_and_call(
        m, _forged_module(m, _CALLBACK_MODULE)), raises=ValueError,
         match="calls back into Python", jax_ok=False),
    Case("export_module_forged_callback_in_program", _forged_callback_in_program,
         raises=ValueError, match="calls back into Python", jax_ok=False),
    Case("export_platform_not_exported", lambda m: _load_and_call(
        m, _with_meta(m, _set("platforms", ["tpu"]))), raises=ValueError,
         match="exported for platforms", jax_ok=False),
    Case("export_version1_still_read", _version1, raises=None, jax_ok=False),
    Case("export_no_vjp_serialized", lambda m: m.grad(lambda x: m.export.deserialize(_blob(m))
         .call(x, np_(m).float32(1))["s"].sum())(np_(m).ones(2, np.float32)), raises=ValueError,
         match="vjp_order", jax_ok=False),
    # exporting and calling, against JAX
    Case("export_not_jitted", lambda m: m.export.export(lambda x: x)(1.0), match="jit"),
    # JAX lowers for a platform it does not know without complaint.
    Case("export_unknown_platform", lambda m: m.export.export(m.jit(lambda x: x),
                                                              platforms=["abacus"])(1.0),
         raises=ValueError, match="Unknown platform 'abacus'", jax_ok=False),
    Case("export_call_wrong_shape", lambda m: _exported(m).call(
        np_(m).ones(3, np.float32), np_(m).ones((), np.float32)), match="shape"),
    Case("export_call_wrong_dtype", lambda m: _exported(m).call(
        np_(m).ones(2, np.int32), np_(m).ones((), np.float32)), match="i(nt)?32"),
    Case("export_call_wrong_count", lambda m: _exported(m).call(np_(m).ones(2, np.float32)), match='pytree structure'),
    Case("export_call_wrong_tree", lambda m: _exported(m).call(
        [np_(m).ones(2, np.float32), np_(m).ones((), np.float32)]), match="pytree"),
    Case("export_call_other_platform", lambda m: m.export.export(
        m.jit(lambda x: x * 2), platforms=["tpu"])(np_(m).ones(2)).call(np_(m).ones(2)),
         match="platforms"),
    Case("export_call_callback", lambda m: m.export.export(m.jit(lambda x: m.pure_callback(
        lambda y: y, m.ShapeDtypeStruct((), np.float32), x)))(np_(m).float32(1)),
         raises=ValueError, match="calls back into Python", jax_ok=False),
    Case("export_serialize_custom_node", lambda m: m.export.export(m.jit(lambda x: x))(
        m.tree_util.Partial(np_(m).sin, np_(m).ones(2))).serialize(), raises=ValueError,
         match="Cannot serialize", jax_ok=False),
]


# ---------------------------------------------------------------------------------------------
# The persistent compilation cache

def _cache_case(m, tamper, expect_reject=True):
    """Compile into a fresh cache, damage every entry with `tamper(path)`, and compile again:
    the value must be right, and each damaged entry a rejected miss with a warning."""
    from fluxion._src.compiler import compilation_cache as cc
    from fluxion.experimental.compilation_cache import compilation_cache as public
    cfg = m.config
    keys = ("enable_compilation_cache", "compilation_cache_dir",
            "persistent_cache_min_compile_time_secs")
    saved = {k: getattr(cfg, k) for k in keys}
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    f = lambda a: np_(m).sin(a) * 3.0 + 0.25  # noqa: E731
    try:
        with tempfile.TemporaryDirectory() as d:
            cfg.update("enable_compilation_cache", True)
            public.set_cache_dir(d)
            cfg.update("persistent_cache_min_compile_time_secs", 0.0)
            m.clear_caches()
            public.reset_cache()
            m.jit(f)(x).block_until_ready()
            paths = glob.glob(os.path.join(d, "*" + cc.SUFFIX))
            assert paths, "nothing was written to the cache"
            for p in paths:
                tamper(p)
            m.clear_caches()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = np.asarray(m.jit(f)(x))
            np.testing.assert_allclose(out, np.sin(x) * 3 + 0.25, rtol=1e-6)
            if expect_reject:
                assert public.stats()["rejected"] >= 1, public.stats()
                assert any("ignoring entry" in str(w.message) for w in caught)
            return out
    finally:
        for k, v in saved.items():
            cfg.update(k, v)
        public.reset_cache()
        m.clear_caches()


def _rewrite(path, fn):
    with open(path, "rb") as fh:
        data = fh.read()
    with open(path, "wb") as fh:
        fh.write(fn(data))


def _reheader(data, payload, *, key=None, version=None):
    from fluxion._src.compiler import compilation_cache as cc
    magic, v, stored_key, _, _ = cc._HEADER.unpack_from(data)
    return cc._HEADER.pack(magic, v if version is None else version,
                           stored_key if key is None else key, len(payload),
                           hashlib.sha256(payload).digest()) + payload


def _payload(data):
    from fluxion._src.compiler import compilation_cache as cc
    return data[cc._HEADER.size:]


def _to_directory(path):
    os.remove(path)
    os.mkdir(path)


CACHE_CASES = [
    Case("cache_entry_empty", lambda m: _cache_case(m, lambda p: _rewrite(p, lambda d: b"")),
         raises=None, jax_ok=False),
    Case("cache_entry_truncated_header", lambda m: _cache_case(
        m, lambda p: _rewrite(p, lambda d: d[:40])), raises=None, jax_ok=False),
    Case("cache_entry_truncated_payload", lambda m: _cache_case(
        m, lambda p: _rewrite(p, lambda d: d[:-7])), raises=None, jax_ok=False),
    Case("cache_entry_flipped_payload", lambda m: _cache_case(
        m, lambda p: _rewrite(p, lambda d: _flip(d, len(d) // 2))), raises=None, jax_ok=False),
    Case("cache_entry_flipped_checksum", lambda m: _cache_case(
        m, lambda p: _rewrite(p, lambda d: _flip(d, 60))), raises=None, jax_ok=False),
    Case("cache_entry_bad_magic", lambda m: _cache_case(
        m, lambda p: _rewrite(p, lambda d: b"NOTCACHE" + d[8:])), raises=None, jax_ok=False),
    Case("cache_entry_other_version", lambda m: _cache_case(
        m, lambda p: _rewrite(p, lambda d: _reheader(d, _payload(d), version=7))),
         raises=None, jax_ok=False),
    Case("cache_entry_other_key", lambda m: _cache_case(
        m, lambda p: _rewrite(p, lambda d: _reheader(d, _payload(d), key=bytes(32)))),
         raises=None, jax_ok=False),
    # A forger who recomputes the checksum: jaxlib refuses bytes that are no executable.
    Case("cache_entry_garbage_resealed", lambda m: _cache_case(
        m, lambda p: _rewrite(p, lambda d: _reheader(d, b"\x00garbage" * 64))),
         raises=None, jax_ok=False),
    Case("cache_entry_pickle_resealed", lambda m: _cache_case(
        m, lambda p: _rewrite(p, lambda d: _reheader(d, pickle.dumps(_Pwn())))),
         raises=None, jax_ok=False),
    Case("cache_entry_is_a_directory", lambda m: _cache_case(m, _to_directory,
                                                            expect_reject=False),
         raises=None, jax_ok=False),
]


# ---------------------------------------------------------------------------------------------
# jnp.load

class _Pwn:
    """Unpickling this sets builtins._fluxion_pwned: a stand-in for code run by a pickle."""

    def __reduce__(self):
        return (exec, ("import builtins; builtins._fluxion_pwned = True",))


def _file(data: bytes, suffix=".npy"):
    fd, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


def _npy(arr, **kw) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, **kw)
    return buf.getvalue()


def _npy_header(header: str, data: bytes = b"") -> bytes:
    text = header.encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


def _load(m, data, suffix=".npy", **kw):
    path = _file(data, suffix)
    try:
        out = np_(m).load(path, **kw)
        if suffix == ".npz":
            out = {k: out[k] for k in out.files}
        return out
    finally:
        os.remove(path)
        assert not getattr(builtins, "_fluxion_pwned", False), "loading ran a pickle's code"


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _npz_raw(**members) -> bytes:
    """A .npz (zip) archive whose members are the given bytes, CRCs valid."""
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name + ".npy", data)
    return buf.getvalue()


def _npz_with_pickle() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, a=np.array([_Pwn()], dtype=object))
    return buf.getvalue()


_GOOD = np.arange(12, dtype=np.float32).reshape(3, 4)

LOAD_CASES = [
    Case("load_pickle_file", lambda m: _load(m, pickle.dumps(_Pwn())), match="pickle"),
    # JAX passes allow_pickle on to NumPy and would run the pickle.
    Case("load_pickle_allow_pickle", lambda m: _load(m, pickle.dumps(_Pwn()), allow_pickle=True),
         raises=ValueError, match="never unpickles", jax_ok=False),
    Case("load_object_npy", lambda m: _load(m, _npy(np.array([_Pwn()], object),
                                                    allow_pickle=True)), match="allow_pickle"),
    Case("load_object_npy_allow_pickle", lambda m: _load(
        m, _npy(np.array([_Pwn()], object), allow_pickle=True), allow_pickle=True),
         raises=ValueError, match="never unpickles", jax_ok=False),
    Case("load_npz_object_member", lambda m: _load(m, _npz_with_pickle(), ".npz"),
         match="allow_pickle"),
    Case("load_empty_file", lambda m: _load(m, b""), match='No data'),
    Case("load_random_bytes", lambda m: _load(m, b"\x01\x02 not an array file" * 3), match='pickled'),
    Case("load_truncated_magic", lambda m: _load(m, _npy(_GOOD)[:4]), match='pickled'),
    Case("load_truncated_header", lambda m: _load(m, _npy(_GOOD)[:30]), match='EOF'),
    Case("load_truncated_data", lambda m: _load(m, _npy(_GOOD)[:-5]), match="truncated"),
    Case("load_truncated_data_file_object", lambda m: np_(m).load(io.BytesIO(_npy(_GOOD)[:-5])),
         match="truncated"),
    Case("load_truncated_npz", lambda m: _load(m, _npz(a=_GOOD)[:60], ".npz"), match='zip'),
    Case("load_header_code", lambda m: _load(m, _npy_header(
        "{'descr': __import__('builtins').setattr(__import__('builtins'), '_fluxion_pwned', "
        "True), 'fortran_order': False, 'shape': (1,), }", b"\0" * 4)), match='malformed'),
    Case("load_header_object_dtype", lambda m: _load(m, _npy_header(
        "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", b"\0" * 8)), match='allow_pickle'),
    # NumPy (and JAX) try to allocate the 4 TiB first (MemoryError); fluxion checks the size.
    Case("load_header_huge_shape", lambda m: _load(m, _npy_header(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", b"\0" * 16)),
         raises=ValueError, match="header declares", jax_ok=False),
    Case("load_header_negative_shape", lambda m: _load(m, _npy_header(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", b"\0" * 16)),
         match="negative"),
    Case("load_header_overflow_shape", lambda m: _load(m, _npy_header(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }",
        b"\0" * 16)), match="header declares"),
    Case("load_npz_member_huge_shape", lambda m: _load(m, _npz_raw(a=_npy_header(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", b"\0" * 16)),
        ".npz"), raises=ValueError, match="header declares", jax_ok=False),
    Case("load_npz_member_short", lambda m: _load(m, _npz_raw(a=_npy(_GOOD)[:-8]), ".npz"),
         match="truncated"),
    Case("load_npz_good", lambda m: _load(m, _npz(a=_GOOD, b=_GOOD[0]), ".npz")["b"],
         raises=None, compare=True),
    Case("load_header_bad_version", lambda m: _load(m, b"\x93NUMPY\x09\x00" + _npy(_GOOD)[8:]), match='format version'),
    Case("save_allow_pickle", lambda m: np_(m).save(io.BytesIO(), np_(m).ones(2),
                                                    allow_pickle=True),
         raises=ValueError, match="never unpickles", jax_ok=False),
    Case("save_object_array", lambda m: np_(m).save(io.BytesIO(), np.array([None], object)),
         raises=ValueError, match="never unpickles", jax_ok=False),
]

CASES = EXPORT_CASES + CACHE_CASES + LOAD_CASES

test_case = family_test(CASES, __file__)
