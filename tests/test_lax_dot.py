"""lax.dot_general: values against numpy.einsum, result dtypes and weak types, precision
arguments and error messages against JAX."""
import jax
import ml_dtypes
import numpy as np
import pytest

import fluxion
from fluxion import lax
from fluxion.test_util import check_grads
from jax import lax as jlax

BF16 = np.dtype(ml_dtypes.bfloat16)

# (lhs shape, rhs shape, dimension_numbers, einsum spec)
CONTRACTIONS = [
    ((3, 4), (4, 5), (((1,), (0,)), ((), ())), "ij,jk->ik"),
    ((4,), (4,), (((0,), (0,)), ((), ())), "i,i->"),
    ((3, 4), (5, 4), (((1,), (1,)), ((), ())), "ij,kj->ik"),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,))), "bij,bjk->bik"),
    ((3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,))), "ibj,jkb->bik"),
    ((2, 3, 4), (3, 4, 5), (((1, 2), (0, 1)), ((), ())), "ijk,jkl->il"),
    ((3,), (2,), (((), ()), ((), ())), "i,j->ij"),
    ((), (), (((), ()), ((), ())), ",->"),
    ((3, 0), (0, 5), (((1,), (0,)), ((), ())), "ij,jk->ik"),
    ((0, 4), (4, 5), (((1,), (0,)), ((), ())), "ij,jk->ik"),
]


def _random(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -4
        return rng.integers(low, 5, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _einsum_reference(spec, x, y, out_dtype):
    wide = np.complex128 if np.dtype(out_dtype).kind == "c" else (
        np.int64 if np.dtype(out_dtype).kind in "iub" else np.float64)
    ref = np.einsum(spec, x.astype(np.float64 if x.dtype == BF16 else x.dtype).astype(wide),
                    y.astype(np.float64 if y.dtype == BF16 else y.dtype).astype(wide))
    return ref != 0 if np.dtype(out_dtype) == np.bool_ else ref


def _assert_close(actual, expected, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iub":
        np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected).astype(dtype))
    else:
        tol = {BF16: 2e-2, np.dtype(np.float16): 2e-3}.get(dtype, 1e-5)
        np.testing.assert_allclose(np.asarray(actual).astype(np.complex128),
                                   np.asarray(expected).astype(np.complex128), rtol=tol, atol=tol)


@pytest.mark.parametrize("lhs_shape,rhs_shape,dims,spec", CONTRACTIONS,
                         ids=[c[3] or "scalar" for c in CONTRACTIONS])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_dot_general_matches_einsum(rng, lhs_shape, rhs_shape, dims, spec, dtype):
    x, y = _random(rng, lhs_shape, dtype), _random(rng, rhs_shape, dtype)
    out = lax.dot_general(x, y, dims)
    assert out.dtype == dtype and out.shape == np.einsum(spec, x, y).shape
    _assert_close(out, _einsum_reference(spec, x, y, dtype), dtype)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.complex64, np.int8, np.uint8, np.int16])
def test_dot_general_dtypes(rng, dtype):
    x, y = _random(rng, (2, 3, 4), dtype), _random(rng, (2, 4, 5), dtype)
    dims = (((2,), (1,)), ((0,), (0,)))
    out = lax.dot_general(x, y, dims)
    assert out.dtype == dtype
    expected = _einsum_reference("bij,bjk->bik", x, y, dtype)
    if np.dtype(dtype).kind in "iu":
        expected = expected.astype(dtype)  # integer dots wrap around like integer arithmetic
    _assert_close(out, expected, dtype)


def test_dot_general_jit_matches_eager(rng):
    x, y = _random(rng, (3, 2, 4), np.float32), _random(rng, (4, 5, 2), np.float32)
    f = lambda a, b: lax.dot_general(a, b, (((2,), (0,)), ((1,), (2,))))
    np.testing.assert_array_equal(np.asarray(fluxion.jit(f)(x, y)), np.asarray(f(x, y)))
    b = _random(rng, (3, 4), np.bool_)
    g = lambda a: lax.dot_general(a, a, (((1,), (1,)), ((), ())))
    np.testing.assert_array_equal(np.asarray(fluxion.jit(g)(b)), np.asarray(g(b)))


