"""`pallas_call`: map a kernel over a grid. The primitive `pallas_call_p` holds the kernel as
a jaxpr over Refs (grid indices first, then one Ref per input block, output block and scratch
buffer) and one `BlockMapping` per operand.

Lowering is registered per platform. On the CPU (and on any platform with `interpret=True`)
the kernel is discharged into a pure function of block values, and the grid becomes one
`fori_loop` whose carry is the outputs (padded to whole blocks) and the scratch buffers:
blocks are read with `dynamic_slice` and written back with `dynamic_update_slice`. Operands
get their `pl.Element` padding and are padded to whole blocks with JAX's "uninitialized"
value (NaN, the least integer, False), unaliased outputs start as it, and the padding of
outputs is cut off, so edge blocks read padding and their writes past the array are dropped,
as in JAX's interpret mode. Under `vmap` the batch becomes a new leading grid dimension; `jvp` is a pallas_call of the
kernel's JVP, with one more Ref per inexact operand, output and scratch buffer (its tangent).
"""
from __future__ import annotations

import math

import numpy as np

from fluxion._src import ad, batching, core, dtypes, staging, tree_util
from fluxion._src.compiler import lowering
from fluxion._src.core import ClosedJaxpr, Jaxpr, ShapedArray, Var
from fluxion._src.pallas import kernel_ops
from fluxion._src.pallas.core import (SEMAPHORE, BlockMapping, BlockSpec, CompilerParams,
                                     MemorySpace, block_dims, cdiv, trace_index_map)
from fluxion._src.state import discharge
from fluxion._src.state.types import AbstractRef

pallas_call_p = core.Primitive("pallas_call")
pallas_call_p.multiple_results = True
# The kernel's Refs are its own: programs calling it are pure.
discharge.SCOPED_STATE_PRIMITIVES.add(pallas_call_p)


def _abstract_eval(*avals, jaxpr, grid, in_mappings, out_mappings, scratch_avals,
                   input_output_aliases, name, interpret):
    if len(avals) != len(in_mappings):
        raise TypeError(f"pallas_call {name}: {len(avals)} operands for {len(in_mappings)} "
                        "input block specs")
    for k, (a, m) in enumerate(zip(avals, in_mappings)):
        if a.shape != m.array_aval.shape or a.dtype != m.array_aval.dtype:
            raise TypeError(f"pallas_call {name}: input {k} is {a.str_short()} but the kernel "
                            f"was traced for {m.array_aval.str_short()}")
    return [m.array_aval for m in out_mappings]


pallas_call_p.def_abstract_eval(_abstract_eval)


# ---------------------------------------------------------------------------------------------
# The user-facing function

def _flat_specs(specs, n, what, of, kname, repeat_single):
    """The block specs as a list, one per operand, checked (JAX's errors name the kernel)."""
    if specs is None:
        return [None] * n
    if isinstance(specs, BlockSpec):
        flat = [specs] * n
    else:
        flat = tree_util.tree_leaves(specs, is_leaf=lambda s: isinstance(s, BlockSpec) or s is None)
        if len(flat) == 1 and n > 1 and repeat_single:
            flat = flat * n
    if len(flat) != n:
        raise ValueError(f"pallas_call {kname}: {len(flat)} {what} for {n} {of}")
    for k, spec in enumerate(flat):
        if spec is not None and not isinstance(spec, BlockSpec):
            raise TypeError(f"pallas_call {kname}: {what}[{k}] must be a BlockSpec or None, "
                            f"got {spec!r}")
    return flat


def _check_aliases(kname, aliases, in_avals, out_avals):
    for i_in, i_out in aliases:
        if not (0 <= i_in < len(in_avals) and 0 <= i_out < len(out_avals)):
            raise ValueError(f"pallas_call {kname}: input_output_aliases maps input {i_in} to "
                             f"output {i_out}, but there are {len(in_avals)} inputs and "
                             f"{len(out_avals)} outputs")
        x, o = in_avals[i_in], out_avals[i_out]
        if x.shape != o.shape or x.dtype != o.dtype:
            raise ValueError(f"pallas_call {kname}: input_output_aliases maps input {i_in} of "
                             f"{x.str_short(False)} to output {i_out} of {o.str_short(False)}; "
                             "they must have the same shape and dtype")


