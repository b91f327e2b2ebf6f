"""Top-level names of `jax` that fluxion mirrors: flag context managers, `typeof`, `float0`,
and the deprecated host aliases, each against JAX."""
import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp

BOOL_FLAGS = ["debug_nans", "debug_infs", "log_compiles", "explain_cache_misses",
              "check_tracer_leaks"]


@pytest.mark.parametrize("name", BOOL_FLAGS + ["checking_leaks"])
def test_flag_context_sets_and_restores_like_jax(name):
    flag = "check_tracer_leaks" if name == "checking_leaks" else name
    before = getattr(fluxion.config, flag)
    with getattr(fluxion, name)():
        assert getattr(fluxion.config, flag) is True
        with getattr(fluxion, name)(False):
            assert getattr(fluxion.config, flag) is False
        with getattr(jax, name)():
            assert getattr(jax.config, f"jax_{flag}") is True
    assert getattr(fluxion.config, flag) == before


def test_debug_nans_context_raises_inside_only():
    x = jnp.asarray([0.0, 1.0])
    with fluxion.debug_nans(True):
        with pytest.raises(FloatingPointError):
            fluxion.jit(lambda v: jnp.log(v) * 0.0)(x).block_until_ready()
    assert np.isnan(np.asarray(fluxion.jit(lambda v: jnp.log(v) * 0.0)(x))[0])


@pytest.mark.parametrize("value", [1.0, 2, True, np.float32(1), np.ones((2, 3), np.int8),
                                   "array"], ids=str)
def test_typeof_matches_jax(value):
    ours = fluxion.typeof(jnp.arange(4.0) if isinstance(value, str) else value)
    theirs = jax.typeof(jjnp.arange(4.0) if isinstance(value, str) else value)
    assert (ours.shape, ours.dtype, ours.weak_type) == (theirs.shape, theirs.dtype,
                                                       theirs.weak_type)


def test_typeof_of_a_tracer_is_its_aval():
    seen = []
    fluxion.jit(lambda v: seen.append(fluxion.typeof(v)) or v)(jnp.ones((2, 5), jnp.int32))
    assert (seen[0].shape, seen[0].dtype) == ((2, 5), np.dtype(np.int32))


def test_float0_is_jax_float0():
    assert fluxion.float0 == jax.dtypes.float0
    grads = fluxion.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(2.0, 3)
    assert grads[1].dtype == fluxion.float0


@pytest.mark.parametrize("old,new", [("host_id", "process_index"), ("host_count", "process_count"),
                                     ("host_ids", "process_indices")])
def test_host_aliases_warn_and_equal_the_process_functions(old, new):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = getattr(fluxion, old)()
        theirs = getattr(jax, old)()
    assert [w.category for w in caught] == [UserWarning, UserWarning]
    assert ours == theirs == getattr(fluxion, new)()
