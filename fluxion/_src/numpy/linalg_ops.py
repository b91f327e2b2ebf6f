"""Products and diagonals: dot, vdot, matmul, tensordot, inner, outer, kron, trace, diagonal.

Every product lowers to one lax.dot_general (plus transposes and reshapes), with the
promoted dtype as preferred_element_type, as in JAX.
"""
from __future__ import annotations

import operator

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.export import shape_poly
from fluxion._src.lax import lax
from fluxion._src.lax import structural as ls
from fluxion._src.numpy import ufuncs, util
from fluxion._src.numpy.creation import user_dtype
from fluxion._src.numpy.eager import eager_compiled
from fluxion._src.sharding_types import apply_out_sharding


def _shape(x) -> tuple:
    return core.get_aval(x).shape


def _ndim(x) -> int:
    return core.get_aval(x).ndim


def _promote_for_product(name, a, b, preferred_element_type):
    """The operands, the dot's output dtype (the promoted one unless preferred), and the
    result's weak type. As JAX, the operands keep their types: dot_general takes mixed ones
    (which matters with a dot algorithm, whose operand types depend on the input types)."""
    a, b = util.ensure_arraylike(name, a, b)
    dtype, weak = dtypes.result_type_with_weak(a, b)
    if preferred_element_type is not None:
        return a, b, user_dtype(preferred_element_type, name), False
    return a, b, dtype, weak


def _dot_general(a, b, contracting, batch, precision, out_dtype, weak):
    out = lax.dot_general(a, b, (contracting, batch), precision=precision,
                          preferred_element_type=out_dtype)
    return lax._convert_element_type(out, out_dtype, weak)


@eager_compiled(static_argnames=('precision', 'preferred_element_type'))
def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """NumPy's dot: contracts the last axis of a with the second-to-last axis of b (its only
    axis if b is 1-D); scalars multiply. `out_sharding` lays the result out."""
    if out_sharding is not None:  # (a keyword here, not a wrapper: jnp.dot is hot)
        return apply_out_sharding(lambda: dot(a, b, precision=precision,
                                              preferred_element_type=preferred_element_type),
                                  out_sharding)
    a, b, out_dtype, weak = _promote_for_product("dot", a, b, preferred_element_type)
    if _ndim(a) == 0 or _ndim(b) == 0:
        return lax._convert_element_type(ufuncs.multiply(a, b), out_dtype, weak)
    b_axis = 0 if _ndim(b) == 1 else _ndim(b) - 2
    return _dot_general(a, b, ((_ndim(a) - 1,), (b_axis,)), ((), ()), precision, out_dtype, weak)


@eager_compiled(static_argnames=('precision', 'preferred_element_type'))
def vdot(a, b, *, precision=None, preferred_element_type=None):
    """Dot product of the flattened arrays, conjugating the first."""
    from fluxion._src.numpy.manipulation import ravel
    a, b = util.ensure_arraylike("vdot", a, b)
    return dot(ravel(ufuncs.conj(a)), ravel(b), precision=precision,
               preferred_element_type=preferred_element_type)


def _matmul_plan(a_batch, b_batch):
    """How each broadcast batch position of matmul is computed.

    Returns (a_squeeze, b_squeeze, pairs, a_free, b_free): size-1 axes to drop from each
    operand, the positions that are dot_general batch dimensions (in both operands), and the
    positions that only one operand has (free dimensions of that operand)."""
    nb = max(len(a_batch), len(b_batch))
    a_pad, b_pad = nb - len(a_batch), nb - len(b_batch)
    a_squeeze, b_squeeze, pairs, a_free, b_free = [], [], [], [], []
    for i in range(nb):
        da = a_batch[i - a_pad] if i >= a_pad else None
        db = b_batch[i - b_pad] if i >= b_pad else None
        if da is None:
            b_free.append(i)
        elif db is None:
            a_free.append(i)
        elif da == db:
            pairs.append(i)
        elif da == 1:
            a_squeeze.append(i - a_pad)
            b_free.append(i)
        elif db == 1:
            b_squeeze.append(i - b_pad)
            a_free.append(i)
        else:
            return None
    return a_squeeze, b_squeeze, pairs, a_free, b_free


