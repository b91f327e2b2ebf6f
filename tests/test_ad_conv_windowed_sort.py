"""JVP and transpose rules of convolutions, windowed and cumulative reductions, generic
reduce, sort, top_k and argmax/argmin.

check_grads (forward and reverse, to order 2, in float64) against finite differences;
derivatives against jax, including JAX's choices at ties (max pooling, sort, cummax);
JAX's errors where it cannot differentiate; float0 tangents of integer inputs; and a small
CNN (conv + relu + max-pool + dense) whose gradients match jax.grad.
"""
import jax
import jax.lax as jlax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.test_util import check_grads

def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _distinct(*shape, seed=0):
    """Well-separated values (no ties, so maxima, minima and sorts are smooth at them)."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) - n / 2.0).reshape(shape) / 4.0 + 0.05


def _ties(*shape, seed=0):
    """Small integers as floats: many equal values."""
    return np.random.default_rng(seed).integers(0, 3, shape).astype(np.float64)


def _assert_close(got, expected, rtol=1e-6, atol=1e-6):
    got, expected = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert np.asarray(g).dtype == np.asarray(e).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=rtol, atol=atol)


def _compare_with_jax(fun, args, rtol=1e-6, atol=1e-6):
    """jvp and vjp (random tangents and cotangent) of fun(L, *args) for L = lax and jax.lax."""
    rng = np.random.default_rng(1)
    args = tuple(np.asarray(a) for a in args)
    tangents = tuple(rng.standard_normal(a.shape).astype(a.dtype) for a in args)
    f, jf = (lambda *xs: fun(lax, *xs)), (lambda *xs: fun(jlax, *xs))
    _assert_close(fluxion.jvp(f, args, tangents), jax.jvp(jf, args, tangents), rtol, atol)
    out, pullback = fluxion.vjp(f, *args)
    cts = jax.tree_util.tree_map(
        lambda o: rng.standard_normal(np.shape(o)).astype(np.asarray(o).dtype), out)
    _assert_close(pullback(cts), jax.vjp(jf, *args)[1](cts), rtol, atol)


# ---------------------------------------------------------------------------------------------
# conv_general_dilated

CONVS = [
    ("valid_strided", (2, 3, 6, 5), (4, 3, 3, 2), dict(window_strides=(2, 1), padding="VALID")),
    ("same_strided", (1, 2, 5, 5), (3, 2, 3, 3), dict(window_strides=(2, 2), padding="SAME")),
    ("padding_and_dilations", (1, 2, 5, 4), (2, 2, 2, 2),
     dict(window_strides=(1, 2), padding=((1, 2), (2, -1)), lhs_dilation=(2, 1),
          rhs_dilation=(1, 2))),
    ("feature_groups", (2, 4, 5, 4), (6, 2, 3, 2),
     dict(window_strides=(1, 1), padding=((1, 0), (0, 1)), feature_group_count=2)),
    ("batch_groups", (4, 3, 5, 4), (4, 3, 2, 2),
     dict(window_strides=(2, 1), padding="SAME", rhs_dilation=(2, 1), batch_group_count=2)),
    ("nhwc_hwio_feature_groups", (2, 5, 4, 4), (2, 3, 2, 6),
     dict(window_strides=(1, 2), padding="SAME", feature_group_count=2,
          dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("nhwc_batch_groups_lhs_dilated", (4, 4, 3, 3), (2, 2, 3, 4),
     dict(window_strides=(2, 1), padding=((1, 1), (0, 2)), lhs_dilation=(1, 2),
          batch_group_count=2, dimension_numbers=("NHWC", "HWIO", "NCHW"))),
    ("1d_all_dilations", (2, 3, 5), (2, 3, 3),
     dict(window_strides=(2,), padding=((2, 1),), lhs_dilation=(3,), rhs_dilation=(2,))),
]
CONV_IDS = [c[0] for c in CONVS]


@pytest.mark.parametrize("lhs_shape,rhs_shape,kwargs", [c[1:] for c in CONVS], ids=CONV_IDS)
def test_conv_check_grads(lhs_shape, rhs_shape, kwargs, x64_both):
    f = lambda x, w: lax.conv_general_dilated(x, w, **kwargs)
    check_grads(f, (_randn(*lhs_shape), _randn(*rhs_shape, seed=1)), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("lhs_shape,rhs_shape,kwargs", [c[1:] for c in CONVS], ids=CONV_IDS)
def test_conv_derivatives_match_jax(lhs_shape, rhs_shape, kwargs, x64_both):
    _compare_with_jax(lambda L, x, w: L.conv_general_dilated(x, w, **kwargs),
                      (_randn(*lhs_shape), _randn(*rhs_shape, seed=1)), rtol=1e-12, atol=1e-12)


def test_conv_preferred_element_type_cotangents(x64_both):
    """Cotangents come back in the operands' dtype, as in JAX."""
    kwargs = dict(window_strides=(1, 1), padding="SAME", preferred_element_type=np.float64)
    args = (_randn(1, 2, 4, 3).astype(np.float32), _randn(3, 2, 2, 2, seed=1).astype(np.float32))
    _compare_with_jax(lambda L, x, w: L.conv_general_dilated(x, w, **kwargs), args,
                      rtol=1e-5, atol=1e-5)


