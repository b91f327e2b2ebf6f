"""Tokens: the `!stablehlo.token` type as a fluxion value (`lax.create_token`, `lax.after_all`).

A token carries no data, only an ordering dependency between side-effecting operations. Its
abstract value is `abstract_token` (printed `Tok` in jaxprs, as in JAX); a concrete one is a
`Token` wrapping the runtime's token buffer, which jitted functions take and return like
arrays. Tokens cannot be differentiated (their tangent is the token itself, always zero) and
are never batched.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import ad, batching, core
from fluxion._src.compiler import lowering

# A dtype no array has, so caches keyed on (shape, dtype) keep tokens apart from arrays.
TOKEN_DTYPE = np.dtype([("token", np.void, 0)])
TOKEN_TYPE = "!stablehlo.token"


class AbstractToken:
    """The abstract value of a token (JAX's `core.AbstractToken`)."""

    __slots__ = ()
    is_token = True
    shape = ()
    dtype = TOKEN_DTYPE
    weak_type = False
    ndim = 0
    size = 0
    array_abstraction_level = 0

    def update(self, **_):
        return self

    def strip_weak_type(self):
        return self

    def str_short(self, short_dtypes: bool = True) -> str:
        return "Tok"

    def __repr__(self):
        return "AbstractToken()"

    __str__ = __repr__

    def __reduce__(self):
        return _get_abstract_token, ()


abstract_token = AbstractToken()
core.register_aval_type(AbstractToken)  # primitives may return it


def _get_abstract_token():
    return abstract_token


def is_token_aval(aval) -> bool:
    return getattr(aval, "is_token", False)


class Token:
    """A concrete token: the runtime buffer of a `!stablehlo.token` value."""

    __slots__ = ("_buf",)
    aval = abstract_token

    def __init__(self, buf):
        self._buf = buf

    def block_until_ready(self):
        self._buf.block_until_ready()
        return self

    def __repr__(self):
        return "Token()"


core.register_aval_handler(Token, lambda t: abstract_token)


# ---------------------------------------------------------------------------------------------
# create_token, after_all

create_token_p = core.Primitive("create_token")
after_all_p = core.Primitive("after_all")


def _create_token_abstract_eval(*operands):
    return abstract_token


def _after_all_abstract_eval(*operands):
    if any(not is_token_aval(a) for a in operands):
        raise TypeError("Arguments to after_all must be tokens")
    return abstract_token


def _token_lowering(ctx, *operands):
    # A fresh token is after_all of nothing (stablehlo.create_token is its deprecated form).
    return ctx.op1("stablehlo.after_all", list(operands), abstract_token)


def _no_tangent(prim):
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        return out, ad.Zero(abstract_token)
    ad.primitive_jvps[prim] = rule


def _unbatched(prim):
    def rule(args, dims, **params):
        if any(d is not batching.not_mapped for d, a in zip(dims, args)
               if is_token_aval(core.get_aval(a))):
            raise TypeError(f"{prim.name} cannot be applied to batched tokens")
        return prim.bind(*args, **params), batching.not_mapped
    batching.primitive_batchers[prim] = rule


create_token_p.def_abstract_eval(_create_token_abstract_eval)
after_all_p.def_abstract_eval(_after_all_abstract_eval)
for _prim in (create_token_p, after_all_p):
    lowering.register_lowering(_prim, _token_lowering)
    _no_tangent(_prim)
    _unbatched(_prim)


def create_token(_=None):
    """A fresh token with no ordering constraint. The argument is ignored (as in JAX)."""
    return create_token_p.bind()


def after_all(*operands):
    """A token ordered after all the given tokens."""
    if any(not is_token_aval(core.get_aval(x)) if core.valid_jaxtype(x) else True
           for x in operands):
        raise TypeError("Arguments to after_all must be tokens")
    return after_all_p.bind(*operands)
