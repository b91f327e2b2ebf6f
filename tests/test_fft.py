"""lax.fft and jax.numpy.fft: values against numpy.fft, dtypes and errors against JAX,
derivatives against finite differences (and JAX's transposes), vmap against a loop."""
import contextlib

import jax
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.test_util import check_grads

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4, 6))
Z = X + 1j * RNG.standard_normal((3, 4, 6))


@contextlib.contextmanager
def both_x64(on: bool):
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", on)
    try:
        with fluxion.enable_x64(on):
            yield
    finally:
        jax.config.update("jax_enable_x64", old)


ONE_D = [("fft", {}), ("fft", {"n": 5}), ("fft", {"n": 9, "axis": 0, "norm": "backward"}), ("ifft", {"axis": 1}),
         ("rfft", {}), ("rfft", {"n": 7, "axis": 1}), ("irfft", {}), ("irfft", {"n": 7}),
         ("irfft", {"n": 4, "axis": 0}), ("hfft", {}), ("hfft", {"n": 5, "axis": 1}),
         ("ihfft", {}), ("ihfft", {"n": 3, "axis": 0})]
N_D = [("fft2", {}), ("ifft2", {"s": (3, 5)}), ("rfft2", {"axes": (0, 2)}),
       ("irfft2", {"s": (2, 7), "axes": (2, 0)}), ("fftn", {}), ("fftn", {"axes": (1,)}),
       ("ifftn", {"s": (5, 2, 3), "axes": (0, 1, 2)}), ("rfftn", {"s": (4, 4), "axes": (1, 2)}), ("irfftn", {}),
       ("irfftn", {"axes": (0, 1)})]
NORMS = [None, "backward", "ortho", "forward"]
REAL_ONLY = {"rfft", "ihfft", "rfft2", "rfftn"}


def _check_against_numpy(name, kw, norm):
    inputs = [X] if name in REAL_ONLY else [X, Z]
    kw = {"norm": norm, **kw}
    for a in inputs:
        got = getattr(jnp.fft, name)(a, **kw)
        want = getattr(np.fft, name)(a, **kw)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
        jitted = fluxion.jit(lambda a: getattr(jnp.fft, name)(a, **kw))(a)
        np.testing.assert_allclose(jitted, got, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("i", range(len(ONE_D + N_D)))
def test_values_against_numpy(i, x64):
    # Each case with one norm mode (cycling through them), jit and eager.
    name, kw = (ONE_D + N_D)[i]
    _check_against_numpy(name, kw, NORMS[i % len(NORMS)])


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn",
                                  "irfftn"])
def test_every_norm_mode(name, x64):
    for norm in ["backward", "ortho", "forward", None]:
        _check_against_numpy(name, {"n": 5} if name in ("fft", "hfft") else {}, norm)


@pytest.mark.parametrize("name,kw", ONE_D + N_D)
def test_single_precision_values(name, kw):
    a = (X if name in REAL_ONLY else Z).astype(np.complex64 if name not in REAL_ONLY
                                               else np.float32)
    got = getattr(jnp.fft, name)(a, **kw)
    want = getattr(np.fft, name)(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
                                 **kw)
    np.testing.assert_allclose(got, want, atol=2e-5 * max(1, np.abs(want).max()))


DTYPES = ["bool", "int8", "uint64", "float16", "bfloat16", "float32", "float64", "complex64",
          "complex128"]


@pytest.mark.parametrize("x64_on", [False, True])
def test_result_dtypes_and_errors_match_jax(x64_on):
    names = ["fft", "rfft", "irfft", "hfft", "ihfft", "rfftn"]
    with both_x64(x64_on):
        for dt in DTYPES:
            a = np.ones((2, 8), jnp.dtype(dt))
            for name in names:
                try:
                    want = getattr(jax.numpy.fft, name)(a)
                except Exception as e:  # noqa: BLE001 - the oracle decides the error class
                    with pytest.raises(type(e)):
                        getattr(jnp.fft, name)(a)
                    continue
                got = getattr(jnp.fft, name)(a)
                assert (got.dtype, got.shape, got.weak_type) == (
                    want.dtype, want.shape, want.weak_type), (name, dt)
            for typ in ["FFT", "IFFT", "RFFT"]:
                try:
                    want = jax.lax.fft(a, typ, (8,))
                except ValueError:
                    with pytest.raises(ValueError):
                        lax.fft(a, typ, (8,))
                    continue
                assert lax.fft(a, typ, (8,)).dtype == want.dtype, (typ, dt)
        # Weak Python scalars and frequencies.
        for f in [lambda m: m.fft.fftfreq(7, 0.3), lambda m: m.fft.rfftfreq(7, 0.3),
                  lambda m: m.fft.rfftfreq(8), lambda m: m.fft.fftfreq(8, dtype=m.int32),
                  lambda m: m.fft.fftfreq(6, dtype=m.complex64), lambda m: m.fft.fftfreq(0),
                  lambda m: m.fft.fft(m.ones(4) * 2.0)]:
            got, want = f(jnp), f(jax.numpy)
            assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_freqs_and_shifts_against_numpy():
    for n in [1, 2, 7, 8]:
        np.testing.assert_allclose(jnp.fft.fftfreq(n, 0.25), np.fft.fftfreq(n, 0.25), rtol=1e-6)
        np.testing.assert_allclose(jnp.fft.rfftfreq(n, 0.25), np.fft.rfftfreq(n, 0.25),
                                   rtol=1e-6)
    a = np.arange(30).reshape(5, 6)
    for axes in [None, 0, 1, (1,), (0, 1), (-1, 0)]:
        np.testing.assert_array_equal(jnp.fft.fftshift(a, axes), np.fft.fftshift(a, axes))
        np.testing.assert_array_equal(jnp.fft.ifftshift(a, axes), np.fft.ifftshift(a, axes))
        np.testing.assert_array_equal(jnp.fft.ifftshift(jnp.fft.fftshift(a, axes), axes), a)


