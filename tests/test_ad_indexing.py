"""JVP and transpose rules of gather and the scatter family, through NumPy indexing, `.at[]`
updates, take / take_along_axis and raw lax calls.

check_grads (forward and reverse, to order 2, float64) over basic, advanced, mixed and
boolean-mask indexing, every `.at[]` method, take / take_along_axis and raw gathers and
scatters with several dimension numbers and modes (out-of-bounds included); JVPs and VJPs
against jax where JAX's conventions decide the numbers (repeated indices of a scatter,
ties of scatter-min/max, out-of-bounds windows in each mode); float0 tangents of indices;
the errors JAX raises for rules it does not have.
"""
import jax
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion import lax
from fluxion.test_util import check_grads

_r = np.random.default_rng(0)


def _randn(*shape):
    return _r.standard_normal(shape)


def _distinct(*shape):
    """Well-separated values (no ties, so min/max are smooth at them)."""
    n = int(np.prod(shape))
    return (_r.permutation(n) - n / 2.0).reshape(shape) / 2.0 + 0.1


I = np.int32
IDX_DUP = np.array([3, 0, 3], I)
MASK = _randn(4, 5) > 0
MUL_UPDATES = _randn(3, 4)
MASK5 = np.array([True, False, True, True, False])


def _at(N, x):
    """`x.at` (check_grads and jax pass NumPy arrays)."""
    return N.asarray(x).at


def _gdn(L, **kw):
    return L.GatherDimensionNumbers(**kw)


def _sdn(L, **kw):
    return L.ScatterDimensionNumbers(**kw)


# Windows of shape (2, 3) of a (5, 6) operand; the last start is out of bounds.
WINDOW_INDICES = np.array([[1, 2], [3, 0], [4, 5]], I)
WINDOW_GATHER = dict(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1))
WINDOW_SCATTER = dict(update_window_dims=(1, 2), inserted_window_dims=(),
                      scatter_dims_to_operand_dims=(0, 1))
# Operand (3, 5, 2) and indices (3, 4, 1) paired along their first dimension.
BATCHED_INDICES = np.array([[[0], [4], [2], [4]], [[1], [1], [3], [0]], [[2], [0], [1], [3]]], I)
BATCHED_GATHER = dict(offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1,),
                      operand_batching_dims=(0,), start_indices_batching_dims=(0,))
BATCHED_SCATTER = dict(update_window_dims=(2,), inserted_window_dims=(1,),
                       scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                       scatter_indices_batching_dims=(0,))
UNIQUE_BATCHED_INDICES = np.array([[[0], [4], [2]], [[1], [3], [0]], [[2], [0], [1]]], I)

# (name, fun(N, L, *args) for N, L = fluxion.numpy, fluxion.lax or jax's, float64 args).
# A `sin` somewhere keeps the second derivatives from being trivially zero.
INDEXING_CASES = [
    ("int", lambda N, L, x: N.sin(x[1]), [_randn(4, 5, 3)]),
    ("negative_ints", lambda N, L, x: N.sin(x[-1, 2]), [_randn(4, 5, 3)]),
    ("slices", lambda N, L, x: N.sin(x[1:3, ::-2]), [_randn(4, 5, 3)]),
    ("newaxis_ellipsis", lambda N, L, x: N.sin(x[None, ..., 1]), [_randn(4, 5, 3)]),
    ("traced_int", lambda N, L, x: N.sin(x[N.asarray(2), 1:]), [_randn(4, 5, 3)]),
    ("int_array_repeated", lambda N, L, x: N.sin(x[IDX_DUP]), [_randn(4, 5, 3)]),
    ("int_array_2d", lambda N, L, x: N.sin(x[:, np.array([[0, 4], [-1, 1]])]), [_randn(4, 5, 3)]),
    ("arrays_split_by_slice", lambda N, L, x: N.sin(x[np.array([0, 3]), 1:4, np.array([2, 0])]),
     [_randn(4, 5, 3)]),
    ("mixed", lambda N, L, x: N.sin(x[1:, np.array([1, 1, 3]), None, 2]), [_randn(4, 5, 3)]),
    ("bool_mask", lambda N, L, x: N.sin(x[MASK]), [_randn(4, 5, 3)]),
    ("bool_mask_and_slice", lambda N, L, x: N.sin(x[::2, MASK5]), [_randn(4, 5, 3)]),
    ("gather_of_sin", lambda N, L, x: N.sin(x)[np.array([2, 2, 0])] * x[0], [_randn(4, 3)]),
]

