"""fluxion.numpy index tricks against jax.numpy and NumPy."""
import jax
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

from _jnp_oracle import check, check_error, check_fn, check_fn_error

CONCAT = [
    lambda m: m.r_[1:4, 0, 7],
    lambda m: m.r_[np.array([1, 2]), 3.5, [4, 5]],
    lambda m: m.r_["0,2,0", [1, 2], [3, 4]],
    lambda m: m.r_["1,2,0", [1, 2], [3, 4]],
    lambda m: m.r_["-1,3,-2", np.ones((2, 2))],
    lambda m: m.r_["r", 1:3],
    lambda m: m.r_["c", np.array([1.0, 2.0])],
    lambda m: m.r_[0:1:5j],
    lambda m: m.r_[np.zeros((0,), np.float32), np.float32(2)],
    lambda m: m.c_[np.array([1, 2]), np.array([3, 4])],
    lambda m: m.c_[np.ones((2, 2)), 1:3],
    lambda m: m.c_["c", 1:3],
    lambda m: m.mgrid[0:3, 0:2],
    lambda m: m.mgrid[0:3:0.5],
    lambda m: m.mgrid[0:1:3j, 0:2],
    lambda m: m.mgrid[()],
    lambda m: m.ogrid[0:3, 0:2.0],
    lambda m: m.ogrid[-1:1:4j],
]


@pytest.mark.parametrize("i", range(len(CONCAT)))
def test_concatenators_and_grids(i):
    check_fn(CONCAT[i], jit=False)
    # Under jit the elements may be traced values.
    check_fn(lambda m, x: m.r_[x, 0:2], np.array([5.0, 6.0], np.float32))
    check_fn(lambda m, x: m.c_[x, x], np.array([5, 6], np.int32))


def test_concatenator_errors():
    check_fn_error(lambda m: m.r_["bad", 1])
    check_fn_error(lambda m: m.r_[1, "0"])
    assert fnp.s_[1:2] == np.s_[1:2] and fnp.index_exp[1, ::2] == np.index_exp[1, ::2]


@pytest.mark.parametrize("x64", [False, True])
def test_indices_and_ix(x64):
    with jax.enable_x64(x64), fluxion.enable_x64(x64):
        check("indices", (2, 3))
        check("indices", (2, 0, 3), dtype=np.int16)
        check("indices", (4,), sparse=True)
        check("indices", (2, 3), sparse=True, dtype=np.float32)
        check("indices", ())
        check("ix_", np.array([0, 1]), np.array([2, 3, 4], np.int8))
        check("ix_", np.array([], np.int32), np.array([1]))
        check("ix_")
    a = np.arange(20).reshape(4, 5)
    rows, cols = np.array([0, 3]), np.array([1, 2, 4])
    np.testing.assert_array_equal(fnp.asarray(a)[fnp.ix_(rows, cols)], a[np.ix_(rows, cols)])
    check_error("ix_", np.ones((2, 2), int))
    check_error("ix_", np.array([True, False]))


@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize("n,k,m", [(3, 0, None), (4, 1, None), (4, -2, 3), (0, 0, None),
                                   (2, 0, 5), (3, 5, None)])
def test_triangle_indices(name, n, k, m):
    out = check(name, n, k, m, jit=False)
    for a, b in zip(out, getattr(np, name)(n, k, m)):
        np.testing.assert_array_equal(a, b)
    arr = np.ones((n, n if m is None else m))
    check(name + "_from", arr, k, jit=False)
    check_error(name + "_from", np.ones(3))


def test_triangle_indices_static_in_jit():
    f = fluxion.jit(lambda x: x[fnp.triu_indices(3, 1)])
    np.testing.assert_array_equal(f(np.arange(9.0).reshape(3, 3)), [1.0, 2.0, 5.0])


def test_diag_and_mask_indices():
    check("diag_indices", 3)
    check("diag_indices", 4, ndim=3)
    check("diag_indices", 0)
    check("diag_indices_from", np.ones((2, 2, 2)))
    check_error("diag_indices", -1)
    check_error("diag_indices_from", np.ones((2, 3)))
    check_error("diag_indices_from", np.ones(3))
    check_fn(lambda m: m.mask_indices(3, m.triu, 1), jit=False)
    check_fn(lambda m: m.mask_indices(4, m.tril), jit=False)
    check_fn(lambda m: m.mask_indices(4, m.tril, -1, size=8))


