"""Batched-COO sparse arrays (`fluxion.experimental.sparse.BCOO`) and their operations.

A BCOO array of shape ``batch + sparse + dense`` stores ``data`` of shape
``batch + (nse,) + dense`` and ``indices`` of shape ``batch + (nse, n_sparse)``.  Entries
whose index is out of bounds (equal to the sparse shape) are padding and are ignored.

Every operation is written with fluxion's lax/numpy operations (gathers and scatter-adds
over the stored entries), so jit, grad and vmap come from those operations' rules.  Many
operations first bring the array to the flat COO layout (``n_batch == n_dense == 0``),
which is why their results can have a different layout from JAX's (see
docs/differences.md); the values are the same.
"""
import functools
import math
import operator

import numpy as np

from fluxion import lax
from fluxion import numpy as jnp
from fluxion._src.vmap import vmap as _vmap
from fluxion._src import api as _api
from fluxion._src import ad as _ad, batching as _batching, core
from fluxion._src.lax.base import standard_primitive as _standard_primitive
from fluxion import tree_util


class SparseEfficiencyError(ValueError):
    """An operation would need to densify a sparse array."""


class SparseEfficiencyWarning(UserWarning):
    """An operation densifies a sparse array."""


class CuSparseEfficiencyWarning(SparseEfficiencyWarning):
    """A cuSPARSE kernel is not used (never raised by fluxion)."""


def _hashable(v):
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    return v


def _jitted(*static):
    """Compile the operation as one executable (eager calls then cost one dispatch, not one
    per lax operation); the keyword arguments named in ``static`` are static."""
    def deco(f):
        jf = _api.jit(f, static_argnames=static)

        @functools.wraps(f)
        def wrapper(*args, **kw):
            return jf(*args, **{k: _hashable(v) for k, v in kw.items()})
        return wrapper
    return deco


def _nfold_vmap(f, n):
    for _ in range(n):
        f = _vmap(f)
    return f


def _ndim_of(x):
    return len(np.shape(x)) if not hasattr(x, "ndim") else x.ndim


class JAXSparse:
    """Base class of fluxion's sparse array types (named as JAX's)."""
    data: object
    shape: tuple

    __hash__ = None  # mutable buffers: unhashable, as JAX's

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]