AT_CASES = [
    ("set_repeated", lambda N, L, x, y: N.sin(_at(N, x)[IDX_DUP].set(y)),
     [_randn(5, 4), _randn(3, 4)]),
    ("set_slice", lambda N, L, x, y: N.sin(_at(N, x)[1:3].set(y)), [_randn(5, 4), _randn(2, 4)]),
    ("set_scalar", lambda N, L, x, y: N.sin(_at(N, x)[2, -1].set(y)), [_randn(5, 4), _randn()]),
    ("set_mask", lambda N, L, x, y: N.sin(_at(N, x)[MASK].set(y)), [_randn(4, 5), _randn()]),
    ("add_repeated", lambda N, L, x, y: N.sin(_at(N, x)[IDX_DUP, 1:].add(y)),
     [_randn(5, 4), _randn(3, 3)]),
    ("subtract", lambda N, L, x, y: N.sin(_at(N, x)[:, np.array([0, 0])].subtract(y)),
     [_randn(5, 4), _randn(5, 2)]),
    ("mul_unique", lambda N, L, x, y: _at(N, x)[np.array([3, 0])].multiply(y, unique_indices=True),
     [_randn(5, 4), _randn(2, 4)]),
    ("mul_repeated_operand", lambda N, L, x: N.sin(x).at[IDX_DUP].multiply(MUL_UPDATES),
     [_randn(5, 4)]),
    ("divide", lambda N, L, x, y: _at(N, x)[1].divide(y), [_randn(5, 4), _r.uniform(1, 2, 4)]),
    ("min_repeated", lambda N, L, x, y: _at(N, x)[IDX_DUP].min(N.sin(y)),
     [_distinct(5, 4), _distinct(3, 4)]),
    ("max_repeated", lambda N, L, x, y: _at(N, x)[IDX_DUP].max(y * y),
     [_distinct(5, 4), _distinct(3, 4)]),
    ("get_fill", lambda N, L, x: N.sin(
        _at(N, x)[np.array([1, 7, -9])].get(mode="fill", fill_value=2.0)),
     [_randn(5, 4)]),
    ("get_clip", lambda N, L, x: N.sin(_at(N, x)[np.array([1, 7])].get(mode="clip")),
     [_randn(5, 4)]),
    ("set_drop_out_of_bounds", lambda N, L, x, y: N.sin(_at(N, x)[np.array([6, 1])].set(y)),
     [_randn(5), _randn(2)]),
    ("add_clip", lambda N, L, x, y: N.sin(_at(N, x)[np.array([6, 1])].add(y, mode="clip")),
     [_randn(5), _randn(2)]),
]

TAKE_CASES = [
    ("take_axis", lambda N, L, x: N.sin(N.take(x, np.array([[2, 0], [-1, 2]]), axis=1)),
     [_randn(2, 3, 4)]),
    ("take_flat", lambda N, L, x: N.sin(N.take(x, np.array([5, 0, 5]))), [_randn(2, 3)]),
    ("take_clip", lambda N, L, x: N.sin(N.take(x, np.array([7, 1]), axis=0, mode="clip")),
     [_randn(4, 2)]),
    ("take_wrap", lambda N, L, x: N.sin(N.take(x, np.array([7, -6]), axis=0, mode="wrap")),
     [_randn(4, 2)]),
    ("take_fill", lambda N, L, x: N.sin(N.take(x, np.array([1, 9]), axis=0, fill_value=0.5)),
     [_randn(4, 2)]),
    ("take_along_axis", lambda N, L, x: N.sin(N.take_along_axis(
        x, np.array([[[0], [2]], [[1], [1]]]), axis=1)), [_randn(2, 3, 4)]),
    ("take_along_axis_broadcast", lambda N, L, x: N.sin(N.take_along_axis(
        x, np.array([[2, 0, 0, 1]]), axis=0)), [_randn(3, 4)]),
]

