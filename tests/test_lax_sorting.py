"""lax.sort, sort_key_val, top_k, argmax and argmin, against NumPy and jax.lax (NaNs, signed
zeros, ties and stability included)."""
import ml_dtypes
import numpy as np
import pytest

import fluxion
from fluxion import lax
from jax import lax as jlax

BF16 = np.dtype(ml_dtypes.bfloat16)
SPECIAL = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -1.5, 1.5, np.nan, 0.0, -0.0]


def _floats_with_specials(rng, shape, dtype):
    x = rng.standard_normal(shape).astype(np.float32).ravel()
    x[:len(SPECIAL)] = SPECIAL[:x.size]
    return rng.permutation(x).reshape(shape).astype(dtype)


def _random(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -5, 6, shape).astype(dtype)
    if dtype.kind == "c":
        re, im = rng.integers(-2, 3, shape), rng.integers(-2, 3, shape)
        return (re + 1j * im).astype(dtype)
    return _floats_with_specials(rng, shape, dtype)


def _assert_identical(actual, expected):
    """Same dtype, shape and values, with NaNs and the signs of zeros in the same places."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype.kind in "fcV":
        as64 = lambda a: a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        np.testing.assert_array_equal(as64(actual), as64(expected))
        if actual.dtype.kind != "c":
            np.testing.assert_array_equal(np.signbit(as64(actual)), np.signbit(as64(expected)))
    else:
        np.testing.assert_array_equal(actual, expected)


# ---------------------------------------------------------------------------------------------
# sort

@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16, np.int32, np.uint8, np.bool_,
                                   np.complex64])
@pytest.mark.parametrize("shape,dimension", [((13,), -1), ((4, 6), 0), ((2, 5, 3), 1)])
def test_sort_matches_jax(rng, dtype, shape, dimension):
    x = _random(rng, shape, dtype)
    _assert_identical(lax.sort(x, dimension), jlax.sort(x, dimension))


def test_sort_orders_nans_last_and_keeps_signed_zeros_in_place():
    x = np.array([0.0, np.nan, -0.0, -np.inf, 0.0, -0.0, 2.0], np.float32)
    out = np.asarray(lax.sort(x))
    np.testing.assert_array_equal(out, [-np.inf, 0, 0, 0, 0, 2, np.nan])
    # -0.0 and 0.0 compare equal, so the stable sort keeps their input order.
    np.testing.assert_array_equal(np.signbit(out[1:5]), [False, True, False, True])
    values = np.array([1 + 1j, np.nan, 0 + 2j, 1 - 1j], np.complex64)
    np.testing.assert_array_equal(np.asarray(lax.sort(values)), np.sort(values))


def test_multi_operand_sort_is_lexicographic_and_stable(rng):
    primary = rng.integers(0, 3, 40).astype(np.int32)
    secondary = rng.integers(0, 3, 40).astype(np.float32)
    payload = np.arange(40, dtype=np.int32)
    order = np.lexsort((secondary, primary))  # stable; primary key last
    out = lax.sort((primary, secondary, payload), num_keys=2)
    assert isinstance(out, tuple) and len(out) == 3
    for got, expected in zip(out, (primary[order], secondary[order], payload[order])):
        _assert_identical(got, expected)
    keys, values = lax.sort_key_val(primary, payload)
    order = np.argsort(primary, kind="stable")
    _assert_identical(keys, primary[order])
    _assert_identical(values, payload[order])


def test_sort_key_val_along_a_leading_dimension(rng):
    keys, values = _random(rng, (5, 3), np.float32), _random(rng, (5, 3), np.int32)
    for got, expected in zip(lax.sort_key_val(keys, values, 0), jlax.sort_key_val(keys, values, 0)):
        _assert_identical(got, expected)


def test_sort_jit_matches_eager_and_jaxpr(rng):
    x = _random(rng, (3, 8), np.float32)
    f = lambda a: lax.sort(a, dimension=0)
    _assert_identical(fluxion.jit(f)(x), f(x))
    g = lambda a, b: lax.sort_key_val(a, b)
    for jitted, eager in zip(fluxion.jit(g)(x, x), g(x, x)):
        _assert_identical(jitted, eager)
    eqn, = fluxion.make_jaxpr(f)(x).eqns
    assert eqn.primitive.name == "sort"
    assert eqn.params == {"dimension": 0, "is_stable": True, "num_keys": 1}


def test_sort_empty_and_unstable():
    _assert_identical(lax.sort(np.zeros((0, 3), np.float32), 0), np.zeros((0, 3), np.float32))
    x = np.array([3, 1, 2], np.int32)
    _assert_identical(lax.sort(x, is_stable=False), np.array([1, 2, 3], np.int32))


@pytest.mark.parametrize("args,kwargs,error,message", [
    ((np.ones(3),), dict(num_keys=2), ValueError, "must equal 1 for a single operand"),
    (((),), {}, TypeError, "at least one operand"),
    (((np.ones(3), np.ones(3)),), dict(num_keys=3), ValueError, "must be between 1 and"),
    (((np.ones(3), np.ones(4)),), {}, TypeError, "must have equal shapes"),
    ((np.ones(3),), dict(dimension=1), ValueError, "out of bounds"),
    ((np.float32(1),), {}, ValueError, "out of bounds"),
])
def test_sort_errors_match_jax(args, kwargs, error, message):
    with pytest.raises(error):
        jlax.sort(*args, **kwargs)
    with pytest.raises(error, match=message):
        lax.sort(*args, **kwargs)


# ---------------------------------------------------------------------------------------------
# top_k

@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("k", [0, 3, 11])
def test_top_k_matches_jax(rng, dtype, k):
    x = _random(rng, (2, 11), dtype)
    values, indices = lax.top_k(x, k)
    expected_values, expected_indices = jlax.top_k(x, k)
    _assert_identical(values, expected_values)
    _assert_identical(indices, expected_indices)


def test_top_k_ties_nans_and_other_axes(rng):
    x = np.array([1.0, np.nan, 3.0, 3.0, -0.0, 0.0, np.nan], np.float32)
    values, indices = lax.top_k(x, 7)
    np.testing.assert_array_equal(np.asarray(indices), [1, 6, 2, 3, 0, 5, 4])
    assert indices.dtype == np.int32
    y = _random(rng, (5, 4, 3), np.float32)
    for axis in (0, 1):
        for got, expected in zip(lax.top_k(y, 2, axis=axis), jlax.top_k(y, 2, axis=axis)):
            _assert_identical(got, expected)


def test_top_k_jit_matches_eager(rng):
    x = _random(rng, (3, 9), np.float32)
    f = lambda a: lax.top_k(a, 2, axis=0)
    for jitted, eager in zip(fluxion.jit(f)(x), f(x)):
        _assert_identical(jitted, eager)


@pytest.mark.parametrize("x,k,error,message", [
    (np.ones(3, np.float32), 4, ValueError, "no larger than size along axis"),
    (np.ones(3, np.float32), -1, ValueError, "must be nonnegative"),
    (np.float32(1), 1, ValueError, "out of bounds"),
    (np.ones(3, np.complex64), 1, ValueError, "not compatible with complex"),
])
def test_top_k_errors_match_jax(x, k, error, message):
    with pytest.raises(error):
        jlax.top_k(x, k)
    with pytest.raises(error, match=message):
        lax.top_k(x, k)


# ---------------------------------------------------------------------------------------------
# argmax, argmin

@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argminmax_matches_jax_and_numpy(rng, dtype, name):
    x = _random(rng, (6, 5), dtype)
    for axis in (0, 1):
        out = getattr(lax, name)(x, axis, np.int32)
        _assert_identical(out, getattr(jlax, name)(x, axis, np.int32))
        # NumPy also returns the first NaN and the first of tied extremes.
        _assert_identical(out, getattr(np, name)(x.astype(np.float32) if dtype == BF16 else x,
                                                 axis).astype(np.int32))


def test_argminmax_first_nan_and_first_tie():
    x = np.array([[1.0, 3.0, 3.0, -1.0], [0.0, np.nan, 5.0, np.nan], [-0.0, 0.0, -0.0, 0.0]],
                 np.float32)
    np.testing.assert_array_equal(np.asarray(lax.argmax(x, 1, np.int32)), [1, 1, 0])
    np.testing.assert_array_equal(np.asarray(lax.argmin(x, 1, np.int32)), [3, 1, 0])
    all_nan = np.full((1, 3), np.nan, np.float32)
    assert int(lax.argmax(all_nan, 1, np.int32)[0]) == 0 == int(lax.argmin(all_nan, 1, np.int32)[0])


def test_argmax_index_dtypes(rng, x64):
    x = _random(rng, (4, 3), np.float32)
    assert lax.argmax(x, 0, np.int64).dtype == np.int64
    assert lax.argmin(x, 1, np.uint8).dtype == np.uint8
    _assert_identical(lax.argmax(x, 0, np.int64), np.argmax(x, 0))


def test_argmax_index_dtype_is_canonicalized(rng):
    x = _random(rng, (4, 3), np.float32)
    out = fluxion.eval_shape(lambda: lax.argmax(x, 0, np.int64))
    assert out.dtype == np.int32 and out.shape == (3,) and not out.weak_type


def test_argmax_jit_matches_eager_and_jaxpr(rng):
    x = _random(rng, (4, 7), np.float32)
    f = lambda a: lax.argmin(a, 1, np.int32)
    _assert_identical(fluxion.jit(f)(x), f(x))
    eqn, = fluxion.make_jaxpr(f)(x).eqns
    assert (eqn.primitive.name, eqn.params) == ("argmin", {"axes": (1,), "index_dtype": np.int32})


@pytest.mark.parametrize("x,axis,index_dtype,error,message", [
    (np.zeros((0, 2), np.float32), 0, np.int32, ValueError, "non-empty reduced dimension"),
    (np.zeros(3, np.float32), 0, np.float32, TypeError, "index_dtype must be an integer type"),
    (np.zeros(3, np.float32), 1, np.int32, ValueError, "Invalid axis"),
    (np.zeros(3, np.complex64), 0, np.int32, TypeError, "does not accept dtype complex64"),
])
def test_argmax_errors_match_jax(x, axis, index_dtype, error, message):
    with pytest.raises(error):
        jlax.argmax(x, axis, index_dtype)
    with pytest.raises(error, match=message):
        lax.argmax(x, axis, index_dtype)


def test_top_k_of_an_axis_past_int32_indices_raises_like_jax():
    import jax
    big = (2 ** 31 + 1,)
    for mod in (fluxion, jax):
        x = mod.ShapeDtypeStruct(big, np.dtype("bfloat16"))
        with pytest.raises(ValueError, match="top_k returns int32 indices, which will overflow"):
            mod.eval_shape(lambda x: mod.lax.top_k(x, 100), x)
    ok = fluxion.ShapeDtypeStruct((2 ** 31, 3), np.float32)  # int32 still indexes 2**31 - 1
    assert fluxion.eval_shape(lambda x: lax.top_k(x, 100, axis=0), ok)[1].shape == (100, 3)