@tree_util.register_pytree_node_class
class BCOO(JAXSparse):
    """Batched coordinate-format sparse array.

    Parameters
    ----------
    args : tuple
      ``(data, indices)``.
    shape : tuple of int
      The shape of the dense array it stands for.
    indices_sorted, unique_indices : bool
      Whether the indices are known to be sorted / free of duplicates.
    """
    __array_priority__ = 2000

    def __init__(self, args, *, shape, indices_sorted=False, unique_indices=False):
        data, indices = args
        self.data = jnp.asarray(data)
        self.indices = jnp.asarray(indices)
        self.shape = tuple(operator.index(d) for d in shape)
        self.indices_sorted = indices_sorted
        self.unique_indices = unique_indices
        _validate(self.data, self.indices, self.shape)

    # layout
    dtype = property(lambda self: self.data.dtype)
    nse = property(lambda self: self.indices.shape[-2])
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    n_batch = property(lambda self: self.indices.ndim - 2)
    n_sparse = property(lambda self: self.indices.shape[-1])
    n_dense = property(lambda self: self.data.ndim - 1 - self.n_batch)
    T = property(lambda self: self.transpose())
    _bufs = property(lambda self: (self.data, self.indices))

    def __repr__(self):
        try:
            dt = np.dtype(self.dtype).name
        except TypeError:
            dt = str(self.dtype)
        try:
            nse, n_batch, n_dense = self.nse, self.n_batch, self.n_dense
        except IndexError:  # buffers replaced by ones of no valid layout
            return "BCOO(<invalid>)"
        extra = ""
        if self.n_batch:
            extra += f", n_batch={self.n_batch}"
        if self.n_dense:
            extra += f", n_dense={self.n_dense}"
        return f"BCOO({dt}{list(self.shape)}, nse={nse}{extra})"

    def tree_flatten(self):
        return (self.data, self.indices), {"shape": self.shape,
                                           "indices_sorted": self.indices_sorted,
                                           "unique_indices": self.unique_indices}

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.data, obj.indices = children
        if aux_data.keys() != {"shape", "indices_sorted", "unique_indices"}:
            raise ValueError(f"BCOO.tree_unflatten: invalid {aux_data=}")
        obj.__dict__.update(**aux_data)
        obj.shape = _shape_under_vmap(obj.data, obj.indices, obj.shape)
        return obj

    @classmethod
    def fromdense(cls, mat, *, nse=None, index_dtype=np.int32, n_dense=0, n_batch=0):
        """Create a BCOO array from a dense array."""
        return bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    @classmethod
    def from_scipy_sparse(cls, mat, *, index_dtype=None, n_dense=0, n_batch=0):
        """Create a BCOO array from a :mod:`scipy.sparse` array or matrix."""
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCOO.from_scipy_sparse with nonzero n_dense/n_batch")
        coo = mat.tocoo()
        indices = np.stack([coo.row, coo.col], axis=1)
        # scipy does not promise sorted or duplicate-free entries, so neither is claimed.
        return cls((jnp.asarray(coo.data), jnp.asarray(indices, index_dtype or np.int32)),
                   shape=coo.shape)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32", n_dense=0, n_batch=0, nse=0):
        shape = tuple(shape)
        n_sparse = len(shape) - n_dense - n_batch
        if n_sparse < 0 or n_dense < 0 or n_batch < 0 or nse < 0:
            raise ValueError(f"Invalid inputs: {shape=}, {n_dense=}, {n_batch=}, {nse=}")
        batch, sparse, dense = shape[:n_batch], shape[n_batch:n_batch + n_sparse], shape[n_batch + n_sparse:]
        data = jnp.zeros((*batch, nse, *dense), dtype)
        indices = jnp.broadcast_to(jnp.array(sparse, index_dtype), (*batch, nse, n_sparse))
        return cls((data, indices), shape=shape, indices_sorted=True, unique_indices=True)

    @classmethod
    def _eye(cls, N, M, k, *, dtype=None, index_dtype="int32", n_batch=0, n_dense=0):
        if n_batch or n_dense:
            return bcoo_update_layout(cls._eye(N, M, k, dtype=dtype, index_dtype=index_dtype),
                                      n_batch=n_batch, n_dense=n_dense)
        diag = max(0, min(N + min(k, 0), M - max(k, 0)))
        if diag == 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        row = lax.iota(index_dtype, diag) - min(k, 0)
        col = lax.iota(index_dtype, diag) + max(k, 0)
        data = jnp.ones(diag, dtype)
        return cls((data, jnp.stack([row, col], axis=1)), shape=(N, M), indices_sorted=True,
                   unique_indices=True)

    def todense(self):
        """Create a dense version of the array."""
        return bcoo_todense(self)

    def transpose(self, axes=None):
        """Transpose; ``axes`` must keep batch, sparse and dense dimensions in their groups."""
        axes = tuple(reversed(range(self.ndim))) if axes is None else tuple(axes)
        return bcoo_transpose(self, permutation=axes)

    def reshape(self, *args, **kwargs):
        new_sizes = args[0] if len(args) == 1 and not isinstance(args[0], int) else args
        new_sizes = kwargs.pop("new_sizes", new_sizes)
        return bcoo_reshape(self, new_sizes=_resolve_reshape(self.size, tuple(new_sizes)))

    def sum(self, axis=None):
        if axis is None:
            axis = tuple(range(self.ndim))
        elif isinstance(axis, int):
            axis = (axis,)
        return bcoo_reduce_sum(self, axes=tuple(a % self.ndim if self.ndim else a for a in axis))

    def sum_duplicates(self, nse=None, remove_zeros=True):
        """Return an array with duplicate indices summed (see `bcoo_sum_duplicates`)."""
        if remove_zeros:
            return bcoo_eliminate_zeros(self, nse=nse)
        return bcoo_sum_duplicates(self, nse=nse)

    def sort_indices(self):
        return bcoo_sort_indices(self)

    def update_layout(self, *, n_batch=None, n_dense=None, on_inefficient="error"):
        return bcoo_update_layout(self, n_batch=n_batch, n_dense=n_dense,
                                  on_inefficient=on_inefficient)

    def astype(self, dtype):
        return BCOO((self.data.astype(dtype), self.indices), shape=self.shape,
                    indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)

    def block_until_ready(self):
        self.data.block_until_ready()
        self.indices.block_until_ready()
        return self

    # arithmetic
    def __neg__(self):
        return BCOO((-self.data, self.indices), shape=self.shape,
                    indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)

    def __pos__(self):
        return self

    def __mul__(self, other):
        if isinstance(other, BCOO):
            return bcoo_multiply_sparse(self, other)
        other = jnp.asarray(other)
        if other.ndim == 0:
            return BCOO((self.data * other, self.indices), shape=self.shape,
                        indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)
        shape = np.broadcast_shapes(self.shape, other.shape)
        if shape != self.shape:
            raise NotImplementedError("multiplication by a dense array that broadcasts the "
                                      "sparse operand to a larger shape")
        return BCOO((bcoo_multiply_dense(self, other), self.indices), shape=self.shape,
                    indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, BCOO):
            raise NotImplementedError("division by a sparse array is not implemented")
        other = jnp.asarray(other)
        if other.ndim == 0:
            data = self.data / other
        else:  # each stored entry divided by the divisor's element at its index
            if np.broadcast_shapes(self.shape, other.shape) != self.shape:
                raise NotImplementedError("division by a dense array that broadcasts the "
                                          "sparse operand to a larger shape")
            data = self.data / _extract(self.indices, jnp.broadcast_to(other, self.shape),
                                        self.n_batch)
        return BCOO((data, self.indices), shape=self.shape, indices_sorted=self.indices_sorted,
                    unique_indices=self.unique_indices)

    def __getitem__(self, idx):
        # As JAX: NumPy indexing of the dense array, run under sparsify
        from fluxion._src.sparse.transform import sparsify
        return sparsify(lambda x: x[idx])(self)

    def __pow__(self, other):
        # As JAX: `jnp.power` by a static exponent under sparsify (a positive integer keeps
        # the entries; any other exponent raises the sparse rule's NotImplementedError)
        from fluxion._src.sparse.transform import sparsify
        return sparsify(lambda x: jnp.power(x, other))(self)

    def __add__(self, other):
        if not isinstance(other, BCOO):  # a dense sum, under JAX's conditions
            from fluxion._src.sparse.transform import sparsify
            return sparsify(jnp.add)(self, other)
        return bcoo_concatenate_entries(self, other)

    __radd__ = __add__

    def __sub__(self, other):
        if not isinstance(other, BCOO):
            raise NotImplementedError("Subtraction between sparse and dense array.")
        return self + (-other)

    def __rsub__(self, other):
        raise NotImplementedError("Subtraction between sparse and dense array.")

    def __matmul__(self, other):
        return _matmul(self, other)

    def __rmatmul__(self, other):
        return _matmul(other, self)


def _shape_under_vmap(data, indices, shape):
    # Under vmap, tree_unflatten sees the per-example data/indices with the outer shape
    # (one leading batch dimension more), and on the way out the batched buffers with the
    # inner shape; the ranks of data and indices tell which.
    if not (hasattr(data, "shape") and hasattr(indices, "shape")):
        return shape
    if _ndim_of(indices) < 2:
        raise ValueError("Cannot map over a BCOO array along a dimension that is not a batch "
                         "dimension (in_axes for BCOO operands must name batch dimensions).")
    n_batch = indices.ndim - 2
    ndim = n_batch + indices.shape[-1] + (data.ndim - 1 - n_batch)
    if ndim < len(shape):
        return tuple(shape[len(shape) - ndim:])
    if ndim > len(shape):
        return tuple(data.shape[:ndim - len(shape)]) + tuple(shape)
    return shape


def _validate(data, indices, shape):
    if not jnp.issubdtype(indices.dtype, jnp.integer):
        raise TypeError(f"bcoo: indices must have integer dtype, got {indices.dtype}")
    if indices.ndim < 2:
        raise ValueError(f"bcoo: indices must have at least 2 dimensions, got {indices.shape=}")
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]
    n_dense = data.ndim - 1 - n_batch
    if n_dense < 0:
        raise ValueError(f"Invalid inputs: data.shape={data.shape}, indices.shape={indices.shape}")
    if n_batch + n_sparse + n_dense != len(shape):
        raise ValueError(f"Invalid inputs: shape={shape}, data.shape={data.shape}, "
                         f"indices.shape={indices.shape}")
    for i in range(n_batch):
        if indices.shape[i] not in (1, shape[i]) or data.shape[i] not in (1, shape[i]):
            raise ValueError(f"Invalid inputs: batch dimension {i} of data {data.shape} or "
                             f"indices {indices.shape} does not match shape {shape}")
    if data.shape[n_batch] != indices.shape[n_batch]:
        raise ValueError(f"Invalid inputs: nse of data.shape={data.shape} and "
                         f"indices.shape={indices.shape} differ")
    if tuple(data.shape[n_batch + 1:]) != tuple(shape[n_batch + n_sparse:]):
        raise ValueError(f"Invalid inputs: dense dimensions of data.shape={data.shape} do not "
                         f"match shape={shape}")


