"""vecdot, matvec and vecmat (the NumPy 2 / Array API products), and cumulative_sum /
cumulative_prod with include_initial."""
from __future__ import annotations

import functools

from fluxion._src import core
from fluxion._src.lax import lax, structural
from fluxion._src.numpy import creation, linalg_ops, manipulation, reductions, ufuncs, util
from fluxion._src.numpy.vectorize import vectorize


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """sum(conj(x1) * x2) along `axis`, broadcasting the other axes."""
    x1, x2 = util.ensure_arraylike("jnp.vecdot", x1, x2)
    s1, s2 = core.get_aval(x1).shape, core.get_aval(x2).shape
    if s1[axis] != s2[axis]:
        raise ValueError(f"axes must match; got shapes {s1} and {s2} with axis={axis}")
    x1 = manipulation.moveaxis(x1, axis, -1)
    x2 = manipulation.moveaxis(x2, axis, -1)
    dot = functools.partial(linalg_ops.vdot, precision=precision,
                            preferred_element_type=preferred_element_type)
    return vectorize(dot, signature="(n),(n)->()")(x1, x2)


def matvec(x1, x2, /):
    """Matrix-vector products over broadcast batch dimensions: x1 (..., n, m), x2 (..., m)."""
    x1, x2 = util.ensure_arraylike("matvec", x1, x2)
    return vectorize(linalg_ops.matmul, signature="(n,m),(m)->(n)")(x1, x2)


def vecmat(x1, x2, /):
    """Vector-matrix products conj(x1) @ x2 over broadcast batch dimensions."""
    x1, x2 = util.ensure_arraylike("matvec", x1, x2)
    return vectorize(linalg_ops.matmul, signature="(n),(n,m)->(m)")(ufuncs.conj(x1), x2)


def _cumulative(name, reduction, identity, x, axis, dtype, include_initial, promote=False):
    x = util.ensure_arraylike(name, x)
    if promote and dtype is None:
        # cumulative_sum accumulates narrow integers in the default width, as sum does.
        dtype = reductions._promote_integer_dtype(core.get_aval(x).dtype)
    nd = core.get_aval(x).ndim
    if nd == 0:
        what = "sum" if name == "cumulative_sum" else "product"
        raise ValueError(f"The input must be non-scalar to take a cumulative {what}, however a "
                         "scalar value or scalar array was given.")
    if axis is None:
        if nd > 1:
            raise ValueError(f"The input array has rank {nd}, however axis was not set to an "
                             "explicit value. The axis argument is only optional for "
                             "one-dimensional arrays.")
        axis = 0
    axis = util.canonicalize_axis(axis, nd)
    out = reduction(x, axis=axis, dtype=dtype)
    if include_initial:
        aval = core.get_aval(out)
        shape = list(aval.shape)
        shape[axis] = 1
        initial = lax.broadcast_in_dim(lax._convert_element_type(identity, aval.dtype, False),
                                       tuple(shape), ())
        out = structural.concatenate([initial, out], axis)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial: bool = False):
    """Cumulative sum along `axis` (optional for 1-D input); include_initial prepends 0."""
    return _cumulative("cumulative_sum", reductions.cumsum, 0, x, axis, dtype, include_initial,
                       promote=True)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial: bool = False):
    """Cumulative product along `axis` (optional for 1-D input); include_initial prepends 1."""
    return _cumulative("cumulative_prod", reductions.cumprod, 1, x, axis, dtype,
                       include_initial)


def _compile_eager_calls():  # as in manipulation.py
    from fluxion._src.numpy.eager import compile_eagerly
    compile_eagerly(globals(), names=("vecdot", "matvec", "vecmat", "cumulative_sum",
                                      "cumulative_prod"),
                    static_parameters=frozenset({"axis", "dtype", "include_initial", "precision",
                                                 "preferred_element_type"}))


_compile_eager_calls()
