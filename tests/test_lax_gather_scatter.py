"""lax.gather and the lax.scatter family, against jax.lax with the same dimension numbers."""
import jax
import ml_dtypes
import numpy as np
import pytest

import fluxion
from fluxion import lax as flax
from fluxion._src.array import make_array

GDN, SDN = flax.GatherDimensionNumbers, flax.ScatterDimensionNumbers
JGDN, JSDN = jax.lax.GatherDimensionNumbers, jax.lax.ScatterDimensionNumbers

# (operand shape, indices, dimension numbers as keyword dict, slice sizes)
GATHER_CASES = [
    ((5,), [[0], [2], [4]], dict(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,)), (1,)),
    ((10,), [[0], [3], [8]], dict(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,)), (2,)),
    ((10, 5), [[0], [2], [1]], dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)), (1, 3)),
    ((10, 5), [[0, 2], [1, 0]], dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1)), (1, 3)),
    ((4, 5, 6), [[[1, 2]], [[3, 0]]], dict(offset_dims=(0, 3), collapsed_slice_dims=(1,),
                                           start_index_map=(2, 1)), (2, 1, 3)),
    ((2, 5), [[[0], [4]], [[1], [1]]], dict(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,),
                                            operand_batching_dims=(0,), start_indices_batching_dims=(0,)), (1, 1)),
    ((3, 4), np.zeros((0, 1), np.int32), dict(offset_dims=(1,), collapsed_slice_dims=(0,),
                                              start_index_map=(0,)), (1, 4)),
    ((), np.zeros((3, 0), np.int32), dict(offset_dims=(), collapsed_slice_dims=(), start_index_map=()), ()),
    ((0, 3), np.zeros((0, 1), np.int32), dict(offset_dims=(1,), collapsed_slice_dims=(0,),
                                              start_index_map=(0,)), (1, 3)),
]

DTYPES = [np.float32, np.int32, np.bool_, ml_dtypes.bfloat16, np.complex64, np.uint8]


def _operand(shape, dtype, rng):
    values = rng.integers(-5, 20, size=shape)
    if dtype == np.bool_:
        return values > 7
    if dtype == np.uint8:
        values = np.abs(values)
    return values.astype(dtype)


def _check_equal(ours, theirs):
    theirs = np.asarray(theirs)
    ours = np.asarray(ours)
    assert ours.dtype == theirs.dtype
    assert ours.shape == theirs.shape
    if ours.dtype == ml_dtypes.bfloat16:
        ours, theirs = ours.astype(np.float32), theirs.astype(np.float32)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("case", range(len(GATHER_CASES)))
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_gather_matches_jax(case, dtype, rng):
    shape, indices, dnums, slice_sizes = GATHER_CASES[case]
    x = _operand(shape, dtype, rng)
    indices = np.asarray(indices, np.int32)
    ours = flax.gather(x, indices, GDN(**dnums), slice_sizes)
    _check_equal(ours, jax.lax.gather(x, indices, JGDN(**dnums), slice_sizes))
    jitted = fluxion.jit(lambda x, i: flax.gather(x, i, GDN(**dnums), slice_sizes))(x, indices)
    _check_equal(jitted, ours)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", [None, "clip", "fill", "promise_in_bounds"])
def test_gather_modes_out_of_bounds(dtype, mode, rng):
    x = _operand((6, 4), dtype, rng)
    indices = np.array([[0, 1], [5, 3], [6, 0], [-1, 2], [2, 3], [4, 9]], np.int32)
    dnums = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1))
    ours = flax.gather(x, indices, GDN(**dnums), (1, 2), mode=mode)
    _check_equal(ours, jax.lax.gather(x, indices, JGDN(**dnums), (1, 2), mode=mode))


