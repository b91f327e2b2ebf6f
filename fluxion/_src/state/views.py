"""Views of Refs: ``ref.at[idx]`` is a Ref-like object for part of a Ref (JAX's
`TransformedRef`), read and written through the Ref it views. Pallas kernels pass views to
DMAs and semaphore operations (``x_hbm.at[pl.ds(8, 8)]``, ``sems.at[i]``).

A view keeps its base Ref and its chain of indices. Reading reads the base at the first index
and indexes the value further; writing reads the chain, updates the innermost part and writes
it back up the chain, so only the state primitives of the base Ref are ever bound.
"""
from __future__ import annotations

import math

from fluxion._src import core
from fluxion._src.state import indexing


def _index_shape(shape: tuple, idx) -> tuple:
    _, indexer = indexing.normalize(tuple(shape), idx)
    return indexing.result_shape(indexer)


def _read_value(x, idx):
    starts, indexer = indexing.normalize(core.get_aval(x).shape, idx)
    return indexing.read(x, starts, indexer)


def _write_value(x, idx, value):
    from fluxion._src.state import primitives
    aval = core.get_aval(x)
    starts, indexer = indexing.normalize(aval.shape, idx)
    # a Ref write's dtype and shape rules (JAX's errors), then the value-level update
    value = primitives._value_for(aval, indexer, value, "swap")
    return indexing.write(x, value, starts, indexer)


class RefView:
    """Part of a Ref: ``ref.at[idx]`` (and ``ref.at[i].at[j]``)."""

    __slots__ = ("ref", "indices")

    def __init__(self, ref, indices: tuple):
        self.ref = ref
        self.indices = tuple(indices)

    @property
    def shape(self) -> tuple:
        shape = tuple(self.ref.shape)
        for idx in self.indices:
            shape = _index_shape(shape, idx)
        return shape

    dtype = property(lambda self: self.ref.dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    @property
    def at(self) -> "RefAt":
        return RefAt(self.ref, self.indices)

    def _chain(self) -> list:
        """The values along the chain: the base at the first index, then each further index."""
        values = [self.ref[self.indices[0]]]
        for idx in self.indices[1:]:
            values.append(_read_value(values[-1], idx))
        return values

    def __getitem__(self, idx):
        return _read_value(self._chain()[-1], idx)

    def __setitem__(self, idx, value):
        values = self._chain()
        new = _write_value(values[-1], idx, value)
        for outer, idx_k in zip(reversed(values[:-1]), reversed(self.indices[1:])):
            new = _write_value(outer, idx_k, new)
        self.ref[self.indices[0]] = new

    def __repr__(self):
        return f"RefView(shape={self.shape}, dtype={self.dtype}, indices={self.indices})"


class RefAt:
    """The `.at` of a Ref or view: ``ref.at[idx]`` is a `RefView`."""

    __slots__ = ("ref", "indices")

    def __init__(self, ref, indices: tuple = ()):
        self.ref = ref
        self.indices = indices

    def __getitem__(self, idx) -> RefView:
        return RefView(self.ref, self.indices + (idx,))
