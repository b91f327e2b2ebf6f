"""jax.lax operations with unusual parameters (key sizes, dtypes that canonicalize, vmap of
rules that were missing, bad parameters), against JAX 0.10.2 and NumPy."""
import numpy as np
import pytest

import fluxion
from fluxion import lax
import jax
from jax import lax as jlax

KEY = np.array([1, 2, 3, 4], np.uint32)


# ---------------------------------------------------------------------------------------------
# rng_bit_generator

def test_rng_bit_generator_uint64_bits_canonicalize_without_x64():
    new_key, bits = lax.rng_bit_generator(KEY, (3,), np.uint64)
    want_key, want_bits = jlax.rng_bit_generator(KEY, (3,), np.uint64)
    assert bits.dtype == want_bits.dtype == np.uint32
    np.testing.assert_array_equal(bits, want_bits)
    np.testing.assert_array_equal(new_key, want_key)


@pytest.mark.parametrize("jit", [False, True])
def test_rng_bit_generator_vmap_matches_a_loop_over_keys(jit):
    keys = np.stack([KEY, KEY + 1, KEY * 3])
    alg = lax.RandomAlgorithm.RNG_THREE_FRY
    f = fluxion.vmap(lambda k: lax.rng_bit_generator(k, (2, 3), np.uint8, alg))
    new_keys, bits = (fluxion.jit(f) if jit else f)(keys)
    for i, k in enumerate(keys):
        want_key, want_bits = jlax.rng_bit_generator(k, (2, 3), np.uint8, jlax.RandomAlgorithm(1))
        np.testing.assert_array_equal(bits[i], want_bits)
        np.testing.assert_array_equal(new_keys[i], want_key)


@pytest.mark.parametrize("key,alg", [(np.array([1, 2], np.uint32), "RNG_DEFAULT"),
                                     (np.array([1, 2, 3], np.uint32), "RNG_PHILOX"),
                                     (np.arange(6, dtype=np.uint32), "RNG_THREE_FRY")])
def test_rng_bit_generator_bad_key_size_is_a_type_error(key, alg):
    with pytest.raises(TypeError, match="needs a key of"):
        lax.rng_bit_generator(key, (3,), algorithm=getattr(lax.RandomAlgorithm, alg))


# ---------------------------------------------------------------------------------------------
# composite

def test_composite_takes_numpy_and_python_operands_as_canonical_arrays():
    add = lax.composite(lambda a, b: a + b, "my.add")
    out = add(1.0, 2.0)
    want = jlax.composite(lambda a, b: a + b, "my.add")(1.0, 2.0)
    assert isinstance(out, fluxion.Array)
    assert (out.dtype, out.weak_type, float(out)) == (want.dtype, want.weak_type, float(want))
    first, ones = lax.composite(lambda a: (a, np.ones(2)), "my.pair")(np.arange(3.0))
    assert isinstance(first, fluxion.Array) and first.dtype == ones.dtype == np.float32
    np.testing.assert_array_equal(first, np.arange(3.0))