def _resolve_reshape(size, new_sizes):
    if new_sizes.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in new_sizes:
        known = math.prod(d for d in new_sizes if d != -1)
        new_sizes = tuple(size // known if d == -1 else d for d in new_sizes)
    return new_sizes


def _check_bcoo(mat, name):
    if not isinstance(mat, BCOO):
        raise TypeError(f"{name}: expected a BCOO array, got {type(mat).__name__}")


def _batch_bufs(mat):
    """data and indices with their batch dimensions broadcast to the full batch shape."""
    nb = mat.n_batch
    batch = mat.shape[:nb]
    data = jnp.broadcast_to(mat.data, batch + mat.data.shape[nb:])
    indices = jnp.broadcast_to(mat.indices, batch + mat.indices.shape[nb:])
    return data, indices


# ---------------------------------------------------------------------------------------
# dense <-> sparse

@_jitted()
def bcoo_todense(mat):
    """Convert a BCOO array to a dense array."""
    _check_bcoo(mat, "bcoo_todense")
    nb, ns = mat.n_batch, mat.n_sparse
    out_shape = mat.shape[nb:]

    def one(data, indices):
        if ns == 0:
            return data.sum(0)
        zeros = jnp.zeros(out_shape, mat.dtype)
        return zeros.at[tuple(indices[:, i] for i in range(ns))].add(data, mode="drop")

    return _nfold_vmap(one, nb)(*_batch_bufs(mat))


def _sparse_mask_count(mask, n_batch):
    counts = np.asarray(mask).reshape(mask.shape[:n_batch] + (-1,)).sum(-1)
    return int(counts.max()) if counts.size else 0


def bcoo_fromdense(mat, *, nse=None, n_batch=0, n_dense=0, index_dtype=jnp.int32):
    """Create a BCOO array from a dense array.

    Parameters
    ----------
    mat : array
    nse : int, optional
      Number of stored entries per batch; if None it is computed, which needs a concrete
      ``mat``.
    n_batch, n_dense : int
      Number of batch and dense dimensions.
    """
    mat = jnp.asarray(mat)
    n_sparse = mat.ndim - n_batch - n_dense
    if n_batch < 0 or n_dense < 0 or n_sparse < 0:
        raise ValueError(f"Invalid layout: {mat.shape=}, {n_batch=}, {n_dense=}")
    mask = mat != 0
    if n_dense:
        mask = mask.any(tuple(range(mat.ndim - n_dense, mat.ndim)))
    if nse is None:
        if isinstance(mat, core.Tracer):
            raise core.ConcretizationTypeError(
                mat, "bcoo_fromdense: nse must be specified when the array is traced (e.g. under "
                     "jit)")
        nse = _sparse_mask_count(mask, n_batch) if n_sparse else 1
    nse = operator.index(core.concrete_or_error(nse, "nse argument of bcoo_fromdense()"))
    return _fromdense(mat, nse=nse, n_batch=n_batch, n_dense=n_dense, index_dtype=index_dtype)


@_jitted("nse", "n_batch", "n_dense", "index_dtype")
def _fromdense(mat, *, nse, n_batch, n_dense, index_dtype):
    n_sparse = mat.ndim - n_batch - n_dense
    mask = mat != 0
    if n_dense:
        mask = mask.any(tuple(range(mat.ndim - n_dense, mat.ndim)))
    sparse_shape = mat.shape[n_batch:n_batch + n_sparse]

    def nonzero(m):
        if n_sparse == 0:
            return jnp.zeros((nse, 0), index_dtype)
        idx = jnp.nonzero(m, size=nse, fill_value=sparse_shape)
        return jnp.stack(idx, axis=1).astype(index_dtype)

    indices = _nfold_vmap(nonzero, n_batch)(mask)
    data = _extract(indices, mat, n_batch)
    true_nse = mask.reshape(mask.shape[:n_batch] + (-1,)).sum(-1)[..., None]
    keep = lax.broadcasted_iota(true_nse.dtype, (1,) * n_batch + (nse,), n_batch) < true_nse
    keep = keep.reshape(keep.shape + (1,) * n_dense)
    data = jnp.where(keep, data, jnp.zeros((), data.dtype))
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


def _extract(indices, mat, n_batch):
    ns = indices.shape[-1]

    def one(idx, m):
        if ns == 0:
            return m[None]
        return m.at[tuple(idx[:, i] for i in range(ns))].get(mode="fill", fill_value=0)

    batch = np.broadcast_shapes(indices.shape[:n_batch], mat.shape[:n_batch])
    indices = jnp.broadcast_to(indices, batch + indices.shape[n_batch:])
    mat = jnp.broadcast_to(mat, batch + mat.shape[n_batch:])
    return _nfold_vmap(one, n_batch)(indices, mat)


@_jitted('assume_unique')
def bcoo_extract(sparr, arr, *, assume_unique=None):
    """Extract the entries of dense ``arr`` at the indices of ``sparr``.

    Returns a BCOO array with ``sparr``'s indices.  With ``assume_unique=False`` duplicate
    indices of ``sparr`` are summed first so that each value is extracted once.
    """
    _check_bcoo(sparr, "bcoo_extract")
    arr = jnp.asarray(arr)
    if arr.shape != sparr.shape:
        raise ValueError(f"bcoo_extract: sparr.shape={sparr.shape} and arr.shape={arr.shape} "
                         "must match")
    if assume_unique is None:
        assume_unique = sparr.unique_indices
    if not assume_unique:
        sparr = bcoo_sum_duplicates(sparr, nse=sparr.nse)
    data = _extract(sparr.indices, arr, sparr.n_batch)
    return BCOO((data, sparr.indices), shape=sparr.shape, indices_sorted=sparr.indices_sorted,
                unique_indices=sparr.unique_indices)


# ---------------------------------------------------------------------------------------
# layout

def _to_coo(mat):
    """(data (nse,), indices (nse, ndim)) of the flat layout, batch and dense dims sparse."""
    data, indices = _batch_bufs(mat)
    nb, nd = mat.n_batch, mat.n_dense
    batch = mat.shape[:nb]
    nse = mat.nse
    idt = indices.dtype
    if nb:
        grids = [lax.broadcasted_iota(idt, batch + (nse, 1), i) for i in range(nb)]
        indices = jnp.concatenate(grids + [indices], axis=-1)
    nbs = math.prod(batch)
    data = data.reshape((nbs * nse,) + data.shape[nb + 1:])
    indices = indices.reshape((nbs * nse, indices.shape[-1]))
    if nd:
        dense = mat.shape[mat.ndim - nd:]
        nden = math.prod(dense)
        dgrid = jnp.stack([g.ravel() for g in jnp.indices(dense, dtype=idt)], axis=1)
        n = data.shape[0]
        data = data.reshape((n * nden,))
        indices = jnp.concatenate([jnp.repeat(indices, nden, axis=0),
                                   jnp.tile(dgrid, (n, 1))], axis=1)
    return data, indices


def _coo(mat):
    data, indices = _to_coo(mat)
    return BCOO((data, indices), shape=mat.shape)


@_jitted('n_batch', 'n_dense', 'on_inefficient')
def bcoo_update_layout(mat, *, n_batch=None, n_dense=None, on_inefficient="error"):
    """Change the number of batch and dense dimensions of a BCOO array.

    Turning batch or dense dimensions into sparse ones is done on the stored entries;
    the other direction goes through the dense array and is refused with
    ``on_inefficient='error'`` (SparseEfficiencyError), warned of with ``'warn'``.
    """
    _check_bcoo(mat, "bcoo_update_layout")
    n_batch = mat.n_batch if n_batch is None else operator.index(n_batch)
    n_dense = mat.n_dense if n_dense is None else operator.index(n_dense)
    if not (0 <= n_batch <= mat.ndim and 0 <= n_dense <= mat.ndim - n_batch):
        raise ValueError(f"Invalid layout: shape={mat.shape}, {n_batch=}, {n_dense=}")
    if on_inefficient not in ("error", "warn", None):
        raise ValueError(f"on_inefficient={on_inefficient!r}; expected 'error', 'warn' or None")
    if (n_batch, n_dense) == (mat.n_batch, mat.n_dense):
        return mat
    if n_batch <= mat.n_batch and n_dense <= mat.n_dense:
        data, indices = _batch_bufs(mat)
        nb, nd = mat.n_batch, mat.n_dense
        if n_batch < nb:
            # Fold the batch dims from n_batch on into the entries.
            sub = _nfold_vmap(lambda d, i: _to_coo_partial(d, i, mat.shape[n_batch:], nb - n_batch),
                              n_batch)
            data, indices = sub(data, indices)
            nb = n_batch
        if n_dense < nd:
            shape = mat.shape[nb:]
            sub = _nfold_vmap(lambda d, i: _dense_to_sparse(d, i, shape, nd - n_dense), nb)
            data, indices = sub(data, indices)
        return BCOO((data, indices), shape=mat.shape, indices_sorted=False,
                    unique_indices=mat.unique_indices)
    msg = (f"bcoo_update_layout: going from n_batch={mat.n_batch}, n_dense={mat.n_dense} to "
           f"{n_batch=}, {n_dense=} needs the dense array")
    if on_inefficient == "error":
        raise SparseEfficiencyError(msg + "; pass on_inefficient=None or 'warn' to allow it.")
    if on_inefficient == "warn":
        import warnings
        warnings.warn(msg, SparseEfficiencyWarning)
    dense = bcoo_todense(mat)
    nse = _max_nse_for_layout(mat, n_batch, n_dense)
    return bcoo_fromdense(dense, nse=nse, n_batch=n_batch, n_dense=n_dense,
                          index_dtype=mat.indices.dtype)


def _max_nse_for_layout(mat, n_batch, n_dense):
    # A static bound (valid for traced arrays): the positions of one batch's sparse block,
    # capped by the number of stored scalars.
    n_sparse = mat.ndim - n_batch - n_dense
    positions = math.prod(mat.shape[n_batch:n_batch + n_sparse])
    stored = mat.nse * math.prod(mat.shape[:mat.n_batch]) * math.prod(
        mat.shape[mat.ndim - mat.n_dense:])
    return max(1, min(positions, stored)) if n_sparse else 1


def _to_coo_partial(data, indices, shape, k):
    """Fold the first k (batch) dims of an array of the given shape into its entries."""
    mat = BCOO((data, indices), shape=shape)
    nse = mat.nse
    batch = shape[:k]
    idt = indices.dtype
    grids = [lax.broadcasted_iota(idt, batch + (nse, 1), i) for i in range(k)]
    indices = jnp.concatenate(grids + [indices], axis=-1)
    nbs = math.prod(batch)
    return (data.reshape((nbs * nse,) + data.shape[k + 1:]),
            indices.reshape((nbs * nse, indices.shape[-1])))


def _dense_to_sparse(data, indices, shape, k):
    """Fold the first k dense dims of unbatched (data, indices) into the sparse indices."""
    dense = data.shape[1:1 + k]
    nden = math.prod(dense)
    n = data.shape[0]
    idt = indices.dtype
    dgrid = jnp.stack([g.ravel() for g in jnp.indices(dense, dtype=idt)], axis=1)
    data = data.reshape((n * nden,) + data.shape[1 + k:])
    indices = jnp.concatenate([jnp.repeat(indices, nden, axis=0), jnp.tile(dgrid, (n, 1))],
                              axis=1)
    del shape
    return data, indices


def _flat_index(indices, sparse_shape):
    """Row-major flat positions; out-of-bounds rows map to prod(sparse_shape)."""
    total = math.prod(sparse_shape)
    oob = jnp.zeros(indices.shape[:-1], bool)
    flat = jnp.zeros(indices.shape[:-1], jnp.int32)
    for i, n in enumerate(sparse_shape):
        col = indices[..., i].astype(jnp.int32)
        oob = oob | (col < 0) | (col >= n)
        flat = flat * n + col
    return jnp.where(oob, total, flat), total


def _unflat_index(flat, sparse_shape, dtype):
    total = math.prod(sparse_shape)
    cols = []
    rem = flat
    for n in reversed(sparse_shape):
        cols.append(rem % n)
        rem = rem // n
    cols = jnp.stack(cols[::-1], axis=-1) if cols else jnp.zeros(flat.shape + (0,), dtype)
    fill = jnp.array(sparse_shape, dtype) if sparse_shape else cols
    return jnp.where((flat >= total)[..., None], fill, cols).astype(dtype)


def bcoo_sum_duplicates(mat, nse=None):
    """Sum the entries with equal indices; the result's indices are sorted and unique.

    Parameters
    ----------
    mat : BCOO
    nse : int, optional
      Entries of the result; if None the number of distinct indices (needs concrete indices).
    """
    _check_bcoo(mat, "bcoo_sum_duplicates")
    nb, ns = mat.n_batch, mat.n_sparse
    sparse_shape = mat.shape[nb:nb + ns]
    data, indices = _batch_bufs(mat)
    if ns == 0:
        data = data.sum(nb, keepdims=True)
        return BCOO((data, indices[..., :1, :]), shape=mat.shape, indices_sorted=True,
                    unique_indices=True)
    flat, total = _flat_index(indices, sparse_shape)
    if nse is None:
        if isinstance(flat, core.Tracer):
            raise core.ConcretizationTypeError(
                flat, "bcoo_sum_duplicates: nse must be specified when indices are traced")
        f = np.asarray(flat).reshape(-1, mat.nse) if nb else np.asarray(flat)[None]
        nse = max([1] + [len(set(r[r < total].tolist())) for r in f])
    return _sum_duplicates(mat, nse=operator.index(nse))


@_jitted("nse")
def _sum_duplicates(mat, *, nse):
    nb, ns = mat.n_batch, mat.n_sparse
    sparse_shape = mat.shape[nb:nb + ns]
    data, indices = _batch_bufs(mat)
    flat, total = _flat_index(indices, sparse_shape)

    def one(d, fl):
        uniq, inv = jnp.unique(fl, size=nse, fill_value=total, return_inverse=True)
        out = jnp.zeros((nse,) + d.shape[1:], d.dtype).at[inv.reshape(-1)].add(d, mode="drop")
        return out, _unflat_index(uniq, sparse_shape, indices.dtype)

    data, indices = _nfold_vmap(one, nb)(data, flat)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


def bcoo_eliminate_zeros(mat, nse=None):
    """Drop explicitly stored zeros (and sum duplicates)."""
    _check_bcoo(mat, "bcoo_eliminate_zeros")
    nb, ns = mat.n_batch, mat.n_sparse
    data, indices = _batch_bufs(mat)
    zero = (data == 0).all(tuple(range(nb + 1, data.ndim)))
    fill = jnp.array(mat.shape[nb:nb + ns], indices.dtype)
    indices = jnp.where(zero[..., None], fill, indices)
    return bcoo_sum_duplicates(BCOO((data, indices), shape=mat.shape), nse=nse)


@_jitted()
def bcoo_sort_indices(mat):
    """Sort the entries of each batch by their (row-major) indices."""
    _check_bcoo(mat, "bcoo_sort_indices")
    nb, ns = mat.n_batch, mat.n_sparse
    if ns == 0:
        return mat
    data, indices = _batch_bufs(mat)
    flat, _ = _flat_index(indices, mat.shape[nb:nb + ns])

    def one(d, i, fl):
        perm = jnp.argsort(fl, stable=True)
        return d[perm], i[perm]

    data, indices = _nfold_vmap(one, nb)(data, indices, flat)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True,
                unique_indices=mat.unique_indices)


