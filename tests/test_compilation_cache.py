"""The persistent compilation cache: hits and misses, several processes, bad entries, LRU."""
import glob
import logging
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion._src.compiler import compilation_cache as cc
from fluxion.experimental.compilation_cache import compilation_cache as public_cc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def cache(tmp_path):
    """The cache on, in a temporary directory, caching every compile."""
    cfg = fluxion.config
    saved = {k: getattr(cfg, k) for k in ("enable_compilation_cache", "compilation_cache_dir",
                                          "persistent_cache_min_compile_time_secs",
                                          "persistent_cache_max_size",
                                          "compilation_cache_max_size",
                                          "persistent_cache_min_entry_size_bytes")}
    cfg.update("enable_compilation_cache", True)
    public_cc.set_cache_dir(str(tmp_path))
    cfg.update("persistent_cache_min_compile_time_secs", 0.0)
    public_cc.reset_cache()
    fluxion.clear_caches()
    yield tmp_path
    for k, v in saved.items():
        cfg.update(k, v)
    public_cc.reset_cache()
    fluxion.clear_caches()


def entries(directory):
    return sorted(glob.glob(os.path.join(str(directory), "*" + cc.SUFFIX)))


def _poly(x):
    return jnp.sin(x) * 3.0 + jnp.cos(x) @ jnp.ones((x.shape[1], 3), x.dtype)


X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
EXPECTED = np.sin(X) * 3 + np.cos(X) @ np.ones((3, 3), np.float32)


def test_miss_then_hit_seen_through_log_compiles(cache, caplog):
    fluxion.config.update("log_compiles", True)
    try:
        with caplog.at_level(logging.WARNING, logger="fluxion"):
            np.testing.assert_allclose(fluxion.jit(_poly)(X), EXPECTED, rtol=1e-6)
        first = caplog.text
        assert "Finished XLA compilation of jit__poly" in first
        assert "Writing jit__poly to the persistent compilation cache" in first
        assert len(entries(cache)) == 1
        fluxion.clear_caches()  # the in-memory caches go; the disk entry stays
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="fluxion"):
            np.testing.assert_allclose(fluxion.jit(_poly)(X), EXPECTED, rtol=1e-6)
        assert "Persistent compilation cache hit for jit__poly" in caplog.text
        assert "Finished XLA compilation of jit__poly" not in caplog.text
    finally:
        fluxion.config.update("log_compiles", False)
    assert public_cc.stats()["hits"] == 1


def test_disabled_writes_nothing(cache):
    fluxion.config.update("enable_compilation_cache", False)
    fluxion.jit(lambda x: x * 7.0)(X)
    assert entries(cache) == []


def test_min_compile_time_skips_fast_compiles(cache):
    fluxion.config.update("persistent_cache_min_compile_time_secs", 1e6)
    np.testing.assert_allclose(fluxion.jit(_poly)(X), EXPECTED, rtol=1e-6)
    assert entries(cache) == []


def test_jax_cache_flags_min_entry_size_and_max_size(cache):
    # JAX's names, as JAX programs set them (the docs' recommended settings)
    fluxion.config.update("jax_persistent_cache_min_entry_size_bytes", 1 << 40)
    fluxion.jit(_poly)(X)
    assert entries(cache) == []  # every entry is smaller
    fluxion.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    fluxion.config.update("jax_compilation_cache_max_size", 0)
    fluxion.jit(lambda x: x * 5.0)(X)
    assert entries(cache) == []  # written, then evicted by the size bound
    fluxion.config.update("jax_compilation_cache_max_size", -1)  # persistent_cache_max_size
    fluxion.jit(lambda x: x * 6.0)(X)
    assert len(entries(cache)) == 1


def test_jax_num_cpu_devices_before_and_after_the_first_computation():
    code = textwrap.dedent("""
        import fluxion, fluxion.numpy as jnp
        fluxion.config.update("jax_num_cpu_devices", 3)
        print(len(fluxion.devices()))
        try:
            fluxion.config.update("jax_num_cpu_devices", 2)
        except RuntimeError as e:
            print("refused:", "before backends are initialized" in str(e))
    """)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**env, "PYTHONPATH": ROOT})
    assert out.stdout.split("\n")[:2] == ["3", "refused: True"], out.stderr


