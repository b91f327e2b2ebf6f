"""The few array operations the transformation machinery (ad, batching) needs.

The machinery sits below `lax` and must not import it; `lax` installs its implementations here
when it is imported (`fluxion._src.lax.lax`), and the machinery calls them through this module.
"""
from __future__ import annotations

from typing import Callable

_INSTALLED: dict[str, Callable] = {}


def install(**ops: Callable) -> None:
    """Provide implementations: full, add, transpose, broadcast_in_dim, reshape."""
    _INSTALLED.update(ops)


def _op(name: str) -> Callable:
    try:
        return _INSTALLED[name]
    except KeyError:
        raise RuntimeError(f"the array operation {name!r} is not installed: import fluxion.lax "
                           "before running a transformation") from None


def full(shape, fill_value, dtype, weak_type: bool = False):
    return _op("full")(shape, fill_value, dtype, weak_type)


def add(x, y):
    return _op("add")(x, y)


def transpose(x, permutation):
    return _op("transpose")(x, permutation)


def broadcast_in_dim(x, shape, broadcast_dimensions):
    return _op("broadcast_in_dim")(x, shape, broadcast_dimensions)


def reshape(x, new_sizes):
    return _op("reshape")(x, new_sizes)
