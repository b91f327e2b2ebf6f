"""Public differentiation API: jvp, linearize, vjp, grad, value_and_grad."""
from __future__ import annotations

import functools
import sys
from typing import Callable

import numpy as np

from fluxion._src import ad, core, dtypes, machinery_ops, sharding_types, source_info, vjp_function
from fluxion._src.ad import Zero
from fluxion._src.api import check_callable, fun_name
from fluxion._src.traceback_util import api_boundary
from fluxion._src.vjp_function import VJP
from fluxion._src.tree_util import tree_flatten, tree_map, tree_structure, tree_unflatten


def _check_jax_leaves(leaves, what: str, name: str) -> None:
    for x in leaves:
        if not isinstance(x, core.Tracer) and not core.valid_jaxtype(x):
            raise TypeError(f"{what} of {name}: {x!r} of type {type(x)} is not a valid JAX "
                            "type; use arrays, scalars or pytrees of them.")


def _flat_fun(fun, in_tree, out_tree_box, has_aux=False, name="fun"):
    def flat(*leaves):
        args = tree_unflatten(in_tree, leaves)
        out = fun(*args)
        aux = None
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"{name} was called with has_aux=True, so it must return a pair "
                                f"(output, auxiliary data): expected function with aux output "
                                f"to return a two-element tuple, but got type {type(out)} with "
                                f"value {out!r}")
            out, aux = out
            trace = core.current_trace()
            if isinstance(trace, ad.JVPTrace):  # aux is not differentiated: keep its primals
                aux = tree_map(lambda x: trace.primal_tangent(x)[0], aux)
        out_leaves, out_tree = tree_flatten(out)
        _check_jax_leaves(out_leaves, "the output", name)
        out_tree_box.append((out_tree, aux))
        return out_leaves
    flat.__name__ = name
    return flat


def _tangent_dtype_error(p, t):
    pd = core.get_aval(p).dtype
    expected = ad.tangent_aval(core.get_aval(p)).dtype
    return TypeError(
        "primal and tangent arguments to jvp do not match; dtypes must be equal, or in case of "
        f"int/bool primal dtype the tangent dtype must be float0. Got primal dtype {pd} and so "
        f"expected tangent dtype {expected}, but got tangent dtype {core.get_aval(t).dtype} instead.")


