"""fluxion.ffi: calling XLA FFI targets (jaxlib's LAPACK kernels, and a handler built here)."""
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest
import scipy.linalg

import fluxion
import fluxion.numpy as jnp
from fluxion import ffi
from fluxion._src.compiler import backend

# The handlers here are host code (LAPACK, handlers built for the CPU), registered for the CPU.
pytestmark = pytest.mark.cpu_only(reason="FFI handlers registered for the host")

RNG = np.random.RandomState(0)
A = RNG.randn(4, 4).astype(np.float32)
A_BATCH = RNG.randn(3, 4, 4).astype(np.float32)


def getrf(x, **kw):
    """LU through jaxlib's `lapack_sgetrf_ffi` (column-major matrices, as JAX calls it)."""
    *batch, m, n = x.shape
    k = min(m, n)
    call = ffi.ffi_call(
        "lapack_sgetrf_ffi",
        (fluxion.ShapeDtypeStruct(x.shape, np.float32),
         fluxion.ShapeDtypeStruct((*batch, k), np.int32),
         fluxion.ShapeDtypeStruct(tuple(batch), np.int32)),
        input_layouts=[_col_major(x.ndim)], output_layouts=[_col_major(x.ndim), None, None],
        input_output_aliases={0: 0}, **kw)
    return call(x)


def _col_major(ndim):
    return tuple(range(ndim - 2)) + (ndim - 1, ndim - 2)


def _check_lu(x, lu, piv, info):
    want_lu, want_piv = scipy.linalg.lu_factor(x)
    np.testing.assert_allclose(np.asarray(lu), want_lu, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(piv), want_piv + 1)  # LAPACK's pivots are 1-based
    assert int(info) == 0


def test_lapack_getrf_eager_and_jit():
    _check_lu(A, *getrf(A))
    lu, piv, info = fluxion.jit(getrf)(A)
    assert isinstance(lu, fluxion.Array) and lu.dtype == np.float32 and piv.dtype == np.int32
    _check_lu(A, lu, piv, info)


def test_lapack_getrf_batched_dims_are_leading():
    lu, piv, info = getrf(A_BATCH)
    for i in range(3):
        _check_lu(A_BATCH[i], lu[i], piv[i], info[i])


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims",
                                    "broadcast_all", "legacy_vectorized"])
def test_vmap_methods(method):
    lu, piv, info = fluxion.vmap(lambda x: getrf(x, vmap_method=method))(A_BATCH)
    assert lu.shape == (3, 4, 4) and piv.shape == (3, 4) and info.shape == (3,)
    for i in range(3):
        _check_lu(A_BATCH[i], lu[i], piv[i], info[i])


def test_vmap_unbatched_argument_is_broadcast():
    # One batched and one unbatched operand: the unbatched one reaches the target with a
    # leading dimension of 1 (expand_dims) or of the batch size (broadcast_all).
    seen = {}

    def lowering_shapes(method):
        f = ffi.ffi_call("some_target", fluxion.ShapeDtypeStruct((2,), np.float32),
                         vmap_method=method)
        text = fluxion.jit(fluxion.vmap(f, in_axes=(0, None))).lower(
            np.ones((5, 2), np.float32), np.ones((2,), np.float32)).as_text()
        line = next(l for l in text.splitlines() if "some_target" in l)
        return line[line.rindex(": (") + 3:line.rindex(") ->")]
    seen["expand_dims"] = lowering_shapes("expand_dims")
    seen["broadcast_all"] = lowering_shapes("broadcast_all")
    assert seen["expand_dims"] == "tensor<5x2xf32>, tensor<1x2xf32>"
    assert seen["broadcast_all"] == "tensor<5x2xf32>, tensor<5x2xf32>"


def test_vmap_without_method_raises():
    with pytest.raises(NotImplementedError, match="vmap_method"):
        fluxion.vmap(getrf)(A_BATCH)


def test_bad_vmap_method_raises():
    with pytest.raises(ValueError, match="vmap_method"):
        ffi.ffi_call("t", fluxion.ShapeDtypeStruct((), np.float32), vmap_method="loop")


def test_grad_raises():
    f = ffi.ffi_call("lapack_sgetrf_ffi", fluxion.ShapeDtypeStruct((2,), np.float32))
    with pytest.raises(ValueError, match="cannot be differentiated"):
        fluxion.grad(lambda x: f(x).sum())(np.ones(2, np.float32))


def test_unknown_target_raises_runtime_error():
    f = ffi.ffi_call("fluxion_no_such_target", fluxion.ShapeDtypeStruct((2,), np.float32))
    with pytest.raises(backend.runtime_error_class(), match="fluxion_no_such_target"):
        f(np.ones(2, np.float32))


@pytest.mark.parametrize("value, exc", [([1, 2], TypeError), (np.complex64(1), TypeError),
                                        (object(), TypeError)])
def test_bad_attribute_raises(value, exc):
    f = ffi.ffi_call("t", fluxion.ShapeDtypeStruct((2,), np.float32))
    with pytest.raises(exc):
        fluxion.jit(lambda x: f(x, attr=value)).lower(np.ones(2, np.float32))


