"""fluxion.numpy polynomials and window functions against jax.numpy and NumPy."""
import importlib

import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion.test_util import check_grads

from _jnp_oracle_a import agree, jit_agrees, vmap_agrees

P = np.array([1., -3, 2])
Q = np.array([2., 0.5])


def _linalg_has(name):
    try:
        return hasattr(importlib.import_module("fluxion.numpy.linalg"), name)
    except ImportError:
        return False


@pytest.mark.parametrize("name", ["polyadd", "polysub", "polymul", "polydiv"])
def test_arithmetic(name):
    agree(name, P, Q)
    agree(name, Q, P)
    agree(name, np.arange(3), np.arange(2))
    agree(name, P.astype(np.float32), Q.astype(np.complex64))
    agree(name, P, Q, x64=True)
    np_name = {"polyadd": np.polyadd, "polysub": np.polysub, "polymul": np.polymul,
               "polydiv": np.polydiv}[name]
    kw = {"trim_leading_zeros": True} if name == "polydiv" else {}  # NumPy trims remainders
    for a, e in zip(fluxion.tree_util.tree_leaves(getattr(fnp, name)(P, Q, **kw)),
                    np.atleast_1d(*np_name(P, Q)) if name == "polydiv" else [np_name(P, Q)]):
        np.testing.assert_allclose(np.asarray(a), e, rtol=1e-6, atol=1e-7)


def test_trim_derivative_integral_value():
    agree("polymul", np.array([0, 0, 1., 2]), Q, trim_leading_zeros=True)
    agree("polydiv", P, Q, trim_leading_zeros=True)
    np.testing.assert_allclose(np.asarray(fnp.polyadd(1, P)), np.polyadd(1, P))  # JAX fails
    for m in (0, 1, 3, -1):
        agree("polyder", P, m)
        agree("polyint", P, m)
        agree("polyint", P, m, k=2.)
    np.testing.assert_allclose(np.asarray(fnp.polyint(P, 2, k=np.array([1, 2]))),
                               np.polyint(P, 2, k=[1, 2]), rtol=1e-6)
    agree("polyint", P, 2, k=np.array([1., 2, 3]))
    agree("polyder", np.arange(4), x64=True)
    agree("polyval", P, np.linspace(-1, 1, 5))
    np.testing.assert_allclose(np.asarray(fnp.polyval(P, np.linspace(-1, 1, 5))),
                               np.polyval(P, np.linspace(-1, 1, 5)), rtol=1e-6)
    agree("polyval", np.arange(4), 3)
    agree("polyval", P.astype(np.float32), 2)
    agree("polyval", np.arange(6.).reshape(3, 2), np.arange(2.), x64=True)
    agree("poly", np.array([1., 2, 3]))
    np.testing.assert_allclose(np.asarray(fnp.poly(np.array([1., 2, 3]))),
                               np.poly([1., 2, 3]), rtol=1e-6)
    agree("poly", np.array([1, 2]))
    agree("poly", np.zeros(0))
    agree("poly", 2.)
    agree("poly", np.ones((2, 3)))


def test_polynomial_transforms():
    xs = np.linspace(-1, 1, 6).astype(np.float32)
    jit_agrees(lambda p, x: fnp.polyval(p, x), P.astype(np.float32), xs)
    jit_agrees(lambda p, q: fnp.polydiv(p, q), P.astype(np.float32), Q.astype(np.float32))
    vmap_agrees(lambda x: fnp.polyval(P.astype(np.float32), x, unroll=1), xs.reshape(3, 2))
    with fluxion.enable_x64(True):
        check_grads(lambda p, x: fnp.polyval(p, x), (P, np.array([0.3, -1.2])), order=2)
        check_grads(lambda a, b: fnp.polymul(a, b), (P, Q), order=1)
        check_grads(lambda p: fnp.polyint(fnp.polyder(p)), (P,), order=1)
        check_grads(lambda z: fnp.poly(z), (np.array([0.5, -2.0, 1.5]),), order=1)


@pytest.mark.skipif(not _linalg_has("eigvals"), reason="fluxion.numpy.linalg.eigvals is "
                    "built by the linear-algebra work (issue 10 item 2)")