@eager_compiled(static_argnames=('precision', 'preferred_element_type'))
def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """Matrix product with broadcast batch dimensions; 1-D operands are vectors.
    `out_sharding` lays the result out."""
    if out_sharding is not None:
        return apply_out_sharding(
            lambda: matmul(a, b, precision=precision,
                           preferred_element_type=preferred_element_type), out_sharding)
    a, b, out_dtype, weak = _promote_for_product("matmul", a, b, preferred_element_type)
    a_shape, b_shape = _shape(a), _shape(b)
    for i, shape in enumerate((a_shape, b_shape)):
        if not shape:
            raise ValueError(f"matmul input operand {i} must have ndim at least 1, but it has "
                             f"ndim 0")
    if len(a_shape) <= 2 and len(b_shape) <= 2:  # no batch axes: one dot_general
        return _dot_general(a, b, ((len(a_shape) - 1,), (0,)), ((), ()), precision, out_dtype,
                            weak)
    a_vec, b_vec = len(a_shape) == 1, len(b_shape) == 1
    a_batch = a_shape[:-2]
    b_batch = b_shape[:-2]
    plan = _matmul_plan(a_batch, b_batch)
    if plan is None:
        raise ValueError(f"Incompatible shapes for matmul arguments: {_shape(a)} and {_shape(b)}")
    a_squeeze, b_squeeze, pairs, a_free, b_free = plan
    a = ls.squeeze(a, a_squeeze)
    b = ls.squeeze(b, b_squeeze)
    nb = max(len(a_batch), len(b_batch))
    a_pad, b_pad = nb - len(a_batch), nb - len(b_batch)
    # Batch positions kept by each operand, in order, give their axis numbers after squeezing.
    a_kept = [i for i in range(a_pad, nb) if i - a_pad not in a_squeeze]
    b_kept = [i for i in range(b_pad, nb) if i - b_pad not in b_squeeze]
    a_contract = _ndim(a) - 1
    b_contract = _ndim(b) - 1 if b_vec else _ndim(b) - 2
    batch = (tuple(a_kept.index(i) for i in pairs), tuple(b_kept.index(i) for i in pairs))
    out = _dot_general(a, b, ((a_contract,), (b_contract,)), batch, precision, out_dtype, weak)
    # dot_general's output: batch, a's free axes (batch positions, then rows), b's free axes.
    labels = pairs + a_free + ([] if a_vec else ["rows"]) + b_free + ([] if b_vec else ["cols"])
    wanted = list(range(nb)) + ([] if a_vec else ["rows"]) + ([] if b_vec else ["cols"])
    return ls.transpose(out, tuple(labels.index(t) for t in wanted))


@eager_compiled(static_argnames=('axes', 'precision', 'preferred_element_type'))
def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    """Contract `axes` of a with `axes` of b: an int N (last N of a, first N of b) or a pair
    of axis sequences."""
    a, b, out_dtype, weak = _promote_for_product("tensordot", a, b, preferred_element_type)
    na, nb = _ndim(a), _ndim(b)
    if isinstance(axes, (int,)) or hasattr(axes, "__index__") and not isinstance(axes, (list, tuple)):
        n = operator.index(axes)
        if n < 0:
            raise ValueError(f"tensordot requires axes to be a non-negative integer, got {n}")
        if n > min(na, nb):
            raise TypeError(f"Number of tensordot axes (axes {n}) exceeds input ranks (lhs "
                            f"{_shape(a)} and rhs {_shape(b)})")
        a_axes, b_axes = tuple(range(na - n, na)), tuple(range(n))
    else:
        try:
            a_axes, b_axes = axes
        except (TypeError, ValueError):
            raise TypeError(f"tensordot axes argument must be an int, a pair of ints, or a pair "
                            f"of lists/tuples of ints, got {axes!r}") from None
        if not all(isinstance(x, (int, np.integer, tuple, list)) for x in (a_axes, b_axes)):
            raise TypeError(f"tensordot requires both axes lists to be either ints, tuples or "
                            f"lists, got {a_axes} and {b_axes}")
        a_axes = (a_axes,) if isinstance(a_axes, (int, np.integer)) else tuple(a_axes)
        b_axes = (b_axes,) if isinstance(b_axes, (int, np.integer)) else tuple(b_axes)
        if len(a_axes) != len(b_axes):
            raise TypeError(f"tensordot requires axes lists to have equal length, got "
                            f"{list(a_axes)} and {list(b_axes)}.")
        a_axes = tuple(util.canonicalize_axis(i, na) for i in a_axes)
        b_axes = tuple(util.canonicalize_axis(i, nb) for i in b_axes)
    return _dot_general(a, b, (a_axes, b_axes), ((), ()), precision, out_dtype, weak)