# ---------------------------------------------------------------------------------------
# structural operations

@_jitted('permutation')
def bcoo_transpose(mat, *, permutation):
    """Transpose; the permutation must map batch, sparse and dense dims within their group."""
    _check_bcoo(mat, "bcoo_transpose")
    permutation = tuple(operator.index(p) for p in permutation)
    if sorted(permutation) != list(range(mat.ndim)):
        raise ValueError(f"transpose permutation isn't a permutation of operand dimensions, got "
                         f"permutation {permutation} for shape {mat.shape}.")
    nb, ns = mat.n_batch, mat.n_sparse
    bp, sp, dp = permutation[:nb], permutation[nb:nb + ns], permutation[nb + ns:]
    if (tuple(sorted(bp)) != tuple(range(nb)) or
        tuple(sorted(sp)) != tuple(range(nb, nb + ns))):
        raise NotImplementedError(
            "bcoo_transpose: permutation must not mix batch, sparse and dense dimensions; got "
            f"{permutation} for n_batch={nb}, n_sparse={ns}. Use bcoo_update_layout first.")
    data = mat.data.transpose(bp + (nb,) + tuple(d + 1 - ns for d in dp))
    indices = mat.indices.transpose(bp + (nb, nb + 1))
    indices = indices[..., jnp.array([p - nb for p in sp], np.int32)] if ns else indices
    shape = tuple(mat.shape[p] for p in permutation)
    return BCOO((data, indices), shape=shape, indices_sorted=False,
                unique_indices=mat.unique_indices)


