"""fluxion.numpy shape manipulation, padding and sorting against NumPy; jit against eager."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

# name: function of (module, x) for the (2, 3, 4) array x; results are arrays or lists of them.
CASES = {
    "reshape": lambda m, x: m.reshape(x, (4, -1)),
    "reshape_F": lambda m, x: m.reshape(x, (6, 4), order="F"),
    "reshape_int": lambda m, x: m.reshape(x, -1),
    "ravel_F": lambda m, x: m.ravel(x, order="F"),
    "transpose": lambda m, x: m.transpose(x),
    "transpose_axes": lambda m, x: m.transpose(x, (1, -1, 0)),
    "swapaxes": lambda m, x: m.swapaxes(x, 0, 2),
    "moveaxis": lambda m, x: m.moveaxis(x, (0, 1), (-1, 0)),
    "expand_dims": lambda m, x: m.expand_dims(x, (0, -1)),
    "squeeze": lambda m, x: m.squeeze(m.expand_dims(x, (1, 3)), axis=1),
    "squeeze_all": lambda m, x: m.squeeze(x[:1, :, :1]),
    "concatenate": lambda m, x: m.concatenate([x, x[:1]], axis=0),
    "concatenate_none": lambda m, x: m.concatenate([x[0], x[1, :1]], axis=None),
    "stack": lambda m, x: m.stack([x[0], x[1]], axis=-1),
    "vstack": lambda m, x: m.vstack([x[0], x[1, 0]]),
    "hstack": lambda m, x: m.hstack([x[0, 0], x[1, 1]]),
    "dstack": lambda m, x: m.dstack([x[0], x[1]]),
    "column_stack": lambda m, x: m.column_stack([x[0, :, 0], x[1, :, :2]]),
    "append": lambda m, x: m.append(x[0], x[1], axis=1),
    "split": lambda m, x: m.split(x, [1, 3], axis=2),
    "split_sections": lambda m, x: m.split(x, 3, axis=1),
    "array_split": lambda m, x: m.array_split(x, 3, axis=2),
    "hsplit": lambda m, x: m.hsplit(x[0], 2),
    "tile": lambda m, x: m.tile(x[0], (2, 1, 2)),
    "repeat": lambda m, x: m.repeat(x, 2, axis=1),
    "repeat_flat": lambda m, x: m.repeat(x[0, 0], 3),
    "repeat_counts": lambda m, x: m.repeat(x[0], np.array([1, 0, 3]), axis=0),
    "flip": lambda m, x: m.flip(x, (0, 2)),
    "flip_all": lambda m, x: m.flip(x),
    "fliplr": lambda m, x: m.fliplr(x),
    "flipud": lambda m, x: m.flipud(x),
    "rot90": lambda m, x: m.rot90(x[0], 3),
    "roll": lambda m, x: m.roll(x, 5),
    "roll_axes": lambda m, x: m.roll(x, (1, -2), axis=(0, 2)),
    "broadcast_to": lambda m, x: m.broadcast_to(x[:, :1], (3, 2, 3, 4)),
    "broadcast_arrays": lambda m, x: m.broadcast_arrays(x[0, :, :1], x[1, :1]),
    "atleast_2d": lambda m, x: m.atleast_2d(x[0, 0]),
    "atleast_3d": lambda m, x: m.atleast_3d(x[0]),
    "pad_constant": lambda m, x: m.pad(x, ((0, 1), (2, 0), (1, 1)), constant_values=-1),
    "pad_values": lambda m, x: m.pad(x[0], ((1, 2), (0, 1)), constant_values=((5, 6), (7, 8))),
    "pad_edge": lambda m, x: m.pad(x, 2, mode="edge"),
    "pad_wrap": lambda m, x: m.pad(x[0], ((4, 5), (1, 6)), mode="wrap"),
    "pad_reflect": lambda m, x: m.pad(x[0], ((5, 4), (7, 1)), mode="reflect"),
    "pad_symmetric": lambda m, x: m.pad(x[0], ((4, 5), (3, 9)), mode="symmetric"),
    "pad_reflect_odd": lambda m, x: m.pad(x[0], ((2, 1), (3, 2)), mode="reflect", reflect_type="odd"),
    "pad_symmetric_odd": lambda m, x: m.pad(x[0], 2, mode="symmetric", reflect_type="odd"),
    "pad_empty_axis": lambda m, x: m.pad(x[:, :0], 1),
    "pad_reflect_odd_long": lambda m, x: m.pad(x[0], ((7, 5), (4, 9)), mode="reflect", reflect_type="odd"),
    "pad_symmetric_odd_long": lambda m, x: m.pad(x[0], ((5, 7), (9, 4)), mode="symmetric", reflect_type="odd"),
    "pad_linear_ramp": lambda m, x: m.pad(x[0], ((2, 3), (1, 4)), mode="linear_ramp", end_values=((1, -2), (3, 0.5))),
    "pad_linear_ramp_default": lambda m, x: m.pad(x, 2, mode="linear_ramp"),
    "pad_maximum": lambda m, x: m.pad(x, ((1, 2), (0, 1), (3, 0)), mode="maximum"),
    "pad_minimum_stat": lambda m, x: m.pad(x[0], 3, mode="minimum", stat_length=((1, 2), (2, 9))),
    "pad_mean_stat": lambda m, x: m.pad(x[0], (2, 1), mode="mean", stat_length=2),
    "pad_median": lambda m, x: m.pad(x, 1, mode="median"),
    "sort": lambda m, x: m.sort(m.sin(x), axis=1),
    "sort_flat": lambda m, x: m.sort(m.cos(x), axis=None),
    "argsort": lambda m, x: m.argsort(m.floor(x / 5) % 3, axis=-1),
    "argsort_descending": lambda m, x: m.argsort(m.floor(x / 5) % 3, axis=None, descending=True),
    "sort_descending": lambda m, x: m.sort(m.floor(x / 5) % 3, axis=0, descending=True),
}
# NumPy spellings that differ from fluxion's.
NUMPY_OVERRIDES = {
    "argsort_descending": lambda x: np.argsort(-(np.floor(x / 5) % 3), axis=None, kind="stable"),
    "sort_descending": lambda x: -np.sort(-(np.floor(x / 5) % 3), axis=0),
}


def _as_list(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _run_cases(x):
    return {k: f(fnp, x) for k, f in CASES.items()}


def test_values_match_numpy():
    got = fluxion.jit(_run_cases)(X)
    for name, fn in CASES.items():
        want = NUMPY_OVERRIDES[name](X) if name in NUMPY_OVERRIDES else fn(np, X)
        g, w = _as_list(got[name]), _as_list(want)
        assert len(g) == len(w), name
        for gi, wi in zip(g, w):
            assert gi.shape == np.shape(wi), name
            np.testing.assert_allclose(np.asarray(gi), wi, rtol=1e-6, err_msg=name)


def test_eager_matches_jit():
    names = ["reshape_F", "moveaxis", "concatenate", "split", "tile", "repeat_counts", "roll_axes",
             "pad_reflect", "pad_values", "argsort_descending", "broadcast_to"]
    jitted = fluxion.jit(lambda x: {k: CASES[k](fnp, x) for k in names})(X)
    for name in names:
        for e, j in zip(_as_list(CASES[name](fnp, X)), _as_list(jitted[name])):
            assert e.dtype == j.dtype and e.shape == j.shape, name
            np.testing.assert_array_equal(np.asarray(e), np.asarray(j), err_msg=name)


def test_traced_roll_shift_and_dtype_promotion():
    x = np.arange(5)
    np.testing.assert_array_equal(np.asarray(fluxion.jit(fnp.roll)(x, 2)), np.roll(x, 2))
    np.testing.assert_array_equal(np.asarray(fluxion.jit(fnp.roll)(x, -7)), np.roll(x, -7))
    mixed = fnp.concatenate([np.ones(2, np.int8), np.ones(2, np.float16)])
    assert mixed.dtype == np.float16
    assert fnp.stack([np.int8(1), 2.5]).dtype == np.float32
    assert fnp.concatenate([np.ones(2, np.int8)] * 2, dtype=np.int32).dtype == np.int32
    stacked = fnp.stack(np.arange(6).reshape(2, 3), axis=1)
    np.testing.assert_array_equal(np.asarray(stacked), np.stack(np.arange(6).reshape(2, 3), axis=1))


def test_sort_nan_and_stability():
    x = np.array([3.0, np.nan, -1.0, 3.0, -np.inf, 0.0], np.float32)
    np.testing.assert_array_equal(np.asarray(fnp.sort(x)), np.sort(x))
    np.testing.assert_array_equal(np.asarray(fnp.argsort(x)), np.argsort(x, kind="stable"))
    keys = np.array([2, 1, 2, 1, 0], np.int32)
    np.testing.assert_array_equal(np.asarray(fnp.argsort(keys, descending=True)), [0, 2, 1, 3, 4])
    assert fnp.argsort(keys).dtype == np.int32


def test_shape_queries_astype_copy():
    x = fnp.ones((2, 3))
    assert fnp.shape(x) == (2, 3) and fnp.ndim(x) == 2 and fnp.size(x) == 6
    assert fnp.size(x, 1) == 3 and fnp.shape(3.0) == ()
    assert fnp.astype(x, np.int8).dtype == np.int8
    np.testing.assert_array_equal(np.asarray(fnp.copy(x)), np.ones((2, 3)))
    assert fnp.broadcast_shapes((2, 1), (3,)) == (2, 3)


@pytest.mark.parametrize("call, error", [
    (lambda x: fnp.reshape(x, (5, -1)), TypeError),
    (lambda x: fnp.reshape(x, (7,)), TypeError),
    (lambda x: fnp.reshape(x, (-1, -1)), TypeError),  # JAX: TypeError
    (lambda x: fnp.reshape(x, 24, order="A"), NotImplementedError),
    (lambda x: fnp.transpose(x, (0, 0, 1)), TypeError),  # JAX: TypeError
    (lambda x: fnp.squeeze(x, 0), ValueError),
    (lambda x: fnp.expand_dims(x, 4), ValueError),
    (lambda x: fnp.moveaxis(x, (0, 1), 0), ValueError),
    (lambda x: fnp.concatenate([x, x[0]]), TypeError),
    (lambda x: fnp.concatenate([]), ValueError),
    (lambda x: fnp.concatenate([x[0, 0, 0], x[0, 0, 0]]), ValueError),
    (lambda x: fnp.stack([x, x[0]]), ValueError),
    (lambda x: fnp.split(x, 5, axis=2), ValueError),
    (lambda x: fnp.broadcast_to(x, (3, 4)), ValueError),
    (lambda x: fnp.pad(x, -1), ValueError),
    (lambda x: fnp.pad(x, 1, mode="bogus"), NotImplementedError),  # JAX's class
    (lambda x: fnp.pad(x, 1, mode="mean", stat_length=0), ValueError),
    (lambda x: fnp.pad(x, 1, mode="edge", end_values=3), ValueError),
    (lambda x: fnp.pad(x[:, :0], 1, mode="wrap"), ValueError),
    (lambda x: fnp.fliplr(x[0, 0]), ValueError),
    (lambda x: fnp.sort(x, kind="quicksort"), TypeError),
    (lambda x: fnp.repeat(x, np.array([1, 2])), ValueError),
])
def test_errors(call, error):
    with pytest.raises(error):
        call(X)


_PAD_MODE_CALLS = [
    ("linear_ramp", dict(end_values=((2, -3), (0, 7)))),
    ("maximum", dict(stat_length=((1, 3), (2, 2)))),
    ("minimum", {}),
    ("mean", dict(stat_length=2)),
    ("median", dict(stat_length=((3, 1), (2, 4)))),
    ("reflect", dict(reflect_type="odd")),
    ("symmetric", dict(reflect_type="odd")),
]


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float32])
@pytest.mark.parametrize("mode, kwargs", _PAD_MODE_CALLS)
def test_pad_modes_against_numpy_and_jax(mode, kwargs, dtype):
    """Integer means and medians round (half to even) as NumPy's and JAX's; odd reflections
    wider than the axis go on period by period; jit and eager agree."""
    import jax.numpy as jnp
    x = (np.arange(15).reshape(3, 5) * 7 % 11 + 1).astype(dtype)
    widths = ((4, 2), (1, 8))
    got = fnp.pad(x, widths, mode=mode, **kwargs)
    want = jnp.pad(x, widths, mode=mode, **kwargs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    if dtype is np.float32 or mode in ("maximum", "minimum"):
        np.testing.assert_allclose(np.asarray(got), np.pad(x, widths, mode=mode, **kwargs),
                                   rtol=1e-6)
    jitted = fluxion.jit(lambda a: fnp.pad(a, widths, mode=mode, **kwargs))(x)
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(got))


def test_pad_weak_type_callable_mode_and_gradient():
    import jax
    import jax.numpy as jnp
    for mode in ("linear_ramp", "mean", "maximum"):
        assert fnp.pad(fnp.asarray(2.0) * fnp.ones(3), 1, mode=mode).weak_type == \
            jnp.pad(jnp.asarray(2.0) * jnp.ones(3), 1, mode=mode).weak_type

    def fill(vector, pad_width, axis, kwargs):  # NumPy's callable protocol, returning
        lo, hi = pad_width
        return vector.at[:lo].set(kwargs["value"] + axis).at[vector.shape[0] - hi:].set(-1.0)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(fnp.pad(x, ((1, 2), (2, 1)), fill, value=10.0)),
                                  np.asarray(jnp.pad(x, ((1, 2), (2, 1)), fill, value=10.0)))
    for mode, kwargs in _PAD_MODE_CALLS:
        def loss(m, a):
            return (m.pad(a, ((2, 1), (3, 2)), mode=mode, **kwargs) ** 2).sum()
        x = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
        got = fluxion.jit(fluxion.grad(lambda a: loss(fnp, a)))(x)
        want = jax.jit(jax.grad(lambda a: loss(jnp, a)))(x)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, err_msg=mode)


@pytest.mark.parametrize("repeats, total, axis", [
    ([1, 2, 0], 4, None), ([1, 2, 0], 2, None), ([0, 2, 1], 5, None), ([2, 0, 0], 4, None),
    ([1, 1, 1], 3, None), (2, 5, None), ([2, 0, 3], 5, 1), ([2, 0, 3, 0, 0, 1], 5, None),
    ([3, 1], 0, 0)])
def test_repeat_total_length_with_concrete_and_traced_counts(repeats, total, axis):
    """A result longer than the counts' sum is filled with the last element along the axis,
    shorter is truncated, as JAX; traced counts need total_repeat_length."""
    import jax
    import jax.numpy as jnp
    flat = axis is None and np.size(repeats) != 6
    a = np.array([10, 20, 30]) if flat else np.arange(6).reshape(2, 3) * 10
    r = np.asarray(repeats)
    want = jnp.repeat(a, r, axis=axis, total_repeat_length=total)
    for got in (fnp.repeat(a, r, axis=axis, total_repeat_length=total),
                fluxion.jit(lambda x, c: fnp.repeat(x, c, axis=axis,
                                                    total_repeat_length=total))(a, r)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    x = a.astype(np.float32)
    def loss(m, v, c):
        return (m.repeat(v, c, axis=axis, total_repeat_length=total) ** 2).sum()
    np.testing.assert_allclose(
        np.asarray(fluxion.jit(fluxion.grad(lambda v, c: loss(fnp, v, c)))(x, r)),
        np.asarray(jax.jit(jax.grad(lambda v, c: loss(jnp, v, c)))(x, r)))


def test_repeat_traced_counts_under_vmap_and_errors():
    import jax.numpy as jnp
    a = np.array([1.0, 2.0, 3.0], np.float32)
    counts = np.array([[1, 2, 0], [0, 0, 3], [3, 0, 0]], np.int32)
    got = fluxion.vmap(lambda c: fnp.repeat(a, c, total_repeat_length=3))(counts)
    for row, c in zip(np.asarray(got), counts):
        np.testing.assert_array_equal(row, np.asarray(jnp.repeat(a, c, total_repeat_length=3)))
    with pytest.raises(Exception, match="total_repeat_length"):
        fluxion.jit(lambda c: fnp.repeat(a, c))(counts[0])
    with pytest.raises(ValueError, match="shape"):
        fluxion.jit(lambda c: fnp.repeat(a, c, total_repeat_length=3))(counts[0, :2])


@pytest.mark.parametrize("shift, axis", [(np.array([4, 2, 5, 5, 2, 4]), None),
                                         (np.array([3]), (0,)), (np.array([1, 2]), (0, -1)),
                                         (np.array(-7), 1)])
def test_roll_by_a_shift_array(shift, axis):
    # A 1-D shift array raised TypeError (only integer scalar arrays ...).
    x = np.arange(60).reshape(3, 4, 5)
    want = np.roll(x, shift, axis=axis)
    np.testing.assert_array_equal(fnp.roll(x, shift, axis=axis), want)
    np.testing.assert_array_equal(fluxion.jit(lambda v, s: fnp.roll(v, s, axis=axis))(x, shift),
                                  want)


@pytest.mark.parametrize("name", ["ndim", "shape", "size"])
def test_ndim_shape_size_of_a_list_warn_as_jax(name):
    # They were NumPy's own functions: no DeprecationWarning for lists.
    import jax.numpy as jnp
    for module in (jnp, fnp):
        with pytest.warns(DeprecationWarning, match=f"{name} requires ndarray or scalar"):
            got = getattr(module, name)([1, 2, 3])
        assert got == getattr(np, name)([1, 2, 3])
    x = np.ones((2, 3))
    assert fnp.size(x, 1) == 3 and fnp.size(x, (0, 1)) == 6 and fnp.size(3) == 1
    with pytest.raises(ValueError, match="repeated axis"):
        fnp.size(x, (1, -1))
    assert fluxion.jit(lambda v: fnp.zeros(fnp.size(v, 0)) + fnp.ndim(v))(x).shape == (2,)


@pytest.mark.parametrize("make, message", [
    (lambda m: m.rot90(np.ones(3)), "rot90 requires its first argument to have ndim at least two"),
    (lambda m: m.corrcoef(np.ones((2, 3)), dtype=int), "corrcoef: dtype must be"),
])
def test_error_messages_name_the_function_called(make, message):
    # rot90 of a vector reported an axis out of bounds; corrcoef's dtype error named cov.
    import jax.numpy as jnp
    for module in (jnp, fnp):
        with pytest.raises(ValueError, match=message):
            make(module)


def test_split_points_holding_a_tracer_are_a_concretization_error():
    # A list with a traced split point reached NumPy: TracerArrayConversionError.
    from fluxion.errors import ConcretizationTypeError
    with pytest.raises(ConcretizationTypeError, match="indices_or_sections"):
        fluxion.jit(lambda i: fnp.split(fnp.zeros((12, 2)), [2, i]))(2.0)
    assert [p.shape for p in fnp.split(np.zeros(6), [1, fnp.asarray(3)])] == [(1,), (2,), (3,)]


@pytest.mark.parametrize("reshape", [
    lambda np_, x, n: x.reshape(n), lambda np_, x, n: x.reshape((n,)),
    lambda np_, x, n: np_.reshape(x, (n, 1))])
def test_reshape_to_a_traced_size_raises_jaxs_type_error(reshape):
    import jax
    for lib, np_ in ((fluxion, fnp), (jax, jax.numpy)):
        f = lib.jit(lambda x: reshape(np_, x, np_.array(x.shape).prod()))
        with pytest.raises(TypeError) as info:
            f(np_.ones((2, 3)))
        assert type(info.value) is TypeError  # not a ConcretizationTypeError subclass
        assert "Shapes must be 1D sequences of concrete values of integer type" in str(info.value)
