"""Batching rules of the structural, shape, reduction and dot_general primitives.

Every case compares vmap against a Python loop over the batch (per-example results stacked
with NumPy) for several in_axes (batching only some operands, axis 1, axis -1) and out_axes;
vmap of jit and jit of vmap must agree; jaxprs of simply batched ops must contain no
transpose that the batching could avoid.
"""
import ml_dtypes
import numpy as np
import pytest

import fluxion
from fluxion import lax
from fluxion._src import batching

B = 3


def _rand(rng, shape, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 7, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _batched(rng, example, axis):
    """A batch of B examples like `example` stacked along `axis` (None: `example` itself)."""
    if axis is None:
        return example
    examples = [example] + [_rand(rng, np.shape(example), np.asarray(example).dtype)
                            for _ in range(B - 1)]
    return np.stack(examples, axis=axis)


def _loop(fun, args, in_axes, out_axes=0):
    """The per-example results of `fun`, stacked along out_axes."""
    outs = []
    for b in range(B):
        example = [a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)]
        outs.append(np.asarray(fun(*example)))
    return np.stack(outs, axis=out_axes)


def _check_vmap(fun, examples, in_axes, out_axes=0, seed=0):
    rng = np.random.default_rng(seed)
    args = [_batched(rng, x, ax) for x, ax in zip(examples, in_axes)]
    expected = _loop(fun, args, in_axes, out_axes)
    out = fluxion.vmap(fun, in_axes=in_axes, out_axes=out_axes)(*args)
    out = np.asarray(out)
    assert out.dtype == expected.dtype
    if np.issubdtype(out.dtype, np.inexact):  # batched reductions may round differently
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(out, expected)
    return args


_r = np.random.default_rng(42)
X234 = _rand(_r, (2, 3, 4))
X34 = _rand(_r, (3, 4))
I32 = np.int32

