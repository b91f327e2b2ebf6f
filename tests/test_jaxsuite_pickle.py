"""Pickling where JAX 0.10.2's pickle_test found fluxion lacking: a jitted function defined
inside another function (pickled by value with cloudpickle) and pickling a tracer, which JAX
refuses with ConcretizationTypeError. JAX (the oracle) runs the same programs."""
import pickle

import cloudpickle
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion._src import config as config_module
from fluxion._src import core


def _nested_jitted(api):
    @api.jit
    def product(x, y):
        return x * y

    @api.jit
    def outer(z):
        return product(z, z + 77)

    return outer


@pytest.mark.parametrize("api", [jax, fluxion], ids=["jax", "fluxion"])
def test_cloudpickled_nested_jit_function_gives_the_same_values(api):
    outer = _nested_jitted(api)
    expected = outer(32)
    restored = pickle.loads(cloudpickle.dumps(outer))
    assert int(restored(32)) == int(expected) == 32 * 109
    np.testing.assert_array_equal(restored(np.float32([1.0, 2.0])), [78.0, 158.0])


def test_cloudpickled_jit_function_keeps_one_cache_and_the_live_flags():
    restored = pickle.loads(cloudpickle.dumps(_nested_jitted(fluxion)))
    x = jnp.float32(3.0)
    assert float(restored(x)) == 240.0
    assert float(restored(x)) == 240.0
    # The fast path and the general path fill the same (fresh) caches of the restored copy.
    assert restored._cache_size() == 1 and len(restored._fast_cache) == 1
    assert restored.__globals__["config"] is config_module.config
    with fluxion.disable_jit():  # reads the process's flags, not a pickled copy
        assert float(restored(x)) == 240.0
    assert restored._cache_size() == 1


def test_process_singletons_pickle_by_reference():
    for singleton in (core.eval_trace, core._trace_state, config_module.config):
        assert pickle.loads(pickle.dumps(singleton)) is singleton


@pytest.mark.parametrize("api, numpy", [(jax, jjnp), (fluxion, jnp)], ids=["jax", "fluxion"])
def test_pickling_a_tracer_raises_concretization_error(api, numpy):
    with pytest.raises(api.errors.ConcretizationTypeError):
        api.jit(pickle.dumps)(0)
    with pytest.raises(api.errors.ConcretizationTypeError, match="pickle"):
        api.jit(lambda x: pickle.dumps(numpy.sin(x)))(1.0)
    with pytest.raises(TypeError):  # a subclass of TypeError, as in JAX
        api.grad(lambda x: pickle.dumps(x) and x)(1.0)
