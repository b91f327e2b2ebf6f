"""jax.lax operations with unusual parameters (key sizes, dtypes that canonicalize, vmap of
rules that were missing, bad parameters), against JAX 0.10.2 and NumPy."""
import numpy as np
import pytest

import fluxion
from fluxion import lax
import jax
from jax import lax as jlax

KEY = np.array([1, 2, 3, 4], np.uint32)


# ---------------------------------------------------------------------------------------------
# rng_bit_generator

def test_rng_bit_generator_uint64_bits_canonicalize_without_x64():
    new_key, bits = lax.rng_bit_generator(KEY, (3,), np.uint64)
    want_key, want_bits = jlax.rng_bit_generator(KEY, (3,), np.uint64)
    assert bits.dtype == want_bits.dtype == np.uint32
    np.testing.assert_array_equal(bits, want_bits)
    np.testing.assert_array_equal(new_key, want_key)


@pytest.mark.parametrize("jit", [False, True])
def test_rng_bit_generator_vmap_matches_a_loop_over_keys(jit):
    keys = np.stack([KEY, KEY + 1, KEY * 3])
    alg = lax.RandomAlgorithm.RNG_THREE_FRY
    f = fluxion.vmap(lambda k: lax.rng_bit_generator(k, (2, 3), np.uint8, alg))
    new_keys, bits = (fluxion.jit(f) if jit else f)(keys)
    for i, k in enumerate(keys):
        want_key, want_bits = jlax.rng_bit_generator(k, (2, 3), np.uint8, jlax.RandomAlgorithm(1))
        np.testing.assert_array_equal(bits[i], want_bits)
        np.testing.assert_array_equal(new_keys[i], want_key)


@pytest.mark.parametrize("key,alg", [(np.array([1, 2], np.uint32), "RNG_DEFAULT"),
                                     (np.array([1, 2, 3], np.uint32), "RNG_PHILOX"),
                                     (np.arange(6, dtype=np.uint32), "RNG_THREE_FRY")])
def test_rng_bit_generator_bad_key_size_is_a_type_error(key, alg):
    with pytest.raises(TypeError, match="needs a key of"):
        lax.rng_bit_generator(key, (3,), algorithm=getattr(lax.RandomAlgorithm, alg))


# ---------------------------------------------------------------------------------------------
# composite

def test_composite_takes_numpy_and_python_operands_as_canonical_arrays():
    add = lax.composite(lambda a, b: a + b, "my.add")
    out = add(1.0, 2.0)
    want = jlax.composite(lambda a, b: a + b, "my.add")(1.0, 2.0)
    assert isinstance(out, fluxion.Array)
    assert (out.dtype, out.weak_type, float(out)) == (want.dtype, want.weak_type, float(want))
    first, ones = lax.composite(lambda a: (a, np.ones(2)), "my.pair")(np.arange(3.0))
    assert isinstance(first, fluxion.Array) and first.dtype == ones.dtype == np.float32
    np.testing.assert_array_equal(first, np.arange(3.0))


# ---------------------------------------------------------------------------------------------
# special functions and ragged_dot

def test_random_gamma_grad_at_zero_and_for_large_shape_in_float32():
    a = np.array([0.5, 1.0, 2.0, 100.0, 3.0, 0.3], np.float32)
    x = np.array([0.0, 0.0, 0.0, 100.0, 0.1, 2.0], np.float32)
    out = np.asarray(lax.random_gamma_grad(a, x))
    np.testing.assert_array_equal(out[:3], 0.0)
    # dx/da at (100, 100) is 1.00166832... (float64 JAX and mpmath agree)
    np.testing.assert_allclose(out, np.asarray(jlax.random_gamma_grad(a, x)), rtol=2e-6)
    np.testing.assert_allclose(out[3], 1.0016683237741726, rtol=5e-6)


def test_polygamma_has_no_gradient_in_its_order():
    with pytest.raises(ValueError, match="with respect to m"):
        fluxion.grad(lambda m: lax.polygamma(m, np.float32(2.5)))(np.float32(1.0))
    with pytest.raises(ValueError):
        jax.grad(lambda m: jlax.polygamma(m, np.float32(2.5)))(np.float32(1.0))
    got = fluxion.grad(lambda x: lax.polygamma(np.float32(1.0), x))(np.float32(2.5))
    want = jax.grad(lambda x: jlax.polygamma(np.float32(1.0), x))(np.float32(2.5))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_ragged_dot_refuses_float_group_sizes():
    lhs, rhs = np.ones((3, 2), np.float32), np.ones((2, 2, 2), np.float32)
    with pytest.raises(TypeError, match="integer group_sizes"):
        lax.ragged_dot(lhs, rhs, np.array([1.0, 2.0], np.float32))
    with pytest.raises(TypeError):
        jlax.ragged_dot(lhs, rhs, np.array([1.0, 2.0], np.float32))


# ---------------------------------------------------------------------------------------------
# convolution

@pytest.mark.parametrize("padding", ["SAME", "VALID", "SAME_LOWER"])
def test_conv_nonpositive_stride_is_a_value_error(padding):
    lhs, rhs = np.ones((1, 2, 5, 5), np.float32), np.ones((3, 2, 2, 2), np.float32)
    with pytest.raises(ValueError, match="window_strides"):
        lax.conv_general_dilated(lhs, rhs, (0, 1), padding)
    with pytest.raises(ValueError):
        jlax.conv_general_dilated(lhs, rhs, (0, 1), padding)


# ---------------------------------------------------------------------------------------------
# approx_max_k / approx_min_k

