"""Eager `x[idx]` and `x.at[idx].<op>(v)` run one cached executable per index structure
(`indexing._eager_index`, `eager.run_compiled`). Checked against JAX (values, dtypes, weak
types), against fluxion's general path (op by op, under disable_jit), and for what they
compile: another integer position runs the same executable."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion._src.numpy import eager

_X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) - 7.5
_I = np.array([2, 0, -1, 1], np.int32)


def _fx(index_fn, x):
    """index_fn on fluxion values: Arrays where the oracle gets JAX arrays."""
    return index_fn(fnp.asarray(x), fnp.asarray, fnp)


def _jx(index_fn, x):
    return index_fn(jnp.asarray(x), jnp.asarray, jnp)


def _same(ours, theirs):
    assert ours.dtype == theirs.dtype
    assert ours.aval.weak_type == theirs.aval.weak_type
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


READS = {
    "int": lambda x, A, m: x[1],
    "negative_int": lambda x, A, m: x[-1],
    "int_past_end": lambda x, A, m: x[7],  # clamped, as in JAX
    "int_before_start": lambda x, A, m: x[-9],
    "two_ints": lambda x, A, m: x[1, -2],
    "three_ints": lambda x, A, m: x[0, 2, 3],
    "slices": lambda x, A, m: x[:, 1:3, ::2],
    "reversed": lambda x, A, m: x[::-1, ::-2],
    "empty_slice": lambda x, A, m: x[:, 2:1],
    "newaxis": lambda x, A, m: x[None],
    "newaxis_inside": lambda x, A, m: x[:, None, 1],
    "ellipsis_int": lambda x, A, m: x[..., 2],
    "ellipsis_alone": lambda x, A, m: x[...],
    "ellipsis_none": lambda x, A, m: x[..., None, 0],
    "array": lambda x, A, m: x[A(_I[:2])],
    "array_negative": lambda x, A, m: x[:, A(_I)],
    "array_out_of_bounds": lambda x, A, m: x[:, A(np.array([5, -9], np.int32))],
    "array_and_int_apart": lambda x, A, m: x[A(_I[:2]), :, 1],  # NumPy: advanced dims first
    "array_and_int_adjacent": lambda x, A, m: x[:, A(_I), 1],
    "arrays_broadcast": lambda x, A, m: x[A(np.array([[0], [1]], np.int32)), A(_I[:3])],
    "uint8_array": lambda x, A, m: x[:, A(np.array([2, 1], np.uint8))],
    "array_2d_last": lambda x, A, m: x[..., A(np.array([[3, 0], [1, 2]], np.int32))],
    "moving_slices": lambda x, A, m: x[1:, -3:-1, 1:3],
    "moving_slice_past_end": lambda x, A, m: x[:, 2:9],
    "moving_slice_before_start": lambda x, A, m: x[-9:1],
    "moving_slice_empty": lambda x, A, m: x[:, 3:1, 2:2],
    "moving_slice_step_one": lambda x, A, m: x[:, 1:3:1, ::-1],
    "moving_slice_after_ellipsis": lambda x, A, m: x[None, ..., 2:, None],
    "moving_slice_between_arrays": lambda x, A, m: x[A(_I[:2]), 1:3, A(np.array([3, 0], np.int32))],
    "moving_slice_and_int": lambda x, A, m: x[1, 1:, -1],
    "tuple_of_one": lambda x, A, m: x[(1,)],
    "empty_tuple": lambda x, A, m: x[()],
}


@pytest.mark.parametrize("name", sorted(READS))
def test_reads_match_jax_and_the_general_path(name, x64_mode):
    fn = READS[name]
    ours = _fx(fn, _X)
    _same(ours, _jx(fn, _X))
    with fluxion.disable_jit():
        _same(ours, _fx(fn, _X))


UPDATES = {
    "set_int": lambda x, A, m: x.at[1].set(5.0),
    "set_negative_int": lambda x, A, m: x.at[-1, 0].set(A(np.arange(4, dtype=np.float32))),
    "set_past_end_dropped": lambda x, A, m: x.at[9].set(1.0),
    "add_array": lambda x, A, m: x.at[:, A(np.array([0, 0, 2], np.int32))].add(1.0),
    "add_broadcast_values": lambda x, A, m: x.at[..., 1].add(A(np.ones(3, np.float32))),
    "multiply_slice": lambda x, A, m: x.at[:, 1:].multiply(2),
    "min": lambda x, A, m: x.at[0, :, 1].min(-100.0),
    "max_array": lambda x, A, m: x.at[A(_I[:2]), 1].max(0.0),
    "subtract_newaxis": lambda x, A, m: x.at[None, 1].subtract(1),
    "set_numpy_values": lambda x, A, m: x.at[0, 0].set(np.array([1, 2, 3, 4], np.float32)),
    "set_mode_clip": lambda x, A, m: x.at[9].set(3.0, mode="clip"),
    "set_promise": lambda x, A, m: x.at[1].set(2.0, mode="promise_in_bounds",
                                                unique_indices=True),
    "get_fill": lambda x, A, m: x.at[A(np.array([0, 5], np.int32))].get(mode="fill",
                                                                       fill_value=-1.0),
    "get_fill_int": lambda x, A, m: x.at[:, 7].get(mode="fill", fill_value=3),
    "get_fill_default": lambda x, A, m: x.at[-5].get(mode="fill"),
    "get_clip": lambda x, A, m: x.at[1, A(np.array([9, -9], np.int32))].get(mode="clip"),
    "get_plain": lambda x, A, m: x.at[..., 1:3].get(),
    "get_moving_fill": lambda x, A, m: x.at[1:, A(np.array([0, 9], np.int32))].get(
        mode="fill", fill_value=-1.0),
    "get_sorted_unique": lambda x, A, m: x.at[:, A(np.array([0, 2], np.int32))].get(
        indices_are_sorted=True, unique_indices=True),
    "get_no_wrap": lambda x, A, m: x.at[0, -1].get(wrap_negative_indices=False),
}


@pytest.mark.parametrize("name", sorted(UPDATES))
def test_updates_match_jax_and_the_general_path(name, x64_mode):
    fn = UPDATES[name]
    ours = _fx(fn, _X)
    _same(ours, _jx(fn, _X))
    with fluxion.disable_jit():
        _same(ours, _fx(fn, _X))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.uint32, np.bool_, np.float16])
@pytest.mark.parametrize("value", [200, -3, 3_000_000_000, 2.75, True])
def test_update_values_convert_as_in_jax(dtype, value, x64_mode):
    x = np.zeros(4, dtype)
    try:
        expected = jnp.asarray(x).at[1].set(value)
    except Exception as e:
        with pytest.raises(type(e)):
            fnp.asarray(x).at[1].set(value)
        return
    _same(fnp.asarray(x).at[1].set(value), expected)


def _compiled(fun):
    return sum(1 for k in eager._structured if k[0] is fun)


def test_another_int_position_runs_the_same_executable():
    from fluxion._src.numpy import indexing
    x = fnp.asarray(np.arange(50.0, dtype=np.float32).reshape(10, 5))
    x[0], x.at[0].add(1.0)
    reads, updates = _compiled(indexing._get_program), _compiled(indexing._update_program)
    for i in range(-10, 10):
        np.testing.assert_array_equal(np.asarray(x[i]), np.asarray(x)[i])
        np.testing.assert_array_equal(np.asarray(x.at[i].add(1.0))[i], np.asarray(x)[i] + 1)
    assert _compiled(indexing._get_program) == reads
    assert _compiled(indexing._update_program) == updates
    x.at[5].get()  # `x[idx]` is `x.at[idx].get()`: the same executable
    assert _compiled(indexing._get_program) == reads
    x[0:3]  # a unit-step slice: its start is an argument too (minibatches in a loop)
    reads = _compiled(indexing._get_program)
    for i in range(8):
        np.testing.assert_array_equal(np.asarray(x[i:i + 3]), np.asarray(x)[i:i + 3])
    assert _compiled(indexing._get_program) == reads


def test_indices_the_general_path_serves():
    x = fnp.asarray(_X)
    mask = _X > 0
    np.testing.assert_array_equal(np.asarray(x[fnp.asarray(mask)]), _X[mask])  # a bool mask
    np.testing.assert_array_equal(np.asarray(x[mask]), _X[mask])
    np.testing.assert_array_equal(np.asarray(x[np.int64(1)]), _X[1])
    np.testing.assert_array_equal(np.asarray(x[np.array([1, 0])]), _X[[1, 0]])
    np.testing.assert_array_equal(np.asarray(x[:, [2, 0]]), _X[:, [2, 0]])
    np.testing.assert_array_equal(np.asarray(x[True]), _X[True])
    np.testing.assert_array_equal(np.asarray(x.at[0, 0, 0].apply(lambda v: v * 10))[0, 0, 0],
                                  _X[0, 0, 0] * 10)
    with pytest.raises(IndexError, match="Too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(TypeError, match="integer or boolean type"):
        x[fnp.asarray([0.5])]
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        fnp.zeros((0, 3))[0]


def test_errors_point_at_the_callers_line():
    x = fnp.asarray(_X)
    with pytest.raises(ValueError) as info:
        x.at[0].set(fnp.ones(5))  # values of the wrong shape
    assert info.traceback[-1].path.name != "eager.py"
    with pytest.raises(TypeError):
        x.at[0].set("a")


def test_deleted_array_is_a_clear_error():
    x = fnp.asarray(_X)
    x[1]  # compiled
    x.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        x[1]
    with pytest.raises(RuntimeError, match="deleted"):
        x.at[1].set(0.0)


def test_under_transformations_the_index_is_traced():
    x = fnp.asarray(_X)
    jaxpr = fluxion.make_jaxpr(lambda y: y[1] + x[0])(x)
    assert "getitem" not in str(jaxpr) and "pjit" not in str(jaxpr)
    g = fluxion.grad(lambda y: y.at[1].multiply(3.0)[1, 0, 0] + y[0, 1, 2])(x)
    expected = np.zeros_like(_X)
    expected[1, 0, 0], expected[0, 1, 2] = 3.0, 1.0
    np.testing.assert_array_equal(np.asarray(g), expected)
    out = fluxion.vmap(lambda y, i: y[i])(x, fnp.asarray(np.array([2, 0], np.int32)))
    np.testing.assert_array_equal(np.asarray(out), np.stack([_X[0, 2], _X[1, 0]]))


_CASTS = [  # (array dtype, update values)
    (np.int32, 2.5), (np.int32, 3), (np.bool_, 3), (np.bool_, True), (np.uint8, 200),
    (np.float16, 2.5), (np.int32, np.float16(1)), (np.float32, np.complex64(1)),
    (np.int16, np.int32(1)), (np.int32, [1.5]), (np.int32, (1, 2))]


@pytest.mark.parametrize("dtype,values", _CASTS, ids=[f"{np.dtype(d)}-{v!r}" for d, v in _CASTS])
def test_unsafe_update_casts_warn_as_in_jax(dtype, values, x64_mode):
    import warnings

    def updated(mod):
        x = mod.zeros(3, dtype)
        index = slice(None, len(values)) if isinstance(values, (list, tuple)) else 0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = x.at[index].set(values if mod is fnp or not isinstance(values, tuple)
                                  else list(values))
        return out, [(str(w.message), w.filename) for w in caught
                     if issubclass(w.category, FutureWarning)]
    (ours, ours_warned), (theirs, theirs_warned) = updated(fnp), updated(jnp)
    _same(ours, theirs)
    assert [m for m, _ in ours_warned] == [m for m, _ in theirs_warned]
    assert all(f == __file__ for _, f in ours_warned)  # the user's line


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64])
def test_numpy_index_arrays_match_jax(dtype, x64_mode):
    x = np.arange(40.0, dtype=np.float32).reshape(8, 5)
    for values in ([1, 0, 7], [3], [], [[1, 2], [0, 0]]):
        index = np.array(values, dtype)
        _same(fnp.asarray(x)[index], jnp.asarray(x)[index])
        _same(fnp.asarray(x)[:, index % 5], jnp.asarray(x)[:, index % 5])
        _same(fnp.asarray(x).at[index].add(1.0), jnp.asarray(x).at[index].add(1.0))
    if dtype in (np.uint32, np.int64, np.uint64):  # values past int32 wrap into the index
        big = np.array([2**31 + 3, 1], dtype)     # type first, as in JAX
        _same(fnp.asarray(x)[big], jnp.asarray(x)[big])
        _same(fnp.asarray(x).at[big].add(1.0), jnp.asarray(x).at[big].add(1.0))
        with fluxion.disable_jit():
            _same(fnp.asarray(x)[big], jnp.asarray(x)[big])
    if np.dtype(dtype).kind == "i":
        _same(fnp.asarray(x)[np.array([-1, -8, -20], dtype)],
              jnp.asarray(x)[np.array([-1, -8, -20], dtype)])


_STATIC_CHECKS = [((2,), -4), ((2,), 4), ((2, 3), np.index_exp[:, 4]),
                  ((2, 3), np.index_exp[..., -4]), ((2, 3, 5), np.index_exp[3, :, 0]),
                  ((2, 3, 5), np.index_exp[:5, :, 6]), ((2, 3, 5), np.index_exp[:, [1, 2], 6]),
                  ((2, 3, 5), np.index_exp[np.arange(3), 6, None]), ((2, 3), (1, 2, 3)),
                  ((2,), 1), ((2,), np.int64(5))]


def _outcomes(lib, m, shape, idx):
    arr = m.zeros(shape)
    calls = (lambda: arr[idx], lambda: lib.jit(lambda x: x[idx])(arr),
             lambda: arr.at[idx].get(), lambda: arr.at[idx].get(mode="clip"),
             lambda: arr.at[idx].set(1.0))
    out = []
    for call in calls:
        try:
            out.append(np.asarray(call()).tolist())
        except Exception as e:
            out.append(f"{type(e).__name__}: {e}")
    return out


@pytest.mark.parametrize("shape,idx", _STATIC_CHECKS)
def test_check_static_indices_flag_as_in_jax(shape, idx):
    """`jax_check_static_indices`: static ints out of bounds raise IndexError on reads whose
    mode is None or promise_in_bounds (not on clipped reads nor updates)."""
    for lib in (jax, fluxion):
        lib.config.update("jax_check_static_indices", True)
    try:
        assert _outcomes(fluxion, fnp, shape, idx) == _outcomes(jax, jnp, shape, idx)
    finally:
        for lib in (jax, fluxion):
            lib.config.update("jax_check_static_indices", False)
    fnp.zeros(shape)[0]  # off again: out of bounds or not, the eager path serves it


TAKES = {
    "take_device": lambda x, A, m: m.take(x, A(np.array([0, -1, 2], np.int32)), axis=1),
    "take_host": lambda x, A, m: m.take(x, np.array([[1, 0], [3, 9]]), axis=2),
    "take_flat": lambda x, A, m: m.take(x, A(np.array([5, 30], np.int32))),
    "take_clip": lambda x, A, m: m.take(x, np.array([7, -7]), axis=0, mode="clip"),
    "take_wrap": lambda x, A, m: m.take(x, A(np.array([7, -7], np.int32)), axis=1, mode="wrap"),
    "take_fill": lambda x, A, m: m.take(x, A(np.array([1, 4], np.int32)), axis=2, mode="fill",
                                        fill_value=-2.0),
    "take_scalar": lambda x, A, m: m.take(x, 1, axis=0),
    "along": lambda x, A, m: m.take_along_axis(
        x, A(np.array([[[0, 3]], [[1, -2]]], np.int32)), axis=2),
    "along_none": lambda x, A, m: m.take_along_axis(x, A(np.array([0, 23, 30], np.int32)),
                                                    axis=None),
    "along_clip": lambda x, A, m: m.take_along_axis(x, np.full((2, 3, 1), 9), axis=-1,
                                                    mode="clip"),
}


@pytest.mark.parametrize("name", sorted(TAKES))
def test_take_runs_cached_and_matches_jax(name, x64_mode):
    fn = TAKES[name]
    ours = _fx(fn, _X)
    _same(ours, _jx(fn, _X))
    _same(_fx(fn, _X), ours)  # the cached executable
    with fluxion.disable_jit():
        _same(_fx(fn, _X), ours)


@pytest.mark.parametrize("call", [
    lambda m, x: m.take(x, np.array([0.5]), axis=0),
    lambda m, x: m.take(x, [0, 1], axis=0),
    lambda m, x: m.take(x, np.array([0]), axis=5),
    lambda m, x: m.take(m.zeros((0, 3)), np.array([0]), axis=0),
    lambda m, x: m.take_along_axis(x, np.zeros((2, 3), np.int32), axis=0),
    lambda m, x: m.take_along_axis(x, np.zeros((2, 3, 1)), axis=0),
])
def test_take_errors_as_in_jax(call):
    with pytest.raises(Exception) as theirs:
        call(jnp, jnp.asarray(_X))
    for _ in range(2):
        with pytest.raises(type(theirs.value)):
            call(fnp, fnp.asarray(_X))


@pytest.mark.parametrize("call", [
    lambda m: m.zeros(0).at[0].set(1.0),
    lambda m: m.zeros((2, 0)).at[:, 0].add(1.0),
    lambda m: m.zeros((0, 3)).at[-1].set(1.0),
    lambda m: m.zeros((0, 3)).at[m.asarray(0)].multiply(2.0),
    lambda m: m.zeros((0, 3)).at[0].get(mode="fill"),
    lambda m: m.zeros((0, 3))[0],
])
def test_an_int_index_of_an_empty_axis_is_an_index_error(call):
    """JAX raises IndexError for an integer index (static or traced) of an axis of size 0,
    for updates and reads in any mode; fluxion dropped such updates silently."""
    with pytest.raises(IndexError, match="out of bounds for axis . with size 0") as theirs:
        call(jnp)
    with pytest.raises(IndexError, match=str(theirs.value)):
        call(fnp)
    with pytest.raises(IndexError, match=str(theirs.value)):
        fluxion.jit(lambda: call(fnp))()
    np.testing.assert_array_equal(fnp.zeros((3, 0)).at[0].set(1.0), np.zeros((3, 0)))


def _random_index(rnd, shape):
    items = []
    for i in range(rnd.randint(1, len(shape) + 1)):
        size, kind = shape[min(i, len(shape) - 1)], rnd.random()
        if kind < 0.25:
            items.append(rnd.randint(-size - 2, size + 2))
        elif kind < 0.6:
            bound = lambda: rnd.choice([None, rnd.randint(-size - 3, size + 3)])  # noqa: E731
            items.append(slice(bound(), bound(), rnd.choice([None, 1, 1, 2, -1, -2, 3])))
        elif kind < 0.7:
            items.append(None)
        elif kind < 0.78 and not any(i is Ellipsis for i in items):
            items.append(Ellipsis)
        elif size:
            values = np.array([rnd.randint(-size, size - 1) for _ in range(rnd.randint(0, 3))],
                              np.int32)
            items.append(("device", values) if rnd.random() < 0.5 else values)
    return items


def test_random_indices_match_jax():
    """Random index tuples (ints in and out of bounds, slices of any step, None, Ellipsis,
    device and NumPy index arrays) on random shapes, empty axes included: reads and updates
    give JAX's values, dtypes and weak types, or an error where JAX raises one."""
    import random
    rnd = random.Random(0)
    for _ in range(150):
        shape = tuple(rnd.randint(0, 4) for _ in range(rnd.randint(1, 3)))
        x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
        items = _random_index(rnd, shape)
        op = rnd.choice(["read", "get", "set", "add"])

        def run(m):
            index = tuple(m.asarray(i[1]) if isinstance(i, tuple) else i for i in items)
            a = m.asarray(x)
            return {"read": lambda: a[index], "get": lambda: a.at[index].get(),
                    "set": lambda: a.at[index].set(7.0), "add": lambda: a.at[index].add(1.0)}[op]()
        try:
            theirs = run(jnp)
        except Exception:
            with pytest.raises(Exception):
                run(fnp)
            continue
        _same(run(fnp), theirs)
        _same(run(fnp), theirs)  # the cached executable