LAX_CASES = [
    ("gather_windows_clip", lambda N, L, x: N.sin(L.gather(
        x, WINDOW_INDICES, _gdn(L, **WINDOW_GATHER), (2, 3), mode="clip")), [_randn(5, 6)]),
    ("gather_windows_fill", lambda N, L, x: N.sin(L.gather(
        x, WINDOW_INDICES, _gdn(L, **WINDOW_GATHER), (2, 3), mode="fill", fill_value=0.5)),
     [_randn(5, 6)]),
    ("gather_batching_dims", lambda N, L, x: N.sin(L.gather(
        x, BATCHED_INDICES, _gdn(L, **BATCHED_GATHER), (1, 1, 2))), [_randn(3, 5, 2)]),
    ("scatter_add_windows_drop", lambda N, L, x, y: N.sin(L.scatter_add(
        x, WINDOW_INDICES, y, _sdn(L, **WINDOW_SCATTER), mode="drop")),
     [_randn(5, 6), _randn(3, 2, 3)]),
    ("scatter_add_windows_clip", lambda N, L, x, y: N.sin(L.scatter_add(
        x, WINDOW_INDICES, y, _sdn(L, **WINDOW_SCATTER), mode="clip")),
     [_randn(5, 6), _randn(3, 2, 3)]),
    ("scatter_sub_batching_dims", lambda N, L, x, y: N.sin(L.scatter_sub(
        x, BATCHED_INDICES, y, _sdn(L, **BATCHED_SCATTER))), [_randn(3, 5, 2), _randn(3, 4, 2)]),
    ("scatter_windows_overlapping", lambda N, L, x, y: N.sin(L.scatter(
        x, WINDOW_INDICES[:2] - 1, y, _sdn(L, **WINDOW_SCATTER), mode="clip")),
     [_randn(5, 6), _randn(2, 2, 3)]),
    ("scatter_unique_batching_dims", lambda N, L, x, y: N.sin(L.scatter(
        x, UNIQUE_BATCHED_INDICES, y, _sdn(L, **BATCHED_SCATTER), unique_indices=True)),
     [_randn(3, 5, 2), _randn(3, 3, 2)]),
    ("scatter_mul_windows_clip", lambda N, L, x, y: L.scatter_mul(
        N.sin(x), WINDOW_INDICES, y, _sdn(L, **WINDOW_SCATTER), mode="clip",
        unique_indices=True), [_randn(5, 6), _randn(3, 2, 3)]),
    ("scatter_max_windows", lambda N, L, x, y: L.scatter_max(
        x, WINDOW_INDICES[:2], N.sin(y), _sdn(L, **WINDOW_SCATTER)),
     [_distinct(5, 6), _distinct(2, 2, 3)]),
    ("scatter_min_batching_dims", lambda N, L, x, y: L.scatter_min(
        x, BATCHED_INDICES, y, _sdn(L, **BATCHED_SCATTER)),
     [_distinct(3, 5, 2), _distinct(3, 4, 2)]),
]

GRAD_CASES = INDEXING_CASES + AT_CASES + TAKE_CASES + LAX_CASES


@pytest.mark.parametrize("fun,args", [c[1:] for c in GRAD_CASES], ids=[c[0] for c in GRAD_CASES])
def test_check_grads(fun, args, x64):
    check_grads(lambda *xs: fun(fnp, lax, *xs), tuple(args), order=2, modes=("fwd", "rev"))


# ---------------------------------------------------------------------------------------------
# Against jax: the conventions at repeated indices, ties and out-of-bounds windows

def _assert_tree_close(got, expected):
    got, expected = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert np.asarray(g).dtype == np.asarray(e).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-6)


