"""The core API: jit (static arguments, caching, donation, AOT), make_jaxpr, eval_shape, Array,
devices, configuration flags, and independence from JAX. JAX is the oracle for printed forms."""
import functools
import logging
import os
import pickle
import re
import subprocess
import sys
from collections import namedtuple

import jax
import jax.numpy as jax_jnp
import ml_dtypes
import numpy as np
import pytest

import fluxion
import fluxion.lax as lax
import fluxion.numpy as jnp

X = np.arange(3, dtype=np.float32)


def counting(fun):
    """`fun` with a `.traces` list that grows each time it runs (so: each time it is traced)."""
    def wrapped(*args, **kwargs):
        wrapped.traces.append(1)
        return fun(*args, **kwargs)
    wrapped.traces = []
    functools.update_wrapper(wrapped, fun)
    return wrapped


def assert_array(out, expected, dtype=None, weak_type=False):
    assert isinstance(out, fluxion.Array)
    expected = np.asarray(expected)
    assert out.dtype == (dtype or expected.dtype) and out.shape == expected.shape
    assert out.weak_type == weak_type
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# jit: forms and static arguments

def test_decorator_form():
    @fluxion.jit
    def f(x, y):
        return lax.add(lax.mul(x, y), 1.0)
    assert_array(f(X, np.float32(2)), X * 2 + 1)
    assert f.__name__ == "f"


def test_partial_form_with_static_argnums():
    @functools.partial(fluxion.jit, static_argnums=1)
    def scale(x, n):
        return lax.mul(x, float(n))
    assert_array(scale(X, 3), X * 3)
    assert_array(scale(X, n=4), X * 4)  # the name is inferred from the number


def test_static_argnames_inferred_number():
    f = counting(lambda x, n: lax.mul(x, float(n)))
    g = fluxion.jit(f, static_argnames="n")
    assert_array(g(X, 2), X * 2)  # passed positionally, still static
    assert_array(g(X, n=5), X * 5)
    g(X, n=5)
    assert len(f.traces) == 2


def test_negative_static_argnums():
    f = counting(lambda x, n: lax.mul(x, float(n)))
    g = fluxion.jit(f, static_argnums=-1)
    assert_array(g(X, 2), X * 2)
    assert_array(g(X, 3), X * 3)
    g(X, 3)
    assert len(f.traces) == 2


def test_keyword_only_static_argname():
    def f(x, *, k):
        return lax.mul(x, float(k))
    assert_array(fluxion.jit(f, static_argnames="k")(X, k=2), X * 2)


@pytest.mark.parametrize("library", ["jax", "fluxion"])
def test_unhashable_static_argument_is_a_value_error(library):
    jit = jax.jit if library == "jax" else fluxion.jit
    f = jit(lambda x, n: x, static_argnums=1)
    with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
        f(X, [1, 2])


# ---------------------------------------------------------------------------------------------
# jit: the cache

def test_same_signature_never_retraces():
    f = counting(lambda x, y: lax.add(x, y))
    g = fluxion.jit(f)
    for _ in range(3):
        g(X, X)
    g(np.ones(3, np.float32), np.zeros(3, np.float32))  # same types, other values
    g(fluxion.device_put(X), X)  # an Array and a NumPy array of one type are the same
    assert len(f.traces) == 1


@pytest.mark.parametrize("first,second", [
    (np.ones(3, np.float32), np.ones(4, np.float32)),        # shape
    (np.ones(3, np.float32), np.ones(3, np.int32)),          # dtype
    (2.0, np.float32(2.0)),                                  # weak type
    (np.float32(2.0), np.ones((), ml_dtypes.bfloat16)),      # dtype of a scalar
], ids=["shape", "dtype", "weak_type", "bf16"])
def test_new_abstract_signature_retraces(first, second):
    f = counting(lambda x: lax.neg(x))
    g = fluxion.jit(f)
    g(first), g(first)
    g(second), g(second)
    assert len(f.traces) == 2


def test_new_static_value_retraces():
    f = counting(lambda x, n: lax.mul(x, float(n)))
    g = fluxion.jit(f, static_argnums=1)
    g(X, 1), g(X, 1), g(X, 2), g(X, 2), g(X, 1)
    assert len(f.traces) == 2


