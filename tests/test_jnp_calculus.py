"""fluxion.numpy differences, integrals, interpolation and convolution against jax.numpy and
NumPy, with gradients checked by finite differences."""
import jax.numpy
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion.test_util import check_grads

from _jnp_oracle_a import agree, jit_agrees, vmap_agrees

R = np.random.RandomState(0)
X = R.randn(3, 5).astype(np.float32)


def test_diff_ediff1d():
    for n in (0, 1, 2, -1):
        agree("diff", X, n=n)
        agree("diff", X, n=n, axis=0)
    np.testing.assert_allclose(np.asarray(fnp.diff(X, n=2)), np.diff(X, n=2), rtol=1e-6)
    agree("diff", X, prepend=1.5, append=np.zeros((3, 2)))
    agree("diff", np.array([True, False, False]))
    agree("diff", 3.)
    agree("diff", np.arange(5), prepend=0, x64=True)
    agree("diff", np.arange(5, dtype=np.uint8))
    agree("diff", X.astype(np.float16))
    agree("ediff1d", X)
    agree("ediff1d", X, to_end=np.array([1, 2]), to_begin=-1.5)
    agree("ediff1d", X, to_end=[1, 2])  # lists are not array-like in JAX
    agree("ediff1d", np.arange(4))


def test_gradient():
    agree("gradient", X)
    agree("gradient", X[0])
    agree("gradient", X, 2.0)
    agree("gradient", X, axis=1)
    coords = (np.array([0, 1, 3.]), np.array([0, 1, 2, 4, 8.]))
    agree("gradient", X, *coords)
    for a, e in zip(fnp.gradient(X.astype(np.float64), *coords),
                    np.gradient(X.astype(np.float64), *coords)):
        np.testing.assert_allclose(np.asarray(a), e, rtol=1e-5)
    agree("gradient", np.arange(6), x64=True)
    agree("gradient", X, axis=0, edge_order=1)
    agree("gradient", np.ones(1))
    agree("gradient", X, 1., 2., 3.)


def test_trapezoid():
    agree("trapezoid", X)
    agree("trapezoid", X, dx=0.5, axis=0)
    agree("trapezoid", X, x=np.arange(5.))
    xs = np.cumsum(np.abs(X), 1)
    agree("trapezoid", X, x=xs, axis=1)
    np.testing.assert_allclose(np.asarray(fnp.trapezoid(X, x=xs, axis=1)),
                               np.trapezoid(X, x=xs, axis=1), rtol=1e-5)
    agree("trapezoid", np.arange(4), x64=True)


XP = np.array([0., 1, 2, 4])
FP = np.array([1., 3, 2, 0])
XS = np.linspace(-1, 5, 13).astype(np.float32)


def test_interp():
    agree("interp", XS, XP, FP)
    np.testing.assert_allclose(np.asarray(fnp.interp(XS, XP, FP)), np.interp(XS, XP, FP),
                               rtol=1e-6)
    agree("interp", XS, XP, FP, left=-1, right=9.)
    agree("interp", XS, XP, FP, left="extrapolate", right="extrapolate")
    agree("interp", XS, XP, FP, period=3)
    np.testing.assert_allclose(np.asarray(fnp.interp(XS, XP, FP, period=3)),
                               np.interp(XS, XP, FP, period=3), rtol=1e-5, atol=1e-6)
    agree("interp", XS, XP, FP.astype(np.complex64))
    agree("interp", 2, np.arange(3), np.arange(3), x64=True)
    agree("interp", XS, XP, FP[:3])
    agree("interp", XS, XP, FP, left="x")
    agree("interp", XS.astype(np.complex64), XP, FP)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_correlate(mode):
    a, v = R.randn(7).astype(np.float32), R.randn(3).astype(np.float32)
    for name in ("convolve", "correlate"):
        agree(name, a, v, mode=mode)
        agree(name, v, a, mode=mode)
        np.testing.assert_allclose(np.asarray(getattr(fnp, name)(v, a, mode=mode)),
                                   getattr(np, name)(v, a, mode=mode), rtol=1e-5, atol=1e-6)
    agree("correlate", a.astype(np.complex64), v + 1j * v, mode=mode)
    np.testing.assert_allclose(np.asarray(fnp.correlate(a, v + 1j * v, mode=mode)),
                               np.correlate(a, v + 1j * v, mode=mode), rtol=1e-5, atol=1e-6)


def test_convolve_dtypes_and_errors():
    a, v = R.randn(7).astype(np.float32), R.randn(3).astype(np.float32)
    agree("convolve", np.arange(4), np.arange(3))
    agree("convolve", np.arange(4), np.arange(3), preferred_element_type=np.float32)
    agree("convolve", np.array([True, False]), np.array([True, True]))
    agree("convolve", a, v, precision="highest")
    agree("convolve", a, v, mode="bad")
    agree("convolve", a, np.zeros(0))
    agree("convolve", X, v)
    agree("convolve", a, v, x64=True)


