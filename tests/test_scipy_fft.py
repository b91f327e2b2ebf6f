"""scipy.fft.dct/dctn/idct/idctn against SciPy, with JAX for dtypes and errors."""
import jax
import jax.scipy.fft
import numpy as np
import pytest
import scipy.fft

import fluxion
import fluxion.scipy.fft as ffft
from fluxion.test_util import check_grads

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("fn", ["dct", "idct"])
@pytest.mark.parametrize("norm", [None, "backward", "ortho"])
@pytest.mark.parametrize("n", [None, 1, 4, 9])
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((8,), -1), ((3, 5), 0), ((2, 6, 5), 1)])
def test_1d_matches_scipy(fn, norm, n, shape, axis):
    x = RNG.standard_normal(shape)
    got = getattr(ffft, fn)(x.astype(np.float32), n=n, axis=axis, norm=norm)
    want = getattr(scipy.fft, fn)(x, n=n, axis=axis, norm=norm)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("fn", ["dctn", "idctn"])
@pytest.mark.parametrize("norm", [None, "ortho"])
@pytest.mark.parametrize("s,axes", [(None, None), ([4], None), (None, [0]), ([2, 7], None),
                                    ([3, 5], (2, 0)), (None, (0, 1, 2)), (3, 1)])
def test_nd_matches_scipy_f64(x64, fn, norm, s, axes):
    x = RNG.standard_normal((4, 6, 5))
    got = getattr(ffft, fn)(x, s=s, axes=axes, norm=norm)
    want = getattr(scipy.fft, fn)(x, s=s, axes=axes, norm=norm)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fn", ["dct", "idct", "dctn", "idctn"])
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.complex64, np.float16])
def test_dtypes_match_jax(fn, dtype):
    x = (RNG.standard_normal((4, 5)) * 3).astype(dtype)
    if dtype == np.complex64:
        x = x + 1j * RNG.standard_normal((4, 5)).astype(np.float32)
    got = getattr(ffft, fn)(x)
    want = getattr(jax.scipy.fft, fn)(x)
    assert got.dtype == want.dtype
    tol = 1e-2 if dtype == np.float16 else 1e-4
    np.testing.assert_allclose(np.asarray(got, np.complex128), np.asarray(want, np.complex128),
                               rtol=tol, atol=tol)
    if dtype == np.complex64:
        np.testing.assert_allclose(got, getattr(scipy.fft, fn)(x.astype(np.complex128)),
                                   rtol=1e-4, atol=1e-4)


def test_round_trip_jit_and_vmap():
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    back = fluxion.jit(lambda v: ffft.idct(ffft.dct(v, norm="ortho"), norm="ortho"))(x)
    np.testing.assert_allclose(back, x, rtol=1e-5, atol=1e-5)
    batched = fluxion.vmap(lambda v: ffft.dctn(v, s=[5]))(x)
    np.testing.assert_allclose(batched, np.stack([scipy.fft.dct(r, n=5) for r in x]),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("fn", ["dct", "idct", "dctn", "idctn"])
def test_gradients(x64, fn):
    x = RNG.standard_normal((3, 4))
    check_grads(lambda v: getattr(ffft, fn)(v, norm="ortho"), (x,), order=2,
                modes=["fwd", "rev"])


def test_errors_match_jax():
    x = np.ones(4, np.float32)
    for mod, exc in [(ffft, NotImplementedError), (jax.scipy.fft, NotImplementedError)]:
        with pytest.raises(exc, match="type 2"):
            mod.dct(x, type=3)
    with pytest.raises(ValueError, match="norm"):
        ffft.idct(x, norm="forward")
    with pytest.raises(ValueError, match="at most x.ndim"):
        ffft.dctn(x, s=[2, 2])
    with pytest.raises(TypeError):
        ffft.dct([1.0, 2.0])