def test_x64_flag_retraces():
    f = counting(lambda x: lax.add(x, 1.0))
    g = fluxion.jit(f)
    assert g(2.0).dtype == np.float32
    with fluxion.enable_x64():
        assert g(2.0).dtype == np.float64
    assert g(2.0).dtype == np.float32
    assert len(f.traces) == 2


def test_kwargs_and_defaults():
    @fluxion.jit
    def f(x, y=1.0, *, z):
        return lax.sub(lax.mul(x, y), z)
    assert_array(f(X, z=X), X - X)
    assert_array(f(X, 2.0, z=np.float32(1)), X * 2 - 1)
    assert_array(f(x=X, y=np.float32(3), z=X), X * 3 - X)


Pair = namedtuple("Pair", ["first", "second"])


def test_pytree_arguments_and_outputs():
    @fluxion.jit
    def f(tree):
        a, (b, c) = tree["a"], tree["bc"]
        return {"sum": lax.add(a, b), "pair": Pair(c, None), "list": [lax.neg(a)]}
    out = f({"a": X, "bc": (X, np.int32(7))})
    assert set(out) == {"sum", "pair", "list"}
    assert_array(out["sum"], 2 * X)
    assert isinstance(out["pair"], Pair) and out["pair"].second is None
    assert_array(out["pair"].first, np.int32(7))
    assert_array(out["list"][0], -X)


@pytest.mark.parametrize("value", [2.0, 3, 1 + 2j, True])
def test_python_scalar_arguments_are_weak_like_jax(value):
    ours = fluxion.jit(lambda x: x)(value)
    theirs = jax.jit(lambda x: x)(value)
    assert ours.dtype == theirs.dtype and ours.weak_type == theirs.weak_type
    assert ours.item() == theirs.item()


def test_python_scalar_arithmetic_stays_weak():
    out = fluxion.jit(lambda x, y: lax.mul(x, y))(2.0, 3.0)
    assert_array(out, np.float32(6), weak_type=True)


# ---------------------------------------------------------------------------------------------
# jit: flags

def test_log_compiles_logs_each_stage_with_durations(caplog):
    fluxion.clear_caches()  # an equal program compiled earlier in the process would be reused
    fluxion.config.update("log_compiles", True)
    try:
        with caplog.at_level(logging.WARNING, logger="fluxion"):
            fluxion.jit(lambda x: lax.sin(x))(np.ones(7, np.float32))
    finally:
        fluxion.config.update("log_compiles", False)
    messages = [r.getMessage() for r in caplog.records if r.name == "fluxion"]
    for stage in ("Finished tracing", "Finished jaxpr to StableHLO lowering",
                  "Finished XLA compilation"):
        assert any(re.search(rf"{stage}.* in \d+\.\d+ sec", m) for m in messages), messages


def test_equal_programs_compile_once_whoever_traces_them(caplog):
    def run(fn):
        with caplog.at_level(logging.WARNING, logger="fluxion"):
            caplog.clear()
            out = fluxion.jit(fn)(np.arange(5.0, dtype=np.float32))
        compiled = any("Finished XLA compilation" in r.getMessage() for r in caplog.records)
        return np.asarray(out), compiled

    fluxion.clear_caches()
    fluxion.config.update("log_compiles", True)
    try:
        def make(scale):
            return lambda x: lax.tanh(x) * scale
        first = run(make(3))
        again = run(make(3))  # a fresh function: traced again, the same program text
        other = run(make(4))
    finally:
        fluxion.config.update("log_compiles", False)
    assert first[1] and not again[1] and other[1]
    np.testing.assert_allclose(again[0], np.tanh(np.arange(5.0)) * 3, rtol=1e-6)
    np.testing.assert_allclose(other[0], np.tanh(np.arange(5.0)) * 4, rtol=1e-6)


def test_log_compiles_is_quiet_by_default(caplog):
    with caplog.at_level(logging.WARNING, logger="fluxion"):
        fluxion.jit(lambda x: lax.cos(x))(np.ones(7, np.float32))
    assert not [r for r in caplog.records if r.name == "fluxion"]


