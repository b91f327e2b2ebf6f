"""`fluxion.scipy.linalg`: SciPy's linear algebra on lax.linalg's LAPACK primitives.

SciPy's conventions where they differ from numpy.linalg: `cholesky` gives the upper factor
unless lower=True, `eigh` returns (eigenvalues, eigenvectors), `lu` returns (P, L, U) with
a = P @ L @ U, `qr(mode='r')` returns a 1-tuple.
"""
from __future__ import annotations

import warnings

import numpy as np

import fluxion.numpy as jnp
from fluxion._src.numpy.util import to_inexact_dtype
from fluxion._src.ad_api import jvp
from fluxion.lax import linalg as lax_linalg


def _swap(x):
    return jnp.swapaxes(x, -1, -2)


def _h(x):
    return jnp.conj(_swap(x))


def _inexact(a):
    a = jnp.asarray(a)
    # JAX's map: bool and integers up to 32 bits become float32 even with x64 on
    return a.astype(to_inexact_dtype(np.dtype(a.dtype)))


def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """The Cholesky factor of a Hermitian positive-definite matrix: upper (a = U^H U) unless
    `lower` (a = L L^H). As SciPy, only the triangle named by `lower` is read (so the
    gradient flows to that triangle alone)."""
    a = _inexact(a)
    factor = lax_linalg.cholesky(a if lower else _h(a), symmetrize_input=False)
    return factor if lower else _h(factor)


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """(factor, lower) for `cho_solve`."""
    return cholesky(a, lower=lower), lower


def _is_vector_rhs(name: str, first_arg: str, a, b) -> bool:
    """Whether `b` holds vectors (…, n) rather than matrices (…, n, k), as JAX decides: a 1-d
    `b`, or one with a single dimension fewer than `a` that ends in n (deprecated in JAX)."""
    if b.ndim == 1:
        return True
    if a.ndim == b.ndim + 1 and a.shape[-1] == b.shape[-1]:
        warnings.warn(f"jax.scipy.linalg.{name}: batched 1D solves with b.ndim > 1 are "
                      "deprecated, and in the future will be treated as a batched 2D solve. "
                      f"Use {name}({first_arg}, b[..., None]).squeeze(-1) to avoid this "
                      "warning.", FutureWarning, stacklevel=3)
        return True
    return False


def _solve_triangular(a, b, lower, trans, unit_diagonal=False, *, vector: bool):
    """One batched triangular solve; the batch dimensions of `a` and `b` broadcast."""
    rhs = b[..., None] if vector else b
    batch = np.broadcast_shapes(a.shape[:-2], rhs.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    rhs = jnp.broadcast_to(rhs, batch + rhs.shape[-2:])
    x = lax_linalg.triangular_solve(a, rhs, left_side=True, lower=lower,
                                    transpose_a=trans in (1, 2), conjugate_a=trans == 2,
                                    unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
    """Solve a x = b given `cho_factor(a)`; batch dimensions broadcast."""
    c, lower = c_and_lower
    c, b = _inexact(c), jnp.asarray(b)
    b = b.astype(jnp.result_type(c, b))
    vector = _is_vector_rhs("cho_solve", "c_and_lower", c, b)
    first = _solve_triangular(c, b, lower=lower, trans=0 if lower else 2, vector=vector)
    return _solve_triangular(c, first, lower=lower, trans=2 if lower else 0, vector=vector)


_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug=None, check_finite: bool = True):
    """Solve op(a) x = b for triangular a; op is a (0, 'N'), a^T (1, 'T') or a^H (2, 'C')."""
    if trans not in _TRANS:
        raise ValueError(f"Invalid 'trans' value {trans!r}")
    a, b = _inexact(a), jnp.asarray(b)
    dtype = jnp.result_type(a, b)
    a, b = a.astype(dtype), b.astype(dtype)
    return _solve_triangular(a, b, lower, _TRANS[trans], unit_diagonal,
                             vector=_is_vector_rhs("solve_triangular", "a", a, b))


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen"):
    """Solve a x = b; assume_a='pos' uses a Cholesky factorization, the other kinds ('gen',
    'sym', 'her') an LU factorization."""
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"Expected assume_a to be one of 'gen', 'sym', 'her', 'pos'; got "
                         f"{assume_a!r}")
    if assume_a != "pos":
        return jnp.linalg.solve(a, b)
    return cho_solve(cho_factor(a, lower=lower), b)


def det(a, overwrite_a: bool = False, check_finite: bool = True):
    """The determinant."""
    return jnp.linalg.det(a)


def inv(a, overwrite_a: bool = False, check_finite: bool = True):
    """The inverse."""
    return jnp.linalg.inv(a)