def _mapping(spec, aval, grid, what, kname, prefetch_avals=()) -> BlockMapping:
    dims, sq, el, padding, bounded = block_dims(spec, aval.shape, what, kname)
    index_map = trace_index_map(spec, len(dims), grid, what, kname, bounded, prefetch_avals)
    return BlockMapping(dims, sq, el, index_map, ShapedArray(aval.shape, aval.dtype),
                        getattr(spec, "memory_space", None), padding, any(bounded))


def _prefetch_mapping(aval, grid, k, kname, prefetch_avals) -> BlockMapping:
    """A scalar-prefetch operand: the whole array, in SMEM, at every grid point."""
    spec = BlockSpec(None, None, MemorySpace("smem"))
    return _mapping(spec, aval, grid, f"scalar prefetch {k}", kname, prefetch_avals)


def num_prefetch(grid, in_mappings, out_mappings) -> int:
    """How many leading operands are scalar prefetch: what index maps take after the grid."""
    mappings = tuple(in_mappings) + tuple(out_mappings)
    return len(mappings[0].index_map.in_avals) - len(grid) if mappings else 0


def _trace_kernel(kernel, grid, in_mappings, out_mappings, scratch_avals, kname,
                  in_tree, out_tree) -> ClosedJaxpr:
    ref_avals = ([AbstractRef(ShapedArray(m.ref_shape, m.array_aval.dtype), m.memory_space)
                  for m in in_mappings + out_mappings] + list(scratch_avals))
    scalar = ShapedArray((), np.int32)
    n_in, n_out = len(in_mappings), len(out_mappings)

    def fun(*args):
        ids, refs = args[:len(grid)], args[len(grid):]
        # As JAX: one kernel argument per operand (a pytree of Refs), then one per element
        # of a tuple `out_shape` (or the whole `out_shape`), then the scratch Refs.
        ins = tree_util.tree_unflatten(in_tree, refs[:n_in])
        outs = tree_util.tree_unflatten(out_tree, refs[n_in:n_in + n_out])
        outs = outs if isinstance(outs, tuple) else (outs,)
        with kernel_ops.kernel_context(ids, grid):
            kernel(*ins, *outs, *refs[n_in + n_out:])
        return []

    return staging.trace_to_jaxpr(fun, [scalar] * len(grid) + ref_avals,
                                  origin=f"pallas_call kernel {kname}")


