"""scipy.ndimage.map_coordinates, integrate.trapezoid and cluster.vq.vq against SciPy/JAX."""
import jax.scipy.ndimage
import numpy as np
import pytest
import scipy.cluster.vq
import scipy.integrate

import fluxion
import fluxion.scipy
from fluxion.test_util import check_grads

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_map_coordinates_matches_jax(order, mode, dtype):
    image = (RNG.standard_normal((5, 6)) * 10).astype(dtype)
    coords = [RNG.uniform(-2, 7, (3, 4)).astype(np.float32),
              RNG.uniform(-2, 8, (3, 4)).astype(np.float32)]
    got = fluxion.scipy.ndimage.map_coordinates(image, coords, order, mode=mode, cval=1.5)
    want = jax.scipy.ndimage.map_coordinates(image, coords, order, mode=mode, cval=1.5)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)


def test_map_coordinates_gradient_and_errors(x64):
    image = RNG.standard_normal((4, 4))
    coords = [np.array([0.3, 1.7, 2.2]), np.array([1.1, 0.4, 2.9])]
    check_grads(lambda im: fluxion.scipy.ndimage.map_coordinates(im, coords, 1), (image,),
                order=1, modes=["fwd", "rev"])
    with pytest.raises(ValueError, match="length input.ndim"):
        fluxion.scipy.ndimage.map_coordinates(image, coords[:1], 1)
    with pytest.raises(NotImplementedError, match="order"):
        fluxion.scipy.ndimage.map_coordinates(image, coords, 3)


def test_trapezoid_matches_scipy():
    y = RNG.standard_normal((3, 7))
    x = np.sort(RNG.uniform(0, 5, 7))
    for kwargs in [{}, {"dx": 0.3}, {"x": x}, {"x": np.tile(x, (3, 1))}]:
        np.testing.assert_allclose(fluxion.scipy.integrate.trapezoid(y, **kwargs),
                                   scipy.integrate.trapezoid(y, **kwargs), rtol=1e-5)
    np.testing.assert_allclose(fluxion.scipy.integrate.trapezoid(y, axis=0),
                               scipy.integrate.trapezoid(y, axis=0), rtol=1e-5)


def test_vq_matches_scipy():
    obs = RNG.standard_normal((10, 3)).astype(np.float32)
    book = RNG.standard_normal((4, 3)).astype(np.float32)
    codes, dist = fluxion.scipy.cluster.vq.vq(obs, book)
    want_codes, want_dist = scipy.cluster.vq.vq(obs, book)
    np.testing.assert_array_equal(codes, want_codes)
    np.testing.assert_allclose(dist, want_dist, rtol=1e-5)
    codes1, _ = fluxion.scipy.cluster.vq.vq(obs[:, 0], book[:, 0])
    np.testing.assert_array_equal(codes1, scipy.cluster.vq.vq(obs[:, 0], book[:, 0])[0])
    with pytest.raises(ValueError, match="same rank"):
        fluxion.scipy.cluster.vq.vq(obs, book[:, 0])


def test_integer_inputs_promote_like_jax(x64_both):
    # int32 goes to float32 first, even under x64 (JAX's promote_dtypes_inexact).
    import jax.scipy.cluster.vq as jvq
    import jax.scipy.integrate as jint
    y = np.arange(6, dtype=np.int32) ** 2
    x = np.array([0, 1, 3, 4, 7, 9], dtype=np.int32)
    for kw in ({}, {"x": x}, {"dx": 0.5}):
        got, want = fluxion.scipy.integrate.trapezoid(y, **kw), jint.trapezoid(y, **kw)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(got, want)
    obs = np.array([[0, 1], [5, 5], [2, 2]], dtype=np.int32)
    book = np.array([[0, 0], [4, 4]], dtype=np.int32)
    got, want = fluxion.scipy.cluster.vq.vq(obs, book), jvq.vq(obs, book)
    assert [g.dtype for g in got] == [w.dtype for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)
