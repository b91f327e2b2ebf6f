"""lax.conv_general_dilated and its helpers, against a direct NumPy convolution and jax.lax."""
import ml_dtypes
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import fluxion
from fluxion import lax
from jax import lax as jlax

BF16 = np.dtype(ml_dtypes.bfloat16)


def _dilate(x, dilation):
    """Insert dilation - 1 zeros between the elements of every spatial (trailing) dimension."""
    shape = x.shape[:2] + tuple(0 if n == 0 else (n - 1) * d + 1
                                for n, d in zip(x.shape[2:], dilation))
    out = np.zeros(shape, x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dilation)] = x
    return out


def _pad(x, padding):
    """Pad spatial dimensions; negative padding crops."""
    x = np.pad(x, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding])
    crop = tuple(slice(-min(lo, 0), x.shape[i + 2] + min(hi, 0))
                 for i, (lo, hi) in enumerate(padding))
    return x[(slice(None), slice(None)) + crop]


def numpy_conv(lhs, rhs, strides, padding, lhs_dilation=None, rhs_dilation=None, groups=1):
    """Cross-correlation of an (N, C, spatial...) input with an (O, I, spatial...) kernel."""
    n_spatial = lhs.ndim - 2
    x = _pad(_dilate(lhs, lhs_dilation or (1,) * n_spatial), padding)
    w = _dilate(rhs, rhs_dilation or (1,) * n_spatial)
    spatial_axes = tuple(range(2, lhs.ndim))
    windows = sliding_window_view(x, w.shape[2:], axis=spatial_axes)
    windows = windows[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)]
    n, c = x.shape[:2]
    o = w.shape[0]
    windows = windows.reshape((n, groups, c // groups) + windows.shape[2:])
    w = w.reshape((groups, o // groups, c // groups) + w.shape[2:])
    out_letters, kernel_letters = "pqr"[:n_spatial], "xyz"[:n_spatial]
    out = np.einsum(f"ngc{out_letters}{kernel_letters},goc{kernel_letters}->ngo{out_letters}",
                    windows, w)
    return out.reshape((n, o) + out.shape[3:])


def _random(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-3 if dtype.kind == "i" else 0, 4, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# (lhs shape, rhs shape, strides, padding, lhs_dilation, rhs_dilation, feature groups)
NCHW_CASES = [
    ((2, 3, 9), (4, 3, 3), (1,), [(0, 0)], None, None, 1),
    ((1, 2, 8), (2, 2, 3), (2,), [(2, 1)], (2,), (2,), 1),
    ((2, 4, 6, 5), (6, 2, 3, 2), (1, 2), [(1, 1), (0, 1)], None, (1, 2), 2),
    ((1, 2, 5, 6), (3, 2, 2, 3), (2, 1), [(-1, 0), (1, -1)], (1, 2), None, 1),
    ((1, 2, 4, 3, 5), (2, 2, 2, 1, 3), (1, 1, 2), [(0, 0), (1, 0), (1, 1)], None, None, 1),
]


@pytest.mark.parametrize("case", NCHW_CASES, ids=["1d", "1d-dilated", "2d-groups",
                                                  "2d-negative-pad", "3d"])
def test_conv_matches_numpy_loop(rng, case):
    lhs_shape, rhs_shape, strides, padding, lhs_dil, rhs_dil, groups = case
    x, w = _random(rng, lhs_shape, np.float32), _random(rng, rhs_shape, np.float32)
    out = lax.conv_general_dilated(x, w, strides, padding, lhs_dil, rhs_dil,
                                   feature_group_count=groups)
    expected = numpy_conv(x.astype(np.float64), w.astype(np.float64), strides, padding, lhs_dil,
                          rhs_dil, groups)
    assert out.shape == expected.shape and out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,preferred", [
    (np.int32, None), (np.int8, np.int32), (BF16, np.float32), (np.float16, None),
    (np.complex64, None), (np.bool_, None), (np.uint8, None),
])
def test_conv_dtypes_match_jax(rng, dtype, preferred):
    x, w = _random(rng, (2, 3, 7), dtype), _random(rng, (4, 3, 3), dtype)
    args = dict(window_strides=(2,), padding="SAME", preferred_element_type=preferred)
    out = lax.conv_general_dilated(x, w, **args)
    expected = jlax.conv_general_dilated(x, w, **args)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    if np.dtype(out.dtype).kind in "iub":
        np.testing.assert_array_equal(np.asarray(out), np.asarray(expected))
    else:
        tol = 1e-2 if out.dtype in (BF16, np.float16) else 1e-5
        np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=tol, atol=tol)


@pytest.mark.parametrize("dimension_numbers,lhs_shape,rhs_shape", [
    (("NHWC", "HWIO", "NHWC"), (2, 5, 6, 3), (3, 2, 3, 4)),
    (("NWHC", "HWIO", "NCHW"), (1, 6, 5, 2), (3, 2, 2, 3)),
    (lax.ConvDimensionNumbers((0, 2, 1), (2, 1, 0), (0, 2, 1)), (2, 7, 3), (3, 3, 4)),
])
@pytest.mark.parametrize("padding", ["SAME", "SAME_LOWER", "VALID"])
def test_dimension_numbers_and_string_padding_match_jax(rng, dimension_numbers, lhs_shape,
                                                        rhs_shape, padding):
    x, w = _random(rng, lhs_shape, np.float32), _random(rng, rhs_shape, np.float32)
    n_spatial = len(lhs_shape) - 2
    args = dict(window_strides=(2,) * n_spatial, padding=padding,
                rhs_dilation=(2,) + (1,) * (n_spatial - 1), dimension_numbers=dimension_numbers)
    jax_dnums = dimension_numbers
    if isinstance(dimension_numbers, lax.ConvDimensionNumbers):
        jax_dnums = jlax.ConvDimensionNumbers(*dimension_numbers)
    expected = jlax.conv_general_dilated(x, w, **dict(args, dimension_numbers=jax_dnums))
    out = lax.conv_general_dilated(x, w, **args)
    assert out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-5, atol=1e-5)


def test_group_counts_match_jax(rng):
    x, w = _random(rng, (4, 6, 7), np.float32), _random(rng, (6, 2, 3), np.float32)
    out = lax.conv_general_dilated(x, w, (1,), "VALID", feature_group_count=3)
    expected = jlax.conv_general_dilated(x, w, (1,), "VALID", feature_group_count=3)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-5, atol=1e-5)
    w = _random(rng, (4, 6, 3), np.float32)
    out = lax.conv_general_dilated(x, w, (1,), "VALID", batch_group_count=2)
    expected = jlax.conv_general_dilated(x, w, (1,), "VALID", batch_group_count=2)
    assert out.shape == expected.shape == (2, 4, 5)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-5, atol=1e-5)


