"""Gradient checking against finite differences (`fluxion.test_util.check_grads`)."""
from __future__ import annotations

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.tree_util import tree_flatten, tree_map, tree_unflatten

_DEFAULT_TOL = {np.dtype(np.float16): 1e-1, dtypes.bfloat16: 1e-1, np.dtype(np.float32): 2e-2,
                np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 2e-2,
                np.dtype(np.complex128): 1e-5}
_DEFAULT_EPS = {np.dtype(np.float16): 1e-1, dtypes.bfloat16: 1e-1, np.dtype(np.float32): 1e-4,
                np.dtype(np.float64): 1e-6, np.dtype(np.complex64): 1e-4,
                np.dtype(np.complex128): 1e-6}


def _leaves(tree):
    return [np.asarray(x) for x in tree_flatten(tree)[0]]


def _leaf_dtypes(tree):
    """The dtypes the leaves have as arguments: Python floats are float32 unless x64 is on."""
    return [dtypes.canonicalize_dtype(x.dtype) for x in _leaves(tree)]


def _inner(xs, ys) -> complex:
    # Bilinear, not sesquilinear: JAX's VJP of a complex function is ct @ J, without conjugation.
    return complex(sum(np.sum(np.asarray(x, np.complex128) * np.asarray(y, np.complex128))
                       for x, y in zip(_leaves(xs), _leaves(ys))))


def _random_like(tree, rng):
    def draw(x):
        x = np.asarray(x)
        if dtypes.is_complex(x.dtype):
            return (rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape)).astype(x.dtype)
        return rng.standard_normal(x.shape).astype(x.dtype)
    return tree_map(draw, tree)


def _loosest(table: dict, tree, default: float) -> float:
    """The largest entry of `table` over the dtypes of `tree`'s inexact leaves."""
    inexact = [d for d in _leaf_dtypes(tree) if dtypes.is_inexact(d)]
    return max([table.get(d, default) for d in inexact] or [default])


def _tol(tree, given):
    """The loosest tolerance over `tree`'s leaves: `given` if a number, else looked up by dtype.

    `given` may be a dict from dtypes to tolerances, as in JAX; dtypes it lacks take the
    default tolerance.
    """
    if given is not None and not isinstance(given, dict):
        return given
    table = dict(_DEFAULT_TOL)
    table.update({np.dtype(key): value for key, value in (given or {}).items()})
    return _loosest(table, tree, 1e-5)


def _eps(tree, given):
    return given if given is not None else _loosest(_DEFAULT_EPS, tree, 1e-4)


def _add(tree, delta, scale):
    return tree_map(lambda x, d: (np.asarray(x) + scale * np.asarray(d)).astype(np.asarray(x).dtype),
                    tree, delta)


def _assert_close(name, got, want, atol, rtol):
    for g, w in zip(_leaves(got), _leaves(want)):
        np.testing.assert_allclose(np.asarray(g, np.complex128), np.asarray(w, np.complex128),
                                   atol=atol, rtol=rtol, err_msg=name)


def _difference(a, b):
    """a - b in double precision, 0 where a == b (so that inf - inf, as at a -inf padded
    max window, is no NaN: JAX's safe subtraction)."""
    a = np.asarray(a, np.complex128 if np.iscomplexobj(a) else np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(a == np.asarray(b), 0, a - np.asarray(b))


def numerical_jvp(f, primals, tangents, eps):
    plus = f(*_add(primals, tangents, eps))
    minus = f(*_add(primals, tangents, -eps))
    return tree_map(lambda a, b: _difference(a, b) / (2 * eps), plus, minus)


def check_jvp(f, primals, atol=None, rtol=None, eps=None, rng=None):
    from fluxion._src.ad_api import jvp
    rng = rng or np.random.default_rng(0)
    tangents = _random_like(primals, rng)
    out, out_tangent = jvp(f, tuple(primals), tuple(tangents))
    # Steps and tolerances suit the least precise of the inputs and outputs (a float64
    # function computing in float32 needs float32's).
    eps = _eps((primals, out), eps)
    expected = numerical_jvp(f, primals, tangents, eps)
    _assert_close("JVP against finite differences", out_tangent, expected,
                  _tol((primals, out), atol), _tol((primals, out), rtol))


def check_vjp(f, primals, atol=None, rtol=None, eps=None, rng=None):
    """Checks Re<vjp(u), v> == Re<u, jvp(v)> with jvp taken by finite differences.

    Only real parts agree for every function: a VJP is the adjoint of the JVP as a real-linear
    map (JAX's convention), which for a non-holomorphic function (real, abs, conj) is no
    complex-linear map. Complex outputs are also checked with cotangent i*u, so that a
    holomorphic function's whole products are compared.
    """
    from fluxion._src.ad_api import vjp
    rng = rng or np.random.default_rng(1)
    out, pullback = vjp(f, *primals)
    tangents = _random_like(primals, rng)
    cotangent = _random_like(out, rng)
    eps = _eps((primals, out), eps)
    jvp_numeric = numerical_jvp(f, primals, tangents, eps)
    cotangents = [cotangent]
    if any(np.iscomplexobj(x) for x in _leaves(out)):
        cotangents.append(tree_map(lambda c: (1j * np.asarray(c)).astype(np.asarray(c).dtype),
                                   cotangent))
    tol = _tol((primals, out), atol)
    for ct in cotangents:
        lhs = _inner(pullback(ct), tangents).real
        rhs = _inner(ct, jvp_numeric).real
        np.testing.assert_allclose(lhs, rhs, atol=tol * max(1.0, abs(rhs)),
                                   rtol=_tol((primals, out), rtol),
                                   err_msg="VJP against finite differences (dot-product test)")


def check_grads(f, args, order: int, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check derivatives of `f` at `args` (a tuple) against finite differences, up to `order`.

    Forward mode compares jvp with central differences; reverse mode checks the dot-product
    identity <vjp(u), v> = <u, J v>. Higher orders apply the same checks to the derivative
    functions themselves. `atol` and `rtol` are numbers or, as in JAX, dicts from dtypes to
    tolerances.
    """
    from fluxion._src.ad_api import jvp, vjp
    args = tuple(args)
    if order < 1:
        return
    if "fwd" in modes:
        check_jvp(f, args, atol, rtol, eps)
        if order > 1:
            def f_jvp(*primals):
                tangents = _random_like(primals, np.random.default_rng(2))
                return jvp(f, primals, tangents)[1]
            check_grads(f_jvp, args, order - 1, ("fwd",), atol, rtol, eps)
    if "rev" in modes:
        check_vjp(f, args, atol, rtol, eps)
        if order > 1:
            out = f(*args)
            cotangent = _random_like(out, np.random.default_rng(3))

            def f_vjp(*primals):
                return vjp(f, *primals)[1](cotangent)
            check_grads(f_vjp, args, order - 1, ("rev",), atol, rtol, eps)