def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True):
    """(lu, pivots): the packed LU factorization with LAPACK's (0-based) row interchanges."""
    lu, pivots, _ = lax_linalg.lu(_inexact(a))
    return lu, pivots


def lu_solve(lu_and_piv, b, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True):
    """Solve a x = b (trans 0), a^T x = b (1) or a^H x = b (2) from `lu_factor(a)`."""
    lu, pivots = lu_and_piv
    if trans not in (0, 1, 2):
        raise ValueError(f"Invalid 'trans' value {trans!r}")
    b = jnp.asarray(b).astype(lu.dtype)
    m = lu.shape[-1]
    if lu.ndim < 2 or lu.shape[-2] != m:
        raise ValueError(f"last two dimensions of LU decomposition must be equal, got shape "
                         f"{lu.shape}")
    if b.ndim < 1:
        raise ValueError(f"b matrix must have rank >= 1, got shape {b.shape}")
    perm = lax_linalg.lu_pivots_to_permutation(pivots, m)
    # b is a (batch of) vector(s) when 1-D or one dimension short of lu, as in JAX
    vector = _is_vector_rhs("lu_solve", "lu_and_piv", lu, b)
    if (b.shape[-1] if vector else b.shape[-2] if b.ndim > 1 else None) != m:
        raise ValueError(f"lu_solve: b of shape {b.shape} does not match the LU "
                         f"decomposition of shape {lu.shape}")
    rhs = b[..., None] if vector else b
    batch = jnp.broadcast_shapes(lu.shape[:-2], perm.shape[:-1], rhs.shape[:-2])
    lu = jnp.broadcast_to(lu, batch + lu.shape[-2:])
    rhs = jnp.broadcast_to(rhs, batch + rhs.shape[-2:])
    perm = jnp.broadcast_to(perm, batch + perm.shape[-1:])

    def permute_rows(x, p):  # x[..., p, :] batch by batch
        return jnp.take_along_axis(x, jnp.broadcast_to(p[..., None], x.shape), axis=-2)

    if trans == 0:
        x = _solve_triangular(lu, permute_rows(rhs, perm), lower=True, trans=0,
                              unit_diagonal=True, vector=False)
        x = _solve_triangular(lu, x, lower=False, trans=0, vector=False)
    else:
        x = _solve_triangular(lu, rhs, lower=False, trans=trans, vector=False)
        x = _solve_triangular(lu, x, lower=True, trans=trans, unit_diagonal=True,
                              vector=False)
        x = permute_rows(x, jnp.argsort(perm, axis=-1))
    return x[..., 0] if vector else x


def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """(P, L, U) with a = P @ L @ U, or (P @ L, U) with permute_l."""
    a = _inexact(a)
    packed, _, perm = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    lower = jnp.tril(packed[..., :, :k], -1) + jnp.eye(m, k, dtype=a.dtype)
    upper = jnp.triu(packed[..., :k, :])
    # JAX's P is real even for complex `a`.
    p = _swap(jnp.eye(m, dtype=np.finfo(a.dtype).dtype)[perm])
    if permute_l:
        return p @ lower, upper
    return p, lower, upper


def qr(a, overwrite_a: bool = False, lwork=None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True):
    """Q, R with a = Q R: mode 'full', 'economic', or 'r' (a 1-tuple (R,)).

    With `pivoting`, column-pivoted QR: a[..., P] = Q R, and P is appended to the result.
    """
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r, *p = lax_linalg.qr(_inexact(a), pivoting=bool(pivoting),
                             full_matrices=mode in ("full", "r"))
    return (r, *p) if mode == "r" else (q, r, *p)