@api_boundary
def jvp(fun: Callable, primals, tangents, has_aux: bool = False):
    """Forward-mode Jacobian-vector product.

    Returns ``(fun(*primals), J @ tangents)`` (plus the auxiliary data with ``has_aux``).
    `primals` and `tangents` are tuples of matching pytrees.
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to jvp must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}.")
    p_leaves, in_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if in_tree != t_tree:
        raise TypeError(f"primal and tangent arguments to jvp must have the same tree structure; "
                        f"primals have tree structure {in_tree} whereas tangents have tree "
                        f"structure {t_tree}.")
    check_callable(fun)
    name = fun_name(fun)
    _check_jax_leaves(p_leaves, "a primal argument", name)
    tangents_in = []
    for p, t in zip(p_leaves, t_leaves):
        pa, ta = core.get_aval(p), core.get_aval(t)
        if pa.shape != ta.shape:
            raise ValueError(f"jvp called with different primal and tangent shapes; got primal "
                             f"shape {pa.shape} and tangent shape as {ta.shape}")
        if ad.tangent_aval(pa).dtype != ta.dtype:
            raise _tangent_dtype_error(p, t)
        tangents_in.append(Zero(ad.tangent_aval(pa)) if ta.dtype == dtypes.float0 else t)
    box = []
    out_p, out_t = ad.jvp_flat(_flat_fun(fun, in_tree, box, has_aux, name), p_leaves, tangents_in)
    out_tree, aux = box[0]
    out_t = [_array_like_primal(ad.instantiate(t), p) for t, p in zip(out_t, out_p)]
    result = (tree_unflatten(out_tree, out_p), tree_unflatten(out_tree, out_t))
    return result + (aux,) if has_aux else result


def _array_like_primal(t, p):
    """A Python-scalar input tangent passed through (`x + 1.5`) as an array where its primal
    output is one, as JAX gives it (its jnp functions are jitted)."""
    if dtypes.is_python_scalar(t) and not dtypes.is_python_scalar(p):
        from fluxion._src.lax import lax
        aval = core.get_aval(p)
        return lax._convert_element_type(t, aval.dtype, aval.weak_type)
    return t


@api_boundary
def linearize(fun: Callable, *primals, has_aux: bool = False):
    """Returns ``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the JVP at
    `primals` using the linearization computed once."""
    p_leaves, in_tree = tree_flatten(primals)
    check_callable(fun)
    name = fun_name(fun)
    _check_jax_leaves(p_leaves, "a primal argument", name)
    box = []
    out_p, linear, _ = ad.linearize_flat(_flat_fun(fun, in_tree, box, has_aux, name), p_leaves)
    out_tree, aux = box[0]
    in_avals = [ad.tangent_aval(core.get_aval(p)) for p in p_leaves]

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_flatten(tangents)
        if t_tree != in_tree:
            raise TypeError(f"linearized function called with tangent structure {t_tree}, "
                            f"expected {in_tree}")
        for t, p, a in zip(t_leaves, p_leaves, in_avals):
            ta = core.get_aval(t)
            if ta.shape != a.shape or ta.dtype != a.dtype:  # JAX's class and message
                raise ValueError(
                    "linearized function called on tangent values inconsistent with the "
                    f"original primal values:\nGot tangent aval {_long(ta)} for primal aval "
                    f"{_long(core.get_aval(p))} but expected {_long(a)}.")
        outs = core.eval_jaxpr(linear.jaxpr, linear.consts, *t_leaves)
        return tree_unflatten(out_tree, outs)

    out = tree_unflatten(out_tree, out_p)
    return (out, f_jvp, aux) if has_aux else (out, f_jvp)


def _long(aval) -> str:
    """An aval as JAX writes it in messages: ~float32[2] (~ for a weak type)."""
    shape = ",".join(map(str, aval.shape))
    return f"{'~' if aval.weak_type else ''}{aval.dtype.name}[{shape}]"


def _vjp_flat(flat_fun, p_leaves):
    with source_info.extend_name_stack(f"jvp({getattr(flat_fun, '__name__', 'fun')})"):
        out_p, linear, _ = ad.linearize_flat(flat_fun, p_leaves, origin="vjp")
    undefined = [ad.UndefinedPrimal(ad.tangent_aval(core.get_aval(p))) for p in p_leaves]

    # Primals on Explicit mesh axes: their cotangents take their shardings, as in JAX (global
    # Arrays eagerly; traced ones when the mesh in effect has Explicit axes)
    global_array = sys.modules.get("fluxion._src.global_array")
    sharded = global_array is not None and any(type(p) is global_array.GlobalArray
                                               for p in p_leaves)
    traced = sharded or (global_array is not None and sharding_types.has_explicit_axes(
        sharding_types.current_abstract_mesh()) and any(isinstance(p, core.Tracer)
                                                        for p in p_leaves))

    def backward(cts_out):
        cts = ad.backward_pass(linear.jaxpr, linear.consts, undefined, cts_out)
        # A cotangent's weak type is what the transposed rules made it, as in JAX (a complex
        # input's gradient through real/imag is strong even where the input is weak).
        cts = [ad.instantiate(ct) for ct in cts]
        if sharded:
            cts = sharding_types.cotangents_like_primals(cts, p_leaves)
        if traced:
            from fluxion._src.sharded_jit import sharding_like
            cts = [sharding_like(ct, p) if isinstance(p, core.Tracer) and
                   core.get_aval(ct).shape == core.get_aval(p).shape else ct
                   for ct, p in zip(cts, p_leaves)]
        return cts
    return out_p, backward


@api_boundary
def vjp(fun: Callable, *primals, has_aux: bool = False, reduce_axes=()):
    """Reverse-mode vector-Jacobian product.

    Returns ``(fun(*primals), vjp_fun)`` where ``vjp_fun(cotangent)`` returns a tuple of
    cotangents, one per primal, with the primals' structure.
    """
    if reduce_axes:  # as JAX
        raise NotImplementedError("reduce_axes argument to vjp is deprecated")
    p_leaves, in_tree = tree_flatten(primals)
    check_callable(fun)
    name = fun_name(fun)
    _check_jax_leaves(p_leaves, "a primal argument", name)
    box = []
    flat = _flat_fun(fun, in_tree, box, has_aux, name)
    with source_info.extend_name_stack(f"jvp({name})"):
        out_p, linear, _ = ad.linearize_flat(flat, p_leaves, origin="vjp")
    out_tree, aux = box[0]
    in_avals = [ad.tangent_aval(core.get_aval(p)) for p in p_leaves]
    out_avals = [core.get_aval(o) for o in out_p]
    vjp_fun = VJP(list(linear.consts),
                  vjp_function._Static(linear.jaxpr, in_tree, out_tree, in_avals, out_avals, name))
    out = tree_unflatten(out_tree, out_p)
    return (out, vjp_fun, aux) if has_aux else (out, vjp_fun)


def _check_input_dtype(x, holomorphic: bool, allow_int: bool, api: str = "grad") -> None:
    """JAX's TypeError for an input `api` (grad, jacrev, jacfwd) cannot differentiate."""
    dt = core.get_aval(x).dtype
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{api} with holomorphic=True requires inputs with complex dtype, "
                            f"but got {dt.name}.")
    elif api == "jacfwd":
        if not dtypes.is_float(dt):
            raise TypeError(
                f"jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
                f"np.floating), but got {dt.name}. For holomorphic differentiation, pass "
                "holomorphic=True. For differentiation of non-holomorphic functions involving "
                "complex inputs or integer inputs, use jax.jvp directly.")
    elif not (dtypes.is_inexact(dt) or allow_int and (dtypes.is_integer(dt) or dt == dtypes.bool_)):
        raise TypeError(f"{api} requires real- or complex-valued inputs (input dtype that is a "
                        f"sub-dtype of np.inexact), but got {dt.name}. If you want to use "
                        "Boolean- or integer-valued inputs, use vjp or set allow_int to True.")


