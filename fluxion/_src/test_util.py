"""Derivatives checked against finite differences (`fluxion.test_util`), with the semantics of
`jax.test_util`: the same default step, tangent draws and tolerances by dtype, so a gradient test
written for JAX passes or fails the same way here.

Tolerances are looked up by the dtype of each compared output (not of the inputs), merged
with the caller's (a number, or a dict from dtype to number), and, as in JAX, scaled by the
number of elements compared. Forward mode compares `jvp` with central differences; reverse mode
checks Re<v, conj(vjp(conj u))> = Re<J v, u>, which holds for every function, holomorphic or
not. Higher orders check `jvp` itself (as a function of primals and tangents) and the VJP applied
to the primal output.
"""
from __future__ import annotations

import functools
import operator

import ml_dtypes
import numpy as np

from fluxion._src import dtypes
from fluxion._src.tree_util import tree_map, tree_reduce

EPS = 1e-4

_float8 = [getattr(ml_dtypes, name) for name in
           ("float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
            "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz") if hasattr(ml_dtypes, name)]

# Tolerances when comparing values of each dtype (JAX's figures): exact for integers.
_VALUE_TOLERANCE = {
    **{np.dtype(t): 0 for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, ml_dtypes.int4,
                                ml_dtypes.uint4)},
    dtypes.float0: 0,
    **{np.dtype(t): 1e-1 for t in _float8},
    np.dtype(ml_dtypes.bfloat16): 1e-2, np.dtype(np.float16): 1e-3,
    np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-15,
    np.dtype(np.complex64): 1e-6, np.dtype(np.complex128): 1e-15,
}
# Defaults for derivatives (JAX's default_gradient_tolerance).
_GRADIENT_TOLERANCE = {
    **{np.dtype(t): 1e-1 for t in _float8},
    np.dtype(ml_dtypes.bfloat16): 1e-1, np.dtype(np.float16): 1e-2,
    np.dtype(np.float32): 2e-3, np.dtype(np.float64): 1e-5,
    np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5,
}
# Compared in float32 (NumPy's allclose does not take them).
_LOW_PRECISION = {np.dtype(t) for t in (*_float8, ml_dtypes.bfloat16)}
_PYTHON_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64),
                         float: np.dtype(np.float64), complex: np.dtype(np.complex128)}


def _is_python_scalar(x) -> bool:
    return not isinstance(x, np.generic) and isinstance(x, (bool, int, float, complex))


def _dtype(x) -> np.dtype:
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    return _PYTHON_SCALAR_DTYPES.get(type(x)) or np.asarray(x).dtype


def _merge(tol, defaults):
    if tol is None:
        return defaults
    if not isinstance(tol, dict):
        return tol
    return {**defaults, **{np.dtype(k): v for k, v in tol.items()}}


def tolerance(dtype, tol=None):
    """The tolerance for values of `dtype`: `tol` itself when a number, else its entry for
    the (canonical) dtype, falling back to the defaults for comparing values."""
    if tol is None:
        tol = {}
    if not isinstance(tol, dict):
        return tol
    tol = {np.dtype(k): v for k, v in tol.items()}
    dtype = dtypes.canonicalize_dtype(np.dtype(dtype))
    return tol.get(dtype, _VALUE_TOLERANCE[dtype])


def _assert_close(x, y, atol, rtol, err_msg):
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape, (x.shape, y.shape, err_msg)
    if x.dtype == y.dtype == dtypes.float0:
        np.testing.assert_array_equal(x, y, err_msg=err_msg)
        return
    atol = max(tolerance(x.dtype, atol), tolerance(y.dtype, atol)) * x.size
    rtol = max(tolerance(x.dtype, rtol), tolerance(y.dtype, rtol)) * y.size
    upcast = lambda v: v.astype(np.float32) if v.dtype in _LOW_PRECISION else v
    kwargs = {k: v for k, v in (("atol", atol), ("rtol", rtol)) if v}
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(upcast(x), upcast(y), err_msg=err_msg, **kwargs)


def check_close(xs, ys, atol=None, rtol=None, err_msg=""):
    """Assert two pytrees close, leaf by leaf, with tolerances by dtype."""
    tree_map(functools.partial(_assert_close, atol=atol, rtol=rtol, err_msg=err_msg), xs, ys)


def _keep_type(f):
    """f applied to values as NumPy does, the result cast back to the first argument's dtype
    (a Python scalar stays one)."""
    def apply(*args):
        out = np.array(f(*args), dtype=_dtype(args[0]))
        return out.item() if all(_is_python_scalar(a) for a in args) else out
    return apply


_add = functools.partial(tree_map, _keep_type(operator.add))
_sub = functools.partial(tree_map, _keep_type(operator.sub))
_conj = functools.partial(tree_map, _keep_type(np.conj))


def _scale(xs, a):
    def scale(x):
        dtype = _dtype(x)
        out = np.multiply(x, np.array(a, dtype=dtype), dtype=dtype)
        return out.item() if _is_python_scalar(x) else out
    return tree_map(scale, xs)