@_jitted('axes')
def bcoo_reduce_sum(mat, *, axes):
    """Sum over ``axes``; the result is a BCOO array."""
    _check_bcoo(mat, "bcoo_reduce_sum")
    axes = tuple(sorted({operator.index(a) % mat.ndim if mat.ndim else a for a in axes}))
    if any(a < 0 or a >= max(mat.ndim, 1) for a in axes) and mat.ndim:
        raise ValueError(f"bcoo_reduce_sum: axes {axes} out of range for shape {mat.shape}")
    if not axes:
        return mat
    # Dense-only or batch-free reductions keep the layout; otherwise work on flat COO.
    if all(a >= mat.n_batch + mat.n_sparse for a in axes):
        data = mat.data.sum(tuple(a - mat.n_sparse + 1 for a in axes))
        shape = tuple(d for i, d in enumerate(mat.shape) if i not in axes)
        return BCOO((data, mat.indices), shape=shape, indices_sorted=mat.indices_sorted,
                    unique_indices=mat.unique_indices)
    data, indices = _to_coo(mat)
    keep = [i for i in range(mat.ndim) if i not in axes]
    # Entries that were padding stay padding: keep them out of bounds in the result.
    pad = _is_padding(indices, mat.shape)
    shape = tuple(mat.shape[i] for i in keep)
    indices = indices[:, jnp.array(keep, np.int32)] if keep else indices[:, :0]
    indices = jnp.where(pad[:, None], jnp.array(shape, indices.dtype), indices) if keep else indices
    data = jnp.where(pad, jnp.zeros((), data.dtype), data)
    return BCOO((data, indices), shape=shape)


def _is_padding(indices, shape):
    if indices.shape[-1] == 0:
        return jnp.zeros(indices.shape[:-1], bool)
    bound = jnp.array(shape, indices.dtype)
    return ((indices >= bound) | (indices < 0)).any(-1)