@pytest.mark.parametrize("fill_value", [-1, 7.5])
def test_gather_explicit_fill_value(fill_value):
    x = np.arange(5, dtype=np.float32)
    indices = np.array([[1], [5], [-2]], np.int32)
    dnums = dict(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    ours = flax.gather(x, indices, GDN(**dnums), (1,), mode="fill", fill_value=fill_value)
    theirs = jax.lax.gather(x, indices, JGDN(**dnums), (1,), mode="fill", fill_value=fill_value)
    _check_equal(ours, theirs)


@pytest.mark.parametrize("index_dtype", [np.uint8, np.int8, np.int64])
def test_gather_index_dtypes(index_dtype):
    x = np.arange(300, dtype=np.float32)
    indices = np.array([[0], [7], [100], [120]], index_dtype)
    dnums = dict(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,))
    for mode in ("clip", "fill"):
        ours = flax.gather(x, indices, GDN(**dnums), (3,), mode=mode)
        _check_equal(ours, jax.lax.gather(x, indices, JGDN(**dnums), (3,), mode=mode))


def test_gather_weak_type_follows_operand():
    x = flax.broadcast_in_dim(2.0, (4,), ())
    indices = np.array([[1]], np.int32)
    dnums = GDN(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    assert flax.gather(x, indices, dnums, (1,)).weak_type
    out = fluxion.eval_shape(lambda x: flax.gather(x, indices, dnums, (1,)), np.ones(4, np.float32))
    assert not out.weak_type


def test_gather_jaxpr_params_match_jax():
    x = np.ones((3, 4), np.float32)
    indices = np.array([[1]], np.int32)
    dnums = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    ours = fluxion.make_jaxpr(lambda x: flax.gather(x, indices, GDN(**dnums), (1, 4), mode="fill"))(x)
    theirs = jax.make_jaxpr(lambda x: jax.lax.gather(x, indices, JGDN(**dnums), (1, 4), mode="fill"))(x)
    (eqn,), (jeqn,) = ours.eqns, theirs.eqns
    assert eqn.primitive.name == jeqn.primitive.name == "gather"
    assert sorted(eqn.params) == sorted(jeqn.params)
    for name in ("dimension_numbers", "mode", "slice_sizes", "indices_are_sorted", "unique_indices"):
        assert str(eqn.params[name]) == str(jeqn.params[name])
    assert np.isnan(eqn.params["fill_value"]) and np.isnan(jeqn.params["fill_value"])


@pytest.mark.parametrize("make_args, error, match", [
    (lambda: (np.ones(4), np.array([[1.0]]), GDN((), (0,), (0,)), (1,)), ValueError, "integer"),
    (lambda: (np.ones(4), np.array([[1, 2]]), GDN((), (0,), (0,)), (1,)), TypeError, "start_index_map"),
    (lambda: (np.ones(4), np.array([[1]]), GDN((), (0,), (0,)), (2,)), TypeError, "bound 1"),
    (lambda: (np.ones(4), np.array([[1]]), GDN((), (0,), (0,)), (5,)), TypeError, "out of range"),
    (lambda: (np.ones((4, 3)), np.array([[1]]), GDN((), (0,), (0,)), (1, 3)), TypeError,
     "offset dimension or explicitly collapsed"),
    (lambda: (np.ones((4, 3)), np.array([[1]]), GDN((1, 0), (), (0,)), (1, 3)), TypeError, "sorted"),
    (lambda: (np.ones(4), np.array([[1]]), GDN((), (0,), (0,)), (1,), "bogus"), ValueError,
     "Unknown gather mode"),
])
def test_gather_errors(make_args, error, match):
    operand, indices, dnums, sizes, *mode = make_args()
    with pytest.raises(error, match=match):
        flax.gather(operand.astype(np.float32), indices, dnums, sizes, mode=mode[0] if mode else None)


# ---------------------------------------------------------------------------------------------
# scatter

SCATTERS = ["scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max"]

# (operand shape, indices, updates shape, dimension numbers as keyword dict); indices unique
SCATTER_CASES = [
    ((5,), [[0], [2], [4]], (3,), dict(update_window_dims=(), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,))),
    ((10,), [[0], [4], [8]], (3, 2), dict(update_window_dims=(1,), inserted_window_dims=(),
                                          scatter_dims_to_operand_dims=(0,))),
    ((10, 5), [[0], [2], [1]], (3, 3), dict(update_window_dims=(1,), inserted_window_dims=(0,),
                                            scatter_dims_to_operand_dims=(0,))),
    ((10, 5), [[0, 2], [1, 0]], (2, 3), dict(update_window_dims=(1,), inserted_window_dims=(0,),
                                             scatter_dims_to_operand_dims=(0, 1))),
    ((2, 5), [[[0], [4]], [[1], [3]]], (2, 2), dict(update_window_dims=(), inserted_window_dims=(1,),
                                                    scatter_dims_to_operand_dims=(1,),
                                                    operand_batching_dims=(0,),
                                                    scatter_indices_batching_dims=(0,))),
    ((3, 4), np.zeros((0, 1), np.int32), (0, 4), dict(update_window_dims=(1,), inserted_window_dims=(0,),
                                                      scatter_dims_to_operand_dims=(0,))),
]


