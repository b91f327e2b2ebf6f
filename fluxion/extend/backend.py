"""The PJRT clients fluxion runs on (`jax.extend.backend`), for code that inspects them."""
from fluxion._src.compiler import backend as _backend
from fluxion._src.runtime_info import clear_caches as clear_in_memory_compilation_cache  # noqa: F401


def get_backend(platform: str | None = None):
    """The jaxlib PJRT client of `platform` ("cpu", "cuda"/"gpu"), or of the default one."""
    return _backend.get_backend(platform).client


def backends() -> dict:
    """Platform name -> client, for the default platform and every one already started."""
    get_backend()
    return {name: b.client for name, b in _backend._backends.items() if name != "__default__"}


def get_default_device():
    """The device computations run on when nothing places them elsewhere."""
    return _backend.default_device()


def backend_xla_version(platform: str | None = None):
    """The XLA version a PJRT plugin reports, or None (the built-in CPU client reports none)."""
    return getattr(get_backend(platform), "xla_version", None)
