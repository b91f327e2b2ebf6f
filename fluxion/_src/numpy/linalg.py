"""fluxion.numpy.linalg: NumPy's linear algebra on the LAPACK-backed lax.linalg primitives."""
from __future__ import annotations

import functools
import operator
from typing import NamedTuple

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.export import shape_poly
from fluxion._src.custom_derivatives import custom_jvp
from fluxion._src.lax.linalg import primitives as lax_linalg
from fluxion._src.numpy import util


class LinAlgError(Exception):
    """Raised by linear algebra functions on invalid input (NumPy's class name)."""


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class QRResult(NamedTuple):
    Q: object
    R: object


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


def _jnp():
    import fluxion.numpy as jnp
    return jnp


def _inexact(fname, *args):
    util.check_arraylike(fname, *args)
    out = util.promote_dtypes_inexact(*[util.as_array(x) for x in args])
    return out if len(args) > 1 else out[0]


# JAX raises TypeError for a vector given to these (ValueError for the others).
_RANK_TYPE_ERROR = frozenset({"cholesky", "svd", "eigh", "qr", "matrix_power", "eig", "eigvals"})


def _require_matrix(fname, a, square=True):
    shape = core.get_aval(a).shape
    if len(shape) < 2:
        error = TypeError if fname in _RANK_TYPE_ERROR else ValueError
        raise error(f"{fname}: input must have rank at least 2, got shape {shape}")
    if square and shape[-1] != shape[-2]:
        raise ValueError(f"{fname}: last two dimensions of the input must be square, got shape "
                         f"{shape}")


def _H(x):
    jnp = _jnp()
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _T(x):
    return _jnp().swapaxes(x, -1, -2)


# ---------------------------------------------------------------------------------------------
# decompositions

def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True):
    """Cholesky factor of Hermitian positive-definite `a` (lower, or upper with `upper=True`).

    NaN for a matrix that is not positive definite.
    """
    a = _inexact("jnp.linalg.cholesky", a)
    _require_matrix("cholesky", a)
    L = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return _H(L) if upper else L


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index=None):
    """Singular value decomposition: SVDResult(U, S, Vh), or S alone (`compute_uv=False`)."""
    jnp = _jnp()
    a = _inexact("jnp.linalg.svd", a)
    _require_matrix("svd", a, square=False)
    if hermitian:
        v, w = lax_linalg.eigh(a, subset_by_index=subset_by_index)
        s = jnp.abs(w)
        order = jnp.argsort(-s, axis=-1)
        s = jnp.take_along_axis(s, order, axis=-1)
        if not compute_uv:
            return s
        sign = jnp.take_along_axis(jnp.sign(w), order, axis=-1)
        u = jnp.take_along_axis(v, order[..., None, :], axis=-1)
        vh = _H(u * sign[..., None, :].astype(u.dtype))
        return SVDResult(u, s, vh)
    if compute_uv:
        u, s, vh = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=True,
                                  subset_by_index=subset_by_index)
        return SVDResult(u, s, vh)
    return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=False,
                          subset_by_index=subset_by_index)


def svdvals(x):
    """Singular values of (a batch of) matrices, largest first."""
    return svd(x, compute_uv=False, hermitian=False)


def eigh(a, UPLO: str | None = None, symmetrize_input: bool = True):
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices: EighResult."""
    a = _inexact("jnp.linalg.eigh", a)
    _require_matrix("eigh", a)
    if UPLO is None or UPLO == "L":
        lower = True
    elif UPLO == "U":
        lower = False
    else:
        raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")
    v, w = lax_linalg.eigh(a, lower=lower, symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO: str | None = "L", *, symmetrize_input: bool = True):
    """Eigenvalues of Hermitian matrices, ascending."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def qr(a, mode: str = "reduced"):
    """QR decomposition; `mode` is 'reduced', 'complete', 'r' or 'raw' (as NumPy), or 'full'
    (NumPy's deprecated name, as JAX: the same as 'reduced')."""
    jnp = _jnp()
    a = _inexact("jnp.linalg.qr", a)
    _require_matrix("qr", a, square=False)
    if mode == "raw":
        h, taus = lax_linalg.geqrf(a)
        return QRResult(_T(h), taus)
    if mode in ("reduced", "r", "full"):
        full = False
    elif mode == "complete":
        full = True
    else:
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r = lax_linalg.qr(a, full_matrices=full)
    if mode == "r":
        return r
    del jnp
    return QRResult(q, r)


