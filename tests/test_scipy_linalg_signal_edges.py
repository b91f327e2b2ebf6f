"""Edge inputs of fluxion.scipy.linalg and fluxion.scipy.signal (empty, half precision,
batched, keyword options), checked against SciPy / NumPy values and JAX's error classes."""
import numpy as np
import pytest
import scipy.linalg

import fluxion as jax
import fluxion.numpy as jnp
import fluxion.scipy.linalg as L


@pytest.mark.parametrize("name", ["cholesky", "lu_factor", "eigh", "svd", "qr", "schur"])
@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
def test_half_precision_decompositions_raise_not_implemented(name, dtype):
    # JAX's LAPACK lowering has no half-precision kernels: NotImplementedError
    a = jnp.asarray(np.eye(2) * 2, dtype=dtype)
    with pytest.raises(NotImplementedError, match=f"Unsupported dtype {np.dtype(dtype).name}"):
        getattr(L, name)(a)


def test_integer_decomposition_input_still_type_error():
    from fluxion import lax
    with pytest.raises(TypeError):
        lax.linalg.cholesky(jnp.eye(2, dtype=jnp.int32))


@pytest.mark.parametrize("shape", [(0, 0), (0, 3, 3), (2, 0, 0)])
def test_expm_of_empty(shape):
    out = L.expm(np.zeros(shape, np.float32))
    assert out.shape == shape and out.dtype == jnp.float32


