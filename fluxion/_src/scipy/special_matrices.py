"""The special matrices of `scipy.linalg` (toeplitz, hankel, circulant, pascal, ...).

Matrices built from array arguments are traceable (gathers from the argument); those built
from a size alone are computed with NumPy and returned as constants.
"""
from __future__ import annotations

import math
import operator

import numpy as np

import fluxion.numpy as jnp
from fluxion._src import dtypes
from fluxion._src.numpy.util import check_arraylike, to_inexact_dtype


def _index_matrix(rows: int, cols: int, fn) -> np.ndarray:
    i, j = np.indices((rows, cols))
    return fn(i, j)


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column `c` and first row `r` (conj(c) by default; r[0]
    is ignored); leading dimensions of c and r are batch dimensions."""
    check_arraylike("toeplitz", c, *(() if r is None else (r,)))  # lists are refused, as in JAX
    c = jnp.atleast_1d(jnp.asarray(c))
    r = jnp.conj(c) if r is None else jnp.atleast_1d(jnp.asarray(r))
    m, n = c.shape[-1], r.shape[-1]
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c, r = jnp.broadcast_to(c, batch + (m,)), jnp.broadcast_to(r, batch + (n,))
    # values = [r[n-1], ..., r[1], c[0], ..., c[m-1]]; entry (i, j) is values[n - 1 + i - j].
    values = jnp.concatenate([jnp.flip(r[..., 1:], -1), c], axis=-1)
    return values[..., _index_matrix(m, n, lambda i, j: n - 1 + i - j)]


def hankel(c, r=None):
    """The Hankel matrix with first column `c` and last row `r` (zeros by default; r[0] is
    ignored); leading dimensions of c and r are batch dimensions, as in JAX."""
    check_arraylike("hankel", c, *(() if r is None else (r,)))  # lists are refused, as in JAX
    c = jnp.asarray(c)
    r = jnp.zeros_like(c) if r is None else jnp.asarray(r)
    for name, v in (("c", c), ("r", r)):
        if v.ndim == 0:
            raise ValueError(f"hankel: {name} must be at least 1-dimensional, got a scalar.")
    m, n = c.shape[-1], r.shape[-1]
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c, r = jnp.broadcast_to(c, batch + (m,)), jnp.broadcast_to(r, batch + (n,))
    values = jnp.concatenate([c, r[..., 1:]], axis=-1)  # (promotes c and r together)
    return values[..., _index_matrix(m, n, lambda i, j: i + j)]


def circulant(c):
    """The circulant matrix whose first column is `c` (leading dims are batch dims)."""
    check_arraylike("circulant", c)  # lists are refused, as in JAX
    c = jnp.atleast_1d(jnp.asarray(c))
    n = c.shape[-1]
    return c[..., _index_matrix(n, n, lambda i, j: (i - j) % n)]


def companion(a):
    """The companion matrix of the polynomial with coefficients `a` (highest degree first)."""
    check_arraylike("companion", a)  # lists are refused, as in JAX
    a = jnp.atleast_1d(jnp.asarray(a))
    n = a.shape[-1]
    if n < 2:
        raise ValueError(f"The length of `a` along the last axis must be at least 2; got "
                         f"shape {a.shape}.")
    first_row = -(a[..., 1:] / a[..., :1])  # divide first: bool/int promote to float
    below = jnp.eye(n - 2, n - 1, dtype=first_row.dtype)
    below = jnp.broadcast_to(below, first_row.shape[:-1] + below.shape)
    return jnp.concatenate([first_row[..., None, :], below], axis=-2)


def block_diag(*arrs):
    """The block-diagonal matrix of the given 2-D (or lower) arrays."""
    check_arraylike("block_diag", *arrs)  # lists are refused, as in JAX
    if not arrs:
        return jnp.zeros((1, 0))
    blocks = [jnp.atleast_2d(jnp.asarray(a)) for a in arrs]
    dtype = dtypes.result_type(*blocks)
    rows = []
    total_cols = sum(b.shape[1] for b in blocks)
    col = 0
    for b in blocks:
        rows.append(jnp.pad(b.astype(dtype), ((0, 0), (col, total_cols - col - b.shape[1]))))
        col += b.shape[1]
    return jnp.concatenate(rows, axis=0)


def convolution_matrix(a, n: int, mode: str = "full"):
    """The matrix A with A @ v == convolve(a, v, mode) for vectors v of length n."""
    check_arraylike("convolution_matrix", a)  # lists are refused, as in JAX
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"n must be a positive integer; got {n}.")
    a = jnp.asarray(a)
    if a.ndim == 0:
        raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a scalar.")
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"len(a) must be at least 1; got shape {a.shape}.")
    if mode == "full":
        rows, offset = m + n - 1, 0
    elif mode == "same":
        rows, offset = max(m, n), (min(m, n) - 1) // 2
    elif mode == "valid":
        rows, offset = max(m, n) - min(m, n) + 1, min(m, n) - 1
    else:
        raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    padded = jnp.concatenate([a, jnp.zeros(a.shape[:-1] + (1,), a.dtype)], axis=-1)
    index = _index_matrix(rows, n, lambda i, j: i + offset - j)
    index = np.where((index >= 0) & (index < m), index, m)  # index m reads zero
    return padded[..., index]


def fiedler(a):
    """The symmetric matrix |a[i] - a[j]|."""
    check_arraylike("fiedler", a)  # lists are refused, as in JAX
    a = jnp.atleast_1d(jnp.asarray(a))
    return jnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a):
    """Fiedler's pentadiagonal companion matrix of the polynomial with coefficients `a`
    (highest degree first): its eigenvalues are the polynomial's roots."""
    check_arraylike("fiedler_companion", a)  # lists are refused, as in JAX
    a = jnp.atleast_1d(jnp.asarray(a))
    a = a.astype(to_inexact_dtype(np.dtype(a.dtype)))
    if a.shape[-1] == 0:
        raise ValueError("fiedler_companion requires the last axis of 'a' to have nonzero "
                         f"length, but got an array of shape {a.shape}.")
    if a.ndim > 1:  # leading dimensions are batch dimensions, as in JAX
        return jnp.vectorize(fiedler_companion, signature="(n)->(m,m)")(a)
    if a.shape[0] < 2:
        return jnp.zeros((0, 0), a.dtype)
    c = a[1:] / a[0]  # monic coefficients c[0] .. c[n-1]
    n = c.shape[0]
    if n == 1:
        return -c[None, :]
    out = jnp.zeros((n, n), c.dtype)
    out = out.at[0, 0].set(-c[0]).at[1, 0].set(1.0)
    # Even rows k carry -c[k + 1] at column k + 1 and 1 at column k + 2; odd rows k >= 3
    # carry 1 at column k - 2 and -c[k + 1] sits below the diagonal at (k + 1, k).
    even = np.arange(0, n - 1, 2)
    out = out.at[even, even + 1].set(-c[even + 1])
    even2 = np.arange(0, n - 2, 2)
    out = out.at[even2, even2 + 2].set(1.0)
    odd = np.arange(1, n - 1, 2)
    out = out.at[odd + 1, odd].set(-c[odd + 1])
    odd2 = np.arange(1, n - 2, 2)
    return out.at[odd2 + 2, odd2].set(1.0)