@pytest.mark.parametrize("in_dtype,preferred", [
    (np.int8, np.int32), (BF16, np.float32), (np.int32, np.float32), (np.float32, BF16),
    (np.uint8, np.int32), (np.bool_, np.int32), (np.float16, np.float32), (np.int8, np.int16),
])
def test_preferred_element_type(rng, in_dtype, preferred):
    if np.dtype(in_dtype).kind in "iu":  # large enough that an 8-bit accumulator would wrap
        x = rng.integers(60, 120, (3, 16)).astype(in_dtype)
        y = rng.integers(60, 120, (16, 2)).astype(in_dtype)
    else:
        x, y = _random(rng, (3, 16), in_dtype), _random(rng, (16, 2), in_dtype)
    dims = (((1,), (0,)), ((), ()))
    out = lax.dot_general(x, y, dims, preferred_element_type=preferred)
    expected = jlax.dot_general(x, y, dims, preferred_element_type=preferred)
    assert out.dtype == expected.dtype == np.dtype(preferred)
    _assert_close(out, np.asarray(expected), preferred)
    jitted = fluxion.jit(lambda a, b: lax.dot_general(a, b, dims, preferred_element_type=preferred))
    np.testing.assert_array_equal(np.asarray(jitted(x, y)), np.asarray(out))


@pytest.mark.parametrize("lhs_dtype,rhs_dtype", [
    (np.int8, np.int16), (np.int32, np.float32), (np.bool_, np.int32), (np.float32, np.complex64),
    (BF16, np.float16), (np.int8, np.uint8), (np.uint8, np.int8),
])
def test_mixed_operand_dtypes_follow_jax(rng, lhs_dtype, rhs_dtype):
    x, y = _random(rng, (2, 3), lhs_dtype), _random(rng, (3, 4), rhs_dtype)
    dims = (((1,), (0,)), ((), ()))
    out = lax.dot_general(x, y, dims)
    expected = jlax.dot_general(x, y, dims)
    assert out.dtype == expected.dtype
    _assert_close(out, np.asarray(expected), expected.dtype)


def test_narrower_integer_preferred_type_is_rejected():
    x = np.ones((2, 3), np.int32)
    with pytest.raises(TypeError, match="must not be narrower"):
        lax.dot_general(x, x.T, (((1,), (0,)), ((), ())), preferred_element_type=np.int8)


def test_weak_type_follows_jax():
    dims = (((), ()), ((), ()))
    for args in [(2.0, 3.0), (2.0, np.float32(3.0))]:
        ours = fluxion.eval_shape(lambda: lax.dot_general(*args, dims))
        theirs = jax.eval_shape(lambda: jlax.dot_general(*args, dims))
        assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type)


@pytest.mark.parametrize("precision,expected", [
    (lax.Precision.HIGHEST, (lax.Precision.HIGHEST,) * 2),
    ("highest", (lax.Precision.HIGHEST,) * 2),
    ("fastest", (lax.Precision.DEFAULT,) * 2),
    ("tensorfloat32", (lax.Precision.HIGH,) * 2),
    (("highest", "default"), (lax.Precision.HIGHEST, lax.Precision.DEFAULT)),
    ((lax.Precision.HIGH, lax.Precision.DEFAULT), (lax.Precision.HIGH, lax.Precision.DEFAULT)),
    (None, None),
])
def test_precision_is_canonicalized(precision, expected):
    x = np.ones((2, 3), np.float32)
    dims = (((1,), (1,)), ((), ()))
    closed = fluxion.make_jaxpr(lambda a: lax.dot_general(a, a, dims, precision=precision))(x)
    assert closed.eqns[-1].params["precision"] == expected
    if precision is not None:  # it reaches XLA as a precision_config
        out = lax.dot_general(x, x, dims, precision=precision)
        np.testing.assert_allclose(np.asarray(out), np.full((2, 2), 3.0))


def test_precision_accepts_jax_strings_in_the_enum():
    assert lax.Precision("highest") is lax.Precision.HIGHEST
    assert lax.Precision("bfloat16") is lax.Precision.DEFAULT
    assert str(lax.Precision.HIGH) == "HIGH" and repr(lax.Precision.HIGH) == "Precision.HIGH"


