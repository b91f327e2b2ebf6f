"""Bad input catalogue: wrong shapes and ranks, per family of functions."""
from catalogue import Case, family_test


def np_(m):
    return m.numpy


CASES = [
    # elementwise
    Case("add_mismatched", lambda m: np_(m).ones(3) + np_(m).ones(4), match=r"\(3,\).*\(4,\)|3.*4"),
    Case("multiply_mismatched_2d", lambda m: np_(m).multiply(np_(m).ones((2, 3)), np_(m).ones((3, 2)))),
    Case("where_mismatched", lambda m: np_(m).where(np_(m).ones(2) > 0, np_(m).ones(3), np_(m).ones(4))),
    Case("lax_add_ranks", lambda m: m.lax.add(np_(m).ones((2, 3)), np_(m).ones(3))),
    Case("lax_add_shapes", lambda m: m.lax.add(np_(m).ones((2, 3)), np_(m).ones((3, 2)))),
    Case("lax_select_shapes", lambda m: m.lax.select(np_(m).ones(2, bool), np_(m).ones(3), np_(m).ones(3))),
    Case("clamp_shapes", lambda m: m.lax.clamp(np_(m).zeros(2), np_(m).ones(3), np_(m).ones(3))),
    # products
    Case("matmul_inner", lambda m: np_(m).ones((2, 3)) @ np_(m).ones((4, 5))),
    Case("matmul_scalar", lambda m: np_(m).matmul(np_(m).ones(3), 2.0)),
    Case("dot_inner", lambda m: np_(m).dot(np_(m).ones(3), np_(m).ones(4))),
    Case("dot_general_contract", lambda m: m.lax.dot_general(np_(m).ones((2, 3)), np_(m).ones((4, 2)), (((1,), (0,)), ((), ())))),
    Case("dot_general_batch", lambda m: m.lax.dot_general(np_(m).ones((2, 3, 4)), np_(m).ones((3, 4, 5)), (((2,), (1,)), ((0,), (0,))))),
    Case("einsum_operands", lambda m: np_(m).einsum("ij,jk->ik", np_(m).ones((2, 3)))),
    Case("einsum_sizes", lambda m: np_(m).einsum("ij,jk->ik", np_(m).ones((2, 3)), np_(m).ones((4, 2)))),
    Case("tensordot_axes", lambda m: np_(m).tensordot(np_(m).ones((2, 3)), np_(m).ones((4, 5)), axes=1)),
    Case("inner_sizes", lambda m: np_(m).inner(np_(m).ones(3), np_(m).ones(2))),
    # structure
    Case("reshape_size", lambda m: np_(m).ones(6).reshape(4, 2)),
    Case("reshape_two_minus_one", lambda m: np_(m).ones(6).reshape(-1, -1)),
    # JAX fails later, at lowering, with a ValueError; fluxion says so while tracing.
    Case("lax_reshape_size", lambda m: m.lax.reshape(np_(m).ones(6), (5,)), raises=TypeError,
         match="total size must be unchanged"),
    Case("concatenate_ranks", lambda m: np_(m).concatenate([np_(m).ones((2, 3)), np_(m).ones(3)])),
    Case("concatenate_sizes", lambda m: np_(m).concatenate([np_(m).ones((2, 3)), np_(m).ones((2, 4))], axis=0)),
    Case("concatenate_empty_list", lambda m: np_(m).concatenate([])),
    Case("stack_shapes", lambda m: np_(m).stack([np_(m).ones(2), np_(m).ones(3)])),
    Case("broadcast_to_smaller", lambda m: np_(m).broadcast_to(np_(m).ones((2, 3)), (3,))),
    Case("broadcast_to_incompatible", lambda m: np_(m).broadcast_to(np_(m).ones(3), (2, 4))),
    Case("broadcast_shapes", lambda m: np_(m).broadcast_shapes((2, 3), (4,))),
    Case("transpose_perm", lambda m: np_(m).transpose(np_(m).ones((2, 3)), (0,))),
    Case("transpose_perm_repeat", lambda m: np_(m).transpose(np_(m).ones((2, 3)), (0, 0))),
    Case("squeeze_not_one", lambda m: np_(m).squeeze(np_(m).ones((2, 3)), axis=0)),
    Case("split_unequal", lambda m: np_(m).split(np_(m).ones(5), 2)),
    # JAX hands XLA a negative shape (MLIRError); fluxion rejects it first.
    Case("tile_negative", lambda m: np_(m).tile(np_(m).ones(2), -1), raises=TypeError,
         match="nonnegative"),
    Case("pad_widths", lambda m: np_(m).pad(np_(m).ones((2, 3)), ((1, 1), (1, 1), (1, 1)))),
    Case("lax_pad_config", lambda m: m.lax.pad(np_(m).ones(3), 0.0, [(1, 1, 0), (1, 1, 0)])),
    Case("lax_slice_bounds", lambda m: m.lax.slice(np_(m).ones(3), (0,), (5,))),
    Case("lax_dynamic_slice_size", lambda m: m.lax.dynamic_slice(np_(m).ones(3), (0,), (5,))),
    Case("lax_dynamic_update_slice_rank", lambda m: m.lax.dynamic_update_slice(np_(m).ones(3), np_(m).ones((1, 1)), (0,))),
    Case("lax_broadcast_in_dim_dims", lambda m: m.lax.broadcast_in_dim(np_(m).ones(3), (3, 4), (1,))),
    Case("take_along_axis_ranks", lambda m: np_(m).take_along_axis(np_(m).ones((2, 3)), np_(m).zeros(3, int), axis=1)),
    # convolution and windows
    Case("conv_channels", lambda m: m.lax.conv(np_(m).ones((1, 3, 8, 8)), np_(m).ones((4, 2, 3, 3)), (1, 1), "SAME")),
    Case("conv_rank", lambda m: m.lax.conv(np_(m).ones((1, 3, 8)), np_(m).ones((4, 3, 3, 3)), (1, 1), "SAME")),
    Case("conv_strides_len", lambda m: m.lax.conv(np_(m).ones((1, 3, 8, 8)), np_(m).ones((4, 3, 3, 3)), (1,), "SAME")),
    Case("conv_padding_name", lambda m: m.lax.conv(np_(m).ones((1, 3, 8, 8)), np_(m).ones((4, 3, 3, 3)), (1, 1), "HALF")),
    Case("reduce_window_dims", lambda m: m.lax.reduce_window(np_(m).ones((4, 4)), 0.0, m.lax.add, (2,), (1, 1), "VALID")),
    # control flow
    Case("scan_xs_lengths", lambda m: m.lax.scan(lambda c, x: (c, x), 0.0, (np_(m).ones(3), np_(m).ones(4)))),
    Case("scan_length_mismatch", lambda m: m.lax.scan(lambda c, x: (c, x), 0.0, np_(m).ones(3), length=4)),
    Case("fori_loop_carry_shape", lambda m: m.lax.fori_loop(0, 3, lambda i, x: np_(m).ones(2), 0.0)),
    Case("while_loop_carry_shape", lambda m: m.lax.while_loop(lambda x: False, lambda x: np_(m).ones(2), 0.0)),
    Case("map_xs_lengths", lambda m: m.lax.map(lambda x: x[0], (np_(m).ones(3), np_(m).ones(2)))),
    # reductions
    Case("argmax_empty", lambda m: np_(m).argmax(np_(m).ones(0))),
    Case("max_empty", lambda m: np_(m).max(np_(m).ones(0))),
]

test_case = family_test(CASES, __file__)
