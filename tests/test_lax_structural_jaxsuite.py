"""lax.bitcast_convert_type and Array.view of 4-bit integers against JAX 0.10.2."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import fluxion


@pytest.mark.parametrize("src, dst", [("int4", np.int8), ("int4", np.int16), ("uint4", np.uint8),
                                      (np.uint8, "int4"), (np.uint8, "uint4"), ("int4", "uint4")])
def test_views_and_bitcasts_of_4_bit_integers(src, dst):
    # 4-bit types counted as 8 bits (their NumPy itemsize): XLA refused the bitcast.
    src = getattr(ml_dtypes, src) if isinstance(src, str) else src
    dst = getattr(ml_dtypes, dst) if isinstance(dst, str) else dst
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 0]]).astype(src)
    want = np.asarray(jnp.asarray(x).view(dst)).astype(np.int64)
    for fn in (lambda v: fluxion.numpy.asarray(v).view(dst),
               fluxion.jit(lambda v: v.view(dst))):
        np.testing.assert_array_equal(np.asarray(fn(x)).astype(np.int64), want)
    if jnp.iinfo(src).bits == jnp.iinfo(dst).bits and src != dst:
        got = fluxion.lax.bitcast_convert_type(x, dst)
        want = np.asarray(jax.lax.bitcast_convert_type(x, dst)).astype(np.int64)
        np.testing.assert_array_equal(np.asarray(got).astype(np.int64), want)
