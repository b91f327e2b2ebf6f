"""One-sided collectives: psend and precv (XLA's Send and Recv over a named axis).

As in JAX 0.10.2 they only lower for GPUs: under pmap or shard_map on CPU the lowering raises
NotImplementedError, which is what JAX does. Both carry an effect, so an unused send is kept
(and reported) rather than removed as dead code.

Under `vmap(..., axis_name=n)` JAX batches psend like ppermute (it then returns the permuted
value, not a token, and needs a permutation of the whole axis) and fails on precv with a
TypeError; fluxion does the same.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import batching, core, effects
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray
from fluxion._src.lax import parallel
from fluxion._src.tokens import abstract_token

__all__ = ["psend", "precv", "psend_p", "precv_p"]


class SingleSideCollectiveEffect(effects.Effect):
    """One-sided communication (JAX's effect of the same name)."""

    def __repr__(self):
        return "one-sided communication"


single_side_collective_effect = SingleSideCollectiveEffect()


def _gpu_only(name):
    def rule(ctx, *args, **params):
        raise NotImplementedError(
            f"{name} is currently only implemented on GPU (XLA's {name[1:].capitalize()} between "
            f"devices); fluxion targets {ctx.platform!r} here")
    return rule


def _canonical_perm(perm) -> tuple:
    return tuple(tuple(int(i) for i in pair) for pair in perm)


def _canonical_names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (list, tuple)) else (axis_name,)


# ---------------------------------------------------------------------------------------------
# psend

def _psend_abstract_eval(x, *, axis_name, perm):
    parallel._total_size(axis_name)  # NameError for an unbound axis name
    return abstract_token


def _single_side_primitive(name, impl, abstract_eval) -> core.Primitive:
    """A one-sided collective: kept for its effect, lowered on GPUs only (as in JAX)."""
    prim = core.Primitive(name)
    prim.def_impl(impl)
    prim.def_abstract_eval(abstract_eval)
    effects.declare_effects(prim, lambda params: frozenset({single_side_collective_effect}))
    lowering.register_lowering(prim, _gpu_only(name))
    return prim


def _psend_impl(x, *, axis_name, perm):
    for n in axis_name:
        try:
            batching.axis_size(n)
        except NameError:
            raise NameError(f"Found an unbound axis name: {n}. To fix this, please call psend "
                            "under `shard_map`.") from None
    raise NotImplementedError("psend needs an enclosing shard_map or pmap binding its axis name")


psend_p = _single_side_primitive("psend", _psend_impl, _psend_abstract_eval)


def _psend_collective_rule(trace, vals, dims, *, axis_name, perm):
    if len(axis_name) != 1:
        raise NotImplementedError("psend under vmap over several axis names is not supported")
    size = trace.axis_size
    if sorted(s for s, _ in perm) != list(range(size)) or \
            sorted(d for _, d in perm) != list(range(size)):
        # JAX's batching rule asserts this too (AssertionError).
        raise AssertionError(f"psend under vmap needs a permutation of the whole axis "
                             f"{axis_name[0]!r} of size {size}, got perm={perm}")
    return parallel._ppermute_rule(trace, vals, dims, axis_name=axis_name[0], perm=perm)


batching.collective_rules[psend_p] = _psend_collective_rule
# vmap over another axis (inside shard_map): send the batched value; the token is not batched.
batching.primitive_batchers[psend_p] = lambda vals, dims, **params: (
    psend_p.bind(vals[0], **params), batching.not_mapped)


def psend(x, axis_name, perm):
    """Send `x` (a pytree) along the named axis as `perm`'s (source, destination) pairs say.

    Returns a token (one per leaf) that orders a matching `precv` after the send. Only GPU
    backends lower it; elsewhere it raises NotImplementedError, as in JAX.
    """
    from fluxion._src.tree_util import tree_map
    names, perm = _canonical_names(axis_name), _canonical_perm(perm)
    return tree_map(lambda leaf: psend_p.bind(leaf, axis_name=names, perm=perm), x)


# ---------------------------------------------------------------------------------------------
# precv

def _precv_abstract_eval(token, *, out_shape, axis_name, perm):
    return out_shape


def _precv_impl(token, *, out_shape, axis_name, perm):
    raise NotImplementedError("Evaluation rule for 'precv' not implemented: precv needs an "
                              "enclosing shard_map or pmap binding its axis name")


def _precv_batch_rule(*args, **params):
    raise TypeError("precv cannot be batched by vmap (JAX has no batching rule for it either)")


precv_p = _single_side_primitive("precv", _precv_impl, _precv_abstract_eval)
batching.collective_rules[precv_p] = _precv_batch_rule
batching.primitive_batchers[precv_p] = _precv_batch_rule


def precv(token, out_shape, axis_name, perm):
    """Receive an array of `out_shape` (shape and dtype) sent by a matching `psend`.

    `token` comes from that psend or from `lax.create_token()`. Only GPU backends lower it;
    elsewhere it raises NotImplementedError, as in JAX.
    """
    aval = ShapedArray(tuple(out_shape.shape), np.dtype(out_shape.dtype))
    return precv_p.bind(token, out_shape=aval, axis_name=_canonical_names(axis_name),
                        perm=_canonical_perm(perm))