@pytest.mark.parametrize("precision", ["HIGHEST", "foo", 1, (lax.Precision.HIGH, "default"),
                                       ("highest",), (None, None)])
def test_bad_precision_raises_like_jax(precision):
    x = np.ones((2, 2), np.float32)
    dims = (((1,), (0,)), ((), ()))
    with pytest.raises(ValueError) as theirs:
        jlax.dot_general(x, x, dims, precision=precision)
    with pytest.raises(ValueError, match="Precision argument must be") as ours:
        lax.dot_general(x, x, dims, precision=precision)
    assert type(ours.value) is type(theirs.value)


@pytest.mark.parametrize("lhs_shape,rhs_shape,dims,message", [
    ((2, 3), (3, 2), (((1,), (1,)), ((), ())), "contracting dimensions to have the same shape"),
    ((2, 3), (3, 2), (((2,), (0,)), ((), ())), "lhs dimension numbers to be nonnegative"),
    ((2, 3), (3, 2), (((1,), (2,)), ((), ())), "rhs dimension numbers to be nonnegative"),
    ((2, 3), (3, 2), (((1,), (0,)), ((0,), ())), "equal numbers of lhs_batch and rhs_batch"),
    ((2, 3), (3, 2), (((0,), (0,)), ((0,), (1,))), "lhs batch dimensions to be disjoint"),
    ((2, 3, 4), (3, 4, 2), (((1,), (0,)), ((0,), (1,))), "batch dimensions to have the same shape"),
    ((2, 2), (2, 2), (((0, 0), (0, 1)), ((), ())), "lhs contracting dimensions to be distinct"),
])
def test_dimension_number_errors_match_jax(lhs_shape, rhs_shape, dims, message):
    x, y = np.ones(lhs_shape, np.float32), np.ones(rhs_shape, np.float32)
    with pytest.raises(Exception) as theirs:
        jlax.dot_general(x, y, dims)
    with pytest.raises(TypeError, match=message) as ours:
        lax.dot_general(x, y, dims)
    assert type(ours.value) is type(theirs.value)


def test_float0_is_rejected():
    x = np.ones((2, 2), np.float32)
    closed = fluxion.make_jaxpr(lambda a: lax.dot_general(a, a, (((1,), (0,)), ((), ()))))(x)
    with pytest.raises(TypeError, match="dot_general with a float0 array"):
        closed.eqns[0].primitive.abstract_eval(
            fluxion.core.ShapedArray((2, 2), fluxion.dtypes.float0), closed.in_avals[0],
            **closed.eqns[0].params)


_X23 = np.arange(6.0, dtype=np.float32).reshape(2, 3)
_Y34 = np.arange(12.0, dtype=np.float32).reshape(3, 4)
_B523, _B534 = np.ones((5, 2, 3), np.float32), np.ones((5, 3, 4), np.float32)


@pytest.mark.parametrize("args, kwargs", [
    ((_X23, _Y34), {}),
    ((_B523, _B534), {"dimension_numbers": (((2,), (1,)), ((0,), (0,)))}),
    ((_X23, _X23), {"dimension_numbers": (((1,), (1,)), ((), ()))}),
    ((_X23, _Y34), {"dimension_numbers": ((1, 0), ((), ()))}),  # bare ints, as JAX
    ((np.arange(3), np.arange(3)), {"preferred_element_type": np.float32}),
])
def test_dot_takes_jax_0_10_keywords(args, kwargs):
    import jax
    want = jax.lax.dot(*args, **kwargs)
    for fn in (lax.dot, fluxion.jit(lambda a, b: lax.dot(a, b, **kwargs))):
        got = fn(*args, **kwargs) if fn is lax.dot else fn(*args)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want)


