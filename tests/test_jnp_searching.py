"""fluxion.numpy searching and sorting against jax.numpy (dtypes, errors) and NumPy."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

from _jnp_oracle_a import agree, jit_agrees, vmap_agrees

SORTED = np.array([1., 2, 2, 3, 5, np.nan], np.float32)
QUERY = np.array([[0, 2, 2.5], [5, 6, np.nan]], np.float32)
METHODS = ["scan", "scan_unrolled", "sort", "compare_all"]


@pytest.mark.parametrize("method", METHODS)
def test_searchsorted_methods(method):
    for side in ("left", "right"):
        agree("searchsorted", SORTED, QUERY, side=side, method=method)
        np.testing.assert_array_equal(
            np.asarray(fnp.searchsorted(SORTED, QUERY, side=side, method=method)),
            np.searchsorted(SORTED, QUERY, side=side))
        agree("searchsorted", np.array([1, 3, 3, 7], np.int8), 3, side=side, method=method)
        agree("searchsorted", np.array([], np.float32), QUERY, side=side, method=method)
        agree("searchsorted", np.array([1 + 1j, 2, 2 + 2j]), np.array([2 + 1j, 2, 3]),
              side=side, method=method)
    jit_agrees(lambda a, v: fnp.searchsorted(a, v, method=method), SORTED, QUERY)


def test_searchsorted_errors_sorter_vmap():
    agree("searchsorted", SORTED, QUERY, method="bad")
    agree("searchsorted", SORTED, QUERY, side="mid")
    agree("searchsorted", QUERY, SORTED)
    agree("searchsorted", np.array([3, 1, 2]), np.array([2]), sorter=np.array([1, 2, 0]))
    agree("searchsorted", SORTED, QUERY, x64=True)
    vmap_agrees(lambda v: fnp.searchsorted(SORTED, v), QUERY)


def test_lexsort():
    k1, k2 = np.array([1, 1, 0, 0, 2]), np.array([3, 1, 2, 2, 0.])
    agree("lexsort", (k1, k2))
    np.testing.assert_array_equal(np.asarray(fnp.lexsort((k1, k2))), np.lexsort((k1, k2)))
    agree("lexsort", [k1])
    agree("lexsort", ())
    agree("lexsort", np.array([[1, 0], [0, 1]]), axis=0)
    agree("lexsort", (k1, k2), x64=True)


@pytest.mark.parametrize("kth", [0, 2, -1])
def test_partition(kth):
    r = np.array([[5, 1, 4, 4, 2, 9], [3, 3, 1, 0, 7, 8]], np.float32)
    agree("partition", r, kth)
    agree("argpartition", r, kth)
    agree("partition", r.astype(np.uint8), kth)
    agree("argpartition", r.T, kth % 2, axis=0)
    part = np.asarray(fnp.partition(r, kth))
    k = kth % r.shape[1]
    np.testing.assert_array_equal(part[:, k], np.sort(r, axis=1)[:, k])
    assert (part[:, :k] <= part[:, k:k + 1]).all() and (part[:, k + 1:] >= part[:, k:k + 1]).all()
    taken = np.take_along_axis(r, np.asarray(fnp.argpartition(r, kth)), 1)
    np.testing.assert_array_equal(taken[:, k], part[:, k])
    assert (taken[:, :k] <= taken[:, k:k + 1]).all()
    assert (taken[:, k + 1:] >= taken[:, k:k + 1]).all()


def test_sort_complex_argwhere_flatnonzero():
    agree("partition", np.ones(3, np.complex64), 1)
    for x in (np.array([3, 1, 2]), np.array([3, 1, 2], np.float32),
              np.array([3j, 1, 2], np.complex64), np.array([3, 1, 2], np.int8)):
        agree("sort_complex", x)
        agree("sort_complex", x, x64=True)
    agree("sort_complex", np.array([3, 1, 2], np.int64), x64=True)
    z = np.array([[0, 1, 2], [3, 0, 0]])
    agree("argwhere", z)
    np.testing.assert_array_equal(np.asarray(fnp.argwhere(z)), np.argwhere(z))
    agree("argwhere", z, size=5, fill_value=-1)
    agree("argwhere", 3)
    agree("argwhere", 0)
    agree("argwhere", np.zeros((0, 3)))
    agree("flatnonzero", z)
    agree("flatnonzero", z, size=5, fill_value=9)
    with pytest.raises(fluxion.errors.ConcretizationTypeError):
        fluxion.jit(fnp.argwhere)(z)
    jit_agrees(lambda a: fnp.argwhere(a, size=4), z)


def test_extract_compress():
    z = np.array([[0, 1, 2], [3, 0, 0]])
    agree("extract", z > 0, z + 1.5)
    agree("extract", z > 0, z, size=5, fill_value=7)
    np.testing.assert_array_equal(np.asarray(fnp.extract(z > 0, z)), np.extract(z > 0, z))
    agree("compress", np.array([True, False]), z, axis=0)
    agree("compress", np.array([1, 0, 1]), z, axis=1)
    agree("compress", np.array([True, False, True]), z)
    agree("compress", np.array([1, 0, 1]), z, axis=1, size=3, fill_value=-2)
    agree("compress", np.array([[1]]), z)
    np.testing.assert_array_equal(np.asarray(fnp.compress(np.array([1, 0, 1]), z, axis=1)),
                                  np.compress([1, 0, 1], z, axis=1))
    jit_agrees(lambda c, a: fnp.compress(c, a, axis=1, size=2), np.array([1, 0, 1]), z)


def test_select_piecewise_choose():
    z = np.array([[0, 1, 2], [3, 0, 0]])
    agree("select", [z > 1, z < 1], [z, z * 2.])
    agree("select", [z > 1], [z], default=5.5)
    agree("select", [], [])
    agree("select", [z], [z])
    agree("select", [z > 1], [z, z])
    np.testing.assert_array_equal(np.asarray(fnp.select([z > 1, z < 1], [z, z * 2])),
                                  np.select([z > 1, z < 1], [z, z * 2]))
    x = np.linspace(-2, 2, 7)
    agree("piecewise", x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2])
    agree("piecewise", x, [x < 0], [lambda v: -v, 3.])
    agree("piecewise", x.astype(np.int32), [x < 0, x > 1], [1, 2])
    np.testing.assert_allclose(
        np.asarray(fnp.piecewise(x, [x < 0, x > 1], [lambda v: -v, 7, 0.5])),
        np.piecewise(x, [x < 0, x > 1], [lambda v: -v, 7, 0.5]))
    c = [np.arange(6).reshape(2, 3), np.arange(6).reshape(2, 3) * 10., np.ones(3)]
    a = np.array([[0, 1, 2], [2, 1, 0]])
    agree("choose", a, c)
    np.testing.assert_array_equal(np.asarray(fnp.choose(a, c)), np.choose(a, c))
    agree("choose", a + 3, c, mode="wrap")
    agree("choose", a * 3 - 2, c, mode="clip")
    agree("choose", a + 1, c)  # mode='raise' on an out-of-range index
    agree("choose", 1, [3, 4, 5])
    agree("choose", a, c, mode="x")
    jit_agrees(lambda i: fnp.choose(i, c, mode="clip"), a)
    vmap_agrees(lambda v: fnp.select([v > 0.5], [v], 0.0), np.abs(x).reshape(7, 1))


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.complex64])
def test_sort_complex_sorts_along_the_last_axis(dtype):
    # It sorted along axis 0.
    x = np.array([[3, 1, 2], [0, 5, 4], [2, 2, 1]], dtype)
    if dtype == np.complex64:
        x = x + 1j * x[::-1]
    want = np.sort_complex(x)
    np.testing.assert_array_equal(fnp.sort_complex(x), want)
    np.testing.assert_array_equal(fluxion.jit(fnp.sort_complex)(x), want)
