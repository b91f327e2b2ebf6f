"""Dot algorithms (precision=lax.DotAlgorithm / lax.DotAlgorithmPreset / a preset's name)
against JAX 0.10.2: canonicalization and its errors, result dtypes and weak types, values
(eager and jit), the StableHLO algorithm attribute, CPU refusals, grad, vmap, and complex
operands with a real preferred_element_type."""
import re
import warnings

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax as jlax

import fluxion
import fluxion.numpy as fjnp
from fluxion import lax
from fluxion._src.compiler import lowering

BF16 = np.dtype(ml_dtypes.bfloat16)
DIMS = (((1,), (0,)), ((), ()))
CPU_PRESETS = ["DEFAULT", "F16_F16_F16", "F32_F32_F32", "F64_F64_F64", "BF16_BF16_F32",
               "BF16_BF16_F32_X3", "BF16_BF16_F32_X6"]
# What each preset's rounding of the operands allows, relative to the exact product.
TOLERANCE = {"DEFAULT": 1e-5, "F16_F16_F16": 1e-2, "F32_F32_F32": 1e-5, "F64_F64_F64": 1e-5,
             "BF16_BF16_F32": 2e-2, "BF16_BF16_F32_X3": 1e-4, "BF16_BF16_F32_X6": 1e-5}


def _operands(dtype, seed=0, shape=((3, 5), (5, 4))):
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s) * 2 for s in shape)
    if np.dtype(dtype).kind in "iu":
        a, b = np.round(a), np.round(b)
    return a.astype(dtype), b.astype(dtype)


def _precision_param(closed):
    (eqn,) = [e for e in closed.eqns if e.primitive.name == "dot_general"]
    return eqn.params["precision"]


def _algorithm_attr(text):
    """The body of the dot_general's algorithm attribute in a module's text."""
    found = re.findall(r"<(lhs_precision_type = [^>]*)>", text)
    assert len(found) == 1, text
    return found[0]


def _on(lib, preset):
    """The same preset in fluxion's or JAX's enum."""
    return getattr((lax if lib is fluxion else jlax).DotAlgorithmPreset, preset)


# ---------------------------------------------------------------------------------------------
# canonicalization

@pytest.mark.parametrize("given", ["F32_F32_F32", "BF16_BF16_F32_X3", "TF32_TF32_F32",
                                   "DEFAULT", "preset"])
def test_preset_or_its_name_is_the_precision(given):
    x, y = _operands(np.float32)
    theirs = jlax.DotAlgorithmPreset.BF16_BF16_F32 if given == "preset" else given
    ours = lax.DotAlgorithmPreset.BF16_BF16_F32 if given == "preset" else given
    jp = _precision_param(jax.make_jaxpr(lambda a, b: jlax.dot(a, b, precision=theirs))(x, y))
    fp = _precision_param(fluxion.make_jaxpr(lambda a, b: lax.dot(a, b, precision=ours))(x, y))
    assert isinstance(fp, lax.DotAlgorithmPreset) and fp.name == jp.name
    # printed as JAX prints it
    printed = str(fluxion.make_jaxpr(lambda a, b: lax.dot(a, b, precision=ours))(x, y))
    assert f"precision={jp}\n" in printed


def test_dot_algorithm_is_kept_as_given():
    algorithm = lax.DotAlgorithm(np.float16, np.float16, np.float32)
    x, y = _operands(np.float32)
    assert _precision_param(fluxion.make_jaxpr(
        lambda a, b: lax.dot(a, b, precision=algorithm))(x, y)) is algorithm
    assert algorithm._fields == jlax.DotAlgorithm._fields
    assert algorithm == lax.DotAlgorithm(np.float16, np.float16, np.float32, 1, 1, 1, False)


def test_preset_str_repr_and_properties_as_jax():
    for ours in lax.DotAlgorithmPreset:
        theirs = jlax.DotAlgorithmPreset[ours.name]
        assert (str(ours), repr(ours)) == (str(theirs), repr(theirs))
        assert ours.value == theirs.value
        def dts(types):
            return None if types is None else [np.dtype(t) for t in types]
        assert dts(ours.supported_lhs_types) == dts(theirs.supported_lhs_types)
        assert dts(ours.supported_rhs_types) == dts(theirs.supported_rhs_types)
        acc, jacc = ours.accumulation_type, theirs.accumulation_type
        assert (acc is None) == (jacc is None) and (acc is None or acc == np.dtype(jacc))
        for pair in [(np.float16, np.float16), (BF16, BF16), (np.float32, np.float16)]:
            assert dts(ours.supported_output_types(*pair)) == dts(
                theirs.supported_output_types(*pair))


