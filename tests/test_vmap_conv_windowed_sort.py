"""Batching rules of convolutions, windowed and cumulative reductions, generic reduce,
select_and_gather_add / select_and_scatter_add, sort, top_k and argmax/argmin.

Every case compares vmap against a Python loop over the batch (per-example results stacked
with NumPy) for several in_axes (batching only some operands, axis 1, axis -1) and out_axes;
vmap of jit must agree; jaxprs of simply batched ops must not move the batch dimension.
"""
import numpy as np
import pytest

import fluxion
from fluxion import lax

B = 3


def _batched(rng, example, axis):
    """B examples like `example` (integer-valued, keeping ties, if it is) stacked along
    `axis` (None: `example` itself)."""
    if axis is None:
        return example
    if np.array_equal(example, np.round(example)):
        draw = lambda: rng.integers(0, 3, example.shape).astype(example.dtype)
    else:
        draw = lambda: rng.standard_normal(example.shape).astype(example.dtype)
    return np.stack([example] + [draw() for _ in range(B - 1)], axis=axis)


def _loop(fun, args, in_axes, out_axes=0):
    """The per-example results of `fun` (a pytree of arrays), stacked along out_axes."""
    outs = []
    for b in range(B):
        example = [a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)]
        outs.append(fluxion.tree_util.tree_map(np.asarray, fun(*example)))
    return fluxion.tree_util.tree_map(lambda *xs: np.stack(xs, axis=out_axes), *outs)


def _check_vmap(fun, examples, in_axes, out_axes=0, rtol=1e-5, atol=1e-5):
    rng = np.random.default_rng(0)
    args = [_batched(rng, np.asarray(x), ax) for x, ax in zip(examples, in_axes)]
    expected = _loop(fun, args, in_axes, out_axes)
    got = fluxion.vmap(fun, in_axes=in_axes, out_axes=out_axes)(*args)
    for g, e in zip(fluxion.tree_util.tree_leaves(got), fluxion.tree_util.tree_leaves(expected)):
        g = np.asarray(g)
        assert g.dtype == e.dtype and g.shape == e.shape
        if np.issubdtype(e.dtype, np.inexact):
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, e)
    return args


def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _ties(*shape, seed=0):
    """Small integers as floats: many equal values."""
    return np.random.default_rng(seed).integers(0, 3, shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# conv_general_dilated

CONVS = [
    ("strided_dilated", (2, 3, 6, 5), (4, 3, 3, 2),
     dict(window_strides=(2, 1), padding=((1, 0), (0, 1)), lhs_dilation=(1, 2),
          rhs_dilation=(2, 1))),
    ("feature_groups", (2, 4, 5, 4), (6, 2, 3, 2),
     dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    ("batch_groups", (4, 3, 5, 4), (4, 3, 2, 2),
     dict(window_strides=(2, 1), padding="VALID", batch_group_count=2)),
    ("nhwc_hwio_feature_groups", (2, 5, 4, 4), (2, 3, 2, 6),
     dict(window_strides=(1, 2), padding="SAME", feature_group_count=2,
          dimension_numbers=("NHWC", "HWIO", "NHWC"))),
]
IN_AXES = [(0, None), (None, 0), (0, 0), (1, -1), (None, 3), (-1, 1)]


@pytest.mark.parametrize("in_axes", IN_AXES, ids=str)
@pytest.mark.parametrize("lhs_shape,rhs_shape,kwargs", [c[1:] for c in CONVS],
                         ids=[c[0] for c in CONVS])
def test_conv(lhs_shape, rhs_shape, kwargs, in_axes):
    _check_vmap(lambda x, w: lax.conv_general_dilated(x, w, **kwargs),
                [_randn(*lhs_shape), _randn(*rhs_shape, seed=1)], in_axes)


def test_conv_out_axes_and_jit():
    name, lhs_shape, rhs_shape, kwargs = CONVS[1]
    f = fluxion.jit(lambda x, w: lax.conv_general_dilated(x, w, **kwargs))
    _check_vmap(f, [_randn(*lhs_shape), _randn(*rhs_shape, seed=1)], (0, 0), out_axes=2)


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None)], ids=str)
def test_conv_empty_batch(in_axes):
    name, lhs_shape, rhs_shape, kwargs = CONVS[1]
    f = lambda x, w: lax.conv_general_dilated(x, w, **kwargs)
    args = [np.zeros((0,) + lhs_shape, np.float32),
            np.zeros((0,) + rhs_shape, np.float32) if in_axes[1] == 0 else _randn(*rhs_shape)]
    out = fluxion.vmap(f, in_axes=in_axes)(*args)
    assert out.shape == (0,) + np.shape(f(_randn(*lhs_shape), _randn(*rhs_shape)))