def hadamard(n: int, dtype=int):
    """The Hadamard matrix of order n (a power of two), by Sylvester's construction."""
    if n < 1 or not math.log2(n).is_integer():  # (2.0 is accepted, as in JAX)
        raise ValueError(f"n must be a positive power of 2; got {n}.")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h, dtype=dtype)


def helmert(n: int, full: bool = False):
    """The Helmert matrix of order n (without its first row unless `full`)."""
    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}.")
    h = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    h[0] = 1
    d[0] = n
    h = h / np.sqrt(d)[:, None]
    return jnp.asarray(h if full else h[1:], dtype=dtypes.default_float_dtype())


def hilbert(n: int):
    """The Hilbert matrix 1 / (i + j + 1)."""
    return jnp.asarray(1.0 / _index_matrix(n, n, lambda i, j: i + j + 1.0),
                       dtype=dtypes.default_float_dtype())


def invhilbert(n: int):
    """The inverse of the n x n Hilbert matrix (exact integers, as floats)."""
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            s = i + j
            out[i, j] = ((-1) ** s * (s + 1) * math.comb(n + i, n - j - 1)
                         * math.comb(n + j, n - i - 1) * math.comb(s, i) ** 2)
    return jnp.asarray(out, dtype=dtypes.default_float_dtype())


