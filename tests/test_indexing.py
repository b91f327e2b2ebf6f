"""NumPy indexing of fluxion arrays (`x[idx]`, `x.at[idx]`), take and take_along_axis.

Values are checked against NumPy; out-of-bounds behaviour, dtypes and jaxpr structure against
JAX.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

import fluxion
from fluxion._src.array import make_array
from fluxion._src.numpy.indexing import NonConcreteBooleanIndexError, take, take_along_axis

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
I = np.array  # noqa: E741

# Index expressions on X (shape (3, 4, 5)); each is compared with NumPy.
INDICES = [
    0, -1, (1, 2), (2, -1, 3), slice(None), slice(1, None), slice(None, None, -1),
    slice(None, None, 2), (slice(None), slice(1, None, 2), slice(None, None, -4)),
    (slice(None), slice(None, None, 2)), (slice(None, None, -2), 1, slice(4, 0, -3)),
    (Ellipsis, 2), (0, Ellipsis), (None, 0), (slice(1, 2), None, Ellipsis, None),
    (), Ellipsis, (slice(5, 10),), (slice(2, 1),),
    I([2, 0, 1]), I([-1, 0]), (I([0, 2]), I([1, 3])), (slice(None), I([0, 3]), I([1, 4])),
    (I([0, 1]), slice(None), I([1, 3])), (1, slice(None), I([0, 4, 2])),
    (slice(None), 1, I([[0, 1], [2, 3]])), (I([[0], [2]]), I([1, 3, 0])),
    (I([0, 2]), None, I([1, 3])), (slice(None), I([0]), None, I([2])),
    (slice(None, None, -1), I([0, 2])), (I([1, 1]), slice(3, 0, -1), 4),
    (Ellipsis, I([0, 2])), (I([], dtype=np.int32),), (I([0, 1, 2]), [1, 2, 3], [0, 0, 4]),
    X[:, 0, 0] > 10, (slice(None), X[0, :, 0] > 10), (X[..., 0] > 25,), X > 30,
    (X[:, :, 0] > 10, I([1, 2, 3, 4, 0, 1, 2, 3, 4])[:int((X[:, :, 0] > 10).sum())]),
    True, False, (0, True), (I([0, 1]), slice(None), True), (None, False, Ellipsis),
    np.int64(2), (np.int32(-1), np.uint8(3)), I(1), (I(2), slice(None), I([0, 1])),
    (make_array(I([2, 0], np.int32)), 1), make_array(np.int32(-2)),
    # An ellipsis standing for no dimension still parts the index arrays: their dimension
    # comes first, (2, 3) (the arrays were taken as adjacent: (3, 2)).
    (slice(None), I([0, 1]), Ellipsis, I([0, 1])), (slice(None), 0, Ellipsis, I([1, 2])),
]


@pytest.mark.parametrize("k", range(len(INDICES)))
def test_getitem_matches_numpy(k):
    idx = INDICES[k]
    out = make_array(X)[idx]
    expected = X[idx]
    assert out.shape == expected.shape
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(np.asarray(out), expected)


JIT_CASES = [
    (lambda x: x[0, 1:], ()),
    (lambda x: x[::-2, 1], ()),
    (lambda x, i, j: x[:, i, j], (I([0, 3]), I([1, 4]))),
    (lambda x, i, j: x[i, None, j], (I([[0], [2]]), I([1, 3, 0]))),
    (lambda x, i: x[..., i], (I([0, -2]),)),
    (lambda x: x[X[:, 0, 0] > 10], ()),
    (lambda x: x[0, True], ()),
]


@pytest.mark.parametrize("k", range(len(JIT_CASES)))
def test_getitem_jit_matches_numpy(k):
    fn, index_arrays = JIT_CASES[k]
    np.testing.assert_array_equal(np.asarray(fluxion.jit(fn)(X, *index_arrays)), fn(X, *index_arrays))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_getitem_random_basic_indices(data):
    shape = data.draw(st.sampled_from([(3, 4, 5), (6,), (2, 0, 3)]))
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    idx = []
    dim = 0
    ellipsis_used = False
    for _ in range(data.draw(st.integers(0, len(shape) + 2))):
        kind = data.draw(st.sampled_from(["int", "slice", "none", "ellipsis"]))
        if kind in ("int", "slice") and dim == len(shape):
            continue
        if kind == "int":
            if shape[dim] == 0:
                continue
            idx.append(data.draw(st.integers(-shape[dim], shape[dim] - 1)))
            dim += 1
        elif kind == "slice":
            bound = st.none() | st.integers(-8, 8)
            step = st.none() | st.integers(-3, 3).filter(lambda s: s != 0)
            idx.append(slice(data.draw(bound), data.draw(bound), data.draw(step)))
            dim += 1
        elif kind == "none":
            idx.append(None)
        elif not ellipsis_used:
            ellipsis_used = True
            idx.append(Ellipsis)
    idx = tuple(idx)
    try:
        expected = x[idx]
    except IndexError:  # after `...` the ints may land on other (shorter) dimensions
        assume(False)
    np.testing.assert_array_equal(np.asarray(make_array(x)[idx]), expected)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_advanced_indices_get_and_add(data):
    x = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    index_shape = data.draw(st.sampled_from([(2,), (3, 1), (1, 2), ()]))
    idx = []
    for size in x.shape:
        kind = data.draw(st.sampled_from(["array", "slice", "int"]))
        if kind == "array":
            values = data.draw(st.lists(st.integers(-size, size - 1), min_size=int(np.prod(index_shape)),
                                        max_size=int(np.prod(index_shape))))
            idx.append(np.array(values, np.int32).reshape(index_shape))
        elif kind == "slice":
            idx.append(slice(data.draw(st.integers(0, size)), None, data.draw(st.sampled_from([1, 2, -1]))))
        else:
            idx.append(data.draw(st.integers(-size, size - 1)))
        if data.draw(st.booleans()):
            idx.append(None)
    idx = tuple(idx)
    np.testing.assert_array_equal(np.asarray(make_array(x)[idx]), x[idx])
    expected = x.copy()
    np.add.at(expected, idx, 1)
    np.testing.assert_array_equal(np.asarray(make_array(x).at[idx].add(1)), expected)


def test_scalar_and_empty_arrays():
    s = make_array(np.float32(3))
    for idx in [(), None, Ellipsis, True, (None, Ellipsis, None)]:
        assert s[idx].shape == np.float32(3)[idx].shape
    assert float(s.at[()].set(1.0)) == 1.0
    e = make_array(np.zeros((0, 3), np.float32))
    for idx in [(slice(None), 1), (I([], np.int32),), (slice(None), I([0, 2])), (Ellipsis, -1)]:
        assert e[idx].shape == np.zeros((0, 3))[idx].shape
    with pytest.raises(IndexError, match="size 0"):
        e[0]
    with pytest.raises(IndexError, match="size 0"):
        e[I([0])]


# ---------------------------------------------------------------------------------------------
# Traced indices and out-of-bounds behaviour, against JAX

@pytest.mark.parametrize("i", [0, 2, -1, -3, 7, -9])
def test_traced_scalar_index(i):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ours = fluxion.jit(lambda x, i: x[i, 1:])(x, i)
    theirs = jax.jit(lambda x, i: x[i, 1:])(x, i)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    ours = fluxion.jit(lambda x, i: x[1, I([0, 3]), None][i])(x, i)
    theirs = jax.jit(lambda x, i: x[1, I([0, 3]), None][i])(x, i)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_traced_index_array_with_slices():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    idx = np.array([[2, -1], [0, 7]], np.int32)
    f = lambda x, i: x[1:, i, ::2]  # noqa: E731
    np.testing.assert_array_equal(np.asarray(fluxion.jit(f)(x, idx)), np.asarray(jax.jit(f)(x, idx)))
    g = lambda x, i, j: x[i, :, j]  # noqa: E731
    j = np.array([4, -2], np.int32)
    np.testing.assert_array_equal(np.asarray(fluxion.jit(g)(x, idx, j)),
                                  np.asarray(jax.jit(g)(x, idx, j)))


OOB = [10, -10, (slice(None), 9), I([7, -8, 2]), (I([0, 5]), I([-9, 3]))]


@pytest.mark.parametrize("k", range(len(OOB)))
@pytest.mark.parametrize("mode", [None, "clip", "fill"])
def test_out_of_bounds_get_matches_jax(k, mode):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    idx = OOB[k]
    ours = make_array(x).at[idx].get(mode=mode)
    theirs = jnp.asarray(x).at[idx].get(mode=mode)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize("k", range(len(OOB)))
@pytest.mark.parametrize("mode", [None, "clip", "drop"])
def test_out_of_bounds_set_matches_jax(k, mode):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    idx = OOB[k]
    ours = make_array(x).at[idx].set(-1.0, mode=mode)
    theirs = jnp.asarray(x).at[idx].set(-1.0, mode=mode)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_get_fill_value_and_unwrapped_negative_indices():
    x = make_array(np.arange(5, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(x.at[I([1, 9])].get(mode="fill", fill_value=-7)), [1, -7])
    np.testing.assert_array_equal(np.asarray(x.at[-1].set(99, wrap_negative_indices=False, mode="drop")),
                                  np.arange(5))
    np.testing.assert_array_equal(np.asarray(x.at[I([-1])].get(mode="fill", wrap_negative_indices=False)),
                                  [np.iinfo(np.int32).min])


# ---------------------------------------------------------------------------------------------
# Boolean masks

def test_concrete_mask_under_jit_and_traced_mask_error():
    x = np.arange(10, dtype=np.float32)
    mask = x % 3 == 0
    np.testing.assert_array_equal(np.asarray(fluxion.jit(lambda x: x[mask])(x)), x[mask])
    with pytest.raises(NonConcreteBooleanIndexError, match="concrete"):
        fluxion.jit(lambda x, m: x[m])(x, mask)
    with pytest.raises(IndexError):
        fluxion.jit(lambda x: x[x > 3])(x)
    with pytest.raises(NonConcreteBooleanIndexError):
        fluxion.jit(lambda x, m: x.at[m].set(0.0))(x, mask)


# ---------------------------------------------------------------------------------------------
# Errors

@pytest.mark.parametrize("idx, error, match", [
    (1.0, TypeError, "integer or boolean"),
    (I([1.5]), TypeError, "integer or boolean"),
    ([0, 1], TypeError, "non-tuple sequence"),
    ((0, 0, 0, 0), IndexError, "Too many indices"),
    ((Ellipsis, 0, Ellipsis), IndexError, "single ellipsis"),
    (X[0] > 3, IndexError, "did not match"),
    ("a", TypeError, "string"),
    (slice(0.5, 2), TypeError, "slice indices"),
])
def test_index_errors(idx, error, match):
    with pytest.raises(error, match=match):
        make_array(X)[idx]


def test_traced_slice_bound_and_setitem_errors():
    with pytest.raises(IndexError, match="static start/stop/step"):
        fluxion.jit(lambda x, i: x[i:])(X, 1)
    with pytest.raises(TypeError, match="immutable"):
        make_array(X)[0] = 1.0


# ---------------------------------------------------------------------------------------------
# Jaxpr structure, against JAX

@pytest.mark.parametrize("fn", [
    lambda x: x[0], lambda x: x[1:, None], lambda x: x[::-2, 1], lambda x: x[-1],
    lambda x: x[None, ..., None], lambda x: x[1, 2:0:-1],
])
def test_basic_index_jaxpr_matches_jax(fn):
    x = np.ones((3, 4), np.float32)
    ours = [e.primitive.name for e in fluxion.make_jaxpr(fn)(x).eqns]
    theirs = [e.primitive.name for e in jax.make_jaxpr(fn)(x).eqns]
    assert ours == theirs


@pytest.mark.parametrize("fn, expected", [
    (lambda x: x[I([1, 2])], ["gather"]),
    (lambda x: x[:, I([0, -2])], ["gather"]),
    (lambda x: x[I([[0], [1]]), None, I([0, 2])], ["gather", "broadcast_in_dim"]),
])
def test_static_index_arrays_fold_into_one_gather(fn, expected):
    x = np.ones((3, 4), np.float32)
    assert [e.primitive.name for e in fluxion.make_jaxpr(fn)(x).eqns] == expected


def test_traced_int_uses_dynamic_slice():
    names = [e.primitive.name for e in fluxion.make_jaxpr(lambda x, i: x[i])(X, 1).eqns]
    assert "dynamic_slice" in names and "gather" not in names


# ---------------------------------------------------------------------------------------------
# .at[] updates, against NumPy

UPDATE_INDICES = [1, (slice(None), 2), I([0, 2, 0]), (I([0, 0, 1]), slice(1, 3), I([4, 4, 0])),
                  (Ellipsis, I([1, 1])), (slice(None, None, -1), None, 3), X[:, :, 0] > 20,
                  (slice(None), I([0, 1]), Ellipsis, I([0, 1]))]


def _numpy_at(ufunc, x, idx, values):
    out = x.copy()
    target_shape = x[idx].shape
    ufunc.at(out, idx, np.broadcast_to(values, target_shape))
    return out


@pytest.mark.parametrize("k", range(len(UPDATE_INDICES)))
@pytest.mark.parametrize("method, ufunc", [("add", np.add), ("multiply", np.multiply),
                                           ("min", np.minimum), ("max", np.maximum),
                                           ("subtract", np.subtract)])
def test_at_updates_match_numpy_ufunc_at(k, method, ufunc, rng):
    idx = UPDATE_INDICES[k]
    values = rng.integers(-5, 5, size=X[idx].shape[-1:]).astype(np.float32)
    out = getattr(make_array(X).at[idx], method)(values)
    np.testing.assert_array_equal(np.asarray(out), _numpy_at(ufunc, X, idx, values))


# Without repeated positions: which of several sets to one position wins is unspecified.
SET_INDICES = [1, (slice(None), 2), I([0, 2]), (I([0, 1]), slice(1, 3), I([4, 0])),
               (Ellipsis, I([1, 3])), (slice(None, None, -1), None, 3), X[:, :, 0] > 20,
               (slice(None, None, 2), I([[1], [3]]), 0),
               (slice(None), I([0, 1]), Ellipsis, I([0, 1]))]


@pytest.mark.parametrize("k", range(len(SET_INDICES)))
def test_at_set_matches_numpy(k, rng):
    idx = SET_INDICES[k]
    values = rng.standard_normal(X[idx].shape).astype(np.float32)
    expected = X.copy()
    expected[idx] = values
    np.testing.assert_array_equal(np.asarray(make_array(X).at[idx].set(values)), expected)
    jitted = fluxion.jit(lambda x, v: x.at[idx].set(v))(X, values)
    np.testing.assert_array_equal(np.asarray(jitted), expected)


@pytest.mark.parametrize("method", ["divide", "power", "apply", "get", "mul"])
def test_at_other_methods_match_jax(method):
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    idx = (I([0, 2, 0]), slice(1, 3))
    args = {"divide": (2,), "power": (2,), "apply": (lambda v: v * 3 + 1,), "get": (),
            "mul": (3,)}[method]
    ours = getattr(make_array(x).at[idx], method)(*args)
    theirs = getattr(jnp.asarray(x).at[idx], method)(*args)
    assert ours.dtype == theirs.dtype and ours.weak_type == theirs.weak_type
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_at_keeps_dtype_and_weak_type_like_jax():
    weak = make_array(np.zeros(4, np.float32), weak_type=True)
    out = weak.at[1].set(2)
    assert out.dtype == np.float32 and out.weak_type
    strong = make_array(np.zeros(4, np.int8))
    out = strong.at[1].add(300)
    theirs = jnp.zeros(4, jnp.int8).at[1].add(300)
    assert out.dtype == theirs.dtype and not out.weak_type
    np.testing.assert_array_equal(np.asarray(out), np.asarray(theirs))
    with pytest.raises(ValueError, match="broadcast"):
        make_array(np.zeros((2, 3), np.float32)).at[0].set(np.ones((2, 3), np.float32))


def test_tracer_iteration_and_at_under_jit():
    def f(x):
        rows = list(x)
        return rows[0] + rows[-1], x.at[0, :].add(rows[1])
    first_plus_last, updated = fluxion.jit(f)(X[0])
    np.testing.assert_array_equal(np.asarray(first_plus_last), X[0][0] + X[0][-1])
    expected = X[0].copy()
    expected[0, :] += X[0][1]
    np.testing.assert_array_equal(np.asarray(updated), expected)


# ---------------------------------------------------------------------------------------------
# take and take_along_axis

@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("mode", [None, "clip", "wrap", "fill"])
def test_take_matches_jax(axis, mode):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = np.array([[0, 5], [-1, -7], [2, 1]], np.int32)
    ours = take(a, indices, axis=axis, mode=mode)
    theirs = jnp.take(a, indices, axis=axis, mode=mode)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_take_in_bounds_matches_numpy_and_jit():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    indices = np.array([3, -1, 0], np.int32)
    np.testing.assert_array_equal(np.asarray(take(a, indices, axis=2)), np.take(a, indices, axis=2))
    jitted = fluxion.jit(lambda a, i: take(a, i, axis=1, fill_value=-5))(a, np.array([[0, 4]], np.int32))
    np.testing.assert_array_equal(np.asarray(jitted)[:, 0, 1], np.full((2, 4), -5))
    assert take(a, np.zeros((0,), np.int32), axis=1).shape == (2, 0, 4)
    with pytest.raises(NotImplementedError, match="raise"):
        take(a, indices, mode="raise")
    with pytest.raises(ValueError, match="integer"):  # JAX 0.10.2 raises ValueError
        take(a, np.array([1.0]))


@pytest.mark.parametrize("arr_shape, idx_shape, axis", [
    ((3, 4), (3, 2), 1), ((3, 4), (1, 2), 1), ((3, 4), (5, 4), 0), ((1, 4), (3, 2), 1),
    ((2, 3, 4), (2, 1, 4), 1), ((2, 3, 4), (1, 3, 5), -1), ((5,), (7,), None), ((3, 0), (3, 2), 1),
])
def test_take_along_axis_matches_jax(arr_shape, idx_shape, axis, rng):
    arr = rng.standard_normal(arr_shape).astype(np.float32)
    size = arr.size if axis is None else arr_shape[axis]
    indices = rng.integers(-size - 2, size + 2, size=idx_shape).astype(np.int32)
    ours = take_along_axis(arr, indices, axis=axis)
    theirs = jnp.take_along_axis(arr, indices, axis=axis)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    if size:
        in_bounds = np.clip(indices, -size, size - 1)
        np.testing.assert_array_equal(np.asarray(take_along_axis(arr, in_bounds, axis=axis)),
                                      np.take_along_axis(arr, in_bounds, axis=axis))


def test_take_along_axis_jit_and_errors():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.argsort(-arr, axis=1).astype(np.int32)
    jitted = fluxion.jit(lambda a, i: take_along_axis(a, i, axis=1))(arr, idx)
    np.testing.assert_array_equal(np.asarray(jitted), np.take_along_axis(arr, idx, axis=1))
    with pytest.raises(ValueError, match="same number of dimensions"):
        take_along_axis(arr, np.zeros(3, np.int32), axis=0)
    with pytest.raises(TypeError, match="integer"):
        take_along_axis(arr, np.zeros((3, 1)), axis=0)


@pytest.mark.parametrize("x_shape, mask_shape", [((3,), (0,)), ((3, 4), (0,)), ((3, 4), (0, 4)),
                                                 ((3, 4), (3, 0)), ((3, 4, 5), (3, 0))])
def test_empty_boolean_mask_may_face_any_size(x_shape, mask_shape):
    # A size-0 mask dimension against a non-empty one raised IndexError (NumPy and JAX accept).
    x = np.arange(np.prod(x_shape), dtype=np.int32).reshape(x_shape)
    mask = np.empty(mask_shape, bool)
    want = x[mask]
    got = fluxion.numpy.asarray(x)[mask]
    assert got.shape == want.shape == jnp.asarray(x)[mask].shape
    np.testing.assert_array_equal(fluxion.numpy.asarray(x).at[mask].set(7), x)
    with pytest.raises(IndexError):
        fluxion.numpy.asarray(x)[np.empty((2,) + mask_shape[1:], bool)]


@pytest.mark.parametrize("idx, meant", [([0], "array"), ([0, 0], "array"), ([[0, 0]], "tuple"),
                                        ([0, [0, 1]], "tuple"), ([0, np.arange(2)], "tuple"),
                                        ([0, None], "tuple"), ([0, slice(None)], "tuple")])
def test_list_index_error_suggests_what_was_meant(idx, meant):
    # The message always suggested arr[array(seq)], also for lists of index-tuple parts.
    x = fluxion.numpy.arange(6).reshape(3, 2)
    message = rf"use `arr\[{meant}\(seq\)\]`"
    with pytest.raises(TypeError, match=message):
        x[idx]
    with pytest.raises(TypeError, match=message):
        x.at[idx].set(0)
    with pytest.raises(TypeError, match=message):
        jnp.arange(6).reshape(3, 2)[idx]


@pytest.mark.parametrize("x_shape, i_shape, axis", [((3, 4), (3, 6), 1), ((3, 4), (5, 4), 0),
                                                    ((2, 1, 4), (2, 3, 4), 1), ((12,), (5,), None)])
@pytest.mark.parametrize("kwargs", [dict(mode="one_hot"),
                                    dict(mode="one_hot", wrap_negative_indices=False),
                                    dict(mode="clip", wrap_negative_indices=False),
                                    dict(mode="fill", wrap_negative_indices=False)])
def test_take_along_axis_one_hot_mode_and_wrap_negative_indices(x_shape, i_shape, axis, kwargs):
    # mode='one_hot' raised ValueError and wrap_negative_indices was an unknown keyword.
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    n = x.size if axis is None else x_shape[axis]
    i = rng.integers(-n - 2, n + 2, i_shape).astype(np.int32)
    want = jnp.take_along_axis(x, i, axis=axis, **kwargs)
    def take(x, i):
        return take_along_axis(x, i, axis=axis, **kwargs)
    for fn in (take, fluxion.jit(take)):
        got = fn(x, i)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


@pytest.mark.parametrize("index", [lambda i: (i, [0, i]), lambda i: ([[i], [0]], [0, 1]),
                                   lambda i: (1, [0, i + 2])])
def test_index_lists_holding_traced_scalars(index):
    # A list with a traced element went to np.asarray: TracerArrayConversionError.
    x = np.arange(10.0).reshape(2, 5)
    want = jnp.asarray(x)[index(jnp.asarray(1))]
    got = fluxion.jit(lambda v, i: v[index(i)])(x, 1)
    np.testing.assert_array_equal(got, want)
    got_set = fluxion.jit(lambda v, i: fluxion.numpy.asarray(v).at[index(i)].set(-1.0))(x, 1)
    np.testing.assert_array_equal(got_set, jnp.asarray(x).at[index(jnp.asarray(1))].set(-1.0))


@pytest.mark.parametrize("idx", [(Ellipsis, slice(1, None), slice(None)), (Ellipsis, 0),
                                 (0, Ellipsis), (Ellipsis, None, 1), (1, Ellipsis, [1, 2]),
                                 (slice(None), [0, 1], Ellipsis, [0, 1])])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)])
def test_ellipsis_for_no_dimension_in_reads_and_updates(idx, shape):
    # An ellipsis standing for no dimension (x[..., 1:, :] of a 2-d x) broke .at[] updates.
    import fluxion.numpy as fnp
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    try:
        want = jnp.asarray(x)[idx]
    except IndexError:
        return
    np.testing.assert_array_equal(np.asarray(fnp.asarray(x)[idx]), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(fnp.asarray(x).at[idx].add(1.0)),
                                  np.asarray(jnp.asarray(x).at[idx].add(1.0)))