def _check_output_dtype(dt, holomorphic: bool, api: str, forward: bool = False) -> None:
    """JAX's checks of a differentiated output (forward mode only checks holomorphic ones)."""
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{api} with holomorphic=True requires outputs with complex dtype, "
                            f"but got {dt.name}.")
    elif forward:
        return
    elif dtypes.is_complex(dt):
        raise TypeError(f"{api} requires real-valued outputs (output dtype that is a sub-dtype "
                        f"of np.floating), but got {dt.name}. For holomorphic differentiation, "
                        "pass holomorphic=True. For differentiation of non-holomorphic functions "
                        "involving complex outputs, use jax.vjp directly.")
    elif not dtypes.is_float(dt):
        raise TypeError(f"{api} requires real-valued outputs (output dtype that is a sub-dtype "
                        f"of np.floating), but got {dt.name}. For differentiation of functions "
                        "with integer outputs, use jax.vjp directly.")


def _check_scalar_output(out, holomorphic: bool):
    leaves = tree_flatten(out)[0]
    if len(leaves) != 1:
        raise TypeError("Gradient only defined for scalar-output functions. Output was "
                        f"{out!r}.")
    aval = core.get_aval(leaves[0])
    if aval.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had "
                        f"shape: {aval.shape}.")
    _check_output_dtype(aval.dtype, holomorphic, "grad")
    return aval


def diff_positions(n: int, argnums_t: tuple, argnums) -> list:
    """The positions among `n` positional arguments that `argnums` names (negative ones
    counted from the end); JAX's TypeError when one is out of range."""
    for a in argnums_t:
        if not -n <= a < n:
            raise TypeError(f"differentiating with respect to argnums={argnums} requires at "
                            f"least {max(argnums_t) + 1} positional arguments to be passed "
                            f"by the caller, but got only {n} positional arguments.")
    return [a % n for a in argnums_t]


def fun_of_diff_args(fun, args, kwargs, nums):
    """`fun` as a function of the arguments at positions `nums`, the others fixed."""
    def partial_fun(*diff):
        full = list(args)
        for i, d in zip(nums, diff):
            full[i] = d
        return fun(*full, **kwargs)
    return partial_fun


def _split_diff_args(fun, args, kwargs, argnums_t, argnums, name, holomorphic, allow_int,
                     api="grad"):
    """(the differentiated arguments, a function of just those) for argnums; checks them."""
    nums = diff_positions(len(args), argnums_t, argnums)
    diff_args = tuple(args[i] for i in nums)
    for leaf in tree_flatten(diff_args)[0]:
        _check_jax_leaves([leaf], "a differentiated argument", name)
        _check_input_dtype(leaf, holomorphic, allow_int, api)
    return diff_args, fun_of_diff_args(fun, args, kwargs, nums)