@pytest.mark.parametrize("mode", ["raise", "clip", "wrap", "ignore"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_ravel_multi_index(mode, order):
    i = np.array([1, 2, 0])
    j = np.array([0, 3, 2])
    if mode in ("clip", "wrap"):
        i, j = np.array([1, 5, -1]), np.array([-3, 3, 9])
    check("ravel_multi_index", (i, j), (3, 4), mode=mode, order=order, jit=mode != "raise")
    if mode == "raise":
        np.testing.assert_array_equal(fnp.ravel_multi_index((i, j), (3, 4), order=order),
                                      np.ravel_multi_index((i, j), (3, 4), order=order))
    if mode in ("clip", "wrap"):
        np.testing.assert_array_equal(
            fnp.ravel_multi_index((i, j), (3, 4), mode=mode, order=order),
            np.ravel_multi_index((i, j), (3, 4), mode=mode, order=order))


def test_ravel_multi_index_errors_and_dtypes():
    check("ravel_multi_index", (np.int8(1), 2), (3, 4), jit=False)
    check("ravel_multi_index", (np.array([1], np.int16),), (5,), mode="wrap", dtype=np.int8)
    check_error("ravel_multi_index", (np.array([3]),), (3,))
    check_error("ravel_multi_index", (np.array([1.0]),), (3,))
    check_error("ravel_multi_index", (np.array([1]),), (3,), mode="nope")
    check_error("ravel_multi_index", (np.array([1]),), (3,), order="X")
    check_error("ravel_multi_index", (np.array([1]),), (300,), dtype=np.int8)
    with pytest.raises(fluxion.errors.ConcretizationTypeError):
        fluxion.jit(lambda i: fnp.ravel_multi_index((i,), (3,)))(np.array([1]))


@pytest.mark.parametrize("indices", [np.array([1, 7, -1, 30, -13]), 5, np.int8(3),
                                     np.array([], np.int32), np.array([[0, 11], [4, 2]]),
                                     np.array([3, 200], np.uint8)])
def test_unravel_index(indices):
    check("unravel_index", indices, (3, 4))
    check("unravel_index", indices, 7)
    inside = np.asarray(indices)
    inside = inside[(inside >= 0) & (inside < 12)]
    for a, b in zip(fnp.unravel_index(inside, (3, 4)), np.unravel_index(inside, (3, 4))):
        np.testing.assert_array_equal(a, b)


def test_unravel_index_vmap():
    flat = np.array([0, 5, 11, 7])
    out = fluxion.vmap(lambda i: fnp.unravel_index(i, (3, 4)))(flat)
    for a, b in zip(out, np.unravel_index(flat, (3, 4))):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shape,val", [((3, 4), 5.0), ((4, 3), np.array([1.0, 2.0])),
                                       ((3, 3, 3), np.int32(7)), ((2, 2), np.arange(6)),
                                       ((0, 3), 1.0)])
def test_fill_diagonal(shape, val):
    a = np.zeros(shape, np.float32)
    check("fill_diagonal", a, val, inplace=False)
    expected = a.copy()
    np.fill_diagonal(expected, val)
    np.testing.assert_array_equal(fnp.fill_diagonal(a, val, inplace=False), expected)


def test_fill_diagonal_errors_and_grad():
    check_error("fill_diagonal", np.zeros((2, 2)), 1.0)
    check_error("fill_diagonal", np.zeros((2, 2)), 1.0, wrap=True, inplace=False)
    check_error("fill_diagonal", np.zeros(2), 1.0, inplace=False)
    check_error("fill_diagonal", np.zeros((2, 3, 3)), 1.0, inplace=False)
    g = fluxion.grad(lambda a, v: fnp.fill_diagonal(a, v, inplace=False).sum() * 2,
                     argnums=(0, 1))(np.ones((3, 3)), 2.0)
    np.testing.assert_array_equal(g[0], 2 * (1 - np.eye(3)))
    assert float(g[1]) == 6.0
