"""einsum: opt_einsum chooses the pairwise contraction order; each step is one
lax.dot_general, after diagonals (repeated indices) and sums of indices needed nowhere else."""
from __future__ import annotations

import collections

import numpy as np
import opt_einsum

from fluxion._src.export.shape_poly import DimExpr
from fluxion._src import core, dtypes
from fluxion._src.lax import lax
from fluxion._src.lax import structural as ls
from fluxion._src.numpy import ufuncs, util
from fluxion._src.numpy.creation import user_dtype
from fluxion._src.sharding_types import accepts_out_sharding


def _shape(x) -> tuple:
    return core.get_aval(x).shape


def _subscripts_from_interleaved(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [out_sublist]) as (subscripts, operands)."""
    operands, terms = list(args[0::2]), list(args[1::2])
    output = None
    if len(operands) > len(terms):
        output = operands.pop()

    def letters(sublist):
        return "".join("..." if s is Ellipsis else opt_einsum.get_symbol(int(s)) for s in sublist)

    subscripts = ",".join(letters(t) for t in terms)
    if output is not None:
        subscripts += "->" + letters(output)
    return subscripts, operands


def _contraction_path(optimize):
    if optimize is True:
        return "greedy"
    return optimize


@accepts_out_sharding
def einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None):
    """Einstein summation, e.g. einsum('ij,jk->ik', a, b); repeated indices in one operand
    take diagonals, '...' broadcasts. `optimize` is passed to opt_einsum (False contracts
    left to right)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.einsum is not supported.")
    if not isinstance(subscripts, str):
        subscripts, operands = _subscripts_from_interleaved((subscripts,) + operands)
    operands = list(util.ensure_arraylike("einsum", *operands)) if len(operands) > 1 else [
        util.ensure_arraylike("einsum", *operands)]
    dtype, weak = dtypes.result_type_with_weak(*operands)
    out_dtype = (user_dtype(preferred_element_type, "einsum")
                 if preferred_element_type is not None else dtype)
    if optimize is False:
        path = [(0, 1)] * (len(operands) - 1) if len(operands) > 1 else [(0,)]
    else:
        path = _contraction_path(optimize)
    # symbolic dimensions (shape polymorphism) count as 64 when choosing the order
    path_shapes = [tuple(64 if type(d) is DimExpr else d for d in _shape(x)) for x in operands]
    _, contractions = opt_einsum.contract_path(subscripts, *path_shapes,
                                               shapes=True, einsum_call=True, optimize=path)
    for positions, _, step, *_ in contractions:
        step_inputs, step_output = step.split("->")
        names = step_inputs.split(",")
        args = [operands.pop(i) for i in positions]
        if len(args) > 2:
            raise NotImplementedError(
                "jax.numpy.einsum does not support simultaneous contraction of 3 or more "
                "operands. Typically this means you've passed an unsupported path to the "
                "einsum optimize parameter.")
        if len(args) == 1:
            x, kept = _drop_unused(args[0], names[0], set(step_output), out_dtype)
            result = ls.transpose(x, tuple(kept.index(n) for n in step_output))
        else:
            result = _contract_pair(args[0], names[0], args[1], names[1], step_output,
                                    precision, out_dtype)
        operands.append(result)
    (result,) = operands
    weak = weak and preferred_element_type is None
    return lax._convert_element_type(result, out_dtype, weak)


def _diagonals(x, names: str):
    """Take diagonals until no index name repeats."""
    from fluxion._src.numpy.linalg_ops import diagonal
    counts = collections.Counter(names)
    for name, count in counts.items():
        for _ in range(count - 1):
            first = names.index(name)
            second = names.index(name, first + 1)
            x = diagonal(x, 0, first, second)
            names = names[:first] + names[first + 1:second] + names[second + 1:] + name
    return x, names


