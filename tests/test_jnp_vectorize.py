"""fluxion.numpy.vectorize: None arguments, output checks, excluded and rank promotion,
against jax.numpy.vectorize."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp


def _add_unless_none(x, y):
    return x if y is None else x + y


@pytest.mark.parametrize("use_jit", [False, True])
def test_none_argument_is_passed_unvectorized(use_jit):
    x = np.arange(10)
    f = fnp.vectorize(_add_unless_none)
    f = fluxion.jit(f) if use_jit else f
    np.testing.assert_array_equal(f(x, None), jnp.vectorize(_add_unless_none)(x, None))
    np.testing.assert_array_equal(f(x, x + 10), x + x + 10)


def test_none_argument_with_core_dimensions_is_an_error():
    for vec in (jnp.vectorize, fnp.vectorize):
        f = vec(_add_unless_none, signature="(k),(k)->(k)")
        with pytest.raises(ValueError, match=r"Cannot pass None at locations \{1\}"):
            f(np.arange(10), None)


@pytest.mark.parametrize("excluded, error", [({1.5}, TypeError), ({-1}, ValueError)])
def test_bad_excluded(excluded, error):
    for vec in (jnp.vectorize, fnp.vectorize):
        with pytest.raises(error, match="excluded"):
            vec(lambda x: x, excluded=excluded)


@pytest.mark.parametrize("fun, signature, args, error, message", [
    (np.dot, "(n,m),(m,k)->(n,k),()", (np.zeros((2, 2)),) * 2, TypeError, "must be a tuple"),
    (lambda *a: a, "(),()->(),(),()", (1, 2), TypeError, "wrong number of output arguments"),
    (np.dot, "(n,m),(m,k)->(n)", (np.zeros((2, 2)),) * 2, ValueError,
     r"output shape \(2, 2\) does not match"),
    (np.dot, "(n,m),(m,k)->(n,n)", (np.zeros((2, 3)), np.zeros((3, 4))), ValueError,
     "inconsistent size for core dimension 'n'"),
])
def test_outputs_are_checked_against_the_signature(fun, signature, args, error, message):
    for vec, dot in ((jnp.vectorize, jnp.dot), (fnp.vectorize, fnp.dot)):
        f = vec(dot if fun is np.dot else fun, signature=signature)
        with pytest.raises(error, match=message):
            f(*args)
    with pytest.raises(error, match=message):
        fluxion.jit(fnp.vectorize(fnp.dot if fun is np.dot else fun, signature=signature))(*args)


def test_rank_promotion_follows_the_config():
    f = fnp.vectorize(fnp.add, signature="(),()->()")
    rank2, rank1, rank0 = np.zeros((10, 10)), np.zeros(10), np.zeros(())
    with fluxion.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match="require rank promotion"):
            f(rank2, rank1)
        assert f(rank2, rank0).shape == (10, 10)
    with fluxion.numpy_rank_promotion("warn"):
        with pytest.warns(UserWarning, match="require rank promotion"):
            f(rank2, rank1)
    with jax.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match="require rank promotion"):
            jnp.vectorize(jnp.add, signature="(),()->()")(rank2, rank1)
