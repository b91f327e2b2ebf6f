"""Bad input catalogue: NaN and Inf inputs and wrong shapes for every linear-algebra routine.
Non-finite input gives non-finite output as in JAX, never a crash inside LAPACK."""
import numpy as onp

from catalogue import Case, family_test

NAN = onp.full((3, 3), onp.nan, onp.float32)
INF = onp.where(onp.eye(3, dtype=bool), onp.inf, 0.0).astype(onp.float32)
SPD = (onp.eye(3) * 2).astype(onp.float32)


def la(m):
    return m.numpy.linalg


CASES = []
for label, bad in [("nan", NAN), ("inf", INF)]:
    for name, call in [
            ("cholesky", lambda m, a: la(m).cholesky(a)),
            ("inv", lambda m, a: la(m).inv(a)),
            ("solve", lambda m, a: la(m).solve(a, onp.ones(3, onp.float32))),
            ("det", lambda m, a: la(m).det(a)),
            ("slogdet", lambda m, a: la(m).slogdet(a)[1]),
            ("eigh", lambda m, a: la(m).eigh(a)[0]),
            ("eigvalsh", lambda m, a: la(m).eigvalsh(a)),
            ("svd", lambda m, a: la(m).svd(a, compute_uv=False)),
            ("qr", lambda m, a: la(m).qr(a)[1]),
            ("pinv", lambda m, a: la(m).pinv(a)),
            ("lstsq", lambda m, a: la(m).lstsq(a, onp.ones(3, onp.float32))[0]),
            ("norm2", lambda m, a: la(m).norm(a, 2)),
            ("matrix_rank", lambda m, a: la(m).matrix_rank(a)),
            ("eigvals", lambda m, a: la(m).eigvals(a)),
            ("lu", lambda m, a: m.lax.linalg.lu(a)[0]),
            ("triangular_solve", lambda m, a: m.lax.linalg.triangular_solve(
                a, onp.ones((3, 1), onp.float32), left_side=True, lower=True)),
    ]:
        # No exception and no crash; what comes back is NaN/Inf-laden as in JAX, so only the
        # absence of a crash and of an exception is asserted.
        CASES.append(Case(f"{name}_{label}", lambda m, call=call, bad=bad: call(m, bad),
                          raises=None))

# JAX raises TypeError for a non-square input from an incidental failure (symmetrizing it);
# fluxion checks the shape first and raises ValueError. A vector is a TypeError in both.
CASES += [
    Case("cholesky_not_square", lambda m: la(m).cholesky(onp.ones((2, 3), onp.float32)),
         raises=ValueError, match="square"),
    Case("inv_rank1", lambda m: la(m).inv(onp.ones(3, onp.float32))),
    Case("solve_shapes", lambda m: la(m).solve(SPD, onp.ones(4, onp.float32))),
    Case("det_not_square", lambda m: la(m).det(onp.ones((2, 3), onp.float32))),
    Case("eigh_rank1", lambda m: la(m).eigh(onp.ones(3, onp.float32)), raises=TypeError,
         match="rank at least 2"),
    Case("qr_bad_mode", lambda m: la(m).qr(SPD, mode="thin")),
    Case("norm_bad_ord", lambda m: la(m).norm(SPD, ord="fro2")),
    Case("svd_rank0", lambda m: la(m).svd(onp.float32(3.0)), raises=TypeError,
         match="rank at least 2"),
    Case("cholesky_singular_gives_nan", lambda m: la(m).cholesky(-SPD), raises=None,
         compare=True),
    Case("inv_singular", lambda m: la(m).inv(onp.zeros((3, 3), onp.float32)), raises=None),
]

test_case = family_test(CASES, __file__)
