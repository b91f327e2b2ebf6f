"""`sparsify`: run a function written for dense arrays on BCOO arguments.

The function is traced to a jaxpr on dense stand-ins of the BCOO arguments; the jaxpr is
then interpreted with the BCOO values, each equation that touches a sparse operand going
through the sparse rule of its primitive.  Primitives without a rule raise
NotImplementedError, as JAX's sparsify does.
"""
import functools

import numpy as np

from fluxion import numpy as jnp
from fluxion._src import core
from fluxion._src.api import ShapeDtypeStruct, make_jaxpr
from fluxion._src.sparse import bcoo as _b
from fluxion._src.sparse.bcoo import BCOO, JAXSparse
from fluxion._src.sparse.bcsr import BCSR
from fluxion import tree_util

# Elementwise primitives with f(0) == 0: applied to the stored values only.
_ZERO_PRESERVING = {
    "abs", "asin", "asinh", "atan", "atanh", "bessel_i1e", "expm1", "log1p", "neg", "real",
    "imag", "conj", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "erf", "erf_inv", "copy",
    "copy_p", "convert_element_type", "reduce_precision", "square", "cbrt",
}

_rules = {}


def _rule(*names):
    def register(f):
        for n in names:
            _rules[n] = f
        return f
    return register


def _with_data(mat, data):
    return BCOO((data, mat.indices), shape=mat.shape, indices_sorted=mat.indices_sorted,
                unique_indices=mat.unique_indices)


def _unary(eqn, x):
    return _with_data(x, eqn.primitive.bind(x.data, **eqn.params))


@_rule("integer_pow")
def _integer_pow(eqn, x):
    if eqn.params["y"] <= 0:
        raise NotImplementedError(f"sparse rule for integer_pow with non-positive exponent "
                                  f"{eqn.params['y']} is not implemented because it would result "
                                  "in dense output. If this is your intent, use sparse.todense() "
                                  "to convert your argument to a dense array.")
    return _unary(eqn, x)


@_rule("mul")
def _mul(eqn, x, y):
    if isinstance(x, BCOO) and isinstance(y, BCOO):
        raise NotImplementedError("sparse rule for mul of two sparse operands is not implemented.")
    sp, dn = (x, y) if isinstance(x, BCOO) else (y, x)
    dn = jnp.asarray(dn)
    if dn.ndim == 0:
        return _with_data(sp, sp.data * dn)
    return _with_data(sp, _b.bcoo_multiply_dense(sp, dn))


@_rule("div")
def _div(eqn, x, y):
    if isinstance(y, BCOO):
        raise NotImplementedError("sparse rule for div with a sparse divisor is not implemented.")
    y = jnp.asarray(y)
    if y.ndim == 0:
        return _with_data(x, x.data / y)
    y = jnp.broadcast_to(y, x.shape)
    return _with_data(x, x.data / _b._extract(x.indices, y, x.n_batch))


@_rule("add", "sub")
def _add(eqn, x, y):
    if not (isinstance(x, BCOO) and isinstance(y, BCOO)):
        return _add_dense(eqn.primitive.name, x, y)
    if x.shape != y.shape:
        raise NotImplementedError(f"sparse rule for {eqn.primitive.name} of operands of shapes "
                                  f"{x.shape} and {y.shape} is not implemented.")
    if eqn.primitive.name == "sub":
        y = -y
    return _b.bcoo_concatenate_entries(x, y)


def _add_dense(name, x, y):
    """Sparse plus dense, as JAX: the dense sum when the dense operand has the result's shape
    (anything else would densify the sparse operand silently); no subtraction."""
    if name == "sub":
        raise NotImplementedError("Subtraction between sparse and dense array.")
    sp, dn = (x, y) if isinstance(x, BCOO) else (y, x)
    dn = jnp.asarray(dn)
    if dn.shape != np.broadcast_shapes(sp.shape, dn.shape):
        raise NotImplementedError(
            "Addition between a sparse array X and a dense array Y is not implemented when the "
            "output shape is larger than Y.shape. This is to prevent silent densification of a "
            "large sparse array. If this is your intent, you can explicitly cast the sparse "
            "array to a dense matrix.")
    return _b.bcoo_todense(sp) + dn


@_rule("dot_general")
def _dot_general(eqn, lhs, rhs):
    return _b.bcoo_dot_general(lhs, rhs, dimension_numbers=eqn.params["dimension_numbers"],
                               preferred_element_type=eqn.params.get("preferred_element_type"))


@_rule("reduce_sum")
def _reduce_sum(eqn, x):
    return _b.bcoo_reduce_sum(x, axes=eqn.params["axes"])


