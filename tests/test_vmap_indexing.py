"""Batching rules of gather and the scatter family (and dynamic slicing at batched starts).

Every case compares vmap against a Python loop over the batch (per-example results stacked
with NumPy), batching the operand only, the indices only, the updates only, or several of
them, along axis 0, 1 or -1 and with out_axes; vmap of jit; per-example gradients (vmap of
grad) of an embedding lookup against a loop; and jaxprs of simply batched indexing that
must contain no transpose.
"""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion import lax

B = 3
I = np.int32
GDN, SDN = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers


def _rand(rng, shape, dtype=np.float32):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-1, 5, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _batched(rng, example, axis):
    """B examples like `example` (integers: from -1 to 4) stacked along `axis`; None: itself."""
    if axis is None:
        return example
    example = np.asarray(example)
    examples = [example] + [_rand(rng, example.shape, example.dtype) for _ in range(B - 1)]
    return np.stack(examples, axis=axis)


def _loop(fun, args, in_axes, out_axes=0):
    outs = []
    for b in range(B):
        example = [fnp.asarray(a if ax is None else np.take(a, b, axis=ax))
                   for a, ax in zip(args, in_axes)]
        outs.append(np.asarray(fun(*example)))
    return np.stack(outs, axis=out_axes)


def _check_vmap(fun, examples, in_axes, out_axes=0, seed=0):
    rng = np.random.default_rng(seed)
    args = [_batched(rng, x, ax) for x, ax in zip(examples, in_axes)]
    expected = _loop(fun, args, in_axes, out_axes)
    batched_fun = fluxion.vmap(fun, in_axes=in_axes, out_axes=out_axes)
    out = np.asarray(batched_fun(*[fnp.asarray(a) for a in args]))
    assert out.dtype == expected.dtype
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


_r = np.random.default_rng(1)
X54 = _rand(_r, (5, 4))
X543 = _rand(_r, (5, 4, 3))
IDX3 = np.array([4, 0, 2], I)
IDX_DUP = np.array([3, 0, 3], I)
IDX22 = np.array([[1, 4], [0, 0]], I)

WINDOW_INDICES = np.array([[1, 2], [3, 0], [4, 5]], I)
WINDOW_GATHER = GDN(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1))
WINDOW_SCATTER = SDN(update_window_dims=(1, 2), inserted_window_dims=(),
                     scatter_dims_to_operand_dims=(0, 1))
BATCHED_INDICES = np.array([[[0], [4], [2], [4]], [[1], [1], [3], [0]], [[2], [0], [1], [3]]], I)
BATCHED_GATHER = GDN(offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1,),
                     operand_batching_dims=(0,), start_indices_batching_dims=(0,))
BATCHED_SCATTER = SDN(update_window_dims=(2,), inserted_window_dims=(1,),
                      scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                      scatter_indices_batching_dims=(0,))
# Rows of a (5, 4) operand at indices of shape (2, 2, 1): updates (2, 2, 4), window dim last.
ROWS_SCATTER = SDN(update_window_dims=(2,), inserted_window_dims=(0,),
                   scatter_dims_to_operand_dims=(0,))
ROWS_INDICES = np.array([[[1], [4]], [[0], [2]]], I)
# Columns of a (4, 6) operand at indices (2, 3, 1): updates (4, 2, 3), window dim first.
COLS_SCATTER = SDN(update_window_dims=(0,), inserted_window_dims=(1,),
                   scatter_dims_to_operand_dims=(1,))
COLS_INDICES = np.array([[[5], [0], [2]], [[1], [3], [4]]], I)

SOME_AXES_3 = [(0, None, None), (None, 0, None), (None, None, 0), (0, 0, 0), (1, None, -1),
               (None, 1, 1), (-1, 0, None), (2, 1, 0)]