@pytest.mark.parametrize("how", ["config", "jax_config", "context"])
def test_disable_jit_runs_python_op_by_op(how, capsys):
    seen = []

    @fluxion.jit
    def f(x):
        y = lax.mul(x, 2.0)
        seen.append(y)
        print("y =", y)
        return lax.add(y, 1.0)

    if how == "context":
        with fluxion.disable_jit():
            out = f(X)
    else:
        name = "disable_jit" if how == "config" else "jax_disable_jit"
        fluxion.config.update(name, True)
        try:
            out = f(X)
        finally:
            fluxion.config.update(name, False)
    assert_array(out, X * 2 + 1)
    assert isinstance(seen[0], fluxion.Array)
    assert not isinstance(seen[0], fluxion.core.Tracer)  # a concrete value
    assert "y = [0. 2. 4.]" in capsys.readouterr().out
    f(X)
    assert isinstance(seen[1], fluxion.core.Tracer)  # jit is back on


def test_donated_argument_is_deleted():
    x = fluxion.device_put(np.arange(4, dtype=np.float32))
    out = fluxion.jit(lambda x: lax.mul(x, 2.0), donate_argnums=0)(x)
    assert_array(out, np.arange(4) * 2, dtype=np.float32)
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(x)
    with pytest.raises(RuntimeError, match="deleted"):
        fluxion.jit(lambda x: x)(x)


@pytest.mark.parametrize("lib", [fluxion, jax], ids=["fluxion", "jax"])
def test_a_donation_no_output_can_reuse_warns_and_keeps_the_argument(lib):
    x = lib.numpy.arange(4.0)
    y = lib.numpy.ones((2, 2), np.int32)
    f = lib.jit(lambda x, y: (x + 1, y.sum()), donate_argnums=(0, 1))
    with pytest.warns(UserWarning) as record:
        f(x, y)
    assert str(record[0].message).startswith("Some donated buffers were not usable: int32[2,2].")
    if lib is fluxion:  # JAX's names its own mlir.py
        assert record[0].filename == __file__
    assert x.is_deleted() and not y.is_deleted()