@pytest.mark.parametrize("case", range(len(SCATTER_CASES)))
@pytest.mark.parametrize("op", SCATTERS)
def test_scatter_matches_jax(case, op, rng):
    shape, indices, updates_shape, dnums = SCATTER_CASES[case]
    x = _operand(shape, np.float32, rng)
    updates = _operand(updates_shape, np.float32, rng)
    indices = np.asarray(indices, np.int32)
    ours = getattr(flax, op)(x, indices, updates, SDN(**dnums))
    _check_equal(ours, getattr(jax.lax, op)(x, indices, updates, JSDN(**dnums)))


# booleans only where lax accepts them (not add/sub/mul); complex numbers are unordered
SCATTER_DTYPE_CASES = (
    [(op, dt) for op in SCATTERS for dt in (np.int32, np.uint8)]
    + [(op, np.bool_) for op in ("scatter", "scatter_min", "scatter_max")]
    + [(op, np.complex64) for op in ("scatter", "scatter_add", "scatter_sub", "scatter_mul")])


@pytest.mark.parametrize("op, dtype", SCATTER_DTYPE_CASES)
def test_scatter_dtypes_with_repeated_indices(op, dtype, rng):
    x = _operand((6,), dtype, rng)
    indices = np.array([[1], [3], [1], [5]], np.int32)
    if op == "scatter":
        indices = np.array([[1], [3], [0], [5]], np.int32)
    updates = _operand((4,), dtype, rng)
    dnums = dict(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    ours = getattr(flax, op)(x, indices, updates, SDN(**dnums))
    _check_equal(ours, getattr(jax.lax, op)(x, indices, updates, JSDN(**dnums)))


@pytest.mark.parametrize("mode", [None, "clip", "drop", "promise_in_bounds"])
@pytest.mark.parametrize("op", ["scatter", "scatter_add"])
def test_scatter_modes_out_of_bounds(mode, op, rng):
    x = _operand((6, 4), np.float32, rng)
    indices = np.array([[0, 1], [5, 3], [7, 0], [-1, 2], [3, 9]], np.int32)
    updates = _operand((5, 2), np.float32, rng)
    dnums = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0, 1))
    ours = getattr(flax, op)(x, indices, updates, SDN(**dnums), mode=mode)
    _check_equal(ours, getattr(jax.lax, op)(x, indices, updates, JSDN(**dnums), mode=mode))


def test_scatter_jit_matches_eager(rng):
    x = _operand((10, 5), np.float32, rng)
    indices = np.array([[0], [2], [2]], np.int32)
    updates = _operand((3, 5), np.float32, rng)
    dnums = SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    for op in (flax.scatter_add, flax.scatter_max):
        f = lambda x, i, u: op(x, i, u, dnums, mode="clip")  # noqa: E731
        _check_equal(fluxion.jit(f)(x, indices, updates), f(x, indices, updates))


