"""A Pallas-style kernel language emulated functionally on fluxion's own ops.

Kernels see `BlockRef`s: Python objects holding the current value of a block as a traced array;
reads index it, writes rebind it with `.at[...].set`. `pallas_call` runs the kernel over the grid
as one `fori_loop` whose carry is the (padded) outputs and the scratch buffers, with block loads
and stores as `dynamic_slice` / `dynamic_update_slice`. Control flow that mutates refs
(`when`, `loop`) carries every live ref's value through `cond`/`fori_loop`.

This is not yet the Ref-effect core of issue 15 (no Ref abstract value, no state primitives,
no discharge pass, no `pallas_call_p`): it gives the kernel semantics of JAX's interpret mode.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src import tree_util


def cdiv(a, b):
    """Ceiling division ``(a + b - 1) // b`` (ints or arrays)."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return (a + b - 1) // b


@dataclasses.dataclass(frozen=True)
class Slice:
    """A dynamic slice ``start:start+size`` (``pl.ds``/``pl.dslice``); `size` is static."""
    start: Any
    size: int
    stride: int = 1


def ds(start, size=None, stride=1):
    """``pl.ds(start, size)``: a `Slice`; ``ds(n)`` is ``ds(0, n)``."""
    if size is None:
        start, size = 0, start
    if not isinstance(size, (int, np.integer)):
        raise TypeError(f"pl.ds size must be a static int, got {size!r}")
    return Slice(start, int(size), int(stride))


dslice = ds


def multiple_of(x, values):
    """A hint that `x` is a multiple of `values`; the CPU emulation ignores it."""
    return x


class _Squeezed:
    def __repr__(self):
        return "pl.squeezed"


squeezed = _Squeezed()


@dataclasses.dataclass(frozen=True)
class MemorySpace:
    name: str

    def __call__(self, shape, dtype):
        return ScratchShape(tuple(shape), np.dtype(dtype), self)


ANY = MemorySpace("any")


@dataclasses.dataclass(frozen=True)
class ScratchShape:
    shape: tuple
    dtype: Any
    memory_space: MemorySpace = ANY


@dataclasses.dataclass(frozen=True)
class CostEstimate:
    flops: int
    transcendentals: int
    bytes_accessed: int


@dataclasses.dataclass(frozen=True)
class Blocked:
    """A block dimension of `block_size` whose index_map value counts blocks (the default)."""
    block_size: int


@dataclasses.dataclass(frozen=True)
class Element:
    """A block dimension of `block_size` whose index_map value is an element offset."""
    block_size: int
    padding: tuple = (0, 0)


@dataclasses.dataclass(frozen=True)
class BlockSpec:
    """How a grid point maps to a block: `block_shape` (``None``/`squeezed` drop a size-1 dim)
    and `index_map(*grid_ids) -> block indices` (defaults to the whole array)."""
    block_shape: Sequence | None = None
    index_map: Callable | None = None
    memory_space: Any = None


@dataclasses.dataclass(frozen=True)
class GridSpec:
    grid: tuple = ()
    in_specs: Any = None
    out_specs: Any = None
    scratch_shapes: Sequence = ()


class _KernelContext:
    def __init__(self, ids, grid):
        self.ids, self.grid, self.refs = ids, grid, []


_CONTEXTS: list[_KernelContext] = []


def _ctx():
    if not _CONTEXTS:
        raise RuntimeError("this pallas function can only be called inside a kernel")
    return _CONTEXTS[-1]


def _grid_axis(ctx, axis):
    if not isinstance(axis, (int, np.integer)) or not 0 <= axis < len(ctx.grid):
        raise ValueError(f"Axis {axis} is out of bounds for grid {ctx.grid}")
    return int(axis)


def program_id(axis):
    """The index of this kernel instance along grid axis `axis`."""
    ctx = _ctx()
    return ctx.ids[_grid_axis(ctx, axis)]


def num_programs(axis):
    """The size of the grid along `axis`."""
    ctx = _ctx()
    return ctx.grid[_grid_axis(ctx, axis)]