# ---------------------------------------------------------------------------------------------
# solving

def _lu_solve(lu, permutation, b, trans=0):
    jnp = _jnp()
    x = jnp.take_along_axis(b, permutation[..., :, None], axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)


def solve(a, b):
    """Solve a x = b; `b` is a vector when 1-D, else a (batch of) matrices."""
    jnp = _jnp()
    a, b = _inexact("jnp.linalg.solve", a, b)
    _require_matrix("solve", a)
    a_shape, b_shape = core.get_aval(a).shape, core.get_aval(b).shape
    vector = b.ndim == 1
    if vector:
        if b_shape[0] != a_shape[-1]:
            raise ValueError(f"solve: shapes {a_shape} and {b_shape} are incompatible")
        b = b[:, None]
    elif b_shape[-2] != a_shape[-1]:
        raise ValueError(f"solve: shapes {a_shape} and {b_shape} are incompatible")
    batch = shape_poly.broadcast_shapes(a_shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, batch + a_shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    lu, _, perm = lax_linalg.lu(a)
    x = _lu_solve(lu, perm, b)
    return x[..., 0] if vector else x


def inv(a):
    """Inverse of (a batch of) square matrices; NaN/inf for singular input."""
    jnp = _jnp()
    a = _inexact("jnp.linalg.inv", a)
    _require_matrix("inv", a)
    n = a.shape[-1]
    return solve(a, jnp.broadcast_to(jnp.eye(n, dtype=a.dtype), a.shape))


def _lu_det_parts(a):
    jnp = _jnp()
    lu, pivots, _ = lax_linalg.lu(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    n = a.shape[-1]
    swaps = jnp.sum(pivots != jnp.arange(n, dtype=pivots.dtype), axis=-1)
    parity = jnp.where(swaps % 2 == 1, -1, 1).astype(a.dtype)
    return diag, parity


def det(a):
    """Determinant of (a batch of) square matrices, from an LU factorization."""
    jnp = _jnp()
    a = _inexact("jnp.linalg.det", a)
    _require_matrix("det", a)
    if a.shape[-1] == 0:
        return jnp.ones(a.shape[:-2], a.dtype)
    if np.dtype(a.dtype).itemsize == 2:
        # LAPACK has no half precision; JAX's closed forms give float16/bfloat16 2x2 and 3x3
        # determinants, so factor in float32 and round back (for every size)
        return _det(a.astype(np.float32)).astype(a.dtype)
    return _det(a)


@custom_jvp
def _det(a):
    diag, parity = _lu_det_parts(a)
    return parity * _jnp().prod(diag, axis=-1)


@_det.defjvp
def _det_jvp(primals, tangents):
    # d det(a) = tr(adj(a) da); the adjugate stays finite where a is singular, unlike
    # det(a) inv(a), so the derivative is right there too (zero only where rank(a) < n - 1).
    (a,), (a_dot,) = primals, tangents
    return _det(a), _jnp().sum(_T(_adjugate(a)) * a_dot, axis=(-2, -1))


def _adjugate(a):
    """adj(a) of square matrices, singular ones included.

    From the LU factors a = P^T L U: adj(a) = sign(P) adj(U) L^-1 P, where adj(U) =
    h U'^-1 diag(u_nn, ..., u_nn, 1), h the product of U's first n-1 pivots and U' is U with
    its last pivot set to 1 -- exact whenever only the last pivot may be zero. Where an earlier
    pivot is zero (h = 0) the SVD a = u diag(s) vh gives it instead: adj(a) = det(u) det(vh)
    vh^H diag(prod_{j != i} s_j) u^H. Each branch is fed a harmless matrix where the other is
    used, so neither makes NaNs in higher derivatives.
    """
    jnp = _jnp()
    n = a.shape[-1]
    eye = jnp.eye(n, dtype=a.dtype)
    lu, _, permutation = lax_linalg.lu(a)
    diag, parity = _lu_det_parts(a)
    head = jnp.prod(diag[..., :-1], axis=-1)
    use_svd = (head == 0)[..., None, None]

    lu = jnp.where(use_svd, eye, lu)
    last = lu[..., -1:, -1:]
    lu_unit_last = lu.at[..., -1, -1].set(1)
    p = eye[permutation]
    x = lax_linalg.triangular_solve(lu, p, left_side=True, lower=True, unit_diagonal=True)
    x = x * jnp.where(jnp.arange(n) < n - 1, 1, 0)[:, None].astype(a.dtype) * last + \
        x * jnp.where(jnp.arange(n) == n - 1, 1, 0)[:, None].astype(a.dtype)
    x = lax_linalg.triangular_solve(lu_unit_last, x, left_side=True, lower=False)
    from_lu = (parity * head)[..., None, None] * x

    distinct = jnp.diag(jnp.arange(n, dtype=a.dtype) + 1)
    u, s, vh = svd(jnp.where(use_svd, a, distinct), full_matrices=False)
    ones = jnp.ones(s.shape[:-1] + (1,), s.dtype)
    before = jnp.cumprod(jnp.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)
    after = jnp.flip(jnp.cumprod(jnp.concatenate([ones, jnp.flip(s, -1)[..., :-1]], axis=-1),
                                 axis=-1), -1)
    others = (before * after).astype(a.dtype)
    phase = (_det(u) * _det(vh))[..., None, None]
    from_svd = phase * jnp.matmul(_H(vh) * others[..., None, :], _H(u))
    return jnp.where(use_svd, from_svd, from_lu)


def slogdet(a, *, method: str | None = None):
    """Sign and log of |determinant|: SlogdetResult(sign, logabsdet)."""
    jnp = _jnp()
    a = _inexact("jnp.linalg.slogdet", a)
    _require_matrix("slogdet", a)
    if method not in (None, "lu", "qr"):
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                         f"(`None`), and 'qr'.")
    if method == "qr":
        q, r = lax_linalg.qr(a, full_matrices=True)
        diag = jnp.diagonal(r, axis1=-2, axis2=-1)
        sign_q = det(q)
        parity = sign_q
    else:
        if a.shape[-1] == 0:
            return SlogdetResult(jnp.ones(a.shape[:-2], a.dtype),
                                 jnp.zeros(a.shape[:-2], np.finfo(a.dtype).dtype))
        diag, parity = _lu_det_parts(a)
    absdiag = jnp.abs(diag)
    logdet = jnp.sum(jnp.log(absdiag), axis=-1)
    if dtypes.is_complex(a.dtype):
        sign = parity * jnp.prod(diag / absdiag.astype(a.dtype), axis=-1)
    else:
        sign = parity * jnp.prod(jnp.sign(diag), axis=-1)
    is_zero = jnp.any(diag == 0, axis=-1)
    sign = jnp.where(is_zero, jnp.zeros_like(sign), sign)
    logdet = jnp.where(is_zero, -jnp.inf, logdet)
    return SlogdetResult(sign, logdet)


def lstsq(a, b, rcond=None, *, numpy_resid: bool = False):
    """Least-squares solution of a x = b via the SVD: (x, residuals, rank, s).

    A negative `rcond` means machine precision (NumPy's rule). With `numpy_resid`, the
    residuals are empty where NumPy's are (rank < N or M <= N): that needs a concrete rank,
    so, as in JAX, it works outside jit only.
    """
    x, resid, rank, s = _lstsq(a, b, rcond)
    m, n = np.shape(a)
    if numpy_resid and (rank < n or m <= n):
        resid = _jnp().asarray([])
    return x, resid, rank, s


def _lstsq(a, b, rcond):
    jnp = _jnp()
    a, b = _inexact("jnp.linalg.lstsq", a, b)
    if a.ndim != 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim not in (1, 2):
        raise TypeError(f"{b.ndim}-dimensional array given. Array must be one or "
                        f"two-dimensional")
    m, n = a.shape
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    eps = np.finfo(a.dtype).eps
    if a.size == 0:  # (the SVD of an empty matrix has no s[0] to scale rcond by)
        s = jnp.empty(0, a.dtype)
        rank = jnp.array(0, int)
        x = jnp.zeros((n, *b.shape[1:]), a.dtype)
    else:
        if rcond is None:
            rcond = eps * shape_poly.max_dim(n, m)
        else:
            rcond = jnp.where(jnp.asarray(rcond) < 0, eps, rcond)
        u, s, vh = svd(a, full_matrices=False)
        mask = (s >= jnp.asarray(rcond, dtype=s.dtype) * s[0]) & (s > 0)
        rank = mask.sum()
        safe_s = jnp.where(mask, s, 1).astype(a.dtype)
        s_inv = jnp.where(mask, 1 / safe_s, 0)[:, None]
        x = jnp.matmul(_H(vh), s_inv * jnp.matmul(_H(u), b))
    resid = norm(b - jnp.matmul(a, x), axis=0) ** 2
    if vector:
        x = x.ravel()
    return x, resid, rank, s


@custom_jvp
def _pinv(a, rtol):
    jnp = _jnp()
    u, s, vh = svd(jnp.conj(a), full_matrices=False)
    cutoff = rtol[..., None] * jnp.max(s, axis=-1, keepdims=True)
    s = jnp.where(s > cutoff, s, jnp.inf).astype(u.dtype)
    return jnp.matmul(_T(vh), _T(u) / s[..., None])


def _chain(x, y, z):
    """x @ y @ z in the cheaper order: the pinv JVP's products pass through m x m or n x n
    matrices in one order, which for a 400000 x 2 input do not fit in memory."""
    (a, b), (c, d) = x.shape[-2:], z.shape[-2:]
    if a * b * c + a * c * d <= b * c * d + a * b * d:
        return (x @ y) @ z
    return x @ (y @ z)


@_pinv.defjvp
def _pinv_jvp(primals, tangents):
    # The derivative of the pseudo-inverse (Golub & Pereyra), valid away from rank changes:
    # -p da p + p p^H da^H (I - a p) + (I - p a) da^H p^H p, with no identity formed.
    a, rtol = primals
    a_dot, _ = tangents
    p = _pinv(a, rtol)
    p_h, a_dot_h = _H(p), _H(a_dot)
    left = _chain(p, p_h, a_dot_h)  # p p^H da^H
    right = _chain(a_dot_h, p_h, p)  # da^H p^H p
    p_dot = (-_chain(p, a_dot, p) + left - _chain(left, a, p) + right
             - _chain(p, a, right))
    return p, p_dot


def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None):
    """Moore-Penrose pseudo-inverse via the SVD; singular values below rtol*max(s) count 0."""
    jnp = _jnp()
    a = _inexact("jnp.linalg.pinv", a)
    _require_matrix("pinv", a, square=False)
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return jnp.empty(a.shape[:-2] + (n, m), a.dtype)
    if rtol is None:
        rtol = shape_poly.max_dim(m, n) * np.finfo(a.dtype).eps
    rtol = jnp.asarray(rtol, dtype=np.finfo(a.dtype).dtype)
    return _pinv(a, rtol)


