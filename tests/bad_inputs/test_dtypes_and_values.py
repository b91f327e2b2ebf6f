"""Bad input catalogue: dtypes, indices out of bounds, division by zero and overflow, invalid
custom lowerings."""
import numpy as onp

from catalogue import Case, family_test


def np_(m):
    return m.numpy


def _bad_lowering(m):
    """A custom primitive whose lowering emits an op XLA rejects: a Python error, not a crash."""
    if m.__name__ != "fluxion":
        raise TypeError("fluxion only")
    from fluxion.core import ShapedArray
    from fluxion.extend.core import Primitive
    from fluxion.interpreters import mlir
    p = Primitive("bad_lowering")
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(p, lambda ctx, x: ctx.op1("stablehlo.no_such_op", [x],
                                                      ctx.avals_out[0]))
    return m.jit(p.bind)(np_(m).ones(3))


I32 = lambda m: np_(m).arange(4, dtype=np_(m).int32)  # noqa: E731
CASES = [
    # dtype names and kinds
    Case("dtype_string", lambda m: np_(m).zeros(3, dtype="float17")),
    Case("dtype_object", lambda m: np_(m).zeros(3, dtype=object)),
    Case("astype_string", lambda m: np_(m).ones(3).astype("nonsense")),
    Case("array_of_strings", lambda m: np_(m).array(["a", "b"])),
    Case("array_ragged", lambda m: np_(m).array([[1, 2], [3]])),
    Case("bitwise_float", lambda m: np_(m).bitwise_and(np_(m).ones(3), np_(m).ones(3))),
    Case("invert_float", lambda m: ~np_(m).ones(3)),
    Case("shift_float", lambda m: np_(m).left_shift(np_(m).ones(3), 1)),
    Case("lax_add_mixed", lambda m: m.lax.add(np_(m).ones(3, np_(m).float32), np_(m).ones(3, np_(m).int32))),
    Case("lax_sin_int", lambda m: m.lax.sin(I32(m))),
    Case("lax_bitwise_float", lambda m: m.lax.bitwise_and(np_(m).ones(2), np_(m).ones(2))),
    Case("lax_convert_bad", lambda m: m.lax.convert_element_type(np_(m).ones(2), "float17")),
    Case("lax_dot_mixed", lambda m: m.lax.dot(np_(m).ones((2, 2)), np_(m).ones((2, 2), np_(m).int32)),
         raises=None, compare=True),
    Case("lax_select_pred_float", lambda m: m.lax.select(np_(m).ones(2), np_(m).ones(2), np_(m).ones(2))),
    Case("iota_float_dimension", lambda m: m.lax.iota(np_(m).float32, 2.5)),
    Case("float0_add", lambda m: m.lax.add(onp.zeros(2, m.dtypes.float0), onp.zeros(2, m.dtypes.float0))),
    Case("random_key_float", lambda m: m.random.normal(np_(m).ones(2), (3,))),
    # JAX hands XLA the negative shape (MLIRError); fluxion refuses it.
    Case("random_shape_negative", lambda m: m.random.normal(m.random.PRNGKey(0), (-1,)),
         raises=TypeError, match="nonnegative"),
    Case("random_bad_dtype", lambda m: m.random.normal(m.random.PRNGKey(0), (2,), np_(m).int32)),
    Case("python_int_too_big", lambda m: np_(m).ones(3, np_(m).int32) + 2**40),
    Case("uint_negative_array", lambda m: np_(m).array(-1, np_(m).uint32)),
    # indices
    # JAX clamps out-of-bound integer indices rather than raising, static ones too.
    Case("index_static_oob", lambda m: np_(m).arange(3.0)[5], raises=None, compare=True),
    Case("index_static_oob_negative", lambda m: np_(m).arange(3.0)[-4], raises=None, compare=True),
    Case("index_static_oob_beyond_int", lambda m: np_(m).arange(3.0)[2**70], match="too large"),
    Case("index_too_many", lambda m: np_(m).ones(3)[0, 0]),
    Case("index_float", lambda m: np_(m).ones(3)[1.5]),
    Case("index_string", lambda m: np_(m).ones(3)["a"]),
    Case("index_float_array", lambda m: np_(m).ones(3)[np_(m).ones(2)]),
    Case("index_two_ellipses", lambda m: np_(m).ones((2, 2))[..., ...]),
    Case("index_bool_shape", lambda m: np_(m).ones(3)[onp.array([True, False])]),
    Case("at_set_shape", lambda m: np_(m).ones(3).at[0:2].set(np_(m).ones(3))),
    Case("at_bad_mode", lambda m: np_(m).ones(3).at[5].get(mode="wraparound")),
    Case("take_bad_mode", lambda m: np_(m).take(np_(m).ones(3), 5, mode="nonsense")),
    # dynamic out-of-bound indices behave as in JAX (no error)
    Case("dynamic_index_clamps", lambda m: m.jit(lambda i: np_(m).arange(3.0)[i])(7), raises=None, compare=True),
    Case("dynamic_negative_index", lambda m: m.jit(lambda i: np_(m).arange(3.0)[i])(-5), raises=None, compare=True),
    Case("gather_fill", lambda m: np_(m).arange(3.0).at[np_(m).array([0, 5])].get(mode="fill", fill_value=-1.0), raises=None, compare=True),
    Case("gather_clip", lambda m: np_(m).arange(3.0).at[np_(m).array([-9, 5])].get(mode="clip"), raises=None, compare=True),
    Case("scatter_drop", lambda m: np_(m).zeros(3).at[np_(m).array([1, 7])].set(5.0, mode="drop"), raises=None, compare=True),
    Case("scatter_oob_default", lambda m: np_(m).zeros(3).at[np_(m).array([1, 7])].add(5.0), raises=None, compare=True),
    Case("dynamic_slice_oob", lambda m: m.lax.dynamic_slice(np_(m).arange(5.0), (4,), (3,)), raises=None, compare=True),
    Case("dynamic_update_slice_oob", lambda m: m.lax.dynamic_update_slice(np_(m).zeros(5), np_(m).ones(2), (9,)), raises=None, compare=True),
    # division by zero and overflow: never a crash (XLA's constant folder once died of SIGFPE)
    Case("int_div_zero_constant", lambda m: m.jit(lambda: np_(m).int32(7) // np_(m).int32(0))(), raises=None, compare=True),
    Case("int_rem_zero_constant", lambda m: m.jit(lambda: np_(m).int32(7) % np_(m).int32(0))(), raises=None, compare=True),
    Case("int_div_zero_runtime", lambda m: I32(m) // np_(m).zeros(4, np_(m).int32), raises=None, compare=True),
    Case("int_min_div_minus_one", lambda m: m.jit(lambda x: x // np_(m).int32(-1))(np_(m).array([-2**31], np_(m).int32)), raises=None, compare=True),
    # JAX dies of SIGFPE here (XLA's constant folder divides by zero); fluxion gives XLA's -1.
    Case("lax_div_zero_constant", lambda m: m.jit(lambda: m.lax.div(np_(m).int32(3), np_(m).int32(0)))(), raises=None, jax_ok=False),
    Case("lax_rem_zero_runtime", lambda m: m.lax.rem(I32(m), np_(m).zeros(4, np_(m).int32)), raises=None, compare=True),
    Case("float_div_zero", lambda m: np_(m).ones(3) / 0.0, raises=None, compare=True),
    Case("float_zero_div_zero", lambda m: np_(m).zeros(3) / 0.0, raises=None, compare=True),
    Case("int_overflow_add", lambda m: np_(m).array([2**31 - 1], np_(m).int32) + np_(m).int32(1), raises=None, compare=True),
    Case("int_overflow_mul", lambda m: np_(m).array([2**20], np_(m).int32) * np_(m).int32(2**12), raises=None, compare=True),
    Case("float_overflow_exp", lambda m: np_(m).exp(np_(m).array([1000.0])), raises=None, compare=True),
    Case("int_pow_negative", lambda m: m.lax.integer_pow(I32(m), -1)),
    Case("log_negative", lambda m: np_(m).log(np_(m).array([-1.0])), raises=None, compare=True),
    # custom lowerings that emit invalid StableHLO
    Case("invalid_custom_lowering", _bad_lowering, raises=Exception, jax_ok=False,
         match="no_such_op|failed"),
]

test_case = family_test(CASES, __file__)
