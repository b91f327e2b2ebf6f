"""`random_bcoo`: a random BCOO array (values from a sampler, distinct random positions)."""
from __future__ import annotations

import math
import operator

from fluxion import numpy as jnp
from fluxion import random
from fluxion._src import dtypes
from fluxion._src.vmap import vmap
from fluxion._src.sparse.bcoo import BCOO


def random_bcoo(key, shape, *, dtype=None, indices_dtype=None, nse=0.2, n_batch=0, n_dense=0,
                unique_indices=True, sorted_indices=False, generator=random.uniform, **kwds):
    """A random BCOO array, bit for bit as JAX's for the same key.

    Parameters
    ----------
    key : PRNG key
    shape : sequence of int
    dtype : dtype of the values (default: the default float type).
    indices_dtype : dtype of the indices (default: the default int type).
    nse : int, or a float in (0, 1) giving the fraction of the sparse dimensions' size.
    n_batch, n_dense : int
        Leading batch and trailing dense dimensions.
    unique_indices : bool
        Draw positions without replacement.
    sorted_indices : bool
        Sort the indices of the result.
    generator : callable
        ``generator(key, shape=..., dtype=..., **kwds)`` makes the values.
    """
    shape = tuple(map(operator.index, shape))
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > len(shape):
        raise ValueError(f"Invalid n_batch={n_batch}, n_dense={n_dense} for shape={shape}")
    n_sparse = len(shape) - n_batch - n_dense
    batch_shape = shape[:n_batch]
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    dense_shape = shape[n_batch + n_sparse:]
    sparse_size = math.prod(sparse_shape)
    if not 0 <= nse < sparse_size:
        raise ValueError(f"got nse={nse}, expected to be between 0 and {sparse_size}")
    if 0 < nse < 1:
        nse = math.ceil(nse * sparse_size)
    nse = operator.index(nse)
    dtype = dtypes.default_float_dtype() if dtype is None else dtype
    indices_dtype = dtypes.default_int_dtype() if indices_dtype is None else indices_dtype
    if sparse_size > jnp.iinfo(indices_dtype).max:
        raise ValueError(f"indices_dtype={indices_dtype} does not have enough range to "
                         f"generate sparse indices of size {sparse_size}.")

    def positions(k):
        if not sparse_shape:
            return jnp.zeros((nse, n_sparse), indices_dtype)
        flat = random.choice(k, sparse_size, shape=(nse,), replace=not unique_indices)
        return jnp.column_stack(jnp.unravel_index(flat.astype(indices_dtype), sparse_shape))

    # One key for the values, then one per batch element for its positions.
    keys = random.split(key, math.prod(batch_shape) + 1)
    data = generator(keys[0], shape=batch_shape + (nse,) + dense_shape, dtype=dtype, **kwds)
    indices = vmap(positions)(keys[1:]).reshape(batch_shape + (nse, n_sparse))
    result = BCOO((data, indices), shape=shape)
    return result.sort_indices() if sorted_indices else result