def _compare_with_jax(fun, args):
    """jvp (random tangents), vjp (random cotangent) and jit of the vjp, against jax."""
    rng = np.random.default_rng(5)
    args = tuple(np.asarray(a, np.float32) for a in args)
    tangents = tuple(rng.standard_normal(np.shape(a)).astype(np.float32) for a in args)
    f = lambda *xs: fun(fnp, lax, *xs)  # noqa: E731
    jf = lambda *xs: fun(jax.numpy, jax.lax, *xs)  # noqa: E731
    _assert_tree_close(fluxion.jvp(f, args, tangents), jax.jvp(jf, args, tangents))
    out, pullback = fluxion.vjp(f, *args)
    ct = rng.standard_normal(np.shape(out)).astype(np.float32)
    expected = jax.vjp(jf, *args)[1](ct)
    _assert_tree_close(pullback(ct), expected)
    jitted = fluxion.jit(lambda c, *xs: fluxion.vjp(f, *xs)[1](c))(ct, *args)
    _assert_tree_close(jitted, expected)


TIES_X = np.array([1.0, 2.0, 3.0, 2.0, 5.0])
TIES_IDX = np.array([1, 1, 3, 0, 1, 4], I)
TIES_Y = np.array([2.0, 2.0, 1.0, 1.0, 0.5, 5.0])
OOB = np.array([[1], [9], [-2], [4]], I)
SCALAR_GATHER = dict(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
SCALAR_SCATTER = dict(update_window_dims=(), inserted_window_dims=(0,),
                      scatter_dims_to_operand_dims=(0,))

JAX_CASES = [
    ("set_repeated", lambda N, L, x, y: _at(N, x)[TIES_IDX].set(y), [_randn(5), _randn(6)]),
    ("set_repeated_windows", lambda N, L, x, y: _at(N, x)[IDX_DUP, 1:].set(y),
     [_randn(5, 4), _randn(3, 3)]),
    ("max_ties", lambda N, L, x, y: _at(N, x)[TIES_IDX].max(y), [TIES_X, TIES_Y]),
    ("min_ties", lambda N, L, x, y: _at(N, x)[TIES_IDX].min(y), [TIES_X, TIES_Y]),
    ("min_ties_drop", lambda N, L, x, y: _at(N, x)[np.array([1, 7, 1])].min(y),
     [TIES_X, np.array([2.0, 0.0, 2.0])]),
    ("add_repeated", lambda N, L, x, y: _at(N, x)[TIES_IDX].add(y), [_randn(5), _randn(6)]),
    ("mul_repeated_operand", lambda N, L, x: _at(N, x)[TIES_IDX].multiply(TIES_Y), [_randn(5)]),
    ("mul_unique", lambda N, L, x, y: _at(N, x)[np.array([4, 1])].mul(y, unique_indices=True),
     [_randn(5), _randn(2)]),
    ("index_out_of_bounds", lambda N, L, x: x[np.array([1, 9, -7])], [_randn(5)]),
    ("take_out_of_bounds", lambda N, L, x: N.take(x, np.array([1, 9, -7]), fill_value=0.0),
     [_randn(5)]),
] + [
    (f"gather_{mode}", lambda N, L, x, mode=mode: L.gather(
        x, OOB, _gdn(L, **SCALAR_GATHER), (1,), mode=mode, fill_value=0.0), [_randn(5)])
    for mode in ("clip", "fill", "promise_in_bounds")
] + [
    (f"scatter_add_{mode}", lambda N, L, x, y, mode=mode: L.scatter_add(
        x, OOB, y, _sdn(L, **SCALAR_SCATTER), mode=mode), [_randn(5), _randn(4)])
    for mode in ("clip", "drop", "promise_in_bounds")
] + [
    (f"scatter_{mode}", lambda N, L, x, y, mode=mode: L.scatter(
        x, OOB, y, _sdn(L, **SCALAR_SCATTER), mode=mode), [_randn(5), _randn(4)])
    for mode in ("clip", "drop")
]


@pytest.mark.parametrize("fun,args", [c[1:] for c in JAX_CASES], ids=[c[0] for c in JAX_CASES])
def test_against_jax(fun, args):
    _compare_with_jax(fun, args)


def test_grad_matches_jax_at_ties():
    """Tied values share the gradient: the operand and two updates tie at position 1."""
    f = lambda N, x, y: N.sum(_at(N, x)[TIES_IDX].max(y) * np.arange(1.0, 6.0))  # noqa: E731
    ours = fluxion.grad(lambda x, y: f(fnp, x, y), (0, 1))(TIES_X, TIES_Y)
    theirs = jax.grad(lambda x, y: f(jax.numpy, x, y), (0, 1))(TIES_X, TIES_Y)
    _assert_tree_close(ours, theirs)
    np.testing.assert_allclose(ours[0][1], 2.0 / 3.0, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Indices, integer operands, and the rules JAX does not have

def test_indices_have_float0_cotangents():
    x, i = np.arange(5.0, dtype=np.float32), np.array([3, 1], I)
    ct_x, ct_i = fluxion.grad(lambda x, i: fnp.sum(x[i]), (0, 1), allow_int=True)(x, i)
    np.testing.assert_array_equal(ct_x, [0, 1, 0, 1, 0])
    assert ct_i.dtype == fluxion.dtypes.float0 and ct_i.shape == (2,)


def test_jvp_with_float0_index_tangents():
    x, i = np.arange(5.0, dtype=np.float32), np.array([3, 1, 3], I)
    f = lambda x, i: fnp.asarray(x).at[i].add(x[i])  # noqa: E731
    tangents = (np.ones(5, np.float32), np.zeros(3, fluxion.dtypes.float0))
    out, t_out = fluxion.jvp(f, (x, i), tangents)
    np.testing.assert_array_equal(out, [0, 2, 2, 9, 4])
    np.testing.assert_array_equal(t_out, [1, 2, 1, 3, 1])


def test_integer_scatter_in_a_differentiated_function():
    ints = np.arange(5, dtype=I)
    f = lambda x: (fnp.asarray(ints).at[np.array([1, 1])].max(ints[3:]), x[ints[:2]])  # noqa: E731
    (out_int, out_x), (t_int, t_x) = fluxion.jvp(f, (TIES_X,), (np.ones(5),))
    np.testing.assert_array_equal(out_int, [0, 4, 2, 3, 4])
    assert t_int.dtype == fluxion.dtypes.float0
    np.testing.assert_array_equal(t_x, [1, 1])


def test_scatter_mul_updates_gradient_needs_unique_indices():
    f = lambda N, x, y: _at(N, x)[TIES_IDX].mul(y)  # noqa: E731
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        fluxion.jvp(lambda x, y: f(fnp, x, y), (TIES_X, TIES_Y), (TIES_X, TIES_Y))
    with pytest.raises(NotImplementedError):
        jax.jvp(lambda x, y: f(jax.numpy, x, y), (TIES_X, TIES_Y), (TIES_X, TIES_Y))


def test_scatter_apply_is_not_differentiable():
    f = lambda x: fnp.asarray(x).at[np.array([1])].apply(fnp.sin)  # noqa: E731
    with pytest.raises(NotImplementedError, match="scatter_apply JVP"):
        fluxion.grad(lambda x: fnp.sum(f(x)))(TIES_X)


def test_gather_transposes_to_scatter_add():
    jaxpr = fluxion.make_jaxpr(fluxion.grad(lambda x: fnp.sum(fnp.sin(x[IDX_DUP]))))(TIES_X)
    names = [e.primitive.name for e in jaxpr.jaxpr.eqns]
    assert "scatter-add" in names and "scatter" not in names


def test_repeated_set_jvp_uses_scatter_add():
    """Repeated indices: tangents go through scatter-add (transposable), as in JAX."""
    f = lambda x, y: fnp.asarray(x).at[TIES_IDX].set(y)  # noqa: E731
    jaxpr = fluxion.make_jaxpr(lambda x, y: fluxion.jvp(f, (x, y), (x, y)))(TIES_X, TIES_Y)
    names = [e.primitive.name for e in jaxpr.jaxpr.eqns]
    assert names.count("scatter-add") == 2
