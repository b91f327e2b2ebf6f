"""Transformations of closed jaxprs, used by call-like primitives (jit, control flow):
JVP of a jaxpr, partial evaluation of a jaxpr into known and unknown parts, transposition."""
from __future__ import annotations

import inspect
from typing import Sequence

from fluxion._src import ad, core, staging
from fluxion._src.core import ClosedJaxpr, Jaxpr


_memo: dict = {}



def positional_args(fun, args: tuple, kwargs: dict, decorator: str) -> tuple:
    """`args` and `kwargs` of a call of `fun` as positional arguments only (custom_vmap and
    custom_dce take no keywords), or JAX's TypeError naming the `decorator`."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
        if bound.kwargs:
            raise TypeError("The following keyword arguments could not be resolved to "
                            f"positions: {', '.join(bound.kwargs)}")
        return bound.args
    except TypeError as e:
        name = getattr(fun, "__name__", None) or type(fun).__name__
        raise TypeError(f"The input arguments to the {decorator}-decorated function {name} "
                        "could not be resolved to positional-only arguments. Binding failed "
                        f"with the error:\n{e}") from e

def memoized(transform):
    """Cache a jaxpr transformation on (the jaxpr's identity, the other arguments), so that
    repeated transformations of one jitted function reuse one jaxpr (and its executable)."""
    def wrapper(closed, *args):
        key = (transform.__name__, id(closed), _freeze(args))
        hit = _memo.get(key)
        if hit is not None and hit[0] is closed:
            return hit[1]
        result = transform(closed, *args)
        _memo[key] = (closed, result)
        return result
    wrapper.__name__ = transform.__name__
    wrapper.__doc__ = transform.__doc__
    return wrapper


def _freeze(x):
    if isinstance(x, (list, tuple)):
        return tuple(_freeze(v) for v in x)
    return x


def _trace(fun, avals, origin) -> ClosedJaxpr:
    return staging.trace_to_jaxpr(fun, list(avals), origin=origin)


def closure_convert(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Turn the consts of a closed jaxpr into leading invars; returns (jaxpr, consts)."""
    jaxpr = closed.jaxpr
    if not jaxpr.constvars:
        return closed, []
    converted = Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns,
                      jaxpr.effects, jaxpr.debug_info)
    return ClosedJaxpr(converted, []), list(closed.consts)


def trace_closure_converted(fun, in_tree, in_avals, origin: str):
    """`fun` (taking the pytree arguments `in_tree` describes) traced on `in_avals`:
    (jaxpr taking its captured constants first, those constants, out_tree)."""
    closed, out_tree = staging.trace_pytree_to_jaxpr(fun, in_tree, list(in_avals), origin)
    jaxpr, consts = closure_convert(closed)
    return jaxpr, consts, out_tree


@memoized
def jvp_jaxpr(closed: ClosedJaxpr, nonzero: Sequence[bool], instantiate: bool | Sequence[bool] = False):
    """A jaxpr taking (primals, tangents of the `nonzero` inputs) and returning (primal outs,
    tangents of the outputs whose tangent is not symbolically zero); plus that out mask."""
    in_avals = closed.in_avals
    tangent_avals = [ad.tangent_aval(a) for a, nz in zip(in_avals, nonzero) if nz]
    n = len(in_avals)
    out_mask: list[bool] = []
    n_out = len(closed.out_avals)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)

    def fun(*args):
        primals, nz_tangents = args[:n], iter(args[n:])
        tangents = [next(nz_tangents) if nz else ad.Zero(ad.tangent_aval(a))
                    for a, nz in zip(in_avals, nonzero)]
        outs_p, outs_t = ad.jvp_flat(lambda *xs: core.eval_jaxpr(closed.jaxpr, closed.consts, *xs),
                                     primals, tangents)
        outs_t = [ad.instantiate(t) if i else t for t, i in zip(outs_t, inst)]
        out_mask[:] = [type(t) is not ad.Zero for t in outs_t]
        return list(outs_p) + [t for t in outs_t if type(t) is not ad.Zero]

    jaxpr = _trace(fun, list(in_avals) + tangent_avals, "jvp_jaxpr")
    return jaxpr, out_mask


