"""NumPy-style indices of Refs: ints, slices with static bounds, `ds` (dynamic start, static
size), `...` and integer arrays, normalized to one entry per dimension.

The start of each dimension is an int32 operand of the state primitive (static ints become
literals); sizes, strides and which dimensions are squeezed are static (the `indexer` param,
one `(size, stride, squeezed)` per dimension). A dimension indexed by an integer array has
the entry `("array", shape)` and the (int32) array as its operand; the result then follows
NumPy's advanced indexing (as in JAX: negative indices wrap, reads clamp, writes past the end
are dropped).
"""
from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any

import numpy as np

from fluxion._src import core, dtypes


@dataclasses.dataclass(frozen=True)
class Slice:
    """``start:start+size*stride:stride`` with a possibly traced `start` and static size."""
    start: Any
    size: int
    stride: int = 1


def ds(start, size=None, stride: int = 1) -> Slice:
    """A dynamic slice (`pl.ds`): ``ds(start, size)``; ``ds(n)`` is ``ds(0, n)``."""
    if size is None:
        start, size = 0, start
    if not isinstance(size, (int, np.integer)):
        raise TypeError(f"the size of a dynamic slice must be a static int, got {size!r}")
    return Slice(start, int(size), int(stride))


def _is_slice_like(x) -> bool:
    return not isinstance(x, slice) and all(hasattr(x, a) for a in ("start", "size", "stride"))


def is_array_entry(entry) -> bool:
    return entry[0] == "array"


def has_arrays(indexer) -> bool:
    return any(is_array_entry(e) for e in indexer)


def _index_array(x, dim: int):
    """An integer index array as an int32 operand, or None when `x` is not an array index."""
    if isinstance(x, (list, tuple)):
        # JAX fails on lists with an incidental ValueError; ours names the problem.
        raise ValueError(f"a Ref cannot be indexed with a {type(x).__name__} (axis {dim}); "
                         "use an integer array")
    if isinstance(x, (bool, np.bool_, int, np.integer)) or not hasattr(x, "shape"):
        return None
    if isinstance(x, np.ndarray) or (hasattr(x, "dtype") and hasattr(x, "ndim")):
        shape = tuple(np.shape(x))
        dtype = np.dtype(x.dtype)
        if dtype == np.bool_:
            raise IndexError("a Ref cannot be indexed with a boolean mask (JAX's state indexing "
                             "has no boolean indices)")
        if not np.issubdtype(dtype, np.integer):
            raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                            f"{dtype.name}")
        if shape == ():
            return None
        from fluxion._src.lax import lax
        import fluxion.numpy as jnp
        return lax.convert_element_type(jnp.asarray(x), np.int32)
    return None


