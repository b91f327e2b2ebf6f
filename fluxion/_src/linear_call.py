"""`linear_call`: call a linear function with a user-given transpose.

One primitive, `linear_call`, holds the function's jaxpr (`callee`) and a thunk staging the
transpose; its transpose is a `linear_call` of the transpose whose own transpose is the
function again.
"""
from __future__ import annotations

from typing import Callable

from fluxion._src import ad, batching, core, staging
from fluxion._src.api import fun_name
from fluxion._src.call_transforms import batch_jaxpr, trace_closure_converted
from fluxion._src.compiler import lowering
from fluxion._src.tree_util import tree_flatten, tree_unflatten

linear_call_p = core.Primitive("linear_call")
linear_call_p.multiple_results = True


class _Thunk:
    """Stages the transpose once, when first needed; an equation parameter."""

    def __init__(self, make):
        self.make = make
        self.result = None

    def __call__(self):
        if self.result is None:
            self.result = self.make()
        return self.result

    def __repr__(self):
        return "transpose_thunk"


def linear_call(fun: Callable, fun_transpose: Callable, residual_args, linear_args):
    """Call a linear function, with a custom implementation for its transpose.

    Parameters
    ----------
    fun : ``fun(residual_args, linear_args)``, linear in `linear_args`.
    fun_transpose : ``fun_transpose(residual_args, cotangent)``: the transpose of `fun` with
        respect to `linear_args`, returning values with their structure.
    residual_args : pytree of arguments `fun` need not be linear in (not transposed).
    linear_args : pytree of arguments `fun` is linear in.

    Returns
    -------
    ``fun(residual_args, linear_args)``; transposing it (`linear_transpose`, `vjp`, `grad`)
    calls `fun_transpose`.
    """
    res, res_tree = tree_flatten(residual_args)
    lin, lin_tree = tree_flatten(linear_args)
    res_avals = [core.get_aval(x) for x in res]
    lin_avals = [core.get_aval(x) for x in lin]
    f_in_tree = tree_flatten((residual_args, linear_args))[1]
    callee, f_consts, out_tree = trace_closure_converted(
        lambda r, a: fun(r, a), f_in_tree, res_avals + lin_avals, f"linear_call({fun_name(fun)})")
    out_avals = callee.out_avals

    def make_transpose():
        t_in_tree = tree_flatten((residual_args, tree_unflatten(out_tree, list(out_avals))))[1]
        t_jaxpr, t_consts, t_out_tree = trace_closure_converted(
            lambda r, ct: fun_transpose(r, ct), t_in_tree, res_avals + list(out_avals),
            f"linear_call transpose({fun_name(fun_transpose)})")
        if t_out_tree != lin_tree:
            raise TypeError("transpose output pytree structure must match that of linear "
                            f"inputs, got output structure {t_out_tree} and input structure "
                            f"{lin_tree}.")
        return t_jaxpr, t_consts

    outs = linear_call_p.bind(*f_consts, *res, *lin, callee=callee,
                              transpose_thunk=_Thunk(make_transpose),
                              num_callee_consts=len(f_consts), num_res=len(res))
    return tree_unflatten(out_tree, outs)


def _impl(*args, callee, transpose_thunk, num_callee_consts, num_res):
    return core.eval_jaxpr(callee.jaxpr, callee.consts, *args)


def _jvp(primals, tangents, *, callee, transpose_thunk, num_callee_consts, num_res):
    n = num_callee_consts + num_res
    params = dict(callee=callee, transpose_thunk=transpose_thunk,
                  num_callee_consts=num_callee_consts, num_res=num_res)
    if any(type(t) is not ad.Zero for t in tangents[:n]):
        raise AssertionError("linear_call is not differentiable with respect to its residual "
                             "arguments (or the values its function closes over).")
    out = linear_call_p.bind(*primals, **params)
    lin_t = tangents[n:]
    if all(type(t) is ad.Zero for t in lin_t):
        return out, [ad.Zero.from_primal_value(o) for o in out]
    out_t = linear_call_p.bind(*primals[:n], *[ad.instantiate(t) for t in lin_t], **params)
    return out, out_t


def _transpose(cts, *args, callee, transpose_thunk, num_callee_consts, num_res):
    transpose, t_consts = transpose_thunk()
    n = num_callee_consts + num_res
    res = args[num_callee_consts:n]
    if any(ad.is_undefined_primal(x) for x in args[:n]):
        raise AssertionError("linear_call can be transposed only with respect to its linear "
                             "arguments.")
    ct_avals = transpose.in_avals[len(t_consts) + num_res:]
    cts = [ad.zeros_like_aval(a) if type(ct) is ad.Zero else ct for ct, a in zip(cts, ct_avals)]
    f_consts = args[:num_callee_consts]
    cts_out = linear_call_p.bind(*t_consts, *res, *cts, callee=transpose,
                                 transpose_thunk=_Thunk(lambda: (callee, list(f_consts))),
                                 num_callee_consts=len(t_consts), num_res=num_res)
    return [None] * n + list(cts_out)


def _batch(args, dims, *, callee, transpose_thunk, num_callee_consts, num_res):
    """Batch the function and, lazily, its transpose. Every linear argument and output is
    batched (unbatched ones broadcast), so that the two stay transposes of one another."""
    size = next(core.get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    n = num_callee_consts + num_res
    args = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(args[:n], dims[:n])] + \
        [batching.bdim_at_front(x, d, size) for x, d in zip(args[n:], dims[n:])]
    in_dims = [None if d is None else 0 for d in dims[:n]] + [0] * (len(args) - n)
    callee_b = _all_outputs_batched(*batch_jaxpr(callee, in_dims, None, size), size)

    def make_transpose():
        transpose, t_consts = transpose_thunk()
        t_dims = [None] * len(t_consts) + in_dims[num_callee_consts:n] + [0] * len(callee.out_avals)
        return _all_outputs_batched(*batch_jaxpr(transpose, t_dims, None, size), size), t_consts

    outs = linear_call_p.bind(*args, callee=callee_b, transpose_thunk=_Thunk(make_transpose),
                              num_callee_consts=num_callee_consts, num_res=num_res)
    return outs, [0] * len(outs)


def _all_outputs_batched(closed, batched, size):
    """`closed` with its unbatched outputs broadcast along a leading batch dimension."""
    if all(batched):
        return closed

    def fun(*xs):
        outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *xs)
        return [o if b else batching.broadcast_batch(o, size, 0) for o, b in zip(outs, batched)]
    return staging.trace_to_jaxpr(fun, closed.in_avals, origin="linear_call batching")


linear_call_p.def_impl(_impl)
linear_call_p.def_abstract_eval(lambda *avals, callee, **_: callee.out_avals)
ad.primitive_jvps[linear_call_p] = _jvp
ad.primitive_transposes[linear_call_p] = _transpose
batching.primitive_batchers[linear_call_p] = _batch
lowering.register_lowering(linear_call_p,
                           lambda ctx, *args, callee, **_: ctx.lower_jaxpr(callee, args))
