"""The stages of ahead-of-time compilation (`jax.stages`): `jit(f)` is `Wrapped`,
`.trace(...)` gives `Traced`, `.lower(...)` `Lowered`, and `.compile()` `Compiled`."""
from typing import Any, Protocol, runtime_checkable

from fluxion._src.api import Compiled, Lowered, Traced  # noqa: F401

# Options passed to the compiler: flag names to values.
CompilerOptions = dict[str, "str | bool"]


@runtime_checkable
class Wrapped(Protocol):
    """A function ready to be traced, lowered and compiled (what `jit` returns)."""

    def __call__(self, *args, **kwargs) -> Any: ...

    def trace(self, *args, **kwargs) -> Traced: ...

    def lower(self, *args, **kwargs) -> Lowered: ...


class ArgInfo:
    """One argument of a lowered function: its abstract value and whether it is donated."""

    __slots__ = ("_aval", "donated")

    def __init__(self, _aval, donated: bool):
        self._aval, self.donated = _aval, donated

    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)

    def __repr__(self):
        return f"ArgInfo(_aval={self._aval!r}, donated={self.donated})"