def test_scatter_apply_matches_jax(rng):
    x = _operand((6, 3), np.float32, rng)
    indices = np.array([[1], [4], [1]], np.int32)
    dnums = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    ours = flax.scatter_apply(x, indices, lambda v: v * 2 + 1, SDN(**dnums), update_shape=(3, 3))
    theirs = jax.lax.scatter_apply(x, indices, lambda v: v * 2 + 1, JSDN(**dnums), update_shape=(3, 3))
    _check_equal(ours, theirs)
    jitted = fluxion.jit(lambda x: flax.scatter_apply(x, indices, _square, SDN(**dnums),
                                                      update_shape=(3, 3)))(x)
    expected = x.copy()
    for i in (1, 4, 1):
        expected[i] = expected[i] ** 2
    np.testing.assert_allclose(np.asarray(jitted), expected)


def _square(v):
    return flax.mul(v, v)


def test_scatter_weak_type_and_jaxpr_params_match_jax():
    x = flax.broadcast_in_dim(1.0, (4,), ())
    indices = np.array([[1]], np.int32)
    dnums = dict(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    updates = make_array(np.array([2.0], np.float32), weak_type=True)
    assert flax.scatter_add(x, indices, updates, SDN(**dnums)).weak_type
    ours = fluxion.make_jaxpr(lambda x: flax.scatter_add(x, indices, updates, SDN(**dnums)))(
        np.ones(4, np.float32))
    theirs = jax.make_jaxpr(lambda x: jax.lax.scatter_add(x, indices, np.array([2.0], np.float32),
                                                          JSDN(**dnums)))(np.ones(4, np.float32))
    (eqn,), (jeqn,) = ours.eqns, theirs.eqns
    assert eqn.primitive.name == jeqn.primitive.name == "scatter-add"
    assert sorted(eqn.params) == sorted(jeqn.params)
    for name in ("dimension_numbers", "mode", "indices_are_sorted", "unique_indices", "update_consts"):
        assert str(eqn.params[name]) == str(jeqn.params[name])
    assert [e.primitive.name for e in eqn.params["update_jaxpr"].eqns] == ["add"]


@pytest.mark.parametrize("updates, dnums, error, match", [
    (np.ones(2, np.int32), dict(update_window_dims=(), inserted_window_dims=(0,),
                                scatter_dims_to_operand_dims=(0,)), TypeError, "same dtypes"),
    (np.ones((2, 1), np.float32), dict(update_window_dims=(), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,)), TypeError, "rank 1"),
    (np.ones(3, np.float32), dict(update_window_dims=(), inserted_window_dims=(0,),
                                  scatter_dims_to_operand_dims=(0,)), TypeError, "scatter dimensions"),
    (np.ones((2, 5), np.float32), dict(update_window_dims=(1,), inserted_window_dims=(),
                                       scatter_dims_to_operand_dims=(0,)), TypeError, "must not exceed"),
    (np.ones(2, np.float32), dict(update_window_dims=(), inserted_window_dims=(),
                                  scatter_dims_to_operand_dims=(0,)), TypeError, "window of size"),
])
def test_scatter_errors(updates, dnums, error, match):
    with pytest.raises(error, match=match):
        flax.scatter_add(np.zeros(4, np.float32), np.array([[0], [1]], np.int32), updates, SDN(**dnums))


def test_scatter_float_indices_rejected():
    dnums = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    with pytest.raises(ValueError, match="integer type"):
        flax.scatter(np.zeros(4, np.float32), np.array([[0.0]]), np.ones(1, np.float32), dnums)


def test_mode_from_any():
    mode = flax.GatherScatterMode
    assert mode.from_any("clip") is mode.CLIP
    assert mode.from_any("fill") is mode.from_any("drop") is mode.from_any(None) is mode.FILL_OR_DROP
    assert mode.from_any("promise_in_bounds") is mode.PROMISE_IN_BOUNDS
    assert mode.from_any(mode.CLIP) is mode.CLIP
    assert str(mode.CLIP) == str(jax.lax.GatherScatterMode.CLIP)