@_jitted()
def bcoo_multiply_dense(sp_mat, v):
    """Elementwise product of a BCOO array and a dense array; returns the new ``data``."""
    _check_bcoo(sp_mat, "bcoo_multiply_dense")
    v = jnp.asarray(v)
    if v.ndim > sp_mat.ndim or np.broadcast_shapes(sp_mat.shape, v.shape) != sp_mat.shape:
        raise ValueError(f"bcoo_multiply_dense: cannot broadcast v.shape={v.shape} to "
                         f"sp_mat.shape={sp_mat.shape}")
    v = jnp.broadcast_to(v, sp_mat.shape)
    vals = _extract(sp_mat.indices, v, sp_mat.n_batch)
    return sp_mat.data * vals


@_jitted('shape', 'broadcast_dimensions', 'sharding')
def bcoo_broadcast_in_dim(mat, *, shape, broadcast_dimensions, sharding=None):
    """`lax.broadcast_in_dim` for a BCOO operand (the result has the flat COO layout)."""
    _check_bcoo(mat, "bcoo_broadcast_in_dim")
    del sharding
    shape = tuple(shape)
    bdims = tuple(broadcast_dimensions)
    if (len(bdims) != mat.ndim or len(set(bdims)) != len(bdims) or
        any(not 0 <= d < len(shape) for d in bdims) or list(bdims) != sorted(bdims) or
        any(mat.shape[i] not in (1, shape[d]) for i, d in enumerate(bdims))):
        raise TypeError(f"broadcast_in_dim: incompatible operand shape {mat.shape}, target "
                        f"shape {shape} and broadcast_dimensions {bdims}")
    data, indices = _to_coo(mat)
    pad = _is_padding(indices, mat.shape)
    nse = data.shape[0]
    # Dimensions that are new, or of size 1 broadcast to more, multiply the entries.
    new = [d for d in range(len(shape)) if d not in bdims or
           mat.shape[bdims.index(d)] != shape[d]]
    reps = math.prod(shape[d] for d in new)
    idt = indices.dtype
    cols = [None] * len(shape)
    for i, d in enumerate(bdims):
        cols[d] = jnp.repeat(indices[:, i], reps)
    if new:
        grid = jnp.indices(tuple(shape[d] for d in new), dtype=idt)
        for j, d in enumerate(new):
            cols[d] = jnp.tile(grid[j].ravel(), nse)
    out_idx = jnp.stack(cols, axis=1) if shape else jnp.zeros((nse * reps, 0), idt)
    pad = jnp.repeat(pad, reps)
    if shape:
        out_idx = jnp.where(pad[:, None], jnp.array(shape, idt), out_idx)
    return BCOO((jnp.repeat(data, reps), out_idx), shape=shape)


@_jitted('dimension')
def bcoo_concatenate(operands, *, dimension):
    """Concatenate BCOO arrays along ``dimension`` (the result has the flat COO layout)."""
    operands = list(operands)
    if not operands:
        raise ValueError("concatenate requires a non-empty sequence of operands")
    for op in operands:
        _check_bcoo(op, "bcoo_concatenate")
    ndim = operands[0].ndim
    dimension = operator.index(dimension)
    if not 0 <= dimension < ndim:
        raise ValueError(f"concatenate dimension out of bounds: dimension {dimension} for shapes "
                         f"{', '.join(str(o.shape) for o in operands)}")
    for op in operands:
        if op.ndim != ndim or any(a != b for i, (a, b) in enumerate(zip(op.shape, operands[0].shape))
                                  if i != dimension):
            raise TypeError("Cannot concatenate arrays with shapes that differ in dimensions other "
                            f"than the one being concatenated: {[o.shape for o in operands]}")
    dtype = jnp.result_type(*[o.dtype for o in operands])
    total = sum(o.shape[dimension] for o in operands)
    shape = tuple(total if i == dimension else d for i, d in enumerate(operands[0].shape))
    datas, idxs, offset = [], [], 0
    for op in operands:
        d, i = _to_coo(op)
        pad = _is_padding(i, op.shape)
        i = i.at[:, dimension].add(offset)
        i = jnp.where(pad[:, None], jnp.array(shape, i.dtype), i)
        datas.append(d.astype(dtype))
        idxs.append(i)
        offset += op.shape[dimension]
    return BCOO((jnp.concatenate(datas), jnp.concatenate(idxs)), shape=shape)


@_jitted('new_sizes', 'dimensions', 'sharding')
def bcoo_reshape(mat, *, new_sizes, dimensions=None, sharding=None):
    """`lax.reshape` for a BCOO operand (the result has the flat COO layout)."""
    _check_bcoo(mat, "bcoo_reshape")
    del sharding
    new_sizes = tuple(operator.index(d) for d in new_sizes)
    if math.prod(new_sizes) != mat.size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} for "
                        f"shape {mat.shape}.")
    if dimensions is not None:
        mat = _coo(mat)
        mat = bcoo_transpose(mat, permutation=tuple(dimensions))
    data, indices = _to_coo(mat)
    flat, _ = _flat_index(indices, mat.shape)
    out_idx = _unflat_index(flat, new_sizes, indices.dtype)
    return BCOO((data, out_idx), shape=new_sizes)


def bcoo_squeeze(arr, *, dimensions):
    """Remove size-1 ``dimensions``."""
    _check_bcoo(arr, "bcoo_squeeze")
    dims = {operator.index(d) % arr.ndim for d in dimensions}
    if any(arr.shape[d] != 1 for d in dims):
        raise ValueError(f"cannot select an axis to squeeze out which has size not equal to one, "
                         f"got shape={arr.shape} and dimensions={tuple(dimensions)}")
    return bcoo_reshape(arr, new_sizes=tuple(d for i, d in enumerate(arr.shape) if i not in dims))


