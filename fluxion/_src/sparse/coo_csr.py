"""The unbatched 2-D sparse formats of `jax.experimental.sparse`: COO, CSR and CSC, and their
`coo_*` / `csr_*` functions.

They are thin: each operation is written with gathers and scatter-adds, so jit, grad (with
respect to the stored values) and vmap come from those operations' rules. BCOO is the format
with full support; these serve code written for JAX's legacy formats.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from fluxion import numpy as jnp
from fluxion._src import core, tree_util
from fluxion._src.numpy.util import promote_dtypes
from fluxion._src.sparse.bcoo import JAXSparse


class _Matrix(JAXSparse):
    """What COO, CSR and CSC share: a 2-D shape, JAX's repr, `T`, and NotImplementedError
    for the arithmetic they do not have (as JAX's base class)."""

    __array_priority__ = 2000

    def __init__(self, shape):
        self.shape = tuple(operator.index(d) for d in shape)
        if len(self.shape) != 2:
            raise ValueError(f"{type(self).__name__} must have ndim=2; got shape={self.shape}")

    dtype = property(lambda self: self.data.dtype)
    nse = property(lambda self: self.data.size)
    size = property(lambda self: math.prod(self.shape))
    ndim = property(lambda self: len(self.shape))
    T = property(lambda self: self.transpose())

    def __repr__(self):
        text = f"{type(self).__name__}({self.dtype}{list(self.shape)}, nse={self.nse})"
        if isinstance(self.data, core.Tracer):
            text = f"{type(self.data).__name__}[{text}]"
        return text

    def transpose(self, axes=None):
        """The transposed matrix (COO stays COO; CSR and CSC become each other)."""
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return self._transposed()

    def block_until_ready(self):
        for buf in self.tree_flatten()[0]:
            buf.block_until_ready()
        return self

    def _matmul_operand(self, other):
        if isinstance(other, JAXSparse):
            raise NotImplementedError("matmul between two sparse objects.")
        other = jnp.asarray(other)
        if other.ndim not in (1, 2):
            raise NotImplementedError(f"matmul with object of shape {other.shape}")
        return promote_dtypes(self.data, other)

    def _unsupported(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self)} does not support this operation; convert it "
                                  "to BCOO (sparse.BCOO.fromdense(x.todense())) or to dense")

    sum = __neg__ = __pos__ = __rmatmul__ = __mul__ = __rmul__ = _unsupported
    __add__ = __radd__ = __sub__ = __rsub__ = __getitem__ = _unsupported


def _nonzero_entries(mat, nse: int):
    """(data, row, col) of the first `nse` nonzero entries of a 2-D array in row-major order;
    entries past the true count have data 0 at (0, 0), as JAX's."""
    mat = jnp.asarray(mat)
    if mat.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {mat.shape}")
    row, col = jnp.nonzero(mat, size=nse)
    real = jnp.arange(nse) < jnp.count_nonzero(mat)
    return jnp.where(real, mat[row, col], 0), row, col, real


def _nse(mat, nse, name):
    if nse is None:
        nse = int(jnp.count_nonzero(core.concrete_or_error(
            mat, f"The nse argument of {name} must be given under jit.")))
    return operator.index(core.concrete_or_error(nse, f"nse argument of {name}"))


def _scatter_rows(data, row, col, v, out_rows, transpose):
    """Rows `row` of the product of the matrix (data, row, col) with `v` (a vector or a
    matrix), summed into `out_rows` rows."""
    if transpose:
        row, col = col, row
    products = (data if v.ndim == 1 else data[:, None]) * v[col]
    return jnp.zeros((out_rows,) + v.shape[1:], products.dtype).at[row].add(products)


# ---------------------------------------------------------------------------------------------
# COO