def test_key_depends_on_text_options_platform_and_device():
    backend = types.SimpleNamespace(platform="cpu", client=types.SimpleNamespace(platform_version="v"))
    dev = types.SimpleNamespace(device_kind="cpu", id=0)
    base = cc.cache_key("module {}", b"opts", backend, dev)
    assert base == cc.cache_key("module {}", b"opts", backend, dev)
    assert base != cc.cache_key("module { }", b"opts", backend, dev)
    assert base != cc.cache_key("module {}", b"other", backend, dev)
    assert base != cc.cache_key("module {}", b"opts", types.SimpleNamespace(
        platform="cuda", client=backend.client), dev)
    assert base != cc.cache_key("module {}", b"opts", backend,
                                types.SimpleNamespace(device_kind="other", id=0))
    assert base != cc.cache_key("module {}", b"opts", backend,
                                types.SimpleNamespace(device_kind="cpu", id=1))


def test_entry_format_checks():
    key, other = b"k" * 32, b"o" * 32
    data = cc.encode_entry(key, b"payload bytes")
    assert data[:8] == b"FLXCACHE" and len(data) == 84 + len(b"payload bytes")
    assert cc.decode_entry(key, data) == b"payload bytes"
    bad = [(data[:40], "truncated"), (data[:-3], "truncated payload"),
           (b"XXXXXXXX" + data[8:], "bad magic"), (data[:-1] + b"X", "checksum"),
           (cc.encode_entry(other, b"payload bytes"), "key mismatch")]
    for blob, why in bad:
        with pytest.raises(ValueError, match=why):
            cc.decode_entry(key, blob)


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign", "garbage_payload"])
def test_bad_entry_is_recompiled_with_a_warning(cache, damage):
    f = lambda x: jnp.tanh(x) * 2.0 + 1.0  # noqa: E731
    expected = np.tanh(X) * 2 + 1
    fluxion.jit(f)(X)
    (path,) = entries(cache)
    data = open(path, "rb").read()
    if damage == "flip":
        data = data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:]
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "foreign":  # a valid entry of another program under this name
        data = cc.encode_entry(b"\x01" * 32, data[84:])
    else:  # intact checksum, bytes that are no executable
        data = cc.encode_entry(bytes.fromhex(os.path.basename(path)[:-5]), b"\x00" * 100)
    open(path, "wb").write(data)
    fluxion.clear_caches()
    with pytest.warns(RuntimeWarning, match="compiling the program again"):
        out = fluxion.jit(f)(X)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert public_cc.stats()["rejected"] == 1
    # the bad entry was replaced by a good one
    fluxion.clear_caches()
    public_cc.reset_cache()
    np.testing.assert_allclose(fluxion.jit(f)(X), expected, rtol=1e-6)
    assert public_cc.stats()["hits"] == 1 and public_cc.stats()["rejected"] == 0


def test_lru_eviction_keeps_the_recently_used(cache):
    fns = [lambda x, k=k: jnp.sin(x) * float(k + 2) for k in range(3)]
    for f in fns:
        fluxion.jit(f)(X)
    paths = entries(cache)
    assert len(paths) == 3
    sizes = {p: os.path.getsize(p) for p in paths}
    by_age = sorted(paths, key=os.path.getmtime)
    oldest = by_age[0]
    # use the oldest again: it becomes the most recent
    for i, p in enumerate(by_age):
        os.utime(p, (1000 + i, 1000 + i))
    fluxion.clear_caches()
    public_cc.reset_cache()
    before = set(entries(cache))
    for f in fns:  # all hits; each hit refreshes its entry
        fluxion.jit(f)(X)
    assert public_cc.stats()["hits"] == 3 and set(entries(cache)) == before
    for i, p in enumerate(by_age):  # now order: by_age[1] oldest, then [2], then [0]
        os.utime(p, (3000 if p == oldest else 2000 + i, 3000 if p == oldest else 2000 + i))
    limit = sum(sizes.values()) + 10
    fluxion.config.update("persistent_cache_max_size", limit)
    public_cc.reset_cache()
    fluxion.jit(lambda x: jnp.cos(x) * 9.0)(X)  # a fourth entry pushes past the limit
    left = set(entries(cache))
    assert by_age[1] not in left and oldest in left and by_age[2] in left
    assert sum(os.path.getsize(p) for p in left) <= limit
    assert public_cc.stats()["evictions"] == 1


