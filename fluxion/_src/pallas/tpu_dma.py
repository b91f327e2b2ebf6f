"""DMAs and semaphores of TPU kernels, with the sequential semantics of interpret mode.

A semaphore is an int32 Ref in the `SEMAPHORE` memory space (scratch of
`pltpu.SemaphoreType`); ``sems.at[i]`` views one of an array of them. A DMA completes when it
starts: `start()` copies the source into the destination and adds the number of elements
copied to the destination semaphore, `wait()` takes the destination's size off it again (as
JAX's interpret mode counts). Signals add to a REGULAR semaphore, waits subtract.
"""
from __future__ import annotations

import math

import numpy as np

from fluxion._src import core
from fluxion._src.pallas.core import SEMAPHORE
from fluxion._src.state.views import RefView


def _base_ref(ref):
    return ref.ref if isinstance(ref, RefView) else ref


def _check_ref(ref, what: str):
    base = _base_ref(ref)
    if not hasattr(core.get_aval(base), "memory_space"):
        raise TypeError(f"{what} must be a Ref or a view of one (ref.at[...]), got "
                        f"{core.get_aval(base).str_short()}")


def _check_semaphore(sem, what: str):
    _check_ref(sem, what)
    space = core.get_aval(_base_ref(sem)).memory_space
    if space != SEMAPHORE:  # JAX's class
        raise ValueError(f"{what} must be a semaphore (scratch of pltpu.SemaphoreType), got a "
                        f"Ref in memory space {space}")
    if tuple(sem.shape) != ():
        raise ValueError(f"{what} must be a single semaphore, got an array of shape "
                         f"{tuple(sem.shape)}: index it (sems.at[i])")


def _add_to_semaphore(sem, delta):
    from fluxion import lax
    sem[...] = lax.add(sem[...], lax.convert_element_type(delta, np.int32))


def semaphore_read(sem_or_view):
    """The value of a semaphore (an int32 scalar)."""
    _check_semaphore(sem_or_view, "semaphore_read's argument")
    return sem_or_view[...]


def semaphore_signal(sem_or_view, inc=1, *, device_id=None, device_id_type=None,
                     core_index=None):
    """Add `inc` to a semaphore. Only this device's and core's semaphores exist here."""
    if device_id is not None or core_index is not None:
        raise NotImplementedError("semaphore_signal: signalling another device or core needs "
                                  "several devices running one kernel; fluxion's interpret "
                                  "mode runs a kernel on one core")
    _check_semaphore(sem_or_view, "semaphore_signal's semaphore")
    _add_to_semaphore(sem_or_view, inc)


def semaphore_wait(sem_or_view, value=1, *, decrement: bool = True):
    """Wait until a semaphore reaches `value` and (with `decrement`) take `value` off it.
    Kernels run sequentially here, so what was signalled before is all there will be."""
    _check_semaphore(sem_or_view, "semaphore_wait's semaphore")
    if decrement:
        from fluxion import lax
        _add_to_semaphore(sem_or_view, lax.neg(lax.convert_element_type(value, np.int32)))


class AsyncCopyDescriptor:
    """A DMA from `src_ref` to `dst_ref` signalling `dst_sem` (``pltpu.make_async_copy``)."""

    def __init__(self, src_ref, dst_ref, dst_sem):
        _check_ref(src_ref, "the DMA source")
        _check_ref(dst_ref, "the DMA destination")
        _check_semaphore(dst_sem, "the DMA semaphore")
        # JAX fails later on either with a TypeError of its own; the class is kept
        if tuple(src_ref.shape) != tuple(dst_ref.shape):
            raise TypeError(f"DMA source and destination must have the same shape, got "
                             f"{tuple(src_ref.shape)} and {tuple(dst_ref.shape)}")
        if np.dtype(src_ref.dtype) != np.dtype(dst_ref.dtype):
            raise TypeError(f"DMA source and destination must have the same dtype, got "
                             f"{np.dtype(src_ref.dtype).name} and {np.dtype(dst_ref.dtype).name}")
        self.src_ref, self.dst_ref, self.dst_sem = src_ref, dst_ref, dst_sem

    def start(self, priority: int = 0, *, add: bool = False):
        """Copy (or with `add`, accumulate) the source into the destination now."""
        value = self.src_ref[...]
        if add:
            from fluxion import lax
            value = lax.add(self.dst_ref[...], value)
        self.dst_ref[...] = value
        _add_to_semaphore(self.dst_sem, math.prod(self.src_ref.shape))

    def wait(self):
        """Take the copy's size off the semaphore (the copy has already completed)."""
        _add_to_semaphore(self.dst_sem, -math.prod(self.dst_ref.shape))

    wait_recv = wait


def make_async_copy(src_ref, dst_ref, sem) -> AsyncCopyDescriptor:
    """A DMA of `src_ref` into `dst_ref` (Refs or views) that signals `sem`; call `.start()`
    then `.wait()`."""
    return AsyncCopyDescriptor(src_ref, dst_ref, sem)


def async_copy(src_ref, dst_ref, sem, *, priority: int = 0, add: bool = False):
    """`make_async_copy` and start it; returns the descriptor to `.wait()` on."""
    copy = make_async_copy(src_ref, dst_ref, sem)
    copy.start(priority=priority, add=add)
    return copy


def sync_copy(src_ref, dst_ref, *, add: bool = False) -> None:
    """Copy a pytree of Refs into another one (a DMA started and waited on)."""
    from fluxion._src import tree_util
    is_leaf = lambda r: isinstance(r, RefView)  # noqa: E731
    srcs = tree_util.tree_leaves(src_ref, is_leaf=is_leaf)
    dsts = tree_util.tree_leaves(dst_ref, is_leaf=is_leaf)
    if len(srcs) != len(dsts):
        raise ValueError(f"sync_copy: {len(srcs)} source Refs for {len(dsts)} destinations")
    for s, d in zip(srcs, dsts):
        value = s[...]
        if add:
            from fluxion import lax
            value = lax.add(d[...], value)
        d[...] = value
