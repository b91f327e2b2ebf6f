"""`linear_transpose`: the transpose of a function promised to be linear, without its forward
pass (the function is staged to a jaxpr and that jaxpr is run backwards)."""
from __future__ import annotations

from typing import Callable

from fluxion._src import ad, core, dtypes, staging
from fluxion._src.api import check_callable, fun_name
from fluxion._src.traceback_util import api_boundary
from fluxion._src.tree_util import Partial, tree_flatten, tree_unflatten


def _type_ok(aval, x) -> bool:
    """Whether cotangent `x` has `aval`'s shape and dtype (weak types aside), as JAX's typecheck."""
    try:
        xa = core.get_aval(x)
    except TypeError:
        return False
    return xa.shape == aval.shape and xa.dtype == aval.dtype


@api_boundary
def linear_transpose(fun: Callable, *primals, reduce_axes=()) -> Callable:
    """Transpose a function that is promised to be linear.

    Parameters
    ----------
    fun : the linear function to transpose.
    *primals : example arguments (arrays, scalars, ShapeDtypeStructs, pytrees of them); only
        their shapes and dtypes are used.

    Returns
    -------
    A pytree-callable ``f_transpose(cotangent)`` taking a value of the structure and types of
    ``fun(*primals)`` and returning a tuple with the structure and dtypes of `primals`.
    """
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to transpose is deprecated")
    check_callable(fun)
    name = fun_name(fun)
    leaves, in_tree = tree_flatten(primals)
    in_avals = [core.get_aval(x) for x in leaves]
    closed, out_tree = staging.trace_pytree_to_jaxpr(fun, in_tree, in_avals,
                                                     origin=f"linear_transpose({name})")
    out_avals = closed.out_avals
    in_dtypes = [a.dtype for a in in_avals]
    out_dtypes = [a.dtype for a in out_avals]
    all_dtypes = in_dtypes + out_dtypes
    if not (all(dtypes.is_inexact(d) for d in all_dtypes)
            or all(dtypes.is_integer(d) for d in all_dtypes)):
        raise TypeError("linear_transpose only supports [float or complex] -> [float or complex], "
                        "and integer -> integer functions, but got "
                        f"{in_dtypes} -> {out_dtypes}.")

    _check_linear(closed.jaxpr, name)

    @api_boundary
    def transposed_fun(consts, out_cotangent):
        cts, ct_tree = tree_flatten(out_cotangent)
        if ct_tree != out_tree:
            raise TypeError("cotangent tree does not match function output, "
                            f"expected {out_tree} but got {ct_tree}")
        if not all(_type_ok(a, ct) for a, ct in zip(out_avals, cts)):
            raise TypeError("cotangent type does not match function output, "
                            f"expected {tuple(out_avals)} but got {cts}")
        undefined = [ad.UndefinedPrimal(a) for a in in_avals]
        in_cts = ad.backward_pass(closed.jaxpr, consts, undefined, cts)
        in_cts = [_instantiate(ct, a) for ct, a in zip(in_cts, in_avals)]
        return tree_unflatten(in_tree, in_cts)

    return Partial(transposed_fun, list(closed.consts))


# Primitives that are linear in each input separately (not jointly): a product of two values
# that depend on the inputs is not linear.
_MULTILINEAR = {"mul", "dot_general", "conv_general_dilated"}


def _check_linear(jaxpr: core.Jaxpr, name: str) -> None:
    """Raise for a product of two input-dependent values or a division by one, which no transpose
    rule can handle (JAX fails there with an AssertionError)."""
    linear = {id(v) for v in jaxpr.invars}
    for eqn in jaxpr.eqns:
        is_lin = [type(v) is not core.Literal and id(v) in linear for v in eqn.invars]
        prim = eqn.primitive.name
        if (prim in _MULTILINEAR and sum(is_lin) > 1) or (prim == "div" and is_lin[1]):
            raise AssertionError(
                f"linear_transpose: {name} is not linear in its inputs: it applies '{prim}' to "
                "two values that depend on them" if prim != "div" else
                f"linear_transpose: {name} is not linear in its inputs: it divides by a value "
                "that depends on them")
        if any(is_lin):
            linear.update(id(v) for v in eqn.outvars)


def _instantiate(ct, aval):
    from fluxion._src.lax import lax
    if ct is None or type(ct) is ad.Zero:
        return lax.broadcast(lax._convert_element_type(0, aval.dtype, aval.weak_type), aval.shape)
    ct_aval = core.get_aval(ct)
    if dtypes.is_python_scalar(ct):  # a cotangent passed straight through: an array, as JAX
        return lax._convert_element_type(ct, aval.dtype, aval.weak_type)
    if ct_aval.dtype != aval.dtype:  # the outputs take exactly the primals' dtypes
        return lax._convert_element_type(ct, aval.dtype, ct_aval.weak_type)
    return ct
