"""vecdot, matvec, vecmat, cumulative_sum and cumulative_prod against jax.numpy and NumPy."""
import jax
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion.test_util import check_grads

from _jnp_oracle import check, check_error

rng = np.random.default_rng(0)
F = rng.standard_normal((2, 3, 4)).astype(np.float32)
C = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)


@pytest.mark.parametrize("a,b,axis", [(F, F[0], -1), (F, F[:, :, :1], -1), (C, C, 0),
                                      (C[0], F[1, 0], -1), (np.arange(3), np.arange(3.0), 0),
                                      (np.zeros((0, 2), np.float32), np.ones(2, np.float32), -1)])
def test_vecdot(a, b, axis):
    if b.shape[axis] != a.shape[axis]:
        b = np.broadcast_to(b, b.shape[:-1] + (a.shape[-1],)).copy()
    check("vecdot", a, b, axis=axis, rtol=1e-5)
    expected = np.sum(np.conj(a) * b, axis=axis)
    np.testing.assert_allclose(fnp.vecdot(a, b, axis=axis), expected, rtol=1e-5, atol=1e-6)


def test_matvec_vecmat():
    m = rng.standard_normal((5, 3, 4)).astype(np.float32)
    v = rng.standard_normal((4,)).astype(np.float32)
    check("matvec", m, v, rtol=1e-5)
    np.testing.assert_allclose(fnp.matvec(m, v), m @ v, rtol=1e-5)
    w = rng.standard_normal((2, 1, 3)).astype(np.float32)
    check("vecmat", w, m, rtol=1e-5)
    np.testing.assert_allclose(fnp.vecmat(w, m), (w[..., None, :] @ m)[..., 0, :], rtol=1e-5)
    check("vecmat", C[0, :3], C.T[:3], rtol=1e-5)
    check_error("vecdot", F, F[..., :2])
    check_error("matvec", m, np.ones(3))


def test_products_grads_vmap(x64):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    check_grads(lambda x, y: fnp.vecdot(x, y), (a, b), order=2, modes=["fwd", "rev"])
    check_grads(fnp.matvec, (a, b[0]), order=1, modes=["fwd", "rev"])
    check_grads(fnp.vecmat, (a[:, 0], b), order=1, modes=["fwd", "rev"])
    out = fluxion.vmap(fnp.vecdot)(a, b)
    np.testing.assert_allclose(out, [np.dot(x, y) for x, y in zip(a, b)])


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_, np.float16, np.float32,
                                   np.complex64, np.int32])
@pytest.mark.parametrize("include_initial", [False, True])
def test_cumulative(name, dtype, include_initial):
    x = (rng.integers(0, 3, (3, 4))).astype(dtype)
    check(name, x, axis=1, include_initial=include_initial)
    check(name, x, axis=0, include_initial=include_initial)
    check(name, x[0], include_initial=include_initial)
    check(name, x[:, :0], axis=1, include_initial=include_initial)
    np_fn = np.cumulative_sum if name == "cumulative_sum" else np.cumulative_prod
    np.testing.assert_allclose(np.asarray(getattr(fnp, name)(x, axis=1, include_initial=include_initial),
                                          np.complex128),
                               np_fn(x.astype(np.complex128), axis=1,
                                     include_initial=include_initial), rtol=1e-3)


def test_cumulative_dtype_errors_grads(x64):
    check("cumulative_sum", np.arange(4, dtype=np.int8), dtype=np.float32, include_initial=True)
    check("cumulative_prod", 1.0 + np.arange(4), dtype=np.float16)
    check_error("cumulative_sum", np.ones((2, 2)))
    check_error("cumulative_prod", np.float32(2))
    check_error("cumulative_sum", np.ones(3), axis=2)
    check_grads(lambda x: fnp.cumulative_prod(x, axis=1, include_initial=True),
                (rng.standard_normal((2, 3)),), order=2, modes=["fwd", "rev"])
    check_grads(lambda x: fnp.cumulative_sum(x, include_initial=True),
                (rng.standard_normal(3),), order=1, modes=["fwd", "rev"])
