"""lax.linalg on NVIDIA GPUs: the cuSOLVER and cuSPARSE kernels of jaxlib's CUDA plugin.

The plugin's `_solver`, `_linalg` and `_sparse` modules hand out FFI handlers; they are
registered for "CUDA" on the first GPU linear-algebra lowering (a machine without the plugin
can still lower, for export, and registers nothing). Operands and results are the CPU rules':
column-major matrices, leading batch dimensions in one call, an `info` per matrix that turns a
failed factorization into NaNs. Attributes are the GPU kernels' own (`lower` as a bool where
LAPACK takes `uplo`). schur, hessenberg and geqp3 have no GPU kernel here, as in JAX.
"""
from __future__ import annotations

import importlib
import threading

import numpy as np

from fluxion._src import dtypes
from fluxion._src.compiler import backend, lowering
from fluxion._src.core import ShapedArray
from fluxion._src.export.shape_poly import min_dim
from fluxion._src.lax.linalg import condensed, lapack, ormqr, primitives as p

_lock = threading.Lock()
_registered = False


def ensure_registered() -> None:
    """Register the CUDA plugin's linear-algebra kernels with XLA (once; none without it)."""
    global _registered
    if _registered:
        return
    with _lock:
        if _registered:
            return
        from jaxlib import xla_client
        for module_name in ("gpu_solver", "gpu_linalg", "gpu_sparse"):
            try:
                module = importlib.import_module(f"jaxlib.{module_name}")
            except ImportError:
                continue
            for name, handler, api_version in module.registrations().get("CUDA", []):
                xla_client.register_custom_call_target(name, handler, platform="CUDA",
                                                       api_version=api_version)
        _registered = True


for _prefix in ("cusolver_", "cusparse_", "cu_lu_pivots_to_permutation",
                "cu_tridiagonal_solve_perturbed"):
    backend.register_kernel_registrar(_prefix, ensure_registered)


def _call(ctx, target, operands, result_avals, attrs=None, **kwargs):
    ensure_registered()
    return lapack.kernel_call(ctx, target, operands, result_avals, attrs, **kwargs)


def _bool(value) -> str:
    return "true" if value else "false"


def _register(prim, rule):
    lowering.register_lowering(prim, rule, platform="cuda")


def _strong(aval):
    return aval.update(weak_type=False)


# ---------------------------------------------------------------------------------------------
# cholesky, triangular_solve

def _cholesky(ctx, a):
    batch = a.shape[:-2]
    out, info = _call(ctx, "cusolver_potrf_ffi", [a], [_strong(a.aval), lapack.info_aval(batch)],
                      {"lower": "true"})
    return p._mask(ctx, lapack.nan_where_failed(ctx, info, out, len(batch)), lower=True)


