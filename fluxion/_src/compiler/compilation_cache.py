"""The persistent compilation cache: compiled XLA executables on disk, reused across processes.

An entry is keyed by a SHA-256 over everything that decides what XLA produces: the StableHLO
text, the serialized compile options, the XLA flags of the environment, the jaxlib version, the
platform and its version, the device kind and the device id (the device assignment is baked
into a serialized executable). A new process that compiles a program it has seen before
deserializes the executable instead of running XLA.

Entry file format (``<key hex>.flxc`` in the cache directory; all integers little-endian)::

    offset  size  field
    0       8     magic  b"FLXCACHE"
    8       4     format version (uint32, currently 1)
    12      32    the entry's key (SHA-256 digest); must equal the key it is looked up under
    44      8     payload length in bytes (uint64)
    52      32    SHA-256 of the payload
    84      n     payload: the executable as jaxlib's `LoadedExecutable.serialize()` wrote it

Writes go to a uniquely named temporary file in the same directory, then `os.replace` it into
place, so readers (in any process) see a whole entry or none. An entry that fails any check
(short, wrong magic or version, another key, a payload that does not match its checksum, or
bytes jaxlib refuses) is reported with a warning, deleted, and the program is compiled anew;
it is never executed unverified. Hits refresh the entry's modification time; when the
directory holds more than `persistent_cache_max_size` bytes of entries, the least recently
used are deleted.
"""
from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
import time
import warnings

from fluxion._src import monitoring
from fluxion._src.config import config

logger = logging.getLogger("fluxion")

MAGIC = b"FLXCACHE"
FORMAT_VERSION = 1
SUFFIX = ".flxc"
_HEADER = struct.Struct("<8sI32sQ32s")

# What this process did, for tests and `fluxion.experimental.compilation_cache.stats()`.
stats = {"hits": 0, "misses": 0, "writes": 0, "rejected": 0, "evictions": 0}

_lock = threading.Lock()
_dir_bytes: dict[str, int] = {}  # cache dir -> bytes of entries, as last counted plus writes
# cache dir -> its entries [(mtime, size, path)], oldest first, as last listed plus this
# process's writes: over the size bound, each write evicts from here rather than listing
# and sorting the directory again (a full cache of ~10^5 entries took ~1 s a write)
_dir_entries: dict[str, list] = {}
_unwritable: set[str] = set()


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fluxion", "compilation_cache")


def cache_dir() -> str:
    return os.fspath(config.compilation_cache_dir or default_cache_dir())


def is_enabled() -> bool:
    value = config.enable_compilation_cache
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "t", "y")
    return bool(value)


def _min_compile_time() -> float:
    return float(config.persistent_cache_min_compile_time_secs or 0.0)


def _max_size() -> int:
    if int(config.compilation_cache_max_size) >= 0:  # JAX's name, when set
        return int(config.compilation_cache_max_size)
    return int(config.persistent_cache_max_size)


def cache_key(text, options_bytes: bytes, backend, device) -> bytes:
    """The SHA-256 digest naming the entry for `text` compiled with these options there."""
    import jaxlib.version
    h = hashlib.sha256()
    for part in (b"fluxion-compilation-cache", str(FORMAT_VERSION).encode(),
                 jaxlib.version.__version__.encode(), backend.platform.encode(),
                 str(getattr(backend.client, "platform_version", "")).encode(),
                 str(device.device_kind).encode(), str(device.id).encode(),
                 os.environ.get("XLA_FLAGS", "").encode(), options_bytes):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    data = text if isinstance(text, bytes) else str(text).encode()
    h.update(len(data).to_bytes(8, "little"))
    h.update(data)
    return h.digest()


def entry_path(key: bytes, directory: str | None = None) -> str:
    return os.path.join(directory or cache_dir(), key.hex() + SUFFIX)


def encode_entry(key: bytes, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, FORMAT_VERSION, key, len(payload),
                        hashlib.sha256(payload).digest()) + payload


def decode_entry(key: bytes, data: bytes) -> bytes:
    """The payload of an entry file's bytes; ValueError saying what is wrong with it."""
    if len(data) < _HEADER.size:
        raise ValueError(f"truncated ({len(data)} bytes, shorter than the header)")
    magic, version, stored_key, length, digest = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError("not a fluxion cache entry (bad magic)")
    if version != FORMAT_VERSION:
        raise ValueError(f"format version {version}, expected {FORMAT_VERSION}")
    if stored_key != key:
        raise ValueError("it holds another program (key mismatch)")
    payload = data[_HEADER.size:]
    if len(payload) != length:
        raise ValueError(f"truncated payload ({len(payload)} of {length} bytes)")
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("checksum mismatch")
    return payload


def _reject(path: str, why: str) -> None:
    stats["rejected"] += 1
    warnings.warn(f"fluxion persistent compilation cache: ignoring entry {path}: {why}; "
                  "compiling the program again.", RuntimeWarning, stacklevel=4)
    try:
        os.remove(path)
    except OSError:
        pass


