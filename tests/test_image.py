"""fluxion.image against jax.image: every method, antialiasing, gradients, vmap."""
import jax
import numpy as np
import pytest

import fluxion
from fluxion.test_util import check_grads

IMG = np.random.default_rng(0).standard_normal((2, 9, 7, 3)).astype(np.float32)
METHODS = ["nearest", "linear", "bilinear", "lanczos3", "lanczos5", "cubic", "cubic-pytorch",
           "area"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape", [(2, 15, 4, 3), (2, 4, 12, 3)], ids=str)
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_matches_jax(method, shape, antialias):
    got = fluxion.image.resize(IMG, shape, method, antialias=antialias)
    want = jax.image.resize(IMG, shape, method, antialias=antialias)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, atol=2e-6)


@pytest.mark.parametrize("method", ["linear", "lanczos3", "cubic", "cubic-pytorch", "area"])
def test_scale_and_translate_matches_jax(method):
    scale, shift = np.array([1.7, 0.6], np.float32), np.array([0.3, -1.2], np.float32)
    got = fluxion.image.scale_and_translate(IMG, (2, 11, 5, 3), (1, 2), scale, shift, method)
    want = jax.image.scale_and_translate(IMG, (2, 11, 5, 3), (1, 2), scale, shift, method)
    np.testing.assert_allclose(got, want, atol=2e-6)


def test_gradients_in_image_scale_and_translation(x64):
    img = IMG[0, :, :, 0].astype(np.float64)
    check_grads(lambda x: fluxion.image.resize(x, (5, 11), "cubic"), (img,), order=1,
                modes=["fwd", "rev"])
    f = lambda s, t: fluxion.image.scale_and_translate(img, (6, 5), (0, 1), s, t, "lanczos3")
    check_grads(f, (np.array([0.8, 1.3]), np.array([0.2, -0.4])), order=1, modes=["fwd", "rev"])


def test_vmap_jit_and_integer_input():
    got = fluxion.vmap(lambda x: fluxion.image.resize(x, (4, 12, 3), "linear"))(IMG)
    want = np.stack([fluxion.image.resize(x, (4, 12, 3), "linear") for x in IMG])
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(fluxion.jit(lambda x: fluxion.image.resize(x, (2, 4, 12, 3),
                                                                           "lanczos5"))(IMG),
                               jax.image.resize(IMG, (2, 4, 12, 3), "lanczos5"), atol=2e-6)
    ints = np.arange(6).reshape(2, 3)
    got = fluxion.image.resize(ints, (4, 6), "linear")
    assert got.dtype == jax.image.resize(ints, (4, 6), "linear").dtype
    assert fluxion.image.resize(ints, (4, 6), "nearest").dtype == jax.image.resize(
        ints, (4, 6), "nearest").dtype


def test_errors():
    with pytest.raises(ValueError, match="Unknown resize method"):
        fluxion.image.resize(IMG, IMG.shape, "sinc")
    with pytest.raises(ValueError, match="shape must have length"):
        fluxion.image.resize(IMG, (3, 3), "linear")
    with pytest.raises(ValueError, match="Nearest neighbor"):
        fluxion.image.scale_and_translate(IMG, IMG.shape, (1,), [1.0], [0.0], "nearest")
    assert fluxion.image.ResizeMethod.from_string("bicubic") is fluxion.image.ResizeMethod.CUBIC
