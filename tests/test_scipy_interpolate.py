"""scipy.interpolate.RegularGridInterpolator against SciPy."""
import numpy as np
import pytest
import scipy.interpolate as si

import fluxion
from fluxion.scipy.interpolate import RegularGridInterpolator

RNG = np.random.default_rng(0)
GRID = (np.array([0.0, 1.0, 2.5, 4.0]), np.array([-1.0, 0.0, 0.5, 2.0, 3.0]))
VALUES = RNG.standard_normal((4, 5))


@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_matches_scipy(method, x64):
    xi = np.stack([RNG.uniform(0, 4, 20), RNG.uniform(-1, 3, 20)], axis=-1)
    ours = RegularGridInterpolator(GRID, VALUES, method=method)
    theirs = si.RegularGridInterpolator(GRID, VALUES, method=method)
    np.testing.assert_allclose(ours(xi), theirs(xi), atol=1e-12)
    outside = np.array([[-1.0, 0.0], [1.0, 5.0]])
    assert np.all(np.isnan(np.asarray(ours(outside))))
    filled = RegularGridInterpolator(GRID, VALUES, method=method, fill_value=-7.0)
    np.testing.assert_allclose(filled(outside), [-7.0, -7.0])
    extrapolating = RegularGridInterpolator(GRID, VALUES, method=method, fill_value=None)
    want = si.RegularGridInterpolator(GRID, VALUES, method=method, bounds_error=False,
                                      fill_value=None)(outside)
    np.testing.assert_allclose(extrapolating(outside), want, atol=1e-12)


def test_trailing_value_dims_tuple_queries_pytree_and_errors(x64):
    values = RNG.standard_normal((4, 5, 2))
    ours = RegularGridInterpolator(GRID, values)
    xs, ys = np.meshgrid(np.linspace(0, 4, 3), np.linspace(-1, 3, 4), indexing="ij")
    np.testing.assert_allclose(ours((xs, ys)), si.RegularGridInterpolator(GRID, values)((xs, ys)),
                               atol=1e-12)
    jitted = fluxion.jit(lambda interp, p: interp(p))
    np.testing.assert_allclose(jitted(ours, np.array([[1.0, 0.2]])),
                               si.RegularGridInterpolator(GRID, values)([[1.0, 0.2]]), atol=1e-12)
    with pytest.raises(ValueError, match="not defined"):
        RegularGridInterpolator(GRID, VALUES, method="cubic")
    with pytest.raises(NotImplementedError, match="bounds_error"):
        RegularGridInterpolator(GRID, VALUES, bounds_error=True)
    with pytest.raises(ValueError, match="dimension"):
        ours(np.ones((2, 3)))
