"""User-defined primitives: fluxion.extend.core.Primitive with fluxion.interpreters.mlir rules.

The first tests run the code blocks of docs/custom_primitives.md exactly as written; the rest
exercise every LoweringRuleContext helper through a primitive of its own, eagerly and under jit.
"""
import pathlib
import re

import ml_dtypes
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion.core import ShapedArray
from fluxion.extend.core import Primitive
from fluxion.interpreters import mlir

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "custom_primitives.md"


def doc_code_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


@pytest.fixture(scope="module")
def doc():
    """The namespace left by running the doc's code blocks in order."""
    namespace = {"__name__": "custom_primitives_doc"}
    for i, block in enumerate(doc_code_blocks()):
        exec(compile(block, f"{DOC.name}[block {i}]", "exec"), namespace)
    return namespace


RELU_INPUT = np.array([-2.0, -0.5, 0.0, 1.5, 3.0], dtype=np.float32)
RELU_EXPECTED = np.maximum(RELU_INPUT, 0)


def test_doc_has_the_walkthrough_blocks():
    blocks = doc_code_blocks()
    assert len(blocks) >= 8
    assert any("register_lowering(my_relu_p, _my_relu_lowering)" in b for b in blocks)
    assert any('platform="cpu"' in b for b in blocks)
    assert any("lower_fun" in b for b in blocks)


def test_doc_jaxpr(doc):
    assert str(doc["relu_jaxpr"]) == "{ lambda ; a:f32[5]. let b:f32[5] = my_relu a in (b,) }"


@pytest.mark.parametrize("name", ["relu_jit", "relu_eager", "relu_cpu", "relu2"])
def test_doc_relu_results(doc, name):
    out = doc[name]
    assert isinstance(out, fluxion.Array)
    assert out.dtype == np.float32 and out.shape == (5,)
    np.testing.assert_array_equal(np.asarray(out), RELU_EXPECTED)


def test_doc_generic_rule_uses_maximum(doc):
    assert "stablehlo.maximum" in doc["generic_text"]
    assert "func.func public @main" in doc["generic_text"]


def test_doc_cpu_rule_wins_on_cpu(doc):
    text = doc["cpu_text"]
    assert "stablehlo.select" in text and "stablehlo.compare" in text
    assert "stablehlo.maximum" not in text


def test_doc_custom_call_runs_lapack(doc):
    factor, info = doc["factor"], doc["info"]
    np.testing.assert_allclose(np.tril(np.asarray(factor)), np.linalg.cholesky(doc["spd"]),
                               rtol=1e-6)
    assert int(info) == 0 and info.dtype == np.int32


def test_doc_layer(doc):
    expected = np.maximum(2.0 * RELU_INPUT + 1.0, 0)
    np.testing.assert_allclose(np.asarray(doc["layer_jit"]), expected)
    np.testing.assert_allclose(np.asarray(doc["layer_eager"]), expected)


def test_doc_jvp_and_grad(doc):
    x = doc["x"]
    np.testing.assert_array_equal(np.asarray(doc["relu_grad"]), (x > 0).astype(np.float32))
    np.testing.assert_array_equal(np.asarray(doc["relu_tangent"]), (x > 0).astype(np.float32))


def test_doc_batching(doc):
    xs = doc["xs"]
    np.testing.assert_array_equal(np.asarray(doc["relu_batched"]), np.maximum(xs, 0))
    np.testing.assert_array_equal(np.asarray(doc["relu_batched_axis1"]), np.maximum(xs, 0))
    np.testing.assert_array_equal(np.asarray(doc["per_example_grads"]), (xs > 0).astype(np.float32))


def test_doc_abstract_eval_rejects_integers(doc):
    with pytest.raises(TypeError, match="my_relu requires a floating-point operand, got int32"):
        fluxion.jit(doc["my_relu"])(np.arange(3, dtype=np.int32))


def test_extend_core_names_exist_in_jax():
    import jax.extend.core
    import fluxion.extend.core as fx_core
    missing = [n for n in fx_core.__all__ if not hasattr(jax.extend.core, n)]
    assert not missing