def test_dot_errors_match_jax():
    import jax
    for mod in (fluxion, jax):
        with pytest.raises(TypeError, match=r"dot\(\) takes 2 positional arguments"):
            mod.lax.dot(_X23, _Y34, mod.lax.Precision.DEFAULT)
        for a, b in ((_B523, _B534), (_X23, _X23)):
            with pytest.raises(ValueError, match="dimension_numbers must be specified"):
                mod.lax.dot(a, b)


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# (lhs shape, rhs shape, group sizes, (dot dimension numbers, lhs ragged, rhs group)),
# JAX 0.10.2's three modes of ragged_dot_general
_RAGGED_GENERAL = [
    ((2, 11, 5), (3, 2, 5, 7), [[4, 5, 2], [1, 3, 6]],  # non-contracting, batched groups
     ((([2], [2]), ([0], [1])), [1], [0])),
    ((11, 5), (5, 3, 7), [2, 3, 4], ((([1], [0]), ([], [])), [0], [1])),  # rows past the groups
    ((11, 5), (5, 7), [1, 2, 2], ((([1], [0]), ([], [])), [1], [])),      # contracting
    ((2, 11, 5), (2, 5, 7), [[1, 2, 2], [3, 0, 1]],                       # contracting, batched
     ((([2], [1]), ([0], [0])), [2], [])),
    ((4, 3, 5), (4, 5, 2), [1, 3], ((([2], [1]), ([0], [0])), [0], [])),  # batch
]


@pytest.mark.parametrize("case", range(len(_RAGGED_GENERAL)))
def test_ragged_dot_general_modes_match_jax(case):
    import jax
    lhs_shape, rhs_shape, sizes, (dims, ragged, group) = _RAGGED_GENERAL[case]
    rng = np.random.default_rng(case)
    lhs, rhs = _rand(rng, *lhs_shape), _rand(rng, *rhs_shape)
    sizes = np.asarray(sizes, np.int32)
    want = jax.lax.ragged_dot_general(lhs, rhs, sizes,
                                      jax.lax.RaggedDotDimensionNumbers(dims, ragged, group))
    dn = lax.RaggedDotDimensionNumbers(dims, ragged, group)
    f = lambda a, b: lax.ragged_dot_general(a, b, sizes, dn)
    for got in (f(lhs, rhs), fluxion.jit(f)(lhs, rhs)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # bilinear: central differences are exact at any step (a large one beats float32 noise)
    check_grads(f, (lhs, rhs), 1, ("fwd", "rev"), eps=0.1)  # JAX has no contracting-mode VJP


def test_ragged_dot_general_group_offset_outside_the_ragged_dot_layout_is_refused():
    dn = lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [1], [])  # contracting mode
    with pytest.raises(NotImplementedError, match="group_offset is supported only"):
        lax.ragged_dot_general(np.ones((11, 5), np.float32), np.ones((5, 7), np.float32),
                               np.array([1, 2, 2], np.int32), dn,
                               group_offset=np.array([0], np.int32))


def test_ragged_dot_general_argument_errors_match_jax():
    import jax
    bad = [  # lhs, rhs, group sizes shapes; dimension numbers
        ((11, 5), (3, 5, 7), (3,), ((([1], [1]), ([], [])), [0, 1], [0])),
        ((11, 5), (3, 5, 7), (3,), ((([1], [1]), ([], [])), [2], [0])),
        ((11, 5), (3, 5, 7), (2, 3), ((([1], [1]), ([], [])), [0], [0])),
        ((19, 11, 5), (19, 5, 7), (19, 3), ((([2], [1]), ([0], [0])), [1], [0])),
        ((11, 5), (3, 5, 7), (2,), ((([1], [1]), ([], [])), [0], [0])),
        ((11, 5), (3, 5, 7), (3,), ((([1], [1]), ([], [])), [1], [0])),
        ((11, 5), (5, 7), (3,), ((([1], [0]), ([], [])), [0], [])),
    ]
    for lhs_shape, rhs_shape, sizes_shape, (dims, ragged, group) in bad:
        args = (np.ones(lhs_shape, np.float32), np.ones(rhs_shape, np.float32),
                np.ones(sizes_shape, np.int32))
        with pytest.raises(TypeError) as theirs:
            jax.lax.ragged_dot_general(*args, jax.lax.RaggedDotDimensionNumbers(dims, ragged,
                                                                                group))
        with pytest.raises(TypeError) as ours:
            lax.ragged_dot_general(*args, lax.RaggedDotDimensionNumbers(dims, ragged, group))
        assert str(ours.value) == str(theirs.value)