def _pascal(n: int, kind: str) -> np.ndarray:
    lower = np.array([[math.comb(i, j) for j in range(n)] for i in range(n)],
                     dtype=np.float64).reshape(n, n)
    if kind == "lower":
        return lower
    if kind == "upper":
        return lower.T
    if kind == "symmetric":
        return lower @ lower.T
    raise ValueError(f"Expected kind to be one of: ['symmetric', 'lower', 'upper']; got {kind}")


def pascal(n: int, kind: str | None = None):
    """The Pascal matrix: binomial coefficients ('symmetric', 'lower' or 'upper')."""
    # JAX builds it in float32 whatever the x64 setting.
    return jnp.asarray(_pascal(n, kind or "symmetric"), dtype=np.float32)


def invpascal(n: int, kind: str | None = None):
    """The inverse of `pascal(n, kind)`."""
    kind = kind or "symmetric"
    signs = np.fromfunction(lambda i, j: (-1.0) ** (i + j), (n, n))
    lower_inv = _pascal(n, "lower") * signs
    if kind == "lower":
        out = lower_inv
    elif kind == "upper":
        out = lower_inv.T
    elif kind == "symmetric":
        out = lower_inv.T @ lower_inv
    else:
        raise ValueError(f"Expected kind to be one of: ['symmetric', 'lower', 'upper']; got {kind}")
    return jnp.asarray(out, dtype=dtypes.default_float_dtype())


def leslie(f, s):
    """The Leslie matrix with fecundities `f` (first row) and survival rates `s`."""
    check_arraylike("leslie", f, s)  # lists are refused, as in JAX
    f, s = jnp.atleast_1d(jnp.asarray(f)), jnp.atleast_1d(jnp.asarray(s))
    n = f.shape[-1]
    if n < 2:
        raise ValueError(f"The length of f along the last axis must be at least 2; got shape "
                         f"{f.shape}.")
    if s.shape[-1] != n - 1:
        raise ValueError(f"Incorrect lengths for f and s. The length of s must be one less than "
                         f"the length of f, got {n} and {s.shape[-1]}.")
    dtype = dtypes.result_type(f, s)  # JAX keeps integer and bool inputs' dtype
    batch = np.broadcast_shapes(f.shape[:-1], s.shape[:-1])
    f = jnp.broadcast_to(f.astype(dtype), batch + (n,))
    s = jnp.broadcast_to(s.astype(dtype), batch + (n - 1,))
    out = jnp.zeros(batch + (n, n), dtype).at[..., 0, :].set(f)
    return out.at[..., np.arange(1, n), np.arange(n - 1)].set(s)


def dft(n: int, scale: str | None = None, *, dtype=None):
    """The n x n discrete Fourier transform matrix exp(-2 pi i j k / n), scaled by None,
    'sqrtn' (1/sqrt(n)) or 'n' (1/n)."""
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; {scale!r} is not valid.")
    jk = _index_matrix(n, n, lambda j, k: (j * k) % n)
    m = np.exp(-2j * np.pi * jk / n)
    if scale == "sqrtn":
        m = m / math.sqrt(n)
    elif scale == "n":
        m = m / n
    if dtype is None:
        dtype = dtypes.canonicalize_dtype(np.complex128)
    elif not dtypes.issubdtype(dtype, np.complexfloating):
        raise ValueError(f"dtype must be a complex floating-point type; got {np.dtype(dtype)}.")
    return jnp.asarray(m, dtype=dtype)
