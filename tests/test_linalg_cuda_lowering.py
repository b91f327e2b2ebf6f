"""The CUDA lowering of lax.linalg, checked without a GPU.

Every rule must lower to a module XLA parses, calling the cuSOLVER/cuSPARSE kernels JAX calls;
the parts written in StableHLO (triangular_solve, small tridiagonal systems, the unpacking of
geev's real eigenvectors) run here on the CPU against NumPy. The kernels themselves run only on
a GPU (`benchmarks/gpu_check.py`).
"""
import re

import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import export, lax
from fluxion._src import core, dispatch, staging
from fluxion._src.compiler import backend, lowering
from fluxion._src.lax.linalg import cuda

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 5, 5)).astype(np.float32)
WIDE = RNG.standard_normal((4, 6)).astype(np.float32)
SvdAlgorithm = lax.linalg.SvdAlgorithm
UNSTABLE = ("cusolver_geev_ffi", "cu_tridiagonal_solve_perturbed", "cusolver_ormqr_ffi",
            "cusolver_gesvdp_ffi")


def _cuda_targets(f, *args):
    exported = export.export(fluxion.jit(f), platforms=("cuda",), disabled_checks=[
        export.DisabledSafetyCheck.custom_call(n) for n in UNSTABLE])(*args)
    text = exported.mlir_module()
    backend.parse_module(text)
    return sorted(set(re.findall(r"custom_call @(\w+)", text)))


def _spd(a):
    return a @ jnp.swapaxes(a, -1, -2) + 5 * jnp.eye(a.shape[-1], dtype=a.dtype)


CASES = [
    ("cholesky", lambda a: jnp.linalg.cholesky(_spd(a)), A, ["cusolver_potrf_ffi"]),
    ("inv", jnp.linalg.inv, A, ["cu_lu_pivots_to_permutation", "cusolver_getrf_ffi"]),
    ("slogdet", jnp.linalg.slogdet, A, ["cusolver_getrf_ffi"]),
    ("qr", jnp.linalg.qr, WIDE, ["cusolver_geqrf_ffi", "cusolver_orgqr_ffi"]),
    ("qr complex", lambda a: jnp.linalg.qr(a.astype(np.complex64)), WIDE,
     ["cusolver_geqrf_ffi", "cusolver_orgqr_ffi"]),
    ("eigh", jnp.linalg.eigh, A, ["cusolver_syevd_ffi"]),
    ("svd small: Jacobi", jnp.linalg.svd, WIDE, ["cusolver_gesvdj_ffi"]),
    ("svd tall thin values: QR", lambda a: jnp.linalg.svd(a, compute_uv=False),
     np.ones((1100, 3), np.float32), ["cusolver_gesvd_ffi"]),
    ("svd QR of a wide matrix", lambda a: lax.linalg.svd(a, algorithm=SvdAlgorithm.QR), WIDE,
     ["cusolver_gesvd_ffi"]),
    ("svd polar", lambda a: lax.linalg.svd(a, algorithm=SvdAlgorithm.POLAR), WIDE,
     ["cusolver_gesvdp_ffi"]),
    ("svd subset", lambda a: lax.linalg.svd(a, full_matrices=False, subset_by_index=(1, 3)),
     WIDE, ["cusolver_gesvdj_ffi"]),
    ("eigh subset", lambda a: lax.linalg.eigh(a, subset_by_index=(2, 4)), A,
     ["cusolver_syevd_ffi"]),
    ("svd of an empty matrix", jnp.linalg.svd, np.zeros((0, 3), np.float32), []),
    ("eig", jnp.linalg.eig, A, ["cusolver_geev_ffi"]),
    ("tridiagonal", lax.linalg.tridiagonal, A, ["cusolver_sytrd_ffi"]),
    ("tridiagonal_solve", lambda a: lax.linalg.tridiagonal_solve(
        a[0, :, 0], a[0, :, 1] + 5, a[0, :, 2], a[0]), A, ["cusparse_gtsv2_ffi"]),
    ("tridiagonal_solve perturbed", lambda a: lax.linalg.tridiagonal_solve(
        a[0, :, 0], a[0, :, 1], a[0, :, 2], a[0], perturb_singular=True), A,
     ["cu_tridiagonal_solve_perturbed"]),
    ("ormqr", lambda a: lax.linalg.ormqr(*lax.linalg.geqrf(a), a, transpose=True), A,
     ["cusolver_geqrf_ffi", "cusolver_ormqr_ffi"]),
    ("grad of eigh", fluxion.grad(lambda a: jnp.linalg.eigh(_spd(a))[0].sum()), A,
     ["cusolver_syevd_ffi"]),
]