def _triangular_solve(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """XLA's own triangular_solve (cuBLAS trsm underneath)."""
    if conjugate_a and not transpose_a:
        a = ctx.op1("chlo.conj", [a], a.aval) if dtypes.is_complex(a.dtype) else a
        conjugate_a = False
    if b.shape[-1] == 0 or b.shape[-2] == 0:
        return b
    transpose = ("ADJOINT" if conjugate_a else "TRANSPOSE") if transpose_a else "NO_TRANSPOSE"
    return ctx.op1("stablehlo.triangular_solve", [a, b], _strong(b.aval), {
        "left_side": _bool(left_side), "lower": _bool(lower),
        "unit_diagonal": _bool(unit_diagonal),
        "transpose_a": f"#stablehlo<transpose {transpose}>"})


# ---------------------------------------------------------------------------------------------
# lu, lu_pivots_to_permutation

def _getrf(ctx, a, piv_aval):
    return _call(ctx, "cusolver_getrf_ffi", [a],
                 [_strong(a.aval), piv_aval, lapack.info_aval(a.shape[:-2])],
                 matrix_results=[True, False, False])


def _lu_pivots(ctx, pivots, *, permutation_size):
    aval = ShapedArray(pivots.shape[:-1] + (permutation_size,), np.int32)
    if pivots.shape[-1] == 0 or permutation_size == 0:
        return lowering.lower_fun(p._lu_pivots_impl, multiple_results=False)(
            ctx, pivots, permutation_size=permutation_size)
    out, = _call(ctx, "cu_lu_pivots_to_permutation", [pivots], [aval],
                 matrix_operands=[False], matrix_results=[False], alias=None)
    return out


_lu = p.lu_rule(_getrf, _lu_pivots)


# ---------------------------------------------------------------------------------------------
# geqrf, householder_product, ormqr, qr

def _geqrf(ctx, a):
    m, n = a.shape[-2:]
    tau_aval = ShapedArray(a.shape[:-2] + (min_dim(m, n),), a.dtype)
    if m == 0 or n == 0:
        return [a, ctx.constant(0, a.dtype, tau_aval.shape)]
    out, tau = _call(ctx, "cusolver_geqrf_ffi", [a], [_strong(a.aval), tau_aval],
                     matrix_results=[True, False])
    return [out, tau]


def _householder_product(ctx, a, taus):
    if 0 in a.shape[-2:]:
        return a
    out, = _call(ctx, "cusolver_orgqr_ffi", [a, taus], [_strong(a.aval)],
                 matrix_operands=[True, False])
    return out


def _ormqr(ctx, a, taus, c, *, left, transpose):
    if 0 in c.shape[-2:] or taus.shape[-1] == 0:
        return c
    out, = _call(ctx, "cusolver_ormqr_ffi", [a, taus, c], [_strong(c.aval)],
                 {"left": _bool(left), "transpose": _bool(transpose)},
                 matrix_operands=[True, False, True], alias=(0, 2))
    return out


# ---------------------------------------------------------------------------------------------
# eigh, tridiagonal

_EIGH_ALGORITHM = {None: 0, p.EighImplementation.QR: 1, p.EighImplementation.JACOBI: 2}


def _syevd(ctx, a, w_aval, lower, algorithm):
    return _call(ctx, "cusolver_syevd_ffi", [a],
                 [_strong(a.aval), w_aval, lapack.info_aval(a.shape[:-2])],
                 {"lower": _bool(lower), "algorithm": f"{_EIGH_ALGORITHM[algorithm]} : ui8"},
                 matrix_results=[True, False, False])


_eigh_all = p.eigh_rule(_syevd)


def _eigh(ctx, a, **params):
    if params.get("algorithm") == p.EighImplementation.QDWH:
        raise NotImplementedError("QDWH implementation is only supported on TPU")
    return _eigh_all(ctx, a, **params)


def _tridiagonal(ctx, a, *, lower):
    batch = a.shape[:-2]
    avals = [_strong(av) for av in ctx.avals_out] + [lapack.info_aval(batch)]
    *outs, info = _call(ctx, "cusolver_sytrd_ffi", [a], avals, {"lower": _bool(lower)},
                        matrix_results=[True, False, False, False, False])
    return [lapack.nan_where_failed(ctx, info, x, len(batch)) for x in outs]


# ---------------------------------------------------------------------------------------------
# svd

def _svd_kernel(algorithm, m, n) -> str:
    """cuSOLVER's routine for `algorithm`; by default Jacobi up to 1024x1024, else QR (as JAX)."""
    if algorithm in (None, p.SvdAlgorithm.DEFAULT):
        return "gesvdj" if m <= 1024 and n <= 1024 else "gesvd"
    if algorithm == p.SvdAlgorithm.QR:
        return "gesvd"
    if algorithm == p.SvdAlgorithm.JACOBI:
        return "gesvdj"
    if algorithm == p.SvdAlgorithm.POLAR:
        return "gesvdp"
    raise NotImplementedError(
        "Divide-and-conquer SVD (SvdAlgorithm.DIVIDE_AND_CONQUER) is only supported on AMD "
        "(ROCm) GPUs, not on NVIDIA CUDA.")


def _svd_all(ctx, a, *, full_matrices, compute_uv, algorithm):
    batch = a.shape[:-2]
    nb = len(batch)
    m, n = a.shape[-2:]
    k = min(m, n)
    s_aval = ShapedArray(batch + (k,), p._real_dtype(a.dtype))
    info_aval = lapack.info_aval(batch)
    kernel = _svd_kernel(algorithm, m, n)
    if kernel == "gesvd":
        # gesvd wants m >= n: a wide matrix goes in transposed (read row-major), and its U and
        # V^T come back as our V^T and U.
        transposed = m < n
        u_aval = ShapedArray(batch + (m, m if full_matrices else k), a.dtype)
        vt_aval = ShapedArray(batch + (n if full_matrices else k, n), a.dtype)
        if not compute_uv:
            u_aval = vt_aval = ShapedArray((), a.dtype)
        first, second = (vt_aval, u_aval) if transposed else (u_aval, vt_aval)
        _, s, x, y, info = _call(
            ctx, "cusolver_gesvd_ffi", [a], [_strong(a.aval), s_aval, first, second, info_aval],
            {"full_matrices": _bool(full_matrices), "compute_uv": _bool(compute_uv),
             "transposed": _bool(transposed)},
            matrix_results=[True, False, True, True, False], column_major=not transposed)
        u, vt = (y, x) if transposed else (x, y)
    else:
        # Jacobi and polar return V (not V^T) and always need room for U and V; Jacobi has no
        # economy mode for small matrices, which are then sliced.
        economy = not full_matrices and (kernel == "gesvdp" or (m > 32 and n > 32))
        u_aval = ShapedArray(batch + (m, k if economy else m), a.dtype)
        v_aval = ShapedArray(batch + (n, k if economy else n), a.dtype)
        _, s, u, v, info = _call(
            ctx, f"cusolver_{kernel}_ffi", [a], [_strong(a.aval), s_aval, u_aval, v_aval,
                                                 info_aval],
            {"full_matrices": _bool(not economy), "compute_uv": _bool(compute_uv)},
            matrix_results=[True, False, True, True, False])
        if compute_uv:
            vt = ctx.transpose(v, list(range(nb)) + [nb + 1, nb])
            if dtypes.is_complex(a.dtype):
                vt = ctx.op1("chlo.conj", [vt], vt.aval)
            if not full_matrices and not economy:
                z = [0] * nb
                u = ctx.slice(u, z + [0, 0], list(batch) + [m, k])
                vt = ctx.slice(vt, z + [0, 0], list(batch) + [k, n])
    outs = [lapack.nan_where_failed(ctx, info, s, nb)]
    if compute_uv:
        outs += [lapack.nan_where_failed(ctx, info, u, nb),
                 lapack.nan_where_failed(ctx, info, vt, nb)]
    return outs


def _svd_all_or_empty(ctx, a, *, full_matrices, compute_uv, algorithm):
    if 0 in a.shape[-2:]:  # constants only, no kernel
        return p._svd_cpu_all(ctx, a, full_matrices=full_matrices, compute_uv=compute_uv,
                              subset_by_index=None)
    return _svd_all(ctx, a, full_matrices=full_matrices, compute_uv=compute_uv,
                    algorithm=algorithm)


_svd = p.svd_rule(_svd_all_or_empty)


# ---------------------------------------------------------------------------------------------
# eig (cuSOLVER geev: right eigenvectors only)

def unpack_conjugate_pairs(w, packed):
    """Complex eigenvectors from geev's real packing: a conjugate pair w[j], w[j+1] shares
    columns j (real part) and j+1 (imaginary part) of `packed`."""
    import fluxion.numpy as jnp
    complex_pair = w.imag != 0
    # The first of each pair: an odd count of complex eigenvalues up to and including it.
    first = jnp.cumsum(complex_pair.astype(np.int32), axis=-1) % 2 == 1
    complex_pair, first = complex_pair[..., None, :], first[..., None, :]
    zero = jnp.zeros_like(packed[..., :1])
    next_col = jnp.concatenate([packed[..., 1:], zero], axis=-1)
    prev_col = jnp.concatenate([zero, packed[..., :-1]], axis=-1)
    real = jnp.where(first | ~complex_pair, packed, prev_col)
    imag = jnp.where(first, next_col, -packed)
    imag = jnp.where(complex_pair, imag, jnp.zeros_like(imag))
    return real + 1j * imag.astype(w.dtype)


def _zero_unless_finite(a):
    import fluxion.numpy as jnp
    finite = jnp.all(jnp.isfinite(a), axis=(-2, -1))
    return [jnp.where(finite[..., None, None], a, jnp.zeros_like(a)), finite]


def _eig(ctx, a, *, compute_left_eigenvectors, compute_right_eigenvectors,
         enable_eigvec_derivs=False, implementation=None):
    if implementation not in (None, p.EigImplementation.CUSOLVER):
        raise NotImplementedError(f"eig on CUDA: only the cusolver implementation is "
                                  f"available, got {implementation}")
    if compute_left_eigenvectors:
        raise NotImplementedError("Left eigenvectors are not supported by cusolver")
    batch = a.shape[:-2]
    c = p._complex_dtype(a.dtype)
    square = _strong(a.aval)
    w_aval = ShapedArray(a.shape[:-1], c)
    # cusolverDnXgeev fails outright (an INTERNAL error) on a matrix holding NaN or inf: such
    # a matrix goes in as zeros and its results come out NaN, as LAPACK's do on the CPU.
    a, finite = lowering.lower_fun(_zero_unless_finite)(ctx, a)
    _, w, _, vr, info = _call(ctx, "cusolver_geev_ffi", [a],
                              [square, w_aval, square, square, lapack.info_aval(batch)],
                              {"left": "false", "right": _bool(compute_right_eigenvectors)},
                              matrix_results=[True, False, True, True, False])
    info = ctx.select(finite, info, ctx.constant(1, np.int32, info.shape))
    result = [lapack.nan_where_failed(ctx, info, w, len(batch))]
    if compute_right_eigenvectors:
        if not dtypes.is_complex(a.dtype):
            vr = lowering.lower_fun(unpack_conjugate_pairs, multiple_results=False)(ctx, w, vr)
        result.append(lapack.nan_where_failed(ctx, info, vr, len(batch)))
    return result


# ---------------------------------------------------------------------------------------------
# tridiagonal_solve

def _thomas(dl, d, du, b, *, perturb_singular):
    """The Thomas algorithm unrolled, for the 1- and 2-row systems cuSPARSE does not take."""
    n = b.shape[-2]
    c_prime, d_prime = [], []
    for i in range(n):
        denom = d[..., i] if i == 0 else d[..., i] - dl[..., i] * c_prime[-1]
        c_prime.append(du[..., i] / denom)
        rhs = b[..., i, :] if i == 0 else b[..., i, :] - dl[..., i, None] * d_prime[-1]
        d_prime.append(rhs / denom[..., None])
    x = [d_prime[-1]]
    for i in range(n - 2, -1, -1):
        x.insert(0, d_prime[i] - c_prime[i][..., None] * x[0])
    import fluxion.numpy as jnp
    return jnp.stack(x, axis=-2)


def _tridiagonal_solve(ctx, dl, d, du, b, *, perturb_singular):
    if 0 in b.shape[-2:]:
        return b
    out_b = _strong(b.aval)
    flags = [False, False, False, True]
    if perturb_singular:
        out, = _call(ctx, "cu_tridiagonal_solve_perturbed", [dl, d, du, b], [out_b],
                     matrix_operands=flags, alias=None)
        return out
    if b.shape[-2] <= 2:
        return lowering.lower_fun(_thomas, multiple_results=False)(
            ctx, dl, d, du, b, perturb_singular=False)
    out, = _call(ctx, "cusparse_gtsv2_ffi", [dl, d, du, b], [out_b],
                 matrix_operands=flags, alias=(0, 3))
    return out


_register(p.cholesky_p, _cholesky)
_register(p.triangular_solve_p, _triangular_solve)
_register(p.lu_p, _lu)
_register(p.lu_pivots_to_permutation_p, _lu_pivots)
_register(p.geqrf_p, _geqrf)
_register(p.householder_product_p, _householder_product)
_register(ormqr.ormqr_p, _ormqr)
_register(p.qr_p, lowering.lower_fun(p._qr_impl))
_register(p.eigh_p, _eigh)
_register(condensed.tridiagonal_p, _tridiagonal)
_register(p.svd_p, _svd)
_register(p.eig_p, _eig)
_register(p.tridiagonal_solve_p, _tridiagonal_solve)