# (name, fun, example args, list of in_axes choices)
CASES = [
    ("squeeze", lambda x: lax.squeeze(x, (1,)), [_rand(_r, (2, 1, 4))], [(0,), (1,), (-1,)]),
    ("expand_dims", lambda x: lax.expand_dims(x, (0, 2)), [X34], [(1,), (-1,)]),
    ("transpose", lambda x: lax.transpose(x, (2, 0, 1)), [X234], [(0,), (2,)]),
    ("slice", lambda x: lax.slice(x, (0, 1, 1), (2, 3, 4), (1, 1, 2)), [X234], [(1,), (-1,)]),
    ("rev", lambda x: lax.rev(x, (0, 2)), [X234], [(0,), (-1,)]),
    ("concatenate", lambda x, y, z: lax.concatenate([x, y, z], 1), [X34, X34[:, :2], X34],
     [(0, None, 1), (None, 1, None), (-1, 0, None)]),
    ("select_n_bool", lambda w, x, y: lax.select_n(w, x, y), [X34 > 0, X34, -X34],
     [(0, None, None), (None, 1, 0), (1, None, 1), (-1, -1, 0)]),
    ("select_n_scalar_which", lambda w, x, y: lax.select_n(w, x, y), [np.True_, X34, -X34],
     [(0, None, None), (0, 1, None), (None, 1, 0), (0, 0, 1)]),
    ("select_n_int_which", lambda w, x, y, z: lax.select_n(w, x, y, z),
     [np.array([[0, 1, 2, 1]], I32), X34[:1], X34[1:2], X34[2:]],
     [(0, None, 1, None), (None, 1, 0, -1), (1, 0, 0, 0)]),
    ("clamp", lambda lo, x, hi: lax.clamp(lo, x, hi), [np.float32(-0.5), X34, np.float32(0.5)],
     [(None, 1, None), (0, None, None), (0, 1, 0), (None, None, 0)]),
    ("clamp_array_bounds", lambda lo, x, hi: lax.clamp(lo, x, hi),
     [np.full((3, 4), -0.3, np.float32), X34, np.full((3, 4), 0.3, np.float32)],
     [(1, None, None), (None, -1, 0), (0, 1, None)]),
    ("pad", lambda x, v: lax.pad(x, v, ((1, -1, 1), (-1, 2, 2))), [X34, np.float32(7)],
     [(1, None), (None, 0), (1, 0), (-1, 0)]),
    ("dynamic_slice", lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 2)),
     [X34, I32(1), I32(3)], [(1, None, None), (0, 0, None), (None, 0, 0), (-1, 0, 0)]),
    ("dynamic_update_slice", lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)),
     [X34, _rand(_r, (2, 3)), I32(2), I32(-1)],
     [(1, None, None, None), (None, 0, None, None), (0, 1, None, None), (1, None, 0, None),
      (None, None, 0, 0), (-1, 0, None, 0), (None, 1, 0, 0)]),
    ("reduce_precision", lambda x: lax.reduce_precision(x, 5, 2), [X34], [(1,)]),
    ("convert_element_type", lambda x: lax.convert_element_type(x, np.int32), [X34 * 4], [(1,)]),
    ("bitcast_same_width", lambda x: lax.bitcast_convert_type(x, np.int32), [X34], [(-1,)]),
    ("bitcast_narrower", lambda x: lax.bitcast_convert_type(x, np.uint16), [X34], [(-1,), (0,)]),
    ("bitcast_wider", lambda x: lax.bitcast_convert_type(x, np.float32),
     [_rand(_r, (3, 4), np.uint8)], [(-1,), (1,), (0,)]),
    ("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3, 5, 4), (1, 3)),
     [_rand(_r, (1, 4))], [(0,), (1,), (-1,)]),
    ("reshape", lambda x: lax.reshape(x, (4, 6)), [X234], [(1,), (-1,)]),
    ("reshape_dimensions", lambda x: lax.reshape(x, (4, 6), (2, 0, 1)), [X234], [(0,), (2,)]),
    ("reduce_sum", lambda x: lax.reduce_sum(x, (0, 2)), [X234], [(0,), (1,), (-1,)]),
    ("reduce_prod", lambda x: lax.reduce_prod(x, (1,)), [X234], [(2,)]),
    ("reduce_max", lambda x: lax.reduce_max(x, (0, 2)), [X234], [(1,)]),
    ("reduce_min", lambda x: lax.reduce_min(x, (2,)), [X234], [(-1,)]),
    ("reduce_and", lambda x: lax.reduce_and(x, (0,)), [X34 > -0.5], [(1,)]),
    ("reduce_or", lambda x: lax.reduce_or(x, (1,)), [X34 > 0.5], [(0,)]),
    ("reduce_xor", lambda x: lax.reduce_xor(x, (0, 1)), [_rand(_r, (3, 4), np.int32)], [(-1,)]),
    ("dot_general_matmul", lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))),
     [X34, _rand(_r, (4, 5))], [(0, 0), (1, None), (None, 1), (-1, -1)]),
    ("dot_general_batch_dims", lambda a, b: lax.dot_general(a, b, (((0,), (2,)), ((2,), (0,)))),
     [X234, _rand(_r, (4, 5, 2))], [(1, 2), (0, None), (None, 0), (-1, 1)]),
]