def test_a_full_cache_is_listed_once_not_at_every_write(cache, monkeypatch):
    """Over the size bound each write evicts the oldest entries; the directory is listed
    once per process (a full shared cache of ~10^5 entries took ~1 s a compile)."""
    listed = []
    real = cc._entries
    monkeypatch.setattr(cc, "_entries", lambda d: listed.append(d) or real(d))
    size = len(cc.encode_entry(b"k0", b"x" * 100))
    fluxion.config.update("persistent_cache_max_size", 3 * size)
    for i in range(8):
        cc.put(f"k{i}".encode(), b"x" * 100)
    assert len(listed) == 1
    left = entries(cache)
    assert left == sorted(cc.entry_path(f"k{i}".encode(), str(cache)) for i in (5, 6, 7))
    assert sum(os.path.getsize(p) for p in left) <= 3 * size


def test_second_jit_object_of_a_function_reuses_its_trace_and_executable():
    traces = []

    def f(x):
        traces.append(1)
        return x * 2.0

    a = fluxion.jit(f)(X)
    b = fluxion.jit(f)(X)
    np.testing.assert_array_equal(a, b)
    assert len(traces) == 1
    fluxion.jit(f, static_argnums=())(X[:2])  # another signature traces
    assert len(traces) == 2
    fluxion.jit(f, donate_argnums=0)(jnp.asarray(X))  # other options: their own caches
    assert len(traces) == 3


def test_programs_with_host_callbacks_are_not_cached(cache):
    seen = []

    def f(x):
        fluxion.debug.callback(lambda v: seen.append(np.asarray(v)), x)
        return x + 1.0
    np.testing.assert_allclose(fluxion.jit(f)(X), X + 1)
    assert len(seen) == 1 and entries(cache) == []


_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import fluxion, fluxion.numpy as jnp
    from fluxion.experimental.compilation_cache import compilation_cache as cc

    def loss(ws, x):
        for w in ws:
            x = jnp.tanh(x @ w)
        return jnp.sum(x ** 2)

    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((8, 8)).astype(np.float32) / 3 for _ in range(3)]
    x = rng.standard_normal((4, 8)).astype(np.float32)
    g = fluxion.jit(fluxion.grad(loss))(ws, x)
    print(json.dumps({"stats": cc.stats(), "g": [np.asarray(v).tolist() for v in g]}))
""")


def _run_script(cache_dir, n=1):
    env = dict(os.environ, FLUXION_ENABLE_COMPILATION_CACHE="1",
               FLUXION_COMPILATION_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT,
               FLUXION_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    procs = [subprocess.Popen([sys.executable, "-c", _SCRIPT], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    import json
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def test_new_process_hits_and_concurrent_writers_share_a_directory(tmp_path):
    first = _run_script(tmp_path, n=2)  # two writers at once, same programs
    for out in first:
        assert out["stats"]["rejected"] == 0
    files = os.listdir(tmp_path)
    assert files and all(f.endswith(cc.SUFFIX) for f in files)  # no temporary files left
    for f in files:  # every entry is whole and verifies
        data = open(os.path.join(tmp_path, f), "rb").read()
        cc.decode_entry(bytes.fromhex(f[:-5]), data)
    (later,) = _run_script(tmp_path)
    assert later["stats"]["misses"] == 0 and later["stats"]["hits"] >= 1
    assert later["stats"]["writes"] == 0
    np.testing.assert_array_equal(np.asarray(later["g"][0]), np.asarray(first[0]["g"][0]))


def test_unwritable_directory_compiles_and_warns_once(cache, caplog):
    blocker = cache / "a_file"
    blocker.write_text("not a directory")
    public_cc.set_cache_dir(str(blocker / "sub"))
    with caplog.at_level(logging.WARNING, logger="fluxion"):
        np.testing.assert_allclose(fluxion.jit(lambda x: x - 1.0)(X), X - 1)
        np.testing.assert_allclose(fluxion.jit(lambda x: x - 2.0)(X), X - 2)
    assert caplog.text.count("could not write") == 1