def test_conv_vjp_under_jit_matches_eager():
    name, lhs_shape, rhs_shape, kwargs = CONVS[3]
    x, w = _randn(*lhs_shape).astype(np.float32), _randn(*rhs_shape, seed=1).astype(np.float32)
    f = lambda x, w: lax.conv_general_dilated(x, w, **kwargs)
    ct = np.ones(np.shape(f(x, w)), np.float32)
    eager = fluxion.vjp(f, x, w)[1](ct)
    jitted = fluxion.jit(lambda c, x, w: fluxion.vjp(f, x, w)[1](c))(ct, x, w)
    _assert_close(jitted, eager, rtol=1e-5, atol=1e-5)


def test_conv_of_integers_has_float0_tangent():
    x, w = np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 2, 2), np.int32)
    f = lambda x: lax.conv_general_dilated(lax.convert_element_type(x, np.int32), w, (1, 1),
                                           "VALID")
    out, t = fluxion.jvp(f, (x,), (x,))
    np.testing.assert_array_equal(out, np.full((1, 1, 2, 2), 4, np.int32))
    assert t.dtype == jax.dtypes.float0 and t.shape == (1, 1, 2, 2)


# ---------------------------------------------------------------------------------------------
# Windowed reductions: pooling

def _pool(kind, window, strides, padding, base_dilation=None, window_dilation=None):
    """fun(L, x): a max/min/sum/avg pooling written with L.reduce_window."""
    def fun(L, x):
        init, op = {"max": (-np.inf, L.max), "min": (np.inf, L.min), "sum": (0.0, L.add),
                    "avg": (0.0, L.add)}[kind]
        init = np.array(init, x.dtype)
        out = L.reduce_window(x, init, op, window, strides, padding, base_dilation,
                              window_dilation)
        if kind == "avg":
            out = L.div(out, np.array(np.prod(window), out.dtype))
        return out
    return fun


POOLS = [
    ("valid_strided", (2, 7, 6), (1, 3, 2), (1, 2, 2), "VALID", None, None),
    ("same", (2, 5, 6), (1, 3, 3), (1, 2, 1), "SAME", None, None),
    ("base_dilation", (5, 4), (3, 2), (2, 1), ((1, 2), (0, 1)), (2, 1), None),
    ("negative_padding", (5, 6), (3, 2), (2, 1), ((1, -2), (0, -1)), (2, 1), None),
]


@pytest.mark.parametrize("kind", ["max", "min", "sum", "avg"])
@pytest.mark.parametrize("shape,window,strides,padding,base,dil", [p[1:] for p in POOLS],
                         ids=[p[0] for p in POOLS])
def test_pool_check_grads(kind, shape, window, strides, padding, base, dil, x64_both):
    fun = _pool(kind, window, strides, padding, base, dil)
    check_grads(lambda x: fun(lax, x), (_distinct(*shape),), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape,window,strides,padding,base,dil", [p[1:] for p in POOLS[:3]],
                         ids=[p[0] for p in POOLS[:3]])
def test_pool_derivatives_at_ties_match_jax(kind, shape, window, strides, padding, base, dil,
                                            x64_both):
    """Of tied extrema, the tangent and the cotangent go to the one JAX picks (the first in
    XLA's reduction order)."""
    _compare_with_jax(_pool(kind, window, strides, padding, base, dil), (_ties(*shape),))


def test_avg_pool_matches_jax():
    _compare_with_jax(_pool("avg", (2, 2), (2, 1), "SAME"), (_randn(5, 4).astype(np.float32),))