def matrix_rank(M, rtol=None, *, hermitian: bool = False, tol=None):
    """Number of singular values of each matrix in `M` above a threshold.

    Parameters
    ----------
    M : array_like, (..., N, K)
    rtol : array_like, optional
        The threshold, one per matrix. As in JAX (whose documentation calls it relative),
        singular values are compared with `rtol` itself, not with ``rtol * max(s)`` as in
        NumPy. Default: ``max(s) * max(N, K) * eps``.
    hermitian : bool
        `M` is Hermitian: its singular values are the magnitudes of its eigenvalues.
    tol : array_like, optional
        Another name for `rtol`; give one of them at most.
    """
    jnp = _jnp()
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    M = _inexact("jnp.linalg.matrix_rank", M)
    if M.ndim < 2:
        return (M != 0).any().astype(np.int32)
    s = jnp.abs(eigvalsh(M)) if hermitian else svdvals(M)
    if rtol is None:
        eps = np.finfo(s.dtype).eps
        rtol = jnp.max(s, axis=-1) * (shape_poly.max_dim(*M.shape[-2:]) * eps)
    rtol = jnp.expand_dims(jnp.asarray(rtol), -1)
    return jnp.sum(s > rtol, axis=-1)


def matrix_power(a, n: int):
    """Raise a square matrix to the integer power `n` (negative powers invert)."""
    jnp = _jnp()
    util.check_arraylike("jnp.linalg.matrix_power", a)
    a = jnp.asarray(a)
    _require_matrix("matrix_power", a)
    try:
        n = operator.index(n)
    except TypeError as err:
        raise TypeError(f"exponent must be an integer, got {n}") from err
    if n == 0:
        return jnp.broadcast_to(jnp.eye(a.shape[-2], dtype=a.dtype), a.shape)
    if n < 0:
        a = inv(a)
        n = -n
    if n == 1:
        return a
    result = None
    z = a
    while n:
        if n & 1:
            result = z if result is None else jnp.matmul(result, z)
        n >>= 1
        if n:
            z = jnp.matmul(z, z)
    return result