def test_bad_layouts_and_aliases_raise():
    out = fluxion.ShapeDtypeStruct((2,), np.float32)
    x = np.ones(2, np.float32)
    with pytest.raises(ValueError, match="number of input layouts"):
        ffi.ffi_call("t", out, input_layouts=[None, None])(x)
    with pytest.raises(ValueError, match="outside the range"):
        ffi.ffi_call("t", out, input_output_aliases={1: 0})(x)
    with pytest.raises(ValueError, match="different abstract value"):
        ffi.ffi_call("t", fluxion.ShapeDtypeStruct((3,), np.float32),
                     input_output_aliases={0: 0})(x)
    with pytest.raises(ValueError, match="legacy_backend_config"):
        ffi.ffi_call("t", out, legacy_backend_config="abc")
    with pytest.raises(ValueError, match="'shape' and 'dtype'"):
        ffi.ffi_call("t", [3])


ATTRS = dict(a=1, b=2.5, c=True, d="hi \"there\"", e=np.int8(-3), g=np.float32(1.5),
             h=np.arange(3, dtype=np.int32), i=np.array(2.0), j=np.zeros((2, 2), np.float32),
             k=np.bool_(False), l=np.uint64(7), m=np.float16(1), n=np.dtype(np.float32),
             o=(1, 2), p={"x": 1, "y": np.float32(-0.5)}, q=float("inf"))


def _backend_config(text: str, key: str) -> str:
    from jaxlib.mlir import ir
    module = backend.parse_module(text)
    found = []

    def visit(op):
        if op.name == "stablehlo.custom_call":
            found.append(str(ir.DictAttr(op.attributes[key])))
        return ir.WalkResult.ADVANCE
    with module.context:
        module.operation.walk(visit)
    return found[0]


def test_attributes_and_layouts_match_jax():
    jax = pytest.importorskip("jax")
    x = np.ones((2, 3), np.float32)
    kw = dict(input_layouts=[(1, 0)], output_layouts=(1, 0), has_side_effect=True)
    ours = fluxion.jit(lambda v: ffi.ffi_call(
        "t", fluxion.ShapeDtypeStruct((2, 3), np.float32), **kw)(v, **ATTRS)).lower(x).as_text()
    theirs = jax.jit(lambda v: jax.ffi.ffi_call(
        "t", jax.ShapeDtypeStruct((2, 3), np.float32), **kw)(v, **ATTRS)).lower(x).as_text()
    assert _backend_config(ours, "backend_config") == _backend_config(
        theirs, "mhlo.backend_config")
    for key in ("operand_layouts", "result_layouts"):
        assert key + " = [dense<[0, 1]>" in theirs
        assert key + " = [dense<[0, 1]>" in ours
    assert "has_side_effect = true" in ours


def test_export_round_trip():
    from fluxion import export
    exp = export.export(fluxion.jit(getrf))(fluxion.ShapeDtypeStruct((4, 4), np.float32))
    back = export.deserialize(exp.serialize())
    _check_lu(A, *back.call(A))


# ---- a handler compiled here (the FFI tutorial's rms_norm), registered through ctypes

