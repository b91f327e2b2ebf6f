"""The newer jax.nn activations, logmeanexp, masked softmax and dot_product_attention."""
import jax
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion.test_util import check_grads

X = np.linspace(-3, 3, 13).astype(np.float32)
UNARY = ["identity", "tanh", "hard_sigmoid", "hard_silu", "hard_swish", "mish", "soft_sign",
         "squareplus", "sparse_plus", "sparse_sigmoid"]


@pytest.mark.parametrize("name", UNARY)
def test_activation_values_dtypes_and_jit(name):
    ours, theirs = getattr(fluxion.nn, name), getattr(jax.nn, name)
    got, want = ours(X), theirs(X)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(fluxion.jit(ours)(X), want, atol=1e-6)
    assert ours(2.0).weak_type == theirs(2.0).weak_type


@pytest.mark.parametrize("name", ["mish", "soft_sign", "squareplus", "hard_silu", "tanh"])
def test_activation_gradients(name, x64):
    f = getattr(fluxion.nn, name)
    check_grads(f, (np.array([-2.3, -0.4, 0.7, 1.9]),), order=2, modes=["fwd", "rev"])


def test_log1mexp_values_and_derivative(x64):
    x = np.array([1e-3, 0.2, 0.69, 0.7, 3.0, 30.0])
    # Maechler's accurate evaluation, in NumPy float64.
    want = np.where(x < np.log(2), np.log(-np.expm1(-x)), np.log1p(-np.exp(-x)))
    np.testing.assert_allclose(fluxion.nn.log1mexp(x), want, rtol=1e-12)
    check_grads(fluxion.nn.log1mexp, (x,), order=1, modes=["fwd", "rev"], eps=1e-7)  # curved at 1e-3
    np.testing.assert_allclose(fluxion.grad(lambda t: fluxion.nn.log1mexp(t).sum())(x),
                               1 / np.expm1(x), rtol=1e-12)


