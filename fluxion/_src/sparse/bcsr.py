"""Batched-CSR sparse arrays (`fluxion.experimental.sparse.BCSR`).

``data`` has shape ``batch + (nse,) + dense``, ``indices`` (column indices) ``batch + (nse,)``
and ``indptr`` ``batch + (rows + 1,)``; the sparse part is two-dimensional.  Operations go
through the equivalent BCOO array (row indices recovered from ``indptr``).
"""
import math
import operator

import numpy as np

from fluxion import numpy as jnp
from fluxion import tree_util
from fluxion._src.sparse import bcoo as _b
from fluxion._src.sparse.bcoo import BCOO, JAXSparse


def _rows_from_indptr(indptr, nse):
    """Row of each of the ``nse`` entries; entries past ``indptr[-1]`` get ``rows``."""
    k = jnp.arange(nse, dtype=indptr.dtype)
    return (jnp.searchsorted(indptr, k, side="right") - 1).astype(indptr.dtype)


@tree_util.register_pytree_node_class
class BCSR(JAXSparse):
    """Batched compressed-sparse-row array.

    Parameters
    ----------
    args : tuple
      ``(data, indices, indptr)``.
    shape : tuple of int
    indices_sorted, unique_indices : bool
    """
    __array_priority__ = 2000

    def __init__(self, args, *, shape, indices_sorted=False, unique_indices=False):
        data, indices, indptr = args
        self.data, self.indices, self.indptr = map(jnp.asarray, (data, indices, indptr))
        self.shape = tuple(operator.index(d) for d in shape)
        self.indices_sorted = indices_sorted
        self.unique_indices = unique_indices
        nb = self.indices.ndim - 1
        if nb < 0 or self.indptr.ndim != nb + 1 or len(self.shape) < nb + 2:
            raise ValueError(f"Invalid BCSR buffers: data {self.data.shape}, indices "
                             f"{self.indices.shape}, indptr {self.indptr.shape} for shape {self.shape}")
        if self.indptr.shape[-1] != self.shape[nb] + 1:
            raise ValueError(f"BCSR: indptr.shape[-1]={self.indptr.shape[-1]} must be rows + 1 = "
                             f"{self.shape[nb] + 1}")
        if self.data.shape[nb] != self.indices.shape[-1]:
            raise ValueError(f"BCSR: data {self.data.shape} and indices {self.indices.shape} "
                             "disagree on nse")

    dtype = property(lambda self: self.data.dtype)
    nse = property(lambda self: self.indices.shape[-1])
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    n_batch = property(lambda self: self.indices.ndim - 1)
    n_sparse = property(lambda self: 2)
    n_dense = property(lambda self: self.data.ndim - 1 - self.n_batch)
    _bufs = property(lambda self: (self.data, self.indices, self.indptr))

    def __repr__(self):
        extra = f", n_batch={self.n_batch}" if self.n_batch else ""
        extra += f", n_dense={self.n_dense}" if self.n_dense else ""
        return f"BCSR({np.dtype(self.dtype).name}{list(self.shape)}, nse={self.nse}{extra})"

    def tree_flatten(self):
        return self._bufs, {"shape": self.shape, "indices_sorted": self.indices_sorted,
                            "unique_indices": self.unique_indices}

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        obj.__dict__.update(**aux_data)
        return obj

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32, n_dense=0, n_batch=0):
        """Create a BCSR array from a dense array."""
        return bcsr_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    @classmethod
    def from_scipy_sparse(cls, mat, *, index_dtype=None, n_dense=0, n_batch=0):
        """Create a BCSR array from a 2-D :mod:`scipy.sparse` array or matrix."""
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCSR.from_scipy_sparse with nonzero n_dense/n_batch")
        if mat.ndim != 2:
            raise ValueError(f"BCSR.from_scipy_sparse needs a 2-D array; got {mat.ndim}-D")
        csr = mat.tocsr()
        index_dtype = index_dtype or np.int32
        return cls((jnp.asarray(csr.data), jnp.asarray(csr.indices, index_dtype),
                    jnp.asarray(csr.indptr, index_dtype)), shape=csr.shape)

    @classmethod
    def from_bcoo(cls, arr):
        """Convert a BCOO array with two sparse dimensions to BCSR."""
        if not isinstance(arr, BCOO) or arr.n_sparse != 2:
            raise NotImplementedError("BCSR.from_bcoo needs a BCOO array with n_sparse == 2")
        arr = _b.bcoo_sort_indices(arr)
        data, indices = _b._batch_bufs(arr)
        rows = arr.shape[arr.n_batch]

        def one(idx):
            indptr = jnp.searchsorted(idx[:, 0], jnp.arange(rows + 1, dtype=idx.dtype), side="left")
            return idx[:, 1], indptr.astype(idx.dtype)

        cols, indptr = _b._nfold_vmap(one, arr.n_batch)(indices)
        return cls((data, cols, indptr), shape=arr.shape, indices_sorted=True,
                   unique_indices=arr.unique_indices)

    def to_bcoo(self):
        """The equivalent BCOO array."""
        nb = self.n_batch
        batch = self.shape[:nb]
        indices = jnp.broadcast_to(self.indices, batch + self.indices.shape[nb:])
        indptr = jnp.broadcast_to(self.indptr, batch + self.indptr.shape[nb:])
        rows = self.shape[nb]
        nse = self.nse

        def one(cols, ptr):
            r = _rows_from_indptr(ptr, nse)
            pad = jnp.arange(nse) >= ptr[-1]
            r = jnp.where(pad, rows, r)
            return jnp.stack([r, cols.astype(r.dtype)], axis=1)

        bcoo_idx = _b._nfold_vmap(one, nb)(indices, indptr)
        return BCOO((self.data, bcoo_idx), shape=self.shape, indices_sorted=self.indices_sorted,
                    unique_indices=self.unique_indices)

    def todense(self):
        """Create a dense version of the array."""
        return self.to_bcoo().todense()

    def __matmul__(self, other):
        return self.to_bcoo() @ (other.to_bcoo() if isinstance(other, BCSR) else other)

    def __rmatmul__(self, other):
        return (other.to_bcoo() if isinstance(other, BCSR) else other) @ self.to_bcoo()

    def __neg__(self):
        return BCSR((-self.data, self.indices, self.indptr), shape=self.shape,
                    indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)

    def __mul__(self, other):
        other = jnp.asarray(other)
        if other.ndim:
            raise NotImplementedError("BCSR multiplication by a non-scalar")
        return BCSR((self.data * other, self.indices, self.indptr), shape=self.shape,
                    indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)

    __rmul__ = __mul__


def bcsr_fromdense(mat, *, nse=None, n_batch=0, n_dense=0, index_dtype=jnp.int32):
    """Create a BCSR array from a dense array (its sparse part must be 2-D)."""
    mat = jnp.asarray(mat)
    if mat.ndim - n_batch - n_dense != 2:
        raise ValueError(f"bcsr_fromdense: n_sparse = mat.ndim - n_batch - n_dense must be 2, got "
                         f"{mat.ndim - n_batch - n_dense}")
    return BCSR.from_bcoo(_b.bcoo_fromdense(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                            index_dtype=index_dtype))


def bcsr_todense(mat):
    """Convert a BCSR array to a dense array."""
    return mat.todense()


def bcsr_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """`lax.dot_general` where one operand is BCSR (computed on the equivalent BCOO)."""
    conv = lambda x: x.to_bcoo() if isinstance(x, BCSR) else x
    return _b.bcoo_dot_general(conv(lhs), conv(rhs), dimension_numbers=dimension_numbers,
                               precision=precision, preferred_element_type=preferred_element_type,
                               out_sharding=out_sharding)