def _normalize_index(idx, ndim):
    if not isinstance(idx, tuple):
        idx = (idx,)
    if any(i is Ellipsis for i in idx):
        k = idx.index(Ellipsis)
        idx = idx[:k] + (slice(None),) * (ndim - len(idx) + 1) + idx[k + 1:]
    return idx + (slice(None),) * (ndim - len(idx))


def _broadcasts_to(shape, target) -> bool:
    try:
        return np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        return False


class BlockRef:
    """A mutable reference to a block, emulated by rebinding a traced value."""

    def __init__(self, value):
        self.value = value
        if _CONTEXTS:
            _CONTEXTS[-1].refs.append(self)

    shape = property(lambda self: tuple(self.value.shape))
    dtype = property(lambda self: self.value.dtype)
    ndim = property(lambda self: len(self.value.shape))

    def _gather(self, idx):
        given = idx if isinstance(idx, tuple) else (idx,)
        if len([i for i in given if i is not Ellipsis]) > self.ndim:
            raise ValueError(f"Indices {given} are longer than the shape {self.shape} of the "
                             f"block ref")
        idx = _normalize_index(idx, self.ndim)
        v = self.value
        starts, sizes, squeeze = [], [], []
        for d, i in enumerate(idx):
            n = v.shape[d]
            if isinstance(i, Slice):
                if i.stride != 1:
                    raise NotImplementedError("strided pl.ds")
                starts.append(i.start); sizes.append(i.size)
            elif isinstance(i, slice):
                s, e, st = i.indices(n)
                if st != 1:
                    raise NotImplementedError("strided slice of a Ref")
                starts.append(s); sizes.append(max(e - s, 0))
            else:
                starts.append(i); sizes.append(1); squeeze.append(d)
        return starts, sizes, squeeze

    def __getitem__(self, idx):
        starts, sizes, squeeze = self._gather(idx)
        out = lax.dynamic_slice(self.value, [jnp.asarray(s, "int32") for s in starts], sizes)
        return out.reshape([s for d, s in enumerate(sizes) if d not in squeeze])

    def __setitem__(self, idx, val):
        starts, sizes, squeeze = self._gather(idx)
        val = jnp.asarray(val, self.dtype)
        target = tuple(n for d, n in enumerate(sizes) if d not in squeeze)
        if not (_broadcasts_to(val.shape, target) or _broadcasts_to(val.shape, sizes)):
            raise ValueError(f"Invalid shape for a store into the block ref of shape "
                             f"{self.shape}: the indexed window has shape {target}, the value "
                             f"{tuple(val.shape)}")
        val = jnp.broadcast_to(val, sizes)
        self.value = lax.dynamic_update_slice(
            self.value, val, [jnp.asarray(s, "int32") for s in starts])

    def get(self):
        return self.value

    def __repr__(self):
        return f"BlockRef({self.shape}, {self.dtype})"


def _live_refs():
    return list(_ctx().refs) if _CONTEXTS else []


def when(condition):
    """Decorator: run the body only when `condition` holds (ref writes are selected)."""
    def deco(f):
        refs = _live_refs()
        before = [r.value for r in refs]
        f()
        after = [r.value for r in refs]
        c = jnp.asarray(condition)
        for r, b, a in zip(refs, before, after):
            r.value = jnp.where(c, a, b)
        return None
    return deco


def loop(lower, upper, *, step=1, unroll=None):
    """Decorator: ``@pl.loop(lo, hi)`` runs the body for each index, carrying every live ref."""
    def deco(f):
        refs = _live_refs()
        n = cdiv(upper - lower, step)

        def body(i, vals):
            for r, v in zip(refs, vals):
                r.value = v
            f(lower + i * step)
            return tuple(r.value for r in refs)
        out = lax.fori_loop(0, n, body, tuple(r.value for r in refs))
        for r, v in zip(refs, out):
            r.value = v
        return None
    return deco


def broadcast_to(x, shape):
    return jnp.broadcast_to(x, shape)


def empty(shape, dtype):
    return jnp.zeros(shape, dtype)


def empty_like(x):
    return jnp.zeros_like(x)


def run_scoped(f, *types):
    """Call `f` with fresh scratch refs of the given `ScratchShape`s."""
    refs = [BlockRef(jnp.zeros(t.shape, t.dtype)) for t in types]
    return f(*refs)