def test_more_than_three_axes_and_empty_inputs():
    a = RNG.standard_normal((2, 3, 2, 3, 2)).astype(np.float32)
    np.testing.assert_allclose(jnp.fft.fftn(a), np.fft.fftn(a), atol=1e-4)
    np.testing.assert_allclose(jnp.fft.rfftn(a), np.fft.rfftn(a), atol=1e-4)
    np.testing.assert_allclose(jnp.fft.irfftn(np.fft.rfftn(a)), a, atol=1e-5)
    np.testing.assert_allclose(jnp.fft.ifftn(a[0]), np.fft.ifftn(a[0]), atol=1e-5)
    assert jnp.fft.fft(np.ones(0)).shape == (0,)
    assert jnp.fft.fft(np.ones((0, 4))).shape == (0, 4)
    assert jnp.fft.irfft(np.ones(1)).shape == (0,)
    assert jnp.fft.rfft(np.ones((3, 0, 4)), axis=-1).shape == (3, 0, 3)


def test_errors_match_jax():
    cases = [
        lambda m: m.numpy.fft.fft(np.ones(3), n=0),
        lambda m: m.numpy.fft.fft(np.float32(2.0)),
        lambda m: m.numpy.fft.fft(np.ones(3), norm="bad"),
        lambda m: m.numpy.fft.fftn(np.ones((2, 3)), axes=(0, 0)),
        lambda m: m.numpy.fft.fftn(np.ones((2, 3)), s=(2,), axes=(0, 1)),
        lambda m: m.numpy.fft.fft2(np.ones((2, 3)), axes=(0,)),
        lambda m: m.numpy.fft.fft(np.ones((2, 3)), axis=(0, 1)),
        lambda m: m.numpy.fft.fft(np.ones((2, 3)), axis=2),
        lambda m: m.numpy.fft.rfft(np.ones(4, np.complex64)),
        lambda m: m.numpy.fft.fft([1.0, 2.0]),
        lambda m: m.numpy.fft.fftfreq([3]),
        lambda m: m.numpy.fft.rfftfreq(3, d=[1.0]),
        lambda m: m.lax.fft(np.ones((2, 3), np.complex64), "FFT", (4,)),
        lambda m: m.lax.fft(np.ones((2, 3), np.complex64), "FFT", (1, 2, 3)),
        lambda m: m.lax.fft(np.ones((2, 3), np.complex64), 5, (3,)),
        lambda m: m.lax.fft(np.ones((2, 3), np.complex64), "fourier", (3,)),
        lambda m: m.lax.fft(np.ones((2, 3), np.float16), "RFFT", (3,)),
        lambda m: m.lax.fft(np.ones((4, 3), np.float32), "RFFT", (4, 4)),
        lambda m: m.lax.fft(np.ones((2, 3), np.complex64), "IRFFT", (3, 4)),
    ]
    for i, case in enumerate(cases):
        with pytest.raises(Exception) as want:
            case(jax)
        with pytest.raises(want.type):
            case(fluxion)
    # Where XLA itself would reject the program, ours says so before compiling.
    with pytest.raises(ValueError, match="IRFFT"):
        lax.fft(np.ones(8, np.complex64), "IRFFT", (8,))
    with pytest.raises(ValueError, match="at most 3"):
        lax.fft(np.ones((2, 2, 2, 2), np.complex64), "FFT", (2, 2, 2, 2))


