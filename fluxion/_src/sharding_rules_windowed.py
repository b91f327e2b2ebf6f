"""Sharding rules on Explicit mesh axes of the windowed primitives: `conv_general_dilated`
(JAX's `_conv_general_dilated_sharding_rule`) and the window reductions with their
gradients' `select_and_*` primitives (JAX's `reduce_window_sharding_rule`)."""
from __future__ import annotations

from fluxion._src.sharding_rules import _varying_shape_rule
from fluxion._src.sharding_types import (_TRANSPOSED, Deferred, ShardingTypeError,
                                         _backward_aware, _entry, _fmt, rules, type_string)


def _conv_rule(ctx, ins, in_avals, out_avals, params):
    """JAX's conv_general_dilated rule: with an unsharded kernel and the input's feature
    dimension unsharded, the output keeps the input's batch and spatial shardings (a
    spatial one only where the output's size stays a multiple of its axes); otherwise the
    output sharding must be given (`out_sharding`). JAX copies the input's spec position by
    position; here dimensions are matched by role (the same where the layouts agree)."""
    lhs, rhs = ins
    lhs_dims, rhs_dims, out_dims = params["dimension_numbers"]
    lhs_shape, out_shape = in_avals[0].shape, out_avals[0].shape
    if any(rhs) or lhs[lhs_dims[1]]:
        if params.get(_TRANSPOSED):
            # A kernel's cotangent: a contraction over the (sharded) batch, as dot_general's.
            out = [()] * len(out_shape)
            out[out_dims[0]], out[out_dims[1]] = lhs[lhs_dims[0]], rhs[rhs_dims[0]]
            used = [a for e in out for a in e]
            if len(used) == len(set(used)):
                return [tuple(out)]
        return [Deferred("Please specify the output sharding via `out_sharding` parameter of "
                         "`conv_general_dilated`")]
    out = [()] * len(out_shape)
    for i, o in zip([lhs_dims[0], *lhs_dims[2:]], [out_dims[0], *out_dims[2:]]):
        e = lhs[i]
        if e and lhs_shape[i] != out_shape[o] and out_shape[o] % ctx.size(e):
            return [Deferred(
                f"conv_general_dilated on sharded dims where out dim ({out_shape[o]}) is not "
                f"divisible by mesh axes ({ctx.size(e)}) with spec ({_entry(e)}) is not "
                f"implemented. Got input type={type_string(in_avals[0], lhs)} and output "
                f"shape={tuple(out_shape)}")]
        out[o] = e
    return [tuple(out)]


def _operand_at_rule(i):
    def rule(ctx, ins, in_avals, out_avals, params):
        return [ins[i]] * len(out_avals)
    return rule


def _select_and_gather_add_rule(ctx, ins, in_avals, out_avals, params):
    # JAX requires equal shardings; an unsharded tangent or operand dimension (fluxion's
    # broadcasts make some) gives way to the other's.
    tangents, operand = ins
    if any(t and o and t != o for t, o in zip(tangents, operand)):
        raise ShardingTypeError("select_and_gather_add tangents and operand shardings must "
                                f"match, got {_fmt(tangents)} and {_fmt(operand)}.")
    merged = tuple(o or t for t, o in zip(tangents, operand))
    return _varying_shape_rule("reduce_window")(ctx, [merged], in_avals[1:], out_avals,
                                                params)


def register():
    """Put the rules of the windowed primitives in sharding_types' registry."""
    from fluxion._src.lax import convolution, jax_names_ops, windowed
    for p in (windowed.reduce_window_p, windowed.reduce_window_sum_p,
              windowed.reduce_window_max_p, windowed.reduce_window_min_p):
        rules[p] = _varying_shape_rule("reduce_window")
    rules[windowed.select_and_gather_add_p] = _select_and_gather_add_rule
    rules[windowed.select_and_scatter_add_p] = _operand_at_rule(1)
    rules[jax_names_ops.select_and_scatter_p] = _operand_at_rule(0)
    rules[convolution.conv_general_dilated_p] = _conv_rule
    _backward_aware.add(convolution.conv_general_dilated_p)