@pytest.mark.parametrize("precision", ["foo", "f32_f32_f32", "HIGHEST", 3, ("foo", "high")])
def test_bad_precision_message_as_jax(precision):
    x, y = _operands(np.float32)
    with pytest.raises(ValueError) as theirs:
        jlax.dot(x, y, precision=precision)
    with pytest.raises(ValueError) as ours:
        lax.dot(x, y, precision=precision)
    assert str(ours.value) == str(theirs.value)
    assert "a lax.DotAlgorithmPreset or the name of one of these presets" in str(ours.value)


def test_a_pair_of_precisions_takes_no_preset_name():
    x, y = _operands(np.float32)
    with pytest.raises(TypeError):
        jlax.dot(x, y, precision=("F32_F32_F32", "highest"))
    with pytest.raises(TypeError, match="not the name of a lax.DotAlgorithmPreset"):
        lax.dot(x, y, precision=("F32_F32_F32", "highest"))


def test_default_matmul_precision_names_a_preset():
    x, y = _operands(np.float32)
    for mod, np_ in ((fluxion, fjnp), (jax, jjnp)):
        with mod.default_matmul_precision("BF16_BF16_F32"):
            closed = mod.make_jaxpr(lambda a, b: np_.dot(a, b))(x, y)
            assert str(_precision_param(closed)) == "BF16_BF16_F32"
            # an explicit precision wins
            closed = mod.make_jaxpr(lambda a, b: np_.dot(a, b, precision="highest"))(x, y)
            assert [str(p) for p in _precision_param(closed)] == ["HIGHEST", "HIGHEST"]
    f = fluxion.jit(lambda a, b: a @ b)
    with fluxion.default_matmul_precision("F32_F32_F32"):
        assert "accumulation_type = f32" in f.lower(x, y).as_text()
        np.testing.assert_allclose(np.asarray(f(x, y)), x @ y, rtol=1e-5)
    assert "algorithm = <" not in f.lower(x, y).as_text()


@pytest.mark.parametrize("value", ["fastest", "DEFAULT", "bf16_bf16_f32"])
def test_default_matmul_precision_refuses_what_jax_refuses(value):
    with pytest.raises(ValueError):
        jax.config.update("jax_default_matmul_precision", value)
    with pytest.raises(ValueError, match="F64_F64_F64"):
        fluxion.config.update("jax_default_matmul_precision", value)


# ---------------------------------------------------------------------------------------------
# result types and values

@pytest.mark.parametrize("preset", CPU_PRESETS)
@pytest.mark.parametrize("dtype,preferred", [
    (np.float32, None), (np.float16, None), (BF16, None), (np.float32, np.float16),
    (np.float16, np.float32), (BF16, np.float32), (np.int32, None), (np.int32, np.float16)])
def test_dtype_and_values_as_jax(preset, dtype, preferred):
    x, y = _operands(dtype)
    results = {}
    for mod, lax_ in ((fluxion, lax), (jax, jlax)):
        def f(a, b):
            return lax_.dot_general(a, b, DIMS, precision=_on(mod, preset),
                                    preferred_element_type=preferred)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # JAX: float64 truncated without x64
            shape = mod.eval_shape(f, x, y)
            eager, jitted = f(x, y), mod.jit(f)(x, y)
        results[mod] = (shape.dtype, shape.weak_type, np.asarray(eager), np.asarray(jitted))
    (dt, weak, eager, jitted), (jdt, jweak, jvalue, _) = results[fluxion], results[jax]
    assert (np.dtype(dt), weak) == (np.dtype(jdt), jweak)
    assert eager.dtype == jitted.dtype == np.dtype(jdt)
    np.testing.assert_array_equal(eager, jitted)
    # the same XLA computation as JAX's
    np.testing.assert_allclose(eager.astype(np.float64), jvalue.astype(np.float64), rtol=1e-6)
    # and the product, within what the algorithm and the result type keep
    exact = x.astype(np.float64) @ y.astype(np.float64)
    out_eps = 0.0 if np.dtype(dt).kind in "iu" else float(ml_dtypes.finfo(dt).eps)
    tol = max(TOLERANCE[preset], 4 * out_eps, 4 * float(ml_dtypes.finfo(
        np.dtype(dtype) if np.dtype(dtype).kind == "f" else np.float32).eps))
    atol = 1.0 if np.dtype(dt).kind in "iu" else tol * np.abs(exact).max()
    np.testing.assert_allclose(eager.astype(np.float64), exact, rtol=tol, atol=atol)


