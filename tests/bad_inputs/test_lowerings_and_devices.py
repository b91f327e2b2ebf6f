"""Bad input catalogue: custom primitives whose lowering rules emit invalid StableHLO or return
the wrong things, and devices or backends that do not exist.

fluxion's lowering API (`ctx.op1`, `ctx.custom_call`, ...) is not JAX's (JAX's rules build
MLIR objects), so the lowering cases run on fluxion only and name the class. Each case runs
eagerly and under jit: an eager primitive is lowered and compiled as well.
"""
import numpy as np

from catalogue import Case, family_test


def np_(m):
    return m.numpy


_RULES = {
    "unknown_op": lambda ctx, x: ctx.op1("stablehlo.no_such_op", [x], ctx.avals_out[0]),
    "result_shape_lie": lambda ctx, x: ctx.op1("stablehlo.negate", [x],
                                               ctx.avals_out[0].update(shape=(2,))),
    "result_dtype_lie": lambda ctx, x: ctx.op1("stablehlo.negate", [x],
                                               ctx.avals_out[0].update(dtype=np.int32)),
    "too_many_results": lambda ctx, x: [x, x],
    "returns_none": lambda ctx, x: None,
    "returns_number": lambda ctx, x: 3,
    "raises": lambda ctx, x: 1 / 0,
    "mixed_operand_types": lambda ctx, x: ctx.op1(
        "stablehlo.add", [x, ctx.constant(np.int32(1))], ctx.avals_out[0]),
    "missing_operand": lambda ctx, x: ctx.op1("stablehlo.add", [x], ctx.avals_out[0]),
    "garbage_attribute": lambda ctx, x: ctx.op1("stablehlo.negate", [x], ctx.avals_out[0],
                                                {"foo": "}}}{{{"}),
    "text_injection": lambda ctx, x: ctx.op1(
        'stablehlo.negate"(%arg0) : (tensor<3xf32>) -> tensor<3xf32>\n}\n}\nmodule {',
        [x], ctx.avals_out[0]),
    "unknown_ffi_target": lambda ctx, x: ctx.custom_call("no_such_target", [x], ctx.avals_out),
    "unknown_legacy_target": lambda ctx, x: ctx.custom_call(
        "no_such_target", [x], ctx.avals_out, api_version=2, backend_config=""),
    # jaxlib's Python-callback target with an index the program has no callable for: jaxlib
    # crashed the process (SIGSEGV) before fluxion checked it.
    "python_callback_target": lambda ctx, x: ctx.custom_call(
        "xla_ffi_python_cpu_callback", [x], ctx.avals_out, backend_config={"index": "7 : ui64"}),
    "legacy_python_callback_target": lambda ctx, x: ctx.custom_call(
        "xla_python_cpu_callback", [x], ctx.avals_out, api_version=2,
        backend_config="140000000000"),
}

_EXPECT = {
    "unknown_op": (RuntimeError, "no_such_op"),
    "result_shape_lie": (TypeError, "f32.2. where its abstract evaluation says f32.3."),
    "result_dtype_lie": (TypeError, "i32.3. where its abstract evaluation says f32.3."),
    "too_many_results": (ValueError, "returned 2 values, expected 1"),
    "returns_none": (TypeError, "returned None"),
    "returns_number": (TypeError, "returned 3"),
    "raises": (ZeroDivisionError, "division"),
    "mixed_operand_types": (RuntimeError, "stablehlo.add"),
    "missing_operand": (RuntimeError, "expected 2 operands"),
    "garbage_attribute": (RuntimeError, "attribute"),
    "text_injection": (RuntimeError, "failed to compile"),
    "unknown_ffi_target": (RuntimeError, "no_such_target"),
    "unknown_legacy_target": (RuntimeError, "no_such_target"),
    "python_callback_target": (ValueError, "not one of its 0 host callbacks"),
    "legacy_python_callback_target": (ValueError, "custom call into Python"),
}


def _custom(m, kind, jit):
    from fluxion.core import ShapedArray
    from fluxion.extend.core import Primitive
    from fluxion.interpreters import mlir
    p = Primitive(f"bad_{kind}")
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(p, _RULES[kind])
    x = np_(m).ones(3, np.float32)
    return (m.jit(p.bind) if jit else p.bind)(x)


def _no_lowering(m):
    from fluxion.core import ShapedArray
    from fluxion.extend.core import Primitive
    p = Primitive("no_lowering")
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    return m.jit(p.bind)(np_(m).ones(3))


def _abstract_eval_not_aval(m):
    from fluxion.extend.core import Primitive
    p = Primitive("bad_abstract_eval")
    p.def_abstract_eval(lambda x: (3, "f32"))
    return m.jit(p.bind)(np_(m).ones(3))


def _pmap_ordered_callback(m):
    # (An unordered callback in a pmap once crashed the process: compiled without its
    # callables. It runs now; an ordered one cannot, over several replicas.)
    def f(x):
        m.debug.print("{}", x, ordered=True)
        return x
    return m.pmap(f)(np_(m).ones(1, np.float32))


LOWERING_CASES = [
    Case(f"lowering_{kind}_{'jit' if jit else 'eager'}",
         (lambda kind, jit: lambda m: _custom(m, kind, jit))(kind, jit),
         raises=_EXPECT[kind][0], match=_EXPECT[kind][1], jax_ok=False)
    for kind in _RULES for jit in (True, False)
] + [
    Case("lowering_missing", _no_lowering, raises=NotImplementedError,
         match="No lowering rule for primitive 'no_lowering'", jax_ok=False),
    Case("abstract_eval_not_an_aval", _abstract_eval_not_aval, raises=TypeError,
         match="abstract evaluation rule of 'bad_abstract_eval'", jax_ok=False),
    Case("pmap_ordered_callback", _pmap_ordered_callback, raises=ValueError,
         match="ordered effects are not supported for more than 1 device"),
]

DEVICE_CASES = [
    Case("devices_unknown_backend", lambda m: m.devices("abacus"), match='abacus'),
    Case("devices_absent_backend", lambda m: m.devices("tpu"), match='tpu'),
    Case("jit_unknown_backend", lambda m: m.jit(lambda x: x * 2, backend="abacus")(1.0),
         match="abacus"),
    Case("device_put_int_device", lambda m: m.device_put(np_(m).ones(2), 3),
         match="invalid value: 3"),
    Case("device_put_string_device", lambda m: m.device_put(np_(m).ones(2), "cpu:7"),
         match="invalid value"),
    # JAX: AttributeError ('str' object has no attribute 'client').
    Case("jit_device_not_device", lambda m: m.jit(lambda x: x * 2, device="cpu:0")(1.0),
         raises=ValueError, match="invalid value", jax_ok=False),
    Case("local_devices_bad_process", lambda m: m.local_devices(process_index=5),
         match="process_index 5"),
]

CASES = LOWERING_CASES + DEVICE_CASES

test_case = family_test(CASES, __file__)
