"""Sparse-aware `grad`, `value_and_grad`, `jacfwd` and `jacrev`: a sparse argument (BCOO,
BCSR, COO, CSR, CSC, also nested in a pytree) is differentiated with respect to its stored
values, and its derivative comes back as a sparse array of the same layout whose values are
the derivatives (with the output's dimensions in front, for Jacobians)."""
import functools
import operator

from fluxion._src import ad_api
from fluxion._src.sparse.bcoo import JAXSparse
from fluxion._src.tree_util import tree_flatten, tree_leaves, tree_unflatten
from fluxion._src.vmap import vmap


def _is_sparse(x) -> bool:
    return isinstance(x, JAXSparse)


def _on_values(fun, argnums, args):
    """`fun` as a function of flat leaves in which each sparse array is its values alone.

    Returns (flat function, its argnums, its arguments, rebuild) where rebuild turns the
    derivatives of the flat function back into the arguments' structure."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    nums = tuple(operator.index(n) for n in nums)
    if any(not 0 <= n < len(args) for n in nums):
        raise ValueError(f"argnums {argnums} out of range for {len(args)} positional arguments")
    # Level 1: the arguments' leaves, sparse arrays kept whole.
    outer, outer_tree = tree_flatten(args, is_leaf=_is_sparse)
    per_arg = [len(tree_leaves(a, is_leaf=_is_sparse)) for a in args]
    arg_of = [i for i, n in enumerate(per_arg) for _ in range(n)]
    # Level 2: every buffer; a sparse leaf's first buffer is its values.
    flat, owners = [], []
    for j, leaf in enumerate(outer):
        bufs = tree_flatten(leaf)[0] if _is_sparse(leaf) else [leaf]
        owners.extend([j] * len(bufs))
        flat.extend(bufs)
    first_buffer = {}
    for k, j in enumerate(owners):
        first_buffer.setdefault(j, k)
    wanted = [j for j, i in enumerate(arg_of) if i in nums]
    flat_nums = tuple(first_buffer[j] for j in wanted)

    def flat_fun(*xs, **kwargs):
        leaves, k = [], 0
        for leaf in outer:
            if _is_sparse(leaf):
                bufs, tree = tree_flatten(leaf)
                leaves.append(tree_unflatten(tree, list(xs[k:k + len(bufs)])))
                k += len(bufs)
            else:
                leaves.append(xs[k])
                k += 1
        return fun(*tree_unflatten(outer_tree, leaves), **kwargs)

    def rebuild_leaf(j, derivative):
        leaf = outer[j]
        if not _is_sparse(leaf):
            return derivative
        bufs, tree = tree_flatten(leaf)
        make = lambda values: tree_unflatten(tree, [values, *bufs[1:]])  # noqa: E731
        for _ in range(derivative.ndim - bufs[0].ndim):  # the output's dimensions
            make = vmap(make)
        return make(derivative)

    def rebuild(derivatives):
        derivatives = (derivatives,) if len(flat_nums) == 1 else derivatives
        by_leaf = [None] * len(outer)
        for j, d in zip(wanted, derivatives):
            by_leaf[j] = rebuild_leaf(j, d)
        per_argument = tree_unflatten(outer_tree, by_leaf)
        picked = tuple(per_argument[n] for n in nums)
        return picked[0] if single else picked

    return flat_fun, (flat_nums[0] if single and len(flat_nums) == 1 else flat_nums), flat, \
        rebuild


def _sparse_version(transform, name):
    def make(fun, argnums=0, has_aux=False, **kwargs):
        @functools.wraps(fun)
        def wrapped(*args, **kw):
            flat_fun, flat_nums, flat, rebuild = _on_values(fun, argnums, args)
            out = transform(flat_fun, flat_nums, has_aux=has_aux, **kwargs)(*flat, **kw)
            if has_aux:
                return rebuild(out[0]), out[1]
            return rebuild(out)
        return wrapped
    make.__name__ = name
    make.__doc__ = (f"`fluxion.{name}` that differentiates sparse arguments (also nested in "
                    "pytrees) with respect to their stored values; their derivatives come "
                    "back in their sparse layout.")
    return make


grad = _sparse_version(ad_api.grad, "grad")
jacfwd = _sparse_version(ad_api.jacfwd, "jacfwd")
jacrev = _sparse_version(ad_api.jacrev, "jacrev")
jacobian = jacrev


def value_and_grad(fun, argnums=0, has_aux=False, **kwargs):
    """`fluxion.value_and_grad` that differentiates sparse arguments (also nested in pytrees)
    with respect to their stored values; their gradients come back in their sparse layout."""

    @functools.wraps(fun)
    def wrapped(*args, **kw):
        flat_fun, flat_nums, flat, rebuild = _on_values(fun, argnums, args)
        value, derivatives = ad_api.value_and_grad(flat_fun, flat_nums, has_aux=has_aux,
                                                   **kwargs)(*flat, **kw)
        return value, rebuild(derivatives)

    return wrapped