def _difference(x, y):
    """x - y in x's dtype, with inf - inf = 0."""
    dtype = _dtype(x)
    with np.errstate(invalid="ignore"):
        return np.where(np.equal(x, y), np.array(0, dtype), np.subtract(x, y, dtype=dtype))


def _rand_like(rng, x):
    dtype = _dtype(x)
    draw = lambda: np.asarray(rng.randn(*np.shape(x)), dtype=dtype)
    out = draw() + dtype.type(1j) * draw() if dtypes.is_complex(dtype) else draw()
    return out.item() if _is_python_scalar(x) else out


def _inner(xs, ys) -> float:
    """Re sum(conj(x) * y) over the leaves: the real inner product of C^n as R^2n."""
    contract = lambda x, y: np.real(np.dot(np.conj(x).reshape(-1), np.reshape(y, -1)))
    return tree_reduce(np.add, tree_map(contract, xs, ys))


def numerical_jvp(f, primals, tangents, eps=EPS):
    """(f(x + eps t) - f(x - eps t)) / (2 eps), each step computed in its value's dtype."""
    delta = _scale(tangents, eps)
    f_plus, f_minus = f(*_add(primals, delta)), f(*_sub(primals, delta))
    return _scale(tree_map(_difference, f_plus, f_minus), 0.5 / eps)


def _check_dtypes_match(xs, ys):
    def same(x, y):
        assert dtypes.canonicalize_dtype(_dtype(x)) == dtypes.canonicalize_dtype(_dtype(y)), \
            f"dtypes differ: {_dtype(x)} and {_dtype(y)}"
    tree_map(same, xs, ys)


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """Check `f_jvp(args, tangents)` (typically ``functools.partial(jvp, f)``) against
    central differences of `f` in one random direction."""
    atol = _merge(atol, _GRADIENT_TOLERANCE)
    rtol = _merge(rtol, _GRADIENT_TOLERANCE)
    tangents = tree_map(functools.partial(_rand_like, np.random.RandomState(0)), args)
    out, out_tangent = f_jvp(args, tangents)
    _check_dtypes_match(out, out_tangent)
    expected = f(*args)
    _check_dtypes_match(out, expected)
    check_close(out, expected, atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    check_close(out_tangent, numerical_jvp(f, args, tangents, eps), atol, rtol,
                f"{err_msg} tangent" if err_msg else "tangent")


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """Check `f_vjp(*args)` (typically ``functools.partial(vjp, f)``) against central
    differences of `f`: Re<v, conj(vjp(conj u))> = Re<J v, u> for random u and v."""
    atol = _merge(atol, _GRADIENT_TOLERANCE)
    rtol = _merge(rtol, _GRADIENT_TOLERANCE)
    rand_like = functools.partial(_rand_like, np.random.RandomState(0))
    out, pullback = f_vjp(*args)
    check_close(out, f(*args), atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    tangents = tree_map(rand_like, args)
    tangent_out = numerical_jvp(f, args, tangents, eps)
    cotangent = tree_map(rand_like, out)
    cotangent_in = _conj(pullback(_conj(cotangent)))
    check_close(_inner(tangents, cotangent_in), _inner(tangent_out, cotangent), atol, rtol,
                f"{err_msg} cotangent projection" if err_msg else "cotangent projection")


def check_grads(f, args, order: int, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check derivatives of `f` at `args` against finite differences, up to `order`.

    Parameters
    ----------
    f : function to check at ``f(*args)``.
    args : tuple of argument values.
    order : derivatives up to this order are checked.
    modes : 'fwd' (jvp), 'rev' (vjp) and/or 'lin' (linearize).
    atol, rtol : tolerances, numbers or dicts from dtype to number.
    eps : the finite-difference step (1e-4 by default).
    """
    from fluxion._src.ad_api import jvp, linearize, vjp
    args = tuple(args)
    eps = eps or EPS

    def jvp_from_linearize(fun, primals, tangents):
        out, f_lin = linearize(fun, *primals)
        return out, f_lin(*tangents)

    def check(fun, args, order, err_msg=""):
        if "fwd" in modes:
            msg = f"JVP of {err_msg}" if err_msg else "JVP"
            check_jvp(fun, functools.partial(jvp, fun), args, atol, rtol, eps, msg)
            if order > 1:
                check(functools.partial(jvp, fun), (args, args), order - 1, msg)
        if "rev" in modes:
            msg = f"VJP of {err_msg}" if err_msg else "VJP"
            check_vjp(fun, functools.partial(vjp, fun), args, atol, rtol, eps, msg)
            if order > 1:
                def fun_vjp(*primals):
                    out, pullback = vjp(fun, *primals)
                    return pullback(out)
                check(fun_vjp, args, order - 1, msg)
        if "lin" in modes:
            msg = f"LIN of {err_msg}" if err_msg else "LIN"
            check_jvp(fun, functools.partial(jvp_from_linearize, fun), args, atol, rtol, eps,
                      msg)
            if order > 1:
                check(functools.partial(jvp_from_linearize, fun), (args, args), order - 1, msg)

    check(f, args, order)