def test_expm_frechet_batched_matches_each_matrix():
    rng = np.random.RandomState(0)
    a = (0.5 * rng.randn(2, 3, 3)).astype(np.float32)
    e = rng.randn(2, 3, 3).astype(np.float32)
    value, deriv = L.expm_frechet(a, e)
    for i in range(2):
        want_value, want_deriv = scipy.linalg.expm_frechet(a[i].astype(np.float64),
                                                          e[i].astype(np.float64))
        np.testing.assert_allclose(value[i], want_value, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(deriv[i], want_deriv, rtol=1e-4, atol=1e-4)
    assert L.expm_frechet(np.zeros((0, 2, 2)), np.zeros((0, 2, 2)),
                          compute_expm=False).shape == (0, 2, 2)


@pytest.mark.parametrize("shape,side,p_shape", [((0, 0), "right", (0, 0)),
                                                 ((0, 3), "right", (3, 3)),
                                                 ((0, 3), "left", (0, 0)),
                                                 ((2, 0, 0), "right", (2, 0, 0))])
def test_polar_of_empty(shape, side, p_shape):
    u, p = L.polar(np.zeros(shape, np.float32), side=side)
    assert u.shape == shape and p.shape == p_shape
    assert u.dtype == p.dtype == jnp.float32
    np.testing.assert_array_equal(p, np.zeros(p_shape))


D = np.array([1., 2., 3., -1.], np.float32)
E = np.array([.5, .25, 2.], np.float32)


def test_eigh_tridiagonal_eigenvectors_against_scipy():
    w, v = L.eigh_tridiagonal(D, E)
    want_w, want_v = scipy.linalg.eigh_tridiagonal(D.astype(np.float64), E.astype(np.float64))
    np.testing.assert_allclose(w, want_w, rtol=1e-5, atol=1e-5)
    # eigenvectors are defined up to sign
    np.testing.assert_allclose(np.abs(np.sum(np.asarray(v) * want_v, axis=0)), 1, rtol=1e-5)


def test_eigh_tridiagonal_select_by_index():
    want_w, want_v = scipy.linalg.eigh_tridiagonal(D.astype(np.float64), E.astype(np.float64),
                                                   select="i", select_range=(1, 2))
    np.testing.assert_allclose(L.eigh_tridiagonal(D, E, eigvals_only=True, select="i",
                                                  select_range=(1, 2)), want_w, rtol=1e-5)
    w, v = jax.jit(lambda d, e: L.eigh_tridiagonal(d, e, select="i", select_range=(1, 2)))(D, E)
    assert v.shape == (4, 2)
    np.testing.assert_allclose(np.abs(np.sum(np.asarray(v) * want_v, axis=0)), 1, rtol=1e-5)


@pytest.mark.parametrize("kwargs,error", [
    (dict(select="i"), ValueError), (dict(select="i", select_range=(2, 1)), ValueError),
    (dict(select="v", select_range=(0., 1.)), NotImplementedError),
    (dict(select="x"), ValueError)])
def test_eigh_tridiagonal_bad_select(kwargs, error):
    with pytest.raises(error):
        L.eigh_tridiagonal(D, E, eigvals_only=True, **kwargs)


def test_special_matrices_of_order_zero_and_one():
    assert L.pascal(0).shape == (0, 0) and L.pascal(0, kind="lower").shape == (0, 0)
    np.testing.assert_array_equal(L.pascal(1), [[1.]])
    with pytest.raises(ValueError, match="positive integer"):
        L.helmert(0)
    np.testing.assert_allclose(L.helmert(1, full=True), scipy.linalg.helmert(1, full=True))


@pytest.mark.parametrize("call", [lambda: L.fiedler_companion(np.zeros(0)),
                                  lambda: L.convolution_matrix(np.zeros(0), 3),
                                  lambda: L.convolution_matrix(np.float32(1), 3),
                                  lambda: L.leslie(np.ones(1), np.ones(0)),
                                  lambda: L.hankel(np.float32(2))])
def test_special_matrices_reject_empty_and_scalar_input(call):
    with pytest.raises(ValueError):
        call()


def test_leslie_keeps_integer_and_bool_dtype():
    assert L.leslie(np.array([1, 2, 3], np.int32), np.array([1, 2], np.int32)).dtype == jnp.int32
    out = L.leslie(np.array([True, False]), np.array([True]))
    assert out.dtype == jnp.bool_
    np.testing.assert_array_equal(out, [[True, False], [True, False]])


def test_companion_of_bool_and_int_is_float():
    out = L.companion(np.array([True, False, True]))
    assert out.dtype == jnp.float32
    np.testing.assert_array_equal(out, scipy.linalg.companion([1., 0., 1.]))


B2 = np.arange(1, 7).reshape(2, 3).astype(np.float32)


@pytest.mark.parametrize("name,make", [
    ("hankel", lambda v: L.hankel(v)),
    ("leslie", lambda v: L.leslie(v, v[..., 1:])),
    ("fiedler_companion", lambda v: L.fiedler_companion(v)),
    ("convolution_matrix", lambda v: L.convolution_matrix(v, 4, mode="same"))])
def test_special_matrices_batch_over_leading_dims(name, make):
    # SciPy builds one matrix per vector; fluxion (as JAX) stacks them
    out = make(B2)
    for i in range(2):
        np.testing.assert_allclose(out[i], make(B2[i]), rtol=1e-6)
    scipy_args = {"hankel": lambda v: scipy.linalg.hankel(v),
                  "leslie": lambda v: scipy.linalg.leslie(v, v[1:]),
                  "fiedler_companion": lambda v: scipy.linalg.fiedler_companion(v),
                  "convolution_matrix": lambda v: scipy.linalg.convolution_matrix(v, 4, "same")}
    np.testing.assert_allclose(out[1], scipy_args[name](B2[1].astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("name", ["welch", "csd", "stft"])
def test_spectral_of_empty_signal_is_empty(name):
    import scipy.signal
    import fluxion.scipy.signal as S
    x = np.zeros((2, 0), np.float32)
    args = (x, x) if name == "csd" else (x,)
    got = getattr(S, name)(*args, nperseg=16)
    want = getattr(scipy.signal, name)(*args, nperseg=16)
    assert [g.shape for g in got] == [w.shape for w in want]
    assert got[0].dtype == jnp.float32
    assert got[-1].dtype == (jnp.float32 if name == "welch" else jnp.complex64)


@pytest.mark.parametrize("call", [lambda: L.toeplitz([1., 2.]), lambda: L.hankel([1., 2.]),
                                  lambda: L.circulant([1., 2.]), lambda: L.block_diag([1., 2.]),
                                  lambda: L.convolution_matrix([1., 2.], 3)])
def test_special_matrices_refuse_lists_as_jax(call):
    with pytest.raises(TypeError, match="ndarray or scalar"):
        call()


@pytest.mark.parametrize("name", ["expm", "cholesky", "sqrtm", "eigh", "qr", "lu_factor"])
def test_integer_and_bool_input_promote_as_jax_under_x64(x64, name):
    # JAX's to_inexact_dtype: bool and int32 -> float32, int64 -> float64, whatever x64 says
    fn = getattr(L, name)
    kinds = {"sqrtm": ("complex64", "complex128")}.get(name, ("float32", "float64"))
    for dtype, want in ((np.bool_, kinds[0]), (np.int32, kinds[0]), (np.int64, kinds[1])):
        out = jax.eval_shape(fn, np.eye(2, dtype=dtype))  # dtypes only: no compiles
        out = out[0] if isinstance(out, tuple) else out
        assert out.dtype == np.dtype(want), (dtype, out.dtype)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_det_of_half_precision(dtype, n):
    # JAX computes 2x2 and 3x3 half-precision determinants in closed form; fluxion factors
    # in float32 and rounds back, for every n
    a = np.array([[4., 1, 0, 2], [1, 3, 1, 0], [0, 2, 5, 1], [1, 0, 1, 3]])[:n, :n]
    out = L.det(jnp.asarray(a, dtype=dtype))
    assert out.dtype == dtype
    np.testing.assert_allclose(np.float32(out), np.linalg.det(a), rtol=1e-2)