def test_max_pool_second_order_matches_jax():
    """The pullback of max pooling is select_and_scatter_add; its own derivatives go back to
    select_and_gather_add."""
    fun = _pool("max", (2, 3), (1, 2), "SAME")
    x = _ties(4, 5).astype(np.float32)
    ct = _randn(4, 3).astype(np.float32)
    pullback = lambda L: (lambda x, c: (fluxion.vjp if L is lax else jax.vjp)(
        lambda y: fun(L, y), x)[1](c)[0])
    t = _randn(4, 5, seed=1).astype(np.float32)
    _assert_close(fluxion.jvp(pullback(lax), (x, ct), (t, ct)),
                  jax.jvp(pullback(jlax), (x, ct), (t, ct)))
    _assert_close(fluxion.vjp(pullback(lax), x, ct)[1](t), jax.vjp(pullback(jlax), x, ct)[1](t))


def test_max_pool_window_dilation_is_forward_only():
    """As in JAX: forward mode works; reverse mode raises NotImplementedError."""
    fun = _pool("max", (2, 2), (1, 1), "VALID", None, (2, 1))
    x, t = _ties(5, 4).astype(np.float32), _randn(5, 4).astype(np.float32)
    _assert_close(fluxion.jvp(lambda y: fun(lax, y), (x,), (t,)),
                  jax.jvp(lambda y: fun(jlax, y), (x,), (t,)))
    for grad, L in ((fluxion.grad, lax), (jax.grad, jlax)):
        with pytest.raises(NotImplementedError, match="window dilation"):
            grad(lambda y: L.reduce_sum(fun(L, y), (0, 1)))(x)


