"""scipy.signal against SciPy (values) and JAX (dtypes, defaults, errors)."""
import warnings

import jax
import jax.scipy.signal
import numpy as np
import pytest
import scipy.signal

import fluxion
import fluxion.scipy.signal as fsig
from fluxion.test_util import check_grads

RNG = np.random.default_rng(0)
SHAPES = [((7,), (3,)), ((3,), (7,)), ((6,), (4,)), ((4,), (6,)), ((5,), (5,)),
          ((5, 6), (2, 3)), ((2, 3), (5, 6)), ((4, 5), (4, 2)), ((3, 4, 5), (2, 2, 3))]


def _pair(s1, s2, complex_):
    a, b = RNG.standard_normal(s1), RNG.standard_normal(s2)
    if complex_:
        a, b = a + 1j * RNG.standard_normal(s1), b + 1j * RNG.standard_normal(s2)
    return a, b


def _scipy_or_none(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except ValueError:
        return None


@pytest.mark.parametrize("fn,kwargs", [("convolve", {}), ("correlate", {}), ("fftconvolve", {}),
                                       ("convolve", {"method": "fft"}),
                                       ("correlate", {"method": "fft"}),
                                       ("convolve2d", {}), ("correlate2d", {})])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("complex_", [False, True])
def test_convolutions_match_scipy(fn, kwargs, mode, complex_):
    for s1, s2 in SHAPES:
        if fn.endswith("2d") and len(s1) != 2:
            continue
        a, b = _pair(s1, s2, complex_)
        want = _scipy_or_none(getattr(scipy.signal, fn), a, b, mode=mode, **kwargs)
        dtype = np.complex64 if complex_ else np.float32
        if want is None:  # SciPy refuses ("valid" with neither input the larger)
            with pytest.raises(ValueError):
                getattr(fsig, fn)(a.astype(dtype), b.astype(dtype), mode=mode, **kwargs)
            continue
        got = getattr(fsig, fn)(a.astype(dtype), b.astype(dtype), mode=mode, **kwargs)
        assert got.shape == want.shape and got.dtype == dtype, (s1, s2)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str((s1, s2)))


@pytest.mark.parametrize("fn", ["convolve", "correlate", "fftconvolve", "convolve2d",
                                "correlate2d"])