def test_conv_batching_only_reshapes():
    """A batch dimension in front of the lhs batch dimension folds into it by reshapes."""
    w = _randn(4, 3, 3, 2)
    f = lambda x: lax.conv_general_dilated(x, w, (1, 1), "VALID")
    jaxpr = str(fluxion.make_jaxpr(fluxion.vmap(f))(_randn(B, 2, 3, 6, 5)))
    assert "transpose" not in jaxpr and "dimensions=(" not in jaxpr
    assert jaxpr.count("conv_general_dilated") == 1


# ---------------------------------------------------------------------------------------------
# Windowed reductions

def _pool(kind, window, strides, padding, base_dilation=None, window_dilation=None):
    def fun(x):
        init, op = {"max": (-np.inf, lax.max), "min": (np.inf, lax.min),
                    "sum": (0.0, lax.add)}[kind]
        return lax.reduce_window(x, np.array(init, x.dtype), op, window, strides, padding,
                                 base_dilation, window_dilation)
    return fun


POOL = ((2, 3), (2, 1), "SAME", (1, 2), None)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("kind", ["max", "min", "sum"])
def test_monoid_reduce_window(kind, axis):
    _check_vmap(_pool(kind, *POOL), [_randn(5, 4)], (axis,))


def test_reduce_window_batch_dim_stays():
    f = fluxion.vmap(_pool("max", *POOL), in_axes=1, out_axes=1)
    jaxpr = str(fluxion.make_jaxpr(f)(_randn(5, B, 4)))
    assert "transpose" not in jaxpr


def _max_pool_jvp(x, t):
    return fluxion.jvp(_pool("max", (2, 2), (1, 2), ((1, 0), (0, 1)), (2, 1)), (x,), (t,))[1]


def _max_pool_vjp(x, ct):
    return fluxion.vjp(_pool("max", (2, 2), (1, 2), "SAME"), x)[1](ct)[0]


@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0), (1, None), (-1, 1)], ids=str)
def test_select_and_gather_add(in_axes):
    """The JVP of max pooling (ties included, so the first maximum must win per example)."""
    _check_vmap(_max_pool_jvp, [_ties(4, 3), _randn(4, 3)], in_axes)


@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0), (1, None), (-1, 1)], ids=str)
def test_select_and_scatter_add(in_axes):
    """The pullback of max pooling."""
    _check_vmap(_max_pool_vjp, [_ties(4, 5), _randn(4, 3)], in_axes)


def _window_pairs(x, y):
    return lax.reduce_window((x, y), (np.float32(-np.inf), np.float32(0)),
                             lambda a, b: (lax.max(a[0], b[0]), a[1] + b[1]), (2, 2), (1, 1),
                             ((0, 1), (1, 0)))


@pytest.mark.parametrize("in_axes", [(0, 0), (None, 1), (2, None)], ids=str)
def test_generic_reduce_window(in_axes):
    _check_vmap(_window_pairs, [_randn(3, 4), _randn(3, 4, seed=1)], in_axes)


def _pair_reduce(x, y):
    return lax.reduce((x, y), (np.float32(1), np.float32(0)),
                      lambda a, b: (a[0] * b[0], a[0] * b[1] + a[1] * b[0]), (0, 2))


