"""nn.initializers draw exactly what jax.nn.initializers draws for the same key."""
import jax
import numpy as np
import pytest

import fluxion

SHAPES = [(5, 7), (3, 3, 4, 6)]
FACTORIES = [
    ("glorot_uniform", {}), ("glorot_normal", {}), ("xavier_uniform", {}), ("xavier_normal", {}),
    ("lecun_uniform", {}), ("lecun_normal", {}), ("he_uniform", {}), ("he_normal", {}),
    ("kaiming_uniform", {}), ("kaiming_normal", {}),
    ("uniform", {"scale": 0.5}), ("normal", {"stddev": 0.3}),
    ("truncated_normal", {"stddev": 0.2, "lower": -1.5, "upper": 1.0}),
    ("constant", {"value": 0.25}),
    ("variance_scaling", {"scale": 1.7, "mode": "fan_out", "distribution": "normal"}),
    ("variance_scaling", {"scale": 0.4, "mode": "fan_geo_avg", "distribution": "uniform",
                          "in_axis": 0, "out_axis": (1, 2)}),
]


@pytest.mark.parametrize("name,kwargs", FACTORIES, ids=lambda v: v if isinstance(v, str) else None)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_draws_equal_jax_bit_for_bit(name, kwargs, shape):
    if "in_axis" in kwargs and len(shape) < 3:
        pytest.skip("axes need a rank-3 shape")
    ours = getattr(fluxion.nn.initializers, name)(**kwargs)(fluxion.random.PRNGKey(3), shape)
    theirs = getattr(jax.nn.initializers, name)(**kwargs)(jax.random.PRNGKey(3), shape)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("distribution", ["uniform", "truncated_normal"])
def test_complex_and_dtype_arguments(dtype, distribution):
    init = fluxion.nn.initializers.variance_scaling(1.0, "fan_avg", distribution, dtype=dtype)
    jinit = jax.nn.initializers.variance_scaling(1.0, "fan_avg", distribution, dtype=dtype)
    ours, theirs = init(fluxion.random.PRNGKey(0), (4, 6)), jinit(jax.random.PRNGKey(0), (4, 6))
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6, atol=1e-7)


def test_zeros_ones_and_typed_keys():
    key = fluxion.random.key(1)
    assert np.all(np.asarray(fluxion.nn.initializers.zeros(key, (2, 3))) == 0)
    assert fluxion.nn.initializers.ones(key, (2,), np.float16).dtype == np.float16
    ours = fluxion.nn.initializers.he_normal()(fluxion.random.key(1), (3, 4))
    theirs = jax.nn.initializers.he_normal()(jax.random.key(1), (3, 4))
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_errors():
    with pytest.raises(ValueError, match="invalid mode"):
        fluxion.nn.initializers.variance_scaling(1.0, "fan_max", "normal")(
            fluxion.random.PRNGKey(0), (2, 2))
    with pytest.raises(ValueError, match="invalid distribution"):
        fluxion.nn.initializers.variance_scaling(1.0, "fan_in", "cauchy")(
            fluxion.random.PRNGKey(0), (2, 2))
    with pytest.raises(ValueError, match="at least 2D"):
        fluxion.nn.initializers.glorot_uniform()(fluxion.random.PRNGKey(0), (3,))
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        fluxion.nn.initializers.delta_orthogonal()(fluxion.random.PRNGKey(0), (3, 3))


def test_every_name_exists():
    names = {n for n in dir(jax.nn.initializers) if not n.startswith("_")}
    assert not names - set(dir(fluxion.nn.initializers))