@pytest.mark.parametrize("fun,examples,axes_choices", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_vmap_matches_loop(fun, examples, axes_choices):
    for seed, in_axes in enumerate(axes_choices):
        _check_vmap(fun, examples, in_axes, seed=seed)


@pytest.mark.parametrize("out_axes", [1, -1])
def test_out_axes(out_axes):
    _check_vmap(lambda x, i: lax.dynamic_slice(x, (i, np.int32(0)), (2, 4)), [X34, I32(1)],
                (1, 0), out_axes=out_axes)
    _check_vmap(lambda x: lax.reduce_sum(x, (1,)), [X234], (2,), out_axes=out_axes)


def test_clamping_of_per_example_starts():
    """Out-of-range per-example starts clamp like dynamic_slice (gather/scatter in CLIP mode)."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    starts = np.array([-7, 0, 3, 100], np.int32)
    out = fluxion.vmap(lambda i: lax.dynamic_slice(x, (np.int32(0), i), (3, 2),
                                                   allow_negative_indices=False))(starts)
    np.testing.assert_array_equal(out, [x[:, 0:2], x[:, 0:2], x[:, 2:4], x[:, 2:4]])
    update = np.zeros((2, 3), np.float32)
    out = fluxion.vmap(lambda i: lax.dynamic_update_slice(x, update, (i, i),
                                                          allow_negative_indices=False))(starts)
    for b, start in enumerate([0, 0, 1, 1]):
        expected = x.copy()
        expected[start:start + 2, start:start + 3] = 0
        np.testing.assert_array_equal(out[b], expected)


def test_size_zero_and_rank_zero():
    _check_vmap(lambda x: lax.reduce_sum(x, (0,)), [np.zeros((0, 3), np.float32)], (1,))
    _check_vmap(lambda x: lax.slice(x, (1,), (1,)), [np.zeros((4,), np.float32)], (0,))
    _check_vmap(lambda x, y: lax.concatenate([x, y], 0), [np.zeros((0,), np.float32),
                                                          np.ones((2,), np.float32)], (0, None))
    _check_vmap(lambda w, x, y: lax.select_n(w, x, y), [np.True_, np.float32(1), np.float32(2)],
                (0, None, 0))
    _check_vmap(lambda lo, x: lax.clamp(lo, x, np.float32(1)), [np.float32(0), np.float32(3)],
                (0, None))


def test_dynamic_slices_of_rank_zero_operands():
    # Rank 0: no start indices at all (JAX issue 3883's case).
    for fun in (lambda x: lax.dynamic_slice(x, [], []),
                lambda x: lax.dynamic_update_slice(x, np.int32(7), []),
                lambda u: lax.dynamic_update_slice(np.int32(3), u, [])):
        _check_vmap(fun, [np.int32(2)], (0,))
        _check_vmap(fluxion.jit(fun), [np.int32(2)], (0,))


@pytest.mark.parametrize("dtype", [np.int8, np.uint32, ml_dtypes.bfloat16, np.complex64, np.bool_])
def test_dtypes(dtype):
    x = _rand(np.random.default_rng(1), (3, 4), dtype)
    _check_vmap(lambda a, b: lax.concatenate([lax.rev(a, (0,)), b], 0), [x[:2], x],
                (1, None))
    _check_vmap(lambda a, i: lax.dynamic_update_slice(a, lax.slice_in_dim(a, 0, 1), (i, I32(0))),
                [x, I32(1)], (1, 0))


def test_vmap_of_jit_and_jit_of_vmap():
    fun = lambda x, i, v: lax.pad(lax.dynamic_slice(x, (i, np.int32(1)), (2, 2)), v,
                                  ((1, 0, 1), (0, 1, 0)))
    rng = np.random.default_rng(3)
    args = [_batched(rng, X34, 1), np.array([0, 2, 1], np.int32), np.float32(9)]
    in_axes = (1, 0, None)
    expected = _loop(fun, args, in_axes)
    np.testing.assert_array_equal(fluxion.vmap(fluxion.jit(fun), in_axes)(*args), expected)
    np.testing.assert_array_equal(fluxion.jit(fluxion.vmap(fun, in_axes))(*args), expected)


def test_nested_vmap():
    fun = lambda a, b: lax.dot_general(a, b, (((0,), (0,)), ((), ())))
    a, b = _rand(_r, (3, 2, 4)), _rand(_r, (2, 4, 3, 5))
    out = fluxion.vmap(fluxion.vmap(fun, (0, 1)), (1, 0))(a, b)
    np.testing.assert_allclose(out, np.einsum("ioj,ojik->oik", a, b), rtol=1e-5)


def test_vmap_of_grad_with_per_example_starts():
    """The transpose of a batched dynamic_slice is a batched dynamic_update_slice (scatter)."""
    x = _rand(_r, (3, 5))
    starts = np.array([0, 3, 1], np.int32)
    grad = fluxion.grad(lambda a, i: lax.reduce_sum(lax.dynamic_slice(a, (i,), (2,)), (0,)))
    out = fluxion.vmap(grad)(x, starts)
    expected = np.zeros_like(x)
    for b, i in enumerate(starts):
        expected[b, i:i + 2] = 1
    np.testing.assert_array_equal(out, expected)


# Functions whose batching with these in_axes needs no transpose.
NO_TRANSPOSE = [
    ("squeeze", lambda x: lax.squeeze(x, (1,)), [_rand(_r, (2, 1, 4))], (2,)),
    ("slice", lambda x: lax.slice(x, (0, 1, 1), (2, 3, 4), (1, 1, 2)), [X234], (1,)),
    ("pad", lambda x: lax.pad(x, np.float32(0), ((1, 1, 1), (0, 0, 0), (2, 0, 0))), [X234], (1,)),
    ("rev", lambda x: lax.rev(x, (0, 2)), [X234], (1,)),
    ("concatenate", lambda x, y: lax.concatenate([x, y], 0), [X34, X34], (1, 1)),
    ("reduce_sum", lambda x: lax.reduce_sum(x, (0, 2)), [X234], (1,)),
    ("reduce_max", lambda x: lax.reduce_max(x, (1,)), [X234], (2,)),
    ("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3, 5, 4), (1, 3)),
     [_rand(_r, (1, 4))], (1,)),
    ("dot_general_both", lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))),
     [X34, _rand(_r, (4, 5))], (1, 2)),
    ("dot_general_lhs", lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))),
     [X34, _rand(_r, (4, 5))], (2, None)),
    ("dot_general_rhs", lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))),
     [X34, _rand(_r, (4, 5))], (None, 1)),
    ("select_n", lambda w, x, y: lax.select_n(w, x, y), [np.True_, X34, X34], (None, 1, 1)),
    ("clamp", lambda x: lax.clamp(np.float32(0), x, np.float32(1)), [X34], (1,)),
    ("dynamic_slice", lambda x, i: lax.dynamic_slice(x, (i, i), (2, 2)), [X34, I32(1)],
     (1, None)),
    ("dynamic_slice_batched_start", lambda x, i: lax.dynamic_slice(x, (i, i), (2, 2)),
     [X34, I32(1)], (1, 0)),
]


@pytest.mark.parametrize("fun,examples,in_axes", [c[1:] for c in NO_TRANSPOSE],
                         ids=[c[0] for c in NO_TRANSPOSE])
def test_no_unneeded_transpose(fun, examples, in_axes):
    args = _check_vmap(fun, examples, in_axes)
    jaxpr = str(fluxion.make_jaxpr(_keep_batch_dim(fun, in_axes))(*args))
    assert "transpose" not in jaxpr, jaxpr


def _keep_batch_dim(fun, in_axes):
    """vmap(fun) with the output's batch dim left where the batching rules put it."""
    def run(*args):
        dims = [None if ax is None else ax % np.ndim(a) for a, ax in zip(args, in_axes)]
        outs, _ = batching.batch_flat(lambda *xs: [fun(*xs)], list(args), dims, None, B)
        return outs[0]
    return run


def test_transpose_batching_is_one_transpose():
    args = _check_vmap(lambda x: lax.transpose(x, (2, 0, 1)), [X234], (1,))
    jaxpr = fluxion.make_jaxpr(_keep_batch_dim(lambda x: lax.transpose(x, (2, 0, 1)), (1,)))(*args)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["transpose"]
