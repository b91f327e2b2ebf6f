"""lax.linalg primitives on LAPACK: cholesky, lu, lu_pivots_to_permutation, geqrf,
householder_product, qr, eigh, svd, triangular_solve.

Every primitive takes leading batch dimensions, which travel to the LAPACK kernel in one call.
A failed factorization (LAPACK info != 0) gives NaN results, as in JAX.
"""
from __future__ import annotations

import enum

import numpy as np

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.core import ShapedArray
from fluxion._src.export.shape_poly import is_symbolic_dim, min_dim
from fluxion._src.lax.linalg import lapack


class EigImplementation(enum.Enum):
    """Enum for eigendecomposition algorithm."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    """Implementation for symmetric/Hermitian eigendecomposition."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class SvdAlgorithm(enum.Enum):
    """Enum for SVD algorithm."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


# ---------------------------------------------------------------------------------------------
# shared helpers

def _jnp():
    import fluxion.numpy as jnp
    return jnp


def _check_matrix(name, a, square=True, min_ndim=2):
    if a.ndim < min_ndim:  # TypeError, as JAX's rank check for linalg primitives
        raise TypeError(f"{name} requires its input to have at least {min_ndim} dimensions, "
                         f"got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name} requires the last two dimensions of its input to be equal "
                         f"(a square matrix), got shape {a.shape}")
    if (dtypes.is_float(a.dtype) or dtypes.is_complex(a.dtype)) and \
            np.dtype(a.dtype) not in lapack._PREFIX:  # float16, bfloat16: as JAX's lowering
        raise NotImplementedError(f"{name}: Unsupported dtype {np.dtype(a.dtype).name}. LAPACK "
                                  f"takes float32, float64, complex64 or complex128")
    if not (dtypes.is_float(a.dtype) or dtypes.is_complex(a.dtype)):
        raise TypeError(f"{name} requires a float32, float64, complex64 or complex128 input, "
                        f"got {np.dtype(a.dtype).name}")


def _real_dtype(dtype):
    return np.finfo(np.dtype(dtype)).dtype


def _H(x):
    jnp = _jnp()
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _T(x):
    return _jnp().swapaxes(x, -1, -2)


def _mask(ctx, x, lower: bool, k: int = 0):
    """tril(x, k) (lower) or triu(x, k) of a (batched) matrix value inside a lowering."""
    shape = x.shape
    i32 = ShapedArray(shape, np.int32)
    rows = ctx.iota(i32, len(shape) - 2)
    cols = ctx.iota(i32, len(shape) - 1)
    diff = ctx.sub(cols, rows)
    keep = ctx.compare(diff, ctx.constant(k, np.int32, shape), "LE" if lower else "GE")
    return ctx.select(keep, x, ctx.constant(0, x.dtype, shape))


def _batch_front(prim):
    """Batching rule: every operand gets the batch dimension first, one call to the kernel."""
    def rule(args, dims, **params):
        size = next(core.get_aval(x).shape[d] for x, d in zip(args, dims)
                    if d is not batching.not_mapped)
        args = [batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)]
        outs = prim.bind(*args, **params)
        if prim.multiple_results:
            return outs, [0] * len(outs)
        return outs, 0
    batching.primitive_batchers[prim] = rule


def _primitive(name, abstract_eval, cpu_lowering, multiple_results=False):
    prim = core.Primitive(name)
    prim.multiple_results = multiple_results
    prim.def_abstract_eval(abstract_eval)
    lowering.register_lowering(prim, cpu_lowering, platform="cpu")
    _batch_front(prim)
    return prim


# ---------------------------------------------------------------------------------------------
# cholesky

def _cholesky_abstract_eval(a):
    _check_matrix("cholesky", a)
    return ShapedArray(a.shape, a.dtype)


def _cholesky_cpu(ctx, a):
    batch = a.shape[:-2]
    out, info = lapack.call(ctx, "potrf", a.dtype, [a],
                            [a.aval.update(weak_type=False), lapack.info_aval(batch)],
                            {"uplo": lapack.char("L")})
    # NaN where the factorization failed, in the lower triangle only (as JAX).
    return _mask(ctx, lapack.nan_where_failed(ctx, info, out, len(batch)), lower=True)


cholesky_p = _primitive("cholesky", _cholesky_abstract_eval, _cholesky_cpu)


def _hermitian_tangent(tangent, lower: bool):
    """The tangent of a factorization that reads one triangle of its operand (and the real
    part of the diagonal): the Hermitian matrix that triangle makes. Nothing flows to the
    other triangle, and a Hermitian tangent is unchanged."""
    jnp = _jnp()
    strict = jnp.tril(tangent, -1) if lower else jnp.triu(tangent, 1)
    diagonal = jnp.eye(tangent.shape[-1], dtype=tangent.dtype) * (tangent + _H(tangent)) / 2
    return strict + _H(strict) + diagonal


def _cholesky_jvp(primals, tangents):
    x, = primals
    sigma_dot = _hermitian_tangent(ad.instantiate(tangents[0]), lower=True)
    L = cholesky_p.bind(x)
    # dL = L phi(L^-1 dA L^-H), phi takes the lower triangle with the diagonal halved.
    tmp = triangular_solve(L, sigma_dot, left_side=False, transpose_a=True, conjugate_a=True,
                           lower=True)
    L_dot = L @ _phi(triangular_solve(L, tmp, left_side=True, transpose_a=False, lower=True))
    return L, L_dot


def _phi(x):
    jnp = _jnp()
    n = x.shape[-1]
    return jnp.tril(x) * (1 - 0.5 * jnp.eye(n, dtype=x.dtype))


ad.primitive_jvps[cholesky_p] = _cholesky_jvp


def cholesky(x, *, symmetrize_input: bool = True):
    """Cholesky factor L (lower triangular, x = L L^H) of a batch of Hermitian PD matrices.

    Returns NaN for a matrix that is not positive definite.
    """
    _check_matrix("cholesky", core.get_aval(x))
    if symmetrize_input:
        x = symmetrize(x)
    return cholesky_p.bind(x)


def symmetrize(x):
    """(x + x^H) / 2."""
    return (x + _H(x)) / 2


# ---------------------------------------------------------------------------------------------
# triangular_solve

def _triangular_solve_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a,
                                    unit_diagonal):
    _check_matrix("triangular_solve", a)
    if b.ndim < 2:
        raise ValueError(f"triangular_solve requires b to have at least 2 dimensions, got "
                         f"shape {b.shape}")
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve requires a and b to have the same dtype, got "
                        f"{a.dtype} and {b.dtype}")
    if a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"triangular_solve requires both arguments to have the same number of "
                         f"dimensions and equal batch dimensions, got {a.shape} and {b.shape}")
    common = b.shape[-2] if left_side else b.shape[-1]
    if a.shape[-1] != common:
        raise ValueError(f"Incompatible shapes for arguments to triangular_solve: {a.shape} "
                         f"and {b.shape}.")
    return ShapedArray(b.shape, b.dtype)


def _triangular_solve_cpu(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a,
                          unit_diagonal):
    if conjugate_a and not transpose_a:
        a = ctx.op1("chlo.conj", [a], a.aval) if dtypes.is_complex(a.dtype) else a
        conjugate_a = False
    trans = ("C" if conjugate_a else "T") if transpose_a else "N"
    if b.shape[-1] == 0 or b.shape[-2] == 0:
        return b
    out, = lapack.call(ctx, "trsm", a.dtype, [a, b], [b.aval.update(weak_type=False)],
                       {"side": lapack.char("L" if left_side else "R"),
                        "uplo": lapack.char("L" if lower else "U"),
                        "trans_x": lapack.char(trans),
                        "diag": lapack.char("U" if unit_diagonal else "N")}, alias=(0, 1))
    return out


triangular_solve_p = _primitive("triangular_solve", _triangular_solve_abstract_eval,
                                 _triangular_solve_cpu)


def _triangular_solve_jvp(primals, tangents, **params):
    jnp = _jnp()
    a, b = primals
    g_a, g_b = tangents
    ans = triangular_solve_p.bind(a, b, **params)
    out = None
    if type(g_b) is not ad.Zero:
        out = triangular_solve_p.bind(a, g_b, **params)
    if type(g_a) is not ad.Zero:
        k = 1 if params["unit_diagonal"] else 0
        g = jnp.tril(g_a, -k) if params["lower"] else jnp.triu(g_a, k)
        g = -g
        if params["transpose_a"]:
            g = _T(g)
        if params["conjugate_a"]:
            g = jnp.conj(g)
        rhs = g @ ans if params["left_side"] else ans @ g
        term = triangular_solve_p.bind(a, rhs, **params)
        out = term if out is None else out + term
    if out is None:
        out = ad.Zero.from_primal_value(ans)
    return ans, out


def _triangular_solve_transpose(ct, a, b, **params):
    assert ad.is_undefined_primal(b) and not ad.is_undefined_primal(a)
    if type(ct) is ad.Zero:
        return [None, ad.Zero(b.aval)]
    params = dict(params, transpose_a=not params["transpose_a"])
    return [None, triangular_solve_p.bind(a, ct, **params)]


ad.primitive_jvps[triangular_solve_p] = _triangular_solve_jvp
ad.primitive_transposes[triangular_solve_p] = _triangular_solve_transpose


def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False):
    """Solve op(a) x = b (left_side) or x op(a) = b for triangular `a`.

    op(a) is a, a^T or a^H by `transpose_a`/`conjugate_a`. Only the `lower` (or upper)
    triangle of `a` is read. `b` may have one dimension less than `a` (a vector).
    """
    jnp = _jnp()
    a, b = jnp.asarray(a), jnp.asarray(b)
    singleton = b.ndim == a.ndim - 1
    if singleton:
        b = b[..., None] if left_side else b[..., None, :]
    out = triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                  transpose_a=bool(transpose_a),
                                  conjugate_a=bool(conjugate_a),
                                  unit_diagonal=bool(unit_diagonal))
    if singleton:
        out = out[..., 0] if left_side else out[..., 0, :]
    return out


# ---------------------------------------------------------------------------------------------
# lu, lu_pivots_to_permutation

def _lu_pivots_abstract_eval(pivots, *, permutation_size):
    if pivots.ndim < 1 or pivots.dtype != np.int32:
        raise ValueError(f"Argument to lu_pivots_to_permutation must have rank >= 1 and dtype "
                         f"int32. Got shape={pivots.shape} and dtype={pivots.dtype}")
    if permutation_size < pivots.shape[-1]:
        raise ValueError(f"Output permutation size {permutation_size} has to exceed the "
                         f"trailing dimension of the pivots. Got pivots size "
                         f"{pivots.shape[-1]}")
    return ShapedArray(pivots.shape[:-1] + (permutation_size,), np.int32)


def _lu_pivots_impl(pivots, *, permutation_size):
    from fluxion._src.lax import control_flow
    jnp = _jnp()
    batch = pivots.shape[:-1]
    k = pivots.shape[-1]
    perm = jnp.broadcast_to(jnp.arange(permutation_size, dtype=np.int32),
                            batch + (permutation_size,))
    if k == 0 or permutation_size == 0:
        return perm
    if not batch:  # swaps of single elements: dynamic slices, no gathers or index vectors
        from fluxion._src.lax import structural

        def swap(i, p):
            j = structural.dynamic_index_in_dim(pivots, i, 0, keepdims=False)
            pi = structural.dynamic_index_in_dim(p, i, 0)
            pj = structural.dynamic_index_in_dim(p, j, 0)
            p = structural.dynamic_update_index_in_dim(p, pj, i, 0)
            return structural.dynamic_update_index_in_dim(p, pi, j, 0)

        return control_flow.fori_loop(0, k, swap, perm)
    flat_piv = pivots.reshape((-1, k))
    flat_perm = perm.reshape((-1, permutation_size))
    rows = jnp.arange(flat_perm.shape[0])

    def body(i, p):
        j = flat_piv[:, i]
        pi, pj = p[rows, i], p[rows, j]
        return p.at[rows, i].set(pj).at[rows, j].set(pi)

    return control_flow.fori_loop(0, k, body, flat_perm).reshape(batch + (permutation_size,))


lu_pivots_to_permutation_p = _primitive(
    "lu_pivots_to_permutation", _lu_pivots_abstract_eval,
    lowering.lower_fun(_lu_pivots_impl, multiple_results=False))
ad.defjvp_zero(lu_pivots_to_permutation_p)


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """Turn LAPACK-style (0-based) row-swap pivots into a permutation of `permutation_size`."""
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


def _lu_abstract_eval(a):
    _check_matrix("lu", a, square=False)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    return [ShapedArray(a.shape, a.dtype), ShapedArray(batch + (min_dim(m, n),), np.int32),
            ShapedArray(batch + (m,), np.int32)]


def lu_rule(getrf, permutation):
    """An lu lowering around `getrf(ctx, a, piv_aval) -> (lu, 1-based pivots, info)` and
    `permutation(ctx, pivots, permutation_size=m)`."""
    def rule(ctx, a):
        batch = a.shape[:-2]
        m, n = a.shape[-2:]
        piv_aval = ShapedArray(batch + (min_dim(m, n),), np.int32)
        if m == 0 or n == 0:
            piv = ctx.constant(0, np.int32, piv_aval.shape)
            lu_out = a
        else:
            lu_out, piv, info = getrf(ctx, a, piv_aval)
            piv = ctx.sub(piv, ctx.constant(1, np.int32, piv_aval.shape))
            # info > 0 (exactly singular) is a valid factorization; negative info an error.
            ok = ctx.compare(info, ctx.constant(0, np.int32, info.shape), "GE")
            ok = ctx.broadcast_in_dim(ok, lu_out.shape, list(range(len(batch))))
            lu_out = ctx.select(ok, lu_out, ctx.constant(np.nan, a.dtype, a.shape))
        return [lu_out, piv, permutation(ctx, piv, permutation_size=m)]
    return rule


def _getrf_lapack(ctx, a, piv_aval):
    return lapack.call(ctx, "getrf", a.dtype, [a], [a.aval.update(weak_type=False), piv_aval,
                                                   lapack.info_aval(a.shape[:-2])],
                       matrix_results=[True, False, False])


_lu_cpu = lu_rule(_getrf_lapack, lowering.lower_fun(_lu_pivots_impl, multiple_results=False))


lu_p = _primitive("lu", _lu_abstract_eval, _lu_cpu, multiple_results=True)


def _lu_jvp(primals, tangents):
    jnp = _jnp()
    a, = primals
    a_dot = ad.instantiate(tangents[0])
    lu_out, pivots, permutation = lu_p.bind(a)
    m, n = a.shape[-2:]
    k = min_dim(m, n)
    dtype = a.dtype
    x = jnp.take_along_axis(a_dot, permutation[..., :, None].astype(np.int32), axis=-2)
    batch_pad = [(0, 0)] * (a.ndim - 2)
    l = jnp.pad(jnp.tril(lu_out[..., :, :k], -1), batch_pad + [(0, 0), (0, m - k)])
    l = l + jnp.eye(m, dtype=dtype)
    u = jnp.pad(jnp.triu(lu_out[..., :k, :]), batch_pad + [(0, n - k), (0, 0)])
    if not (is_symbolic_dim(k) and n - k == 0):  # (a symbolic pad of an empty eye: zeros)
        u = u + jnp.pad(jnp.eye(n - k, dtype=dtype), [(k, 0), (k, 0)])
    la = triangular_solve(l, x, left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(u, la, left_side=False, lower=False)
    l_dot = l @ jnp.tril(lau, -1)
    u_dot = jnp.triu(lau) @ u
    lu_dot = (l_dot + u_dot)[..., :m, :n]
    return ([lu_out, pivots, permutation],
            [lu_dot, ad.Zero.from_primal_value(pivots), ad.Zero.from_primal_value(permutation)])


ad.primitive_jvps[lu_p] = _lu_jvp


def lu(x):
    """LU decomposition with partial pivoting: returns (lu, pivots, permutation).

    `lu` holds L (unit lower, below the diagonal) and U; `pivots` are 0-based row swaps;
    `permutation` is the row permutation with x[permutation] = L @ U.
    """
    lu_out, pivots, permutation = lu_p.bind(x)
    return [lu_out, pivots, permutation]  # a list, as JAX


# ---------------------------------------------------------------------------------------------
# geqrf, householder_product, qr

def _geqrf_abstract_eval(a):
    _check_matrix("geqrf", a, square=False)
    m, n = a.shape[-2:]
    return [ShapedArray(a.shape, a.dtype), ShapedArray(a.shape[:-2] + (min_dim(m, n),), a.dtype)]


def _geqrf_cpu(ctx, a):
    m, n = a.shape[-2:]
    tau_aval = ShapedArray(a.shape[:-2] + (min_dim(m, n),), a.dtype)
    if m == 0 or n == 0:
        return [a, ctx.constant(0, a.dtype, tau_aval.shape)]
    out, tau = lapack.call(ctx, "geqrf", a.dtype, [a], [a.aval.update(weak_type=False),
                                                        tau_aval],
                           matrix_results=[True, False])
    return [out, tau]


geqrf_p = _primitive("geqrf", _geqrf_abstract_eval, _geqrf_cpu, multiple_results=True)


def geqrf(a):
    """LAPACK geqrf: R in the upper triangle and Householder vectors below, plus taus."""
    out, taus = geqrf_p.bind(a)
    return out, taus


def _householder_product_abstract_eval(a, taus):
    _check_matrix("householder_product", a, square=False)
    m, n = a.shape[-2:]
    if taus.shape[:-1] != a.shape[:-2] or taus.shape[-1] > min_dim(m, n) or taus.dtype != a.dtype:
        raise ValueError(f"Type mismatch for Householder product: a={a}, taus={taus}")
    if m < n:
        raise ValueError(f"The first dimension of a must be at least as large as the second, "
                         f"got shape {a.shape}")
    return ShapedArray(a.shape, a.dtype)


def _householder_product_cpu(ctx, a, taus):
    if 0 in a.shape[-2:]:
        return a
    out, = lapack.call(ctx, "orgqr", a.dtype, [a, taus], [a.aval.update(weak_type=False)],
                       matrix_operands=[True, False])
    return out


householder_product_p = _primitive("householder_product", _householder_product_abstract_eval,
                                   _householder_product_cpu)


def householder_product(a, taus):
    """The product of the Householder reflectors stored in `a` and `taus` (LAPACK orgqr)."""
    return householder_product_p.bind(a, taus)


def _geqp3_abstract_eval(a, jpvt, *, use_magma=None):
    _check_matrix("geqp3", a, square=False)
    if jpvt.shape != a.shape[:-2] + (a.shape[-1],) or not dtypes.is_integer(jpvt.dtype):
        raise ValueError(f"geqp3 requires integer column pivots of shape "
                         f"{a.shape[:-2] + (a.shape[-1],)}, got {jpvt.dtype} {jpvt.shape}")
    m, n = a.shape[-2:]
    return [ShapedArray(a.shape, a.dtype), ShapedArray(jpvt.shape, jpvt.dtype),
            ShapedArray(a.shape[:-2] + (min_dim(m, n),), a.dtype)]


def _geqp3_cpu(ctx, a, jpvt, *, use_magma=None):
    m, n = a.shape[-2:]
    tau_aval = ShapedArray(a.shape[:-2] + (min_dim(m, n),), a.dtype)
    if m == 0 or n == 0:
        return [a, jpvt, ctx.constant(0, a.dtype, tau_aval.shape)]
    out, piv, tau = lapack.call(ctx, "geqp3", a.dtype, [a, jpvt],
                                [a.aval.update(weak_type=False),
                                 jpvt.aval.update(weak_type=False), tau_aval],
                                matrix_operands=[True, False],
                                matrix_results=[True, False, False],
                                alias=[(0, 0), (1, 1)])
    return [out, piv, tau]


geqp3_p = _primitive("geqp3", _geqp3_abstract_eval, _geqp3_cpu, multiple_results=True)


def geqp3(a, jpvt, *, use_magma=None):
    """Column-pivoted QR (LAPACK geqp3): (a, jpvt, taus) with R in the upper triangle of `a`,
    reflectors below it, and 1-based pivots `jpvt` such that a[:, jpvt - 1] = Q R.

    A non-zero entry of the input `jpvt` moves that column to the front (as in LAPACK).
    """
    out, piv, taus = geqp3_p.bind(a, jpvt, use_magma=use_magma)
    return out, piv, taus


def _qr_abstract_eval(a, *, pivoting, full_matrices, use_magma):
    _check_matrix("qr", a, square=False)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    k = m if full_matrices else min_dim(m, n)
    outs = [ShapedArray(batch + (m, k), a.dtype), ShapedArray(batch + (k, n), a.dtype)]
    if pivoting:
        outs.append(ShapedArray(batch + (n,), np.dtype(np.int32)))
    return outs


def _qr_impl(a, *, pivoting, full_matrices, use_magma):
    jnp = _jnp()
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    batch_pad = [(0, 0)] * (a.ndim - 2)
    if m == 0 or n == 0:
        k = m if full_matrices else min_dim(m, n)
        q = jnp.broadcast_to(jnp.eye(m, k, dtype=a.dtype), batch + (m, k))
        r = jnp.zeros(batch + (k, n), a.dtype)
        return [q, r] + ([jnp.zeros(batch + (n,), np.int32)] if pivoting else [])
    if pivoting:
        r, p, taus = geqp3(a, jnp.zeros(batch + (n,), np.int32))
        p = p - 1
    else:
        r, taus = geqrf(a)
    if m < n:
        q = householder_product(r[..., :m, :m], taus)
    elif full_matrices:
        q = householder_product(jnp.pad(r, batch_pad + [(0, 0), (0, m - n)]), taus)
    else:
        q = householder_product(r, taus)
        r = r[..., :n, :n]
    return [q, jnp.triu(r)] + ([p] if pivoting else [])


qr_p = _primitive("qr", _qr_abstract_eval, lowering.lower_fun(_qr_impl), multiple_results=True)


def _thin_qr_jvp(q, r, dx):
    """dq, dr of x = q r for an (m, n) x with m >= n and thin q, r."""
    jnp = _jnp()
    n = r.shape[-1]
    dx_rinv = triangular_solve(r, dx)  # dx r^-1
    qt_dx_rinv = _H(q) @ dx_rinv
    lower = jnp.tril(qt_dx_rinv, -1)
    do = lower - _H(lower)  # skew-Hermitian
    eye = jnp.eye(n, dtype=dx.dtype)
    do = do + eye * (qt_dx_rinv - jnp.real(qt_dx_rinv).astype(dx.dtype))
    dq = q @ (do - qt_dx_rinv) + dx_rinv
    dr = (qt_dx_rinv - do) @ r
    return dq, dr


def _full_qr_jvp(q, r, dx):
    """dq, dr of x = q r for an (m, n) x with m > n, q square (m, m): the thin part as usual,
    and the trailing m - n columns of q from Householder QR's structure (Roberts and Towns,
    arXiv:2409.13374, eqs. 32-33)."""
    jnp = _jnp()
    from fluxion._src.numpy import linalg as np_linalg
    n = r.shape[-1]
    q_mn, q_mp = q[..., :, :n], q[..., :, n:]
    dq_mn, dr_nn = _thin_qr_jvp(q_mn, r[..., :n, :], dx)
    q_nn, q_pn = q_mn[..., :n, :], q_mn[..., n:, :]
    # Z = q_pn (q_nn - I)^-1, from (q_nn - I)^H Z^H = q_pn^H.
    z_h = np_linalg.solve(_H(q_nn - jnp.eye(n, dtype=q.dtype)), _H(q_pn))
    z = _H(z_h)
    dq_mp = dq_mn @ z_h - (q_mn + q_mp @ z) @ _H(dq_mn[..., n:, :] - z @ dq_mn[..., :n, :])
    dq = jnp.concatenate([dq_mn, dq_mp], axis=-1)
    dr = jnp.concatenate([dr_nn, jnp.zeros(r.shape[:-2] + (r.shape[-2] - n, n), r.dtype)],
                         axis=-2)
    return dq, dr


def _qr_jvp(primals, tangents, *, pivoting, full_matrices, use_magma):
    jnp = _jnp()
    x, = primals
    dx = ad.instantiate(tangents[0])
    q, r, *p = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices,
                         use_magma=use_magma)
    m, n = x.shape[-2:]
    if pivoting:
        # x[..., p] = q r, so the factors move with the permuted tangent.
        dx = jnp.take_along_axis(dx, jnp.broadcast_to(p[0][..., None, :], dx.shape), axis=-1)
        x = jnp.take_along_axis(x, jnp.broadcast_to(p[0][..., None, :], x.shape), axis=-1)
    if m < n:
        # x = [x1 x2] = q [r1 r2]: the square part is an ordinary QR, and r2 = q^H x2.
        dq, dr1 = _thin_qr_jvp(q, r[..., :, :m], dx[..., :, :m])
        dr2 = _H(dq) @ x[..., :, m:] + _H(q) @ dx[..., :, m:]
        dr = jnp.concatenate([dr1, dr2], axis=-1)
    elif full_matrices and m != n:
        dq, dr = _full_qr_jvp(q, r, dx)
    else:
        dq, dr = _thin_qr_jvp(q, r, dx)
    outs, tans = [q, r], [dq, dr]
    if pivoting:
        outs.append(p[0])
        tans.append(ad.Zero.from_primal_value(p[0]))
    return outs, tans


ad.primitive_jvps[qr_p] = _qr_jvp


def qr(x, *, pivoting: bool = False, full_matrices: bool = True, use_magma=None):
    """QR decomposition: (q, r) with x = q @ r (`full_matrices`: q is square).

    With `pivoting`, column-pivoted QR: (q, r, p) with x[..., p] = q @ r and the diagonal of
    r non-increasing in magnitude.
    """
    outs = qr_p.bind(x, pivoting=bool(pivoting), full_matrices=bool(full_matrices),
                     use_magma=use_magma)
    return tuple(outs)


# ---------------------------------------------------------------------------------------------
# eigh

def _subset(subset_by_index, size, name):
    """(lo, hi) of a subset_by_index argument, checked against `size` values."""
    if subset_by_index is None:
        return 0, size
    lo, hi = (int(i) for i in subset_by_index)
    if not 0 <= lo <= hi <= size:
        raise ValueError(f"{name}: subset_by_index must satisfy 0 <= start <= end <= {size}, "
                         f"got {tuple(subset_by_index)}")
    return lo, hi


def _eigh_abstract_eval(a, *, lower, sort_eigenvalues, subset_by_index, algorithm=None):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"Argument to symmetric eigendecomposition must have shape "
                         f"[..., n, n], got shape {a.shape}")
    _check_matrix("eigh", a)
    n = a.shape[-1]
    lo, hi = _subset(subset_by_index, n, "eigh")
    return [ShapedArray(a.shape[:-1] + (hi - lo,), a.dtype),
            ShapedArray(a.shape[:-2] + (hi - lo,), _real_dtype(a.dtype))]


def eigh_rule(syevd):
    """An eigh lowering around `syevd(ctx, a, w_aval, lower, algorithm) -> (v, w, info)`, a
    kernel computing every eigenpair (ascending): NaN where it failed, the subset sliced out."""
    def rule(ctx, a, *, lower, sort_eigenvalues, subset_by_index, algorithm=None):
        batch = a.shape[:-2]
        n = a.shape[-1]
        w_aval = ShapedArray(a.shape[:-1], _real_dtype(a.dtype))
        if n == 0:
            return [a, ctx.constant(0, w_aval.dtype, w_aval.shape)]
        v, w, info = syevd(ctx, a, w_aval, lower, algorithm)
        v = lapack.nan_where_failed(ctx, info, v, len(batch))
        w = lapack.nan_where_failed(ctx, info, w, len(batch))
        lo, hi = _subset(subset_by_index, n, "eigh")
        if (lo, hi) != (0, n):
            zeros = [0] * len(batch)
            v = ctx.slice(v, zeros + [0, lo], list(batch) + [n, hi])
            w = ctx.slice(w, zeros + [lo], list(batch) + [hi])
        return [v, w]
    return rule


def _syevd_lapack(ctx, a, w_aval, lower, algorithm):
    return lapack.call(ctx, "syevd", a.dtype, [a], [a.aval.update(weak_type=False), w_aval,
                                                   lapack.info_aval(a.shape[:-2])],
                       {"mode": lapack.char("V"), "uplo": lapack.char("L" if lower else "U")},
                       matrix_results=[True, False, False])


_eigh_cpu = eigh_rule(_syevd_lapack)


eigh_p = _primitive("eigh", _eigh_abstract_eval, _eigh_cpu, multiple_results=True)


def _eigh_jvp(primals, tangents, **params):
    jnp = _jnp()
    a, = primals
    if _subset(params["subset_by_index"], a.shape[-1], "eigh") != (0, a.shape[-1]):
        raise NotImplementedError("Derivatives not defined for partial eigen decomposition.")
    a_dot = _hermitian_tangent(ad.instantiate(tangents[0]), params["lower"])
    v, w = eigh_p.bind(a, **params)
    n = a.shape[-1]
    eye = jnp.eye(n, dtype=w.dtype)
    # F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it (inf for degenerate pairs, as in JAX).
    F = 1 / (eye + w[..., None, :] - w[..., :, None]) - eye
    vh_adot_v = _H(v) @ a_dot @ v
    dv = v @ (F.astype(a.dtype) * vh_adot_v)
    dw = jnp.real(jnp.diagonal(vh_adot_v, axis1=-2, axis2=-1))
    return [v, w], [dv, dw]


ad.primitive_jvps[eigh_p] = _eigh_jvp


def eigh(x, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index=None, implementation=None):
    """Eigendecomposition of Hermitian matrices: returns (v, w), w ascending, x v = v diag(w)."""
    _check_matrix("eigh", core.get_aval(x), square=False)
    if symmetrize_input:  # (of a non-square matrix: the TypeError of x + x^H, as in JAX)
        x = symmetrize(x)
    shape = core.get_aval(x).shape
    if shape[-1] != shape[-2]:
        raise ValueError("Argument to symmetric eigendecomposition must have shape [..., n, n], "
                         f"got shape {shape[-2:]}")  # (the matrix, as JAX)
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues),
                       subset_by_index=None if subset_by_index is None
                       else tuple(subset_by_index), algorithm=implementation)
    return v, w


# ---------------------------------------------------------------------------------------------
# svd

def _svd_abstract_eval(a, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
    _check_matrix("svd", a, square=False)
    m, n = a.shape[-2:]
    k = min_dim(m, n)
    lo, hi = _subset(subset_by_index, k, "svd")
    if (lo, hi) != (0, k):
        if full_matrices:
            raise ValueError("full_matrices and subset_by_index cannot both be set")
        k = hi - lo
    batch = a.shape[:-2]
    s = ShapedArray(batch + (k,), _real_dtype(a.dtype))
    if not compute_uv:
        return [s]
    return [s, ShapedArray(batch + (m, m if full_matrices else k), a.dtype),
            ShapedArray(batch + (n if full_matrices else k, n), a.dtype)]


def _svd_cpu_all(ctx, a, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
    batch = a.shape[:-2]
    m, n = a.shape[-2:]
    k = min_dim(m, n)
    if algorithm not in (None, SvdAlgorithm.DEFAULT, SvdAlgorithm.QR,
                         SvdAlgorithm.DIVIDE_AND_CONQUER):
        raise NotImplementedError("The SVD Jacobi and Polar algorithms are not implemented on "
                                  "CPU.")
    if m == 0 or n == 0:
        outs = [ctx.constant(0, _real_dtype(a.dtype), batch + (k,))]
        if compute_uv:
            for shape in ((m, m if full_matrices else k), (n if full_matrices else k, n)):
                outs.append(ctx.constant(np.eye(*shape, dtype=a.dtype), a.dtype) if not batch
                            else ctx.broadcast(ctx.constant(np.eye(*shape, dtype=a.dtype),
                                                            a.dtype), batch + shape))
        return outs
    mode = "S" if compute_uv and not full_matrices else ("A" if compute_uv else "N")
    s_aval = ShapedArray(batch + (k,), _real_dtype(a.dtype))
    u_aval = ShapedArray(batch + (m, m if full_matrices else k), a.dtype)
    vt_aval = ShapedArray(batch + (n if full_matrices else k, n), a.dtype)
    op = "gesvd" if algorithm == SvdAlgorithm.QR else "gesdd"
    _, s, u, vt, info = lapack.call(
        ctx, op, a.dtype, [a],
        [a.aval.update(weak_type=False), s_aval, u_aval, vt_aval, lapack.info_aval(batch)],
        {"mode": lapack.char(mode)}, matrix_results=[True, False, True, True, False])
    outs = [lapack.nan_where_failed(ctx, info, s, len(batch))]
    if compute_uv:
        outs += [lapack.nan_where_failed(ctx, info, u, len(batch)),
                 lapack.nan_where_failed(ctx, info, vt, len(batch))]
    return outs


def svd_rule(compute_all):
    """An svd lowering from `compute_all(ctx, a, full_matrices=, compute_uv=, algorithm=)`,
    which computes every singular value (descending): `subset_by_index` is sliced out."""
    def rule(ctx, a, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
        m, n = a.shape[-2:]
        k = min_dim(m, n)
        lo, hi = _subset(subset_by_index, k, "svd")
        outs = compute_all(ctx, a, full_matrices=full_matrices, compute_uv=compute_uv,
                           algorithm=algorithm)
        if (lo, hi) == (0, k):
            return outs
        batch = list(a.shape[:-2])
        z = [0] * len(batch)
        sliced = [ctx.slice(outs[0], z + [lo], batch + [hi])]
        if compute_uv:
            sliced += [ctx.slice(outs[1], z + [0, lo], batch + [m, hi]),
                       ctx.slice(outs[2], z + [lo, 0], batch + [hi, n])]
        return sliced
    return rule


_svd_cpu = svd_rule(lambda ctx, a, **kw: _svd_cpu_all(ctx, a, subset_by_index=None, **kw))


svd_p = _primitive("svd", _svd_abstract_eval, _svd_cpu, multiple_results=True)


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
    jnp = _jnp()
    A, = primals
    k = min_dim(*A.shape[-2:])
    if _subset(subset_by_index, k, "svd") != (0, k):
        raise NotImplementedError("Derivatives not defined for a partial singular value "
                                  "decomposition (subset_by_index).")
    dA = ad.instantiate(tangents[0])
    s, U, Vt = svd_p.bind(A, full_matrices=False, compute_uv=True,
                          subset_by_index=subset_by_index, algorithm=algorithm)
    if compute_uv and full_matrices and A.shape[-2] != A.shape[-1]:
        # (a square matrix's full and reduced SVDs are the same, as JAX uses)
        raise NotImplementedError(
            "Singular value decomposition JVP not implemented for full matrices")
    Ut, V = _H(U), _H(Vt)
    s_dim = s[..., None, :]
    dS = Ut @ dA @ V
    ds = jnp.real(jnp.diagonal(dS, axis1=-2, axis2=-1))
    if not compute_uv:
        return [s], [ds]
    s_diffs = (s_dim + _T(s_dim)) * (s_dim - _T(s_dim))
    s_diffs_zeros = (s_diffs == 0).astype(s.dtype)
    F = 1 / (s_diffs + s_diffs_zeros) - s_diffs_zeros
    dSS = s_dim.astype(A.dtype) * dS
    SdS = _T(s_dim.astype(A.dtype)) * dS
    s_zeros = (s == 0).astype(s.dtype)
    s_inv = 1 / (s + s_zeros) - s_zeros
    s_inv_mat = s_inv[..., None, :] * jnp.eye(s.shape[-1], dtype=s.dtype)
    dUdV_diag = 0.5 * (dS - _H(dS)) * s_inv_mat.astype(A.dtype)
    dU = U @ (F.astype(A.dtype) * (dSS + _H(dSS)) + dUdV_diag)
    dV = V @ (F.astype(A.dtype) * (SdS + _H(SdS)))
    m, n = A.shape[-2:]
    if m > n:
        dAV = dA @ V
        dU = dU + (dAV - U @ (Ut @ dAV)) / s_dim.astype(A.dtype)
    if n > m:
        dAHU = _H(dA) @ U
        dV = dV + (dAHU - V @ (Vt @ dAHU)) / s_dim.astype(A.dtype)
    return [s, U, Vt], [ds, dU, _H(dV)]


ad.primitive_jvps[svd_p] = _svd_jvp


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index=None,
        algorithm=None):
    """Singular value decomposition: (u, s, vh) with x = u diag(s) vh, or s alone."""
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                      subset_by_index=None if subset_by_index is None
                      else tuple(subset_by_index), algorithm=algorithm)
    if compute_uv:
        s, u, vt = outs
        return u, s, vt
    return outs[0]


# ---------------------------------------------------------------------------------------------
# eig (general, non-symmetric)

def _complex_dtype(dtype):
    return np.dtype(np.complex64) if np.dtype(dtype) in (np.float32, np.complex64) \
        else np.dtype(np.complex128)


def _eig_abstract_eval(a, *, compute_left_eigenvectors, compute_right_eigenvectors,
                       enable_eigvec_derivs=False, implementation=None):
    _check_matrix("eig", a)
    c = _complex_dtype(a.dtype)
    outs = [ShapedArray(a.shape[:-1], c)]
    outs += [ShapedArray(a.shape, c)] * (int(compute_left_eigenvectors)
                                         + int(compute_right_eigenvectors))
    return outs


def _eig_cpu(ctx, a, *, compute_left_eigenvectors, compute_right_eigenvectors,
             enable_eigvec_derivs=False, implementation=None):
    if implementation not in (None, EigImplementation.LAPACK):
        raise ValueError("Only the lapack implementation is supported on CPU.")
    batch = a.shape[:-2]
    c = _complex_dtype(a.dtype)
    real = not dtypes.is_complex(a.dtype)
    w_aval = ShapedArray(a.shape[:-1], a.dtype)
    v_aval = ShapedArray(a.shape, c)
    avals = ([w_aval, w_aval] if real else [w_aval]) + [v_aval, v_aval,
                                                        lapack.info_aval(batch)]
    outs = lapack.call(ctx, "geev", a.dtype, [a], avals,
                       {"compute_left": lapack.char("V" if compute_left_eigenvectors else "N"),
                        "compute_right": lapack.char("V" if compute_right_eigenvectors
                                                     else "N")},
                       matrix_results=[False] * (len(avals) - 3) + [True, True, False],
                       alias=None)
    *w, vl, vr, info = outs
    if real:
        w = ctx.op1("stablehlo.complex", w, ShapedArray(a.shape[:-1], c))
    else:
        w = w[0]
    result = [lapack.nan_where_failed(ctx, info, w, len(batch))]
    if compute_left_eigenvectors:
        result.append(lapack.nan_where_failed(ctx, info, vl, len(batch)))
    if compute_right_eigenvectors:
        result.append(lapack.nan_where_failed(ctx, info, vr, len(batch)))
    return result


eig_p = _primitive("eig", _eig_abstract_eval, _eig_cpu, multiple_results=True)


def _eig_vectors_jvp(w, v, da):
    """dw, dv of A v = v diag(w) under geev's normalization of v: unit 2-norm columns whose
    largest-magnitude entry is real (first-order perturbation theory, distinct w)."""
    jnp = _jnp()
    from fluxion._src.numpy import linalg as np_linalg
    n = w.shape[-1]
    eye = jnp.eye(n, dtype=w.dtype)
    F = 1 / (eye + w[..., None, :] - w[..., :, None]) - eye
    P = np_linalg.solve(v, da) @ v
    dw = jnp.diagonal(P, axis1=-2, axis2=-1)
    U = v @ (F * P)
    # dv_j = u_j + c_j v_j; c_j keeps the norm (real part) and the phase of the largest
    # entry (imaginary part) fixed.
    k = jnp.argmax(jnp.abs(v), axis=-2)
    top = jnp.arange(n)[:, None] == k[..., None, :]
    u_top = jnp.sum(jnp.where(top, U, 0), axis=-2)
    v_top = jnp.sum(jnp.where(top, v, 0), axis=-2)
    from fluxion import lax
    c = lax.complex(-jnp.real(jnp.sum(jnp.conj(v) * U, axis=-2)),
                    -jnp.imag(u_top) / jnp.real(v_top))
    return dw, U + v * c[..., None, :]


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors,
             enable_eigvec_derivs=False, implementation=None):
    jnp = _jnp()
    if (compute_left_eigenvectors or compute_right_eigenvectors) and not enable_eigvec_derivs:
        raise NotImplementedError(
            "Derivatives of non-symmetric eigenvectors are only valid under assumptions on "
            "the input that cannot be checked (see the enable_eigvec_derivs argument to "
            "lax.linalg.eig). Pass enable_eigvec_derivs=True to lax.linalg.eig to opt in. "
            "See https://github.com/jax-ml/jax/issues/2748 for discussion.")
    a, = primals
    outs = eig_p.bind(a, compute_left_eigenvectors=compute_left_eigenvectors,
                      compute_right_eigenvectors=True,
                      enable_eigvec_derivs=enable_eigvec_derivs,
                      implementation=implementation)
    w, vr = outs[0], outs[-1]
    da = ad.instantiate(tangents[0]).astype(vr.dtype)
    if not (compute_left_eigenvectors or compute_right_eigenvectors):
        from fluxion._src.numpy import linalg as np_linalg
        return [w], [jnp.sum(np_linalg.solve(vr, da) * _T(vr), axis=-1)]
    dw, dvr = _eig_vectors_jvp(w, vr, da)
    primal, tangent = [w], [dw]
    if compute_left_eigenvectors:  # left eigenvectors of a: right ones of a^H
        primal.append(outs[1])
        tangent.append(_eig_vectors_jvp(jnp.conj(w), outs[1], _H(da))[1])
    if compute_right_eigenvectors:
        primal.append(vr)
        tangent.append(dvr)
    return primal, tangent


ad.primitive_jvps[eig_p] = _eig_jvp


def eig(x, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation=None, use_magma=None):
    """Eigendecomposition of general square matrices: [w, vl?, vr?] (complex).

    `enable_eigvec_derivs` opts in to eigenvector derivatives, valid for distinct
    eigenvalues (under geev's normalization: unit norm, largest entry real).
    """
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors),
                      enable_eigvec_derivs=bool(enable_eigvec_derivs),
                      implementation=implementation)


# ---------------------------------------------------------------------------------------------
# symmetric_product (a generic lowering: alpha a a^T + beta c)

def _symmetric_product_abstract_eval(a, c, *, alpha, beta, symmetrize_output):
    if a.ndim < 2 or c.ndim < 2 or c.shape[-1] != c.shape[-2] or \
            c.shape[-1] != a.shape[-2] or a.shape[:-2] != c.shape[:-2]:
        raise ValueError(f"symmetric_product requires a of shape (..., n, k) and c of shape "
                         f"(..., n, n), got {a.shape} and {c.shape}")
    if a.dtype != c.dtype:
        raise TypeError(f"symmetric_product requires equal dtypes, got {a.dtype} and {c.dtype}")
    return ShapedArray(c.shape, c.dtype)


def _symmetric_product_impl(a, c, *, alpha, beta, symmetrize_output):
    jnp = _jnp()
    out = alpha * (a @ _T(a)) + beta * c
    if symmetrize_output:
        out = jnp.tril(out) + _T(jnp.tril(out, -1))
    return out


symmetric_product_p = core.Primitive("symmetric_product")
symmetric_product_p.def_abstract_eval(_symmetric_product_abstract_eval)
lowering.register_lowering(symmetric_product_p,
                           lowering.lower_fun(_symmetric_product_impl, multiple_results=False))
_batch_front(symmetric_product_p)


def _symmetric_product_jvp(primals, tangents, *, alpha, beta, symmetrize_output):
    jnp = _jnp()
    a, c = primals
    da, dc = (ad.instantiate(t) for t in tangents)
    out = symmetric_product_p.bind(a, c, alpha=alpha, beta=beta,
                                   symmetrize_output=symmetrize_output)
    d = alpha * (da @ _T(a) + a @ _T(da)) + beta * dc
    if symmetrize_output:
        d = jnp.tril(d) + _T(jnp.tril(d, -1))
    return out, d


ad.primitive_jvps[symmetric_product_p] = _symmetric_product_jvp


def symmetric_product(a_matrix, c_matrix, *, alpha: float = 1.0, beta: float = 0.0,
                      symmetrize_output: bool = False):
    """alpha * a @ a.T + beta * c (with the lower triangle mirrored if `symmetrize_output`)."""
    return symmetric_product_p.bind(a_matrix, c_matrix, alpha=float(alpha), beta=float(beta),
                                    symmetrize_output=bool(symmetrize_output))


# ---------------------------------------------------------------------------------------------
# tridiagonal_solve (LAPACK gtsv)

def _tridiagonal_solve_abstract_eval(dl, d, du, b, *, perturb_singular):
    if dl.shape != d.shape or dl.shape != du.shape:
        raise TypeError("tridiagonal_solve requires that all diagonal arguments have the same "
                        "shape.")
    if b.ndim < 2 or dl.shape != b.shape[:-1]:
        raise TypeError("tridiagonal_solve requires that the leading ndim-1 dimensions of b "
                        "equal the dimensions of the diagonal arguments.")
    if len({np.dtype(x.dtype) for x in (dl, d, du, b)}) != 1:
        raise TypeError("tridiagonal_solve requires all arguments to have the same dtype")
    _check_matrix("tridiagonal_solve", b, square=False)
    return ShapedArray(b.shape, b.dtype)


def _tridiagonal_solve_cpu(ctx, dl, d, du, b, *, perturb_singular):
    batch = b.shape[:-2]
    if 0 in b.shape[-2:]:
        return b
    out_b = b.aval.update(weak_type=False)
    if perturb_singular:
        lapack.ensure_initialized()
        out, = lapack.kernel_call(ctx, "tridiagonal_solve_perturbed_ffi", [dl, d, du, b],
                                  [out_b], matrix_operands=[False, False, False, True],
                                  alias=None)
        return out
    *_, x, info = lapack.call(ctx, "gtsv", b.dtype, [dl, d, du, b],
                              [dl.aval, d.aval, du.aval, out_b, lapack.info_aval(batch)],
                              matrix_operands=[False, False, False, True],
                              matrix_results=[False, False, False, True, False], alias=None)
    return lapack.nan_where_failed(ctx, info, x, len(batch))


tridiagonal_solve_p = _primitive("tridiagonal_solve", _tridiagonal_solve_abstract_eval,
                                 _tridiagonal_solve_cpu)


def _tridiagonal_product(dl, d, du, b):
    y = d[..., None] * b
    y = y.at[..., 1:, :].add(dl[..., 1:, None] * b[..., :-1, :])
    return y.at[..., :-1, :].add(du[..., :-1, None] * b[..., 1:, :])


def _tridiagonal_solve_jvp(primals, tangents, *, perturb_singular):
    dl, d, du, b = primals
    x = tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=perturb_singular)
    tdl, td, tdu, tb = (ad.instantiate(t) for t in tangents)
    rhs = tb - _tridiagonal_product(tdl, td, tdu, x)
    return x, tridiagonal_solve_p.bind(dl, d, du, rhs, perturb_singular=perturb_singular)


def _tridiagonal_solve_transpose(ct, dl, d, du, b, *, perturb_singular):
    jnp = _jnp()
    assert ad.is_undefined_primal(b)
    if type(ct) is ad.Zero:
        return [None, None, None, ad.Zero(b.aval)]
    zero = jnp.zeros_like(dl[..., :1])
    dl_t = jnp.concatenate([zero, du[..., :-1]], axis=-1)
    du_t = jnp.concatenate([dl[..., 1:], zero], axis=-1)
    return [None, None, None, tridiagonal_solve_p.bind(dl_t, d, du_t, ct,
                                                       perturb_singular=perturb_singular)]


ad.primitive_jvps[tridiagonal_solve_p] = _tridiagonal_solve_jvp
ad.primitive_transposes[tridiagonal_solve_p] = _tridiagonal_solve_transpose


def tridiagonal_solve(dl, d, du, b, *, perturb_singular: bool = False):
    """Solve a tridiagonal system: sub-diagonal dl (dl[0] = 0), diagonal d, super-diagonal du
    (du[-1] = 0), right-hand sides b of shape (..., n, k)."""
    return tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=bool(perturb_singular))
