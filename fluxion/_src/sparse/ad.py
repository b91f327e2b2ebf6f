"""Sparse-aware `grad` and `value_and_grad`: BCOO arguments are differentiated with respect
to their stored values, and their gradients come back as BCOO arrays with the same indices."""
import functools
import operator

from fluxion._src.ad_api import value_and_grad as _value_and_grad
from fluxion._src.sparse.bcoo import BCOO


def _split(fun, argnums, args):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    nums = tuple(operator.index(n) for n in nums)
    if any(not 0 <= n < len(args) for n in nums):
        raise ValueError(f"argnums {argnums} out of range for {len(args)} positional arguments")
    diff_args = [a.data if isinstance(a, BCOO) else a for a in args]

    def flat_fun(*xs, **kwargs):
        rebuilt = [BCOO((x, a.indices), shape=a.shape, indices_sorted=a.indices_sorted,
                        unique_indices=a.unique_indices) if isinstance(a, BCOO) else x
                   for x, a in zip(xs, args)]
        return fun(*rebuilt, **kwargs)

    def post(grads):
        single = isinstance(argnums, int)
        grads = (grads,) if single else grads
        out = tuple(BCOO((g, args[n].indices), shape=args[n].shape,
                         indices_sorted=args[n].indices_sorted,
                         unique_indices=args[n].unique_indices) if isinstance(args[n], BCOO) else g
                    for g, n in zip(grads, nums))
        return out[0] if single else out

    return flat_fun, diff_args, post


def value_and_grad(fun, argnums=0, has_aux=False, **kwargs):
    """`fluxion.value_and_grad` that differentiates BCOO arguments through their ``data``."""

    @functools.wraps(fun)
    def wrapped(*args, **kw):
        flat_fun, diff_args, post = _split(fun, argnums, args)
        out = _value_and_grad(flat_fun, argnums, has_aux=has_aux, **kwargs)(*diff_args, **kw)
        (value, g) = out
        return value, post(g)

    return wrapped


def grad(fun, argnums=0, has_aux=False, **kwargs):
    """`fluxion.grad` that differentiates BCOO arguments through their ``data``."""
    vg = value_and_grad(fun, argnums, has_aux=has_aux, **kwargs)

    @functools.wraps(fun)
    def wrapped(*args, **kw):
        value, g = vg(*args, **kw)
        return (g, value[1]) if has_aux else g

    return wrapped