def run_state(f):
    """``run_state(f)(init)``: run `f` on refs holding the pytree `init`, return final values."""
    def run(init):
        leaves, tree = tree_util.tree_flatten(init)
        refs = [BlockRef(jnp.asarray(x)) for x in leaves]
        f(tree_util.tree_unflatten(tree, refs))
        return tree_util.tree_unflatten(tree, [r.value for r in refs])
    return run


def debug_print(fmt, *args):
    from fluxion import debug
    debug.print(fmt, *args)


def _block_dims(spec, shape, what, kname):
    if spec is None or spec.block_shape is None:
        return tuple(shape), tuple(False for _ in shape)
    bs = tuple(spec.block_shape)
    if len(bs) != len(shape):
        raise ValueError(f"pallas_call {kname}: {what} block_shape {bs} has rank {len(bs)} "
                         f"but the array has shape {tuple(shape)}")
    for b in bs:
        if isinstance(b, Element) and tuple(b.padding) != (0, 0):
            raise NotImplementedError(f"pallas_call {kname}: Element padding {b.padding}")
    dims = tuple(1 if b is None or b is squeezed else
                 b.block_size if isinstance(b, (Blocked, Element)) else int(b) for b in bs)
    if any(d <= 0 for d in dims):
        raise ValueError(f"pallas_call {kname}: {what} block_shape {bs} has a dimension that is "
                         "not positive")
    sq = tuple(b is None or b is squeezed for b in bs)
    return dims, sq


def _block_starts(spec, dims, ids, what, kname):
    if spec is None or spec.index_map is None:
        return [jnp.asarray(0, "int32")] * len(dims)
    idx = spec.index_map(*ids)
    if not isinstance(idx, tuple):
        idx = (idx,)
    if len(idx) != len(dims):
        raise ValueError(f"pallas_call {kname}: index_map of {what} returned {len(idx)} "
                         f"indices for a block of rank {len(dims)}")
    kinds = tuple(spec.block_shape) if spec.block_shape is not None else (None,) * len(dims)
    return [jnp.asarray(i, "int32") * (1 if isinstance(b, Element) else d)
            for i, d, b in zip(idx, dims, kinds)]


def _padded(x, dims):
    pads = [(0, cdiv(n, d) * d - n, 0) for n, d in zip(x.shape, dims)]
    if all(p[1] == 0 for p in pads):
        return x
    return lax.pad(x, jnp.zeros((), x.dtype), pads)


def _check_specs(kname, specs, n, what, of):
    if len(specs) != n:
        raise ValueError(f"pallas_call {kname}: {len(specs)} {what} for {n} {of}")
    for k, spec in enumerate(specs):
        if spec is not None and not isinstance(spec, BlockSpec):
            raise TypeError(f"pallas_call {kname}: {what}[{k}] must be a BlockSpec or None, "
                            f"got {spec!r}")


def _check_aliases(kname, aliases, ins, out_leaves):
    for i_in, i_out in aliases.items():
        if not (0 <= i_in < len(ins) and 0 <= i_out < len(out_leaves)):
            raise ValueError(f"pallas_call {kname}: input_output_aliases maps input {i_in} to "
                             f"output {i_out}, but there are {len(ins)} inputs and "
                             f"{len(out_leaves)} outputs")
        x, o = ins[i_in], out_leaves[i_out]
        if tuple(x.shape) != tuple(o.shape) or np.dtype(x.dtype) != np.dtype(o.dtype):
            raise ValueError(f"pallas_call {kname}: input_output_aliases maps input {i_in} of "
                             f"{x.dtype}{list(x.shape)} to output {i_out} of "
                             f"{np.dtype(o.dtype)}{list(o.shape)}; they must have the same "
                             "shape and dtype")