def test_dtypes_match_jax(fn):
    for a, b in [(np.arange(6, dtype=np.int32).reshape(2, 3), np.ones((2, 2), np.int32)),
                 (np.ones((3, 3), np.float16), np.ones((2, 2), np.float32)),
                 (np.ones((3, 3), np.float32), np.ones((2, 2), np.complex64))]:
        got = getattr(fsig, fn)(a, b)
        want = getattr(jax.scipy.signal, fn)(a, b)
        assert got.dtype == want.dtype, (a.dtype, b.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_convolve_f64_and_precision(x64):
    a, b = RNG.standard_normal((40,)), RNG.standard_normal((9,))
    got = fsig.convolve(a, b, precision=fluxion.lax.Precision.HIGHEST)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.convolve(a, b), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fsig.fftconvolve(a, b, "same"),
                               scipy.signal.fftconvolve(a, b, "same"), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_fftconvolve_axes(mode):
    a, b = RNG.standard_normal((3, 8, 5)), RNG.standard_normal((3, 4, 5))
    got = fsig.fftconvolve(a.astype(np.float32), b.astype(np.float32), mode, axes=1)
    np.testing.assert_allclose(got, scipy.signal.fftconvolve(a, b, mode, axes=1),
                               rtol=1e-4, atol=1e-4)
    got = fsig.fftconvolve(a.astype(np.float32), b[:, :, :2].astype(np.float32), mode,
                           axes=(-2, 2))
    np.testing.assert_allclose(got, scipy.signal.fftconvolve(a, b[:, :, :2], mode, axes=(1, 2)),
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="mapped axes"):
        fsig.fftconvolve(a, b[:2], mode, axes=1)


def test_jit_vmap_and_gradients(x64):
    a, b = RNG.standard_normal((4, 9)), RNG.standard_normal((4, 3))
    batched = fluxion.vmap(lambda u, v: fsig.convolve(u, v, "same"))(a, b)
    np.testing.assert_allclose(batched, [np.convolve(u, v, "same") for u, v in zip(a, b)],
                               rtol=1e-12)
    jitted = fluxion.jit(fsig.correlate, static_argnames="mode")(a[0], b[0], mode="valid")
    np.testing.assert_allclose(jitted, np.correlate(a[0], b[0], "valid"), rtol=1e-12)
    for fn in [fsig.convolve, fsig.correlate, fsig.fftconvolve, fsig.convolve2d,
               fsig.correlate2d]:
        args = (a[:3, :5], b[:2]) if fn in (fsig.convolve2d, fsig.correlate2d) else (a[0], b[0])
        check_grads(lambda u, v: fn(u, v, "same"), args, order=2, modes=["fwd", "rev"])


def test_convolution_errors_match_jax():
    a = np.ones((3, 4), np.float32)
    for mod in (fsig, jax.scipy.signal):
        with pytest.raises(ValueError, match="mode"):
            mod.convolve(a, a, mode="middle")
        with pytest.raises(ValueError, match="method"):
            mod.convolve(a, a, method="magic")
        with pytest.raises(NotImplementedError, match="boundary"):
            mod.convolve2d(a, a, boundary="wrap")
        with pytest.raises(NotImplementedError, match="fillvalue"):
            mod.correlate2d(a, a, fillvalue=1)
        with pytest.raises(ValueError, match="2-dimensional"):
            mod.convolve2d(a[0], a[0])
        with pytest.raises(ValueError, match="dimension"):
            mod.convolve(a, a[0])
        with pytest.raises(ValueError):
            mod.convolve(np.ones((3, 2)), np.ones((2, 3)), mode="valid")
    with pytest.raises(ValueError, match="zero-size"):
        fsig.convolve(np.ones(0), np.ones(2))
    with pytest.raises(TypeError):
        fsig.convolve([1.0, 2.0], [1.0])


@pytest.mark.parametrize("bp", [0, 5, [3, 11], [19], np.array([2, 9, 15])])
@pytest.mark.parametrize("axis", [0, -1])
def test_detrend_matches_scipy(bp, axis):
    x = RNG.standard_normal((20, 20)) + np.arange(20)
    got = fsig.detrend(x.astype(np.float32), axis=axis, bp=bp)
    np.testing.assert_allclose(got, scipy.signal.detrend(x, axis=axis, bp=bp), atol=2e-5)
    got = fsig.detrend(x.astype(np.float32), axis=axis, type="constant")
    np.testing.assert_allclose(got, scipy.signal.detrend(x, axis=axis, type="constant"),
                               atol=2e-5)


def test_detrend_dtypes_errors_and_gradient(x64):
    ints = np.arange(5, dtype=np.int32)
    assert fsig.detrend(ints).dtype == jax.scipy.signal.detrend(ints).dtype == np.float32
    check_grads(lambda v: fsig.detrend(v, bp=[4]), (RNG.standard_normal(9),), order=2,
                modes=["fwd", "rev"])
    with pytest.raises(ValueError, match="Trend type"):
        fsig.detrend(np.ones(4), type="quadratic")
    with pytest.raises(ValueError, match="Breakpoints"):
        fsig.detrend(np.ones(4), bp=7)
    with pytest.raises(NotImplementedError, match="overwrite_data"):
        fsig.detrend(np.ones(4), overwrite_data=True)


SPECTRAL_OPTIONS = [{}, {"noverlap": 10}, {"nfft": 100}, {"window": "hamming"},
                    {"window": ("tukey", 0.3)}, {"scaling": "spectrum"}, {"detrend": "linear"},
                    {"detrend": False}, {"return_onesided": False}, {"average": "median"},
                    {"window": np.hanning(64)}, {"fs": 10.0}]


def _close(got, want, tol=1e-4):
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("options", SPECTRAL_OPTIONS, ids=str)
def test_welch_and_csd_match_scipy(options):
    x, y = RNG.standard_normal((2, 300)), RNG.standard_normal((2, 300))
    f32 = np.float32
    _close(fsig.welch(x.astype(f32), nperseg=64, **options),
           scipy.signal.welch(x, nperseg=64, **options))
    _close(fsig.csd(x.astype(f32), y.astype(f32), nperseg=64, **options),
           scipy.signal.csd(x, y, nperseg=64, **options))


@pytest.mark.parametrize("options", [{}, {"boundary": None}, {"boundary": "even"},
                                     {"boundary": "odd"}, {"boundary": "constant"},
                                     {"padded": False}, {"nfft": 80},
                                     {"return_onesided": False}, {"noverlap": 20},
                                     {"detrend": "constant"}, {"window": "blackman"}], ids=str)
def test_stft_matches_scipy(options):
    x = RNG.standard_normal((2, 300))
    _close(fsig.stft(x.astype(np.float32), nperseg=64, **options),
           scipy.signal.stft(x, nperseg=64, **options))


@pytest.mark.parametrize("options", [{}, {"noverlap": 16}, {"window": "hamming"},
                                     {"nperseg": 63}])
@pytest.mark.parametrize("boundary", [True, False])
def test_istft_matches_scipy(options, boundary):
    x = RNG.standard_normal((2, 300))
    _, _, z = scipy.signal.stft(x, **{"nperseg": 64, **options})
    _close(fsig.istft(z.astype(np.complex64), boundary=boundary, **options),
           scipy.signal.istft(z, boundary=boundary, **options))


def test_istft_round_trip_axes_and_x64(x64):
    x = RNG.standard_normal((3, 200))
    _, _, z = fsig.stft(x, nperseg=32)
    t, back = fsig.istft(z, nperseg=32)
    assert back.dtype == np.float64 and t.dtype == np.float64
    np.testing.assert_allclose(back[:, :200], x, atol=1e-12)
    _, moved = fsig.istft(np.moveaxis(z, -1, 0), nperseg=32, time_axis=0, freq_axis=-1)
    np.testing.assert_allclose(moved, back.T, atol=1e-12)


def test_spectral_defaults_and_dtypes_match_jax():
    x = RNG.standard_normal((2, 300)).astype(np.float32)
    for name in ["welch", "stft"]:  # JAX: a named window spans the signal without nperseg
        got, want = getattr(fsig, name)(x), jax.jit(getattr(jax.scipy.signal, name))(x)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    got = fsig.csd(np.arange(40), np.arange(40), nperseg=8)
    want = jax.eval_shape(lambda a: jax.scipy.signal.csd(a, a, nperseg=8), np.arange(40))
    assert [g.dtype for g in got] == [w.dtype for w in want]
    z = RNG.standard_normal((2, 300)) + 1j * RNG.standard_normal((2, 300))
    with pytest.warns(UserWarning, match="complex"):
        got = fsig.welch(z.astype(np.complex64), nperseg=32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(got, scipy.signal.welch(z, nperseg=32))


def test_spectral_jit_vmap_and_gradient(x64):
    x = RNG.standard_normal((3, 128))
    f = fluxion.jit(lambda v: fsig.welch(v, nperseg=32)[1])
    batched = fluxion.vmap(f)(x)
    np.testing.assert_allclose(batched, scipy.signal.welch(x, nperseg=32)[1], rtol=1e-10)
    check_grads(lambda v: fsig.welch(v, nperseg=16)[1], (x[0, :48],), order=1,
                modes=["fwd", "rev"])
    check_grads(lambda v: fsig.stft(v, nperseg=16)[2], (x[0, :48],), order=1,
                modes=["fwd", "rev"])


def test_spectral_errors():
    x = np.ones(64, np.float32)
    with pytest.raises(ValueError, match="noverlap"):
        fsig.welch(x, nperseg=16, noverlap=16)
    with pytest.raises(ValueError, match="nfft"):
        fsig.welch(x, nperseg=16, nfft=8)
    with pytest.raises(ValueError, match="scaling"):
        fsig.welch(x, nperseg=16, scaling="loud")
    with pytest.raises(ValueError, match="average"):
        fsig.welch(np.ones((2, 64)), nperseg=16, average="mode")
    with pytest.raises(ValueError, match="boundary"):
        fsig.stft(x, boundary="periodic")
    with pytest.raises(ValueError, match="nperseg"):
        fsig.welch(x, window=np.ones(8), nperseg=16)
    with pytest.raises(ValueError, match="2d"):
        fsig.istft(x)
    with pytest.raises(ValueError, match="differing"):
        fsig.istft(np.ones((3, 4)), time_axis=0, freq_axis=0)
