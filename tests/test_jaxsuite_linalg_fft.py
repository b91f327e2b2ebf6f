"""Linear-algebra and FFT behaviours found by running JAX 0.10.2's own tests against fluxion:
each checked here against JAX, NumPy or SciPy directly."""

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg

import fluxion
import fluxion.numpy as fnp
import fluxion.scipy.linalg as fsl
from fluxion.test_util import check_grads

R = np.random.RandomState(0)


def _lower(shape):
    k = R.randn(*shape).astype(np.float32)
    eye = np.eye(shape[-1], dtype=np.float32)
    return np.linalg.cholesky(k @ np.swapaxes(k, -1, -2) + shape[-1] * eye).astype(np.float32)


@pytest.mark.parametrize("a_shape,b_shape", [((3, 4, 4), (4,)), ((3, 4, 4), (4, 2)),
                                             ((4, 4), (3, 4, 2)), ((1, 4, 4), (3, 4, 2)),
                                             ((2, 1, 4, 4), (3, 4, 1))])
def test_triangular_solves_broadcast_batches(a_shape, b_shape):
    a, b = _lower(a_shape), R.randn(*b_shape).astype(np.float32)
    for ours, theirs, args in [(fsl.solve_triangular, jsl.solve_triangular, (a, b)),
                               (fsl.cho_solve, jsl.cho_solve, ((a, True), b))]:
        got = ours(*args, **({"lower": True} if ours is fsl.solve_triangular else {}))
        want = theirs(*args, **({"lower": True} if ours is fsl.solve_triangular else {}))
        assert got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fsl.solve_triangular(a, b, lower=True)),
                               scipy.linalg.solve_triangular(a, b, lower=True), rtol=1e-4,
                               atol=1e-5)


def test_batched_vector_right_hand_sides_warn_as_jax():
    a, b = _lower((3, 4, 4)), R.randn(3, 4).astype(np.float32)
    for fn, args in [(fsl.solve_triangular, (a, b)), (fsl.cho_solve, ((a, True), b))]:
        with pytest.warns(FutureWarning, match="batched 1D solves"):
            out = fn(*args)
        assert out.shape == (3, 4)


def test_eig_returns_named_result():
    a = R.randn(4, 4).astype(np.float32)
    result = fnp.linalg.eig(a)
    assert type(result).__name__ == "EigResult"
    assert result.eigenvalues is result[0] and result.eigenvectors is result[1]
    np.testing.assert_allclose(np.asarray(result.eigenvalues), np.asarray(fnp.linalg.eigvals(a)),
                               rtol=1e-5)


@pytest.mark.parametrize("shape", [(0, 2), (2, 0), (0, 0)])
@pytest.mark.parametrize("ord", [1, 2, np.inf, "fro", "nuc"])
def test_norms_of_empty_matrices_are_zero(shape, ord):
    for fn in (lambda x: fnp.linalg.matrix_norm(x, ord=ord),
               fluxion.jit(lambda x: fnp.linalg.norm(x, ord=ord))):
        assert float(fn(fnp.zeros(shape))) == 0.0
    assert float(fnp.linalg.vector_norm(fnp.zeros(0), ord=np.inf)) == 0.0
    # The smallest of nothing stays an error, as in JAX
    with pytest.raises(ValueError, match="zero-size"):
        fnp.linalg.matrix_norm(fnp.zeros((0, 2)), ord=-np.inf)


