"""What a kernel calls: its position in the grid, conditionals and loops over Refs, scoped
scratch Refs, and small helpers (JAX's `pl.program_id`, `pl.when`, `pl.loop`, ...)."""
from __future__ import annotations

import contextlib
import functools
import threading

import numpy as np

from fluxion._src import core
from fluxion._src.pallas.core import cdiv
from fluxion._src.state import primitives as state
from fluxion._src.state.api import run_state  # noqa: F401  (pl.run_state)


class _KernelStack(threading.local):
    def __init__(self):
        self.frames: list[tuple[tuple, tuple]] = []  # (grid indices, grid)


_stack = _KernelStack()


class kernel_context:
    """While a kernel is traced: its grid indices (tracers) and the grid."""

    def __init__(self, ids, grid):
        self.frame = (tuple(ids), tuple(grid))

    def __enter__(self):
        _stack.frames.append(self.frame)

    def __exit__(self, *exc):
        _stack.frames.pop()


def _frame(name):
    if not _stack.frames:
        raise RuntimeError(f"pl.{name} can only be called inside a kernel run by pallas_call")
    return _stack.frames[-1]


def program_id(axis: int):
    """The index of this kernel instance along grid axis `axis` (an int32 scalar)."""
    ids, grid = _frame("program_id")
    return ids[_grid_axis(axis, grid)]


def num_programs(axis: int) -> int:
    """The size of the grid along `axis`."""
    _, grid = _frame("num_programs")
    return grid[_grid_axis(axis, grid)]


def _grid_axis(axis, grid) -> int:
    if not isinstance(axis, (int, np.integer)) or not 0 <= axis < len(grid):
        raise ValueError(f"Axis {axis} is out of bounds for grid {grid}")
    return int(axis)


def when(condition):
    """Decorator: run the body (which reads and writes Refs) only when `condition` holds."""
    def deco(f):
        if isinstance(condition, (bool, np.bool_)) or (
                not isinstance(condition, core.Tracer) and np.ndim(condition) == 0
                and not hasattr(condition, "aval")):
            if condition:
                f()
            return None
        from fluxion._src.lax import control_flow
        control_flow.cond(condition, lambda: (f(), None)[1], lambda: None)
        return None
    return deco


def loop(lower, upper, *, step=1, unroll=None):
    """Decorator: ``@pl.loop(lo, hi, step=s)`` runs the body for ``i in range(lo, hi, s)``."""
    def deco(f):
        from fluxion._src.lax import control_flow
        n = cdiv(upper - lower, step)

        def body(i, carry):
            f(lower + i * step)
            return carry
        kwargs = {} if unroll is None else {"unroll": unroll}
        control_flow.fori_loop(0, n, body, 0, **kwargs)
        return None
    return deco


def run_scoped(f, *types, **kw_types):
    """Call `f` with fresh Refs of the given scratch shapes (``pl.ANY((8,), f32)``, ...);
    returns what `f` returns."""
    from fluxion._src.lax import structural

    def make(t):
        return state.new_ref(structural.full(tuple(t.shape), 0, np.dtype(t.dtype)),
                             memory_space=getattr(t, "memory_space", None))
    return f(*[make(t) for t in types], **{k: make(t) for k, t in kw_types.items()})


def with_scoped(*types, collective_axes=(), **kw_types):
    """Decorator: ``pl.with_scoped(*types)(f)(*args)`` is ``f(*args, *refs)`` with fresh Refs
    of the given scratch shapes, as `run_scoped`."""
    if collective_axes:
        raise NotImplementedError("with_scoped: collective_axes need several cores sharing an "
                                  "allocation; fluxion's interpret mode runs one")

    def deco(f):
        def inner(*args):
            return run_scoped(functools.partial(f, *args), *types, **kw_types)
        return inner
    return deco


def empty_ref_like(x):
    """A new Ref with the shape and dtype of `x` (a scratch shape such as
    ``pltpu.VMEM((8,), f32)``, in its memory space, or a ShapeDtypeStruct, in `pl.ANY`); its
    contents are unspecified (zeros here)."""
    from fluxion._src.api import ShapeDtypeStruct
    from fluxion._src.pallas.core import ANY, ScratchShape
    from fluxion._src.state.primitives import empty_ref
    if isinstance(x, ScratchShape):
        return empty_ref(x, memory_space=x.memory_space)
    if isinstance(x, ShapeDtypeStruct):
        return empty_ref(x, memory_space=ANY)
    raise ValueError(f"empty_ref_like does not support {type(x)}")


def broadcast_to(x, shape):
    import fluxion.numpy as jnp
    return jnp.broadcast_to(x, shape)


def empty(shape, dtype):
    import fluxion.numpy as jnp
    return jnp.zeros(shape, dtype)


def empty_like(x):
    import fluxion.numpy as jnp
    return jnp.zeros_like(x)


def debug_print(fmt, *args):
    from fluxion import debug
    debug.print(fmt, *args)


def reciprocal(x, *, approx: bool = False, full_range: bool = True):
    """``1 / x``. With `approx`, as JAX's interpret mode: computed in bfloat16 and returned as
    float32 (a TPU's approximate reciprocal is about that precise)."""
    import fluxion.numpy as jnp
    del full_range  # lets a TPU compiler skip IEEE edge cases; the value here is exact
    if approx:
        return jnp.reciprocal(jnp.asarray(x).astype(jnp.bfloat16)).astype(jnp.float32)
    return jnp.reciprocal(x)


def delay(nanos) -> None:
    """Stall the core for `nanos` nanoseconds (a TPU timing aid); nothing to wait for here."""
    del nanos


class _DebugChecksFlag:
    """``pl.enable_debug_checks``: ``with pl.enable_debug_checks(True): ...`` and ``.value``.
    It asks a TPU compiler to keep `pl.debug_check`s; interpret mode has nothing to change."""

    def __init__(self):
        self.value = False

    @contextlib.contextmanager
    def __call__(self, new_val: bool = True):
        old, self.value = self.value, bool(new_val)
        try:
            yield
        finally:
            self.value = old


enable_debug_checks = _DebugChecksFlag()


def debug_check(condition, message: str) -> None:
    """A `checkify.debug_check` of `condition`: reported under `checkify.checkify`, dropped
    otherwise (so in an interpret-mode kernel, as in JAX, it checks nothing)."""
    from fluxion._src import checkify
    checkify.debug_check(condition, message)