def test_extend_core_primitives_are_fluxions_under_jaxs_names():
    import jax.extend.core.primitives as jax_prims
    import fluxion.extend.core.primitives as prims
    ours = {n for n in dir(prims) if n.endswith("_p")}
    theirs = {n for n in dir(jax_prims) if n.endswith("_p")}
    # Documented in the module: calls are inlined or staged as jit; keys are uint32 pytrees.
    assert theirs - ours == {"call_p", "closed_call_p", "empty2_p", "random_bits_p",
                             "random_fold_in_p", "random_seed_p", "random_split_p"}
    assert ours <= theirs
    assert prims.mul_p is fluxion.lax.mul_p and prims.remat_p.name == "checkpoint"
    jaxpr = fluxion.make_jaxpr(lambda x: x * 2.0)(1.0)
    assert jaxpr.jaxpr.eqns[0].primitive is prims.mul_p


@pytest.mark.cpu_only
def test_extend_backend():
    import fluxion.extend.backend as backend
    client = backend.get_backend()
    assert client.platform == "cpu" and backend.backends()["cpu"] is client
    assert backend.get_default_device() == fluxion.devices()[0]
    assert backend.backend_xla_version() is None  # as JAX's for the built-in CPU client
    backend.clear_in_memory_compilation_cache()


# ---------------------------------------------------------------------------------------------
# One primitive per LoweringRuleContext helper

def _same_as_input(x, **params):
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def make_primitive(name, rule, abstract_eval=_same_as_input, multiple_results=False,
                   platform=None):
    prim = Primitive(name)
    prim.multiple_results = multiple_results
    prim.def_abstract_eval(abstract_eval)
    mlir.register_lowering(prim, rule, platform=platform)
    return prim


def check_eager_and_jit(prim, args, expected, params=None, rtol=1e-6):
    params = params or {}
    expected = expected if isinstance(expected, list) else [expected]
    eager = prim.bind(*args, **params)
    jitted = fluxion.jit(lambda *a: prim.bind(*a, **params))(*args)
    for out in (eager, jitted):
        outs = out if prim.multiple_results else [out]
        assert len(outs) == len(expected)
        for got, want in zip(outs, expected):
            want = np.asarray(want)
            assert isinstance(got, fluxion.Array)
            assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
            np.testing.assert_allclose(_widened(np.asarray(got)), _widened(want), rtol=rtol, atol=1e-7)


def _widened(a: np.ndarray) -> np.ndarray:
    """`a` in a dtype NumPy's comparisons handle (bfloat16 is not one of them)."""
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


X = np.array([[-1.5, 0.0, 2.0], [3.0, -4.0, 0.5]], dtype=np.float32)

ELEMENTWISE = {
    "constant": (lambda ctx, x: ctx.add(x, ctx.constant(3.0, np.float32)), lambda x: x + 3),
    "broadcast": (lambda ctx, x: ctx.add(x, ctx.broadcast(ctx.constant(np.float32([1, 2, 3])), x.shape)),
                  lambda x: x + np.float32([1, 2, 3])),
    "add": (lambda ctx, x: ctx.add(x, x), lambda x: x + x),
    "sub": (lambda ctx, x: ctx.sub(x, 1.0), lambda x: x - 1),
    "mul": (lambda ctx, x: ctx.mul(2.0, x), lambda x: 2 * x),
    "div": (lambda ctx, x: ctx.div(x, 4.0), lambda x: x / 4),
    "max": (lambda ctx, x: ctx.max(x, 0.0), lambda x: np.maximum(x, 0)),
    "min": (lambda ctx, x: ctx.min(x, 0.0), lambda x: np.minimum(x, 0)),
    "neg": (lambda ctx, x: ctx.neg(x), lambda x: -x),
    "exp": (lambda ctx, x: ctx.exp(x), np.exp),
    "log": (lambda ctx, x: ctx.log(ctx.max(x, 0.5)), lambda x: np.log(np.maximum(x, 0.5))),
    "log1p": (lambda ctx, x: ctx.log1p(ctx.max(x, 0.0)), lambda x: np.log1p(np.maximum(x, 0))),
    "tanh": (lambda ctx, x: ctx.tanh(x), np.tanh),
    "select": (lambda ctx, x: ctx.select(ctx.compare(x, 0.0, "GT"), x, ctx.mul(x, 0.1)),
               lambda x: np.where(x > 0, x, np.float32(0.1) * x)),
    "select_scalar_branch": (lambda ctx, x: ctx.select(ctx.compare(x, 0.0, "lt"), 0.0, x),
                             lambda x: np.where(x < 0, np.float32(0), x)),
}