def _first_extremum_tangents(t, x, window, strides, padding, base_dilation):
    """NumPy reference of select_and_gather_add for max: per window, the tangent at the
    first maximum in row-major window order (0 where the maximum is -inf)."""
    def dilate_and_pad(a, value):
        shape = [(n - 1) * b + 1 for n, b in zip(a.shape, base_dilation)]
        dilated = np.full(shape, value, a.dtype)
        dilated[tuple(slice(None, None, b) for b in base_dilation)] = a
        return np.pad(dilated, padding, constant_values=value)
    xp, tp = dilate_and_pad(x, -np.inf), dilate_and_pad(t, 0)
    out_shape = [(n - w) // s + 1 for n, w, s in zip(xp.shape, window, strides)]
    out = np.zeros(out_shape, t.dtype)
    for o in np.ndindex(*out_shape):
        where = tuple(slice(i * s, i * s + w) for i, s, w in zip(o, strides, window))
        xs, ts = xp[where].ravel(), tp[where].ravel()
        out[o] = 0 if xs.max() == -np.inf else ts[np.argmax(xs)]
    return out


@pytest.mark.parametrize("window,strides,padding,base_dilation", [
    ((2, 3), (1, 2), ((1, 0), (0, 2)), (1, 1)),
    ((3, 2), (2, 1), ((1, 2), (0, 1)), (2, 1)),
])
def test_select_and_gather_add_gpu_lowering(window, strides, padding, base_dilation):
    """XLA:GPU has no variadic reduce_window; the GPU lowering (compiled here for the CPU)
    compares strided slices instead."""
    from fluxion._src import core, dispatch, staging
    from fluxion._src.compiler import lowering
    from fluxion._src.lax.elementwise import ge_p
    from fluxion._src.lax.windowed import select_and_gather_add_p
    x, t = _ties(5, 6).astype(np.float32), _randn(5, 6).astype(np.float32)
    x[0, 0] = -np.inf
    params = dict(select_prim=ge_p, window_dimensions=window, window_strides=strides,
                  padding=padding, base_dilation=base_dilation, window_dilation=(1, 1))
    closed = staging.trace_to_jaxpr(lambda a, b: [select_and_gather_add_p.bind(a, b, **params)],
                                    [core.get_aval(t), core.get_aval(x)])
    text = lowering.lower_jaxpr_to_module(closed.jaxpr, "cuda")
    out = dispatch.compile_closed_jaxpr(closed, text=text)([t, x])[0]
    np.testing.assert_array_equal(
        out, _first_extremum_tangents(t, x, window, strides, padding, base_dilation))


def test_pool_of_integers_has_float0_tangent():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = lambda y: lax.reduce_window(lax.convert_element_type(y, np.int32), np.int32(-2**31),
                                    lax.max, (2, 2), (1, 1), "VALID")
    _, t = fluxion.jvp(f, (x,), (x,))
    assert t.dtype == jax.dtypes.float0 and t.shape == (2, 3)


# ---------------------------------------------------------------------------------------------
# Generic reduce_window and reduce

def _product_rule(a, b):
    """The product of (value, derivative) pairs: associative, with identity (1, 0)."""
    return a[0] * b[0], a[0] * b[1] + a[1] * b[0]


def _window_product(L, x):
    return L.reduce_window(x, np.ones((), x.dtype), lambda a, b: a * b, (2, 2), (1, 1), "SAME")


def _window_pairs(L, x, y):
    return L.reduce_window((x, y), (np.float32(1), np.float32(0)),
                           _product_rule, (3,), (2,), ((1, 1),))


def test_generic_reduce_window_jvp_matches_jax():
    t = (_randn(3, 4, seed=1).astype(np.float32),)
    x = (_randn(3, 4).astype(np.float32),)
    _assert_close(fluxion.jvp(lambda a: _window_product(lax, a), x, t),
                  jax.jvp(lambda a: _window_product(jlax, a), x, t), rtol=1e-5, atol=1e-6)
    xs = (_randn(6).astype(np.float32), _randn(6, seed=1).astype(np.float32))
    _assert_close(fluxion.jvp(lambda a, b: _window_pairs(lax, a, b), xs, xs),
                  jax.jvp(lambda a, b: _window_pairs(jlax, a, b), xs, xs), rtol=1e-5,
                  atol=1e-6)


def test_generic_reduce_window_check_grads_forward(x64_both):
    check_grads(lambda a: _window_product(lax, a), (_randn(3, 4),), order=2, modes=("fwd",))


def test_generic_reduce_window_errors_match_jax():
    x = _randn(3, 4).astype(np.float32)
    for grad, L in ((fluxion.grad, lax), (jax.grad, jlax)):
        with pytest.raises(ValueError):
            grad(lambda a: L.reduce_sum(_window_product(L, a), (0, 1)))(x)
    for jvp, L in ((fluxion.jvp, lax), (jax.jvp, jlax)):
        f = lambda a, i: L.reduce_window(a, i, lambda u, v: u * v, (2, 2), (1, 1), "VALID")
        with pytest.raises(TypeError, match="init_value_tangent"):
            jvp(f, (x, np.float32(1)), (x, np.float32(1)))


def _generic_reduce(L, x):
    return L.reduce(x, np.ones((), x.dtype), lambda a, b: a * b, (0, 2))


def _generic_pair_reduce(L, x, y):
    return L.reduce((x, y), (np.ones((), x.dtype), np.zeros((), y.dtype)), _product_rule, (1,))


GENERIC_REDUCE_X = np.array([[[1.5, 0.0], [2.0, -1.0], [0.5, 1.2]],
                             [[0.3, 1.1], [0.9, 1.3], [0.8, 0.0]]])


def test_generic_reduce_check_grads(x64_both):
    check_grads(lambda a: _generic_reduce(lax, a), (GENERIC_REDUCE_X,), order=2,
                modes=("fwd", "rev"))


def test_generic_reduce_derivatives_match_jax(x64_both):
    """Zeros among the reduced elements included."""
    _compare_with_jax(_generic_reduce, (GENERIC_REDUCE_X,), rtol=1e-12)
    _compare_with_jax(_generic_pair_reduce, (_randn(2, 4), _randn(2, 4, seed=1)), rtol=1e-12)


def test_generic_reduce_init_tangent_raises_like_jax():
    x = _randn(3).astype(np.float32)
    for jvp, L in ((fluxion.jvp, lax), (jax.jvp, jlax)):
        f = lambda a, i: L.reduce(a, i, lambda u, v: u * v, (0,))
        with pytest.raises(NotImplementedError, match="initial values"):
            jvp(f, (x, np.float32(1)), (x, np.float32(1)))


# ---------------------------------------------------------------------------------------------
# Cumulative reductions

CUMULATIVE = ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"]


@pytest.mark.parametrize("name", CUMULATIVE)
@pytest.mark.parametrize("axis,reverse", [(1, False), (0, True)])
def test_cumulative_check_grads(name, axis, reverse, x64_both):
    x = _distinct(3, 4)
    if name == "cumprod":
        x[1, 2] = 0.0
    f = lambda a: getattr(lax, name)(a, axis=axis, reverse=reverse)
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", CUMULATIVE)
def test_cumulative_derivatives_match_jax(name, x64_both):
    """Ties (cummax, cummin) and zeros (cumprod) included."""
    x = _ties(3, 4).astype(np.float64)
    _compare_with_jax(lambda L, a: getattr(L, name)(a, axis=1), (x,), rtol=1e-12)
    _compare_with_jax(lambda L, a: getattr(L, name)(a, axis=0, reverse=True), (x,), rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# sort, top_k, argmax, argmin

SORTS = [
    ("one_operand", lambda L, x: L.sort(x, dimension=0), [_distinct(4, 3)]),
    ("key_and_value", lambda L, k, v: L.sort((k, v), dimension=1),
     [_distinct(3, 5), _randn(3, 5)]),
    ("two_keys", lambda L, k2, v: L.sort((np.tile([1.0, 0.0, 1.0], (2, 2)), k2, v), num_keys=2),
     [_distinct(2, 6), _randn(2, 6)]),
    ("top_k_last_axis", lambda L, x: L.top_k(x, 3)[0], [_distinct(2, 5)]),
    ("top_k_axis_0", lambda L, x: L.top_k(x, 2, axis=0)[0], [_distinct(4, 3)]),
]


@pytest.mark.parametrize("fun,args", [s[1:] for s in SORTS], ids=[s[0] for s in SORTS])
def test_sort_check_grads(fun, args, x64_both):
    check_grads(lambda *xs: fun(lax, *xs), tuple(args), order=2, modes=("fwd", "rev"))


SORT_TIES = [
    ("stable_ties", lambda L, x: L.sort(x, dimension=1), [_ties(3, 6)]),
    ("ties_carry_values", lambda L, k, v: L.sort((k, v), dimension=0), [_ties(6, 2), _randn(6, 2)]),
    ("two_keys_ties", lambda L, a, b: L.sort((a, b), num_keys=2), [_ties(2, 7), _ties(2, 7, seed=1)]),
    ("top_k_ties", lambda L, x: L.top_k(x, 4)[0], [_ties(3, 6)]),
]


@pytest.mark.parametrize("fun,args", [s[1:] for s in SORT_TIES], ids=[s[0] for s in SORT_TIES])
def test_sort_derivatives_at_ties_match_jax(fun, args, x64_both):
    _compare_with_jax(fun, args, rtol=1e-12)


@pytest.mark.parametrize("name", ["argmax", "argmin", "top_k_indices", "sort_ints"])
def test_index_outputs_have_float0_tangents(name):
    x = _ties(3, 4).astype(np.float32)
    fun = {"argmax": lambda L, a: L.argmax(a, 1, np.int32),
           "argmin": lambda L, a: L.argmin(a, 0, np.int32),
           "top_k_indices": lambda L, a: L.top_k(a, 2)[1],
           "sort_ints": lambda L, a: L.sort((L.convert_element_type(a, np.int32), a))[0]}[name]
    out, t = fluxion.jvp(lambda a: fun(lax, a), (x,), (np.ones_like(x),))
    j_out, j_t = jax.jvp(lambda a: fun(jlax, a), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(out, j_out)
    assert t.dtype == j_t.dtype == jax.dtypes.float0 and t.shape == j_t.shape


# ---------------------------------------------------------------------------------------------
# A small CNN

def _cnn(np_mod, L, params, images):
    w1, b1, w2 = params
    h = L.conv_general_dilated(images, w1, (1, 1), "SAME",
                               dimension_numbers=("NHWC", "HWIO", "NHWC")) + b1
    h = np_mod.maximum(h, 0.0)
    h = L.reduce_window(h, -np.inf, L.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    logits = np_mod.reshape(h, (h.shape[0], -1)) @ w2
    return np_mod.sum((logits - 1.0) ** 2) / images.shape[0]


def test_cnn_gradients_match_jax():
    rng = np.random.default_rng(3)
    params = (rng.standard_normal((3, 3, 2, 4)).astype(np.float32) * 0.5,
              rng.standard_normal(4).astype(np.float32) * 0.1,
              rng.standard_normal((36, 3)).astype(np.float32) * 0.3)
    images = rng.standard_normal((2, 6, 6, 2)).astype(np.float32)
    loss = lambda p, x: _cnn(jnp, lax, p, x)
    j_loss = lambda p, x: _cnn(jjnp, jlax, p, x)
    expected = jax.value_and_grad(j_loss)(params, images)
    _assert_close(fluxion.value_and_grad(loss)(params, images), expected, rtol=1e-5, atol=1e-5)
    _assert_close(fluxion.jit(fluxion.grad(loss))(params, images), expected[1], rtol=1e-5,
                  atol=1e-5)