# (name, fun, example args, in_axes choices)
CASES = [
    ("index_array", lambda x, i: x[i], [X54, IDX3], [(0, None), (None, 0), (1, 0), (-1, -1)]),
    ("index_array_2d_middle", lambda x, i: x[:, i], [X543, IDX22],
     [(0, None), (None, 1), (2, 0), (1, -1)]),
    ("index_array_and_slice", lambda x, i: x[i, 1:3], [X543, IDX3], [(1, None), (None, 0), (0, 0)]),
    ("two_index_arrays", lambda x, i, j: x[i, :, j], [X543, IDX3, np.array([2, 2, 0], I)],
     [(0, None, 0), (None, 0, None), (2, 0, 0), (-1, None, 0)]),
    ("traced_scalar_index", lambda x, i: x[i, 1], [X543, I(3)], [(0, None), (None, 0), (1, 0)]),
    ("get_fill", lambda x, i: x.at[i].get(mode="fill", fill_value=-1.0), [X54, np.array([1, 9], I)],
     [(1, None), (None, 0), (0, 0)]),
    ("gather_windows_clip", lambda x, i: lax.gather(x, i, WINDOW_GATHER, (2, 3), mode="clip"),
     [_rand(_r, (5, 6)), WINDOW_INDICES], [(0, None), (None, 0), (1, 1), (-1, 0)]),
    ("gather_windows_fill", lambda x, i: lax.gather(x, i, WINDOW_GATHER, (2, 3), mode="fill"),
     [_rand(_r, (5, 6)), WINDOW_INDICES], [(1, None), (None, 1), (0, 0)]),
    ("gather_batching_dims", lambda x, i: lax.gather(x, i, BATCHED_GATHER, (1, 1, 2)),
     [_rand(_r, (3, 5, 2)), BATCHED_INDICES], [(0, None), (None, 2), (1, 0), (3, 3)]),
    ("take", lambda x, i: fnp.take(x, i, axis=1), [X543, IDX22], [(0, None), (None, 1), (2, 0)]),
    ("take_along_axis", lambda x, i: fnp.take_along_axis(x, i, axis=0),
     [X54, np.array([[1, 0, 4, 2]], I)], [(0, None), (None, 1), (1, 0)]),
    ("dynamic_slice", lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)), [X54, I(4), I(-1)],
     [(0, None, 0), (None, 0, None), (1, 0, 0), (None, 0, 0)]),
    ("dynamic_update_slice", lambda x, u, i: lax.dynamic_update_slice(x, u, (i, I(1))),
     [X54, _rand(_r, (2, 2)), I(4)], [(None, None, 0), (0, None, 0), (None, 1, 0), (1, 0, 0)]),
    ("set_unique", lambda x, i, y: x.at[i].set(y), [X54, IDX3, _rand(_r, (3, 4))], SOME_AXES_3),
    ("add_repeated", lambda x, i, y: x.at[i].add(y), [X54, IDX_DUP, _rand(_r, (3, 4))],
     SOME_AXES_3),
    ("mul_repeated", lambda x, i, y: x.at[i, 1:].mul(y), [X54, IDX_DUP, _rand(_r, (3, 3))],
     SOME_AXES_3[:5]),
    ("min_repeated", lambda x, i, y: x.at[i].min(y), [X54, IDX_DUP, _rand(_r, (3, 4))],
     SOME_AXES_3[3:]),
    ("max_scalar_updates", lambda x, i, y: x.at[:, i].max(y), [X54, IDX_DUP, np.float32(0.5)],
     [(0, None, 0), (None, 0, 0), (1, 0, None)]),
    ("scatter_add_windows", lambda x, i, y: lax.scatter_add(x, i, y, WINDOW_SCATTER, mode="clip"),
     [_rand(_r, (5, 6)), WINDOW_INDICES, _rand(_r, (3, 2, 3))], SOME_AXES_3[:6]),
    ("scatter_sub_batching_dims", lambda x, i, y: lax.scatter_sub(x, i, y, BATCHED_SCATTER),
     [_rand(_r, (3, 5, 2)), BATCHED_INDICES, _rand(_r, (3, 4, 2))],
     [(0, None, None), (None, 0, None), (None, None, 0), (1, 2, 3), (3, 0, 2)]),
    ("scatter_rows_2d_indices", lambda x, i, y: lax.scatter(x, i, y, ROWS_SCATTER),
     [X54, ROWS_INDICES, _rand(_r, (2, 2, 4))], [(None, None, 2), (None, 1, None), (1, 1, 1)]),
    ("scatter_max_index_vector_mid", lambda x, i, y: lax.scatter_max(x, i, y, COLS_SCATTER),
     [_rand(_r, (4, 6)), COLS_INDICES, _rand(_r, (4, 2, 3))],
     [(1, None, None), (None, 0, None), (None, None, 1), (0, 3, 3), (2, 2, 0)]),
    ("apply", lambda x, i: x.at[i].apply(fnp.sin), [X54, IDX3], [(0, None), (None, 0), (1, 0)]),
]


