"""stop_gradient: the identity whose derivative is zero."""
from __future__ import annotations

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.lax.base import standard_primitive

__all__ = ["stop_gradient"]

stop_gradient_p = standard_primitive("stop_gradient", lambda x: x, lambda ctx, x: x)
ad.defjvp_zero(stop_gradient_p)
batching.defvectorized(stop_gradient_p)


def stop_gradient(x):
    """The identity on a pytree of arrays, with zero derivative: values pass, gradients don't."""
    from fluxion._src.tree_util import tree_map

    def stop(leaf):
        if not isinstance(leaf, core.Tracer):
            if not core.valid_jaxtype(leaf):  # JAX's error for a string or other object
                raise TypeError(f"Argument '{leaf}' of type {type(leaf)} is not a valid JAX "
                                "type")
            return leaf
        if dtypes.issubdtype(leaf.dtype, dtypes.extended):  # PRNG keys pass as they are
            return leaf
        # Integer tracers too: a JVP tracer is peeled to its primal, so that every leaf comes
        # back the same kind of value (JAX issue 33689).
        return stop_gradient_p.bind(leaf)
    return tree_map(stop, x)