@_jitted('start_indices', 'limit_indices', 'strides')
def bcoo_slice(mat, *, start_indices, limit_indices, strides=None):
    """`lax.slice` for a BCOO operand (the result has the flat COO layout)."""
    _check_bcoo(mat, "bcoo_slice")
    start = tuple(operator.index(s) for s in start_indices)
    limit = tuple(operator.index(s) for s in limit_indices)
    strides = (1,) * mat.ndim if strides is None else tuple(operator.index(s) for s in strides)
    if not (len(start) == len(limit) == len(strides) == mat.ndim):
        raise TypeError(f"slice start_indices {start}, limit_indices {limit} and strides "
                        f"{strides} must have length {mat.ndim} to match shape {mat.shape}")
    if any(s < 0 or s > l or l > d for s, l, d in zip(start, limit, mat.shape)):
        raise TypeError(f"slice start_indices {start} and limit_indices {limit} must satisfy "
                        f"0 <= start <= limit <= shape {mat.shape}")
    if any(st <= 0 for st in strides):
        raise TypeError(f"slice strides must be positive, got {strides}")
    shape = tuple((l - s + st - 1) // st for s, l, st in zip(start, limit, strides))
    data, indices = _to_coo(mat)
    idt = indices.dtype
    s_arr = jnp.array(start, idt)
    rel = indices - s_arr
    keep = ((rel >= 0) & (indices < jnp.array(limit, idt)) &
            (rel % jnp.array(strides, idt) == 0)).all(-1) if mat.ndim else jnp.ones(rel.shape[:1], bool)
    out = rel // jnp.array(strides, idt) if mat.ndim else rel
    if mat.ndim:
        out = jnp.where(keep[:, None], out, jnp.array(shape, idt))
    data = jnp.where(keep, data, jnp.zeros((), data.dtype))
    return BCOO((data, out), shape=shape)


# ---------------------------------------------------------------------------------------
# products

def _check_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(operator.index(d) for d in x) for x in (lc, rc, lb, rb))
    for dims, shape in ((lc + lb, lhs_shape), (rc + rb, rhs_shape)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < len(shape) for d in dims):
            raise TypeError(f"dot_general requires valid, distinct dimension numbers, got "
                            f"{dimension_numbers} for shapes {lhs_shape} and {rhs_shape}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError("dot_general requires equal numbers of lhs and rhs contracting and batch "
                        f"dimensions, got {dimension_numbers}")
    if any(lhs_shape[a] != rhs_shape[b] for a, b in zip(lc, rc)):
        raise TypeError("dot_general requires contracting dimensions to have the same shape, got "
                        f"{tuple(lhs_shape[a] for a in lc)} and {tuple(rhs_shape[b] for b in rc)}.")
    if any(lhs_shape[a] != rhs_shape[b] for a, b in zip(lb, rb)):
        raise TypeError("dot_general requires lhs batch dimensions and rhs batch dimensions to "
                        f"have the same shape, got {tuple(lhs_shape[a] for a in lb)} and "
                        f"{tuple(rhs_shape[b] for b in rb)}.")
    return (lc, rc), (lb, rb)


@_jitted('dimension_numbers')
def _sparse_dense_dot(lhs, rhs, dimension_numbers):
    """dot_general(BCOO lhs, dense rhs) as gather, multiply, scatter-add over the entries."""
    (lc, rc), (lb, rb) = dimension_numbers
    lf = tuple(d for d in range(lhs.ndim) if d not in lc + lb)
    rf = tuple(d for d in range(rhs.ndim) if d not in rc + rb)
    data, indices = _to_coo(lhs)
    dtype = jnp.result_type(data.dtype, rhs.dtype)
    rhs_t = rhs.transpose(rb + rc + rf)
    sel = tuple(indices[:, d] for d in lb + lc)
    gathered = rhs_t.at[sel].get(mode="fill", fill_value=0) if sel else jnp.broadcast_to(
        rhs_t, (data.shape[0],) + rhs_t.shape)
    prod = data.astype(dtype).reshape(data.shape + (1,) * len(rf)) * gathered.astype(dtype)
    out_shape = (tuple(lhs.shape[d] for d in lb) + tuple(lhs.shape[d] for d in lf) +
                 tuple(rhs.shape[d] for d in rf))
    pos = tuple(indices[:, d] for d in lb + lf)
    if not pos:
        return prod.sum(0)
    return jnp.zeros(out_shape, dtype).at[pos].add(prod, mode="drop")


def bcoo_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """`lax.dot_general` where one or both operands are BCOO arrays.

    Sparse-dense products return a dense array; sparse-sparse products a BCOO array.
    """
    del precision, out_sharding
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        return bcoo_spdot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                                  preferred_element_type=preferred_element_type)
    if isinstance(lhs, BCOO):
        rhs = jnp.asarray(rhs)
        dn = _check_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
        out = _sparse_dense_dot(lhs, rhs, dimension_numbers=dn)
    elif isinstance(rhs, BCOO):
        lhs = jnp.asarray(lhs)
        (lc, rc), (lb, rb) = _check_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
        out = _sparse_dense_dot(rhs, lhs, dimension_numbers=((rc, lc), (rb, lb)))
        nbatch = len(lb)
        n_sp_free = rhs.ndim - len(rc) - len(rb)
        n_de_free = lhs.ndim - len(lc) - len(lb)
        perm = (tuple(range(nbatch)) + tuple(range(nbatch + n_sp_free, nbatch + n_sp_free + n_de_free)) +
                tuple(range(nbatch, nbatch + n_sp_free)))
        out = out.transpose(perm)
    else:
        raise TypeError("bcoo_dot_general: one of the operands must be a BCOO array")
    if preferred_element_type is not None:
        out = out.astype(preferred_element_type)
    return out


@_jitted('dimension_numbers', 'preferred_element_type')
def bcoo_spdot_general(lhs, rhs, *, dimension_numbers, preferred_element_type=None):
    """`lax.dot_general` of two BCOO arrays; returns a BCOO array (flat COO layout) whose
    entries are all pairs of the operands' entries (``nse = lhs.nse * rhs.nse`` per batch)."""
    _check_bcoo(lhs, "bcoo_spdot_general")
    _check_bcoo(rhs, "bcoo_spdot_general")
    (lc, rc), (lb, rb) = _check_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    lf = tuple(d for d in range(lhs.ndim) if d not in lc + lb)
    rf = tuple(d for d in range(rhs.ndim) if d not in rc + rb)
    ld, li = _to_coo(lhs)
    rd, ri = _to_coo(rhs)
    dtype = jnp.result_type(ld.dtype, rd.dtype)
    idt = jnp.result_type(li.dtype, ri.dtype)
    nl, nr = ld.shape[0], rd.shape[0]
    lpad = _is_padding(li, lhs.shape)
    rpad = _is_padding(ri, rhs.shape)
    match = ~(lpad[:, None] | rpad[None, :])
    for a, b in zip(lb + lc, rb + rc):
        match = match & (li[:, a][:, None] == ri[:, b][None, :])
    vals = ld.astype(dtype)[:, None] * rd.astype(dtype)[None, :]
    vals = jnp.where(match, vals, jnp.zeros((), dtype)).reshape(nl * nr)
    cols = ([jnp.broadcast_to(li[:, d][:, None], (nl, nr)).astype(idt) for d in lb + lf] +
            [jnp.broadcast_to(ri[:, d][None, :], (nl, nr)).astype(idt) for d in rf])
    shape = (tuple(lhs.shape[d] for d in lb + lf) + tuple(rhs.shape[d] for d in rf))
    if cols:
        idx = jnp.stack(cols, axis=-1).reshape(nl * nr, len(cols))
        idx = jnp.where(match.reshape(-1)[:, None], idx, jnp.array(shape, idt))
    else:
        idx = jnp.zeros((nl * nr, 0), idt)
    if preferred_element_type is not None:
        vals = vals.astype(preferred_element_type)
    return BCOO((vals, idx), shape=shape)