def pallas_call(kernel, out_shape, *, grid=(), in_specs=None, out_specs=None, grid_spec=None,
                input_output_aliases=None, interpret=False, name=None, compiler_params=None,
                cost_estimate=None, scratch_shapes=(), debug=False, backend=None):
    """Map `kernel(*in_refs, *out_refs, *scratch_refs)` over `grid` (``pl.pallas_call``).

    Parameters
    ----------
    kernel : callable
        Reads its input blocks and writes its output blocks through Refs; returns None.
    out_shape : pytree of ShapeDtypeStruct
    grid : int or tuple of ints
        Kernel instances run for every grid point, in row-major order (last axis fastest).
    in_specs, out_specs : BlockSpec or pytrees of them
        The block of each operand a grid point sees (default: the whole array).
    grid_spec : GridSpec, optional
        Grid, specs and `scratch_shapes` (Refs that persist across grid steps) together.
    input_output_aliases : dict, optional
        ``{input index: output index}``: the output starts as that input.
    interpret : bool
        Run the kernel as an ordinary program (the only mode on the CPU, where it is the
        default anyway).

    Returns
    -------
    A function of the inputs returning the outputs (with the structure of `out_shape`).
    """
    n_prefetch = 0
    if grid_spec is not None:
        grid, in_specs, out_specs = grid_spec.grid, grid_spec.in_specs, grid_spec.out_specs
        scratch_shapes = grid_spec.scratch_shapes
        n_prefetch = int(getattr(grid_spec, "num_scalar_prefetch", 0))
    if compiler_params is not None and not isinstance(compiler_params, CompilerParams):
        # JAX fails on a dict (the old API) with an incidental TypeError
        raise TypeError(f"compiler_params must be a pl.CompilerParams such as "
                        f"pltpu.CompilerParams(...) or plt.CompilerParams(...), got "
                        f"{type(compiler_params).__name__}")
    grid = (grid,) if isinstance(grid, (int, np.integer)) else tuple(grid)
    if not all(isinstance(g, (int, np.integer)) for g in grid):
        raise ValueError(f"Grid must be a tuple of integers, got {grid}")
    grid = tuple(int(g) for g in grid)
    kname = name or getattr(kernel, "__name__", "kernel")
    if isinstance(out_shape, list):  # JAX's canonicalization: a list of outputs is a tuple
        out_shape = tuple(out_shape)
    out_leaves, out_tree = tree_util.tree_flatten(out_shape)
    for o in out_leaves:
        if not (hasattr(o, "shape") and hasattr(o, "dtype")):
            raise ValueError(f"pallas_call {kname}: invalid out_shape type {type(o).__name__}; "
                             "out_shape holds ShapeDtypeStructs (or arrays)")
    out_avals = [ShapedArray(tuple(o.shape), np.dtype(o.dtype)) for o in out_leaves]
    scratch_avals = tuple(AbstractRef(ShapedArray(tuple(s.shape), np.dtype(s.dtype)),
                                      getattr(s, "memory_space", None)) for s in scratch_shapes)
    aliases = tuple(sorted((input_output_aliases or {}).items()))

    def call(*args):
        import fluxion.numpy as jnp
        leaves, in_tree = tree_util.tree_flatten(args)
        leaves = [jnp.asarray(a) for a in leaves]
        in_avals = [core.get_aval(x) for x in leaves]
        if len(leaves) < n_prefetch:
            raise ValueError(f"pallas_call {kname}: num_scalar_prefetch={n_prefetch} but only "
                             f"{len(leaves)} operands were given")
        prefetch_avals = tuple(ShapedArray(a.shape, a.dtype) for a in in_avals[:n_prefetch])
        ispecs = _flat_specs(in_specs, len(leaves) - n_prefetch, "in_specs", "inputs", kname,
                             False)
        ospecs = _flat_specs(out_specs, len(out_avals), "out_specs", "outputs of out_shape",
                             kname, True)
        _check_aliases(kname, aliases, in_avals, out_avals)
        in_maps = tuple(_prefetch_mapping(a, grid, k, kname, prefetch_avals)
                        for k, a in enumerate(in_avals[:n_prefetch]))
        in_maps += tuple(_mapping(s, a, grid, f"input {k}", kname, prefetch_avals)
                         for k, (s, a) in enumerate(zip(ispecs, in_avals[n_prefetch:])))
        out_maps = tuple(_mapping(s, a, grid, f"output {k}", kname, prefetch_avals)
                         for k, (s, a) in enumerate(zip(ospecs, out_avals)))
        jaxpr = _trace_kernel(kernel, grid, list(in_maps), list(out_maps), scratch_avals, kname,
                              in_tree, out_tree)
        outs = pallas_call_p.bind(*leaves, jaxpr=jaxpr, grid=grid, in_mappings=in_maps,
                                  out_mappings=out_maps, scratch_avals=scratch_avals,
                                  input_output_aliases=aliases, name=kname,
                                  interpret=bool(interpret))
        return tree_util.tree_unflatten(out_tree, outs)
    return call


# ---------------------------------------------------------------------------------------------
# Running the grid: the CPU lowering, and the interpret mode of every platform

def uninitialized_value(shape, dtype):
    """What JAX's interpret mode puts where nothing was written: NaN for inexact dtypes, the
    least integer for integers, False for booleans."""
    from fluxion._src.lax import structural
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        fill = np.iinfo(dtype).min
    elif dtype == np.bool_:
        fill = False
    else:
        fill = np.nan
    return structural.full(tuple(shape), fill, dtype)