def _run_with_xla_logging(code):
    """Run `code` in a fresh interpreter with XLA's logging at its default level."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env)


def test_a_donated_argument_fails_in_python_without_an_xla_error_line():
    code = (
        "import fluxion, fluxion.numpy as jnp\n"
        "x = jnp.arange(4.0)\n"
        "x + 1\n"  # its program is cached: the next call goes straight to XLA
        "fluxion.jit(lambda v: v * 2, donate_argnums=0)(x)\n"
        "try:\n"
        "    x + 1\n"
        "except RuntimeError as e:\n"
        "    print(e)\n")
    out = _run_with_xla_logging(code)
    assert "has been deleted" in out.stdout
    assert out.stderr == "", "XLA logged its own error line"


def test_donate_argnames_and_kept_arguments():
    x = fluxion.device_put(np.ones(2, np.float32))
    y = fluxion.device_put(np.ones(2, np.float32))
    out = fluxion.jit(lambda x, y: lax.add(x, y), donate_argnames="y")(x, y)
    assert_array(out, np.full(2, 2.0, np.float32))
    assert y.is_deleted() and not x.is_deleted()


def test_donating_scalars_never_consumes_cached_constants():
    # Rank-0 constants (from Python scalars) are cached device arrays; donating one must not
    # delete the cache's copy.
    triple = fluxion.jit(lambda v: v * 3, donate_argnums=0)
    two = fluxion.numpy.asarray(2.0)
    assert float(triple(two)) == 6.0
    for _ in range(2):
        assert float(triple(2.0)) == 6.0  # a Python scalar, donated each call
    assert float(fluxion.numpy.asarray(2.0) + 1) == 3.0
    assert float(fluxion.numpy.ones(()) * 2.0) == 2.0
    aot = triple.lower(2.0).compile()
    assert float(aot(2.0)) == 6.0 and float(aot(two)) == 6.0
    assert float(fluxion.numpy.asarray(2.0)) == 2.0


def test_aot_donation_deletes_the_argument_and_its_host_copy():
    x = fluxion.numpy.arange(3.0)
    assert x.tolist() == [0.0, 1.0, 2.0]  # caches a host copy
    compiled = fluxion.jit(lambda v: v + 1, donate_argnums=0).lower(x).compile()
    assert_array(compiled(x), np.arange(3.0, dtype=np.float32) + 1)
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(x)


# ---------------------------------------------------------------------------------------------
# jit: ahead of time

def test_lower_for_several_platforms_picks_a_branch_and_refuses_to_compile():
    traced = fluxion.jit(lambda x: x * 2).trace(1.0)
    both = traced.lower(lowering_platforms=("cpu", "cuda"))
    text = both.as_text()
    assert "@main(%arg0: tensor<i32>, %arg1: tensor<f32>)" in text
    assert "stablehlo.case" in text and "_platform_cuda_main" in text
    with pytest.raises(ValueError, match="lowered for platforms"):
        both.compile()
    assert float(traced.lower(lowering_platforms=("cpu",)).compile()(3.0)) == 6.0
    with pytest.raises(ValueError, match="Unknown platform"):
        traced.lower(lowering_platforms=("gpux",))
    # JAX lowers the same way (its compile of such a lowering fails inside JAX).
    jax_text = jax.jit(lambda x: x * 2).trace(1.0).lower(
        lowering_platforms=("cpu", "cuda")).as_text()
    assert "%arg0: tensor<i32>" in jax_text and "%arg1: tensor<f32>" in jax_text


def test_lower_compile_and_inspect():
    lowered = fluxion.jit(lambda x: lax.add(lax.sin(x), 1.0)).lower(X)
    text = lowered.as_text()
    assert "func.func public @main(%arg0: tensor<3xf32>)" in text
    assert "stablehlo.sine %arg0" in text and "stablehlo.add" in text
    compiled = lowered.compile()
    assert_array(compiled(X), np.sin(X) + 1)
    hlo = compiled.as_text()
    assert hlo.startswith("HloModule") and "sine" in hlo
    cost = compiled.cost_analysis()
    assert cost["flops"] > 0 and "bytes accessed" in cost


def test_trace_then_lower_matches_jax():
    def program(lib):
        def f(x, y):
            return {"s": lib.lax.add(x, y), "n": lib.lax.reduce_sum(x, (0,))}
        return f
    ours = fluxion.jit(program(fluxion), donate_argnums=1).trace(X, X)
    theirs = jax.jit(program(jax), donate_argnums=1).trace(X, X)
    assert str(ours.jaxpr) == str(theirs.jaxpr)
    assert ours.fun_name == theirs.fun_name == "f"
    for a, b in zip(fluxion.tree_util.tree_leaves(ours.out_info),
                    jax.tree_util.tree_leaves(theirs.out_info)):
        assert (a.shape, a.dtype) == (b.shape, b.dtype)
    text = ours.lower().as_text()
    assert "tf.aliasing_output" in text or "jax.buffer_donor" in text
    out = ours.lower().compile()(X, np.ones(3, np.float32))
    assert_array(out["s"], X + 1)


def test_compiled_rejects_other_signature():
    compiled = fluxion.jit(lambda x: lax.neg(x)).lower(X).compile()
    with pytest.raises(TypeError, match=r"Argument .x. compiled with float32\[3\] and called with "
                                        r"float32\[4\]"):
        compiled(np.ones(4, np.float32))


def test_lower_with_static_argument():
    text = fluxion.jit(lambda x, n: lax.mul(x, float(n)), static_argnums=1).lower(X, 5).as_text()
    assert "stablehlo.multiply" in text and "tensor<3xf32>" in text


# ---------------------------------------------------------------------------------------------
# eval_shape and ShapeDtypeStruct

def _eval_shape_program(lib):
    return lambda x, y: {"sum": lib.lax.add(x, y), "total": lib.lax.reduce_sum(x, (0, 1)),
                         "ints": lib.lax.convert_element_type(x, np.int32)}


@pytest.mark.parametrize("y", [np.ones((2, 3), np.float32), 1.0], ids=["array", "weak_scalar"])
def test_eval_shape_matches_jax(y):
    x = np.ones((2, 3), np.float32)
    ours = fluxion.eval_shape(_eval_shape_program(fluxion), x, y)
    theirs = jax.eval_shape(_eval_shape_program(jax), x, y)
    for key in theirs:
        assert isinstance(ours[key], fluxion.ShapeDtypeStruct)
        assert (ours[key].shape, ours[key].dtype, ours[key].weak_type) == (
            theirs[key].shape, theirs[key].dtype, theirs[key].weak_type)


def test_eval_shape_accepts_shape_dtype_structs_and_runs_nothing():
    f = counting(lambda x: lax.dot_general(x, x, (((1,), (1,)), ((), ()))))
    spec = fluxion.ShapeDtypeStruct((4, 5), np.float32)
    out = fluxion.eval_shape(f, spec)
    assert out == fluxion.ShapeDtypeStruct((4, 4), np.float32)
    assert out.ndim == 2 and out.size == 16
    assert repr(out) == "ShapeDtypeStruct(shape=(4, 4), dtype=float32)"
    assert len(f.traces) == 1


# ---------------------------------------------------------------------------------------------
# make_jaxpr, printed exactly as JAX prints it

BIG = np.ones((100, 100, 100), np.float32)


def _programs(lib):
    lax_ = lib.lax

    @lib.jit
    def inner(x):
        return lax_.mul(lax_.sin(x), 2.0)

    @lib.jit
    def big(x):
        for _ in range(6):
            x = lax_.mul(lax_.sin(x), 2.0)
        return x

    const = lib.device_put(np.arange(3, dtype=np.float32))
    return {
        "chain": (lambda x, y: lax_.add(lax_.mul(lax_.sin(x), y), 1.0), (X, np.float32(2))),
        "weak_scalar_arg": (lambda x, y: lax_.add(lax_.mul(lax_.sin(x), y), 1.0), (X, 2.0)),
        "identity": (lambda x: x, (X,)),
        "pair_of_inputs": (lambda x: (x, x), (X,)),
        "no_outputs": (lambda x: (), (X,)),
        "one_line_two_eqns": (lambda x: lax_.cos(lax_.sin(x)), (1.0,)),
        "f16_matrix": (lambda x: lax_.cos(lax_.sin(x)), (np.ones((2, 2), np.float16),)),
        "long_invars": (lambda *a: a[0], (BIG,) * 8),
        "long_outvars": (lambda x: [x] * 20, (1.0,)),
        "literals": (lambda x: lax_.add(lax_.mul(x, 0.1), 1e-30), (X,)),
        "int_literal": (lambda x: lax_.add(x, 7), (np.int32(1),)),
        "numpy_scalar_literal": (lambda x: lax_.mul(x, np.float32(0.1)), (X,)),
        "convert": (lambda x: lax_.convert_element_type(x, np.int32), (X,)),
        "reduce_sum": (lambda x: lax_.reduce_sum(x, (0,)), (X,)),
        "pytree_output": (lambda x: {"a": x, "b": [lax_.neg(x)]}, (X,)),
        "closure_constvar": (lambda x: lax_.add(x, const), (X,)),
        "closure_numpy_constvar": (lambda x: lax_.add(x, np.ones(3, np.float32)), (X,)),
        "nested_jit": (lambda x: lax_.add(inner(x), 1.0), (1.0,)),
        "nested_jit_twice": (lambda x: lax_.add(inner(inner(x)), 0.1), (1.0,)),
        "nested_big_jit": (lambda x: lax_.add(big(x), 0.1), (1.0,)),
    }


@pytest.fixture(scope="module")
def program_pairs():
    ours, theirs = _programs(fluxion), _programs(jax)
    return {name: (ours[name], theirs[name][0]) for name in ours}


@pytest.mark.parametrize("name", list(_programs(fluxion)))
def test_make_jaxpr_prints_like_jax(program_pairs, name):
    (ours, args), theirs = program_pairs[name]
    assert str(fluxion.make_jaxpr(ours)(*args)) == str(jax.make_jaxpr(theirs)(*args))


def test_make_jaxpr_with_static_argnums_like_jax():
    def f(lib):
        return lambda x, n: lib.lax.mul(x, float(n))
    ours = fluxion.make_jaxpr(f(fluxion), static_argnums=1)(X, 3)
    assert str(ours) == str(jax.make_jaxpr(f(jax), static_argnums=1)(X, 3))
    assert str(ours) == "{ lambda ; a:f32[3]. let b:f32[3] = mul a 3.0:f32[] in (b,) }"


def test_nested_jit_format():
    @fluxion.jit
    def scale(x):
        return lax.mul(lax.exp(x), 2.0)
    text = str(fluxion.make_jaxpr(lambda x: lax.add(scale(x), 1.0))(X))
    assert text == ("{ lambda ; a:f32[3]. let\n"
                    "    b:f32[3] = jit[\n"
                    "      name=scale\n"
                    "      jaxpr={ lambda ; a:f32[3]. let\n"
                    "          c:f32[3] = exp a\n"
                    "          b:f32[3] = mul c 2.0:f32[]\n"
                    "        in (b,) }\n"
                    "    ] a\n"
                    "    d:f32[3] = add b 1.0:f32[]\n"
                    "  in (d,) }")


def test_closure_over_array_is_a_constvar():
    c = fluxion.device_put(np.arange(3, dtype=np.float32))
    closed = fluxion.make_jaxpr(lambda x: lax.mul(x, c))(X)
    assert len(closed.consts) == 1 and closed.consts[0] is c
    assert str(closed) == "{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = mul b a in (c,) }"
    assert_array(fluxion.jit(lambda x: lax.mul(x, c))(X), X * np.arange(3, dtype=np.float32))


def test_make_jaxpr_return_shape():
    closed, shape = fluxion.make_jaxpr(lambda x: lax.reduce_sum(x, (0,)), return_shape=True)(X)
    assert shape == fluxion.ShapeDtypeStruct((), np.float32)
    assert closed.out_avals[0].shape == ()


# ---------------------------------------------------------------------------------------------
# Array

REPR_VALUES = {
    "f32_scalar": np.float32(1.5),
    "i32_vector": np.arange(3, dtype=np.int32),
    "empty_matrix": np.zeros((2, 0), np.float32),
    "empty_vector": np.zeros((0,), np.int32),
    "weak_float": 1.0,
    "weak_int": 3,
    "bool_scalar": True,
    "f16_matrix": np.ones((2, 3), np.float16),
    "bf16_vector": np.array([1.5, 2.5], dtype=ml_dtypes.bfloat16),
    "c64_vector": np.array([1 + 2j], np.complex64),
    "bool_matrix": np.array([[True, False]]),
    "u8_matrix": np.arange(12, dtype=np.uint8).reshape(3, 4),
    "nan": np.float32(np.nan),
    "wide_range": np.array([1e10, 1e-10], np.float32),
    "long_vector": np.arange(1000, dtype=np.float32),
    "i8_3d": np.arange(-12, 12, dtype=np.int8).reshape(2, 3, 4),
}


@pytest.mark.parametrize("name", sorted(REPR_VALUES))
def test_array_repr_matches_jax(name):
    value = REPR_VALUES[name]
    assert repr(fluxion.device_put(value)) == repr(jax.device_put(value))


def test_weak_typed_result_repr_matches_jax():
    ours = fluxion.jit(lambda x: lax.mul(x, 2.0))(3.0)
    theirs = jax.jit(lambda x: jax.lax.mul(x, 2.0))(3.0)
    assert repr(ours) == repr(theirs) == "Array(6., dtype=float32, weak_type=True)"


def _tracer_repr_under(lib, transform: str) -> str:
    """The repr of the tracer that a function sees under `transform` of library `lib`."""
    seen = []

    def f(x):
        seen.append(repr(x))
        return x * 2.0

    def total(x):
        return f(x).sum()

    one, ones = np.float32(1.0), np.ones(2, np.float32)
    run = {
        "jit_weak": lambda: lib.jit(f)(1.0),
        "jit_array": lambda: lib.jit(f)(np.ones((2, 3), np.int32)),
        "grad": lambda: lib.grad(total)(one),
        "grad_of_grad": lambda: lib.grad(lib.grad(f))(one),
        "vjp": lambda: lib.vjp(f, one),
        "linearize": lambda: lib.linearize(f, one),
        "jvp": lambda: lib.jvp(f, (one,), (one,)),
        "vmap": lambda: lib.vmap(f)(ones),
        "vmap_in_axes_1": lambda: lib.vmap(f, in_axes=1)(np.ones((2, 3), np.float32)),
        "jacfwd": lambda: lib.jacfwd(f)(ones),
        "hessian": lambda: lib.hessian(total)(ones),
        "grad_of_vmap": lambda: lib.vmap(lib.grad(f))(ones),
        "jit_in_grad": lambda: lib.grad(lib.jit(total))(one),
        "make_jaxpr": lambda: lib.make_jaxpr(f)(one),
    }[transform]
    run()
    return seen[0]


@pytest.mark.parametrize("transform", [
    "jit_weak", "jit_array", "grad", "grad_of_grad", "vjp", "linearize", "jvp", "vmap",
    "vmap_in_axes_1", "jacfwd", "hessian", "grad_of_vmap", "jit_in_grad", "make_jaxpr"])
def test_tracer_repr_matches_jax(transform):
    assert _tracer_repr_under(fluxion, transform) == _tracer_repr_under(jax, transform)


def test_array_attributes_and_host_access():
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = fluxion.device_put(value)
    assert (a.shape, a.dtype, a.ndim, a.size, len(a)) == ((2, 3), np.float32, 2, 6, 2)
    assert (a.nbytes, a.itemsize) == (24, 4)
    np.testing.assert_array_equal(np.asarray(a), value)
    assert np.asarray(a, dtype=np.int32).dtype == np.int32
    assert a.tolist() == value.tolist()
    assert a.item(4) == 4.0
    assert fluxion.device_put(np.int32(7)).item() == 7
    assert a.block_until_ready() is a
    assert fluxion.block_until_ready({"a": a}) == {"a": a}
    assert a.devices() == {fluxion.devices()[0]}
    assert float(fluxion.device_put(np.float32(2.5))) == 2.5
    assert int(fluxion.device_put(np.int32(3))) == 3


def test_zero_d_array_has_no_len():
    with pytest.raises(TypeError, match="len\\(\\) of unsized object"):
        len(fluxion.device_put(np.float32(1)))


def test_array_iteration():
    rows = list(fluxion.device_put(np.arange(6, dtype=np.int32).reshape(3, 2)))
    assert len(rows) == 3 and all(isinstance(r, fluxion.Array) for r in rows)
    np.testing.assert_array_equal(np.asarray(rows[2]), [4, 5])


@pytest.mark.parametrize("value", [np.arange(4, dtype=np.int16), 2.0, np.array([], np.float32),
                                   np.array([1.0, -2.0], ml_dtypes.bfloat16)])
def test_pickle_round_trip(value):
    a = fluxion.device_put(value)
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b, fluxion.Array)
    assert (b.shape, b.dtype, b.weak_type) == (a.shape, a.dtype, a.weak_type)
    np.testing.assert_array_equal(np.asarray(b), np.asarray(a))


def test_device_put_and_device_get_pytrees():
    tree = {"x": X, "pair": (1.0, np.int32(2)), "none": None}
    on_device = fluxion.device_put(tree)
    assert on_device["none"] is None
    assert isinstance(on_device["x"], fluxion.Array) and not on_device["x"].weak_type
    assert on_device["pair"][0].weak_type and on_device["pair"][1].dtype == np.int32
    back = fluxion.device_get(on_device)
    assert isinstance(back["x"], np.ndarray)
    np.testing.assert_array_equal(back["x"], X)
    assert back["pair"][1] == 2 and back["none"] is None
    assert fluxion.device_get({"k": 5}) == {"k": 5}
    device = fluxion.devices()[0]
    assert fluxion.device_put(X, device).devices() == {device}


@pytest.mark.cpu_only(reason="the CPU is the default device")
def test_devices_and_backend():
    devices = fluxion.devices()
    assert len(devices) == fluxion.device_count() >= 1
    assert devices[0].platform == "cpu"
    assert fluxion.default_backend() == "cpu" == jax.default_backend()
    assert fluxion.local_devices() == devices
    assert (fluxion.process_index(), fluxion.process_count()) == (0, 1)


# ---------------------------------------------------------------------------------------------
# 64-bit mode

@pytest.mark.parametrize("name", ["enable_x64", "jax_enable_x64"])
def test_enable_x64_config_names(name):
    assert fluxion.device_put(1.0).dtype == np.float32
    fluxion.config.update(name, True)
    try:
        assert fluxion.config.read("enable_x64") is True
        assert fluxion.config.jax_enable_x64 is True
        assert fluxion.device_put(1.0).dtype == np.float64
        assert fluxion.device_put(np.arange(2)).dtype == np.int64
        assert fluxion.jit(lambda x: lax.add(x, 1))(2).dtype == np.int64
    finally:
        fluxion.config.update(name, False)
    assert fluxion.device_put(np.arange(2)).dtype == np.int32


def test_unknown_config_option():
    with pytest.raises(AttributeError, match="Unrecognized config option"):
        fluxion.config.update("jax_no_such_flag", True)


def run_python(code: str, **env) -> str:
    import os
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_enable_x64_environment_variable():
    out = run_python("import fluxion, numpy as np\n"
                     "print(fluxion.config.enable_x64, fluxion.device_put(1.0).dtype,\n"
                     "      fluxion.jit(lambda x: x)(np.arange(2)).dtype)",
                     FLUXION_ENABLE_X64="1")
    assert out.split() == ["True", "float64", "int64"]


# ---------------------------------------------------------------------------------------------
# Independence from JAX

def test_runs_without_jax():
    code = """