def multi_dot(arrays, *, precision=None):
    """Chained matrix product; 1-D first/last arrays are vectors (as numpy.linalg.multi_dot)."""
    jnp = _jnp()
    arrays = [jnp.asarray(x) for x in arrays]
    if len(arrays) < 2:
        raise ValueError(f"multi_dot requires at least two arrays; got len(arrays)={len(arrays)}")
    shapes = [tuple(x.shape) for x in arrays]
    if not (arrays[0].ndim in (1, 2) and arrays[-1].ndim in (1, 2)
            and all(x.ndim == 2 for x in arrays[1:-1])):
        raise ValueError("multi_dot: input arrays must all be two-dimensional, except for the "
                         f"first and last array which may be 1 or 2 dimensional. Got array "
                         f"shapes {shapes}")
    if any(a.shape[-1] != b.shape[0] for a, b in zip(arrays[:-1], arrays[1:])):
        raise ValueError("multi_dot: last dimension of each array must match first dimension "
                         f"of following array. Got array shapes {shapes}")
    out = arrays[0]
    for x in arrays[1:]:
        out = jnp.matmul(out, x, precision=precision)
    return out


def tensorinv(a, ind: int = 2):
    """Inverse of an N-d array viewed as a matrix: rows from a.shape[:ind]."""
    jnp = _jnp()
    a = _inexact("jnp.linalg.tensorinv", a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer; got {ind=}")
    contracting, batch = a.shape[:ind], a.shape[ind:]
    flatc, flatb = int(np.prod(contracting)), int(np.prod(batch))
    if flatc != flatb:
        raise ValueError("tensorinv is only possible when the product of the first `ind` "
                         f"dimensions equals that of the remaining dimensions. got "
                         f"{a.shape=} with {ind=}.")
    return inv(a.reshape(flatc, flatb)).reshape(*batch, *contracting)


def tensorsolve(a, b, axes=None):
    """Solve tensordot(a, x, axes=x.ndim) = b for x."""
    jnp = _jnp()
    a, b = _inexact("jnp.linalg.tensorsolve", a, b)
    if axes is not None:
        a = jnp.moveaxis(a, axes, tuple(range(a.ndim - len(axes), a.ndim)))  # to the end
    out_shape = a.shape[b.ndim:]
    if a.shape[:b.ndim] != b.shape:
        raise ValueError("b must match the leading dimensions of a.")
    b_size = int(np.prod(b.shape))
    out_size = int(np.prod(out_shape))
    if b_size != out_size:
        raise ValueError("tensorsolve requires prod(a.shape[:b.ndim]) == prod(a.shape[b.ndim:])")
    return solve(a.reshape(b_size, out_size), b.ravel()).reshape(out_shape)


# ---------------------------------------------------------------------------------------------
# norms

def _norm_axes(x, axis):
    if axis is None:
        return tuple(range(x.ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(util.canonicalize_axis(a, x.ndim) for a in axis)
    return (util.canonicalize_axis(axis, x.ndim),)


def norm(x, ord=None, axis=None, keepdims: bool = False):
    """Vector or matrix norm, as numpy.linalg.norm (every `ord`)."""
    jnp = _jnp()
    x = _inexact("jnp.linalg.norm", x)
    x_ndim = x.ndim
    if axis is None:
        if ord is None:
            out = jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), keepdims=keepdims))
            return out
        axes = tuple(range(x_ndim))
    else:
        axes = _norm_axes(x, axis)
    if len(axes) == 1:
        return vector_norm(x, axis=axes, keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) == 2:
        return matrix_norm(x, keepdims=keepdims, ord="fro" if ord is None else ord,
                           _axes=axes)
    raise ValueError(f"Invalid axis values ({axis}) for jnp.linalg.norm.")


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2):
    """Vector norm of `x` over `axis` (all axes by default)."""
    jnp = _jnp()
    x = _inexact("jnp.linalg.vector_norm", x)
    if axis is None:
        result = vector_norm(jnp.ravel(x), axis=0, ord=ord)
        return jnp.reshape(result, (1,) * x.ndim) if keepdims else result
    absx = jnp.abs(x)
    if ord is None or ord == 2:
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=axis, keepdims=keepdims))
    if ord == np.inf:  # (initial=0: the norm of nothing is 0, as JAX's; min-norms raise)
        return jnp.max(absx, axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return jnp.min(absx, axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(x != 0, dtype=np.finfo(absx.dtype).dtype, axis=axis, keepdims=keepdims)
    if ord == 1:
        return jnp.sum(absx, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"Invalid order '{ord}' for vector norm.")
    ord_arr = jnp.asarray(ord, dtype=absx.dtype)
    return jnp.power(jnp.sum(absx ** ord_arr, axis=axis, keepdims=keepdims), 1 / ord_arr)


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro", _axes=(-2, -1)):
    """Matrix norm over the last two axes: 'fro', 'nuc', 1, -1, 2, -2, inf, -inf."""
    jnp = _jnp()
    x = _inexact("jnp.linalg.matrix_norm", x)
    row, col = (util.canonicalize_axis(a, x.ndim) for a in _axes)
    if row == col:
        raise ValueError(f"Duplicate axes given to jnp.linalg.norm: {_axes}")
    absx = jnp.abs(x)
    if ord in ("fro", "f", None):
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=(row, col),
                                keepdims=keepdims))
    # The largest of no values is 0 (norms of empty matrices, as JAX's); the smallest raises.
    largest = functools.partial(jnp.max, initial=0)
    if ord in (1, -1):
        red = largest if ord == 1 else jnp.min
        c = col - 1 if (not keepdims and col > row) else col
        return red(jnp.sum(absx, axis=row, keepdims=keepdims), axis=c, keepdims=keepdims)
    if ord in (np.inf, -np.inf):
        red = largest if ord == np.inf else jnp.min
        r = row - 1 if (not keepdims and row > col) else row
        return red(jnp.sum(absx, axis=col, keepdims=keepdims), axis=r, keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        y = jnp.moveaxis(x, (row, col), (-2, -1))
        s = svdvals(y)
        if ord == 2:
            out = largest(s, axis=-1)
        elif ord == -2:
            out = jnp.min(s, axis=-1)
        else:
            out = jnp.sum(s, axis=-1)
        if keepdims:
            out = jnp.expand_dims(out, (row, col))
        return out
    raise ValueError(f"Invalid order '{ord}' for matrix norm.")


def cond(x, p=None):
    """Condition number of `x` in the `p` norm (inf for singular matrices)."""
    jnp = _jnp()
    x = _inexact("jnp.linalg.cond", x)
    if x.ndim < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D, got {x.shape}")
    if p is None or p == 2 or p == -2:
        s = svdvals(x)
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    else:
        _require_matrix("cond", x)
        r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    nan_in = jnp.any(jnp.isnan(x), axis=(-2, -1))
    return jnp.where(jnp.isnan(r) & ~nan_in, jnp.inf, r)


# ---------------------------------------------------------------------------------------------
# array-API style helpers over the last axes

def outer(x1, x2, /):
    """Outer product of two 1-D arrays."""
    jnp = _jnp()
    x1, x2 = util.ensure_arraylike("jnp.linalg.outer", x1, x2)
    if jnp.ndim(x1) != 1 or jnp.ndim(x2) != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are "
                         f"{x1.ndim=} {x2.ndim=}")
    return jnp.outer(x1, x2)