@pytest.mark.parametrize("shape", [(2, 1), (2, 2), (1, 2), (0, 3), (3, 0)])
@pytest.mark.parametrize("rcond", [None, -1, 0.5])
def test_lstsq_matches_jax_and_numpy(shape, rcond):
    for a in (np.zeros(shape, np.float32), R.randn(*shape).astype(np.float32)):
        b = np.ones(shape, np.float32)
        for numpy_resid in (False, True):
            ours = fnp.linalg.lstsq(a, b, rcond=rcond, numpy_resid=numpy_resid)
            theirs = jnp.linalg.lstsq(a, b, rcond=rcond, numpy_resid=numpy_resid)
            for o, t in zip(ours, theirs):
                assert o.shape == t.shape and o.dtype == t.dtype
                np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-4, atol=1e-5)
        if a.size and rcond != 0.5:  # (NumPy's gelsd cuts off at 0.5 differently)
            x, resid, rank, s = np.linalg.lstsq(a, b, rcond=rcond)
            np.testing.assert_allclose(np.asarray(ours[0]), x, rtol=1e-4, atol=1e-5)
            assert int(ours[2]) == rank
    jitted = fluxion.jit(lambda a, b: fnp.linalg.lstsq(a, b, rcond=rcond))(a, b)
    np.testing.assert_allclose(np.asarray(jitted[0]), np.asarray(theirs[0]), rtol=1e-4, atol=1e-5)
    with pytest.raises(fluxion.errors.TracerBoolConversionError):  # needs the rank, as in JAX
        fluxion.jit(lambda a, b: fnp.linalg.lstsq(a, b, numpy_resid=True))(a, b)


def test_tensorsolve_axes_move_to_the_end():
    a, b = R.randn(2, 1, 3, 6).astype(np.float32), R.randn(1, 6).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fnp.linalg.tensorsolve(a, b, axes=(0, 2))),
                               np.linalg.tensorsolve(a, b, axes=(0, 2)), rtol=1e-4, atol=1e-4)


def test_pinv_arguments_and_tall_jvp():
    x = fnp.ones((3, 3))
    with pytest.raises(ValueError, match="only one of rtol and rcond"):
        fnp.linalg.pinv(x, rcond=1e-2, rtol=1e-2)
    np.testing.assert_array_equal(np.asarray(fnp.linalg.pinv(x, rcond=1e-2)),
                                  np.asarray(fnp.linalg.pinv(x, rtol=1e-2)))
    # The JVP multiplies in the cheap order: no m x m intermediate for a tall m x 2 input.
    m = 1000
    a = R.randn(m, 2).astype(np.float32)
    jaxpr = fluxion.make_jaxpr(lambda a, t: fluxion.jvp(fnp.linalg.pinv, (a,), (t,)))(a, a)
    shapes = [v.aval.shape for eqn in jaxpr.jaxpr.eqns for v in eqn.outvars]
    assert all(shape.count(m) < 2 for shape in shapes)
    for shape in [(5, 2), (2, 5), (2, 3, 3)]:
        a = (R.randn(*shape) + 1j * R.randn(*shape)).astype(np.complex64)
        t = R.randn(*shape).astype(np.complex64)
        np.testing.assert_allclose(np.asarray(fluxion.jvp(fnp.linalg.pinv, (a,), (t,))[1]),
                                   np.asarray(jax.jvp(jnp.linalg.pinv, (a,), (t,))[1]),
                                   rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (0, 2)])
def test_qr_full_mode_is_reduced(shape):
    a = R.randn(*shape).astype(np.float32)
    for o, t in zip(fnp.linalg.qr(a, mode="full"), jnp.linalg.qr(a, mode="full")):
        assert o.shape == t.shape
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [4, 15])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_rsf2csf_of_any_input_matches_scipy(n, dtype):
    # A closed-form 2x2 eigenvalue picked a different eigenvalue than LAPACK for blocks that
    # are not a real Schur form's.
    t = (R.randn(n, n) * (1 + 1j if dtype == np.complex64 else 1)).astype(dtype)
    z = R.randn(n, n).astype(dtype)
    for o, s in zip(fsl.rsf2csf(t, z), scipy.linalg.rsf2csf(t, z)):
        np.testing.assert_allclose(np.asarray(o), s, rtol=1e-3, atol=1e-3)