def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
                   allow_int: bool = False, reduce_axes=()):
    """Returns a function computing ``(fun(*args), gradient of fun w.r.t. args[argnums])``.

    Parameters
    ----------
    fun : callable returning a scalar (and auxiliary data with ``has_aux``).
    argnums : int or tuple of ints
        Which positional arguments to differentiate; a tuple gives a tuple of gradients.
    holomorphic : bool
        Differentiate a holomorphic complex function.
    allow_int : bool
        Allow integer inputs (their gradients are float0 zeros).
    """
    if reduce_axes:  # as JAX
        raise NotImplementedError("reduce_axes argument to grad is deprecated")
    check_callable(fun)
    name = fun_name(fun)
    multiple = isinstance(argnums, (tuple, list))
    argnums_t = tuple(argnums) if multiple else (argnums,)

    @functools.wraps(fun)
    @api_boundary
    def value_and_grad_fun(*args, **kwargs):
        diff_args, partial_fun = _split_diff_args(fun, args, kwargs, argnums_t, argnums, name,
                                                  holomorphic, allow_int)

        p_leaves, in_tree = tree_flatten(diff_args)
        box = []
        out_p, backward = _vjp_flat(_flat_fun(partial_fun, in_tree, box, has_aux, name), p_leaves)
        out_tree, aux = box[0]
        out = tree_unflatten(out_tree, out_p)
        aval = _check_scalar_output(out, holomorphic)
        cts = backward([_ones(aval)])
        grads = tree_unflatten(in_tree, cts)
        grads = grads if multiple else grads[0]
        return ((out, aux), grads) if has_aux else (out, grads)

    return value_and_grad_fun


def _ones(aval):
    # the output's weak type, as JAX's seed (full_like): a weakly typed loss gives weakly
    # typed gradients wherever the transposes keep its type; and its dtype exactly (a float64
    # loss computed under enable_x64 and differentiated outside it)
    return machinery_ops.full((), 1, aval.dtype, aval.weak_type)