def _padded(x, mapping: BlockMapping):
    """`x` with its `pl.Element` padding added, then padded up to whole blocks (with
    `uninitialized_value`, as in JAX's interpret mode)."""
    from fluxion import lax
    aval = core.get_aval(x)
    fill = uninitialized_value((), aval.dtype)
    if any(p != (0, 0) for p in mapping.padding):
        x = lax.pad(x, fill, [(lo, hi, 0) for lo, hi in mapping.padding])
    shape = core.get_aval(x).shape
    pads = [(0, cdiv(n, d) * d - n, 0) for n, d in zip(shape, mapping.block_shape)]
    if all(p[1] == 0 for p in pads):
        return x
    return lax.pad(x, fill, pads)


def _unpadded(o, mapping: BlockMapping):
    from fluxion import lax
    starts = [lo for lo, _ in mapping.padding]
    return lax.slice(o, starts, [s + n for s, n in zip(starts, mapping.array_aval.shape)])


def _starts(mapping: BlockMapping, ids, prefetch=()):
    from fluxion import lax
    idx = core.eval_jaxpr(mapping.index_map.jaxpr, mapping.index_map.consts, *ids, *prefetch)
    return [i if el else lax.mul(i, np.int32(d))
            for i, d, el in zip(idx, mapping.block_shape, mapping.element)]


def _load(x, mapping, starts):
    # JAX's dynamic_slice: a negative start counts from the end, then starts are clamped.
    from fluxion import lax
    block = lax.dynamic_slice(x, starts, mapping.block_shape)
    return lax.reshape(block, mapping.ref_shape)


def _check_runnable(in_mappings, out_mappings, input_output_aliases, name):
    for m in tuple(in_mappings) + tuple(out_mappings):
        if m.bounded:
            # JAX 0.10.2's interpret mode (its only CPU mode) raises this too.
            raise ValueError(f"pallas_call {name}: Unsupported block dim type: BoundedSlice "
                             "(pl.BoundedSlice block dimensions run only on TPUs)")
        if input_output_aliases and any(p != (0, 0) for p in m.padding):
            raise NotImplementedError(f"pallas_call {name}: Padding with aliasing not "
                                      "supported.")


def run_grid(*args, jaxpr, grid, in_mappings, out_mappings, scratch_avals, input_output_aliases,
             name, interpret):
    """The pallas_call as ordinary fluxion ops (traced by the lowering)."""
    from fluxion import lax
    control_flow = structural = lax
    _check_runnable(in_mappings, out_mappings, input_output_aliases, name)
    kernel = discharge.discharge_state(jaxpr.jaxpr, jaxpr.consts)
    n_in, n_out = len(in_mappings), len(out_mappings)
    ins = [_padded(x, m) for x, m in zip(args, in_mappings)]
    outs0 = [uninitialized_value(m.array_aval.shape, m.array_aval.dtype) for m in out_mappings]
    for i_in, i_out in input_output_aliases:
        outs0[i_out] = args[i_in]
    outs0 = [_padded(o, m) for o, m in zip(outs0, out_mappings)]
    scratch0 = [structural.full(a.shape, 0, a.dtype) if a.memory_space == SEMAPHORE
                else uninitialized_value(a.shape, a.dtype) for a in scratch_avals]
    prefetch = args[:num_prefetch(grid, in_mappings, out_mappings)]

    def step(t, carry):
        outs, scratch = carry
        ids, rem = [], t
        for g in reversed(grid):
            ids.append(lax.rem(rem, np.int32(g)))
            rem = lax.div(rem, np.int32(g))
        ids = ids[::-1]
        in_blocks = [_load(x, m, _starts(m, ids, prefetch)) for x, m in zip(ins, in_mappings)]
        out_starts = [_starts(m, ids, prefetch) for m in out_mappings]
        out_blocks = [_load(o, m, s) for o, m, s in zip(outs, out_mappings, out_starts)]
        finals = core.eval_jaxpr(kernel.jaxpr, kernel.consts, *ids, *in_blocks, *out_blocks,
                                 *scratch)
        new_outs = [structural.dynamic_update_slice(o, lax.reshape(b, m.block_shape), s)
                    for o, b, m, s in zip(outs, finals[n_in:n_in + n_out], out_mappings,
                                          out_starts)]
        return new_outs, list(finals[n_in + n_out:])

    total = math.prod(grid)
    outs, _ = control_flow.fori_loop(np.int32(0), np.int32(total), step, (outs0, scratch0))
    return [_unpadded(o, m) for o, m in zip(outs, out_mappings)]


