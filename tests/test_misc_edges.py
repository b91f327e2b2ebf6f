"""Edge inputs of jnp set ops, histograms, interp, jax.image and RegularGridInterpolator
against NumPy/SciPy (the truth where JAX 0.10.2 differs from them)."""
import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator as ScipyRGI

import fluxion
import fluxion.numpy as fnp
from fluxion import image
from fluxion.scipy.interpolate import RegularGridInterpolator


def test_unique_of_scalar_has_scalar_inverse_like_numpy():
    values, inverse = fnp.unique(3.0, return_inverse=True)
    np_values, np_inverse = np.unique(3.0, return_inverse=True)
    np.testing.assert_array_equal(values, np_values)
    assert inverse.shape == np_inverse.shape == ()
    _, sized_inverse = fnp.unique(np.float32(3), return_inverse=True, size=2)
    assert sized_inverse.shape == ()


def test_unique_of_empty_with_size_pads_every_output_to_size():
    def all_outputs(x):
        return fnp.unique(x, size=4, fill_value=0, return_index=True, return_inverse=True,
                          return_counts=True)

    empty = np.zeros(0, np.float32)
    for values, index, inverse, counts in (all_outputs(empty), fluxion.jit(all_outputs)(empty)):
        assert values.shape == index.shape == counts.shape == (4,)
        assert inverse.shape == (0,)
        np.testing.assert_array_equal(counts, np.zeros(4))


def test_histogram_of_no_data_uses_numpys_unit_range():
    empty = np.zeros(0, np.float32)
    counts, edges = fnp.histogram(empty, 3)
    np_counts, np_edges = np.histogram(empty, 3)
    np.testing.assert_array_equal(counts, np_counts)
    np.testing.assert_allclose(edges, np_edges, rtol=1e-6)
    np.testing.assert_allclose(fnp.histogram_bin_edges(empty, 2), [0.0, 0.5, 1.0])


def test_histogram_range_with_max_below_min_raises_value_error():
    with pytest.raises(ValueError, match="max must be larger than min"):
        fnp.histogram(np.ones(3, np.float32), 3, range=(2.0, 1.0))
    with pytest.raises(ValueError, match="max must be larger than min"):
        np.histogram(np.ones(3), 3, range=(2.0, 1.0))
    counts, _ = fnp.histogram(np.ones(3, np.float32), 3, range=(1.0, 1.0))  # equal is fine
    np.testing.assert_array_equal(counts, np.histogram(np.ones(3), 3, range=(1.0, 1.0))[0])


def test_interp_with_no_sample_points_raises_value_error():
    with pytest.raises(ValueError, match="empty"):
        fnp.interp(np.ones(2, np.float32), np.zeros(0, np.float32), np.zeros(0, np.float32))


def test_interp_period_ignores_left_and_right_like_numpy():
    # JAX 0.10.2 applies `left` below xp[0] even when `period` is given; NumPy ignores it.
    x = np.array([-1.0, 0.5, 2.9, 4.0], np.float32)
    xp = np.array([0.0, 1.0, 2.0, 3.0], np.float32)
    fp = np.array([0.0, 10.0, 5.0, 0.0], np.float32)
    np.testing.assert_allclose(fnp.interp(x, xp, fp, left=1.0, right=2.0, period=3.0),
                               np.interp(x, xp, fp, left=1.0, right=2.0, period=3.0),
                               rtol=1e-5)


def test_scale_and_translate_needs_one_scale_per_spatial_dim():
    img = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="one value per spatial dimension"):
        image.scale_and_translate(img, (3, 4), (0,), np.array([1.0, 1.0]), np.array([0.0]),
                                  "linear")
    with pytest.raises(ValueError, match="translation"):
        image.scale_and_translate(img, (3, 4), (0, 1), np.array([1.0, 1.0]), np.array([0.0]),
                                  "linear")


GRID = (np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.5, 2.0, 3.0]))
VALUES = (GRID[0][:, None] * 2 + GRID[1][None, :] ** 2).astype(np.float32)
POINTS = np.array([[0.5, 0.25], [2.0, 3.0], [-1.0, 1.0], [1.0, 4.0], [np.nan, 1.0],
                   [1.0, np.nan], [1.999, 2.999]], np.float32)


@pytest.mark.parametrize("fill_value", [np.nan, None, -5.0])
def test_regular_grid_nearest_gives_nan_at_nan_points_like_scipy(fill_value):
    ours = RegularGridInterpolator(GRID, VALUES, method="nearest", fill_value=fill_value)
    truth = ScipyRGI(GRID, VALUES, method="nearest", bounds_error=False,
                     fill_value=fill_value)(POINTS)
    np.testing.assert_allclose(ours(POINTS), truth, rtol=1e-6)
    np.testing.assert_allclose(fluxion.jit(lambda p: ours(p))(POINTS), truth, rtol=1e-6)


def test_regular_grid_axis_length_must_match_values():
    with pytest.raises(ValueError, match="points in dimension 1"):
        RegularGridInterpolator((GRID[0], GRID[1][:3]), VALUES)
    with pytest.raises(ValueError):
        ScipyRGI((GRID[0], GRID[1][:3]), VALUES)


def test_updates_at_indices_of_an_empty_axis_are_dropped():
    # JAX's scatter drops them; reading there stays an IndexError (as in NumPy).
    empty = fnp.zeros(0)
    for mode in (None, "drop", "clip", "fill"):
        assert empty.at[np.array([0, 1])].add(np.array([1.0, 2.0]), mode=mode).shape == (0,)
    assert fnp.zeros((2, 0)).at[1].set(3.0).shape == (2, 0)
    assert fluxion.jit(lambda i: empty.at[i].add(1.0))(np.array([0])).shape == (0,)
    with pytest.raises(IndexError):
        empty[np.array([0])]


def test_bincount_with_zero_length_is_empty():
    counts = fnp.bincount(np.array([0, 1, 3]), length=0)
    assert counts.shape == (0,) and counts.dtype == np.int32


def test_polyfit_takes_an_integral_float_degree_like_numpy():
    x = np.arange(4.0, dtype=np.float32)
    np.testing.assert_allclose(fnp.polyfit(x, 2 * x + 1, 1.0), np.polyfit(x, 2 * x + 1, 1.0),
                               atol=1e-5)


@pytest.mark.parametrize("shape", [(0, 2), (3, 0)])
def test_nearest_resize_to_an_empty_shape(shape):
    img = np.arange(12, dtype=np.int32).reshape(3, 4)
    for out in (image.resize(img, shape, "nearest"),
                fluxion.jit(lambda a: image.resize(a, shape, "nearest"))(img)):
        assert out.shape == shape and out.dtype == np.int32