def test_unwrap_cross():
    ph = np.cumsum(R.rand(10) * 3)
    agree("unwrap", ph)
    np.testing.assert_allclose(np.asarray(fnp.unwrap(ph.astype(np.float32))), np.unwrap(ph),
                               rtol=1e-5)
    agree("unwrap", ph.reshape(2, 5), axis=0)
    agree("unwrap", ph, discont=4.)
    agree("unwrap", np.arange(0, 30, 4))
    agree("unwrap", ph, period=3.)
    agree("unwrap", ph.astype(np.complex64))
    agree("unwrap", np.zeros((0,)))
    u, w = R.randn(4, 3), R.randn(4, 3)
    agree("cross", u, w)
    np.testing.assert_allclose(np.asarray(fnp.cross(u, w)), np.cross(u, w), rtol=1e-5)
    agree("cross", u[:, :2], w[:, :2])
    agree("cross", u[:, :2], w)
    agree("cross", u.T, w.T, axisa=0, axisb=0, axisc=0)
    agree("cross", u.T, w.T, axis=0)
    agree("cross", u, w[:, :1])
    agree("cross", np.arange(3), np.arange(3) + 1)


def test_jit_vmap_grads():
    jit_agrees(lambda y: (fnp.gradient(y), fnp.trapezoid(y), fnp.diff(y, 2)), X)
    jit_agrees(lambda x: fnp.interp(x, XP.astype(np.float32), FP.astype(np.float32)), XS)
    vmap_agrees(lambda y: fnp.convolve(y, np.ones(2, np.float32), mode="same"), X)
    vmap_agrees(lambda y: fnp.interp(y, XP.astype(np.float32), FP.astype(np.float32)), X)
    with fluxion.enable_x64(True):
        x64 = R.randn(6)
        check_grads(lambda y: fnp.trapezoid(y, x=np.arange(6.) ** 2), (x64,), order=2)
        check_grads(lambda x: fnp.interp(x, XP, FP), (np.array([0.3, 1.7, 3.1]),), order=1)
        check_grads(lambda f: fnp.interp(np.array([0.3, 1.7]), XP, f), (FP,), order=1)
        check_grads(lambda a, b: fnp.convolve(a, b), (x64, R.randn(3)), order=2)
        check_grads(lambda a, b: fnp.correlate(a, b, mode="same"), (x64, R.randn(3)), order=1)
        check_grads(lambda y: fnp.gradient(y, 0.5), (x64,), order=1)
        check_grads(lambda a: fnp.cross(a, np.ones(3)), (R.randn(3),), order=1)
        check_grads(lambda p: fnp.unwrap(p), (np.array([0.1, 3.5, 6.9]),), order=1)


@pytest.mark.parametrize("y_shape, dx_shape, axis", [
    ((3, 4, 5), (4, 5), 0), ((3, 4, 5), (3, 5), 1), ((2, 3, 4, 5), (2, 1, 3, 5), 2),
    ((3, 4, 5), (2, 4, 5), 0), ((3, 4, 5), (3, 3, 5), 1), ((3, 10), (3, 1), -1)])
def test_trapezoid_array_dx_broadcasts_in_y_layout(y_shape, dx_shape, axis):
    # y's axis was moved last while dx kept its layout: dx paired with the wrong axes.
    rng = np.random.default_rng(0)
    y = rng.standard_normal(y_shape).astype(np.float32)
    dx = rng.standard_normal(dx_shape).astype(np.float32)
    want = np.trapezoid(y, dx=dx, axis=axis)
    for fn in (fnp.trapezoid, fluxion.jit(fnp.trapezoid, static_argnames="axis")):
        np.testing.assert_allclose(fn(y, dx=dx, axis=axis), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.uint8])
@pytest.mark.parametrize("period", [2, 4, 2 * np.pi])
def test_unwrap_of_integers_with_an_integer_period_stays_integer(dtype, period):
    # The result was always floating point; JAX keeps p's dtype promoted with the period's.
    x = np.array([[0, 3, 7, 1], [5, 0, 2, 9]], dtype)
    agree("unwrap", x, period=period)
    agree("unwrap", x, period=period, discont=np.pi, axis=0)
    agree("unwrap", np.zeros((0, 3), dtype), period=period, axis=0)
    jit_agrees(lambda v: fnp.unwrap(v, period=period), x)


def test_gradient_over_no_axes_is_an_empty_list():
    # axis=() and 0-d input raised ValueError; NumPy and JAX give no gradients.
    for args, kwargs in [((np.arange(10.0),), dict(axis=())), ((np.float32(3.0),), {})]:
        want = jax.numpy.gradient(*args, **kwargs)
        assert want == [] and fnp.gradient(*args, **kwargs) == []
