"""Regression tests for mismatches with JAX found by running whole JAX programs on fluxion
(the same source text with `import jax` and with `import fluxion as jax`)."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
import fluxion.scipy.stats

jax = pytest.importorskip("jax")
jjnp = jax.numpy
import jax.scipy.stats  # noqa: E402


def test_multinomial_logpmf_needs_integer_counts_and_takes_p_dtype():
    for lib, np_like in ((fluxion, jnp), (jax, jjnp)):
        with pytest.raises(ValueError, match="integer type"):
            lib.scipy.stats.multinomial.logpmf(np_like.array([1.0, 2.0]), 3, np_like.array([0.4, 0.6]))
    p16 = np.array([0.4, 0.6], np.float16)
    ours = fluxion.scipy.stats.multinomial.pmf(jnp.array([1, 2]), 3, p16)
    theirs = jax.scipy.stats.multinomial.pmf(jjnp.array([1, 2]), 3, p16)
    assert ours.dtype == theirs.dtype == np.float16
    np.testing.assert_allclose(np.float32(ours), np.float32(theirs), rtol=1e-3)