def qr_multiply(a, c, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False):
    """(Q @ c (mode 'left') or c @ Q (mode 'right'), R) for the economic QR of `a`, applying
    Q's Householder reflectors without forming Q (LAPACK ormqr). `conjugate` uses conj(Q);
    with `pivoting` the column permutation P is appended."""
    from fluxion._src.numpy.util import promote_dtypes_inexact
    if mode not in ("left", "right"):
        raise ValueError(f"mode must be 'left' or 'right', got {mode!r}")
    a, c = promote_dtypes_inexact(jnp.asarray(a), jnp.asarray(c))
    onedim = c.ndim == 1
    if onedim:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = a.shape[-2:]
    k = min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has shape "
                         f"{tuple(a.shape)} so Q has {k} columns, but c has {c.shape[-2]} "
                         f"rows (expected {k}).")
    if mode == "right" and c.shape[-1] != m:
        raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has shape "
                         f"{tuple(a.shape)} so Q has {m} rows, but c has {c.shape[-1]} "
                         f"columns (expected {m}).")
    batch = jnp.broadcast_shapes(a.shape[:-2], c.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    c = jnp.broadcast_to(c, batch + c.shape[-2:])
    p = None
    if pivoting:
        r, p, taus = lax_linalg.geqp3(a, jnp.zeros(batch + (n,), np.int32))
        p = p - 1
    else:
        r, taus = lax_linalg.geqrf(a)
    if mode == "left" and m > k:  # the full Q acts on c padded with zero rows
        c = jnp.concatenate([c, jnp.zeros(c.shape[:-2] + (m - k, c.shape[-1]), c.dtype)],
                            axis=-2)
    if conjugate:  # conj(Q) c = (c^T Q^H)^T: transpose, and let the kernel take Q^H
        c = jnp.swapaxes(c, -1, -2)
    cq = lax_linalg.ormqr(r, taus, c, left=(mode == "left") != conjugate, transpose=conjugate)
    if conjugate:
        cq = jnp.swapaxes(cq, -1, -2)
    if mode == "right":
        cq = cq[..., :k]
    if onedim:
        cq = cq.ravel()
    r = jnp.triu(r[..., :k, :])
    return (cq, r, p) if pivoting else (cq, r)


def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd"):
    """U, s, Vh with a = U diag(s) Vh (or s alone)."""
    if lapack_driver not in ("gesdd", "gesvd"):
        raise ValueError(f"lapack_driver must be 'gesdd' or 'gesvd', got {lapack_driver!r}")
    return jnp.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals=None, type: int = 1,
         check_finite: bool = True):
    """Eigenvalues (ascending) and eigenvectors of a Hermitian matrix; the generalized
    problem (b) is not supported, as in JAX.

    As JAX does, the input is symmetrized, (a + a^H) / 2, before the factorization (SciPy
    reads only the `lower` or upper triangle): the same numbers for a Hermitian `a`, and JAX's
    numbers (and gradients) for any other."""
    if b is not None:
        raise NotImplementedError("Only the b=None case of eigh is implemented")
    if type != 1:
        raise NotImplementedError("Only the type=1 case of eigh is implemented.")
    if eigvals is not None:
        raise NotImplementedError("Only the eigvals=None case of eigh is implemented.")
    v, w = lax_linalg.eigh(_inexact(a), lower=lower)
    return w if eigvals_only else (w, v)


def eigh_tridiagonal(d, e, *, eigvals_only: bool = False, select: str = "a",
                     select_range=None, tol=None, key=None):
    """Eigenvalues (and with eigvals_only=False eigenvectors, as columns) of the Hermitian
    tridiagonal matrix with diagonal d and off-diagonal e.

    select='a' gives all of them, select='i' those with ascending indices select_range[0]
    through select_range[1]; select='v' is not implemented, as in JAX.
    """
    lo, hi = _tridiagonal_selection(select, select_range, jnp.shape(d)[-1])
    if not jnp.issubdtype(jnp.asarray(d).dtype, jnp.inexact):
        raise TypeError("Only float32 and float64 inputs are supported as inputs to "
                        "jax.scipy.linalg.eigh_tridiagonal, got " f"{jnp.asarray(d).dtype}")
    d, e = _inexact(d), jnp.asarray(e)
    matrix = jnp.diag(d) + jnp.diag(e.astype(d.dtype), 1) + jnp.diag(jnp.conj(e).astype(d.dtype), -1)
    if eigvals_only:
        return jnp.linalg.eigvalsh(matrix)[lo:hi]
    w, v = jnp.linalg.eigh(matrix)
    return w[lo:hi], v[:, lo:hi]


def _tridiagonal_selection(select, select_range, n):
    """The slice [lo, hi) of the ascending eigenvalues that `select` asks for."""
    if select == "a":
        return 0, n
    if select == "i":
        if select_range is None:
            raise ValueError("for select='i', select_range must be specified.")
        if select_range[0] > select_range[1]:
            raise ValueError("Got empty index range in select_range.")
        return int(select_range[0]), int(select_range[1]) + 1
    if select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented")
    raise ValueError("'select must have a value in {'a', 'i', 'v'}.")