def grad(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
         allow_int: bool = False, reduce_axes=()):
    """Returns a function computing the gradient of scalar-valued `fun` w.r.t. args[argnums].

    See `value_and_grad` for the parameters. With ``has_aux=True`` the function returns
    ``(gradient, aux)``.
    """
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @functools.wraps(fun)
    def grad_fun(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    return grad_fun


# ---------------------------------------------------------------------------------------------
# Jacobians

def _std_basis(leaves):
    """An identity basis for the flattened inputs: one row per scalar input, per leaf."""
    sizes = [int(np.prod(core.get_aval(x).shape, dtype=np.int64)) for x in leaves]
    total = sum(sizes)
    dtype = dtypes.result_type(*[core.get_aval(x).dtype for x in leaves]) if leaves else np.float32
    eye = np.eye(total, dtype=dtype)
    out, start = [], 0
    for x, n in zip(leaves, sizes):
        aval = core.get_aval(x)
        out.append(eye[:, start:start + n].reshape((total,) + aval.shape).astype(aval.dtype))
        start += n
    return out


def jacfwd(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """Jacobian of `fun` by forward mode (vmap of jvp over the input basis).

    The result nests the output structure outside the input structure; each block has shape
    ``out.shape + in.shape``.
    """
    from fluxion._src.vmap import vmap
    check_callable(fun)
    name = fun_name(fun)
    multiple = isinstance(argnums, (tuple, list))
    argnums_t = tuple(argnums) if multiple else (argnums,)

    @functools.wraps(fun)
    @api_boundary
    def jac_fun(*args, **kwargs):
        diff, partial = _split_diff_args(fun, args, kwargs, argnums_t, argnums, name, holomorphic,
                                         False, "jacfwd")
        in_leaves, in_tree = tree_flatten(diff)

        def push(*basis_leaves):
            # the outputs come from the jvp too: fun runs once, on traced inputs (as JAX)
            tangents = tree_unflatten(in_tree, basis_leaves)
            return jvp(partial, diff, tangents, has_aux=has_aux)

        basis = _std_basis(in_leaves)
        # The outputs are taken from the first basis vector's jvp (they are the same for all,
        # though a custom_jvp under vmap may batch them)
        empty = not any(core.get_aval(x).size for x in in_leaves)
        out_axis = None if empty else 0
        if has_aux:
            out, jac_t, aux = vmap(push, out_axes=(out_axis, -1, None))(*basis)
        else:
            out, jac_t = vmap(push, out_axes=(out_axis, -1))(*basis)
        if not empty:
            out = tree_map(lambda o: o[0], out)
        for leaf in tree_flatten(out)[0]:
            _check_output_dtype(core.get_aval(leaf).dtype, holomorphic, "jacfwd", forward=True)
        jac = _unravel_fwd(out, jac_t, in_leaves, in_tree, multiple)
        return (jac, aux) if has_aux else jac

    return jac_fun


def _possible_downcast(block, example):
    """A Jacobian block in the dtype and weak type of `example` (jacfwd: the output, jacrev:
    the input), its real part for a real example, as JAX gives it."""
    from fluxion._src.lax import lax
    ea, ba = core.get_aval(example), core.get_aval(block)
    if dtypes.is_complex(ba.dtype) and not dtypes.is_complex(ea.dtype):
        block = lax.real(block)
    return lax._convert_element_type(block, ea.dtype, ea.weak_type)


def _unravel_fwd(out, jac_t, in_leaves, in_tree, multiple):
    """jac_t: output-structured, each leaf (out.shape + (total_in,)) -> nested blocks."""
    from fluxion._src.lax import lax
    sizes = [int(np.prod(core.get_aval(x).shape, dtype=np.int64)) for x in in_leaves]

    def split(block, o):
        aval = core.get_aval(block)
        out_shape = aval.shape[:-1]
        pieces, start = [], 0
        from fluxion._src.lax import structural
        for x, n in zip(in_leaves, sizes):
            if aval.dtype == dtypes.float0:  # an integer output: zeros of its dtype, as JAX
                pieces.append(structural.full(out_shape + core.get_aval(x).shape, 0,
                                              core.get_aval(o).dtype))
                continue
            piece = structural.slice_in_dim(block, start, start + n, axis=aval.ndim - 1)
            pieces.append(_possible_downcast(
                lax.reshape(piece, out_shape + core.get_aval(x).shape), o))
            start += n
        tree = tree_unflatten(in_tree, pieces)
        return tree if multiple else tree[0]
    return tree_map(split, jac_t, out)


def jacrev(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False):
    """Jacobian of `fun` by reverse mode (vmap of vjp over the output basis).

    The result nests the output structure outside the input structure; each block has shape
    ``out.shape + in.shape``.
    """
    from fluxion._src.vmap import vmap
    check_callable(fun)
    name = fun_name(fun)
    multiple = isinstance(argnums, (tuple, list))
    argnums_t = tuple(argnums) if multiple else (argnums,)

    @functools.wraps(fun)
    @api_boundary
    def jac_fun(*args, **kwargs):
        diff, partial = _split_diff_args(fun, args, kwargs, argnums_t, argnums, name, holomorphic,
                                         allow_int, "jacrev")
        in_leaves, in_tree = tree_flatten(diff)

        res = vjp(partial, *diff, has_aux=has_aux)
        out, pullback = res[0], res[1]
        out_leaves, out_tree = tree_flatten(out)
        for leaf in out_leaves:
            _check_output_dtype(core.get_aval(leaf).dtype, holomorphic, "jacrev")
        basis = _std_basis(out_leaves)

        def pull(*ct_leaves):
            cts = pullback(tree_unflatten(out_tree, ct_leaves))
            # An integer input's (allow_int) cotangent is float0: zeros of its own dtype.
            return tree_map(
                lambda x, ct: (np.zeros(core.get_aval(x).shape, core.get_aval(x).dtype)
                               if core.get_aval(ct).dtype == dtypes.float0 else ct),
                tuple(diff), cts)

        jac_t = vmap(pull)(*basis)  # input-structured, leaves (total_out,) + in.shape
        jac = _unravel_rev(jac_t, out_leaves, out_tree, in_tree, multiple, in_leaves)
        return (jac, res[2]) if has_aux else jac

    return jac_fun


def _unravel_rev(jac_t, out_leaves, out_tree, in_tree, multiple, in_leaves):
    from fluxion._src.lax import lax, structural
    sizes = [int(np.prod(core.get_aval(o).shape, dtype=np.int64)) for o in out_leaves]
    in_blocks = tree_flatten(jac_t)[0]  # one per input leaf
    per_out = []
    start = 0
    for o, n in zip(out_leaves, sizes):
        pieces = []
        for block, x in zip(in_blocks, in_leaves):
            in_shape = core.get_aval(block).shape[1:]
            if core.get_aval(block).dtype == dtypes.float0:  # an integer input (allow_int):
                # zeros of its dtype, as JAX
                pieces.append(structural.full(core.get_aval(o).shape + in_shape, 0,
                                       core.get_aval(x).dtype))
                continue
            piece = structural.slice_in_dim(block, start, start + n, axis=0)
            pieces.append(_possible_downcast(
                lax.reshape(piece, core.get_aval(o).shape + in_shape), x))
        tree = tree_unflatten(in_tree, pieces)
        per_out.append(tree if multiple else tree[0])
        start += n
    return tree_unflatten(out_tree, per_out)


jacobian = jacrev


def hessian(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """Hessian of scalar `fun`: jacfwd of jacrev."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)