def cross(x1, x2, /, *, axis: int = -1):
    """Cross product of 3-element vectors along `axis`."""
    jnp = _jnp()
    x1, x2 = util.ensure_arraylike("jnp.linalg.cross", x1, x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they have {x1.shape[axis]=} and {x2.shape[axis]=}")
    a = jnp.moveaxis(x1, axis, -1)
    b = jnp.moveaxis(x2, axis, -1)
    a, b = jnp.broadcast_arrays(a, b)
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out = jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return jnp.moveaxis(out, -1, axis)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """Conjugated dot product of vectors along `axis`."""
    jnp = _jnp()
    return jnp.vecdot(x1, x2, axis=axis, precision=precision,
                      preferred_element_type=preferred_element_type) \
        if hasattr(jnp, "vecdot") else jnp.sum(jnp.conj(x1) * x2, axis=axis)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """Matrix product (the Array API's linalg.matmul)."""
    return _jnp().matmul(x1, x2, precision=precision,
                         preferred_element_type=preferred_element_type)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    """Tensor contraction (the Array API's linalg.tensordot)."""
    return _jnp().tensordot(x1, x2, axes=axes, precision=precision,
                            preferred_element_type=preferred_element_type)


def diagonal(x, /, *, offset: int = 0):
    """Diagonals of the matrices in the last two axes."""
    return _jnp().diagonal(x, offset=offset, axis1=-2, axis2=-1)


def trace(x, /, *, offset: int = 0, dtype=None):
    """Traces of the matrices in the last two axes."""
    return _jnp().trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def matrix_transpose(x, /):
    """Swap the last two axes."""
    x = _jnp().asarray(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions; got {x.ndim=}")
    return _T(x)


def eig(a):
    """Eigenvalues and right eigenvectors of general square matrices (complex results):
    EigResult."""
    a = _inexact("jnp.linalg.eig", a)
    _require_matrix("eig", a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a):
    """Eigenvalues of general square matrices (complex)."""
    a = _inexact("jnp.linalg.eigvals", a)
    _require_matrix("eigvals", a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


def _compile_eager_calls():
    """Outside any transformation, each function runs as one cached executable per signature
    (numpy/eager.py), as JAX jits its jnp.linalg functions."""
    from fluxion._src.numpy.eager import eager_compiled
    static = {"upper", "symmetrize_input", "full_matrices", "compute_uv", "hermitian",
              "subset_by_index", "UPLO", "mode", "method", "rcond", "numpy_resid", "rtol", "tol",
              "n", "precision", "ind", "axes", "ord", "axis", "keepdims", "_axes", "p", "offset",
              "dtype", "preferred_element_type"}
    namespace = globals()
    for name, fn in list(namespace.items()):
        if (name.startswith("_") or not callable(fn) or isinstance(fn, type)
                or getattr(fn, "__module__", None) != __name__ or name in _OP_BY_OP):
            continue
        import inspect
        params = set(inspect.signature(fn).parameters)
        namespace[name] = eager_compiled(static_argnames=tuple(params & static))(fn)
    namespace["_lstsq"] = eager_compiled(static_argnames=("rcond",))(_lstsq)


# multi_dot chains its products op by op; lstsq's numpy_resid needs the concrete rank (the
# solution itself, `_lstsq`, is one executable).
_OP_BY_OP = {"multi_dot", "lstsq"}


_compile_eager_calls()