@memoized
def partial_eval_jaxpr(closed: ClosedJaxpr, unknown: Sequence[bool], instantiate=False):
    """Split a jaxpr by which inputs are unknown.

    Returns (known_jaxpr, unknown_jaxpr, out_unknown, num_residuals): known_jaxpr maps the
    known inputs to (known outputs, residuals); unknown_jaxpr maps (residuals, unknown inputs)
    to the unknown outputs.
    """
    in_avals = closed.in_avals
    n_out = len(closed.out_avals)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    box = {}

    def known_fun(*known_vals):
        pe = ad.PartialEvalTrace("partial_eval_jaxpr")
        try:
            known_iter = iter(known_vals)
            ins = [pe.new_arg(a) if u else next(known_iter) for a, u in zip(in_avals, unknown)]
            with core.set_current_trace(pe):
                outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *ins)
            # An instantiated known output is staged too: it becomes a residual passed through.
            out_unknown = [pe.is_unknown(o) or i for o, i in zip(outs, inst)]
            staged = pe.to_jaxpr([o for o, u in zip(outs, out_unknown) if u])
        finally:
            pe.is_live = False
        unknown_jaxpr, residuals = closure_convert(staged)
        box.update(unknown_jaxpr=unknown_jaxpr, out_unknown=out_unknown, n_res=len(residuals))
        return [o for o, u in zip(outs, out_unknown) if not u] + residuals

    known_avals = [a for a, u in zip(in_avals, unknown) if not u]
    known_jaxpr = _trace(known_fun, known_avals, "partial_eval_jaxpr")
    return known_jaxpr, box["unknown_jaxpr"], box["out_unknown"], box["n_res"]


@memoized
def transpose_jaxpr(closed: ClosedJaxpr, linear: Sequence[bool], ct_avals: Sequence):
    """A jaxpr mapping (non-linear inputs, output cotangents) to cotangents of the linear inputs."""
    in_avals = closed.in_avals
    nonlin_avals = [a for a, l in zip(in_avals, linear) if not l]
    n_nonlin = len(nonlin_avals)

    def fun(*args):
        nonlin, cts = iter(args[:n_nonlin]), list(args[n_nonlin:])
        linear_args = [ad.UndefinedPrimal(a) if l else next(nonlin) for a, l in zip(in_avals, linear)]
        cts_in = ad.backward_pass(closed.jaxpr, closed.consts, linear_args, cts)
        return [ad.instantiate(ct) for ct, l in zip(cts_in, linear) if l]

    return _trace(fun, nonlin_avals + list(ct_avals), "transpose_jaxpr")


@memoized
def batch_jaxpr(closed: ClosedJaxpr, in_dims: Sequence, axis_name, axis_size: int):
    """A jaxpr computing `closed` over a batch: inputs batched at dim 0 (or unbatched, where
    in_dims is None). Returns (jaxpr, out_batched): outputs are batched at 0 where marked."""
    from fluxion._src import batching
    in_avals = [a if d is None else a.update(shape=(axis_size,) + a.shape)
                for a, d in zip(closed.in_avals, in_dims)]
    out_batched: list[bool] = []

    def fun(*xs):
        outs, dims = batching.batch_flat(
            lambda *a: core.eval_jaxpr(closed.jaxpr, closed.consts, *a), xs,
            [None if d is None else 0 for d in in_dims], axis_name, axis_size)
        out_batched[:] = [d is not None for d in dims]
        return [o if d is None else batching.moveaxis(o, d, 0) for o, d in zip(outs, dims)]

    return _trace(fun, in_avals, "batch_jaxpr"), out_batched
