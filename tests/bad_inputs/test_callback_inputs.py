"""Bad input catalogue: host callbacks (pure, io, debug), debug.print, checkify.

An exception raised inside a callback reaches the caller as itself in fluxion (JAX wraps it in
a JaxRuntimeError carrying the traceback as text; see docs/differences.md), so those cases name
the class."""
import importlib

import numpy as np

from catalogue import Case, family_test


def np_(m):
    return m.numpy


def _sds(m, shape, dtype=np.float32):
    return m.ShapeDtypeStruct(shape, dtype)


def _pure(m, cb, result, *args, jit=True, **kw):
    f = lambda *a: m.pure_callback(cb, result, *a, **kw)  # noqa: E731
    return (m.jit(f) if jit else f)(*args)


def _io(m, cb, result, *args, jit=True, **kw):
    from_exp = m.experimental.io_callback
    f = lambda *a: from_exp(cb, result, *a, **kw)  # noqa: E731
    return (m.jit(f) if jit else f)(*args)


def ck(m):
    return importlib.import_module(m.__name__ + ".experimental.checkify")


# JAX's checkify reads the traceback jaxlib records with each error, which fluxion turns off
# in the process it shares with JAX here; so the checkify cases name the class, JAX's
# `checkify.JaxRuntimeError` (a ValueError), which fluxion's mirrors.
CheckFailed = importlib.import_module("fluxion.experimental.checkify").JaxRuntimeError


def _raise(*a):
    raise ZeroDivisionError("raised inside the callback")