def test_jit_matches_eager_and_jaxpr(rng):
    x, w = _random(rng, (2, 5, 6, 3), np.float32), _random(rng, (3, 2, 3, 4), np.float32)

    def f(a, b):
        return lax.conv_general_dilated(a, b, (1, 2), "SAME", rhs_dilation=(2, 1),
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        precision="highest")
    np.testing.assert_array_equal(np.asarray(fluxion.jit(f)(x, w)), np.asarray(f(x, w)))
    eqn, = fluxion.make_jaxpr(f)(x, w).eqns
    assert eqn.primitive.name == "conv_general_dilated"
    assert eqn.params["padding"] == ((2, 2), (0, 0))
    assert eqn.params["dimension_numbers"] == lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1),
                                                                       (0, 3, 1, 2))
    assert eqn.params["precision"] == (lax.Precision.HIGHEST,) * 2


@pytest.mark.parametrize("lhs_shape,rhs_shape,padding", [
    ((0, 2, 5), (3, 2, 2), "VALID"),      # empty batch
    ((1, 2, 1), (3, 2, 2), "VALID"),      # window larger than the input: empty output
    ((1, 0, 5), (3, 0, 2), "SAME"),       # no input features: zeros
    ((3, 4), (5, 4), "VALID"),            # no spatial dimensions: a matmul
])
def test_degenerate_shapes(rng, lhs_shape, rhs_shape, padding):
    x, w = _random(rng, lhs_shape, np.float32), _random(rng, rhs_shape, np.float32)
    strides = (1,) * (len(lhs_shape) - 2)
    out = lax.conv_general_dilated(x, w, strides, padding)
    expected = jlax.conv_general_dilated(x, w, strides, padding)
    assert out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-6, atol=1e-6)