_interpret_lowering = lowering.lower_fun(run_grid, multiple_results=True)


def _generic_lowering(ctx, *args, interpret, name, **params):
    if not interpret:
        raise NotImplementedError(
            f"pallas_call {name}: no kernel compiler for platform '{ctx.platform}'; pass "
            "interpret=True to run the kernel as an ordinary program.")
    return _interpret_lowering(ctx, *args, interpret=interpret, name=name, **params)


lowering.register_lowering(pallas_call_p, _generic_lowering)
lowering.register_lowering(pallas_call_p, _interpret_lowering, platform="cpu")


# ---------------------------------------------------------------------------------------------
# vmap: the batch is a new leading grid dimension

def _with_batch_index(closed: ClosedJaxpr, batched: bool, n_grid: int,
                      prefetch_batched: tuple, size: int) -> ClosedJaxpr:
    """An index map taking the batch index first; batched operands index by it. A batched
    scalar-prefetch operand (after the grid indices) is indexed by it before the map sees it."""
    from fluxion import lax
    scalar = ShapedArray((), np.int32)
    extra = list(closed.in_avals[n_grid:])
    avals = [ShapedArray((size,) + a.shape, a.dtype) if pb else a
             for a, pb in zip(extra, prefetch_batched)]

    def fun(b, *args):
        ids, pre = args[:n_grid], args[n_grid:]
        pre = [lax.dynamic_index_in_dim(p, b, keepdims=False) if pb else p
               for p, pb in zip(pre, prefetch_batched)]
        idx = core.eval_jaxpr(closed.jaxpr, closed.consts, *ids, *pre)
        return [b, *idx] if batched else list(idx)
    return staging.trace_to_jaxpr(fun, [scalar] * (1 + n_grid) + avals,
                                  origin="batched index_map")


def _batch_mapping(m: BlockMapping, size: int, n_grid: int, prefetch_batched) -> BlockMapping:
    return BlockMapping((1,) + m.block_shape, (True,) + m.squeezed, (False,) + m.element,
                        _with_batch_index(m.index_map, True, n_grid, prefetch_batched, size),
                        ShapedArray((size,) + m.array_aval.shape, m.array_aval.dtype),
                        m.memory_space, ((0, 0),) + m.padding, m.bounded)


def _unbatched_mapping(m: BlockMapping, size: int, n_grid: int, prefetch_batched
                       ) -> BlockMapping:
    return BlockMapping(m.block_shape, m.squeezed, m.element,
                        _with_batch_index(m.index_map, False, n_grid, prefetch_batched, size),
                        m.array_aval, m.memory_space, m.padding, m.bounded)


def _batch_rule(args, dims, *, jaxpr, grid, in_mappings, out_mappings, scratch_avals,
                input_output_aliases, name, interpret):
    size = next(core.get_aval(a).shape[d] for a, d in zip(args, dims) if d is not None)
    aliased = {i for i, _ in input_output_aliases}
    n_grid = len(grid)
    prefetch_batched = tuple(d is not None
                             for d in dims[:num_prefetch(grid, in_mappings, out_mappings)])
    new_args, new_in = [], []
    for k, (a, d, m) in enumerate(zip(args, dims, in_mappings)):
        if d is None and k in aliased:  # the output it starts is batched
            a, d = batching.broadcast_batch(a, size, 0), 0
        if d is None:
            new_args.append(a)
            new_in.append(_unbatched_mapping(m, size, n_grid, prefetch_batched))
        else:
            new_args.append(batching.moveaxis(a, d, 0))
            new_in.append(_batch_mapping(m, size, n_grid, prefetch_batched))
    new_out = tuple(_batch_mapping(m, size, n_grid, prefetch_batched) for m in out_mappings)
    k = jaxpr.jaxpr
    kernel = ClosedJaxpr(Jaxpr(k.constvars, [Var(ShapedArray((), np.int32))] + k.invars,
                               k.outvars, k.eqns, k.effects, k.debug_info), jaxpr.consts)
    outs = pallas_call_p.bind(*new_args, jaxpr=kernel, grid=(size,) + tuple(grid),
                              in_mappings=tuple(new_in), out_mappings=new_out,
                              scratch_avals=scratch_avals,
                              input_output_aliases=input_output_aliases, name=name,
                              interpret=interpret)
    return outs, [0] * len(outs)