@tree_util.register_pytree_node_class
class COO(_Matrix):
    """A 2-D sparse matrix in coordinate format: ``data[i]`` at ``(row[i], col[i])``.

    Parameters
    ----------
    args : tuple
        ``(data, row, col)``, each of shape ``(nse,)``.
    shape : tuple of two ints
    rows_sorted, cols_sorted : bool
        Whether the entries are known to be sorted by row (then column), or by column.
    """

    def __init__(self, args, *, shape, rows_sorted=False, cols_sorted=False):
        self.data, self.row, self.col = map(jnp.asarray, args)
        self._rows_sorted, self._cols_sorted = rows_sorted, cols_sorted
        super().__init__(shape)

    _bufs = property(lambda self: (self.data, self.row, self.col))

    @property
    def _info(self) -> dict:
        return {"shape": self.shape, "rows_sorted": self._rows_sorted,
                "cols_sorted": self._cols_sorted}

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32) -> "COO":
        return coo_fromdense(mat, nse=nse, index_dtype=index_dtype)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32") -> "COO":
        index = jnp.zeros(0, index_dtype)
        return cls((jnp.zeros(0, dtype), index, index), shape=shape, rows_sorted=True,
                   cols_sorted=True)

    @classmethod
    def _eye(cls, N, M, k, *, dtype=None, index_dtype="int32") -> "COO":
        row, col = _diagonal(N, M, k, index_dtype)
        if row is None:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        return cls((jnp.ones(row.shape[0], dtype), row, col), shape=(N, M), rows_sorted=True,
                   cols_sorted=True)

    def _sort_indices(self) -> "COO":
        if self._rows_sorted:
            return self
        from fluxion import lax
        row, col, data = lax.sort((self.row, self.col, self.data), num_keys=2)
        return COO((data, row, col), shape=self.shape, rows_sorted=True)

    def todense(self):
        return coo_todense(self)

    def _transposed(self) -> "COO":
        return COO((self.data, self.col, self.row), shape=self.shape[::-1],
                   rows_sorted=self._cols_sorted, cols_sorted=self._rows_sorted)

    def __matmul__(self, other):
        data, other = self._matmul_operand(other)
        promoted = COO((data, self.row, self.col), **self._info)
        return coo_matvec(promoted, other) if other.ndim == 1 else coo_matmat(promoted, other)

    def tree_flatten(self):
        return (self.data, self.row, self.col), self._info

    @classmethod
    def tree_unflatten(cls, aux, children):
        if set(aux) != {"shape", "rows_sorted", "cols_sorted"}:
            raise ValueError(f"COO.tree_unflatten: invalid aux_data={aux}")
        obj = object.__new__(cls)
        obj.data, obj.row, obj.col = children
        obj.shape = aux["shape"]
        obj._rows_sorted, obj._cols_sorted = aux["rows_sorted"], aux["cols_sorted"]
        return obj


def _diagonal(N, M, k, index_dtype):
    """(row, col) of the k-th diagonal of an N x M matrix, or (None, None) if it is empty."""
    size = min(N, M - k) if k > 0 else min(N + k, M)
    if size <= 0:
        return None, None
    idx = jnp.arange(size, dtype=index_dtype)
    return idx - min(k, 0), idx + max(k, 0)


def coo_todense(mat: COO):
    """The dense matrix a COO matrix stands for (repeated entries add up)."""
    return (jnp.zeros(mat.shape, mat.dtype)
            .at[mat.row, mat.col].add(mat.data))


def coo_fromdense(mat, *, nse=None, index_dtype=np.int32) -> COO:
    """A COO matrix of the nonzero entries of a 2-D array (`nse` of them; static under jit)."""
    nse = _nse(mat, nse, "coo_fromdense")
    data, row, col, _ = _nonzero_entries(mat, nse)
    return COO((data, row.astype(index_dtype), col.astype(index_dtype)),
               shape=jnp.shape(mat), rows_sorted=True)


def _check_product(mat, v, transpose, ndim):
    v = jnp.asarray(v)
    if v.ndim != ndim:
        raise ValueError(f"expected a {ndim}-D operand, got shape {v.shape}")
    need = mat.shape[0] if transpose else mat.shape[1]
    if v.shape[0] != need:
        raise ValueError(f"shapes {mat.shape}{'.T' if transpose else ''} and {v.shape} are "
                         "not aligned for a matrix product")
    return v


def coo_matvec(mat: COO, v, transpose: bool = False):
    """``mat @ v`` (or ``mat.T @ v``) of a COO matrix and a vector."""
    v = _check_product(mat, v, transpose, 1)
    return _scatter_rows(mat.data, mat.row, mat.col, v, mat.shape[1 if transpose else 0],
                         transpose)


def coo_matmat(mat: COO, B, *, transpose: bool = False):
    """``mat @ B`` (or ``mat.T @ B``) of a COO matrix and a dense matrix."""
    B = _check_product(mat, B, transpose, 2)
    return _scatter_rows(mat.data, mat.row, mat.col, B, mat.shape[1 if transpose else 0],
                         transpose)


# ---------------------------------------------------------------------------------------------
# CSR and CSC

def _rows_of(indices, indptr):
    """The row of each stored entry of a CSR matrix."""
    starts = jnp.zeros_like(indices).at[indptr].add(1, mode="drop")
    return jnp.cumsum(starts) - 1


def _row_pointers(row, n_rows, index_dtype):
    counts = jnp.bincount(row, length=n_rows).astype(index_dtype)
    return jnp.zeros(n_rows + 1, index_dtype).at[1:].set(jnp.cumsum(counts))


class _Compressed(_Matrix):
    def __init__(self, args, *, shape):
        self.data, self.indices, self.indptr = map(jnp.asarray, args)
        super().__init__(shape)

    _bufs = property(lambda self: (self.data, self.indices, self.indptr))

    def tree_flatten(self):
        return (self.data, self.indices, self.indptr), {"shape": self.shape}

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        if set(aux) != {"shape"}:
            raise ValueError(f"{cls.__name__}.tree_unflatten: invalid aux_data={aux}")
        obj.shape = aux["shape"]
        return obj