def test_roots():
    for p in (np.array([1., -3, 2]), np.array([0., 0, 1, -3, 2]), np.array([2.])):
        agree("roots", p, rtol=1e-5, atol=1e-5)
    agree("roots", np.array([0., 1, -3, 2]), strip_zeros=False, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.sort_complex(np.asarray(fnp.roots(np.array([1., -6, 11, -6])))),
                               [1, 2, 3], rtol=1e-5)
    agree("poly", np.array([[1., 2], [3, 4]]), rtol=1e-5)


@pytest.mark.skipif(not _linalg_has("lstsq"), reason="fluxion.numpy.linalg.lstsq is built by "
                    "the linear-algebra work (issue 10 item 2)")
def test_polyfit():
    x = np.linspace(-1, 1, 9)
    y = 3 * x ** 2 - x + 0.5 + 0.01 * np.sin(7 * x)
    agree("polyfit", x, y, 2, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fnp.polyfit(x, y, 2)), np.polyfit(x, y, 2),
                               rtol=1e-4, atol=1e-5)
    agree("polyfit", x, np.stack([y, 2 * y], 1), 1, w=np.ones(9), rtol=1e-4, atol=1e-5)
    agree("polyfit", x, y, 2, cov=True, rtol=1e-3, atol=1e-5)
    agree("polyfit", x, y, -1)


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning"])
def test_windows(name):
    for M in (0, 1, 2, 5, 8, -1):
        agree(name, M)
    agree(name, 7, x64=True)
    np.testing.assert_allclose(np.asarray(getattr(fnp, name)(9)), getattr(np, name)(9),
                               rtol=1e-6, atol=1e-7)
    with pytest.raises(fluxion.errors.ConcretizationTypeError):
        fluxion.jit(getattr(fnp, name))(5)


def test_kaiser():
    for M in (0, 1, 6):
        for beta in (0.5, 14.0):
            agree("kaiser", M, beta)
    agree("kaiser", 6, np.float32(3.))
    agree("kaiser", 9, 8.6, x64=True)
    with fluxion.enable_x64(True):
        np.testing.assert_allclose(np.asarray(fnp.kaiser(12, 8.6)), np.kaiser(12, 8.6),
                                   rtol=1e-12)
        check_grads(lambda b: fnp.kaiser(5, b), (2.5,), order=1)
    jit_agrees(lambda b: fnp.kaiser(7, b), np.float32(5.0))


def test_polynomial_arithmetic_takes_scalars_as_degree_zero_like_numpy():
    """(JAX fails on these with IndexError/TypeError from inside; NumPy treats a scalar as
    a polynomial of degree 0.) Coefficients of rank 2 are refused with a clear ValueError."""
    p = np.array([1.0, 2.0], np.float32)
    for name, args in [("polyadd", (p, 3.0)), ("polysub", (3.0, p)), ("polymul", (p, 3.0))]:
        np.testing.assert_allclose(np.asarray(getattr(fnp, name)(*args)),
                                   getattr(np, name)(*args))
    q, r = fnp.polydiv(p, 2.0)
    np.testing.assert_allclose(np.asarray(q), np.polydiv(p, 2.0)[0])
    np.testing.assert_allclose(np.asarray(r), 0.0)
    with pytest.raises(ValueError, match="1-D"):
        fnp.polymul(np.ones((2, 2)), p)


@pytest.mark.parametrize("divisor", [[0, 0], [0, 2, 1]])
def test_polydiv_trimming_keeps_nan_remainders(divisor):
    # trim_leading_zeros dropped NaN coefficients as if they were zeros.
    import jax.numpy as jnp
    u, v = np.array([1, 2, 3, 4], np.float32), np.array(divisor, np.float32)
    with np.errstate(all="ignore"):
        want = jnp.polydiv(u, v, trim_leading_zeros=True)
        got = fnp.polydiv(u, v, trim_leading_zeros=True)
        np_remainder = np.polydiv(u, v)[1]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert got[1].shape == np_remainder.shape
