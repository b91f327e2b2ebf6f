"""fluxion on an NVIDIA GPU: one pass over what runs differently there, against NumPy.

Run on a machine with jaxlib's CUDA plugin (`python benchmarks/gpu_check.py`); it prints one
line per check and a summary. `--jax-lowerings FILE` writes JAX's CUDA lowering of the same
linear-algebra calls (the custom-call lines) for comparison; `--memory` reports the GPU pool with
and without XLA_PYTHON_CLIENT_PREALLOCATE=false; `--versus-jax` compares a few calls where the
two differ on a GPU, each library also against itself on the CPU. CPU-only machines run the CUDA lowering rules
through tests/test_linalg_cuda_lowering.py instead.
"""
from __future__ import annotations

import os
import subprocess
import sys
import traceback

import numpy as np

RNG = np.random.default_rng(0)
FAILED: list[str] = []


def check(name):
    def wrap(fn):
        try:
            fn()
            print("ok  ", name, flush=True)
        except Exception as e:  # report and go on: one pass should show every failure
            FAILED.append(name)
            print("FAIL", name, type(e).__name__, str(e)[:600].replace("\n", " | "), flush=True)
            if os.environ.get("GPU_CHECK_TRACEBACKS"):
                traceback.print_exc()
        return fn
    return wrap


def close(got, want, rtol, atol=0.0):
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol)