@pytest.mark.parametrize("fun,examples,in_axes",
                         [(c[1], c[2], axes) for c in CASES for axes in c[3]],
                         ids=[f"{c[0]}-{axes}" for c in CASES for axes in c[3]])
def test_vmap_matches_loop(fun, examples, in_axes):
    _check_vmap(fun, examples, in_axes)


@pytest.mark.parametrize("out_axes", [1, -1])
def test_out_axes(out_axes):
    _check_vmap(lambda x, i, y: x.at[i].add(y), [X54, IDX_DUP, _rand(_r, (3, 4))], (1, 0, None),
                out_axes=out_axes)


def test_vmap_of_jit():
    fun = fluxion.jit(lambda x, i, y: x.at[i].max(y)[i])
    _check_vmap(fun, [X54, IDX_DUP, _rand(_r, (3, 4))], (0, 0, None))


def test_nested_vmap():
    xs = _rand(_r, (2, B, 5, 4))
    idx = np.random.default_rng(2).integers(0, 5, (B, 3)).astype(I)
    fun = fluxion.vmap(fluxion.vmap(lambda x, i: x[i]), in_axes=(0, None))
    expected = np.stack([np.stack([xs[a, b][idx[b]] for b in range(B)]) for a in range(2)])
    np.testing.assert_array_equal(fun(xs, idx), expected)


# ---------------------------------------------------------------------------------------------
# Per-example gradients

VOCAB, DIM, TOKENS = 7, 3, 4
TABLE = _rand(_r, (VOCAB, DIM))
PROJ = _rand(_r, (DIM,))
TOKEN_IDS = np.random.default_rng(3).integers(0, VOCAB, (B, TOKENS)).astype(I)


def _embedding_loss(table, ids):
    vectors = table[ids]  # (TOKENS, DIM); repeated tokens accumulate gradient
    return fnp.sum(fnp.sin(vectors @ PROJ))


def test_per_example_embedding_gradients():
    per_example = fluxion.vmap(fluxion.grad(_embedding_loss), in_axes=(None, 0))(TABLE, TOKEN_IDS)
    expected = np.stack([fluxion.grad(_embedding_loss)(TABLE, ids) for ids in TOKEN_IDS])
    np.testing.assert_allclose(per_example, expected, rtol=1e-6, atol=1e-6)
    manual = np.zeros((B, VOCAB, DIM), np.float32)
    for b in range(B):
        for t in TOKEN_IDS[b]:
            manual[b, t] += np.cos(TABLE[t] @ PROJ) * PROJ
    np.testing.assert_allclose(per_example, manual, rtol=1e-5, atol=1e-6)


def test_gradient_of_batched_lookup():
    def total(table):
        return fnp.sum(fluxion.vmap(_embedding_loss, in_axes=(None, 0))(table, TOKEN_IDS))
    expected = sum(np.asarray(fluxion.grad(_embedding_loss)(TABLE, ids)) for ids in TOKEN_IDS)
    np.testing.assert_allclose(fluxion.grad(total)(TABLE), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["set", "add", "max"])