@pytest.mark.parametrize("in_axes", [(0, 0), (None, 1), (-1, None), (2, 3)], ids=str)
def test_generic_reduce(in_axes):
    _check_vmap(_pair_reduce, [_randn(3, 2, 4), _randn(3, 2, 4, seed=1)], in_axes)


@pytest.mark.parametrize("reduction", ["reduce", "reduce_window"])
def test_batched_init_values_raise_like_jax(reduction):
    def f(x, init):
        if reduction == "reduce":
            return lax.reduce(x, init, lambda a, b: a * b, (0,))
        return lax.reduce_window(x, init, lambda a, b: a * b, (2,), (1,), "VALID")
    with pytest.raises(NotImplementedError, match="initial values"):
        fluxion.vmap(f)(_randn(B, 4), _randn(B))


# ---------------------------------------------------------------------------------------------
# Cumulative reductions

@pytest.mark.parametrize("in_axes", [0, 1, -1])
@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"])
def test_cumulative(name, in_axes):
    _check_vmap(lambda x: getattr(lax, name)(x, axis=1, reverse=name == "cummin"),
                [_randn(2, 5)], (in_axes,))


def test_cumulative_jvp_batched():
    """The JVP rules (associative scans) batch too."""
    f = lambda x, t: fluxion.jvp(lambda a: lax.cumprod(a, axis=0), (x,), (t,))[1]
    _check_vmap(f, [_randn(4, 2), _randn(4, 2, seed=1)], (1, 0))


def test_cumulative_batch_dim_stays():
    f = fluxion.vmap(lambda x: lax.cumsum(x, 1), in_axes=1, out_axes=1)
    jaxpr = str(fluxion.make_jaxpr(f)(_randn(2, B, 5)))
    assert "transpose" not in jaxpr


# ---------------------------------------------------------------------------------------------
# sort, top_k, argmax, argmin

@pytest.mark.parametrize("in_axes", [0, 1, -1])
def test_sort_one_operand(in_axes):
    _check_vmap(lambda x: lax.sort(x, dimension=0), [_ties(4, 3)], (in_axes,))


@pytest.mark.parametrize("in_axes", [(0, None), (None, 1), (1, -1)], ids=str)
@pytest.mark.parametrize("num_keys", [1, 2])
def test_sort_several_operands(num_keys, in_axes):
    _check_vmap(lambda k, v: lax.sort((k, v), dimension=1, num_keys=num_keys),
                [_ties(2, 5), _ties(2, 5, seed=1)], in_axes)


def test_sort_batch_dim_stays():
    f = fluxion.vmap(lambda x: lax.sort(x, dimension=0), in_axes=1, out_axes=1)
    jaxpr = str(fluxion.make_jaxpr(f)(_randn(4, B, 2)))
    assert "transpose" not in jaxpr


@pytest.mark.parametrize("in_axes", [0, 1, -1])
@pytest.mark.parametrize("axis", [-1, 0])
def test_top_k(axis, in_axes):
    _check_vmap(lambda x: lax.top_k(x, 2, axis=axis), [_ties(3, 4)], (in_axes,))


@pytest.mark.parametrize("in_axes", [0, 1, -1])
@pytest.mark.parametrize("name,axis", [("argmax", 0), ("argmax", 1), ("argmin", 1)])
def test_argminmax(name, axis, in_axes):
    _check_vmap(lambda x: getattr(lax, name)(x, axis, np.int32), [_ties(3, 4)], (in_axes,))


def test_sort_jvp_batched():
    """The JVP of sort gathers tangents with the sorted iota; both batch."""
    f = lambda x, t: fluxion.jvp(lambda a: lax.sort(a, dimension=0), (x,), (t,))[1]
    _check_vmap(f, [_ties(4, 2), _randn(4, 2)], (1, 0))


def test_vmap_of_jit():
    f = fluxion.jit(lambda x: (lax.top_k(x, 2)[1], lax.cummax(x, 0), lax.argmin(x, 1, np.int32)))
    _check_vmap(f, [_ties(3, 4)], (1,))
