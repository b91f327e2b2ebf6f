"""cholesky_update: rank-one update of a Cholesky factor by Givens rotations, O(n^2)."""
from __future__ import annotations

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray
from fluxion._src.lax.linalg.primitives import _batch_front


def _cholesky_update_abstract_eval(r, w):
    if r.ndim < 2 or r.shape[-1] != r.shape[-2] or w.shape != r.shape[:-1]:
        raise ValueError(f"Rank-1 update to Cholesky decomposition takes a square matrix and "
                         f"a vector of the same size as input. Got shapes {r.shape} and "
                         f"{w.shape} instead")
    if not dtypes.is_float(r.dtype) or r.dtype != w.dtype \
            or np.dtype(r.dtype) not in (np.float32, np.float64):
        raise TypeError(f"cholesky_update requires float32 or float64 arguments of one dtype, "
                        f"got {r.dtype} and {w.dtype}")
    return ShapedArray(r.shape, r.dtype)


def _cholesky_update_impl(r, w):
    import fluxion.numpy as jnp
    from fluxion import lax
    n = r.shape[-1]
    one, zero = np.array(1, r.dtype), np.array(0, r.dtype)

    def body(k, carry):
        r, z = carry
        row = lax.dynamic_index_in_dim(r, k, axis=r.ndim - 2, keepdims=False)
        x = lax.dynamic_index_in_dim(row, k, axis=row.ndim - 1, keepdims=False)
        y = lax.dynamic_index_in_dim(z, k, axis=z.ndim - 1, keepdims=False)
        # The Givens rotation zeroing z[k] against r[k, k], scaled against overflow.
        scale = jnp.maximum(jnp.abs(x), jnp.abs(y))
        safe = jnp.where(scale == 0, one, scale)
        xs, ys = x / safe, y / safe
        rh = lax.rsqrt(jnp.where(y == 0, one, xs * xs + ys * ys))
        c = jnp.where(y == 0, one, xs * rh)[..., None]
        s = jnp.where(y == 0, zero, -ys * rh)[..., None]
        new_row = c * row - s * z
        z = c * z + s * row
        r = lax.dynamic_update_index_in_dim(r, new_row[..., None, :], k, axis=r.ndim - 2)
        return r, z

    r, _ = lax.fori_loop(0, n, body, (r, w))
    return r


cholesky_update_p = core.Primitive("cholesky_update")
cholesky_update_p.def_abstract_eval(_cholesky_update_abstract_eval)
lowering.register_lowering(cholesky_update_p,
                           lowering.lower_fun(_cholesky_update_impl, multiple_results=False))
_batch_front(cholesky_update_p)


def cholesky_update(r_matrix, w_vector):
    """Cholesky factor of A + w w^T given the upper triangular R with A = R^T R, in O(n^2).

    Returns the new upper triangular R.
    """
    import fluxion.numpy as jnp
    return cholesky_update_p.bind(jnp.asarray(r_matrix), jnp.asarray(w_vector))
