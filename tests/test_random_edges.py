"""Edge inputs of fluxion.random against jax.random (0.10.2): shape arguments, degenerate
parameters and other cases found by a sweep of every sampler; each case is one the two
libraries once disagreed on."""
import numpy as np
import pytest

import fluxion.numpy as fnp
import fluxion.random as fr

jax = pytest.importorskip("jax")
jr = jax.random


def error_class(fn, random_module):
    try:
        fn(random_module, random_module.PRNGKey(0))
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)
    return None


@pytest.mark.parametrize("shape", [np.int64(3), np.int32(2), np.array(3)], ids=repr)
@pytest.mark.parametrize("sampler", ["normal", "uniform", "bits", "gamma", "bernoulli"])
def test_numpy_scalar_is_not_a_shape(sampler, shape):
    calls = {"normal": lambda r, k: r.normal(k, shape),
             "uniform": lambda r, k: r.uniform(k, shape),
             "bits": lambda r, k: r.bits(k, shape),
             "gamma": lambda r, k: r.gamma(k, 1.0, shape),
             "bernoulli": lambda r, k: r.bernoulli(k, 0.5, shape)}
    assert error_class(calls[sampler], jr) is TypeError
    with pytest.raises(TypeError, match="Shapes must be 1D sequences"):
        calls[sampler](fr, fr.PRNGKey(0))


def test_python_int_and_numpy_int_elements_are_shapes():
    for shape in (3, (np.int64(3),), [np.int32(3)]):
        ours, theirs = fr.normal(fr.PRNGKey(0), shape), jr.normal(jr.PRNGKey(0), shape)
        assert ours.shape == theirs.shape == (3,)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_ball_negative_dimension_is_a_type_error():
    assert error_class(lambda r, k: r.ball(k, -1, 2), jr) is TypeError
    with pytest.raises(TypeError, match="nonnegative"):
        fr.ball(fr.PRNGKey(0), -1, 2)


def assert_same(fn, seed=0):
    """fn(random module, numpy module, key) gives the same array in fluxion and JAX."""
    ours = fn(fr, fnp, fr.PRNGKey(seed))
    theirs = fn(jr, jax.numpy, jr.PRNGKey(seed))
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (ours, theirs)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize("p", [[np.nan, 1.0, 1.0], [0.2, np.nan, 0.8], [0.0, 0.5, 0.5]], ids=str)
def test_choice_with_nan_probabilities_searches_in_total_order(p):
    # A NaN cumulative sum must not push the binary search past the last index.
    assert_same(lambda r, n, k: r.choice(k, 3, (5,), p=n.array(p)))


@pytest.mark.parametrize("kwargs", [{"n": -1}, {"n": 2, "m": -1}, {"n": 2, "dtype": np.int32},
                                    {"n": 2, "dtype": bool}], ids=str)
def test_orthogonal_bad_dimensions_and_dtypes_are_value_errors(kwargs):
    assert error_class(lambda r, k: r.orthogonal(k, **kwargs), jr) is ValueError
    with pytest.raises(ValueError, match="negative dimensions|must be a float or complex"):
        fr.orthogonal(fr.PRNGKey(0), **kwargs)



@pytest.mark.parametrize("dtype", [np.int32, bool, np.complex64], ids=str)
@pytest.mark.parametrize("sampler", ["generalized_normal", "ball"])
def test_gamma_based_samplers_reject_non_float_dtypes(sampler, dtype):
    calls = {"generalized_normal": lambda r, k: r.generalized_normal(k, 2.0, (3,), dtype),
             "ball": lambda r, k: r.ball(k, 2, 2, (3,), dtype)}
    assert error_class(calls[sampler], jr) is ValueError
    with pytest.raises(ValueError, match="must be a float dtype"):
        calls[sampler](fr, fr.PRNGKey(0))


@pytest.mark.parametrize("replace, with_p", [(True, True), (False, False), (True, False)])
def test_choice_reads_mode_only_for_the_gumbel_draw(replace, with_p):
    def draw(r, n, k):
        p = n.array([0.1, 0.2, 0.3, 0.4]) if with_p else None
        return r.choice(k, 4, (2,), replace=replace, p=p, mode="bad")
    assert_same(draw)


def test_choice_without_replacement_checks_mode():
    p = np.full(4, 0.25)
    assert error_class(lambda r, k: r.choice(k, 4, (2,), False, jax.numpy.array(p), mode="bad"),
                       jr) is ValueError
    with pytest.raises(ValueError, match="valid mode"):
        fr.choice(fr.PRNGKey(0), 4, (2,), False, fnp.array(p), mode="bad")


def test_traced_shape_element_is_a_type_error_under_jit():
    import fluxion
    n = np.int32(3)
    with pytest.raises(TypeError):
        jax.jit(lambda k, n: jr.normal(k, (n,)))(jr.PRNGKey(0), n)
    with pytest.raises(TypeError, match="Shapes must be 1D sequences|concrete"):
        fluxion.jit(lambda k, n: fr.normal(k, (n,)))(fr.PRNGKey(0), n)