def _sum_axes(x, axes, out_dtype):
    """Sums over `axes`, in the result type where x's own is narrower (as JAX)."""
    if not axes:
        return x
    if dtypes.result_type(x, out_dtype) != core.get_aval(x).dtype:
        x = util.convert(x, out_dtype)
    if core.get_aval(x).dtype == dtypes.bool_:
        return lax.reduce_or(x, axes)
    return lax.reduce_sum(x, axes)


def _drop_unused(x, names: str, keep: set, out_dtype):
    """Diagonals, then sums over the indices not in `keep`; returns the result and its names."""
    x, names = _diagonals(x, names)
    x = _sum_axes(x, tuple(i for i, n in enumerate(names) if n not in keep), out_dtype)
    return x, "".join(n for n in names if n in keep)


def _squeeze_broadcast(x, names: str, other_shape: dict):
    """Drop size-1 axes whose index the other operand has with a larger size ('...' broadcast)."""
    shape = _shape(x)
    drop = tuple(i for i, n in enumerate(names)
                 if shape[i] == 1 and other_shape.get(n, 1) != 1)
    return ls.squeeze(x, drop), "".join(n for i, n in enumerate(names) if i not in drop)


def _contract_pair(lhs, lhs_names, rhs, rhs_names, out_names, precision, out_dtype):
    lhs_sizes = dict(zip(lhs_names, _shape(lhs)))
    rhs_sizes = dict(zip(rhs_names, _shape(rhs)))
    lhs, lhs_names = _squeeze_broadcast(lhs, lhs_names, rhs_sizes)
    rhs, rhs_names = _squeeze_broadcast(rhs, rhs_names, lhs_sizes)
    lhs, lhs_names = _drop_unused(lhs, lhs_names, set(rhs_names) | set(out_names), out_dtype)
    rhs, rhs_names = _drop_unused(rhs, rhs_names, set(lhs_names) | set(out_names), out_dtype)
    if not lhs_names or not rhs_names:
        product = ufuncs.multiply(lax.reshape(lhs, _shape(lhs) + (1,) * len(rhs_names)), rhs)
        product_names = lhs_names + rhs_names
    else:
        if (_dot_general_names(lhs_names, rhs_names, out_names) != out_names
                and _dot_general_names(rhs_names, lhs_names, out_names) == out_names):
            # Swapped operands give the output order directly: no transpose after the dot.
            lhs, lhs_names, rhs, rhs_names = rhs, rhs_names, lhs, lhs_names
        product_names = _dot_general_names(lhs_names, rhs_names, out_names)
        # Operands of different types go to dot_general as they are (as JAX: a dot
        # algorithm's operand types depend on them).
        shared = [n for n in lhs_names if n in rhs_names]
        batch = [n for n in shared if n in out_names]
        contracted = [n for n in shared if n not in out_names]
        dims = ((tuple(lhs_names.index(n) for n in contracted),
                 tuple(rhs_names.index(n) for n in contracted)),
                (tuple(lhs_names.index(n) for n in batch),
                 tuple(rhs_names.index(n) for n in batch)))
        product = lax.dot_general(lhs, rhs, dims, precision=precision,
                                  preferred_element_type=out_dtype)
    return ls.transpose(product, tuple(product_names.index(n) for n in out_names))


def _dot_general_names(lhs_names: str, rhs_names: str, out_names: str) -> str:
    """The index names of dot_general's result: batch, then lhs free, then rhs free."""
    shared = [n for n in lhs_names if n in rhs_names]
    batch = "".join(n for n in shared if n in out_names)
    return batch + "".join(n for n in lhs_names if n not in shared) + "".join(
        n for n in rhs_names if n not in shared)


def einsum_path(subscripts, /, *operands, optimize="greedy"):
    """The contraction order opt_einsum chooses, and its report."""
    shapes = [np.shape(x) for x in operands]
    return opt_einsum.contract_path(subscripts, *shapes, shapes=True,
                                    optimize=_contraction_path(optimize))