def spd(n, batch=(), dtype=np.float64):
    a = RNG.standard_normal(batch + (n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * RNG.standard_normal(batch + (n, n))
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def linear_algebra_checks(fluxion, jnp, lax):
    cpu = fluxion.devices("cpu")[0]

    @check("cholesky f64/c128 batched, f32")
    def _():
        for dtype, rtol in ((np.float64, 1e-10), (np.complex128, 1e-10), (np.float32, 1e-4)):
            a = spd(6, (3,), dtype)
            close(jnp.linalg.cholesky(a), np.linalg.cholesky(a), rtol, 1e-5 if rtol > 1e-6 else 0)

    @check("cholesky of an indefinite matrix is NaN")
    def _():
        out = np.asarray(jnp.linalg.cholesky(-np.eye(3)))
        assert np.isnan(out[np.tril_indices(3)]).all() and not np.triu(out, 1).any(), out

    @check("solve/inv/det/slogdet batched (getrf, pivots to permutation)")
    def _():
        a = RNG.standard_normal((4, 7, 7))
        b = RNG.standard_normal((4, 7, 2))
        close(jnp.linalg.solve(a, b), np.linalg.solve(a, b), 1e-9)
        close(jnp.linalg.inv(a), np.linalg.inv(a), 1e-9)
        close(jnp.linalg.det(a), np.linalg.det(a), 1e-9)
        sign, logdet = jnp.linalg.slogdet(a)
        want = np.linalg.slogdet(a)
        close(sign, want[0], 0)
        close(logdet, want[1], 1e-10)

    @check("lu: P L U = A, wide and tall, f32 and c128")
    def _():
        for shape, dtype in (((5, 8), np.float32), ((8, 5), np.complex128), ((6, 6), np.float64)):
            a = RNG.standard_normal(shape).astype(dtype)
            lu, piv, perm = (np.asarray(x) for x in lax.linalg.lu(a))
            m, n = shape
            k = min(m, n)
            low = np.tril(lu[:, :k], -1) + np.eye(m, k)
            up = np.triu(lu[:k, :])
            close(low @ up, a[perm], 1e-4 if dtype == np.float32 else 1e-10, 1e-5)
            p_cpu = lax.linalg.lu(fluxion.device_put(a, cpu))[1]
            np.testing.assert_array_equal(piv, np.asarray(p_cpu))

    @check("singular matrix: solve gives inf/nan, no crash")
    def _():
        out = np.asarray(jnp.linalg.solve(np.ones((3, 3)), np.ones(3)))
        assert not np.isfinite(out).all(), out

    @check("qr reduced/complete, wide/tall, complex")
    def _():
        for shape, dtype, mode in (((7, 4), np.float64, "reduced"), ((4, 7), np.float64,
                                                                     "complete"),
                                   ((6, 6), np.complex128, "reduced"), ((3, 9, 5), np.float32,
                                                                        "complete")):
            a = RNG.standard_normal(shape).astype(dtype)
            q, r = (np.asarray(x) for x in jnp.linalg.qr(a, mode=mode))
            tol = 1e-4 if dtype == np.float32 else 1e-10
            close(q @ r, a, tol, tol)
            eye = np.eye(q.shape[-1])
            close(np.conj(np.swapaxes(q, -1, -2)) @ q, np.broadcast_to(eye, q.shape[:-2] + eye.shape),
                  tol, tol)
            assert np.allclose(np.tril(r, -1), 0)

    @check("eigh f64/c128/f32 batched, subset")
    def _():
        for dtype, tol in ((np.float64, 1e-9), (np.complex128, 1e-9), (np.float32, 1e-3)):
            a = spd(8, (2,), dtype)
            w, v = (np.asarray(x) for x in jnp.linalg.eigh(a))
            close(w, np.linalg.eigvalsh(a), tol)
            close(a @ v, v * w[..., None, :], tol * 10, tol * 10)
        a = spd(6)
        w = lax.linalg.eigh(a, subset_by_index=(1, 3))[1]
        close(w, np.linalg.eigvalsh(a)[1:3], 1e-10)

    @check("svd: Jacobi small and >32 economy, QR beyond 1024 rows and wide, values only, complex")
    def _():
        cases = [((5, 3), np.float64, True), ((40, 36), np.float64, False),
                 ((3, 50, 40), np.float32, False), ((1100, 6), np.float64, False),
                 ((6, 1100), np.float64, True), ((7, 5), np.complex128, False)]
        for shape, dtype, full in cases:
            a = RNG.standard_normal(shape).astype(dtype)
            tol = 1e-3 if dtype == np.float32 else 1e-9
            u, s, vt = (np.asarray(x) for x in jnp.linalg.svd(a, full_matrices=full))
            close(s, np.linalg.svd(a, compute_uv=False), tol)
            k = s.shape[-1]
            close((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], a, tol, tol)
            close(jnp.linalg.svd(a, compute_uv=False), np.linalg.svd(a, compute_uv=False), tol)
        on_gpu = fluxion.default_backend() == "gpu"  # the CPU has neither Jacobi nor polar
        for algorithm in (lax.linalg.SvdAlgorithm.QR,) + on_gpu * (
                lax.linalg.SvdAlgorithm.JACOBI, lax.linalg.SvdAlgorithm.POLAR):
            a = RNG.standard_normal((4, 9))
            s = lax.linalg.svd(a, compute_uv=False, algorithm=algorithm)
            close(s, np.linalg.svd(a, compute_uv=False), 1e-8)

    @check("eig: real with complex pairs, complex; eigvals")
    def _():
        for dtype in (np.float64, np.complex128, np.float32):
            a = RNG.standard_normal((3, 6, 6)).astype(dtype)
            w, v = (np.asarray(x) for x in jnp.linalg.eig(a))
            tol = 1e-3 if dtype == np.float32 else 1e-9
            close(a @ v, v * w[..., None, :], tol, tol)
            for got, want in zip(np.asarray(jnp.linalg.eigvals(a)), np.linalg.eigvals(a)):
                order = lambda z: np.lexsort((z.imag, np.round(z.real, 5)))  # noqa: E731
                close(got[order(got)], want[order(want)], tol, tol)

    @check("eig of a matrix holding NaN or inf gives NaN (cuSOLVER's geev would fail)")
    def _():
        a = RNG.standard_normal((3, 4, 4))
        a[1, 2, 3] = np.nan
        a[2, 0, 0] = np.inf
        w, v = (np.asarray(x) for x in jnp.linalg.eig(a))
        assert np.isnan(w[1:]).all() and np.isnan(v[1:]).all() and np.isfinite(w[0]).all()

    @check("lstsq, pinv, matrix_rank, norm(ord=2), cond")
    def _():
        a = RNG.standard_normal((9, 4))
        b = RNG.standard_normal(9)
        close(jnp.linalg.lstsq(a, b)[0], np.linalg.lstsq(a, b, rcond=None)[0], 1e-9)
        close(jnp.linalg.pinv(a), np.linalg.pinv(a), 1e-9)
        assert int(jnp.linalg.matrix_rank(a @ a.T)) == 4
        close(jnp.linalg.norm(a, 2), np.linalg.norm(a, 2), 1e-10)
        close(jnp.linalg.cond(a), np.linalg.cond(a), 1e-9)

    @check("tridiagonal (sytrd) equals the CPU's, tridiagonal_solve (gtsv2, n<=2, perturbed)")
    def _():
        a = spd(6, (2,))
        gpu = [np.asarray(x) for x in lax.linalg.tridiagonal(a)]
        cpu_out = [np.asarray(x) for x in lax.linalg.tridiagonal(fluxion.device_put(a, cpu))]
        for g, c in zip(gpu[1:3], cpu_out[1:3]):  # d and e are unique up to signs of e
            close(np.abs(g), np.abs(c), 1e-9)
        for n in (6, 2, 1):
            dl, d, du = RNG.standard_normal((3, n))
            dl[0] = du[-1] = 0
            d = d + 4
            b = RNG.standard_normal((n, 3))
            m = np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)
            close(lax.linalg.tridiagonal_solve(dl, d, du, b), np.linalg.solve(m, b), 1e-9)
            close(lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True),
                  np.linalg.solve(m, b), 1e-9)

    @check("ormqr and householder_product against Q from qr")
    def _():
        a = RNG.standard_normal((6, 4))
        c = RNG.standard_normal((6, 3))
        r, taus = lax.linalg.geqrf(a)
        q = np.asarray(lax.linalg.householder_product(r, taus))
        close(q, np.linalg.qr(a)[0] * np.sign(np.diag(np.linalg.qr(a)[1]))
              * np.sign(np.diag(np.asarray(r))), 1e-9, 1e-12)
        qfull = np.asarray(jnp.linalg.qr(a, mode="complete")[0])
        close(lax.linalg.ormqr(r, taus, c, left=True, transpose=True), qfull.T @ c, 1e-9, 1e-12)

    @check("triangular_solve (XLA's own on GPU), all flags")
    def _():
        a = np.tril(RNG.standard_normal((5, 5))) + 5 * np.eye(5)
        b = RNG.standard_normal((5, 2))
        close(lax.linalg.triangular_solve(a, b, left_side=True, lower=True), np.linalg.solve(a, b),
              1e-10)
        close(lax.linalg.triangular_solve(a.T, b.T, left_side=False, lower=False,
                                          transpose_a=True), np.linalg.solve(a.T, b).T, 1e-10)

    @check("triangular_solve: every flag, f32/f64/c128, against NumPy")
    def _():
        import itertools
        for dtype in (np.float64, np.float32, np.complex128):
            tol = 1e-3 if dtype == np.float32 else 1e-10
            a = RNG.standard_normal((2, 4, 4)) + 4 * np.eye(4)
            if dtype == np.complex128:
                a = a + 1j * RNG.standard_normal((2, 4, 4))
            a = a.astype(dtype)
            for left, lower, trans, conj, unit in itertools.product(*[(False, True)] * 5):
                b = RNG.standard_normal((2, 4, 3) if left else (2, 3, 4)).astype(dtype)
                got = lax.linalg.triangular_solve(a, b, left_side=left, lower=lower,
                                                  transpose_a=trans, conjugate_a=conj,
                                                  unit_diagonal=unit)
                t = np.tril(a) if lower else np.triu(a)
                if unit:
                    t = t - np.diagonal(t, axis1=1, axis2=2)[..., None] * np.eye(4) + np.eye(4)
                t = np.conj(t) if conj else t
                t = np.swapaxes(t, -1, -2) if trans else t
                want = np.linalg.solve(t, b) if left else np.swapaxes(np.linalg.solve(
                    np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
                try:
                    close(got, want, tol, tol)
                except AssertionError:
                    raise AssertionError(f"{np.dtype(dtype).name} left={left} lower={lower} "
                                         f"trans={trans} conj={conj} unit={unit}") from None

    @check("grad of cho_factor (one triangle read) equals the CPU's, f64 and f32")
    def _():
        import fluxion.scipy.linalg as fsl
        w = RNG.standard_normal((4, 4))
        for dtype, tol in ((np.float64, 1e-9), (np.float32, 1e-3)):
            a = spd(4).astype(dtype)
            for lower in (True, False):
                f = fluxion.jit(fluxion.grad(
                    lambda m: (fsl.cho_factor(m, lower=lower)[0] * w).sum()))
                close(f(a), np.asarray(f(fluxion.device_put(a, cpu))), tol, tol)

    @check("grad/jvp of cholesky, solve, eigh, svd equal the CPU's")
    def _():
        a = spd(5)
        fns = [lambda x: jnp.linalg.cholesky(x).sum(),
               lambda x: jnp.linalg.solve(x, jnp.arange(5.0)).sum(),
               lambda x: jnp.linalg.eigh(x)[0] @ jnp.arange(5.0),
               lambda x: jnp.linalg.svd(x, compute_uv=False).sum(),
               lambda x: jnp.linalg.slogdet(x)[1]]
        for f in fns:
            g = fluxion.grad(f)(a)
            g_cpu = fluxion.jit(fluxion.grad(f))(fluxion.device_put(a, cpu))
            close(g, np.asarray(g_cpu), 1e-8, 1e-10)

    @check("vmap of solve equals a Python loop")
    def _():
        a = RNG.standard_normal((6, 4, 4))
        b = RNG.standard_normal((6, 4))
        got = fluxion.vmap(jnp.linalg.solve)(a, b)
        close(got, np.stack([np.linalg.solve(x, y) for x, y in zip(a, b)]), 1e-9)

    @check("scipy.linalg: lu_factor/lu_solve, cho_factor/cho_solve, expm, eigh_tridiagonal")
    def _():
        import scipy.linalg as sl
        import fluxion.scipy.linalg as fsl
        a = spd(5)
        b = RNG.standard_normal(5)
        close(fsl.lu_solve(fsl.lu_factor(a), b), sl.lu_solve(sl.lu_factor(a), b), 1e-10)
        close(fsl.cho_solve(fsl.cho_factor(a), b), sl.cho_solve(sl.cho_factor(a), b), 1e-10)
        close(fsl.expm(a / 10), sl.expm(a / 10), 1e-9)

    @check("random.multivariate_normal (cholesky, svd and eigh methods)")
    def _():
        cov = spd(3)
        for method in ("cholesky", "svd", "eigh"):
            x = np.asarray(fluxion.random.multivariate_normal(
                fluxion.random.key(0), np.zeros(3), cov, (20000,), method=method))
            close(np.cov(x.T), cov, 0.1, 0.1)


def core_checks(fluxion, jnp, lax):
    cpu = fluxion.devices("cpu")[0]

    @check("devices and default backend")
    def _():
        print("     ", fluxion.devices(), fluxion.default_backend())
        assert fluxion.default_backend() == "gpu", fluxion.default_backend()

    @check("jit/grad of an MLP equals the CPU's")
    def _():
        x = RNG.standard_normal((64, 32))
        w = RNG.standard_normal((32, 16))
        loss = lambda w: jnp.tanh(x @ w).sum()
        close(fluxion.grad(loss)(w),
              np.asarray(fluxion.jit(fluxion.grad(loss))(fluxion.device_put(w, cpu))), 1e-9)

    @check("control flow, random bits equal to the CPU's, fft, sort, scatter")
    def _():
        f = fluxion.jit(lambda n: lax.fori_loop(0, n, lambda i, c: c * 1.5 + i, 1.0))
        want = 1.0
        for i in range(10):
            want = want * 1.5 + i
        close(f(10), want, 1e-12)
        k = fluxion.random.key(0)
        np.testing.assert_array_equal(
            np.asarray(fluxion.random.uniform(k, (5,))),
            np.asarray(fluxion.random.uniform(fluxion.device_put(k, cpu), (5,))))
        z = RNG.standard_normal((8, 64))
        close(jnp.fft.rfft(z), np.fft.rfft(z), 1e-10, 1e-10)
        y = RNG.standard_normal(1000)
        np.testing.assert_array_equal(jnp.sort(y), np.sort(y))
        idx = RNG.integers(0, 1000, 50)
        want = y.copy()
        np.add.at(want, idx, 1.0)
        close(jnp.asarray(y).at[idx].add(1.0), want, 1e-12)

    @check("integer dots with a wider result type (XLA:GPU: int8 doubled, int32->f32 fails)")
    def _():
        for in_dtype, out_dtype in ((np.int8, np.int32), (np.int32, np.float32),
                                    (np.uint8, np.int32), (np.int8, np.int16)):
            x = RNG.integers(0, 100, (3, 16)).astype(in_dtype)
            y = RNG.integers(0, 100, (16, 5)).astype(in_dtype)
            got = jnp.matmul(x, y, preferred_element_type=out_dtype)
            np.testing.assert_array_equal(np.asarray(got), x.astype(out_dtype) @ y.astype(out_dtype))

    @check("host callbacks: pure_callback, ordered io_callback, debug.print, under jit/vmap")
    def _():
        f = fluxion.jit(lambda v: fluxion.pure_callback(
            lambda a: np.sin(np.asarray(a)), fluxion.ShapeDtypeStruct(v.shape, v.dtype), v,
            vmap_method="sequential"))
        close(f(np.arange(4.0)), np.sin(np.arange(4.0)), 1e-12)
        close(fluxion.vmap(f)(np.ones((3, 4))), np.sin(np.ones((3, 4))), 1e-12)
        seen = []
        g = fluxion.jit(lambda v: fluxion.experimental.io_callback(
            lambda a: seen.append(float(a)) or np.float64(a), fluxion.ShapeDtypeStruct((), v.dtype),
            v.sum(), ordered=True) * 2)
        close(g(np.ones(3)), 6.0, 0)
        fluxion.jit(lambda v: fluxion.debug.print("     debug.print on GPU: {}", v.sum()))(
            np.ones(3))
        assert seen == [3.0], seen

    @check("ordered io_callback inside fori_loop and cond keeps program order")
    def _():
        seen = []
        def body(i, c):
            fluxion.experimental.io_callback(seen.append, None, i, ordered=True)
            return c + 1.0
        f = fluxion.jit(lambda x: lax.cond(x > 0, lambda v: lax.fori_loop(0, 4, body, v),
                                           lambda v: v, x))
        close(f(1.0), 5.0, 0)
        assert [int(v) for v in seen] == [0, 1, 2, 3], seen

    @check("a Python exception in a callback reaches the caller")
    def _():
        def bad(a):
            raise KeyError("from the callback")
        f = fluxion.jit(lambda v: fluxion.pure_callback(bad, fluxion.ShapeDtypeStruct((), v.dtype), v))
        try:
            np.asarray(f(1.0))
        except KeyError:
            return
        raise AssertionError("no KeyError")

    @check("checkify on GPU")
    def _():
        from fluxion.experimental import checkify
        err, _ = checkify.checkify(fluxion.jit(lambda x: jnp.log(x)), errors=checkify.nan_checks)(
            -1.0)
        assert err.get() is not None

    @check("export for cpu+cuda, call here; serialize round trip")
    def _():
        from fluxion import export
        f = fluxion.jit(lambda x: jnp.linalg.solve(x, x.sum(0)))
        a = spd(4)
        exp = export.export(f, platforms=("cpu", "cuda"))(a)
        back = export.deserialize(exp.serialize())
        close(back.call(a), np.linalg.solve(a, a.sum(0)), 1e-10)

    @check("device_put GPU<->CPU, donation")
    def _():
        a = fluxion.device_put(np.arange(10.0))
        b = fluxion.device_put(a, cpu)
        np.testing.assert_array_equal(b, np.arange(10.0))
        assert b.devices() == {cpu}
        g = fluxion.jit(lambda x: x + 1, donate_argnums=0)
        x = fluxion.device_put(np.ones(1000))
        close(g(x), 2 * np.ones(1000), 0)


def jax_lowerings(path):
    """JAX's CUDA lowering of the same calls: its custom-call lines, one block per call."""
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    a, w = spd(5, (2,)), RNG.standard_normal((4, 6))
    calls = {"cholesky": (jnp.linalg.cholesky, a), "inv": (jnp.linalg.inv, a),
             "qr": (jnp.linalg.qr, w), "eigh": (jnp.linalg.eigh, a), "svd": (jnp.linalg.svd, w),
             "svd_econ40": (lambda x: jnp.linalg.svd(x, full_matrices=False),
                            RNG.standard_normal((40, 36))),
             "svd_big": (jnp.linalg.svd, RNG.standard_normal((1100, 6))),
             "svd_wide_qr": (lambda x: jax.lax.linalg.svd(
                 x, algorithm=jax.lax.linalg.SvdAlgorithm.QR), w),
             "eig": (jnp.linalg.eig, a), "tridiagonal": (jax.lax.linalg.tridiagonal, a),
             "gtsv": (lambda x: jax.lax.linalg.tridiagonal_solve(x[0, :, 0], x[0, :, 1],
                                                                 x[0, :, 2], x[0]), a),
             "ormqr": (lambda x: jax.lax.linalg.ormqr(*jax.lax.linalg.geqrf(x), x), a),
             "callback": (lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape,
                                                                                   x.dtype), x),
                          a)}
    with open(path, "w") as out:
        for name, (f, x) in calls.items():
            try:
                text = jax.jit(f).lower(x).as_text()
                lines = [ln.strip() for ln in text.splitlines() if "custom_call" in ln]
            except Exception as e:
                lines = [f"ERROR {type(e).__name__}: {e}"]
            out.write(f"== {name}\n" + "\n".join(lines) + "\n")


