"""Triton-style kernel ops (`plt`) with the semantics of JAX's interpret mode: masked loads and
stores, atomic read-modify-writes returning the old value, and compiler hints that do nothing
on the CPU.

A masked load or store through a slice (``x_ref.at[pl.ds(i * 8, 8)]``) may run past the end of
the Ref: as in JAX's interpret mode the Ref is padded with the "uninitialized" value (NaN for
floats) for it, so the tail reads that value (or `other` where the mask is off) and writes
there are dropped, instead of `dynamic_slice` moving the window back inside.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from fluxion._src import core
from fluxion._src.pallas.core import CompilerParams as _CompilerParamsBase
from fluxion._src.state import indexing
from fluxion._src.state.views import RefView


@dataclasses.dataclass(frozen=True)
class CompilerParams(_CompilerParamsBase):
    """Triton compiler parameters (``plt.CompilerParams``). They tune GPU compilation; in
    interpret mode (fluxion's only mode) they change nothing."""
    BACKEND = "triton"
    num_warps: int | None = None
    num_stages: int | None = None


# ---------------------------------------------------------------------------------------------
# Loads and stores that may run past the end of the Ref

def _window(shape: tuple, idx) -> list | None:
    """``[(start, size, squeezed)]`` per dimension for an index of ints, static slices,
    `pl.ds` and `...`; None for anything else (integer arrays, strides)."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if sum(i is Ellipsis for i in idx) > 1:
        return None
    if any(i is Ellipsis for i in idx):
        k = next(j for j, i in enumerate(idx) if i is Ellipsis)
        idx = idx[:k] + (slice(None),) * (len(shape) - len(idx) + 1) + idx[k + 1:]
    if len(idx) > len(shape):
        return None
    idx = idx + (slice(None),) * (len(shape) - len(idx))
    out = []
    for i, n in zip(idx, shape):
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step != 1:
                return None
            out.append((start, max(stop - start, 0), False))
        elif isinstance(i, indexing.Slice):
            if i.stride != 1:
                return None
            out.append((i.start, i.size, False))
        elif isinstance(i, (int, np.integer)) or (
                hasattr(i, "shape") and tuple(np.shape(i)) == ()):
            out.append((i, 1, True))
        else:
            return None
    return out


def _ref_and_window(ref):
    """(the Ref, its window) of a Ref or a one-level view with a plain window, else None."""
    if not isinstance(ref, RefView):
        return ref, [(0, n, False) for n in ref.shape]
    if len(ref.indices) != 1:
        return None
    window = _window(tuple(ref.ref.shape), ref.indices[0])
    return None if window is None else (ref.ref, window)


def _padded_slice_args(x, window):
    from fluxion._src.pallas.pallas_call import uninitialized_value
    from fluxion import lax
    sizes = [size for _, size, _ in window]
    fill = uninitialized_value((), core.get_aval(x).dtype)
    padded = lax.pad(x, fill, [(0, s, 0) for s in sizes])
    starts = [lax.convert_element_type(s, np.int32) for s, _, _ in window]
    return padded, starts, sizes


def load(ref, *, mask=None, other=None, cache_modifier=None, eviction_policy=None,
         volatile=False):
    """Read a Ref or view; where `mask` is False the result is `other` (when given). Reads past
    the end of the Ref give NaN (floats), as in JAX's interpret mode."""
    import fluxion.numpy as jnp
    from fluxion import lax
    del cache_modifier, eviction_policy, volatile  # GPU memory hints
    found = _ref_and_window(ref)
    if found is None:
        out = ref[...]
    else:
        base, window = found
        padded, starts, sizes = _padded_slice_args(base[...], window)
        out = lax.dynamic_slice(padded, starts, sizes)
        out = out.reshape(tuple(s for _, s, sq in window if not sq))
    if mask is not None and other is not None:
        out = jnp.where(mask, out, jnp.asarray(other, out.dtype))
    return out


def store(ref, val, *, mask=None, eviction_policy=None) -> None:
    """Write `val` into a Ref or view, only where `mask` is True (when given). Writes past the
    end of the Ref are dropped."""
    import fluxion.numpy as jnp
    from fluxion import lax
    del eviction_policy
    found = _ref_and_window(ref)
    if found is None:
        old = ref[...]
        ref[...] = val if mask is None else jnp.where(mask, val, old)
        return
    base, window = found
    x = base[...]
    padded, starts, sizes = _padded_slice_args(x, window)
    shape = tuple(s for _, s, sq in window if not sq)
    val = jnp.broadcast_to(jnp.asarray(val, x.dtype), shape)
    if mask is not None:
        old = lax.dynamic_slice(padded, starts, sizes).reshape(shape)
        val = jnp.where(mask, val, old)
    new = lax.dynamic_update_slice(padded, val.reshape(sizes), starts)
    base[...] = lax.slice(new, [0] * len(sizes), list(core.get_aval(x).shape))


# ---------------------------------------------------------------------------------------------
# Atomics: one read-modify-write, returning what was there

_UNSUPPORTED = {np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.int16)}