def test_algorithm_allows_a_narrower_preferred_type():
    x = np.arange(1, 4, dtype=np.int32)
    with pytest.raises(TypeError, match="must not be narrower"):
        lax.dot(x, x, preferred_element_type=np.int8)
    ours = lax.dot(x, x, preferred_element_type=np.int8, precision="F32_F32_F32")
    theirs = jlax.dot(x, x, preferred_element_type=np.int8, precision="F32_F32_F32")
    assert ours.dtype == theirs.dtype == np.int8 and int(ours) == int(theirs) == 14


@pytest.mark.parametrize("name", ["matmul", "dot", "einsum", "tensordot", "inner"])
@pytest.mark.parametrize("types", [(np.float32, np.float32), (np.float16, np.float32)])
def test_numpy_products_take_an_algorithm(name, types):
    # Mixed operand types reach dot_general unpromoted, as in JAX: the algorithm converts
    # float16 to bfloat16 and leaves float32 as it is.
    x, y = _operands(np.float32, seed=1)
    x, y = x.astype(types[0]), y.astype(types[1])
    calls = {
        "matmul": lambda np_, p: np_.matmul(x, y, precision=p),
        "dot": lambda np_, p: np_.dot(x, y, precision=p),
        "einsum": lambda np_, p: np_.einsum("ij,jk->ik", x, y, precision=p),
        "tensordot": lambda np_, p: np_.tensordot(x, y, 1, precision=p),
        "inner": lambda np_, p: np_.inner(x, y.T, precision=p),
    }
    ours = calls[name](fjnp, lax.DotAlgorithmPreset.BF16_BF16_F32)
    theirs = calls[name](jjnp, "BF16_BF16_F32")
    assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)
    closed = fluxion.make_jaxpr(lambda: calls[name](fjnp, "BF16_BF16_F32"))()
    assert str(_precision_param(closed)) == "BF16_BF16_F32"


@pytest.mark.cpu_only(reason="XLA:CPU's refusal of a vdot algorithm")
def test_vdot_with_an_algorithm_fails_in_xla_cpu_as_in_jax():
    # XLA:CPU's elemental emitter has no BF16_BF16_F32 for this vector . vector product.
    x, y = _operands(np.float32)
    with pytest.raises(Exception) as theirs:
        jjnp.vdot(x, x, precision="BF16_BF16_F32")
    with pytest.raises(Exception) as ours:
        fjnp.vdot(x, x, precision="BF16_BF16_F32")
    assert "ElementalIrEmitter" in str(theirs.value) and "ElementalIrEmitter" in str(ours.value)


def test_convolution_takes_a_preset_and_ignores_it_as_jax():
    x, w = _operands(np.float32, shape=((1, 1, 6, 6), (1, 1, 3, 3)))
    ours = lax.conv(x, w, (1, 1), "VALID", precision="BF16_BF16_F32")
    theirs = jlax.conv(x, w, (1, 1), "VALID", precision="BF16_BF16_F32")
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)
    text = fluxion.jit(lambda a, b: lax.conv(a, b, (1, 1), "VALID",
                                             precision="BF16_BF16_F32")).lower(x, w).as_text()
    assert "algorithm" not in text and "#stablehlo<precision DEFAULT>" in text


# ---------------------------------------------------------------------------------------------
# lowering

@pytest.mark.parametrize("preset,dtypes", [
    ("F32_F32_F32", (np.float16, np.float16)), ("BF16_BF16_F32", (np.float16, np.float32)),
    ("BF16_BF16_F32_X6", (np.float32, np.float32)), ("F64_F64_F64", (np.float32, np.float32)),
    ("F16_F16_F16", (BF16, BF16))])