batching.primitive_batchers[pallas_call_p] = _batch_rule


# ---------------------------------------------------------------------------------------------
# jvp: a pallas_call of the kernel's JVP (as JAX's); tangents ride in Refs of their own

def _jvp_rule(primals, tangents, *, jaxpr, grid, in_mappings, out_mappings, scratch_avals,
              input_output_aliases, name, interpret):
    inexact = lambda dtype: dtypes.is_inexact(dtype)  # noqa: E731
    t_in = [k for k, m in enumerate(in_mappings) if inexact(m.array_aval.dtype)]
    t_out = [k for k, m in enumerate(out_mappings) if inexact(m.array_aval.dtype)]
    t_scr = [k for k, a in enumerate(scratch_avals) if inexact(a.dtype)]
    n_g, n_in, n_out = len(grid), len(in_mappings), len(out_mappings)
    ref_avals = [v.aval for v in jaxpr.jaxpr.invars[n_g:]]
    in_avals, out_avals = ref_avals[:n_in], ref_avals[n_in:n_in + n_out]
    scr_avals = ref_avals[n_in + n_out:]

    def kernel(*args):
        ids, args = args[:n_g], list(args[n_g:])
        sizes = [n_in, len(t_in), n_out, len(t_out), len(scratch_avals), len(t_scr)]
        parts = []
        for n in sizes:
            parts.append(args[:n])
            args = args[n:]
        ins, ins_t, outs, outs_t, scr, scr_t = parts

        def tangents_of(refs, which, given):
            ts = [ad.Zero(ad.tangent_aval(r.aval.inner_aval if hasattr(r.aval, "inner_aval")
                                          else core.get_aval(r))) for r in refs]
            for k, t in zip(which, given):
                ts[k] = t
            return ts
        zeros = [ad.Zero(ShapedArray((), dtypes.float0)) for _ in ids]
        ad.jvp_flat(lambda *a: core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *a),
                    [*ids, *ins, *outs, *scr],
                    zeros + tangents_of(ins, t_in, ins_t) + tangents_of(outs, t_out, outs_t)
                    + tangents_of(scr, t_scr, scr_t), origin=f"jvp of pallas_call {name}")
        return []

    scalar = ShapedArray((), np.int32)
    avals = ([scalar] * n_g + in_avals + [in_avals[k] for k in t_in] + out_avals
             + [out_avals[k] for k in t_out] + scr_avals + [scr_avals[k] for k in t_scr])
    new_jaxpr = staging.trace_to_jaxpr(kernel, avals, origin=f"jvp of pallas_call {name}")
    aliases = list(input_output_aliases)
    for i_in, i_out in input_output_aliases:
        if i_in in t_in and i_out in t_out:
            aliases.append((n_in + t_in.index(i_in), n_out + t_out.index(i_out)))
    outs = pallas_call_p.bind(
        *primals, *(ad.instantiate(tangents[k]) for k in t_in), jaxpr=new_jaxpr, grid=grid,
        in_mappings=tuple(in_mappings) + tuple(in_mappings[k] for k in t_in),
        out_mappings=tuple(out_mappings) + tuple(out_mappings[k] for k in t_out),
        scratch_avals=tuple(scratch_avals) + tuple(scratch_avals[k] for k in t_scr),
        input_output_aliases=tuple(sorted(aliases)), name=name, interpret=interpret)
    out_t = [ad.Zero.from_primal_value(o) for o in outs[:n_out]]
    for k, t in zip(t_out, outs[n_out:]):
        out_t[k] = t
    return outs[:n_out], out_t


ad.primitive_jvps[pallas_call_p] = _jvp_rule