@eager_compiled(static_argnames=('precision', 'preferred_element_type'))
def inner(a, b, *, precision=None, preferred_element_type=None):
    """Contract the last axes of a and b (scalars multiply)."""
    a, b, out_dtype, weak = _promote_for_product("inner", a, b, preferred_element_type)
    if _ndim(a) == 0 or _ndim(b) == 0:
        return lax._convert_element_type(ufuncs.multiply(a, b), out_dtype, weak)
    return _dot_general(a, b, ((_ndim(a) - 1,), (_ndim(b) - 1,)), ((), ()), precision,
                        out_dtype, weak)


@eager_compiled(static_argnames=('out',))
def outer(a, b, out=None):
    """outer(a, b)[i, j] = a.ravel()[i] * b.ravel()[j]."""
    from fluxion._src.numpy.manipulation import ravel
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.outer is not supported.")
    a, b = util.ensure_arraylike("outer", a, b)
    a, b = ravel(a), ravel(b)
    return ufuncs.multiply(lax.reshape(a, _shape(a) + (1,)), lax.reshape(b, (1,) + _shape(b)))


@eager_compiled(static_argnames=())
def kron(a, b):
    """Kronecker product: blocks a[i, j, ...] * b."""
    a, b = util.promote_dtypes(*util.ensure_arraylike("kron", a, b))
    nd = max(_ndim(a), _ndim(b))
    a = lax.reshape(a, (1,) * (nd - _ndim(a)) + _shape(a))
    b = lax.reshape(b, (1,) * (nd - _ndim(b)) + _shape(b))
    # a's axes take the even positions and b's the odd ones of the interleaved product.
    a_spread = lax.reshape(a, tuple(x for d in _shape(a) for x in (d, 1)))
    b_spread = lax.reshape(b, tuple(x for d in _shape(b) for x in (1, d)))
    product = lax.mul(*util.broadcast_arrays(a_spread, b_spread))
    return lax.reshape(product, tuple(da * db for da, db in zip(_shape(a), _shape(b))))


@eager_compiled(static_argnames=('offset', 'axis1', 'axis2'))
def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1):
    """The `offset` diagonal of the (axis1, axis2) planes, as the last axis of the result."""
    from fluxion._src.numpy.manipulation import moveaxis
    a = util.ensure_arraylike("diagonal", a)
    if _ndim(a) < 2:
        raise ValueError("diagonal requires an array of at least two dimensions.")
    offset = util.static_int(offset, "'offset' argument of jnp.diagonal")
    i, j = util.canonicalize_axis(axis1, _ndim(a)), util.canonicalize_axis(axis2, _ndim(a))
    if i == j:
        raise TypeError("diagonal: axis1 and axis2 must not be equal")
    a = moveaxis(a, (i, j), (-2, -1))
    *lead, rows, cols = _shape(a)
    if shape_poly.is_symbolic_shape((rows, cols)):
        return _symbolic_diagonal(a, offset, rows, cols)
    row_start = min(max(-offset, 0), rows)
    col_start = min(max(offset, 0), cols)
    length = max(0, min(rows - row_start, cols - col_start))
    square = ls.slice(a, (0,) * len(lead) + (row_start, col_start),
                      tuple(lead) + (row_start + length, col_start + length))
    # In a flattened L x L matrix, the diagonal is every (L + 1)-th element.
    flat = lax.reshape(square, tuple(lead) + (length * length,))
    return ls.slice_in_dim(flat, 0, length * length, length + 1, len(lead)) if length else flat


def _symbolic_diagonal(a, offset: int, rows, cols):
    """The diagonal of matrices of symbolic size (shape polymorphism): a gather at
    (i, i + offset) for i < its symbolic length, as JAX does."""
    from fluxion._src.numpy.creation import arange
    length = shape_poly.max_dim(0, shape_poly.min_dim(rows + min(offset, 0),
                                                      cols - max(offset, 0)))
    i = arange(length)
    j = i + abs(offset)
    return a[..., i, j] if offset >= 0 else a[..., j, i]


@eager_compiled(static_argnames=('offset', 'axis1', 'axis2', 'dtype', 'out'))
def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None, out=None):
    """Sum of the `offset` diagonal (dtype rules as for `sum`)."""
    from fluxion._src.numpy.reductions import sum as sum_
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.trace is not supported.")
    a = util.ensure_arraylike("trace", a)
    if _ndim(a) >= 2 and (util.canonicalize_axis(axis1, _ndim(a))
                          == util.canonicalize_axis(axis2, _ndim(a))):
        # JAX's class for trace (diagonal's is TypeError)
        raise ValueError(f"axis1 and axis2 can not be same. axis1={axis1} and axis2={axis2}")
    return sum_(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)