def versus_jax():
    """Where fluxion and JAX disagree on the GPU, each also on its CPU: fluxion-GPU vs
    fluxion-CPU, JAX-GPU vs JAX-CPU and fluxion-GPU vs JAX-GPU (max abs difference)."""
    import jax
    import jax.numpy as jjnp
    jax.devices()  # JAX loads the CUDA plugin first; fluxion then shares it
    import fluxion
    import fluxion.numpy as fjnp
    for lib in (jax, fluxion):
        lib.config.update("jax_enable_x64", True)
    m = RNG.standard_normal((4, 3))
    i8 = RNG.integers(-5, 5, (3, 3)).astype(np.int8)
    s = np.array([[0.0, 1.0], [0.0, 0.0]])
    cov = spd(3)
    cases = {
        "grad sum(U) of svd 4x3": (lambda L: L.grad(lambda x: L.numpy.linalg.svd(
            x, full_matrices=False)[0].sum()), m),
        "svd U 4x3": (lambda L: lambda x: L.numpy.linalg.svd(x, full_matrices=False)[0], m),
        "int8 matmul preferred int32": (lambda L: lambda x: L.numpy.matmul(
            x, x, preferred_element_type=np.int32), i8),
        "grad det at [[0,1],[0,0]]": (lambda L: L.grad(L.numpy.linalg.det), s),
        "eigh V": (lambda L: lambda x: L.numpy.linalg.eigh(x)[1], cov),
        "mvn eigh": (lambda L: lambda c: L.random.multivariate_normal(
            L.random.key(0), np.zeros(3), c, (4,), method="eigh"), cov),
        "mvn svd": (lambda L: lambda c: L.random.multivariate_normal(
            L.random.key(0), np.zeros(3), c, (4,), method="svd"), cov),
    }
    libs = {"jax": (jax, jjnp), "fluxion": (fluxion, fjnp)}
    for name, (make, x) in cases.items():
        out = {}
        for lname, (L, _) in libs.items():
            for dev in ("gpu", "cpu"):
                try:
                    d = L.devices(dev)[0]
                    out[lname, dev] = np.asarray(L.jit(make(L))(L.device_put(x, d)))
                except Exception as e:
                    out[lname, dev] = f"{type(e).__name__}: {str(e)[:200]}"
        def diff(a, b):
            a, b = out[a], out[b]
            if isinstance(a, str) or isinstance(b, str):
                return a if isinstance(a, str) else b
            return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
        print(f"{name}: fl gpu-cpu {diff(('fluxion', 'gpu'), ('fluxion', 'cpu'))}, jax gpu-cpu "
              f"{diff(('jax', 'gpu'), ('jax', 'cpu'))}, fl-jax gpu "
              f"{diff(('fluxion', 'gpu'), ('jax', 'gpu'))}, fl-jax cpu "
              f"{diff(('fluxion', 'cpu'), ('jax', 'cpu'))}", flush=True)


def memory_report():
    code = ("import fluxion, fluxion.numpy as jnp; x = jnp.ones(1000); x.block_until_ready(); "
            "print({k: v for k, v in (fluxion.devices()[0].memory_stats() or {}).items() "
            "if k in ('bytes_limit', 'bytes_reserved', 'pool_bytes', 'bytes_in_use')})")
    for value in (None, "false"):
        env = dict(os.environ)
        env.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)
        if value is not None:
            env["XLA_PYTHON_CLIENT_PREALLOCATE"] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        print(f"memory PREALLOCATE={value}:", out.stdout.strip() or out.stderr.strip()[-400:])


def main():
    if sys.argv[1:2] == ["--jax-lowerings"]:
        return jax_lowerings(sys.argv[2])
    if sys.argv[1:2] == ["--versus-jax"]:
        return versus_jax()
    if sys.argv[1:2] == ["--memory"]:
        return memory_report()
    import fluxion
    import fluxion.numpy as jnp
    from fluxion import lax
    fluxion.config.update("jax_enable_x64", True)
    core_checks(fluxion, jnp, lax)
    linear_algebra_checks(fluxion, jnp, lax)
    print("FAILED:", FAILED)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
