"""Primitives whose meaning is a short program of other lax operations.

JAX 0.10.2 gives some compound operations their own primitives (`stack`, `unstack`, `tile`,
`split`), so they appear as one equation in a jaxpr. Here each such primitive takes every rule
from its implementation function: abstract evaluation and lowering trace it, vmap maps it,
and, for the linear ones, the JVP applies the primitive to the tangents and the transpose is
the VJP of the implementation.
"""
from __future__ import annotations

from typing import Callable

from fluxion._src import ad, batching, core, staging
from fluxion._src.compiler import lowering
from fluxion._src.lax.base import standard_primitive


def _flat(impl: Callable, multiple_results: bool, params: dict) -> Callable:
    def flat(*xs):
        out = impl(*xs, **params)
        return list(out) if multiple_results else [out]
    return flat


def derived_primitive(name: str, impl: Callable, *, multiple_results: bool = False,
                      linear: bool = False) -> core.Primitive:
    """A primitive defined by `impl(*operands, **params)` written with lax operations."""

    def abstract_eval(*avals, **params):
        closed = staging.trace_to_jaxpr(_flat(impl, multiple_results, params), avals)
        outs = [v.aval for v in closed.jaxpr.outvars]
        return outs if multiple_results else outs[0]

    prim = standard_primitive(name, abstract_eval, multiple_results=multiple_results)
    lowering.register_lowering(prim, lowering.lower_fun(impl, multiple_results=multiple_results))

    def batch_via_impl(args, dims, **params):
        from fluxion._src.vmap import vmap
        in_axes = tuple(None if d is batching.not_mapped else d for d in dims)
        outs = vmap(lambda *xs: impl(*xs, **params), in_axes=in_axes, out_axes=0)(*args)
        return (list(outs), [0] * len(outs)) if multiple_results else (outs, 0)

    batching.primitive_batchers[prim] = batch_via_impl

    if linear:
        def transpose(cts, *args, **params):
            from fluxion._src.ad_api import vjp
            avals = [a.aval if ad.is_undefined_primal(a) else core.get_aval(a) for a in args]
            zeros = [ad.instantiate(ad.zeros_like_aval(a)) for a in avals]
            cts = cts if multiple_results else [cts]
            cts = [ad.instantiate(c) for c in cts]
            _, pull = vjp(lambda *xs: _flat(impl, multiple_results, params)(*xs), *zeros)
            return list(pull(cts))
        ad.deflinear(prim, transpose)
    return prim