def test_cpu_lowering_as_jax(preset, dtypes):
    x, y = _operands(np.float32)
    x, y = x.astype(dtypes[0]), y.astype(dtypes[1])
    ours = fluxion.jit(lambda a, b: lax.dot(a, b, precision=preset)).lower(x, y).as_text()
    theirs = jax.jit(lambda a, b: jlax.dot(a, b, precision=preset)).lower(x, y).as_text()
    assert _algorithm_attr(ours) == _algorithm_attr(theirs)
    assert "algorithm = <" in ours
    assert ours.count("stablehlo.convert") == theirs.count("stablehlo.convert")


def _lower_for_cuda(fun, *args):
    return lowering.lower_jaxpr_to_module(fluxion.make_jaxpr(fun)(*args).jaxpr, "cuda")


def _jax_lower_for_cuda(fun, *args):
    return jax.jit(fun).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


@pytest.mark.parametrize("precision,dtype", [
    ("TF32_TF32_F32_X3", np.float32), ("BF16_BF16_F32_X9", np.float32),
    ("F16_F16_F32", np.float16), ("BF16_BF16_BF16", np.float32),
    ("ANY_F8_ANY_F8_F32_FAST_ACCUM", ml_dtypes.float8_e4m3fn),
    ("ANY_F8_ANY_F8_ANY", ml_dtypes.float8_e5m2), ("algorithm", np.float32)])
def test_gpu_lowering_as_jax(precision, dtype):
    x, y = _operands(np.float32)
    x, y = x.astype(dtype), y.astype(dtype)
    # (JAX verifies that an explicit algorithm is a known one: BF16_BF16_F32_X3's)
    ours_p = lax.DotAlgorithm(BF16, BF16, np.float32, 1, 1, 3) \
        if precision == "algorithm" else precision
    theirs_p = jlax.DotAlgorithm(BF16, BF16, np.float32, 1, 1, 3) \
        if precision == "algorithm" else precision
    ours = _lower_for_cuda(lambda a, b: lax.dot(a, b, precision=ours_p), x, y)
    theirs = _jax_lower_for_cuda(lambda a, b: jlax.dot(a, b, precision=theirs_p), x, y)
    assert _algorithm_attr(ours) == _algorithm_attr(theirs)
    assert ours.count("stablehlo.convert") == theirs.count("stablehlo.convert")


def test_float8_presets_need_float8_operands():
    x, y = _operands(np.float32)
    with pytest.raises(ValueError) as theirs:
        _jax_lower_for_cuda(lambda a, b: jlax.dot(a, b, precision="ANY_F8_ANY_F8_F32"), x, y)
    with pytest.raises(ValueError) as ours:
        _lower_for_cuda(lambda a, b: lax.dot(a, b, precision="ANY_F8_ANY_F8_F32"), x, y)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.cpu_only(reason="presets XLA:CPU would ignore")
@pytest.mark.parametrize("precision", ["F16_F16_F32", "TF32_TF32_F32", "BF16_BF16_BF16",
                                       "ANY_F8_ANY_F8_ANY", "algorithm"])
def test_cpu_refuses_what_it_would_ignore(precision):
    x, y = _operands(np.float32)
    ours_p, theirs_p = precision, precision
    if precision == "algorithm":
        ours_p = lax.DotAlgorithm(np.float32, np.float32, np.float32)
        theirs_p = jlax.DotAlgorithm(np.float32, np.float32, np.float32)
    with pytest.raises(ValueError) as theirs:
        jlax.dot(x, y, precision=theirs_p)
    for call in (lambda: lax.dot(x, y, precision=ours_p),
                 lambda: fluxion.jit(lambda a, b: lax.dot(a, b, precision=ours_p))(x, y)):
        with pytest.raises(ValueError) as ours:
            call()
        assert str(ours.value) == str(theirs.value)
    # tracing alone is fine: the refusal comes with lowering for CPU
    fluxion.make_jaxpr(lambda a, b: lax.dot(a, b, precision=ours_p))(x, y)


# ---------------------------------------------------------------------------------------------
# transformations