@pytest.mark.parametrize("name,f,x,targets", CASES, ids=[c[0] for c in CASES])
def test_cuda_lowering_calls_the_kernels_jax_calls(name, f, x, targets):
    assert _cuda_targets(f, x) == targets


def test_cuda_lowering_refuses_what_cusolver_lacks():
    with pytest.raises(NotImplementedError, match="Left eigenvectors"):
        _cuda_targets(lambda a: lax.linalg.eig(a, compute_left_eigenvectors=True), A)
    with pytest.raises(NotImplementedError, match="Divide-and-conquer"):
        _cuda_targets(lambda a: lax.linalg.svd(
            a, algorithm=SvdAlgorithm.DIVIDE_AND_CONQUER), WIDE)
    with pytest.raises(NotImplementedError, match="QDWH"):
        _cuda_targets(lambda a: lax.linalg.eigh(
            a, implementation=lax.linalg.EighImplementation.QDWH), A)
    with pytest.raises(NotImplementedError, match="only the cusolver implementation"):
        _cuda_targets(lambda a: lax.linalg.eig(
            a, implementation=lax.linalg.EigImplementation.LAPACK), A)
    with pytest.raises(NotImplementedError, match="schur"):
        _cuda_targets(lambda a: lax.linalg.schur(a), A)


def _run_cuda_rules_on_cpu(f, *args):
    """Lower `f` for CUDA and run the module on the CPU (it must call no GPU kernel)."""
    closed = staging.trace_to_jaxpr(lambda *xs: [f(*xs)], [core.get_aval(a) for a in args])
    text = lowering.lower_jaxpr_to_module(closed.jaxpr, "cuda")
    assert "custom_call" not in text
    return np.asarray(dispatch.compile_closed_jaxpr(closed, text=text)(list(args))[0])


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a,conjugate_a", [(False, False), (True, False),
                                                     (True, True), (False, True)])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_triangular_solve_rule_against_numpy(left_side, lower, transpose_a, conjugate_a,
                                              unit_diagonal):
    a = (RNG.standard_normal((2, 4, 4)) + 1j * RNG.standard_normal((2, 4, 4))
         + 4 * np.eye(4)).astype(np.complex64)
    b = (RNG.standard_normal((2, 4, 3) if left_side else (2, 3, 4))).astype(np.complex64)
    got = _run_cuda_rules_on_cpu(lambda a, b: lax.linalg.triangular_solve(
        a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
        conjugate_a=conjugate_a, unit_diagonal=unit_diagonal), a, b)
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        t = t - np.diagonal(t, axis1=1, axis2=2)[..., None] * np.eye(4) + np.eye(4)
    if conjugate_a:
        t = t.conj()
    if transpose_a:
        t = np.swapaxes(t, -1, -2)
    want = np.linalg.solve(t, b) if left_side else np.swapaxes(
        np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [1, 2])
def test_small_tridiagonal_systems_against_numpy(n):
    dl, d, du = RNG.standard_normal((3, 2, n))
    dl[:, 0] = du[:, -1] = 0
    d = d + 3
    b = RNG.standard_normal((2, n, 3))
    got = _run_cuda_rules_on_cpu(lambda *xs: lax.linalg.tridiagonal_solve(*xs), dl, d, du, b)
    for i in range(2):
        m = np.diag(d[i]) + np.diag(dl[i, 1:], -1) + np.diag(du[i, :-1], 1)
        np.testing.assert_allclose(got[i], np.linalg.solve(m, b[i]), rtol=1e-5)


@pytest.mark.parametrize("n", [1, 3, 4, 7])
def test_geev_real_packing_unpacked_against_numpy(n):
    a = RNG.standard_normal((3, n, n))
    w, v = np.linalg.eig(a)
    packed = np.zeros_like(a)
    for b in range(3):  # LAPACK/cuSOLVER packing: (re, im) of a pair's first vector
        j = 0
        while j < n:
            packed[b, :, j] = v[b, :, j].real
            if w[b, j].imag != 0:
                packed[b, :, j + 1] = v[b, :, j].imag
                j += 1
            j += 1
    got = cuda.unpack_conjugate_pairs(jnp.asarray(w), jnp.asarray(packed))
    np.testing.assert_allclose(np.asarray(got), v, atol=1e-12)