@_rule("transpose")
def _transpose(eqn, x):
    perm = tuple(eqn.params["permutation"])
    try:
        return _b.bcoo_transpose(x, permutation=perm)
    except NotImplementedError:
        return _b.bcoo_transpose(_b._coo(x), permutation=perm)


@_rule("reshape")
def _reshape(eqn, x):
    return _b.bcoo_reshape(x, new_sizes=eqn.params["new_sizes"],
                           dimensions=eqn.params.get("dimensions"))


@_rule("squeeze")
def _squeeze(eqn, x):
    return _b.bcoo_squeeze(x, dimensions=eqn.params["dimensions"])


@_rule("broadcast_in_dim")
def _broadcast_in_dim(eqn, x):
    return _b.bcoo_broadcast_in_dim(x, shape=eqn.params["shape"],
                                    broadcast_dimensions=eqn.params["broadcast_dimensions"])


@_rule("concatenate")
def _concatenate(eqn, *xs):
    if not all(isinstance(x, BCOO) for x in xs):
        raise NotImplementedError("sparse rule for concatenate of sparse and dense arrays is not "
                                  "implemented.")
    return _b.bcoo_concatenate(xs, dimension=eqn.params["dimension"])


@_rule("slice")
def _slice(eqn, x):
    return _b.bcoo_slice(x, start_indices=eqn.params["start_indices"],
                         limit_indices=eqn.params["limit_indices"],
                         strides=eqn.params.get("strides"))


@_rule("rev")
def _rev(eqn, x):
    return _b.bcoo_rev(x, eqn.params["dimensions"])


@_rule("todense")
def _todense(eqn, x):
    return _b.bcoo_todense(x)


@_rule("jit", "pjit", "closed_call", "core_call", "custom_jvp_call")
def _call(eqn, *args):
    inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
    jaxpr, consts = (inner.jaxpr, inner.consts) if hasattr(inner, "consts") else (inner, ())
    return _eval_sparse(jaxpr, consts, args)


def _eval_eqn(eqn, ins):
    if not any(isinstance(x, BCOO) for x in ins):
        out = eqn.primitive.bind(*ins, **eqn.params)
        return out if eqn.primitive.multiple_results else (out,)
    name = eqn.primitive.name
    if name in _rules:
        out = _rules[name](eqn, *ins)
    elif name in _ZERO_PRESERVING and len(ins) == 1:
        out = _unary(eqn, ins[0])
    elif name in _DENSIFYING:
        raise NotImplementedError(f"sparse rule for {name} is not implemented because it would "
                                  f"result in dense output. {_USE_TODENSE}")
    else:
        raise NotImplementedError(f"sparse rule for {name} is not implemented.")
    return out if isinstance(out, (tuple, list)) else (out,)


# Primitives whose result is dense (f(0) != 0): JAX's error says so.
_DENSIFYING = frozenset(["acos", "acosh", "bessel_i0e", "cos", "cosh", "eq", "exp", "ge", "gt",
                         "le", "lt", "log", "ne", "xor"])
_USE_TODENSE = ("If this is your intent, use sparse.todense() to convert your arguments to "
                "dense matrices.")


def _eval_sparse(jaxpr, consts, args):
    return core.eval_jaxpr_with(jaxpr, consts, list(args), _eval_eqn)


def _is_sparse(x):
    return isinstance(x, JAXSparse)


def sparsify(f, use_tracer=False):
    """Make ``f``, written with dense array operations, accept BCOO arrays.

    Parameters
    ----------
    f : callable
    use_tracer : bool
      Accepted for compatibility; fluxion always interprets the traced jaxpr.

    Returns
    -------
    callable
      Takes the arguments of ``f`` with any array replaced by a BCOO array; outputs are
      BCOO where the sparse rules keep sparsity.
    """
    del use_tracer

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        leaves, in_tree = tree_util.tree_flatten((args, kwargs), is_leaf=_is_sparse)
        leaves = [x.to_bcoo() if isinstance(x, BCSR) else x for x in leaves]  # BCSR: as BCOO
        stand_ins = [ShapeDtypeStruct(x.shape, x.dtype) if _is_sparse(x) else x for x in leaves]

        def flat_fun(*flat):
            a, k = tree_util.tree_unflatten(in_tree, flat)
            return f(*a, **k)

        closed, shapes = make_jaxpr(flat_fun, return_shape=True)(*stand_ins)
        outs = _eval_sparse(closed.jaxpr, closed.consts, leaves)
        return tree_util.tree_unflatten(tree_util.tree_structure(shapes), outs)

    return wrapped
