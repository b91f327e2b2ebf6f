"""Reductions to condensed forms on LAPACK: schur (gees), hessenberg (gehrd),
tridiagonal (sytrd/hetrd).

As in JAX these have no derivative rules; batching sends leading dimensions to the kernel in
one call, and a failed reduction (LAPACK info != 0) gives NaN results.
"""
from __future__ import annotations

from fluxion._src import dtypes
from fluxion._src.core import ShapedArray
from fluxion._src.lax.linalg import lapack
from fluxion._src.lax.linalg.primitives import _check_matrix, _primitive, _real_dtype


# ---------------------------------------------------------------------------------------------
# schur

def _schur_abstract_eval(a, *, compute_schur_vectors, sort_eig_vals, select_callable):
    _check_matrix("schur", a)
    out = ShapedArray(a.shape, a.dtype)
    return [out, out] if compute_schur_vectors else [out]


def _schur_cpu(ctx, a, *, compute_schur_vectors, sort_eig_vals, select_callable):
    if sort_eig_vals:
        raise NotImplementedError(
            "The sort feature of LAPACK's gees routine is not implemented.")
    batch = a.shape[:-2]
    if a.shape[-1] == 0:
        return [a, a] if compute_schur_vectors else [a]
    real = not dtypes.is_complex(a.dtype)
    mat = a.aval.update(weak_type=False)
    w = ShapedArray(a.shape[:-1], a.dtype)
    info = lapack.info_aval(batch)
    avals = [mat, mat] + ([w, w] if real else [w]) + [info, info]  # ..., sdim, info
    outs = lapack.call(ctx, "gees", a.dtype, [a], avals,
                       {"mode": lapack.char("V" if compute_schur_vectors else "N"),
                        "sort": lapack.char("N")},
                       matrix_results=[True, True] + [False] * (len(avals) - 2))
    t, z, info = outs[0], outs[1], outs[-1]
    result = [lapack.nan_where_failed(ctx, info, t, len(batch))]
    if compute_schur_vectors:
        result.append(lapack.nan_where_failed(ctx, info, z, len(batch)))
    return result


schur_p = _primitive("schur", _schur_abstract_eval, _schur_cpu, multiple_results=True)


def schur(x, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable=None):
    """Schur decomposition x = Q T Q^H of a batch of square matrices.

    T is quasi upper triangular (2x2 blocks for complex-conjugate eigenvalue pairs) for real
    input and upper triangular for complex input. Returns (T, Q), or T alone when
    `compute_schur_vectors` is False. `sort_eig_vals` and `select_callable` are unused (as
    in JAX, sorting raises NotImplementedError).
    """
    outs = schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors),
                        sort_eig_vals=bool(sort_eig_vals), select_callable=select_callable)
    return tuple(outs) if compute_schur_vectors else outs[0]


# ---------------------------------------------------------------------------------------------
# hessenberg

def _hessenberg_abstract_eval(a):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"Argument to Hessenberg reduction must have shape [..., n, n], "
                         f"got shape {a.shape}")
    _check_matrix("hessenberg", a)
    return [ShapedArray(a.shape, a.dtype),
            ShapedArray(a.shape[:-2] + (max(a.shape[-1] - 1, 0),), a.dtype)]


def _hessenberg_cpu(ctx, a):
    batch = a.shape[:-2]
    n = a.shape[-1]
    taus = ShapedArray(batch + (max(n - 1, 0),), a.dtype)
    if n <= 1:
        return [a, ctx.constant(0, a.dtype, taus.shape)]
    out, tau, info = lapack.call(ctx, "gehrd", a.dtype, [a],
                                 [a.aval.update(weak_type=False), taus,
                                  lapack.info_aval(batch)],
                                 {"low": "1 : i32", "high": f"{n} : i32"},
                                 matrix_results=[True, False, False])
    return [lapack.nan_where_failed(ctx, info, out, len(batch)),
            lapack.nan_where_failed(ctx, info, tau, len(batch))]


hessenberg_p = _primitive("hessenberg", _hessenberg_abstract_eval, _hessenberg_cpu,
                          multiple_results=True)


def hessenberg(a):
    """Reduce square matrices to upper Hessenberg form (LAPACK gehrd).

    Returns (a, taus): the upper triangle and first subdiagonal of `a` hold the Hessenberg
    matrix, the entries below hold Householder reflectors whose scalar factors are `taus`.
    """
    out, taus = hessenberg_p.bind(a)
    return out, taus


# ---------------------------------------------------------------------------------------------
# tridiagonal

def _tridiagonal_abstract_eval(a, *, lower):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2] or a.shape[-1] == 0:
        raise ValueError(f"The input to tridiagonal must be a square matrix. Got shape "
                         f"{a.shape}.")
    _check_matrix("tridiagonal", a)
    batch, n = a.shape[:-2], a.shape[-1]
    real = _real_dtype(a.dtype)
    return [ShapedArray(a.shape, a.dtype), ShapedArray(batch + (n,), real),
            ShapedArray(batch + (n - 1,), real), ShapedArray(batch + (n - 1,), a.dtype)]


def _tridiagonal_cpu(ctx, a, *, lower):
    batch = a.shape[:-2]
    avals = [av.update(weak_type=False) for av in ctx.avals_out] + [lapack.info_aval(batch)]
    *outs, info = lapack.call(ctx, "sytrd", a.dtype, [a], avals,
                              {"uplo": lapack.char("L" if lower else "U")},
                              matrix_results=[True, False, False, False, False])
    return [lapack.nan_where_failed(ctx, info, x, len(batch)) for x in outs]


tridiagonal_p = _primitive("tridiagonal", _tridiagonal_abstract_eval, _tridiagonal_cpu,
                           multiple_results=True)


def tridiagonal(a, *, lower: bool = True):
    """Reduce symmetric/Hermitian matrices to tridiagonal form (LAPACK sytrd/hetrd).

    Returns (a, d, e, taus): `d` is the diagonal, `e` the first sub- (`lower`) or
    super-diagonal (both real), and the reflectors are stored in `a` beyond that diagonal,
    with scalar factors `taus`. Only the `lower` (or upper) triangle of the input is read.
    """
    import fluxion.numpy as jnp
    arr, d, e, taus = tridiagonal_p.bind(jnp.asarray(a), lower=bool(lower))
    return [arr, d, e, taus]  # a list, as JAX