@pytest.mark.parametrize("helper", sorted(ELEMENTWISE))
def test_elementwise_helpers(helper):
    rule, reference = ELEMENTWISE[helper]
    check_eager_and_jit(make_primitive(f"ctx_{helper}", rule), [X], reference(X).astype(np.float32))


@pytest.mark.parametrize("operand", [np.float32(-2.5), np.zeros((0, 3), np.float32),
                                     np.array([1.0, -1.0], ml_dtypes.bfloat16),
                                     np.array([[-1.0, 2.0]], np.float16)],
                         ids=["0d", "size0", "bf16", "f16"])
def test_relu_like_rule_shapes_and_dtypes(operand):
    prim = make_primitive("ctx_max_any", lambda ctx, x: ctx.max(x, 0))
    check_eager_and_jit(prim, [operand], np.maximum(operand, 0).astype(operand.dtype))


_COMPARISONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
                "GT": np.greater, "GE": np.greater_equal}


@pytest.mark.parametrize("direction", sorted(_COMPARISONS))
@pytest.mark.parametrize("operand", [np.array([[-3, 0, 5], [7, -1, 2]], np.int32),
                                     np.array([1, 200, 3, 2], np.uint8),
                                     np.array([-0.5, 2.0, np.nan], np.float32)],
                         ids=["i32", "u8", "f32"])
def test_compare(direction, operand):
    def rule(ctx, x):
        return ctx.compare(x, 2, direction)
    prim = make_primitive(f"ctx_compare_{direction}", rule,
                          lambda x: ShapedArray(x.shape, np.bool_))
    check_eager_and_jit(prim, [operand], _COMPARISONS[direction](operand, 2))


def test_compare_rejects_unknown_direction():
    prim = make_primitive("ctx_compare_bad", lambda ctx, x: ctx.compare(x, 0, "GREATER"),
                          lambda x: ShapedArray(x.shape, np.bool_))
    with pytest.raises(ValueError, match="comparison direction must be one of"):
        fluxion.jit(prim.bind)(X)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint16, np.bool_, ml_dtypes.bfloat16,
                                   np.float16, np.complex64], ids=lambda d: np.dtype(d).name)
def test_convert(dtype):
    operand = np.array([[-3, 0, 5], [7, -1, 2]], np.int32)
    prim = make_primitive(f"ctx_convert_{np.dtype(dtype).name}",
                          lambda ctx, x: ctx.convert(x, dtype),
                          lambda x: ShapedArray(x.shape, np.dtype(dtype)))
    check_eager_and_jit(prim, [operand], operand.astype(dtype))


@pytest.mark.parametrize("dtype", [np.bool_, ml_dtypes.bfloat16, np.complex64, np.int8],
                         ids=lambda d: np.dtype(d).name)
def test_constant_dtypes(dtype):
    value = np.array([1, 0, 1], dtype=dtype)
    prim = make_primitive(f"ctx_constant_{np.dtype(dtype).name}",
                          lambda ctx, x: ctx.constant(value, dtype),
                          lambda x: ShapedArray((3,), np.dtype(dtype)))
    check_eager_and_jit(prim, [X], value)


def test_dot_general_matmul():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    prim = make_primitive("ctx_dot", lambda ctx, x, y: ctx.dot_general(x, y, (((1,), (0,)), ((), ()))),
                          lambda x, y: ShapedArray((x.shape[0], y.shape[1]), x.dtype))
    check_eager_and_jit(prim, [a, b], a @ b)