@pytest.mark.parametrize("precision", ["BF16_BF16_F32", "precisions"])
def test_grad_keeps_the_precision_as_jax(precision):
    x, y = _operands(np.float32)
    ours_p = (lax.Precision.HIGHEST, lax.Precision.DEFAULT) if precision == "precisions" \
        else precision
    theirs_p = (jlax.Precision.HIGHEST, jlax.Precision.DEFAULT) if precision == "precisions" \
        else precision

    def loss(lax_, p):
        return lambda a, b: (lax_.dot(a, b, precision=p) ** 2).sum()

    ours = fluxion.grad(loss(lax, ours_p), argnums=(0, 1))(x, y)
    theirs = jax.grad(loss(jlax, theirs_p), argnums=(0, 1))(x, y)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-5)
    for argnums in (0, 1):  # each operand's cotangent: the transposed dot keeps the precision
        fj = fluxion.make_jaxpr(fluxion.grad(loss(lax, ours_p), argnums))(x, y)
        jj = jax.make_jaxpr(jax.grad(loss(jlax, theirs_p), argnums))(x, y)
        params = [str(e.params["precision"]) for e in fj.eqns if e.primitive.name == "dot_general"]
        jparams = [str(e.params["precision"]) for e in jj.eqns
                   if e.primitive.name == "dot_general"]
        assert params == jparams


def test_jvp_keeps_the_algorithm():
    x, y = _operands(np.float32)
    tx, ty = _operands(np.float32, seed=3)
    f = lambda lax_: lambda a, b: lax_.dot(a, b, precision="BF16_BF16_F32_X3")  # noqa: E731
    ours = fluxion.jvp(f(lax), (x, y), (tx, ty))
    theirs = jax.jvp(f(jlax), (x, y), (tx, ty))
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-6)
    closed = fluxion.make_jaxpr(lambda a, b: fluxion.jvp(f(lax), (a, b), (a, b)))(x, y)
    assert {str(e.params["precision"]) for e in closed.eqns
            if e.primitive.name == "dot_general"} == {"BF16_BF16_F32_X3"}


@pytest.mark.parametrize("in_axes", [(0, None), (None, 1), (0, 0)])
def test_vmap_keeps_the_algorithm(in_axes):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    y = rng.standard_normal((2, 5, 4)).astype(np.float32)
    xs = x if in_axes[0] == 0 else x[0]
    ys = y if in_axes[1] == 0 else (np.moveaxis(y, 0, 1) if in_axes[1] == 1 else y[0])

    def f(lax_):
        return lambda a, b: lax_.dot(a, b, precision="BF16_BF16_F32",
                                     preferred_element_type=np.float16)
    ours = fluxion.vmap(f(lax), in_axes)(xs, ys)
    theirs = jax.vmap(f(jlax), in_axes)(xs, ys)
    assert ours.dtype == theirs.dtype == np.float16
    np.testing.assert_allclose(np.asarray(ours, np.float32), np.asarray(theirs, np.float32),
                               rtol=1e-3)
    closed = fluxion.make_jaxpr(fluxion.vmap(f(lax), in_axes))(xs, ys)
    assert str(_precision_param(closed)) == "BF16_BF16_F32"


# ---------------------------------------------------------------------------------------------
# complex operands, real preferred_element_type

@pytest.mark.parametrize("preferred", [np.float32, np.int32, np.complex64])
def test_complex_operands_with_a_real_preferred_type(preferred):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    y = (rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3))).astype(np.complex64)
    # JAX's dot fails an XLA:CPU RET_CHECK under the suite's XLA flags (classic emitters);
    # under XLA's defaults its result is the product's real part, as numpy's below.
    theirs = jax.eval_shape(lambda a, b: jlax.dot(a, b, preferred_element_type=preferred), x, y)
    product = x.astype(np.complex128) @ y.astype(np.complex128)
    expected = product if preferred is np.complex64 else product.real
    for ours in (lax.dot(x, y, preferred_element_type=preferred),
                 fluxion.jit(lambda a, b: lax.dot(a, b, preferred_element_type=preferred))(x, y)):
        assert ours.dtype == theirs.dtype == np.dtype(preferred)
        if preferred is np.int32:
            np.testing.assert_array_equal(np.asarray(ours), np.trunc(expected))
        else:
            np.testing.assert_allclose(np.asarray(ours), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("preferred", [np.float16, np.int16, np.bool_])
def test_complex_operands_refuse_a_narrower_type(preferred):
    x = np.ones((2, 2), np.complex64)
    with pytest.raises(TypeError) as theirs:
        jlax.dot(x, x, preferred_element_type=preferred)
    with pytest.raises(TypeError) as ours:
        lax.dot(x, x, preferred_element_type=preferred)
    assert str(ours.value) == str(theirs.value)
