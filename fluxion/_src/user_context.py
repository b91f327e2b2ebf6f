"""`make_user_context`: a value that jit caches are keyed on, so that a jitted function traces
and compiles again when it changes."""
from __future__ import annotations

from fluxion._src.config import config


class UserContext:
    """A jit-cache-sensitive value: ``with ctx(value): ...`` sets it inside a block;
    `ctx.value` reads it."""

    def __init__(self, default_value=None):
        self.default = default_value
        self.value = default_value
        config._user_contexts.append(self)
        config._refresh_trace_key()

    def __call__(self, new_value):
        return _Setting(self, new_value)

    def get_value(self):
        return self.value

    def __repr__(self):
        return f"UserContext(value={self.value!r})"


class _Setting:
    __slots__ = ("ctx", "new", "old")

    def __init__(self, ctx, new):
        self.ctx, self.new = ctx, new

    def __enter__(self):
        self.old = self.ctx.value
        self.ctx.value = self.new
        config._refresh_trace_key()

    def __exit__(self, *exc):
        self.ctx.value = self.old
        config._refresh_trace_key()
        return False


def make_user_context(default_value=None) -> UserContext:
    """Create a `jax.jit` cache sensitive context: while its value differs, jitted functions
    miss their tracing and compilation caches (and are traced and compiled for that value).

    >>> ctx = make_user_context(None)
    >>> with ctx(1):
    ...     f(1.)
    >>> with ctx(2):
    ...     f(1.)  # traced again
    """
    return UserContext(default_value)