def _start_value(x, dim: int, n: int):
    """A start index as an int32 scalar; a static negative index counts from the end."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        i = int(x)
        if not -n <= i < max(n, 1):
            raise IndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
        return np.int32(i + n if i < 0 else i)
    aval = core.get_aval(x)
    if aval.shape != () or not dtypes.is_integer(aval.dtype):
        raise IndexError(f"Ref indices must be integers, slices, `ds` slices or `...`; got "
                         f"{aval.str_short()} for axis {dim} (indexing a Ref with an integer "
                         "array is not supported)")
    if aval.dtype != np.int32:
        from fluxion._src.lax import lax
        x = lax.convert_element_type(x, np.int32)
    return x


def normalize(shape: tuple, idx) -> tuple[list, tuple]:
    """(starts, indexer): one start per dimension and the static ((size, stride, squeezed), ...)."""
    if idx is None:
        idx = ()
    if not isinstance(idx, tuple):
        idx = (idx,)
    n_ellipsis = sum(1 for i in idx if i is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_ellipsis:
        k = next(j for j, i in enumerate(idx) if i is Ellipsis)
        fill = len(shape) - (len(idx) - 1)
        if fill < 0:
            raise ValueError(f"Indices {idx} are longer than the shape {tuple(shape)} of the ref")
        idx = idx[:k] + (slice(None),) * fill + idx[k + 1:]
    if len(idx) > len(shape):  # JAX's class and words
        raise ValueError(f"Indices {idx} are longer than the shape {tuple(shape)} of the ref")
    idx = idx + (slice(None),) * (len(shape) - len(idx))
    starts, indexer = [], []
    for dim, (i, n) in enumerate(zip(idx, shape)):
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step <= 0:
                raise IndexError("Ref slices must have a positive step")
            size = max(0, -(-(stop - start) // step))
            starts.append(np.int32(start))
            indexer.append((size, step, False))
        elif _is_slice_like(i):
            size, stride = operator.index(i.size), operator.index(i.stride)
            if size < 0 or stride < 1 or (size - 1) * stride + 1 > n:
                raise IndexError(f"slice of size {size} and stride {stride} does not fit axis "
                                 f"{dim} of size {n}")
            starts.append(_start_value(i.start, dim, n) if not isinstance(i.start, (int, np.integer))
                          else np.int32(int(i.start)))
            indexer.append((size, stride, False))
        elif i is None:  # JAX fails here too (with an incidental ValueError)
            raise ValueError("a Ref cannot be indexed with None (np.newaxis); read it and "
                             "add the axis to the value: `ref[...][None]`")
        elif (arr := _index_array(i, dim)) is not None:
            starts.append(arr)
            indexer.append(("array", tuple(core.get_aval(arr).shape)))
        else:
            starts.append(_start_value(i, dim, n))
            indexer.append((1, 1, True))
    return starts, tuple(indexer)


def result_shape(indexer: tuple) -> tuple:
    if not has_arrays(indexer):
        return tuple(size for size, _, squeezed in indexer if not squeezed)
    # NumPy's advanced indexing: integer arrays and ints broadcast together; their shape
    # replaces them where they are adjacent, else it comes first.
    advanced = [k for k, e in enumerate(indexer) if is_array_entry(e) or e[2]]
    bshape = np.broadcast_shapes(*[e[1] for e in indexer if is_array_entry(e)])
    basic = [e[0] for k, e in enumerate(indexer) if k not in advanced]
    if advanced == list(range(advanced[0], advanced[-1] + 1)):
        before = sum(1 for k in range(advanced[0]) if k not in advanced)
        return tuple(basic[:before]) + tuple(bshape) + tuple(basic[before:])
    return tuple(bshape) + tuple(basic)


def pp_indexer(indexer: tuple, starts_text: list[str], shape: tuple) -> str:
    """`[:2,1]`-style text of an index, as JAX prints state equations (`[...]`: all of it)."""
    parts, everything = [], True
    for entry, s, n in zip(indexer, starts_text, shape):
        if is_array_entry(entry):
            parts.append(s.split(":")[0])
            everything = False
            continue
        size, stride, squeezed = entry
        static = s.endswith(":i32[]")
        s = s[:-len(":i32[]")] if static else s
        if squeezed:
            parts.append(s)
            everything = False
        elif static:
            start = int(s)
            everything &= start == 0 and size == n
            parts.append(f"{start or ''}:{'' if start + size == n else start + size}")
        else:
            parts.append(f"{s}:{s}+{size}")
            everything = False
    return "[...]" if everything else "[" + ",".join(parts) + "]"


# ---------------------------------------------------------------------------------------------
# The value-level meaning of an index, used by the eager implementation and the discharge pass

def _window(x, starts, indexer):
    """(starts, indexer) of the basic part of an index with arrays (array dims whole, int dims
    kept as size 1), and the NumPy index of the window that completes it."""
    shape = core.get_aval(x).shape
    w_starts, w_indexer, rest = [], [], []
    for s, e, n in zip(starts, indexer, shape):
        if is_array_entry(e):
            w_starts.append(np.int32(0))
            w_indexer.append((n, 1, False))
            rest.append(s)
        else:
            w_starts.append(s)
            w_indexer.append((e[0], e[1], False))
            rest.append(0 if e[2] else slice(None))
    return w_starts, tuple(w_indexer), tuple(rest)


def read(x, starts, indexer):
    """`x[index]` for the normalized index."""
    from fluxion._src.lax import lax, structural
    if has_arrays(indexer):
        w_starts, w_indexer, rest = _window(x, starts, indexer)
        return read(x, w_starts, w_indexer)[rest]
    if not indexer:
        return x
    spans = [(size - 1) * stride + 1 if size else 0 for size, stride, _ in indexer]
    out = structural.dynamic_slice(x, list(starts), spans, allow_negative_indices=False)
    if any(stride != 1 for _, stride, _ in indexer):
        out = structural.slice(out, [0] * len(spans), spans, [st for _, st, _ in indexer])
    shape = result_shape(indexer)
    if shape != core.get_aval(out).shape:
        out = lax.reshape(out, shape)
    return out


def _set_last_wins(window, rest, value):
    """``window.at[rest].set(value)`` (a repeated index keeps the last value written) built
    from a masked select and a scatter-add, so that it can be transposed whatever the indices:
    the transpose of a scatter that overwrites needs unique indices."""
    import fluxion.numpy as jnp
    from fluxion._src.lax import lax
    shape = core.get_aval(window[rest]).shape
    value = jnp.broadcast_to(value, shape)
    order = jnp.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    last = jnp.full(core.get_aval(window).shape, -1, np.int32).at[rest].max(order)
    wins = last[rest] == order
    written = last >= 0
    zero = jnp.zeros_like(value)
    return jnp.where(written, jnp.zeros_like(window), window) + \
        jnp.zeros_like(window).at[rest].add(jnp.where(wins, value, zero))


def write(x, value, starts, indexer, add: bool = False):
    """`x` with `x[index] = value` (``+= value`` with `add`; repeated array indices then
    accumulate) for the normalized index."""
    from fluxion._src.lax import lax, structural
    if has_arrays(indexer):
        w_starts, w_indexer, rest = _window(x, starts, indexer)
        window = read(x, w_starts, w_indexer)
        window = window.at[rest].add(value) if add else _set_last_wins(window, rest, value)
        return write(x, window, w_starts, w_indexer)
    if add:
        value = lax.add(read(x, starts, indexer), value)
    if not indexer:
        return value
    full = tuple(size for size, _, _ in indexer)
    if core.get_aval(value).shape != full:
        value = lax.reshape(value, full)
    if any(stride != 1 and size > 1 for size, stride, _ in indexer):
        # A strided slice: update the window it spans at the strided positions.
        spans = [(size - 1) * stride + 1 if size else 0 for size, stride, _ in indexer]
        window = structural.dynamic_slice(x, list(starts), spans, allow_negative_indices=False)
        value = window.at[tuple(slice(None, None, st) for _, st, _ in indexer)].set(value)
    return structural.dynamic_update_slice(x, value, list(starts), allow_negative_indices=False)