def test_dot_general_batched():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(40, dtype=np.float32).reshape(2, 4, 5)
    prim = make_primitive("ctx_dot_batched",
                          lambda ctx, x, y: ctx.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))),
                          lambda x, y: ShapedArray((2, 3, 5), x.dtype))
    check_eager_and_jit(prim, [a, b], np.einsum("bij,bjk->bik", a, b))


def test_reshape_and_transpose():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    prim = make_primitive("ctx_reshape_transpose",
                          lambda ctx, x: ctx.transpose(ctx.reshape(x, (6, 4)), (1, 0)),
                          lambda x: ShapedArray((4, 6), x.dtype))
    check_eager_and_jit(prim, [a], a.reshape(6, 4).T)


@pytest.mark.parametrize("start,limit,strides,index", [
    ((0, 1, 0), (2, 3, 4), (1, 1, 2), np.s_[0:2, 1:3, 0:4:2]),
    ((1, 0, 1), (2, 3, 4), None, np.s_[1:2, 0:3, 1:4]),
    ((0, 0, 1), (2, 3, 4), (2, 3, 3), np.s_[0:2:2, 0:3:3, 1:4:3]),
    ((0, 2, 0), (2, 2, 4), None, np.s_[0:2, 2:2, 0:4]),
])
def test_slice(start, limit, strides, index):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    expected = a[index]
    prim = make_primitive("ctx_slice", lambda ctx, x: ctx.slice(x, start, limit, strides),
                          lambda x: ShapedArray(expected.shape, x.dtype))
    check_eager_and_jit(prim, [a], expected)


def test_multiple_results_and_params():
    prim = make_primitive(
        "ctx_affine_pair", lambda ctx, x, *, scale: [ctx.mul(x, scale), ctx.neg(x)],
        lambda x, *, scale: [x, x], multiple_results=True)
    check_eager_and_jit(prim, [X], [X * 3, -X], params={"scale": 3.0})
    jaxpr = fluxion.make_jaxpr(lambda x: prim.bind(x, scale=3.0))(X)
    assert str(jaxpr) == ("{ lambda ; a:f32[2,3]. let\n    b:f32[2,3] c:f32[2,3] = ctx_affine_pair[scale=3.0] a\n"
                          "  in (b, c) }")


def test_rule_context_fields():
    seen = {}

    def rule(ctx, x, y):
        seen.update(platform=ctx.platform, avals_in=list(ctx.avals_in), avals_out=list(ctx.avals_out))
        return ctx.add(x, ctx.convert(y, x.dtype))

    prim = make_primitive("ctx_fields", rule, lambda x, y: x)
    fluxion.jit(prim.bind)(X, np.int32(3))
    assert seen["platform"] == "cpu"
    assert seen["avals_in"] == [ShapedArray((2, 3), np.float32), ShapedArray((), np.int32)]
    assert seen["avals_out"] == [ShapedArray((2, 3), np.float32)]


def test_python_scalar_operand_keeps_weak_type():
    prim = make_primitive("ctx_weak", lambda ctx, x: ctx.max(x, 0.0))
    for out in (prim.bind(-2.0), fluxion.jit(prim.bind)(-2.0)):
        assert out.weak_type and out.dtype == np.float32 and float(out) == 0.0


# ---------------------------------------------------------------------------------------------
# Platform selection and errors

def _plus(n):
    return lambda ctx, x: ctx.add(x, float(n))


def test_platform_specific_rule_wins():
    prim = make_primitive("ctx_platforms", _plus(1))
    for platform, n in (("cuda", 2), ("rocm", 3), ("tpu", 4)):
        mlir.register_lowering(prim, _plus(n), platform=platform)
    check_eager_and_jit(prim, [X], X + 1)  # the generic rule, on the CPU
    mlir.register_lowering(prim, _plus(10), platform="cpu")
    np.testing.assert_array_equal(np.asarray(fluxion.jit(prim.bind)(X)), X + 10)