def get(key: bytes) -> bytes | None:
    """The serialized executable stored under `key`, or None (a miss or a rejected entry)."""
    path = entry_path(key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        logger.debug("compilation cache read of %s failed: %s", path, e)
        return None
    try:
        payload = decode_entry(key, data)
    except ValueError as e:
        _reject(path, str(e))
        return None
    try:
        os.utime(path)  # least recently used goes first
    except OSError:
        pass
    return payload


def put(key: bytes, payload: bytes) -> None:
    """Store an entry atomically; then evict the least recently used beyond the size bound."""
    directory = cache_dir()
    try:
        os.makedirs(directory, exist_ok=True)
        data = encode_entry(key, payload)
        tmp = os.path.join(directory, f".tmp-{os.getpid()}-{threading.get_ident()}-"
                                      f"{os.urandom(6).hex()}")
        with open(tmp, "wb") as f:
            f.write(data)
        path = entry_path(key, directory)
        os.replace(tmp, path)
    except OSError as e:
        if directory not in _unwritable:  # once per directory, not once per compile
            _unwritable.add(directory)
            logger.warning("fluxion persistent compilation cache: could not write to %s: %s",
                           directory, e)
        try:
            os.remove(tmp)
        except (OSError, UnboundLocalError):
            pass
        return
    stats["writes"] += 1
    _account(directory, len(data), path)


def _entries(directory: str) -> list[tuple[float, int, str]]:
    out = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                if e.name.endswith(SUFFIX):
                    try:
                        st = e.stat()
                    except OSError:
                        continue
                    out.append((st.st_mtime, st.st_size, e.path))
    except OSError:
        pass
    return out


def _account(directory: str, added: int, path: str | None = None) -> None:
    limit = _max_size()
    if limit < 0:
        return
    with _lock:
        total = _dir_bytes.get(directory)
        if total is None:  # count once per process; later writes add their own sizes
            listed = _dir_entries[directory] = sorted(_entries(directory))
            total = sum(size for _, size, _ in listed)
        else:
            total += added
            known = _dir_entries.get(directory)
            if known is not None and path is not None:
                known.append((time.time(), added, path))
        if total > limit:
            total = evict(directory, limit)
        _dir_bytes[directory] = total


def evict(directory: str, limit: int) -> int:
    """Delete least recently used entries until at most `limit` bytes remain; the bytes left.
    The directory is listed once per process (and after `reset_accounting`); later evictions
    go on from that list and this process's writes."""
    entries = _dir_entries.get(directory)
    if entries is None:
        entries = _dir_entries[directory] = sorted(_entries(directory))
    total = sum(size for _, size, _ in entries)
    evicted = 0
    for _, size, path in entries:
        if total <= limit:
            break
        try:
            os.remove(path)
            stats["evictions"] += 1
        except OSError:  # gone already (another process evicted it)
            pass
        total -= size
        evicted += 1
    del entries[:evicted]
    return total


def reset_accounting() -> None:
    _dir_bytes.clear()
    _dir_entries.clear()


def compile_or_load(client, text, devices, options, backend, device, name: str,
                    compile_fn):
    """`(executable, True)` from the persistent cache if it holds this program, else
    `(compile_fn(), False)` (XLA), storing the result."""
    if not is_enabled():
        return compile_fn(), False
    try:
        key = cache_key(text, options.SerializeAsString(), backend, device)
    except Exception as e:  # options that cannot be serialized: do not cache
        logger.debug("compilation cache key failed: %s", e)
        return compile_fn(), False
    monitoring.record_event("/jax/compilation_cache/compile_requests_use_cache")
    payload = get(key)
    if payload is not None:
        start = time.perf_counter()
        try:
            loaded = client.deserialize_executable(payload, devices, options)
        except Exception as e:  # bytes jaxlib refuses: foreign or from another build
            _reject(entry_path(key), f"jaxlib could not load it ({str(e)[:200]})")
        else:
            stats["hits"] += 1
            monitoring.record_event("/jax/compilation_cache/cache_hits")
            level = logging.WARNING if config.log_compiles else logging.DEBUG
            logger.log(level, "Persistent compilation cache hit for %s (loaded in %.3f sec)",
                       name, time.perf_counter() - start)
            return loaded, True
    stats["misses"] += 1
    monitoring.record_event("/jax/compilation_cache/cache_misses")
    start = time.perf_counter()
    loaded = compile_fn()
    elapsed = time.perf_counter() - start
    if elapsed >= _min_compile_time():
        try:
            payload = loaded.serialize()
        except Exception as e:
            logger.debug("could not serialize %s for the cache: %s", name, e)
        else:
            if len(payload) >= int(config.persistent_cache_min_entry_size_bytes):
                put(key, payload)
            if config.log_compiles:
                logger.warning("Writing %s to the persistent compilation cache", name)
    return loaded, False