KERNEL = r'''
#include <cmath>
#include <cstdint>
#include <string_view>
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;

static int64_t calls = 0;
extern "C" int64_t fx_calls() { return calls; }

static ffi::Error RmsNormImpl(float eps, ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
  auto dims = x.dimensions();
  if (dims.size() == 0) return ffi::Error::InvalidArgument("rms_norm input must be an array");
  int64_t n = dims.back(), total = x.element_count();
  const float* in = x.typed_data();
  float* out = y->typed_data();
  for (int64_t off = 0; off < total; off += n) {
    float sm = 0;
    for (int64_t i = 0; i < n; ++i) sm += in[off + i] * in[off + i];
    float scale = 1.0f / std::sqrt(sm / n + eps);
    for (int64_t i = 0; i < n; ++i) out[off + i] = in[off + i] * scale;
  }
  ++calls;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNorm, RmsNormImpl,
    ffi::Ffi::Bind().Attr<float>("eps").Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());

static ffi::Error AttrsImpl(int64_t a, double b, bool c, int8_t e, float g,
                            ffi::Span<const int32_t> h, std::string_view s,
                            ffi::ResultBuffer<ffi::F64> out) {
  double* o = out->typed_data();
  double sum = 0;
  for (int32_t v : h) sum += v;
  o[0] = a; o[1] = b; o[2] = c; o[3] = e; o[4] = g; o[5] = sum; o[6] = h.size(); o[7] = s.size();
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(Attrs, AttrsImpl,
    ffi::Ffi::Bind().Attr<int64_t>("a").Attr<double>("b").Attr<bool>("c").Attr<int8_t>("e")
        .Attr<float>("g").Attr<ffi::Span<const int32_t>>("h").Attr<std::string_view>("s")
        .Ret<ffi::Buffer<ffi::F64>>());
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH to build the FFI handler")
    d = tmp_path_factory.mktemp("ffi_kernel")
    src, lib_path = d / "kernel.cc", d / "libkernel.so"
    src.write_text(KERNEL)
    subprocess.run([compiler, "-std=c++17", "-O0", "-w", "-shared", "-fPIC",
                    f"-I{ffi.include_dir()}", str(src), "-o", str(lib_path)], check=True)
    lib = ctypes.cdll.LoadLibrary(str(lib_path))
    lib.fx_calls.restype = ctypes.c_int64
    ffi.register_ffi_target("fx_test_rms_norm", ffi.pycapsule(lib.RmsNorm))
    ffi.register_ffi_target("fx_test_attrs", ffi.pycapsule(lib.Attrs), platform="cpu")
    return lib


def test_include_dir_has_ffi_header():
    assert os.path.isfile(os.path.join(ffi.include_dir(), "xla", "ffi", "api", "ffi.h"))


def rms_norm(x, eps=1e-5, **kw):
    return ffi.ffi_call("fx_test_rms_norm", fluxion.ShapeDtypeStruct(x.shape, x.dtype),
                        **kw)(x, eps=np.float32(eps))


def _rms_want(x, eps=1e-5):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)


def test_custom_handler_eager_jit_vmap(kernel):
    x = RNG.randn(3, 5).astype(np.float32)
    np.testing.assert_allclose(np.asarray(rms_norm(x)), _rms_want(x), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fluxion.jit(rms_norm)(jnp.asarray(x))), _rms_want(x),
                               rtol=1e-5)
    got = fluxion.vmap(lambda r: rms_norm(r, vmap_method="sequential"))(x)
    np.testing.assert_allclose(np.asarray(got), _rms_want(x), rtol=1e-5)


def test_custom_handler_attributes_decode(kernel):
    out = ffi.ffi_call("fx_test_attrs", fluxion.ShapeDtypeStruct((8,), np.float64))(
        a=-7, b=2.5, c=True, e=np.int8(-3), g=np.float32(0.25),
        h=np.arange(4, dtype=np.int32), s="hello")
    np.testing.assert_array_equal(np.asarray(out), [-7, 2.5, 1, -3, 0.25, 6, 4, 5])


def test_has_side_effect_keeps_unused_call(kernel):
    x = np.ones((2, 4), np.float32)
    before = kernel.fx_calls()
    fluxion.jit(lambda v: (rms_norm(v), v + 1)[1])(x)
    assert kernel.fx_calls() == before  # dead code: never ran
    fluxion.jit(lambda v: (rms_norm(v, has_side_effect=True), v + 1)[1])(x)
    assert kernel.fx_calls() == before + 1


def test_ffi_lowering_for_a_users_primitive(kernel):
    from fluxion.extend.core import Primitive
    from fluxion.interpreters import mlir
    prim = Primitive("fx_test_rms_norm_prim")
    prim.def_abstract_eval(lambda x, **_: x)
    mlir.register_lowering(prim, ffi.ffi_lowering("fx_test_rms_norm"), platform="cpu")
    x = RNG.randn(2, 6).astype(np.float32)
    got = fluxion.jit(lambda v: prim.bind(v, eps=np.float32(1e-5)))(x)
    np.testing.assert_allclose(np.asarray(got), _rms_want(x), rtol=1e-5)


def test_registration_helpers():
    with pytest.raises(ValueError, match="register_ffi_type_id"):
        ffi.register_ffi_type_id("t", None)
    ffi.register_ffi_target_as_batch_partitionable("lapack_sgetrf_ffi")
    capsule = ffi.pycapsule(ctypes.cast(ctypes.pythonapi.Py_IncRef, ctypes.c_void_p).value)
    assert type(capsule).__name__ == "PyCapsule"


def test_side_effect_inside_control_flow_and_sequential_vmap(kernel):
    from fluxion import lax
    x = RNG.randn(3, 5).astype(np.float32)
    before = kernel.fx_calls()
    fluxion.jit(lambda v: lax.fori_loop(
        0, 2, lambda i, c: (rms_norm(c, has_side_effect=True), c)[1], v))(x)
    assert kernel.fx_calls() == before + 2
    fluxion.jit(fluxion.vmap(
        lambda v: (rms_norm(v, has_side_effect=True, vmap_method="sequential"), v)[1]))(x)
    assert kernel.fx_calls() == before + 5  # once per batch element


def test_export_with_symbolic_batch(kernel):
    from fluxion import export
    spec = fluxion.ShapeDtypeStruct(export.symbolic_shape("b, 5"), np.float32)
    with pytest.raises(ValueError, match="fx_test_rms_norm"):
        export.export(fluxion.jit(rms_norm))(spec)  # no compatibility guarantee by default
    exp = export.export(fluxion.jit(rms_norm), disabled_checks=[
        export.DisabledSafetyCheck.custom_call("fx_test_rms_norm")])(spec)
    exp = export.deserialize(exp.serialize())
    for n in (2, 7):
        x = RNG.randn(n, 5).astype(np.float32)
        np.testing.assert_allclose(np.asarray(exp.call(x)), _rms_want(x), rtol=1e-5)