def test_lax_fft_types_and_jaxpr():
    assert [t.name for t in lax.FftType] == [t.name for t in jax.lax.FftType]
    assert [int(t) for t in lax.FftType] == [int(t) for t in jax.lax.FftType]
    z = Z.astype(np.complex64)
    np.testing.assert_allclose(lax.fft(z, lax.FftType.FFT, (4, 6)), np.fft.fft2(z), atol=1e-4)
    np.testing.assert_allclose(lax.fft(z, "ifft", (3, 4, 6)), np.fft.ifftn(z), atol=1e-6)
    assert lax.fft(z, "FFT", ()) .dtype == np.complex64
    text = str(fluxion.make_jaxpr(lambda a: lax.fft(a, "RFFT", (6,)))(X.astype(np.float32)))
    assert "fft[fft_lengths=(6,) fft_type=2]" in text
    hlo = fluxion.jit(lambda a: lax.fft(a, "FFT", (6,))).lower(z).as_text()
    assert "stablehlo.fft" in hlo


JNP_DIFF = [("fft", {}, "c"), ("ifft", {"n": 5}, "c"), ("fft2", {"norm": "ortho"}, "c"),
            ("ifftn", {"axes": (0, 2)}, "c"), ("fft", {}, "r"), ("rfft", {}, "r"),
            ("rfft", {"n": 5}, "r"), ("rfft2", {"norm": "forward"}, "r"), ("rfftn", {}, "r"),
            ("ihfft", {}, "r")]


@pytest.mark.parametrize("name,kw,kind", JNP_DIFF)
def test_gradients_fwd_and_rev(name, kw, kind, x64):
    a = (Z if kind == "c" else X)[:2, :3]
    check_grads(lambda a: getattr(jnp.fft, name)(a, **kw), (a,), order=2, modes=["fwd", "rev"])


@pytest.mark.parametrize("name,kw", [("irfft", {}), ("irfft", {"n": 5}), ("hfft", {}),
                                     ("irfft2", {}), ("irfftn", {"s": (2, 3, 5)})])
def test_complex_to_real_gradients_against_jax(name, kw, x64):
    # Non-holomorphic (complex in, real out): forward mode against finite differences, the
    # VJP against JAX's convention.
    a = Z[:2, :3]
    f = lambda m: (lambda a: getattr(m.numpy.fft, name)(a, **kw))  # noqa: E731
    check_grads(f(fluxion), (a,), order=2, modes=["fwd"])
    with both_x64(True):
        out, pull = fluxion.vjp(f(fluxion), a)
        ct = RNG.standard_normal(out.shape)
        want = jax.vjp(f(jax), a)[1](ct)[0]
        np.testing.assert_allclose(pull(ct)[0], want, atol=1e-10)


@pytest.mark.parametrize("typ,lengths,kind", [("FFT", (4, 6), "c"), ("IFFT", (6,), "c"),
                                              ("RFFT", (6,), "r"), ("RFFT", (3, 4, 6), "r"),
                                              ("IRFFT", (4, 6), "h"), ("IRFFT", (5,), "h")])
def test_lax_transpose_matches_jax(typ, lengths, kind, x64):
    a = {"c": Z, "r": X, "h": np.fft.rfftn(X[..., :lengths[-1]], axes=range(3 - len(lengths), 3))
         }[kind]
    with both_x64(True):
        out = lax.fft(a, typ, lengths)
        ct = RNG.standard_normal(out.shape) * (1 + 0.3j if out.dtype.kind == "c" else 1)
        got = fluxion.vjp(lambda a: lax.fft(a, typ, lengths), a)[1](ct)[0]
        want = jax.vjp(lambda a: jax.lax.fft(a, typ, lengths), a)[1](ct)[0]
        np.testing.assert_allclose(got, want, atol=1e-10)
        assert got.dtype == want.dtype


@pytest.mark.parametrize("name,kw", [("fft", {}), ("rfft", {"n": 5}), ("irfft", {}),
                                     ("fft2", {}), ("rfftn", {"axes": (0,)}),
                                     ("ihfft", {})])
@pytest.mark.parametrize("in_axis", [0, 2])
def test_vmap_against_loop(name, kw, in_axis):
    a = (X if name in REAL_ONLY else Z).astype(np.complex64 if name not in REAL_ONLY
                                               else np.float32)
    f = lambda a: getattr(jnp.fft, name)(a, **kw)  # noqa: E731
    got = fluxion.vmap(f, in_axes=in_axis)(a)
    want = np.stack([f(np.take(a, i, axis=in_axis)) for i in range(a.shape[in_axis])])
    np.testing.assert_allclose(got, want, atol=1e-5)
    got_jit = fluxion.jit(fluxion.vmap(f, in_axes=in_axis, out_axes=-1))(a)
    np.testing.assert_allclose(got_jit, np.moveaxis(want, 0, -1), atol=1e-5)