@pytest.mark.parametrize("in_axes", [(0, None, None), (None, 0, 0), (0, 0, None)])
def test_per_example_scatter_gradients(method, in_axes):
    """vmap of the JVP-and-transpose machinery of scatters (set with repeated indices)."""
    def loss(x, i, y):
        return fnp.sum(fnp.sin(getattr(x.at[i], method)(y)))
    grad = fluxion.grad(loss, (0, 2))
    idx = np.array([1, 3, 1], I)
    examples = [_rand(_r, (5,)) * 3, idx, _rand(_r, (3,)) * 3]
    rng = np.random.default_rng(4)
    args = [_batched(rng, x, ax) for x, ax in zip(examples, in_axes)]
    if in_axes[1] is not None:
        args[1] = np.abs(args[1])  # repeated indices in every example, none out of bounds
    outs = fluxion.vmap(grad, in_axes=in_axes)(*args)
    for k, out in enumerate(outs):
        expected = _loop(lambda *xs: grad(*xs)[k], args, in_axes)
        np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_per_example_gradients_through_dynamic_slicing():
    """Batched starts: gather / scatter with batching dims, and their transposes."""
    def loss(x, i):
        window = lax.dynamic_slice(x, (i, I(1)), (2, 2))
        return fnp.sum(fnp.sin(lax.dynamic_update_slice(x, window * window, (I(0), i))))
    starts = np.array([0, 4, 2], I)
    per_example = fluxion.vmap(fluxion.grad(loss), in_axes=(None, 0))(X54, starts)
    expected = np.stack([fluxion.grad(loss)(X54, i) for i in starts])
    np.testing.assert_allclose(per_example, expected, rtol=1e-6, atol=1e-6)
    total = fluxion.grad(lambda x: fnp.sum(fluxion.vmap(loss, in_axes=(None, 0))(x, starts)))
    np.testing.assert_allclose(total(X54), expected.sum(0), rtol=1e-5, atol=1e-6)


def test_shared_operand_windows_are_not_marked_unique():
    """Per-example starts into one shared operand read overlapping windows in any order, so the
    gather, and the scatter-add of its transpose, must not claim sorted or unique indices:
    XLA:GPU writes a scatter marked unique without atomics and lost updates (JAX clears them)."""
    def loss(x, i):
        return fnp.sum(fnp.sin(lax.dynamic_slice(x, (i, I(1)), (2, 2))))
    starts = np.array([0, 3, 2], I)
    total = lambda x: fnp.sum(fluxion.vmap(loss, in_axes=(None, 0))(x, starts))
    jaxpr = fluxion.make_jaxpr(fluxion.grad(total))(X54)
    flagged = [(e.primitive.name, e.params["indices_are_sorted"], e.params["unique_indices"])
               for e in jaxpr.eqns if e.primitive.name in ("gather", "scatter-add")]
    assert sorted(flagged) == [("gather", False, False), ("scatter-add", False, False)]
    expected = sum(fluxion.grad(loss)(X54, i) for i in starts)
    np.testing.assert_allclose(fluxion.grad(total)(X54), expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# No transposes where the batch dimension can stay in place

def _primitive_names(fun, *args, in_axes, out_axes):
    jaxpr = fluxion.make_jaxpr(fluxion.vmap(fun, in_axes=in_axes, out_axes=out_axes))(*args)
    return [e.primitive.name for e in jaxpr.jaxpr.eqns]


@pytest.mark.parametrize("in_axes,out_axes", [((1, None), 0), ((None, 0), 0), ((2, 0), 0),
                                              ((0, 1), 1), ((None, 1), 1)])
def test_gather_batches_in_place(in_axes, out_axes):
    x_axis, i_axis = in_axes
    x = np.zeros((5, 4, 3), np.float32)
    x = x if x_axis is None else np.zeros(x.shape[:x_axis] + (B,) + x.shape[x_axis:], np.float32)
    idx = np.zeros((2,), I) if i_axis is None else np.zeros((2, B) if i_axis else (B, 2), I)
    names = _primitive_names(lambda x, i: x[i], x, idx, in_axes=in_axes, out_axes=out_axes)
    assert "transpose" not in names and names.count("gather") == 1


@pytest.mark.parametrize("in_axes", [(1, None, 1), (None, 0, 0), (0, 0, 0), (2, 0, None),
                                     (None, None, 1)])
def test_scatter_batches_in_place(in_axes):
    shapes = [(5, 4), (3,), (3, 4)]
    args = [np.zeros(s[:ax] + (B,) + s[ax:] if ax is not None else s, dtype)
            for s, ax, dtype in zip(shapes, in_axes, [np.float32, I, np.float32])]
    out_axes = in_axes[0] if in_axes[0] is not None else in_axes[2]
    names = _primitive_names(lambda x, i, y: x.at[i].add(y), *args, in_axes=in_axes,
                             out_axes=out_axes)
    assert "transpose" not in names and names.count("scatter-add") == 1