@pytest.mark.parametrize("name", ["approx_max_k", "approx_min_k"])
@pytest.mark.parametrize("k,recall,dim", [(3, 0.95, -1), (50, 0.5, 0), (1, 1.0, -1)])
def test_approx_k_without_aggregation_keeps_xlas_reduced_size(name, k, recall, dim):
    operand = np.random.RandomState(1).randn(2, 3000).astype(np.float32)
    operand = operand.T.copy() if dim == 0 else operand
    kw = dict(reduction_dimension=dim, recall_target=recall, aggregate_to_topk=False)
    values, idx = getattr(lax, name)(operand, k, **kw)
    want_values, want_idx = getattr(jlax, name)(operand, k, **kw)
    assert values.shape == want_values.shape and idx.shape == want_idx.shape
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(idx, want_idx)


@pytest.mark.parametrize("kw", [dict(recall_target=0.0), dict(recall_target=1.5),
                                dict(reduction_input_size_override=5)])
def test_approx_k_bad_recall_or_size_override_is_a_value_error(kw):
    with pytest.raises(ValueError):
        lax.approx_max_k(np.ones((2, 12), np.float32), 2, **kw)


# ---------------------------------------------------------------------------------------------
# cumulative reductions

@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"])
@pytest.mark.parametrize("axis,reverse", [(-1, False), (-1, True), (2, False)])
def test_cumulative_bad_axis_under_grad_is_the_primal_value_error(name, axis, reverse):
    f = getattr(lax, name)
    x = np.ones((2, 4), np.float32)
    with pytest.raises(ValueError, match=name):
        f(x, axis=axis, reverse=reverse)
    with pytest.raises(ValueError, match=name):
        fluxion.grad(lambda a: f(a, axis=axis, reverse=reverse).sum())(x)


@pytest.mark.parametrize("axis,reverse", [(0, False), (1, True)])
def test_cumlogsumexp_takes_complex_operands_as_jax(axis, reverse):
    rng = np.random.RandomState(3)
    z = (rng.randn(3, 7) * 3 + 1j * rng.randn(3, 7) * 4).astype(np.complex64)
    f = lambda a: lax.cumlogsumexp(a, axis=axis, reverse=reverse)  # noqa: E731
    want = jlax.cumlogsumexp(z, axis=axis, reverse=reverse)
    for got in (f(z), fluxion.jit(f)(z)):
        assert got.dtype == np.complex64
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    tangent = np.ones_like(z) * (1 + 2j)
    _, got_t = fluxion.jvp(f, (z,), (tangent,))
    _, want_t = jax.jvp(lambda a: jlax.cumlogsumexp(a, axis=axis, reverse=reverse),
                        (z,), (tangent,))
    np.testing.assert_allclose(got_t, want_t, rtol=2e-5, atol=2e-5)


def test_cumlogsumexp_single_complex_entry_is_on_the_principal_branch():
    z = np.array([0.5 - 4j], np.complex64)
    np.testing.assert_allclose(lax.cumlogsumexp(z), np.log(np.exp(z)), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# pad

@pytest.mark.parametrize("config", [((0, 0, -1), (0, 0, 0)), ((-2, -2, 0), (0, 0, 0)),
                                    ((0, 0, 0),)])
def test_pad_reports_a_bad_config_before_a_dtype_mismatch(config):
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError):
        lax.pad(x, np.int32(0), config)
    with pytest.raises(ValueError):
        jlax.pad(x, np.int32(0), config)


# ---------------------------------------------------------------------------------------------
# reduce / reduce_window computations

@pytest.mark.parametrize("module", [lax, jlax])
def test_reduction_computation_changing_dtype_is_a_value_error(module):
    x = np.ones((2, 3), np.float32)
    to_int = lambda p, q: (p + q).astype(np.int32)  # noqa: E731
    with pytest.raises(ValueError):
        module.reduce(x, np.float32(0), to_int, (1,))
    with pytest.raises(ValueError):
        module.reduce_window(x, np.float32(0), to_int, (1, 2), (1, 1), "VALID")


def test_random_gamma_grad_has_forward_mode_only_as_jax():
    a = np.array([0.5, 2.0, 30.0], np.float32)
    x = np.array([0.3, 1.0, 25.0], np.float32)
    ones = np.ones(3, np.float32)
    out, tangent = fluxion.jvp(lax.random_gamma_grad, (a, x), (ones, ones))
    want_out, want_tangent = jax.jvp(jlax.random_gamma_grad, (a, x), (ones, ones))
    np.testing.assert_allclose(out, want_out, rtol=1e-5)
    np.testing.assert_allclose(tangent, want_tangent, rtol=1e-4)
    with pytest.raises(ValueError, match="Reverse-mode"):
        fluxion.grad(lambda s: lax.random_gamma_grad(s, np.float32(1.0)))(np.float32(2.0))


@pytest.mark.parametrize("reverse", [False, True])
def test_complex_cumsum_and_cumprod_keep_their_own_lowering(reverse):
    """Only cumlogsumexp takes the complex prefix scan; cumsum/cumprod of complex operands
    are sums and products (against NumPy)."""
    x = (np.arange(1.0, 6.0) + 1j * np.arange(5.0)[::-1]).astype(np.complex64) / 3
    flip = (lambda a: a[::-1]) if reverse else (lambda a: a)
    np.testing.assert_allclose(lax.cumsum(x, reverse=reverse), flip(np.cumsum(flip(x))),
                               rtol=1e-6)
    np.testing.assert_allclose(lax.cumprod(x, reverse=reverse), flip(np.cumprod(flip(x))),
                               rtol=1e-5)
