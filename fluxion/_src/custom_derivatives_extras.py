"""Helpers of JAX's `custom_derivatives` module that custom rules use."""
from __future__ import annotations

from fluxion._src import ad, core
from fluxion._src.tree_util import tree_map


def zero_from_primal(val, symbolic_zeros: bool = False):
    """Zero tangents for the pytree `val`: symbolic zeros (`SymbolicZero`) with
    ``symbolic_zeros=True``, else arrays of zeros of each leaf's tangent type."""
    def zero(x):
        aval = ad.tangent_aval(core.get_aval(x))
        if symbolic_zeros:
            return ad.Zero(aval)
        if aval.weak_type:  # a Python scalar's zero tangent stays weakly typed
            from fluxion._src.lax import lax
            return lax.broadcast(lax._convert_element_type(0, aval.dtype, True), aval.shape)
        return ad.zeros_like_aval(aval)
    return tree_map(zero, val)