def pallas_call(kernel, out_shape, *, grid=(), in_specs=None, out_specs=None, grid_spec=None,
                input_output_aliases=None, interpret=False, name=None, compiler_params=None,
                cost_estimate=None, scratch_shapes=()):
    """Map `kernel(*in_refs, *out_refs, *scratch_refs)` over `grid`; see module docstring."""
    if grid_spec is not None:
        grid, in_specs, out_specs = grid_spec.grid, grid_spec.in_specs, grid_spec.out_specs
        scratch_shapes = grid_spec.scratch_shapes
    grid = (grid,) if isinstance(grid, (int, np.integer)) else tuple(grid)
    if not all(isinstance(g, (int, np.integer)) for g in grid):
        raise ValueError(f"Grid must be a tuple of integers, got {grid}")
    kname = name or getattr(kernel, "__name__", "kernel")
    out_leaves, out_tree = tree_util.tree_flatten(out_shape)
    for o in out_leaves:
        if not (hasattr(o, "shape") and hasattr(o, "dtype")):
            raise ValueError(f"pallas_call {kname}: invalid out_shape type {type(o).__name__}; "
                             "out_shape holds ShapeDtypeStructs (or arrays)")

    def call(*args):
        ins = [jnp.asarray(a) for a in args]
        ispecs = list(in_specs) if isinstance(in_specs, (list, tuple)) else (
            [in_specs] * len(ins) if in_specs is not None else [None] * len(ins))
        ospecs = tree_util.tree_leaves(out_specs, is_leaf=lambda s: isinstance(s, BlockSpec)) \
            if out_specs is not None else [None] * len(out_leaves)
        if len(ospecs) == 1 and len(out_leaves) > 1:
            ospecs = ospecs * len(out_leaves)
        _check_specs(kname, ispecs, len(ins), "in_specs", "inputs")
        _check_specs(kname, ospecs, len(out_leaves), "out_specs", "outputs of out_shape")
        _check_aliases(kname, input_output_aliases or {}, ins, out_leaves)
        iblk = [_block_dims(s, x.shape, f"input {k}", kname) for k, (s, x) in enumerate(zip(ispecs, ins))]
        oblk = [_block_dims(s, o.shape, f"output {k}", kname) for k, (s, o) in enumerate(zip(ospecs, out_leaves))]
        ins_p = [_padded(x, d) for x, (d, _) in zip(ins, iblk)]
        outs0 = [jnp.zeros(o.shape, o.dtype) for o in out_leaves]
        for i_in, i_out in (input_output_aliases or {}).items():
            outs0[i_out] = ins[i_in].astype(out_leaves[i_out].dtype)
        outs0 = [_padded(o, d) for o, (d, _) in zip(outs0, oblk)]
        scratch0 = [jnp.zeros(s.shape, s.dtype) for s in scratch_shapes]
        total = math.prod(grid)

        def step(t, carry):
            outs, scratch = carry
            ids, rem = [], t
            for g in reversed(grid):
                ids.append(rem % g); rem = rem // g
            ids = tuple(reversed(ids))
            ctx = _KernelContext(ids, grid)
            _CONTEXTS.append(ctx)
            try:
                def load(x, spec, dims, sq, what):
                    st = _block_starts(spec, dims, ids, what, kname)
                    b = lax.dynamic_slice(x, st, dims)
                    return b.reshape([d for d, s in zip(dims, sq) if not s]), st
                in_refs = [BlockRef(load(x, s, d, q, f"input {k}")[0])
                           for k, (x, s, (d, q)) in enumerate(zip(ins_p, ispecs, iblk))]
                loaded = [load(o, s, d, q, f"output {k}")
                          for k, (o, s, (d, q)) in enumerate(zip(outs, ospecs, oblk))]
                out_refs = [BlockRef(b) for b, _ in loaded]
                s_refs = [BlockRef(v) for v in scratch]
                kernel(*in_refs, *out_refs, *s_refs)
            finally:
                _CONTEXTS.pop()
            new_outs = [lax.dynamic_update_slice(o, r.value.reshape(d).astype(o.dtype), st)
                        for o, r, (_, st), (d, _) in zip(outs, out_refs, loaded, oblk)]
            return new_outs, [r.value for r in s_refs]

        outs, _ = lax.fori_loop(0, total, step, (outs0, scratch0))
        outs = [o[tuple(slice(0, n) for n in leaf.shape)] for o, leaf in zip(outs, out_leaves)]
        return tree_util.tree_unflatten(out_tree, outs)
    return call