@pytest.mark.parametrize("platform", ["cuda", "rocm", "gpu", "tpu"])
def test_missing_rule_for_platform_names_primitive_and_platform(platform):
    prim = make_primitive(f"only_on_{platform}", _plus(1), platform=platform)
    message = rf"No lowering rule for primitive 'only_on_{platform}' on platform 'cpu'"
    with pytest.raises(NotImplementedError, match=message):
        fluxion.jit(prim.bind)(X)
    with pytest.raises(NotImplementedError, match=message):
        prim.bind(X)


def test_missing_abstract_eval():
    prim = Primitive("no_abstract_eval")
    mlir.register_lowering(prim, _plus(1))
    with pytest.raises(NotImplementedError, match="Abstract evaluation for 'no_abstract_eval'"):
        fluxion.jit(prim.bind)(X)
    with pytest.raises(NotImplementedError, match="Abstract evaluation for 'no_abstract_eval'"):
        prim.bind(X)


def test_def_impl_is_used_eagerly():
    calls = []
    prim = make_primitive("with_impl", _plus(1))

    @prim.def_impl
    def impl(x):
        calls.append(x)
        return np.asarray(x) + 100

    np.testing.assert_array_equal(prim.bind(X), X + 100)
    np.testing.assert_array_equal(np.asarray(fluxion.jit(prim.bind)(X)), X + 1)
    assert len(calls) == 1


def test_rule_with_wrong_result_type():
    prim = make_primitive("wrong_dtype", lambda ctx, x: ctx.convert(x, np.int32))
    with pytest.raises(TypeError, match=r"lowering rule of 'wrong_dtype' produced i32\[2,3\] where "
                                        r"its abstract evaluation says f32\[2,3\]"):
        fluxion.jit(prim.bind)(X)


def test_rule_with_wrong_number_of_results():
    prim = make_primitive("wrong_count", lambda ctx, x: [x, x])
    with pytest.raises(ValueError, match="lowering rule of 'wrong_count' returned 2 values, expected 1"):
        fluxion.jit(prim.bind)(X)


# ---------------------------------------------------------------------------------------------
# lower_fun

def test_lower_fun_multiple_results_by_default():
    prim = make_primitive("lf_pair", mlir.lower_fun(lambda x, *, k: [jnp.multiply(x, k), jnp.exp(x)]),
                          lambda x, *, k: [x, x], multiple_results=True)
    check_eager_and_jit(prim, [X], [X * 2, np.exp(X)], params={"k": 2.0})


def test_lower_fun_single_result():
    prim = make_primitive("lf_single", mlir.lower_fun(lambda x: jnp.tanh(x), multiple_results=False))
    check_eager_and_jit(prim, [X], np.tanh(X))


def test_lower_fun_requires_a_list_for_multiple_results():
    prim = make_primitive("lf_not_list", mlir.lower_fun(lambda x: jnp.tanh(x)))
    with pytest.raises(TypeError, match="multiple_results=True expects a list or tuple"):
        fluxion.jit(prim.bind)(X)


# ---------------------------------------------------------------------------------------------
# custom_call text for the other API versions (the typed-FFI call runs in the doc test)

def test_custom_call_text_for_legacy_api():
    prim = make_primitive(
        "legacy_call",
        lambda ctx, x: ctx.custom_call("my_target", [x], ctx.avals_out, backend_config='opaque "cfg"',
                                       has_side_effect=True, api_version=2)[0])
    text = fluxion.jit(prim.bind).lower(X).as_text()
    call = next(line for line in text.splitlines() if "stablehlo.custom_call" in line)
    assert "stablehlo.custom_call @my_target(%arg0)" in call
    assert "has_side_effect = true" in call
    assert "api_version = 2 : i32" in call
    assert r'backend_config = "opaque \22cfg\22"' in call  # MLIR prints '"' as \22
    assert call.endswith(": (tensor<2x3xf32>) -> tensor<2x3xf32>")


def test_custom_call_to_unregistered_target_fails_to_compile():
    prim = make_primitive(
        "unknown_call", lambda ctx, x: ctx.custom_call("fluxion_no_such_target", [x], ctx.avals_out)[0])
    with pytest.raises(fluxion.errors.JaxRuntimeError, match="fluxion_no_such_target"):
        fluxion.jit(prim.bind)(X)