def _atomic_rmw(ref, idx, val, mask, name, combine):
    import fluxion.numpy as jnp
    dtype = np.dtype(ref.dtype)
    if dtype == np.dtype(np.float16) and name != "add":
        raise ValueError(f"`atomic_{name}` does not support f16.")
    if dtype in _UNSUPPORTED or dtype == np.dtype(jnp.bfloat16):
        raise ValueError(f"`atomic_{name}` does not support {dtype}.")
    target = ref.at[idx]
    old = target[...]
    new = combine(old, jnp.asarray(val, dtype))
    if mask is not None:
        new = jnp.where(mask, new, old)
    target[...] = new
    return old


def _bitwise(name, op):
    def combine(old, val):
        if not np.issubdtype(np.dtype(old.dtype), np.integer):
            raise ValueError(f"`atomic_{name}` needs an integer Ref, got {old.dtype}")
        return op(old, val)
    return combine


def atomic_add(x_ref_or_view, idx, val, *, mask=None):
    """``x[idx] += val`` atomically; returns the old value."""
    return _atomic_rmw(x_ref_or_view, idx, val, mask, "add", lambda o, v: o + v)


def atomic_max(x_ref_or_view, idx, val, *, mask=None):
    """``x[idx] = max(x[idx], val)`` atomically; returns the old value."""
    import fluxion.numpy as jnp
    return _atomic_rmw(x_ref_or_view, idx, val, mask, "max", jnp.maximum)


def atomic_min(x_ref_or_view, idx, val, *, mask=None):
    """``x[idx] = min(x[idx], val)`` atomically; returns the old value."""
    import fluxion.numpy as jnp
    return _atomic_rmw(x_ref_or_view, idx, val, mask, "min", jnp.minimum)


def atomic_and(x_ref_or_view, idx, val, *, mask=None):
    """``x[idx] &= val`` atomically (integers); returns the old value."""
    return _atomic_rmw(x_ref_or_view, idx, val, mask, "and",
                       _bitwise("and", lambda o, v: o & v))


def atomic_or(x_ref_or_view, idx, val, *, mask=None):
    """``x[idx] |= val`` atomically (integers); returns the old value."""
    return _atomic_rmw(x_ref_or_view, idx, val, mask, "or",
                       _bitwise("or", lambda o, v: o | v))


def atomic_xor(x_ref_or_view, idx, val, *, mask=None):
    """``x[idx] ^= val`` atomically (integers); returns the old value."""
    return _atomic_rmw(x_ref_or_view, idx, val, mask, "xor",
                       _bitwise("xor", lambda o, v: o ^ v))


def atomic_xchg(x_ref_or_view, idx, val, *, mask=None):
    """``x[idx] = val`` atomically; returns the old value."""
    import fluxion.numpy as jnp
    return _atomic_rmw(x_ref_or_view, idx, val, mask, "xchg",
                       lambda o, v: jnp.broadcast_to(v, o.shape))


def atomic_cas(ref, cmp, val):
    """Compare and swap a scalar Ref: where it holds `cmp` it becomes `val`; returns the old
    value."""
    import fluxion.numpy as jnp
    cmp, val = jnp.asarray(cmp), jnp.asarray(val)
    if cmp.dtype != val.dtype or cmp.shape != val.shape:
        raise ValueError("cmp and val must have identical dtypes and shapes")
    for what, shape in (("ref", ref.shape), ("cmp", cmp.shape), ("val", val.shape)):
        if tuple(shape):
            raise ValueError(f"{what} must be scalar.")
    old = ref[...]
    ref[...] = jnp.where(old == cmp, val, old)
    return old


# ---------------------------------------------------------------------------------------------
# Math and hints

def approx_tanh(x):
    """``tanh(x)``; GPUs compute it with an approximate instruction, the CPU exactly."""
    import fluxion.numpy as jnp
    x = jnp.asarray(x)
    if np.dtype(x.dtype) not in (np.dtype(jnp.float16), np.dtype(jnp.bfloat16),
                                 np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"approx_tanh does not accept {x.dtype} arrays")
    return jnp.tanh(x)


def debug_barrier() -> None:
    """Synchronize the kernel instances of a grid: kernels run one after another here, so
    there is nothing to wait for."""


def max_contiguous(x, values):
    """A hint that the first `values` elements of `x` are contiguous; returns `x`."""
    return x


def dot(a, b, trans_a: bool = False, trans_b: bool = False, allow_tf32=None, precision=None):
    """``a @ b`` of 2-D blocks (optionally transposed), accumulated in float32 (int32 for
    integers, float64 for float64), as JAX's `plt.dot`."""
    import fluxion.numpy as jnp
    from fluxion import lax
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError("`a` and `b` must be 2D arrays.")
    if allow_tf32 is not None:
        if precision is not None:
            raise ValueError("Only one of allow_tf32 and precision can be specified")
        precision = lax.Precision.HIGH if allow_tf32 else lax.Precision.HIGHEST
    dtype = jnp.promote_types(a.dtype, b.dtype)
    if jnp.issubdtype(dtype, jnp.integer):
        out_dtype = jnp.int32
    elif dtype == jnp.float64:
        out_dtype = jnp.float64
    else:
        out_dtype = jnp.float32
    dims = (((0 if trans_a else 1,), (1 if trans_b else 0,)), ((), ()))
    return lax.dot_general(a, b, dims, precision=precision, preferred_element_type=out_dtype)
