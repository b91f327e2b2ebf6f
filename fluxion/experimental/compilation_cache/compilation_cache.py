"""Controls of the persistent compilation cache, with JAX's names.

The cache is on by default (see docs/compilation_cache.md); these functions mirror
`jax.experimental.compilation_cache.compilation_cache`.
"""
from fluxion._src.compiler import compilation_cache as _cc
from fluxion._src.config import config as _config


def set_cache_dir(path) -> None:
    """Store compiled executables under `path` (same as config `compilation_cache_dir`)."""
    _config.update("compilation_cache_dir", path)
    _cc.reset_accounting()


def is_initialized() -> bool:
    return _cc.is_enabled()


def is_cache_used(backend=None) -> bool:
    return _cc.is_enabled()


def reset_cache() -> None:
    """Forget this process's view of the cache (statistics and size accounting); entries on
    disk stay."""
    _cc.reset_accounting()
    for k in _cc.stats:
        _cc.stats[k] = 0


def stats() -> dict:
    """Hits, misses, writes, rejected entries and evictions in this process."""
    return dict(_cc.stats)