import sys
sys.modules["jax"] = None  # any `import jax` now raises ImportError
import numpy as np
import fluxion, fluxion.lax as lax, fluxion.numpy as jnp
x = np.arange(3, dtype=np.float32)
print(fluxion.jit(lambda x: lax.mul(lax.sin(x), 2.0))(x))
print(fluxion.make_jaxpr(lambda x: lax.neg(x))(x))
print(jnp.add(x, 1), lax.exp(x).dtype)
assert sys.modules["jax"] is None
leaked = [m for m, mod in sys.modules.items() if mod is not None and (m == "jax" or m.startswith("jax."))]
assert not leaked, leaked
print("ok")
"""
    out = run_python(code)
    assert out.splitlines()[-1] == "ok"
    assert "{ lambda ; a:f32[3]. let b:f32[3] = neg a in (b,) }" in out
    assert "[1. 2. 3.] float32" in out


def test_common_operations_do_not_import_jax_even_when_installed():
    """jaxlib imports the jax package from some of its paths; fluxion must avoid those paths."""
    import subprocess
    import sys
    code = (
        "import sys, numpy as np\n"
        "import fluxion, fluxion.numpy as jnp\n"
        "x = jnp.arange(6.0).reshape(2, 3)\n"
        "y = fluxion.jit(lambda a: jnp.sin(a) * 2)(x)\n"
        "g = fluxion.grad(lambda a: jnp.sum(a ** 2))(x)\n"
        "v = fluxion.vmap(jnp.sum)(x)\n"
        "np.asarray(y); np.asarray(g); np.asarray(v); repr(y); y.tolist()\n"
        "print('jax' in sys.modules)\n")
    out = _run_with_xla_logging(code)
    assert out.stdout.strip() == "False", out.stderr
    assert out.stderr == "", "XLA's start-up INFO lines reach the user"


def test_lowered_compiler_ir_is_an_mlir_module_like_jax():
    import jax
    x = np.arange(3, dtype=np.float32)
    ours = fluxion.jit(lambda v: fluxion.numpy.sin(v) + 1).lower(x)
    theirs = jax.jit(lambda v: jax.numpy.sin(v) + 1).lower(x)
    assert type(ours.compiler_ir()) is type(theirs.compiler_ir())
    assert "stablehlo.sine" in str(ours.compiler_ir("stablehlo"))
    assert type(ours.compiler_ir("hlo")) is type(theirs.compiler_ir("hlo"))
    # XLA's HLO text, as JAX's (the parameter's name aside)
    hlo = ours.as_text("hlo")
    assert " sine(" in hlo and hlo.startswith("HloModule")
    assert hlo.count("\n") == theirs.as_text("hlo").count("\n")
    for lowered in (ours, theirs):
        for method in (lowered.compiler_ir, lowered.as_text):
            with pytest.raises(ValueError, match="unknown dialect: foo"):
                method("foo")
