"""bfloat16 inputs across the jnp-a functions: values, dtypes and weak types equal JAX's."""
import jax.numpy as jnp
import numpy as np
import pytest

from _jnp_oracle_a import agree

B = np.random.RandomState(1).randn(3, 6).astype(jnp.bfloat16)
CASES = [
    ("median", (B,), dict(axis=1)), ("quantile", (B, 0.3), {}), ("nanvar", (B,), {}),
    ("searchsorted", (np.sort(B[0]), B[1]), {}), ("convolve", (B[0], B[1, :3]), {}),
    ("interp", (B[0], np.sort(B[1]), B[2]), {}), ("unique", (B,), dict(size=4)),
    ("diff", (B,), {}), ("trapezoid", (B,), {}), ("polyval", (B[0], B[1]), {}),
    ("cov", (B,), {}), ("histogram", (B[0],), dict(bins=3)),
    ("digitize", (B[0], np.sort(B[1])), {}), ("sort_complex", (B[0],), {}),
    ("cross", (B[:, :3], B[:, 3:]), {}), ("gradient", (B[0],), {}), ("isin", (B, B[0]), {}),
    ("partition", (B, 2), {}), ("select", ([B > 0], [B]), {}),
]


def test_bfloat16_matches_jax():
    for name, args, kwargs in CASES:
        agree(name, *args, **kwargs)
