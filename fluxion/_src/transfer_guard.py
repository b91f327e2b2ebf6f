"""`transfer_guard`: allow, log or disallow implicit host<->device transfers (and explicit
device-to-device ones: `device_put` of an Array to another device).

Implicit transfers are a NumPy array passed where a device array is needed (host to device)
and an Array read on the host by `np.asarray`, `float`, printing... (device to host).
`device_put` and `device_get` are explicit and always allowed (`disallow_explicit` forbids
them too)."""
from __future__ import annotations

import contextlib
import logging
import threading

from fluxion._src.config import config

logger = logging.getLogger("fluxion")
_LEVELS = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")


class _State(threading.local):
    explicit = 0


_state = _State()


def _level(direction: str) -> str | None:
    return getattr(config, f"transfer_guard_{direction}") or config.transfer_guard


def check(direction: str, description: str) -> None:
    """Apply the guard for one transfer (`direction` is host_to_device or device_to_host)."""
    level = _level(direction)
    if level is None or level == "allow":
        return
    explicit = _state.explicit > 0
    if explicit and not level.endswith("_explicit"):
        return
    kind = "explicit" if explicit else "implicit"
    message = f"Disallowed {direction.replace('_', '-')} transfer: {description}" if \
        level.startswith("disallow") else f"{kind} {direction.replace('_', '-')} transfer: {description}"
    if level.startswith("disallow"):
        raise RuntimeError(message)
    logger.warning(message)


@contextlib.contextmanager
def explicit():
    """Mark the transfers inside as explicit (device_put, device_get)."""
    _state.explicit += 1
    try:
        yield
    finally:
        _state.explicit -= 1


def _guard(names):
    @contextlib.contextmanager
    def guard(level: str):
        if level not in _LEVELS:
            raise ValueError(f"transfer guard level must be one of {_LEVELS}, got {level!r}")
        old = [getattr(config, n) for n in names]
        for n in names:
            config.update(n, level)
        try:
            yield
        finally:
            for n, v in zip(names, old):
                config.update(n, v)
    return guard


transfer_guard = _guard(["transfer_guard"])
transfer_guard_host_to_device = _guard(["transfer_guard_host_to_device"])
transfer_guard_device_to_host = _guard(["transfer_guard_device_to_host"])