@tree_util.register_pytree_node_class
class CSR(_Compressed):
    """A 2-D sparse matrix in compressed-row format: the entries of row ``i`` are
    ``data[indptr[i]:indptr[i + 1]]`` at columns ``indices[indptr[i]:indptr[i + 1]]``.

    Parameters
    ----------
    args : tuple
        ``(data, indices, indptr)``; ``indptr`` has ``shape[0] + 1`` entries.
    shape : tuple of two ints
    """

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32) -> "CSR":
        return csr_fromdense(mat, nse=nse, index_dtype=index_dtype)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32") -> "CSR":
        shape = tuple(shape)
        if len(shape) != 2:
            raise ValueError(f"CSR must have ndim=2; got shape={shape}")
        return cls((jnp.zeros(0, dtype), jnp.zeros(0, index_dtype),
                    jnp.zeros(shape[0] + 1, index_dtype)), shape=shape)

    @classmethod
    def _eye(cls, N, M, k, *, dtype=None, index_dtype="int32") -> "CSR":
        row, col = _diagonal(N, M, k, index_dtype)
        if row is None:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        return cls((jnp.ones(row.shape[0], dtype), col, _row_pointers(row, N, index_dtype)),
                   shape=(N, M))

    def todense(self):
        return csr_todense(self)

    def _transposed(self) -> "CSC":
        return CSC((self.data, self.indices, self.indptr), shape=self.shape[::-1])

    def __matmul__(self, other):
        data, other = self._matmul_operand(other)
        promoted = CSR((data, self.indices, self.indptr), shape=self.shape)
        return csr_matvec(promoted, other) if other.ndim == 1 else csr_matmat(promoted, other)


@tree_util.register_pytree_node_class
class CSC(_Compressed):
    """A 2-D sparse matrix in compressed-column format: the CSR layout of its transpose."""

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32) -> "CSC":
        return csr_fromdense(jnp.asarray(mat).T, nse=nse, index_dtype=index_dtype).T

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32") -> "CSC":
        return CSR._empty(tuple(shape)[::-1], dtype=dtype, index_dtype=index_dtype).T

    @classmethod
    def _eye(cls, N, M, k, *, dtype=None, index_dtype="int32") -> "CSC":
        return CSR._eye(M, N, -k, dtype=dtype, index_dtype=index_dtype).T

    def todense(self):
        return csr_todense(self.T).T

    def _transposed(self) -> CSR:
        return CSR((self.data, self.indices, self.indptr), shape=self.shape[::-1])

    def __matmul__(self, other):
        data, other = self._matmul_operand(other)
        as_csr = CSR((data, self.indices, self.indptr), shape=self.shape[::-1])
        return (csr_matvec(as_csr, other, transpose=True) if other.ndim == 1
                else csr_matmat(as_csr, other, transpose=True))


def csr_todense(mat: CSR):
    """The dense matrix a CSR matrix stands for (repeated entries add up)."""
    row = _rows_of(mat.indices, mat.indptr)
    return jnp.zeros(mat.shape, mat.dtype).at[row, mat.indices].add(mat.data, mode="drop")


def csr_fromdense(mat, *, nse=None, index_dtype=np.int32) -> CSR:
    """A CSR matrix of the nonzero entries of a 2-D array (`nse` of them; static under jit).
    Entries past the true count are zeros that no row's range covers."""
    nse = _nse(mat, nse, "csr_fromdense")
    mat = jnp.asarray(mat)
    data, row, col, real = _nonzero_entries(mat, nse)
    row = jnp.where(real, row, mat.shape[0])  # counted in no row
    return CSR((data, col.astype(index_dtype),
                _row_pointers(row, mat.shape[0], np.dtype(index_dtype))), shape=mat.shape)


def csr_matvec(mat: CSR, v, transpose: bool = False):
    """``mat @ v`` (or ``mat.T @ v``) of a CSR matrix and a vector."""
    v = _check_product(mat, v, transpose, 1)
    row = _rows_of(mat.indices, mat.indptr)
    return _scatter_rows(mat.data, row, mat.indices, v, mat.shape[1 if transpose else 0],
                         transpose)


def csr_matmat(mat: CSR, B, *, transpose: bool = False):
    """``mat @ B`` (or ``mat.T @ B``) of a CSR matrix and a dense matrix."""
    B = _check_product(mat, B, transpose, 2)
    row = _rows_of(mat.indices, mat.indptr)
    return _scatter_rows(mat.data, row, mat.indices, B, mat.shape[1 if transpose else 0],
                         transpose)