CASES = [
    Case("pure_wrong_shape_jit", lambda m: _pure(m, lambda x: np.ones(3, np.float32),
                                                 _sds(m, (2,)), np_(m).ones(2)),
         match=r"shape \(3,\).*f32\[2\]"),
    Case("pure_wrong_shape_eager", lambda m: _pure(m, lambda x: np.ones(3, np.float32),
                                                   _sds(m, (2,)), np_(m).ones(2), jit=False),
         match=r"shape \(3,\)"),
    Case("pure_wrong_dtype_jit", lambda m: _pure(m, lambda x: np.ones(2, np.int32),
                                                 _sds(m, (2,)), np_(m).ones(2)),
         match="dtype int32"),
    Case("pure_wrong_count", lambda m: _pure(m, lambda x: (x, x), _sds(m, (2,)), np_(m).ones(2)),
         match="structure"),
    Case("pure_wrong_structure", lambda m: _pure(m, lambda x: [[np.asarray(x)]],
                                                 _sds(m, (2,)), np_(m).ones(2)),
         raises=None, compare=True),  # as JAX: any tree with as many leaves will do
    Case("pure_raises_jit", lambda m: _pure(m, _raise, _sds(m, (2,)), np_(m).ones(2)),
         raises=ZeroDivisionError, match="inside the callback"),
    Case("pure_raises_eager", lambda m: _pure(m, _raise, _sds(m, (2,)), np_(m).ones(2), jit=False),
         raises=ZeroDivisionError, match="inside the callback"),
    # JAX fails only when the program runs (JaxRuntimeError); fluxion at the call.
    Case("pure_not_callable", lambda m: _pure(m, 3, _sds(m, (2,)), np_(m).ones(2)),
         raises=TypeError, match="callable"),
    # JAX: AttributeError ('str' object has no attribute 'dtype').
    Case("pure_result_not_sds", lambda m: _pure(m, lambda x: x, "float32", np_(m).ones(2)),
         raises=TypeError, match="shape and .dtype"),
    Case("pure_bad_vmap_method", lambda m: _pure(m, lambda x: x, _sds(m, (2,)), np_(m).ones(2),
                                                 vmap_method="bogus"), match="vmap_method"),
    Case("pure_vmap_method_none", lambda m: m.vmap(
        lambda x: m.pure_callback(lambda y: y, _sds(m, (), np.float32), x))(np_(m).ones(2)), match="vmap_method"),
    Case("pure_grad", lambda m: m.grad(lambda x: m.pure_callback(
        lambda y: y, _sds(m, (), np.float32), x, vmap_method="sequential"))(1.0),
         match="JVP"),
    # JAX 0.10 dropped `vectorized` (it reaches the callback as a keyword); fluxion keeps it.
    Case("pure_vectorized_and_vmap_method", lambda m: _pure(
        m, lambda x: x, _sds(m, (2,)), np_(m).ones(2), vectorized=True,
        vmap_method="sequential"), raises=ValueError, match="mutually exclusive"),
    Case("io_wrong_shape_jit", lambda m: _io(m, lambda x: np.ones(3, np.float32),
                                             _sds(m, (2,)), np_(m).ones(2)), match="shape"),
    Case("io_raises_jit", lambda m: _io(m, _raise, _sds(m, (2,)), np_(m).ones(2)),
         raises=ZeroDivisionError, match='inside the callback'),
    Case("io_grad", lambda m: m.grad(lambda x: m.experimental.io_callback(
        lambda y: y, _sds(m, (), np.float32), x))(1.0), match="JVP"),
    Case("io_ordered_vmap", lambda m: m.vmap(lambda x: m.experimental.io_callback(
        lambda y: y, _sds(m, (), np.float32), x, ordered=True))(np_(m).ones(2)),
         match="ordered"),
    Case("debug_callback_raises", lambda m: m.jit(
        lambda x: m.debug.callback(_raise, x) or x)(1.0).block_until_ready() and
        m.effects_barrier(), raises=ZeroDivisionError, match='inside the callback'),
    Case("debug_callback_not_callable", lambda m: m.debug.callback(3, 1.0), match="callable"),
    Case("debug_print_missing_positional", lambda m: m.jit(
        lambda x: m.debug.print("{} {}", x) or x)(1.0), match='positional'),
    Case("debug_print_index_beyond", lambda m: m.jit(
        lambda x: m.debug.print("{3}", x) or x)(1.0), match='3'),
    Case("debug_print_unknown_keyword", lambda m: m.jit(
        lambda x: m.debug.print("{y}", x=x) or x)(1.0), match="'y'"),
    Case("debug_print_not_string", lambda m: m.debug.print(3, 1.0), match='str'),
    Case("debug_print_bad_spec", lambda m: m.jit(
        lambda x: m.debug.print("{:d}", x) or x)(1.0), raises=ValueError, match="format code"),
    Case("pure_returns_string", lambda m: _pure(m, lambda x: "abc", _sds(m, (2,)),
                                                np_(m).ones(2)), match="shape"),
    Case("pure_returns_none", lambda m: _pure(m, lambda x: None, _sds(m, (2,)), np_(m).ones(2)), match='structure'),
    Case("pure_result_bad_dtype", lambda m: _pure(m, lambda x: x, _sds(m, (2,), "float17"),
                                                  np_(m).ones(2)), match='float17'),
    # JAX fails inside MLIR (MLIRError: invalid tensor dimension size).
    Case("pure_result_negative_dim", lambda m: _pure(m, lambda x: x, _sds(m, (-2,)),
                                                     np_(m).ones(2)), raises=ValueError,
         match="non-negative", jax_ok=False),
    Case("io_returns_wrong_dtype_eager", lambda m: _io(m, lambda x: np.ones(2, np.int32),
                                                       _sds(m, (2,)), np_(m).ones(2), jit=False), match='int32'),
    Case("debug_print_missing_under_vmap", lambda m: m.vmap(
        lambda x: m.debug.print("{} {}", x) or x)(np_(m).ones(2)), match='positional'),
    Case("check_missing_format_field", lambda m: ck(m).checkify(
        lambda x: ck(m).check(x > 0, "bad {y}", x=x) or x)(np_(m).array(-1.0))[0].throw(),
         raises=KeyError, match="y"),  # as JAX run on its own (see CheckFailed above)
    # checkify (formatting arguments are arrays: JAX refuses Python scalars there)
    Case("check_fails_eager", lambda m: ck(m).check(
        np_(m).array(False), "boom {x}", x=np_(m).array(1)), raises=CheckFailed, match="boom 1"),
    Case("check_under_jit_unfunctionalized", lambda m: m.jit(
        lambda x: ck(m).check(x > 0, "positive") or x)(1.0), match="functionalized"),
    # JAX accepts a message that is not a string, and fails only when formatting it.
    Case("check_message_not_str", lambda m: ck(m).check(True, 3), raises=TypeError,
         match="string message"),
    Case("check_pred_not_bool", lambda m: ck(m).check(1.0, "msg"), match="pred"),
    # JAX ignores unknown error kinds in `errors`.
    Case("checkify_bad_errors", lambda m: ck(m).checkify(lambda x: x, errors={"nan"})(1.0),
         raises=TypeError, match="error kinds"),
    Case("checkify_throw", lambda m: ck(m).checkify(
        lambda x: ck(m).check(x > 0, "want positive, got {}", x) or x)(np_(m).array(-1.0))[0]
        .throw(), raises=CheckFailed, match="want positive, got -1.0"),
    Case("checkify_div_throw", lambda m: ck(m).checkify(
        m.jit(lambda x: 1 // x), errors=ck(m).div_checks)(np_(m).array(0))[0].throw(),
        raises=CheckFailed, match="division by zero"),
    Case("checkify_static_oob_throw", lambda m: ck(m).checkify(
        m.jit(lambda x: x[5]), errors=ck(m).index_checks)(np_(m).ones(2))[0].throw(),
        raises=CheckFailed, match="index 5 is out of bounds for axis 0 with size 2"),
    Case("checkify_dynamic_oob_throw", lambda m: ck(m).checkify(
        m.jit(lambda x, i: x[i]), errors=ck(m).index_checks)(np_(m).ones(2), -4)[0].throw(),
        raises=CheckFailed, match="out of bounds"),
    Case("checkify_nan_throw", lambda m: ck(m).checkify(
        m.jit(np_(m).log), errors=ck(m).nan_checks)(-1.0)[0].throw(), raises=CheckFailed, match="nan generated"),
    Case("check_error_not_error", lambda m: ck(m).check_error(3), match="Error"),
]

test_case = family_test(CASES, __file__)
