"""Elementwise functions of fluxion.numpy, with NumPy's promotion and broadcasting."""
from __future__ import annotations

from fluxion._src import core, dtypes
from fluxion._src.lax import lax
from fluxion._src.numpy.util import (check_arraylike, promote_args, promote_args_inexact,
                                     promote_args_numeric, promote_dtypes)


def _binary(name, lax_fn, promote=promote_args):
    def fn(x1, x2, /):
        return lax_fn(*promote(name, x1, x2))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise `{name}` with NumPy broadcasting and type promotion."
    return fn


def _unary_inexact(name, lax_fn):
    def fn(x, /):
        return lax_fn(*promote_args_inexact(name, x))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise `{name}`; integer and boolean inputs are promoted to float."
    return fn


add = _binary("add", lambda x, y: lax.bitwise_or(x, y) if core.get_aval(x).dtype == dtypes.bool_ else lax.add(x, y))
subtract = _binary("subtract", lax.sub)
multiply = _binary("multiply", lambda x, y: lax.bitwise_and(x, y) if core.get_aval(x).dtype == dtypes.bool_ else lax.mul(x, y))
maximum = _binary("maximum", lax.max)
minimum = _binary("minimum", lax.min)
equal = _binary("equal", lax.eq)
not_equal = _binary("not_equal", lax.ne)
less = _binary("less", lax.lt)
less_equal = _binary("less_equal", lax.le)
greater = _binary("greater", lax.gt)
greater_equal = _binary("greater_equal", lax.ge)
bitwise_and = _binary("bitwise_and", lax.bitwise_and)
bitwise_or = _binary("bitwise_or", lax.bitwise_or)
bitwise_xor = _binary("bitwise_xor", lax.bitwise_xor)
true_divide = _binary("true_divide", lax.div, promote_args_inexact)
divide = true_divide
arctan2 = _binary("arctan2", lax.atan2, promote_args_inexact)

sin = _unary_inexact("sin", lax.sin)
cos = _unary_inexact("cos", lax.cos)
tan = _unary_inexact("tan", lax.tan)
exp = _unary_inexact("exp", lax.exp)
log = _unary_inexact("log", lax.log)
tanh = _unary_inexact("tanh", lax.tanh)
sqrt = _unary_inexact("sqrt", lax.sqrt)
log1p = _unary_inexact("log1p", lax.log1p)
expm1 = _unary_inexact("expm1", lax.expm1)


def negative(x, /):
    """Elementwise -x."""
    (x,) = promote_args("negative", x)
    return lax.neg(x)


def absolute(x, /):
    """Elementwise |x|."""
    check_arraylike("absolute", x)
    (x,) = promote_dtypes(x)
    dt = core.get_aval(x).dtype
    if dt.kind in "ub":
        return x
    return lax.abs(x)


abs = absolute


def power(x1, x2, /):
    """Elementwise x1 ** x2 with NumPy promotion."""
    check_arraylike("power", x1, x2)
    if isinstance(x2, int) and not isinstance(x2, bool) and not isinstance(x1, (int, float, complex)):
        (x1,) = promote_dtypes(x1)
        if x2 >= 0 or dtypes.is_inexact(core.get_aval(x1).dtype):
            return lax.integer_pow(x1, x2)
    x1, x2 = promote_args_numeric("power", x1, x2)
    return lax.pow(x1, x2)