def test_dimension_numbers_repr_matches_jax():
    assert repr(GDN((1,), (0,), (0,))) == repr(JGDN((1,), (0,), (0,)))
    assert repr(SDN((1,), (0,), (0,))) == repr(JSDN((1,), (0,), (0,)))


def _gather_error(mod, operand_shape, indices_shape, dnums_kwargs, slice_sizes):
    dnums = mod.lax.GatherDimensionNumbers(**dnums_kwargs)
    try:
        mod.eval_shape(lambda o, i: mod.lax.gather(o, i, dnums, slice_sizes),
                       mod.ShapeDtypeStruct(operand_shape, np.float32),
                       mod.ShapeDtypeStruct(indices_shape, np.int32))
    except TypeError as e:
        return str(e)
    return None


_BAD_GATHERS = [  # (operand shape, indices shape, dimension numbers, slice sizes)
    ((10, 9, 8, 7, 6), (5, 4, 3, 2, 5),
     dict(offset_dims=(4, 5, 6, 7, 100), collapsed_slice_dims=(), start_index_map=(0, 1, 2, 3, 4)),
     (10, 9, 8, 7, 6)),
    ((10, 9, 8, 7, 6), (5, 4, 3, 2, 5),
     dict(offset_dims=(4, 5, 6, 7, 8), collapsed_slice_dims=(), start_index_map=(0, 1, 2, 3)),
     (10, 9, 8, 7, 6)),
    ((10, 9, 8, 7, 6), (5, 4, 3, 2, 5),
     dict(offset_dims=(4, 5, 6, 7), collapsed_slice_dims=(1,), start_index_map=(0, 1, 2, 3, 4)),
     (10, 9, 8, 7, 6)),
    ((10, 9, 8, 7, 6), (5, 4, 3, 2, 3),
     dict(offset_dims=(4, 5, 6), collapsed_slice_dims=(1,), start_index_map=(0, 2, 3),
          operand_batching_dims=(1,), start_indices_batching_dims=(0,)),
     (10, 1, 8, 7, 6)),
    ((10, 9, 8, 7, 6), (5, 4, 3, 2, 5),
     dict(offset_dims=(4, 5, 6, 7, 8), collapsed_slice_dims=(), start_index_map=(0, 1, 2, 3, 9)),
     (10, 9, 8, 7, 6)),
]


@pytest.mark.parametrize("case", range(len(_BAD_GATHERS)))
def test_gather_shape_errors_say_what_jax_says(case):
    import jax
    want = _gather_error(jax, *_BAD_GATHERS[case])
    assert want is not None and _gather_error(fluxion, *_BAD_GATHERS[case]) == want


@pytest.mark.parametrize("dnums_kwargs, indices_shape", [
    (dict(update_window_dims=(4,), inserted_window_dims=(0, 1, 2, 3),
          scatter_dims_to_operand_dims=(0, 1, 2, 3)), (10, 9, 8, 7, 5)),
    (dict(update_window_dims=(4,), inserted_window_dims=(0, 1, 2, 3),
          scatter_dims_to_operand_dims=(0, 1, 2, 3, 10)), (10, 9, 8, 7, 5)),
    (dict(update_window_dims=(4,), inserted_window_dims=(1, 2, 3),
          scatter_dims_to_operand_dims=(0, 1, 2, 3, 4), operand_batching_dims=(2, 3)),
     (10, 9, 8, 7, 5)),
])
def test_scatter_shape_errors_say_what_jax_says(dnums_kwargs, indices_shape):
    import jax

    def error(mod):
        dnums = mod.lax.ScatterDimensionNumbers(**dnums_kwargs)
        try:
            mod.eval_shape(lambda o, i, u: mod.lax.scatter_add(o, i, u, dnums),
                           mod.ShapeDtypeStruct((50, 49, 48, 47, 46), np.float32),
                           mod.ShapeDtypeStruct(indices_shape, np.int32),
                           mod.ShapeDtypeStruct((10, 9, 8, 7, 30), np.float32))
        except TypeError as e:
            return str(e)
    assert error(jax) is not None and error(fluxion) == error(jax)
