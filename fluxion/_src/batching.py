"""Vectorization: a trace whose tracers carry a batch dimension, and per-primitive batching rules.

A rule is ``rule(args, dims, **params) -> (out, out_dim)`` (lists for multiple results), where
each dim is an int or `not_mapped` (None). Rules move batch dimensions only where they must.
Collective primitives (psum, all_gather, ...) name an axis; the vmap trace with that name
handles them with `collective_rules`.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable, Sequence

import numpy as np

from fluxion._src import core, dtypes, machinery_ops
from fluxion._src.core import ShapedArray, Trace, Tracer

not_mapped = None

# primitive -> rule(args, dims, **params) -> (out, out_dim)
primitive_batchers: dict[core.Primitive, Callable] = {}
# primitive -> rule(trace, args, dims, **params): used when the primitive names this trace's axis
collective_rules: dict[core.Primitive, Callable] = {}
# primitive -> rule(trace, args, dims, **params): call-like primitives whose bodies must be
# batched under this very trace (so collectives inside still see its axis name)
trace_rules: dict[core.Primitive, Callable] = {}


# ---------------------------------------------------------------------------------------------
# The named-axis environment: which axis names are bound (by vmap) while tracing, and their sizes.

class _AxisEnv(threading.local):
    def __init__(self):
        self.frames: list[tuple[object, int]] = []


_axis_env = _AxisEnv()


@contextlib.contextmanager
def extend_axis_env(name, size: int):
    _axis_env.frames.append((name, size))
    try:
        yield
    finally:
        _axis_env.frames.pop()


@contextlib.contextmanager
def bind_axes(axes):
    """Bind each (name, size) in the named-axis environment, outermost first."""
    with contextlib.ExitStack() as stack:
        for name, size in axes:
            stack.enter_context(extend_axis_env(name, size))
        yield


def axis_size(name) -> int:
    """Size of the named axis bound by an enclosing vmap; NameError if none binds it."""
    for frame_name, size in reversed(_axis_env.frames):
        if frame_name == name:
            return size
    raise NameError(f"unbound axis name: {name}. The following axis names (e.g. defined by "
                    f"vmap) are available to collective operations: "
                    f"{[n for n, _ in _axis_env.frames if n is not None]}")


# ---------------------------------------------------------------------------------------------
# Moving batch dimensions

def moveaxis(x, src: int, dst: int):
    if src == dst:
        return x
    ndim = core.get_aval(x).ndim
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return machinery_ops.transpose(x, tuple(perm))


def bdim_at_front(x, dim, size: int):
    """`x` with its batch dimension first; an unbatched `x` is broadcast along a new one."""
    if dim is not_mapped:
        return broadcast_batch(x, size, 0)
    return moveaxis(x, dim, 0)


def broadcast_batch(x, size: int, dim: int):
    aval = core.get_aval(x)
    shape = list(aval.shape)
    shape.insert(dim, size)
    if aval.dtype == dtypes.float0:  # no data to broadcast (an integer input's gradient)
        return np.zeros(shape, dtypes.float0)
    dims = tuple(i if i < dim else i + 1 for i in range(aval.ndim))
    return machinery_ops.broadcast_in_dim(x, tuple(shape), dims)


def matchaxis(x, src, dst, size: int):
    """Move (or create, by broadcasting) the batch dimension of `x` from `src` to `dst`."""
    if src == dst:
        return x
    if src is not_mapped:
        return broadcast_batch(x, size, dst)
    if dst is not_mapped:
        raise ValueError("cannot unbatch a batched value")
    return moveaxis(x, src, dst)


# ---------------------------------------------------------------------------------------------
# The trace

class BatchTracer(Tracer):
    __slots__ = ("val", "batch_dim")

    def __init__(self, trace, val, batch_dim: int):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim

    @property
    def aval(self):
        aval = core.get_aval(self.val)
        shape = aval.shape[:self.batch_dim] + aval.shape[self.batch_dim + 1:]
        if type(aval) is not ShapedArray:  # a batched Ref keeps its type
            return aval.update(shape=shape)
        return ShapedArray(shape, aval.dtype, aval.weak_type)

    def _short_repr(self) -> str:
        return f"VmapTracer(aval={self.aval}, batched={core.get_aval(self.val)})"


class BatchTrace(Trace):
    """Batches along one axis. Traces sharing a `tag` treat each other's tracers as their own:
    a rule that re-enters the same vmap at a lower level (a custom_jvp function batched as a
    whole) thereby batches the values the function closes over too."""

    def __init__(self, axis_name, axis_size: int, spmd_axis_name=None, origin="vmap", tag=None):
        self.parent = core.current_trace()
        self.tag = object() if tag is None else tag
        self.axis_name = axis_name
        self.axis_size = axis_size
        self.spmd_axis_name = spmd_axis_name
        self.origin = origin
        self.is_live = True

    def __repr__(self):
        return f"BatchTrace(axis_name={self.axis_name})"

    def unpack(self, x):
        if isinstance(x, BatchTracer) and x._trace.tag is self.tag:
            return x.val, x.batch_dim
        return x, not_mapped

    def wrap(self, val, dim):
        return val if dim is not_mapped else BatchTracer(self, val, dim)

    def process_primitive(self, primitive, args, params):
        vals, dims = [], []
        for x in args:
            v, d = self.unpack(x)
            vals.append(v)
            dims.append(d)
        with core.set_current_trace(self.parent):
            collective = collective_rules.get(primitive)
            if collective is not None and self.axis_name is not None and \
                    self.axis_name in _axis_names(params):
                out, out_dim = collective(self, vals, dims, **params)
            elif primitive in trace_rules:
                # Even with nothing batched: collectives inside the body may name this axis.
                out, out_dim = trace_rules[primitive](self, vals, dims, **params)
            elif all(d is not_mapped for d in dims):
                return primitive.bind(*vals, **params)
            else:
                rule = primitive_batchers.get(primitive)
                if rule is None:
                    raise NotImplementedError(
                        f"Batching rule for '{primitive.name}' not implemented. Define one in "
                        f"fluxion.interpreters.batching.primitive_batchers[{primitive.name}_p].")
                out, out_dim = rule(vals, dims, **params)
        if primitive.multiple_results:
            return [self.wrap(v, d) for v, d in zip(out, out_dim)]
        return self.wrap(out, out_dim)


def _axis_names(params) -> tuple:
    names = params.get("axis_name", params.get("axes", ()))
    return names if isinstance(names, tuple) else (names,)


def batch_flat(fun: Callable, args: Sequence, in_dims: Sequence, axis_name, axis_size: int,
               spmd_axis_name=None, tag=None):
    """Run `fun` on batch tracers; returns (out_vals, out_dims) as the trace leaves them.
    With the `tag` of a running BatchTrace, that trace's tracers count as this one's."""
    trace = BatchTrace(axis_name, axis_size, spmd_axis_name, tag=tag)
    try:
        ins = [trace.wrap(a, d) for a, d in zip(args, in_dims)]
        with extend_axis_env(axis_name, axis_size), core.set_current_trace(trace):
            outs = fun(*ins)
        unpacked = [trace.unpack(o) for o in outs]
    finally:
        trace.is_live = False
    return [v for v, _ in unpacked], [d for _, d in unpacked]


# ---------------------------------------------------------------------------------------------
# Rule helpers (public as fluxion.interpreters.batching)

def defvectorized(primitive: core.Primitive) -> None:
    """`primitive` acts independently on every element (unary): the batch dim passes through."""
    def rule(args, dims, **params):
        (x,), (d,) = args, dims
        return primitive.bind(x, **params), d
    primitive_batchers[primitive] = rule


def defbroadcasting(primitive: core.Primitive) -> None:
    """`primitive` is elementwise over operands of equal rank whose dims are equal or 1 (and
    rank-0 operands): batched operands line their batch dims up; unbatched ones get a size-1
    dimension there, so nothing is copied or transposed when the batch dims already agree.
    A primitive with several results gives each of them that batch dimension."""
    primitive_batchers[primitive] = broadcasting_batcher(primitive)


def broadcasting_batcher(primitive: core.Primitive) -> Callable:
    def rule(args, dims, **params):
        out_ndim = max(core.get_aval(a).ndim - (d is not not_mapped) for a, d in zip(args, dims)) + 1
        batched = [(a, d) for a, d in zip(args, dims) if d is not not_mapped]
        # Keep the batch dim where the (first) full-rank batched operand has it.
        full = [d for a, d in batched if core.get_aval(a).ndim == out_ndim]
        out_dim = full[0] if full else 0
        new_args = []
        for a, d in zip(args, dims):
            ndim = core.get_aval(a).ndim
            if d is not_mapped:
                new_args.append(a if ndim == 0 else _expand_dim(a, out_dim))
            else:
                x = _to_rank_with_batch(a, d, out_ndim, out_dim) if ndim < out_ndim else moveaxis(a, d, out_dim)
                new_args.append(x)
        out = primitive.bind(*new_args, **params)
        if primitive.multiple_results:
            return out, [out_dim] * len(out)
        return out, out_dim
    return rule


def _expand_dim(x, dim: int):
    aval = core.get_aval(x)
    shape = list(aval.shape)
    shape.insert(dim, 1)
    return machinery_ops.reshape(x, tuple(shape))


def _to_rank_with_batch(x, d, rank: int, dim: int):
    """A batched scalar (shape (B,)) as rank `rank`, B at `dim` and 1 elsewhere."""
    shape = [1] * rank
    shape[dim] = core.get_aval(x).shape[d]
    return machinery_ops.reshape(x, tuple(shape))
