"""ormqr: multiply by the Q of a QR factorization without forming Q (LAPACK ormqr/unmqr)."""
from __future__ import annotations

from fluxion._src import ad, dtypes
from fluxion._src.core import ShapedArray
from fluxion._src.lax.linalg import lapack
from fluxion._src.lax.linalg.primitives import _check_matrix, _primitive


def _ormqr_abstract_eval(a, taus, c, *, left, transpose):
    _check_matrix("ormqr", a, square=False)
    _check_matrix("ormqr", c, square=False)
    if not (a.dtype == taus.dtype == c.dtype):
        raise TypeError(f"ormqr requires a, taus and c of one dtype, got {a.dtype}, "
                        f"{taus.dtype} and {c.dtype}")
    if taus.ndim != a.ndim - 1 or taus.shape[:-1] != a.shape[:-2] \
            or c.shape[:-2] != a.shape[:-2]:
        raise ValueError(f"ormqr requires equal batch dimensions, got a {a.shape}, taus "
                         f"{taus.shape} and c {c.shape}")
    m = a.shape[-2]
    if taus.shape[-1] > min(a.shape[-2:]):
        raise ValueError(f"ormqr: taus of shape {taus.shape} has more reflectors than a of "
                         f"shape {a.shape} can hold")
    if left and c.shape[-2] != m:
        raise ValueError(f"ormqr with left=True expects c to have the same number of rows as "
                         f"the Householder matrix a. Got a shape {a.shape} and c shape "
                         f"{c.shape}.")
    if not left and c.shape[-1] != m:
        raise ValueError(f"ormqr with left=False expects c to have the same number of columns "
                         f"as the Householder matrix a has rows. Got a shape {a.shape} and c "
                         f"shape {c.shape}.")
    return ShapedArray(c.shape, c.dtype)


def _ormqr_cpu(ctx, a, taus, c, *, left, transpose):
    if 0 in c.shape[-2:] or taus.shape[-1] == 0:
        return c
    out, = lapack.call(ctx, "ormqr", a.dtype, [a, taus, c], [c.aval.update(weak_type=False)],
                       {"left": "true" if left else "false",
                        "transpose": "true" if transpose else "false"},
                       matrix_operands=[True, False, True], alias=(0, 2))
    return out


ormqr_p = _primitive("ormqr", _ormqr_abstract_eval, _ormqr_cpu)


def _ormqr_jvp(primals, tangents, *, left, transpose):
    a, taus, c = primals
    if any(type(t) is not ad.Zero for t in tangents[:2]):
        raise NotImplementedError("Differentiation of ormqr with respect to the Householder "
                                  "reflectors a and taus is not implemented")
    out = ormqr_p.bind(a, taus, c, left=left, transpose=transpose)
    if type(tangents[2]) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    return out, ormqr_p.bind(a, taus, tangents[2], left=left, transpose=transpose)


def _ormqr_transpose(ct, a, taus, c, *, left, transpose):
    assert ad.is_undefined_primal(c) and not ad.is_undefined_primal(a)
    if type(ct) is ad.Zero:
        return [None, None, ad.Zero(c.aval)]
    import fluxion.numpy as jnp
    # The linear transpose of c -> Q c is ct -> Q^T ct = conj(Q^H conj(ct)).
    cplx = dtypes.is_complex(ct.dtype)
    ct = jnp.conj(ct) if cplx else ct
    out = ormqr_p.bind(a, taus, ct, left=left, transpose=not transpose)
    return [None, None, jnp.conj(out) if cplx else out]


ad.primitive_jvps[ormqr_p] = _ormqr_jvp
ad.primitive_transposes[ormqr_p] = _ormqr_transpose


def ormqr(a, taus, c, *, left: bool = True, transpose: bool = False):
    """Q @ c (`left`) or c @ Q, with Q^H instead of Q when `transpose`, where Q is given by
    the Householder reflectors in the lower part of `a` and their scalar factors `taus`
    (as returned by geqrf)."""
    import fluxion.numpy as jnp
    return ormqr_p.bind(jnp.asarray(a), jnp.asarray(taus), jnp.asarray(c), left=bool(left),
                        transpose=bool(transpose))
