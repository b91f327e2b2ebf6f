"""ragged_all_to_all: all_to_all of ragged slices along the leading axis.

Every example sends `operand[input_offsets[c]:input_offsets[c] + send_sizes[c]]` to example
`c // (K / axis_size)` (K = len(input_offsets)), which writes it into its `output` at
`output_offsets[c]` (an offset in the receiver's output, chosen by the sender).

Rules: abstract eval with JAX's checks; under `vmap(axis_name=...)` the exchange is computed
from every example's arguments (JAX has no such rule); vmap over another axis folds the batch
into the leading axis (as JAX); JVP and transpose as JAX (linear in operand and output).
Lowering: `stablehlo.custom_call @ragged_all_to_all` as JAX emits it. XLA:CPU has no
ragged-all-to-all (jaxlib 0.10.2: "HLO opcode `ragged-all-to-all` is not supported by XLA:CPU
ThunkEmitter"), so on CPU it lowers to all_gather of the arguments plus a local gather.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.batching import not_mapped
from fluxion._src.compiler import lowering
from fluxion._src.lax import parallel

__all__ = ["ragged_all_to_all", "ragged_all_to_all_p"]

_INDEX_ARGS = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")


def _abstract_eval(operand, output, *index_args, axis_name, axis_index_groups):
    for name, aval in zip(_INDEX_ARGS, index_args):
        if not dtypes.issubdtype(aval.dtype, np.integer):
            raise ValueError(f"ragged_all_to_all {name} must be integer type.")
    for name, aval in zip(_INDEX_ARGS, index_args):
        if len(aval.shape) != 1 or aval.shape[0] < 1:
            raise ValueError(f"ragged_all_to_all {name} must be rank 1 with positive dimension "
                             f"size, but got shape {aval.shape}")
    # JAX leaves these to XLA; fluxion's vmap rule needs them, so they are checked here.
    if len({aval.shape[0] for aval in index_args}) != 1:
        raise ValueError("ragged_all_to_all input_offsets, send_sizes, output_offsets and "
                         "recv_sizes must have the same length, got shapes "
                         f"{[aval.shape for aval in index_args]}")
    if operand.dtype != output.dtype or operand.shape[1:] != output.shape[1:]:
        raise ValueError(f"ragged_all_to_all operand and output must have the same dtype and "
                         f"the same shape after the leading axis, got {operand.str_short()} and "
                         f"{output.str_short()}")
    parallel._total_size(axis_name)  # NameError for an unbound axis name
    return output.update(weak_type=False)


def _impl(*args, **params):
    raise RuntimeError("ragged_all_to_all must be used within a mapped context like vmap or "
                       "shard_map.")


ragged_all_to_all_p = core.Primitive("ragged_all_to_all")
ragged_all_to_all_p.def_impl(_impl)
ragged_all_to_all_p.def_abstract_eval(_abstract_eval)


def _single_name(axis_name, what):
    if len(axis_name) != 1:
        raise NotImplementedError(f"ragged_all_to_all {what} over several axis names "
                                  f"{axis_name} is not supported")
    return axis_name[0]


def _no_groups(axis_index_groups):
    if axis_index_groups is not None:
        raise NotImplementedError("ragged_all_to_all with axis_index_groups is not supported")


def _receive(operands, output, input_offsets, send_sizes, output_offsets, me):
    """What example `me` holds after the exchange.

    `operands` (n, N, ...), `input_offsets`, `send_sizes`, `output_offsets` (n, K): every
    example's arguments; `output` (M, ...): the receiver's. Row r of the result comes from the
    chunk whose destination range [output_offset, output_offset + send_size) holds r (on
    overlapping chunks, which the semantics leave undefined, the highest source row wins).
    """
    import fluxion.numpy as jnp
    from fluxion._src.lax import structural
    operands, output = jnp.asarray(operands), jnp.asarray(output)
    n, N = operands.shape[:2]
    M = output.shape[0]
    per_dest = input_offsets.shape[1] // n

    def to_me(a):  # (n * per_dest,): the chunks each example sends to `me`, sender-major
        a = jnp.asarray(a, np.int32)
        return structural.dynamic_slice_in_dim(a, me * per_dest, per_dest, 1).reshape(-1)

    src, size, dst = to_me(input_offsets), to_me(send_sizes), to_me(output_offsets)
    sender = jnp.asarray(np.repeat(np.arange(n, dtype=np.int32), per_dest)[:, None])
    rows = jnp.arange(M, dtype=np.int32)[None, :]
    hit = (rows >= dst[:, None]) & (rows < (dst + size)[:, None])
    src_row = sender * N + src[:, None] + (rows - dst[:, None])
    pick = jnp.max(jnp.where(hit, src_row, -1), axis=0)
    flat = operands.reshape((n * N,) + operands.shape[2:])
    got = flat[jnp.clip(pick, 0, max(n * N - 1, 0))]
    keep = (pick >= 0).reshape((M,) + (1,) * (output.ndim - 1))
    return jnp.where(keep, got, output)


# ---------------------------------------------------------------------------------------------
# vmap

def _collective_rule(trace, vals, dims, *, axis_name, axis_index_groups):
    import fluxion
    _single_name(axis_name, "under vmap")
    _no_groups(axis_index_groups)
    n = trace.axis_size
    avals = [core.get_aval(v) for v in vals]
    _abstract_eval(*[a if d is not_mapped else
                     a.update(shape=a.shape[:d] + a.shape[d + 1:], weak_type=False)
                     for a, d in zip(avals, dims)],
                   axis_name=axis_name, axis_index_groups=axis_index_groups)
    operand, output, *index_args = [batching.bdim_at_front(v, d, n) for v, d in zip(vals, dims)]
    K = index_args[0].shape[1]
    if K % n:
        raise ValueError(f"ragged_all_to_all: the offsets and sizes have length {K}, which is not "
                         f"divisible by the size {n} of axis {axis_name[0]!r}")
    io, ss, oo, _ = index_args
    out = fluxion.vmap(lambda out_i, me: _receive(operand, out_i, io, ss, oo, me))(
        output, np.arange(n, dtype=np.int32))
    return out, 0


def _batcher(vals, dims, *, axis_name, axis_index_groups):
    # vmap over an axis the collective does not name: fold the batch into the leading axis of
    # the data, and shift each example's offsets to its block.
    import fluxion.numpy as jnp
    _no_groups(axis_index_groups)
    size = next(core.get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped)
    operand, output = (batching.bdim_at_front(v, d, size) for v, d in zip(vals[:2], dims[:2]))
    N, M = operand.shape[1], output.shape[1]
    io, ss, oo, rs = (batching.matchaxis(v, d, 1, size) for v, d in zip(vals[2:], dims[2:]))
    io = io + (jnp.arange(size, dtype=io.dtype) * N)[None, :]
    oo = oo + (jnp.arange(size, dtype=oo.dtype) * M)[None, :]
    merged = [a.reshape((-1,) + a.shape[2:]) for a in (operand, output, io, ss, oo, rs)]
    out = ragged_all_to_all_p.bind(*merged, axis_name=axis_name,
                                   axis_index_groups=axis_index_groups)
    return out.reshape((size, M) + out.shape[1:]), 0


batching.collective_rules[ragged_all_to_all_p] = _collective_rule
batching.primitive_batchers[ragged_all_to_all_p] = _batcher


# ---------------------------------------------------------------------------------------------
# Differentiation: linear in (operand, output) together; the offsets and sizes are not
# differentiated.

def _jvp(primals, tangents, **params):
    operand, output, *index_args = primals
    operand_dot, output_dot = tangents[:2]
    out = ragged_all_to_all_p.bind(operand, output, *index_args, **params)
    if type(operand_dot) is ad.Zero and type(output_dot) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    out_dot = ragged_all_to_all_p.bind(ad.instantiate(operand_dot), ad.instantiate(output_dot),
                                       *index_args, **params)
    return out, out_dot


def _transpose(ct, operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
               axis_name, axis_index_groups):
    import fluxion.numpy as jnp
    if type(ct) is ad.Zero:
        return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None,
                ad.Zero(output.aval) if ad.is_undefined_primal(output) else None] + [None] * 4
    name = _single_name(axis_name, "transpose")
    # Send every received chunk back to where it came from: the local offsets of the received
    # chunks, and the senders' input offsets, come from all_to_all of the offsets.
    recv_at = parallel.all_to_all(output_offsets, name, 0, 0, tiled=True)
    sent_from = parallel.all_to_all(input_offsets, name, 0, 0, tiled=True)
    operand_ct = None
    if ad.is_undefined_primal(operand):
        operand_ct = ragged_all_to_all_p.bind(
            ct, ad.zeros_like_aval(operand.aval), recv_at, recv_sizes, sent_from, send_sizes,
            axis_name=axis_name, axis_index_groups=axis_index_groups)
    output_ct = None
    if ad.is_undefined_primal(output):
        # Rows overwritten by received data do not depend on `output`.
        rows = jnp.arange(ct.shape[0], dtype=np.int32)[:, None]
        start = jnp.asarray(recv_at, np.int32)[None, :]
        stop = start + jnp.asarray(recv_sizes, np.int32)[None, :]
        covered = jnp.any((rows >= start) & (rows < stop), axis=1)
        covered = covered.reshape((ct.shape[0],) + (1,) * (ct.ndim - 1))
        output_ct = jnp.where(covered, jnp.zeros((), ct.dtype), ct)
    return [operand_ct, output_ct] + [None] * 4


ad.primitive_jvps[ragged_all_to_all_p] = _jvp
ad.primitive_transposes[ragged_all_to_all_p] = _transpose


# ---------------------------------------------------------------------------------------------
# Lowering (under pmap / shard_map)

def _custom_call_lowering(ctx, operand, output, *index_args, axis_name, axis_index_groups):
    from fluxion._src.lax import parallel_lowering as pl
    _no_groups(axis_index_groups)
    groups = pl._groups(axis_name)
    config = {"replica_groups": pl._groups_attr(groups)}
    if getattr(pl._state, "partitions", False):
        config["channel_id"] = "1 : i64"  # JAX's COLLECTIVE_CHANNEL_ID
    return ctx.custom_call("ragged_all_to_all", [operand, output, *index_args], [output.aval],
                           backend_config=config)[0]


def _cpu_fallback(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
                  axis_name, axis_index_groups):
    _no_groups(axis_index_groups)
    name = _single_name(axis_name, "on CPU")
    n = batching.axis_size(name)
    if input_offsets.shape[0] % n:
        raise ValueError(f"ragged_all_to_all: the offsets and sizes have length "
                         f"{input_offsets.shape[0]}, which is not divisible by the size {n} of "
                         f"axis {name!r}")
    every = [parallel.all_gather(a, name) for a in (operand, input_offsets, send_sizes,
                                                    output_offsets)]
    return _receive(every[0], output, *every[1:], parallel.axis_index(name))


lowering.register_lowering(ragged_all_to_all_p, _custom_call_lowering)
lowering.register_lowering(ragged_all_to_all_p,
                           lowering.lower_fun(_cpu_fallback, multiple_results=False),
                           platform="cpu")


def ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
                      axis_name, axis_index_groups=None):
    """Ragged all_to_all along the leading axis.

    Parameters
    ----------
    operand : array (N, ...)
        Concatenated ragged slices to send.
    output : array (M, ...)
        What the result holds where nothing is received.
    input_offsets, send_sizes : int arrays (K,)
        Slice c of `operand` starts at input_offsets[c], has send_sizes[c] rows, and goes to
        example c // (K / axis_size).
    output_offsets : int array (K,)
        Where slice c is written in its receiver's result.
    recv_sizes : int array (K,)
        Rows received per slice (must agree with the senders' send_sizes).
    axis_name : hashable
        The mapped axis.

    Returns
    -------
    Array like `output`, with the received slices written in.
    """
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if axis_index_groups is not None:
        axis_index_groups = tuple(tuple(int(i) for i in g) for g in axis_index_groups)
    return ragged_all_to_all_p.bind(operand, output, input_offsets, send_sizes, output_offsets,
                                    recv_sizes, axis_name=names,
                                    axis_index_groups=axis_index_groups)