def test_glu_and_logmeanexp():
    x = X[:12].reshape(3, 4)
    np.testing.assert_allclose(fluxion.nn.glu(x), jax.nn.glu(x), atol=1e-6)
    np.testing.assert_allclose(fluxion.nn.glu(x, axis=1), jax.nn.glu(x, axis=1))
    with pytest.raises(ValueError, match="even"):
        fluxion.nn.glu(X)
    where = x > -1
    for kw in [{}, {"axis": 1}, {"axis": 0, "keepdims": True}, {"axis": 1, "where": where}]:
        np.testing.assert_allclose(fluxion.nn.logmeanexp(x, **kw), jax.nn.logmeanexp(x, **kw),
                                   rtol=1e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_where_masks_entries(name):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    where = rng.random((3, 5)) > 0.4
    for axis in (-1, 0):
        got = getattr(fluxion.nn, name)(x, axis=axis, where=where)
        want = getattr(jax.nn, name)(x, axis=axis, where=where)
        np.testing.assert_allclose(got, want, rtol=1e-6)


RNG = np.random.default_rng(1)
Q = RNG.standard_normal((2, 5, 4, 8)).astype(np.float32)
K = RNG.standard_normal((2, 6, 2, 8)).astype(np.float32)
V = RNG.standard_normal((2, 6, 2, 8)).astype(np.float32)
OPTIONS = [
    {}, {"is_causal": True},
    {"bias": RNG.standard_normal((2, 4, 5, 6)).astype(np.float32)},
    {"mask": RNG.random((2, 1, 5, 6)) > 0.3},
    {"local_window_size": (1, 2)}, {"local_window_size": 1, "is_causal": True, "scale": 0.3},
    {"query_seq_lengths": np.array([3, 5], np.int32),
     "key_value_seq_lengths": np.array([6, 2], np.int32)},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_dot_product_attention_matches_jax(options):
    got = fluxion.nn.dot_product_attention(Q, K, V, **options)
    want = jax.nn.dot_product_attention(Q, K, V, **options)
    np.testing.assert_allclose(got, want, atol=2e-6)


def test_dot_product_attention_unbatched_residual_grad_and_vmap():
    out, lse = fluxion.nn.dot_product_attention(Q[0], K[0], V[0], return_residual=True)
    want, want_lse = jax.nn.dot_product_attention(Q[0], K[0], V[0], return_residual=True)
    np.testing.assert_allclose(out, want, atol=2e-6)
    np.testing.assert_allclose(lse, want_lse, atol=2e-6)
    loss = lambda q, k, v: (fluxion.nn.dot_product_attention(q, k, v, is_causal=True) ** 2).sum()
    jloss = lambda q, k, v: (jax.nn.dot_product_attention(q, k, v, is_causal=True) ** 2).sum()
    for g, w in zip(fluxion.grad(loss, argnums=(0, 1, 2))(Q, K, V),
                    jax.grad(jloss, argnums=(0, 1, 2))(Q, K, V)):
        np.testing.assert_allclose(g, w, atol=2e-5)
    batched = fluxion.vmap(fluxion.nn.dot_product_attention)(Q, K, V)
    looped = np.stack([fluxion.nn.dot_product_attention(Q[i], K[i], V[i]) for i in range(2)])
    np.testing.assert_allclose(batched, looped, atol=2e-6)


def test_dot_product_attention_errors():
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        fluxion.nn.dot_product_attention(Q[:, :, :3], K, V)
    with pytest.raises(ValueError, match="value shape"):
        fluxion.nn.dot_product_attention(Q, K, V[:, :5])
    with pytest.raises(ValueError, match="cuDNN"):
        fluxion.nn.dot_product_attention(Q, K, V, implementation="cudnn")


def test_scaled_products():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 64)).astype(np.float32)
    b = rng.standard_normal((3, 64)).astype(np.float32)
    dn = (((1,), (1,)), ((), ()))
    np.testing.assert_allclose(fluxion.nn.scaled_dot_general(a, b, dn),
                               jax.nn.scaled_dot_general(a, b, dn), rtol=1e-5, atol=1e-5)
    for mode in ("mxfp8", "nvfp4"):
        ours, theirs = (fluxion.nn.get_scaled_dot_general_config(mode),
                        jax.nn.get_scaled_dot_general_config(mode))
        assert (ours.mode, ours.block_size, ours.data_type, ours.scale_type) == (
            theirs.mode, theirs.block_size, theirs.data_type, theirs.scale_type)
    lhs = rng.standard_normal((1, 4, 64)).astype(np.float32)
    rhs = rng.standard_normal((1, 5, 64)).astype(np.float32)
    ls = rng.uniform(0.5, 2, (1, 4, 2)).astype(np.float32)
    rs = rng.uniform(0.5, 2, (1, 5, 2)).astype(np.float32)
    want = np.einsum("bmk,bnk->bmn", lhs * np.repeat(ls, 32, -1), rhs * np.repeat(rs, 32, -1))
    np.testing.assert_allclose(fluxion.nn.scaled_matmul(lhs, rhs, ls, rs), want, rtol=1e-5,
                               atol=1e-4)
    with pytest.raises(ValueError, match="do not divide"):
        fluxion.nn.scaled_matmul(lhs, rhs, ls[..., :1], rs)


def test_kink_derivatives_integer_hard_tanh_and_empty_inputs_match_jax():
    x = np.array([-3.0, -1.0, 0.0, 1.0, 3.0, 6.0, 0.5], np.float32)
    for name in ("relu6", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh"):
        got = fluxion.vmap(fluxion.grad(getattr(fluxion.nn, name)))(x)
        want = jax.vmap(jax.grad(getattr(jax.nn, name)))(x)
        np.testing.assert_array_equal(got, want, err_msg=name)
    ints = np.array([-2, 0, 3], np.int32)
    got, want = fluxion.nn.hard_tanh(ints), jax.nn.hard_tanh(ints)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    empty = np.zeros((0,), np.float32)
    for name in ("softmax", "log_softmax", "logsumexp"):
        got, want = getattr(fluxion.nn, name)(empty), getattr(jax.nn, name)(empty)
        assert got.shape == want.shape and np.array_equal(got, want), name


def test_standardize_where_and_algorithms_match_jax():
    r = np.random.default_rng(0).normal(size=(3, 6)).astype(np.float32) * 3 + 10
    w = r > 8
    for kwargs in ({}, {"where": w}, {"algorithm": "stable"}, {"where": w, "algorithm": "stable"}):
        got = fluxion.jit(lambda v: fluxion.nn.standardize(v, **kwargs))(r)
        want = jax.jit(lambda v: jax.nn.standardize(v, **kwargs))(r)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        fluxion.nn.standardize(r, algorithm="exact")
