"""Bad input catalogue: axes out of range, negative and huge dimensions."""
from catalogue import Case, family_test


def np_(m):
    return m.numpy


X = lambda m: np_(m).ones((2, 3))  # noqa: E731
CASES = [
    Case("sum_axis", lambda m: np_(m).sum(X(m), axis=2)),
    Case("sum_axis_negative", lambda m: np_(m).sum(X(m), axis=-3)),
    Case("sum_axis_repeated", lambda m: np_(m).sum(X(m), axis=(0, 0))),
    Case("mean_axis", lambda m: np_(m).mean(X(m), axis=5)),
    Case("argmax_axis", lambda m: np_(m).argmax(X(m), axis=2)),
    Case("cumsum_axis", lambda m: np_(m).cumsum(X(m), axis=3)),
    Case("sort_axis", lambda m: np_(m).sort(X(m), axis=2)),
    Case("argsort_axis", lambda m: np_(m).argsort(X(m), axis=-3)),
    Case("concatenate_axis", lambda m: np_(m).concatenate([X(m), X(m)], axis=2)),
    Case("stack_axis", lambda m: np_(m).stack([X(m), X(m)], axis=4)),
    Case("expand_dims_axis", lambda m: np_(m).expand_dims(X(m), 4)),
    Case("squeeze_axis", lambda m: np_(m).squeeze(X(m), axis=2)),
    Case("moveaxis_source", lambda m: np_(m).moveaxis(X(m), 2, 0)),
    Case("swapaxes_axis", lambda m: np_(m).swapaxes(X(m), 0, 2)),
    Case("flip_axis", lambda m: np_(m).flip(X(m), axis=2)),
    Case("roll_axis", lambda m: np_(m).roll(X(m), 1, axis=2)),
    Case("take_axis", lambda m: np_(m).take(X(m), np_(m).zeros(1, int), axis=2)),
    Case("split_axis", lambda m: np_(m).split(X(m), 2, axis=2)),
    Case("repeat_axis", lambda m: np_(m).repeat(X(m), 2, axis=2)),
    Case("diagonal_axes", lambda m: np_(m).diagonal(X(m), axis1=0, axis2=0)),
    Case("trace_axes", lambda m: np_(m).trace(X(m), axis1=0, axis2=2)),
    Case("softmax_axis", lambda m: m.nn.softmax(X(m), axis=2)),
    Case("logsumexp_axis", lambda m: m.nn.logsumexp(X(m), axis=2)),
    Case("lax_reduce_sum_axes", lambda m: m.lax.reduce_sum(X(m), (2,))),
    Case("lax_rev_dims", lambda m: m.lax.rev(X(m), (2,))),
    Case("lax_cumsum_axis", lambda m: m.lax.cumsum(X(m), axis=2)),
    Case("lax_argmax_axis", lambda m: m.lax.argmax(X(m), 2, np_(m).int32)),
    Case("lax_sort_dimension", lambda m: m.lax.sort(X(m), dimension=2)),
    Case("lax_concatenate_dimension", lambda m: m.lax.concatenate([X(m), X(m)], 2)),
    Case("lax_squeeze_dims", lambda m: m.lax.squeeze(X(m), (0,))),
    Case("lax_expand_dims", lambda m: m.lax.expand_dims(X(m), (4,))),
    Case("lax_transpose_perm", lambda m: m.lax.transpose(X(m), (1, 2))),
    Case("zeros_negative", lambda m: np_(m).zeros((-1, 2))),
    Case("ones_negative", lambda m: np_(m).ones(-3)),
    Case("full_negative", lambda m: np_(m).full((2, -2), 1.0)),
    Case("reshape_negative", lambda m: np_(m).ones(4).reshape(-2, -2)),
    Case("broadcast_to_negative", lambda m: np_(m).broadcast_to(np_(m).ones(1), (-1,))),
    Case("eye_negative", lambda m: np_(m).eye(-1)),
    Case("iota_negative", lambda m: m.lax.iota(np_(m).int32, -1)),
    Case("shape_not_int", lambda m: np_(m).zeros((2.5, 2))),
    Case("shape_string", lambda m: np_(m).zeros("abc")),
    # Sizes past int64 abort the process inside XLA (in JAX too): fluxion refuses them first.
    Case("zeros_overflow", lambda m: np_(m).zeros((2**40, 2**40)), raises=ValueError,
         match="more than any array can hold", jax_ok=False),
    Case("broadcast_overflow", lambda m: np_(m).broadcast_to(np_(m).ones(1), (2**33, 2**33)),
         raises=ValueError, match="more than any array can hold", jax_ok=False),
    Case("jit_zeros_overflow", lambda m: m.jit(lambda: np_(m).zeros((2**62, 8)))(),
         raises=ValueError, match="more than any array can hold", jax_ok=False),
]

test_case = family_test(CASES, __file__)