def test_gpu_client_takes_jax_allocator_settings(monkeypatch):
    """The CUDA client is made with the options JAX reads from XLA_PYTHON_CLIENT_* (without
    them the plugin preallocates 75% of the GPU whatever the user set)."""
    from jaxlib import xla_client
    made = {}
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    monkeypatch.setenv("XLA_CLIENT_MEM_FRACTION", ".3")
    monkeypatch.setattr(backend, "_find_cuda_plugin", lambda: "/nowhere/xla_cuda_plugin.so")
    monkeypatch.setattr(xla_client, "pjrt_plugin_loaded", lambda name: True)
    monkeypatch.setattr(xla_client, "pjrt_plugin_initialized", lambda name: True)
    monkeypatch.setattr(xla_client, "make_c_api_client",
                        lambda name, options: made.setdefault(name, options))
    monkeypatch.setattr(backend, "Backend", lambda client, platform: (client, platform))
    client, platform = backend._make_cuda()
    assert platform == "cuda" and client is made["cuda"]
    assert client["preallocate"] is False and client["memory_fraction"] == pytest.approx(.3)


def test_host_callbacks_lower_to_the_gpu_target_with_tokens_through_loops():
    def f(x):
        def body(i, c):
            fluxion.experimental.io_callback(lambda v: None, None, c, ordered=True)
            return c + fluxion.pure_callback(np.sin, fluxion.ShapeDtypeStruct((), c.dtype), c)
        out = lax.fori_loop(0, 3, body, x)
        fluxion.debug.print("{}", out)
        return lax.cond(out > 0, lambda v: v, lambda v: fluxion.experimental.io_callback(
            np.cos, fluxion.ShapeDtypeStruct((), v.dtype), v, ordered=True), out)
    closed = staging.trace_to_jaxpr(lambda x: [f(x)], [core.ShapedArray((), np.float32)])
    text = lowering.lower_jaxpr_to_module(closed.jaxpr, "cuda")
    backend.parse_module(text)
    targets = re.findall(r'call_target_name = "(\w+)"|custom_call @(\w+)', text)
    assert {a or b for a, b in targets} == {"xla_ffi_python_gpu_callback"}
    assert len(targets) == 4
    assert text.count("!stablehlo.token") > 4  # the ordered calls thread the token


@pytest.mark.parametrize("in_dtype,out_dtype,precision", [
    (np.int8, np.int32, None), (np.int32, np.float32, None), (np.uint8, np.int32, None),
    (np.int8, np.int32, "DEFAULT"), (np.int32, np.float16, "DEFAULT")])
def test_integer_dots_take_the_result_type_before_the_gpu_dot(in_dtype, out_dtype, precision):
    """XLA:GPU gets int8 x int8 -> int32 wrong (doubled) and cannot compile int32 -> float32
    (nor int32 -> float16 under the DEFAULT preset, seen on an H200): on CUDA the operands are
    converted first (run here on the CPU against NumPy)."""
    high = 10 if out_dtype == np.float16 else 100  # float16 holds the sums exactly
    x = RNG.integers(-5 if in_dtype != np.uint8 else 0, high, (3, 16)).astype(in_dtype)
    y = RNG.integers(0, high, (16, 2)).astype(in_dtype)
    dims = (((1,), (0,)), ((), ()))
    f = lambda a, b: lax.dot_general(a, b, dims, precision=precision,  # noqa: E731
                                     preferred_element_type=out_dtype)
    closed = staging.trace_to_jaxpr(lambda *xs: [f(*xs)], [core.get_aval(x), core.get_aval(y)])
    text = lowering.lower_jaxpr_to_module(closed.jaxpr, "cuda")
    dot_line = next(line for line in text.splitlines() if '"stablehlo.dot_general"' in line)
    operand_types = re.findall(r"tensor<[^>]*>", dot_line.split("->")[0])
    out_type = re.findall(r"tensor<[^>]*>", dot_line.split("->")[1])[0]
    assert {t.split("x")[-1] for t in operand_types} == {out_type.split("x")[-1]}
    got = _run_cuda_rules_on_cpu(f, x, y)
    np.testing.assert_array_equal(got, x.astype(out_dtype) @ y.astype(out_dtype))