def _matmul(a, b):
    a_sp, b_sp = isinstance(a, BCOO), isinstance(b, BCOO)
    if not a_sp:
        a = jnp.asarray(a)
    if not b_sp:
        b = jnp.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must not be scalars")
    if b.ndim > 2:
        if a.ndim != b.ndim:
            raise NotImplementedError("matmul of BCOO arrays with more than 2 dimensions needs "
                                      "operands of the same rank")
        nb = a.ndim - 2
        dn = (((a.ndim - 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
    else:
        dn = (((a.ndim - 1,), (0,)), ((), ()))  # b is a vector or a matrix
    if a.shape[dn[0][0][0]] != b.shape[dn[0][1][0]]:
        raise TypeError(f"matmul: contracting dimensions differ: {a.shape} @ {b.shape}")
    return bcoo_dot_general(a, b, dimension_numbers=dn)


# ---------------------------------------------------------------------------------------
# constructors

def _format(sparse_format, allowed):
    from fluxion._src.sparse import coo_csr
    from fluxion._src.sparse.bcsr import BCSR
    formats = {"bcoo": BCOO, "bcsr": BCSR, "coo": coo_csr.COO, "csr": coo_csr.CSR,
               "csc": coo_csr.CSC}
    if sparse_format not in allowed:
        raise ValueError(f"sparse_format={sparse_format!r} not recognized; must be one of "
                         f"{list(allowed)}")
    return formats[sparse_format]


def empty(shape, dtype=None, index_dtype="int32", sparse_format="bcoo", **kwds):
    """An all-zero sparse array with no stored entries, in the format `sparse_format`
    ('bcoo', 'bcsr', 'coo', 'csr' or 'csc')."""
    cls = _format(sparse_format, ("bcsr", "bcoo", "coo", "csr", "csc"))
    dtype = jnp.float32 if dtype is None else dtype
    if sparse_format == "bcsr":
        return cls.from_bcoo(BCOO._empty(tuple(shape), dtype=dtype, index_dtype=index_dtype,
                                         **kwds))
    return cls._empty(tuple(shape), dtype=dtype, index_dtype=index_dtype, **kwds)


def eye(N, M=None, k=0, dtype=None, index_dtype="int32", sparse_format="bcoo", **kwds):
    """A 2-D sparse array with ones on the ``k``-th diagonal, in the format `sparse_format`
    ('bcoo', 'coo', 'csr' or 'csc')."""
    cls = _format(sparse_format, ("bcoo", "coo", "csr", "csc"))
    dtype = jnp.float32 if dtype is None else dtype
    M = N if M is None else M
    N, M, k = operator.index(N), operator.index(M), operator.index(k)
    return cls._eye(N, M, k, dtype=dtype, index_dtype=index_dtype, **kwds)


def todense(arr):
    """Convert a sparse array to dense; dense input passes through (traced, as a `todense`
    equation, so that `sparsify` densifies the sparse value that reaches it)."""
    if isinstance(arr, BCOO):
        return bcoo_todense(arr)
    if isinstance(arr, JAXSparse):
        return arr.todense()
    if isinstance(arr, core.Tracer):
        return todense_p.bind(arr)
    return jnp.asarray(arr)


# The identity on dense arrays, marking where `sparsify` must densify (JAX's todense_p).
todense_p = _standard_primitive("todense", lambda x: x, lambda ctx, x: x)
_ad.deflinear(todense_p, lambda ct, x: [todense_p.bind(_ad.instantiate(ct))])
_batching.defvectorized(todense_p)


@_jitted()
def bcoo_concatenate_entries(x, y):
    """The sum of two BCOO arrays of one shape: their stored entries side by side."""
    if x.shape != y.shape:
        raise ValueError(f"bcoo add: shapes {x.shape} and {y.shape} differ")
    dtype = jnp.result_type(x.dtype, y.dtype)
    if (x.n_batch, x.n_dense) != (y.n_batch, y.n_dense):
        x, y = _coo(x), _coo(y)
    nb = x.n_batch
    xd, xi = _batch_bufs(x)
    yd, yi = _batch_bufs(y)
    idt = jnp.result_type(xi.dtype, yi.dtype)
    return BCOO((jnp.concatenate([xd.astype(dtype), yd.astype(dtype)], axis=nb),
                 jnp.concatenate([xi.astype(idt), yi.astype(idt)], axis=nb)), shape=x.shape)


def bcoo_multiply_sparse(lhs, rhs):
    """Elementwise product of two BCOO arrays of one shape (a BCOO array, flat COO layout)."""
    _check_bcoo(lhs, "bcoo_multiply_sparse")
    _check_bcoo(rhs, "bcoo_multiply_sparse")
    if lhs.shape != rhs.shape:
        raise ValueError(f"bcoo_multiply_sparse: shapes {lhs.shape} and {rhs.shape} differ")
    dims = tuple(range(lhs.ndim))
    return bcoo_spdot_general(lhs, rhs, dimension_numbers=(((), ()), (dims, dims)))


def bcoo_rev(operand, dimensions):
    """`lax.rev` for a BCOO operand (the result has the flat COO layout)."""
    _check_bcoo(operand, "bcoo_rev")
    dims = tuple(operator.index(d) for d in dimensions)
    if len(set(dims)) != len(dims) or any(not 0 <= d < operand.ndim for d in dims):
        raise ValueError(f"rev dimensions must be unique and in range, got {dims} for shape "
                         f"{operand.shape}")
    data, indices = _to_coo(operand)
    pad = _is_padding(indices, operand.shape)
    for d in dims:
        indices = indices.at[:, d].set(operand.shape[d] - 1 - indices[:, d])
    if operand.ndim:
        indices = jnp.where(pad[:, None], jnp.array(operand.shape, indices.dtype), indices)
    return BCOO((data, indices), shape=operand.shape)