def polar(a, side: str = "right", *, method: str = "qdwh", eps=None, max_iterations=None):
    """(u, p) with a = u p (side 'right') or a = p u ('left'), u unitary and p Hermitian
    positive semi-definite.

    `method='qdwh'` runs lax.linalg.qdwh where JAX does (m >= n with side 'right', m < n with
    side 'left'; the other shapes fall back to the SVD); `method='svd'` uses the SVD.
    """
    if side not in ("left", "right"):
        raise ValueError(f"side={side!r} is not supported; use 'left' or 'right'")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"Unknown polar decomposition method {method}.")
    a = _inexact(a)
    if a.ndim < 2:
        raise ValueError("The input `a` must be at least a 2-D array.")
    m, n = a.shape[-2:]
    if a.size == 0:  # u has a's shape; p is square on the side named, zero
        k = n if side == "right" else m
        return a, jnp.zeros(a.shape[:-2] + (k, k), a.dtype)
    if method == "qdwh" and (m >= n) == (side == "right"):
        def one(x):
            if side == "left":
                u, p, _, _ = lax_linalg.qdwh(_h(x), eps=eps)
                return _h(u), _h(p)
            u, p, _, _ = lax_linalg.qdwh(x, eps=eps)
            return u, p
        sig = "(m,n)->(m,n),(n,n)" if side == "right" else "(m,n)->(m,n),(m,m)"
        return jnp.vectorize(one, signature=sig)(a)
    u_svd, s, vh = jnp.linalg.svd(a, full_matrices=False)
    unitary = u_svd @ vh
    if side == "right":
        posdef = _h(vh) @ (s[..., :, None].astype(a.dtype) * vh)
    else:
        posdef = u_svd @ (s[..., :, None].astype(a.dtype) * _h(u_svd))
    return unitary, posdef


# ---------------------------------------------------------------------------------------------
# The matrix exponential: scaling and squaring with Pade approximants (Higham 2005)

_PADE = {
    3: [120.0, 60.0, 12.0, 1.0],
    5: [30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0],
    7: [17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0],
    9: [17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0,
        110880.0, 3960.0, 90.0, 1.0],
    13: [64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
         129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
         40840800.0, 960960.0, 16380.0, 182.0, 1.0],
}
# The largest 1-norm for which each Pade order is accurate to unit roundoff; a matrix whose
# norm is above the last bound is scaled by 2**-s first, then squared s times.
_ORDERS = {np.float32: ([3, 5, 7], [4.258730016922831e-001, 1.880152677804762e+000],
                        3.925724783138660e+000),
           np.float64: ([3, 5, 7, 9, 13], [1.495585217958292e-002, 2.539398330063230e-001,
                                           9.504178996162932e-001, 2.097847961257068e+000],
                        5.371920351148152e+000)}


def _pade(a, order):
    """(U, V): the odd and even parts of the order-`order` Pade approximant's numerator."""
    b = _PADE[order]
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    a2 = a @ a
    if order < 13:
        powers = [eye, a2]
        for _ in range(order // 2 - 1):
            powers.append(powers[-1] @ a2)
        u = a @ sum(b[2 * k + 1] * p for k, p in enumerate(powers))
        v = sum(b[2 * k] * p for k, p in enumerate(powers))
        return u, v
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
             + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
        + b[0] * eye
    return u, v


def _expm_one(a, max_squarings):
    from fluxion import lax
    real = np.float64 if jnp.finfo(a.dtype).bits == 64 else np.float32
    orders, bounds, max_norm = _ORDERS[real]
    norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2))
    squarings = jnp.maximum(0, jnp.floor(jnp.log2(norm / max_norm)))
    scaled = a / (2 ** squarings).astype(a.dtype)
    which = jnp.sum(norm >= jnp.asarray(bounds, norm.dtype)).astype(np.int32)
    u, v = lax.switch(which, [lambda m, k=k: _pade(m, k) for k in orders], scaled)
    r = jnp.linalg.solve(v - u, v + u)

    def square(m, i):  # a fixed-length loop, so reverse mode differentiates it
        return lax.cond(i < squarings, lambda x: x @ x, lambda x: x, m), None
    r, _ = lax.scan(square, r, jnp.arange(max_squarings, dtype=squarings.dtype))
    return jnp.where(squarings > max_squarings, jnp.nan, r)


def expm(A, *, upper_triangular: bool = False, max_squarings: int = 16):
    """The matrix exponential (batched over leading dimensions); NaN when more than
    `max_squarings` squarings would be needed."""
    a = _inexact(A)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"expected A to be a (batched) square matrix, got shape {a.shape}")
    if a.size == 0:  # 0x0 matrices or an empty batch: nothing to exponentiate
        return a
    from fluxion._src.vmap import vmap
    flat = a.reshape((-1,) + a.shape[-2:])
    out = vmap(lambda m: _expm_one(m, max_squarings))(flat)
    return out.reshape(a.shape)


def expm_frechet(A, E, *, method=None, compute_expm: bool = True):
    """The Frechet derivative of expm at A in the direction E (and expm(A) with compute_expm)."""
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"Unknown method {method!r}")
    A, E = _inexact(A), jnp.asarray(E)
    if A.shape != E.shape or A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"expected A and E to be (batched) square matrices of one shape, got "
                         f"{A.shape} and {E.shape}")
    value, derivative = jvp(expm, (A,), (E.astype(A.dtype),))
    return (value, derivative) if compute_expm else derivative