def test_hankel_promotes_both_arguments():
    c, r = np.array([1, 2, 3], np.int32), np.array([4 + 1j, 5, 6, 7], np.complex64)
    for args in [(c, r), (np.array([1, 2], np.int8), np.array([4, 5], np.uint8))]:
        ours, theirs = fsl.hankel(*args), jsl.hankel(*args)
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize("call", [
    lambda L: L.hadamard(3), lambda L: L.hadamard(0), lambda L: L.companion(np.ones(1)),
    lambda L: L.invpascal(3, kind="bad"), lambda L: L.pascal(3, kind="bad"),
    lambda L: L.dft(4, dtype=np.float32), lambda L: L.convolution_matrix(np.ones(3), 0),
    lambda L: L.convolution_matrix(np.ones(3), 3, mode="bad")])
def test_special_matrix_errors_as_jax(call):
    with pytest.raises(ValueError) as theirs:
        call(jsl)
    with pytest.raises(ValueError) as ours:
        call(fsl)
    # JAX's pascal message misspells "one of"; fluxion's does not.
    assert str(ours.value) == str(theirs.value).replace("to be on of", "to be one of")


def test_hadamard_accepts_an_integral_float():
    np.testing.assert_array_equal(np.asarray(fsl.hadamard(2.0)), np.asarray(jsl.hadamard(2.0)))


def test_svd_jvp_of_square_full_matrices():
    a, t = R.randn(2, 3, 3).astype(np.float32), R.randn(2, 3, 3).astype(np.float32)
    ours = fluxion.jvp(lambda a: fnp.linalg.svd(a, full_matrices=True), (a,), (t,))[1]
    theirs = jax.jvp(lambda a: jnp.linalg.svd(a, full_matrices=True), (a,), (t,))[1]
    for o, s in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(o), np.asarray(s), rtol=1e-3, atol=1e-4)


def test_check_grads_of_non_holomorphic_complex_functions():
    # The dot-product test was bilinear, right for holomorphic functions only: it failed
    # correct gradients of |z|, slogdet and the SVD of complex inputs.
    rng = np.random.RandomState(0)  # (the module's R depends on the order tests run in)
    z = (rng.randn(3, 3) + 1j * rng.randn(3, 3)).astype(np.complex64)
    tol = dict(eps=1e-3, atol=1e-2, rtol=1e-2)  # float32 differences
    check_grads(lambda z: fnp.abs(z) ** 2, (z,), order=2, **tol)
    check_grads(lambda z: fnp.linalg.slogdet(z)[1], (z,), order=1, **tol)
    check_grads(fnp.linalg.svdvals, (z,), order=1, **tol)
    with pytest.raises(AssertionError):  # a wrong VJP is still caught
        bad = fluxion.custom_vjp(lambda z: fnp.abs(z) ** 2)
        bad.defvjp(lambda z: (fnp.abs(z) ** 2, z), lambda z, g: (g * z,))
        check_grads(bad, (z,), order=1, modes=("rev",), **tol)


def test_check_grads_takes_tolerance_dicts():
    x = R.randn(3).astype(np.float32)
    check_grads(fnp.sin, (x,), order=1, atol={np.float32: 3e-2}, rtol={np.float32: 3e-2})


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_fftn_repeated_axes_message(name):
    with pytest.raises(ValueError, match=r"does not support repeated axes. Got axes \[1, 1\]"):
        getattr(fnp.fft, name)(np.ones((2, 3)), axes=(1, 1))


@pytest.mark.parametrize("symmetrize", [True, False])
def test_lax_eigh_of_a_non_square_matrix_raises_as_jax(symmetrize):
    # fluxion raised its own ValueError before symmetrizing; JAX's x + x^H is a TypeError,
    # and without symmetrizing its ValueError names "symmetric eigendecomposition".
    x = np.ones((2, 4, 5), np.float32)

    def error(lib):
        with pytest.raises((TypeError, ValueError)) as info:
            lib.lax.linalg.eigh(x, symmetrize_input=symmetrize)
        return type(info.value), str(info.value)
    got, want = error(fluxion), error(jax)
    assert got[0] is want[0]
    if not symmetrize:
        assert got[1] == want[1]
