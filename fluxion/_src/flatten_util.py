"""`ravel_pytree`: a pytree of arrays as one flat vector, and the inverse map."""
from __future__ import annotations

import math

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.lax import jax_names, lax, structural
from fluxion._src.numpy import util
from fluxion._src.tree_util import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


class _Unravel:
    """A flat vector back to the pytree; equal (and hashing equal) for equal layouts, so that
    jit caches keyed on it hit."""

    __slots__ = ("treedef", "shapes", "from_dtypes", "to_dtype")

    def __init__(self, treedef, shapes, from_dtypes, to_dtype):
        self.treedef, self.shapes = treedef, shapes
        self.from_dtypes, self.to_dtype = from_dtypes, to_dtype

    def _key(self):
        return (self.treedef, self.shapes, self.from_dtypes, self.to_dtype)

    def __eq__(self, other):
        return type(other) is _Unravel and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __call__(self, flat):
        if not self.shapes:
            return tree_unflatten(self.treedef, [])
        flat = util.as_array(flat)
        mixed = any(dt != self.to_dtype for dt in self.from_dtypes)
        if mixed and core.get_aval(flat).dtype != self.to_dtype:
            raise TypeError(f"unravel function given array of dtype {core.get_aval(flat).dtype}, "
                            f"but expected dtype {self.to_dtype}")
        sizes = [math.prod(s) for s in self.shapes]
        chunks = jax_names.split(flat, sizes) if len(sizes) > 1 else [flat]
        leaves = []
        for chunk, shape, dt in zip(chunks, self.shapes, self.from_dtypes):
            chunk = lax.reshape(chunk, shape)
            leaves.append(lax._convert_element_type(chunk, dt) if mixed else chunk)
        return tree_unflatten(self.treedef, leaves)


def ravel_pytree(pytree):
    """Flatten a pytree of arrays and scalars into one 1-D array.

    Parameters
    ----------
    pytree : a pytree of arrays and scalars.

    Returns
    -------
    ``(flat, unravel)``: `flat` holds every leaf raveled and concatenated, in the dtype the
    leaves promote to (float32 and empty for a pytree without leaves); `unravel(flat)` rebuilds
    a pytree of `pytree`'s structure, shapes and dtypes.
    """
    leaves, treedef = tree_flatten(pytree)
    if not leaves:
        return structural.full((0,), 0, np.float32), _Unravel(treedef, (), (), np.dtype(np.float32))
    leaves = [util.as_array(x) for x in leaves]
    avals = [core.get_aval(x) for x in leaves]
    from_dtypes = tuple(a.dtype for a in avals)
    to_dtype = dtypes.result_type(*leaves)
    parts = [lax.reshape(lax._convert_element_type(x, to_dtype), (math.prod(a.shape),))
             for x, a in zip(leaves, avals)]
    flat = structural.concatenate(parts, 0) if len(parts) > 1 else parts[0]
    return flat, _Unravel(treedef, tuple(a.shape for a in avals), from_dtypes, np.dtype(to_dtype))