def test_conv_and_conv_with_general_padding(rng):
    x, w = _random(rng, (1, 2, 6, 5), np.float32), _random(rng, (3, 2, 3, 2), np.float32)
    np.testing.assert_allclose(np.asarray(lax.conv(x, w, (1, 2), "SAME")),
                               np.asarray(jlax.conv(x, w, (1, 2), "SAME")), rtol=1e-5, atol=1e-5)
    args = ((2, 1), [(1, 0), (0, 2)], (1, 2), (2, 1))
    np.testing.assert_allclose(np.asarray(lax.conv_with_general_padding(x, w, *args)),
                               np.asarray(jlax.conv_with_general_padding(x, w, *args)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("in_shape,window,strides", [
    ((5, 6), (3, 3), (2, 2)), ((5, 6), (3, 4), (1, 1)), ((1,), (4,), (3,)), ((7,), (1,), (2,)),
])
@pytest.mark.parametrize("padding", ["SAME", "SAME_LOWER", "VALID", "same"])
def test_padtype_to_pads_matches_jax(in_shape, window, strides, padding):
    ours = lax.padtype_to_pads(in_shape, window, strides, padding)
    assert [tuple(p) for p in ours] == [tuple(p) for p in jlax.padtype_to_pads(
        in_shape, window, strides, padding)]


@pytest.mark.parametrize("dimension_numbers", [
    None, ("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"), ("NWHC", "HWIO", "NHWC"),
    ("CHWN", "IOHW", "WHNC"),
])
def test_conv_dimension_numbers_and_shape_tuples_match_jax(dimension_numbers):
    lhs_shape, rhs_shape = (2, 5, 6, 3), (3, 2, 3, 4)
    assert tuple(lax.conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)) == tuple(
        jlax.conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers))
    if dimension_numbers is not None:
        for padding in ["SAME", [(1, 0), (2, 1)]]:
            assert lax.conv_general_shape_tuple(lhs_shape, rhs_shape, (1, 2), padding,
                                                dimension_numbers) == tuple(
                jlax.conv_general_shape_tuple(lhs_shape, rhs_shape, (1, 2), padding,
                                              dimension_numbers))
    assert lax.conv_shape_tuple((2, 3, 9), (4, 3, 2), (2,), "SAME") == tuple(
        jlax.conv_shape_tuple((2, 3, 9), (4, 3, 2), (2,), "SAME"))


ERROR_CASES = [
    ("dtype mismatch", dict(rhs_dtype=np.int32), "requires arguments to have the same dtypes"),
    ("stride count", dict(window_strides=(1, 1)), "window and window_strides must have the same"),
    ("pad count", dict(padding=[(0, 0), (1, 1)]), "Wrong number of explicit pads"),
    ("features", dict(rhs_shape=(3, 1, 2)), "must equal the rhs input feature dimension"),
    ("groups", dict(feature_group_count=3), "feature_group_count must divide"),
    ("rank", dict(rhs_shape=(3, 2, 2, 1)), "ndim to be equal"),
    ("padding string", dict(padding="FOO"), "Unrecognized padding type"),
    ("string padding with lhs dilation", dict(lhs_dilation=(2,)), "String padding is not"),
    ("spatial chars", dict(dimension_numbers=("NCH", "OIW", "NCH")), "same set of spatial"),
    ("dnums length", dict(dimension_numbers=("NCH", "OIH")), "must be length 3"),
    ("bad padding pair", dict(padding=[(1, 2, 3)]), "sequence of \\(low, high\\) pairs"),
    ("negative dilation", dict(padding="VALID", rhs_dilation=(0,)), "strictly positive"),
    ("both group counts", dict(feature_group_count=2, batch_group_count=2, lhs_shape=(2, 2, 5),
                               rhs_shape=(2, 1, 2)), "At most one of batch_group_count"),
]


@pytest.mark.parametrize("what,changes,message", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_match_jax(what, changes, message):
    changes = dict(changes)
    x = np.ones(changes.pop("lhs_shape", (1, 2, 5)), np.float32)
    w = np.ones(changes.pop("rhs_shape", (3, 2, 2)), changes.pop("rhs_dtype", np.float32))
    args = dict(dict(window_strides=(1,), padding="SAME"), **changes)
    with pytest.raises(Exception) as theirs:
        jlax.conv_general_dilated(x, w, **args)
    with pytest.raises(type(theirs.value), match=message):
        lax.conv_general_dilated(x, w, **args)


def test_zero_stride_is_a_clear_error():
    with pytest.raises(ValueError, match="window_strides must have every element be strictly"):
        lax.conv_general_dilated(np.ones((1, 2, 5), np.float32), np.ones((3, 2, 2), np.float32),
                                 (0,), "VALID")


@pytest.mark.parametrize("padding,consistent", [("SAME", False), ("VALID", False),
                                                ([(1, 2), (0, 1)], False),
                                                ([(1, 0), (0, 1)], True)])
@pytest.mark.parametrize("transpose_kernel", [False, True])
def test_conv_transpose_matches_jax(rng, padding, consistent, transpose_kernel):
    x, w = _random(rng, (2, 4, 5, 3), np.float32), _random(rng, (3, 2, 3, 4), np.float32)
    args = dict(strides=(2, 1), padding=padding, rhs_dilation=(1, 2),
                transpose_kernel=transpose_kernel, use_consistent_padding=consistent)
    if transpose_kernel:
        w = _random(rng, (3, 2, 4, 3), np.float32)
    out = lax.conv_transpose(x, w, **args)
    expected = jlax.conv_transpose(x, w, **args)
    assert out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-5, atol=1e-5)
