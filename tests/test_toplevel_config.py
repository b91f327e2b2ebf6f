"""JAX's configuration context managers, runtime names and small modules at fluxion's top level,
each checked against JAX (the oracle) for values, exception classes and messages."""
import logging
import sys
import typing
import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from _eight_devices import run_on_8_devices

BOTH = pytest.mark.parametrize("lib", ["fluxion", "jax"])


def _mods(lib):
    return (fluxion, jnp) if lib == "fluxion" else (jax, jjnp)


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares what each library raises
        return type(e).__name__, str(e)
    return None


# ---------------------------------------------------------------------------------------------
# numpy_rank_promotion

@pytest.mark.parametrize("case", [
    lambda np_, a, b: np_.add(a, b),
    lambda np_, a, b: a * b,
    lambda np_, a, b: np_.maximum(a, b),
    lambda np_, a, b: np_.arctan2(a, b),
    lambda np_, a, b: a - b,
    lambda np_, a, b: a / b,
    lambda np_, a, b: a == b,
    lambda np_, a, b: a ** b,
], ids=["add", "mul", "maximum", "arctan2", "sub", "div", "eq", "pow"])
@pytest.mark.parametrize("shapes", [((3,), (2, 3)), ((1,), (2, 3))])
def test_rank_promotion_raise_matches_jax(case, shapes):
    outs = []
    for lib in ("fluxion", "jax"):
        mod, np_ = _mods(lib)
        a, b = np_.ones(shapes[0]), np_.ones(shapes[1])
        with mod.numpy_rank_promotion("raise"):
            outs.append(_raised(lambda: case(np_, a, b)))
    assert outs[0] is not None and outs[0] == outs[1]
    assert outs[0][0] == "ValueError" and "jax_numpy_rank_promotion='raise'" in outs[0][1]


@BOTH
def test_rank_promotion_allows_scalars_equal_ranks_and_where(lib):
    mod, np_ = _mods(lib)
    with mod.numpy_rank_promotion("raise"):
        assert np_.ones(3) + np_.ones(()) is not None
        assert (np_.ones((1, 3)) + np_.ones((2, 3))).shape == (2, 3)
        assert (np_.ones(3) + 1.0).shape == (3,)
        assert np_.where(np_.ones(3) > 0, np_.ones((2, 3)), 0.0).shape == (2, 3)


def test_rank_promotion_warn_matches_jax():
    messages = []
    for lib in ("fluxion", "jax"):
        mod, np_ = _mods(lib)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with mod.numpy_rank_promotion("warn"):
                out = np_.ones(3) - np_.ones((2, 3))
        np.testing.assert_array_equal(np.asarray(out), np.zeros((2, 3)))
        messages.append([(x.category, str(x.message)) for x in w])
    assert len(messages[0]) == 1 and messages[0] == messages[1]
    assert "subtract on shapes (3,) (2, 3)" in messages[0][0][1]


def test_rank_promotion_is_part_of_cache_keys():
    """A function run (eagerly and jitted) with 'allow' must raise once 'raise' is set, and run
    again after: the flag is in every cache key."""
    f = fluxion.jit(lambda a, b: a * b)
    a, b = jnp.ones(3), jnp.ones((2, 3))
    for _ in range(2):
        assert f(a, b).shape == (2, 3) and (a + b).shape == (2, 3)
        with fluxion.numpy_rank_promotion("raise"):
            with pytest.raises(ValueError, match="multiply on shapes"):
                f(a, b)
            with pytest.raises(ValueError, match="add on shapes"):
                a + b
    fluxion.config.update("jax_numpy_rank_promotion", "raise")
    try:
        with pytest.raises(ValueError, match="rank_promotion"):
            f(a, b)
        assert fluxion.config.jax_numpy_rank_promotion == "raise"
        assert fluxion.numpy_rank_promotion.value == "raise"
    finally:
        fluxion.config.update("jax_numpy_rank_promotion", "allow")
    assert f(a, b).shape == (2, 3)


@BOTH
def test_bad_flag_values_raise_like_jax(lib):
    mod, _ = _mods(lib)
    with pytest.raises(ValueError, match=r"new enum value must be in \['allow', 'warn', 'raise'\]"):
        mod.config.update("jax_numpy_rank_promotion", "foo")
    with pytest.raises(ValueError, match="new enum value must be in"):
        with mod.numpy_rank_promotion("foo"):
            pass
    with pytest.raises(ValueError, match="is not a valid NumpyDtypePromotion"):
        mod.config.update("jax_numpy_dtype_promotion", "foo")
    with pytest.raises(ValueError, match="new enum value must be None or in"):
        mod.config.update("jax_default_matmul_precision", "foo")
    with pytest.raises(ValueError, match="new enum value must be in"):
        with mod.default_prng_impl("foo"):
            pass
    assert mod.config.jax_numpy_rank_promotion == "allow"


def test_enum_flag_errors_print_the_value_as_jax():
    for name in ("jax_numpy_rank_promotion", "jax_logging_level"):
        messages = []
        for mod in (fluxion, jax):
            with pytest.raises(ValueError) as err:
                mod.config.update(name, "LOUD")
            messages.append(str(err.value))
        assert messages[0] == messages[1]


@BOTH
def test_logging_level_sets_the_library_logger_as_jax(lib):
    mod, _ = _mods(lib)
    logger = logging.getLogger(lib)
    level, handlers = logger.level, list(logger.handlers)
    try:
        assert mod.config.jax_logging_level == "NOTSET"
        mod.config.update("jax_logging_level", "DEBUG")
        assert logger.level == logging.DEBUG and len(logger.handlers) == len(handlers) + 1
        mod.config.update("jax_logging_level", None)  # the handler goes, the level stays
        assert logger.level == logging.DEBUG and len(logger.handlers) == len(handlers)
    finally:
        mod.config.update("jax_logging_level", None)
        mod.config.update("jax_logging_level", "NOTSET")
        logger.setLevel(level)
    # accepted (fluxion mocks no GPU topology)
    mod.config.update("jax_mock_gpu_topology", "4x8x1")
    mod.config.update("jax_mock_gpu_topology", "")


@BOTH
def test_platform_name_is_accepted_as_jax(lib):
    """`jax_platform_name` (deprecated in JAX) names the default platform; set here after
    the first computation, it changes nothing, as in JAX."""
    mod, np_ = _mods(lib)
    mod.config.update("jax_platform_name", "cpu")
    try:
        assert mod.default_backend() == "cpu"
        np.testing.assert_array_equal(np_.ones(2) + 1, [2.0, 2.0])
    finally:
        mod.config.update("jax_platform_name", "")


# ---------------------------------------------------------------------------------------------
# numpy_dtype_promotion

_STRICT_CASES = {
    "int32+float32": lambda np_: np_.ones(3, np_.int32) + np_.ones(3, np_.float32),
    "int32+weak float": lambda np_: np_.ones(3, np_.int32) + 1.0,
    "float32+weak int": lambda np_: (np_.ones(3, np_.float32) + 1).dtype,
    "int32+weak int": lambda np_: (np_.ones(3, np_.int32) + 1).dtype,
    "float16+weak float": lambda np_: (np_.ones(3, np_.float16) + 1.0).dtype,
    "bool+int32": lambda np_: np_.ones(3, bool) + np_.ones(3, np_.int32),
    "bool+weak int": lambda np_: np_.ones(3, bool) + 1,
    "int8+int16": lambda np_: np_.ones(3, np_.int8) + np_.ones(3, np_.int16),
    "promote_types": lambda np_: np_.promote_types(np_.int8, np_.int16),
    "result_type": lambda np_: np_.result_type(np_.int8, np_.int16),
    "result_type weak": lambda np_: np_.result_type(1, 2.0),
    "float32*weak complex": lambda np_: (np_.ones(3) * 1j).dtype,
    "same dtype": lambda np_: (np_.ones(3) * np_.ones(3)).dtype,
}


@pytest.mark.parametrize("name", list(_STRICT_CASES))
def test_strict_dtype_promotion_matches_jax(name):
    results = []
    for lib in ("fluxion", "jax"):
        mod, np_ = _mods(lib)
        with mod.numpy_dtype_promotion("strict"):
            try:
                out = _STRICT_CASES[name](np_)
            except Exception as e:  # noqa: BLE001
                results.append(("raised", type(e).__name__, isinstance(e, ValueError),
                                "jax_numpy_dtype_promotion=strict" in str(e)))
            else:
                results.append(("value", np.dtype(getattr(out, "dtype", out))))
    assert results[0] == results[1]
    if results[0][0] == "raised":
        assert results[0][1:] == ("TypePromotionError", True, True)


def test_strict_dtype_promotion_error_class_and_cache_keys():
    f = fluxion.jit(lambda a, b: a * b)
    a, b = jnp.ones(3), jnp.ones(3, jnp.int32)
    assert f(a, b).dtype == np.float32 and (a + b).dtype == np.float32
    with fluxion.numpy_dtype_promotion("strict"):
        with pytest.raises(fluxion.dtypes.TypePromotionError, match="Input dtypes"):
            f(a, b)
        with pytest.raises(fluxion.dtypes.TypePromotionError):
            a + b
    assert f(a, b).dtype == np.float32 and (a + b).dtype == np.float32


# ---------------------------------------------------------------------------------------------
# default_matmul_precision

@pytest.mark.parametrize("name,expected", [("highest", "HIGHEST"), ("float32", "HIGHEST"),
                                           ("tensorfloat32", "HIGH"), ("bfloat16", "DEFAULT")])
def test_default_matmul_precision_in_jaxpr_and_stablehlo(name, expected):
    x = np.ones((4, 4), np.float32)

    def params(mod, np_, fun):
        eqn = [e for e in mod.make_jaxpr(fun)(x).jaxpr.eqns if e.primitive.name == "dot_general"][0]
        p = eqn.params["precision"]
        return None if p is None else tuple(str(q).split(".")[-1] for q in p)

    for mod, np_ in (_mods("fluxion"), _mods("jax")):
        with mod.default_matmul_precision(name):
            assert params(mod, np_, lambda a: a @ a) == (expected, expected)
            # An explicit precision wins over the default.
            assert params(mod, np_, lambda a: np_.dot(a, a, precision="highest")) == (
                "HIGHEST", "HIGHEST")
        assert params(mod, np_, lambda a: a @ a) is None
    f = fluxion.jit(lambda a: a @ a)
    assert "precision" not in f.lower(x).as_text()
    with fluxion.default_matmul_precision(name):
        text = f.lower(x).as_text()
        assert f"precision = [{expected}, {expected}]" in text
        np.testing.assert_allclose(np.asarray(f(x)), x @ x)


def test_default_matmul_precision_config_name():
    fluxion.config.update("jax_default_matmul_precision", "highest")
    try:
        jaxpr = fluxion.make_jaxpr(lambda a: a @ a)(np.ones((2, 2), np.float32))
        assert "HIGHEST" in str(jaxpr)
    finally:
        fluxion.config.update("jax_default_matmul_precision", None)
    assert "HIGHEST" not in str(fluxion.make_jaxpr(lambda a: a @ a)(np.ones((2, 2), np.float32)))


# ---------------------------------------------------------------------------------------------
# no_tracing, no_execution, enable_checks

def test_no_execution_raises_like_jax():
    msgs = []
    for mod, np_ in (_mods("fluxion"), _mods("jax")):
        x = np_.ones(3)
        f = mod.jit(lambda a: a * 2)
        f(x)  # cached before the flag is set: must not run either
        np_.sin(x)
        with mod.no_execution(True):
            for fn in (lambda: x + 1, lambda: f(x), lambda: np_.sin(x)):
                err = _raised(fn)
                assert err is not None and err[0] == "RuntimeError", err
                assert "but the no_execution config option is set" in err[1]
                msgs.append(err[1])
        np.testing.assert_array_equal(np.asarray(f(x)), [2, 2, 2])
    assert msgs[1].startswith("JAX tried to execute function jit(")


def test_no_tracing_raises_on_new_traces_only():
    x = jnp.ones(3)
    f = fluxion.jit(lambda a: a * 2)
    f(x)
    with fluxion.no_tracing(True):
        np.testing.assert_array_equal(np.asarray(f(x)), [2, 2, 2])  # cached: runs
        with pytest.raises(RuntimeError, match="re-tracing function .* for `jit`, but "
                                               "'no_tracing' is set"):
            f(jnp.ones(4))
        with pytest.raises(RuntimeError, match="no_tracing"):
            fluxion.jit(lambda a: a + 1)(x)
    with jax.no_tracing(True):  # the oracle raises the same way
        with pytest.raises(RuntimeError, match="for `jit`, but 'no_tracing' is set"):
            jax.jit(lambda a: a + 1)(jjnp.ones(3))
    assert f(jnp.ones(4)).shape == (4,)


def test_enable_checks_type_checks_traced_jaxprs(monkeypatch):
    from fluxion._src import core
    checked = []
    monkeypatch.setattr(core, "check_jaxpr", lambda j: checked.append(j))
    fluxion.jit(lambda a: a + 1)(jnp.ones(2))
    assert not checked
    with fluxion.enable_checks(True):
        fluxion.jit(lambda a: a * 3)(jnp.ones(2))
    assert len(checked) == 1 and "mul" in str(checked[0])


# ---------------------------------------------------------------------------------------------
# allow_f16_reductions

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_allow_f16_reductions(dtype):
    for mod, np_ in (_mods("fluxion"), _mods("jax")):
        x = np_.ones(3, dtype)
        with mod.allow_f16_reductions(False):
            with pytest.raises(ValueError, match=f"reduce_sum on operand "
                                                 f"{'f16' if dtype == 'float16' else 'bf16'}"
                                                 r"\[3\] is not allowed when "
                                                 "jax_allow_f16_reductions=False."):
                mod.lax.reduce(x, np.array(0, dtype), mod.lax.add, (0,))
            # jnp.sum accumulates in float32, and summing over a size-1 axis is allowed.
            assert float(np_.sum(x)) == 3.0
            ones = np_.ones((1, 3), dtype)
            assert mod.lax.reduce(ones, np.array(0, dtype), mod.lax.add, (0,)).shape == (3,)
        assert float(mod.lax.reduce(x, np.array(0, dtype), mod.lax.add, (0,))) == 3.0


# ---------------------------------------------------------------------------------------------
# PRNG flags

def _bits(mod, np_):
    k = mod.random.PRNGKey(42)
    return ([np.asarray(mod.random.split(k, 3)).tolist()]
            + [np.asarray(mod.random.bits(k, (5,), dt)).tolist()
               for dt in (np_.uint8, np_.uint16, np_.uint32)]
            + [np.asarray(mod.random.bits(k, (2, 3), np_.uint8)).tolist(),
               np.asarray(mod.random.bits(k, (7,), np_.uint16)).tolist(),
               np.asarray(mod.random.randint(k, (4,), 0, 100)).tolist(),
               np.asarray(mod.random.fold_in(k, 7)).tolist()])


def test_threefry_partitionable_false_matches_jax():
    outs = []
    for mod, np_ in (_mods("fluxion"), _mods("jax")):
        with mod.threefry_partitionable(False):
            outs.append((_bits(mod, np_),
                         np.asarray(mod.random.normal(mod.random.key(3), (5,)))))
        outs.append((_bits(mod, np_), np.asarray(mod.random.normal(mod.random.key(3), (5,)))))
    assert outs[0][0] == outs[2][0] and outs[1][0] == outs[3][0]
    assert outs[0][0] != outs[1][0]
    np.testing.assert_allclose(outs[0][1], outs[2][1], rtol=1e-6)
    np.testing.assert_allclose(outs[1][1], outs[3][1], rtol=1e-6)


def test_threefry_partitionable_false_64_bit_matches_jax():
    outs = []
    for mod, np_ in (_mods("fluxion"), _mods("jax")):
        with mod.enable_x64(True), mod.threefry_partitionable(False):
            outs.append(np.asarray(mod.random.bits(mod.random.PRNGKey(1), (3,), np_.uint64)))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_legacy_prng_key_matches_jax():
    for mod, np_ in (_mods("fluxion"), _mods("jax")):
        raw = mod.random.PRNGKey(0)
        with mod.legacy_prng_key("error"):
            with pytest.raises(ValueError, match="Legacy uint32 key array passed as key to "
                                                 "jax.random function"):
                mod.random.normal(raw, (2,))
            assert mod.random.normal(mod.random.key(0), (2,)).shape == (2,)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with mod.legacy_prng_key("warn"):
                mod.random.split(raw)
                mod.random.fold_in(raw, 1)
                mod.random.wrap_key_data(raw)
        assert [x.category for x in w] == [UserWarning] * 2
        assert 'set jax_legacy_prng_key="allow"' in str(w[0].message)


def test_enable_custom_prng_matches_jax():
    for mod, np_ in (_mods("fluxion"), _mods("jax")):
        with mod.enable_custom_prng(True):
            k = mod.random.PRNGKey(0)
            assert str(k.dtype) == "key<fry>" and k.shape == ()
            with pytest.warns(FutureWarning, match="Raw arrays as random keys"):
                mod.random.normal(np_.zeros(2, np_.uint32))
        assert mod.random.PRNGKey(0).dtype == np.uint32


def test_default_prng_impl():
    with fluxion.default_prng_impl("threefry2x32"):
        assert fluxion.random.key_impl(fluxion.random.key(0)) == "threefry2x32"
    with fluxion.default_prng_impl("rbg"):
        with pytest.raises(NotImplementedError, match="threefry2x32"):
            fluxion.random.key(0)
        with pytest.raises(NotImplementedError, match="threefry2x32"):
            fluxion.random.PRNGKey(0)
    assert fluxion.default_prng_impl.value == "threefry2x32"


_REUSE_CASES = [
    ("normal twice", lambda r, k: (r.normal(k), r.normal(k))),
    ("bits then uniform", lambda r, k: (r.bits(k), r.uniform(k))),
    ("bits twice", lambda r, k: (r.bits(k), r.bits(k))),  # JAX names random_bits here
    ("uniform then bits", lambda r, k: (r.uniform(k), r.bits(k))),
    ("split twice", lambda r, k: (r.split(k), r.split(k))),
    ("choice then permutation", lambda r, k: (r.choice(k, 5), r.permutation(k, 5))),
    ("fold_in twice", lambda r, k: (r.fold_in(k, 1), r.fold_in(k, 1))),
    ("key_data then normal", lambda r, k: (r.key_data(k), r.normal(k))),
    ("key_impl then normal", lambda r, k: (r.key_impl(k), r.normal(k))),
    ("clone", lambda r, k: (r.normal(r.clone(k)), r.normal(k))),
    ("raw keys", lambda r, k: (r.normal(r.PRNGKey(0)), r.normal(r.PRNGKey(0)))),
]


@pytest.mark.parametrize("name", [c[0] for c in _REUSE_CASES])
def test_debug_key_reuse_eager_matches_jax(name):
    case = dict(_REUSE_CASES)[name]
    results = []
    for mod in (fluxion, jax):
        with mod.debug_key_reuse(True):
            err = _raised(lambda: case(mod.random, mod.random.key(0)))
        results.append(err if err is None else (err[0], err[1].splitlines()[0]))
    assert results[0] == results[1]
    if results[0] is not None:
        assert results[0][0] == "KeyReuseError"
        assert results[0][1].startswith("Previously-consumed key passed to ")


def test_debug_key_reuse_of_bits_under_disable_jit_names_random_bits():
    messages = []
    for mod in (fluxion, jax):
        key = mod.random.key(0)
        with mod.debug_key_reuse(True), mod.disable_jit():
            mod.random.bits(key)
            messages.append(_raised(lambda: mod.random.bits(key)))
    assert messages[0][0] == "KeyReuseError"
    assert messages[0][1].splitlines()[0] == messages[1][1].splitlines()[0]


def test_debug_key_reuse_each_sampler_consumes_once():
    """Every sampler takes a fresh key without a false KeyReuseError (samplers calling others
    internally must not consume the key twice)."""
    r = fluxion.random
    samplers = [
        lambda k: r.uniform(k), lambda k: r.normal(k), lambda k: r.bernoulli(k),
        lambda k: r.randint(k, (), 0, 3), lambda k: r.choice(k, 4), lambda k: r.permutation(k, 4),
        lambda k: r.gamma(k, 2.0), lambda k: r.beta(k, 2.0, 3.0), lambda k: r.dirichlet(k, jnp.ones(3)),
        lambda k: r.categorical(k, jnp.zeros(3)), lambda k: r.poisson(k, 2.0),
        lambda k: r.truncated_normal(k, -1.0, 1.0), lambda k: r.gumbel(k), lambda k: r.laplace(k),
        lambda k: r.exponential(k), lambda k: r.cauchy(k), lambda k: r.t(k, 3.0),
        lambda k: r.multivariate_normal(k, jnp.zeros(2), jnp.eye(2)), lambda k: r.orthogonal(k, 2),
        lambda k: r.ball(k, 2), lambda k: r.binomial(k, 5, 0.5), lambda k: r.geometric(k, 0.5),
        lambda k: r.rademacher(k, (2,)), lambda k: r.maxwell(k), lambda k: r.weibull_min(k, 1., 1.),
    ]
    with fluxion.debug_key_reuse(True):
        for i, sample in enumerate(samplers):
            k = r.key(i)
            sample(k)
            with pytest.raises(fluxion.errors.KeyReuseError):
                sample(k)
            fluxion.make_jaxpr(sample)(r.key(i))  # once inside a trace: no error
            with pytest.raises(fluxion.errors.KeyReuseError, match="already consumed"):
                fluxion.make_jaxpr(lambda k: (sample(k), sample(k)))(r.key(i))


_TRACED_REUSE_CASES = [
    ("normal then uniform", lambda m, k: (m.random.normal(k), m.random.uniform(k))),
    ("split then normal", lambda m, k: (m.random.split(k), m.random.normal(k))),
    ("split key reused", lambda m, k: (lambda k2: (m.random.normal(k2), m.random.bits(k2)))(
        m.random.split(k)[0])),
    ("normal then split", lambda m, k: m.random.normal(k) + m.vmap(m.random.normal)(
        m.random.split(k, 2)).sum()),
    ("cond operand", lambda m, k: m.lax.cond(True, m.random.normal, m.random.uniform, k)),
    ("cond closure", lambda m, k: m.lax.cond(True, lambda: m.random.normal(k),
                                             lambda: m.random.uniform(k))),
    ("key_data then normal", lambda m, k: (m.random.normal(k), m.random.key_data(k))),
    ("fold_in twice", lambda m, k: (m.random.fold_in(k, 1), m.random.fold_in(k, 2))),
    ("split three", lambda m, k: m.random.split(k, 3)),
    ("vmap body reuse", lambda m, k: m.vmap(lambda kk: (m.random.normal(kk), m.random.normal(kk)))(
        m.random.split(k, 2))),
    ("scan carry reuse", lambda m, k: m.lax.scan(
        lambda c, _: (m.random.split(c)[0], m.random.normal(c)), k, None, length=3)),
]


_JIT_CONSUMES_CASES = [
    ("jit then eager", lambda m, k: (m.jit(m.random.normal)(k), m.random.uniform(k))),
    ("eager then jit", lambda m, k: (m.random.normal(k), m.jit(m.random.normal)(k))),
    ("jit twice, key second", lambda m, k: [m.jit(lambda x, kk: m.random.normal(kk) + x)(1.0, k)
                                            for _ in range(2)]),
    ("jit of a dict", lambda m, k: [m.jit(lambda d: m.random.normal(d["k"]))({"k": k})
                                    for _ in range(2)]),
    ("jit reading key_data", lambda m, k: (m.jit(m.random.key_data)(k), m.random.normal(k))),
    ("nested jit", lambda m, k: m.jit(lambda kk: (m.jit(m.random.normal)(kk),
                                                  m.random.uniform(kk)))(k)),
]


@pytest.mark.parametrize("name", [c[0] for c in _JIT_CONSUMES_CASES])
def test_debug_key_reuse_jit_consumes_its_arguments_as_jax(name):
    """A jitted function consumes the keys its trace consumed, every time it is called."""
    case = dict(_JIT_CONSUMES_CASES)[name]
    results = []
    for mod in (fluxion, jax):
        with mod.debug_key_reuse(True):
            err = _raised(lambda: case(mod, mod.random.key(0)))
        results.append(err if err is None else (err[0], err[1].splitlines()[0]))
    assert results[0] == results[1]


@pytest.mark.parametrize("name", [c[0] for c in _TRACED_REUSE_CASES])
def test_debug_key_reuse_inside_jit_matches_jax(name):
    """A key consumed twice in one traced function raises in jit, as JAX's jaxpr analysis."""
    case = dict(_TRACED_REUSE_CASES)[name]
    results = []
    for mod in (fluxion, jax):
        with mod.debug_key_reuse(True):
            err = _raised(lambda: mod.jit(lambda k: case(mod, k))(mod.random.key(0)))
        results.append(err if err is None else (err[0], err[1].splitlines()[0]))
    assert results[0] == results[1]


# ---------------------------------------------------------------------------------------------
# Flags accepted with no effect fluxion can show (see docs/differences.md)

_ACCEPTED = {
    "thread_guard": True, "auto_pcast": True, "remove_size_one_mesh_axis_from_type": True,
    "jax2tf_associative_scan_reductions": True, "array_garbage_collection_guard": "log",
}


@pytest.mark.parametrize("name", list(_ACCEPTED))
def test_accepted_flags_set_and_restore_like_jax(name):
    for mod in (fluxion, jax):
        flag = getattr(mod, name)
        before = flag.value
        with flag(_ACCEPTED[name]):
            assert flag.value == _ACCEPTED[name]
            assert getattr(mod.config, name if name.startswith("jax2tf") else f"jax_{name}") == \
                _ACCEPTED[name]
        assert flag.value == before


def test_flag_defaults_match_jax():
    names = ["numpy_rank_promotion", "default_matmul_precision", "enable_checks", "no_tracing",
             "no_execution", "thread_guard", "transfer_guard_device_to_device",
             "threefry_partitionable", "debug_key_reuse", "enable_custom_prng",
             "default_prng_impl", "allow_f16_reductions", "array_garbage_collection_guard",
             "auto_pcast", "remove_size_one_mesh_axis_from_type",
             "jax2tf_associative_scan_reductions"]
    for name in names:
        assert getattr(fluxion, name).value == getattr(jax, name).value, name
    assert fluxion.numpy_dtype_promotion.value == jax.numpy_dtype_promotion.value.value
    assert fluxion.legacy_prng_key.value == jax.legacy_prng_key.value.value


def test_transfer_guard_device_to_device_on_8_devices():
    script = (
        "import fluxion as jax, fluxion.numpy as jnp\n"
        "d = jax.devices(); x = jax.device_put(jnp.ones(3), d[0])\n"
        "with jax.transfer_guard_device_to_device('disallow'):\n"
        "    assert jax.device_put(x, d[1]).devices() == {d[1]}\n"
        "for guard in (jax.transfer_guard_device_to_device, jax.transfer_guard):\n"
        "    with guard('disallow_explicit'):\n"
        "        try:\n"
        "            jax.device_put(x, d[1])\n"
        "        except RuntimeError as e:\n"
        "            assert 'Disallowed device-to-device transfer' in str(e), e\n"
        "        else:\n"
        "            raise AssertionError('no error')\n"
        "print('ok', jax.device_put(x, d[2]).devices() == {d[2]})\n")
    proc = run_on_8_devices(["-c", script], timeout=300)
    assert proc.returncode == 0 and "ok True" in proc.stdout, proc.stderr[-3000:]


# ---------------------------------------------------------------------------------------------
# Runtime names and small modules

@BOTH
def test_device_shard_and_copy_to_host_async(lib):
    mod, np_ = _mods(lib)
    x = np_.arange(6.0).reshape(2, 3)
    assert isinstance(mod.devices()[0], mod.Device)
    shard = x.addressable_shards[0]
    assert isinstance(shard, mod.Shard) and shard.replica_id == 0
    assert shard.device == mod.devices()[0]
    tree = {"a": x, "b": 3}
    assert mod.copy_to_host_async(tree) is tree
    np.testing.assert_array_equal(np.asarray(tree["a"]), np.arange(6.0).reshape(2, 3))


@BOTH
def test_array_clone_is_ready_platform_and_removed_buffers(lib):
    mod, np_ = _mods(lib)
    x = np_.arange(3.0)
    c = x.clone()
    assert c is not x and c.unsafe_buffer_pointer() == x.unsafe_buffer_pointer()
    assert x.is_ready() is True and x.platform() == "cpu"
    assert x.traceback is None or hasattr(x.traceback, "frames")
    for name in ("device_buffer", "device_buffers"):
        with pytest.raises(AttributeError, match="deprecated"):
            getattr(x, name)
    x.delete()
    assert c.is_deleted()  # a clone shares the buffer
    if lib is fluxion:  # JAX's platform() crashes the process on a deleted array
        assert x.platform() == "cpu"


@BOTH
def test_dlpack(lib):
    mod, np_ = _mods(lib)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = mod.dlpack.from_dlpack(a)
    np.testing.assert_array_equal(np.asarray(x), a)
    y = mod.dlpack.from_dlpack(x)
    np.testing.assert_array_equal(np.asarray(y), a)
    np.testing.assert_array_equal(np.from_dlpack(x), a)
    assert mod.dlpack.is_supported_dtype(np.float32) and mod.dlpack.is_supported_dtype(np_.bfloat16)
    assert not mod.dlpack.is_supported_dtype(np_.int4)
    with pytest.raises(TypeError, match="Expected a string or dtype-like object"):
        mod.dlpack.is_supported_dtype(None)


@BOTH
def test_stages_and_typing(lib):
    mod, _ = _mods(lib)
    f = mod.jit(lambda a: a + 1)
    assert isinstance(f, mod.stages.Wrapped)
    assert isinstance(f.trace(1.0), mod.stages.Traced)
    lowered = f.lower(1.0)
    assert isinstance(lowered, mod.stages.Lowered)
    assert isinstance(lowered.compile(), mod.stages.Compiled)
    assert not isinstance(3, mod.stages.Wrapped)
    args = typing.get_args(mod.typing.ArrayLike)
    assert mod.Array in args and np.ndarray in args and float in args
    assert np.dtype in typing.get_args(mod.typing.DTypeLike)


def test_version_and_lib():
    import fluxion.lib  # noqa: F401 - importable, as jax.lib
    assert fluxion.version.__version__ == fluxion.__version__
    assert fluxion.version._version == fluxion.__version__
    assert fluxion.version.jax_api_version == jax.__version__
    assert isinstance(fluxion.version.__version_info__, tuple)


def test_monitoring_records_compile_events():
    events, durations, spans = [], [], []

    def on_event(e, **kw):
        events.append(e)

    def on_duration(e, d, **kw):
        durations.append((e, d, kw))

    def on_span(e, start, end, **kw):
        spans.append((e, end - start))

    fluxion.monitoring.register_event_listener(on_event)
    fluxion.monitoring.register_event_duration_secs_listener(on_duration)
    fluxion.monitoring.register_event_time_span_listener(on_span)
    try:
        def my_function(a):
            return a * 5 + 2
        fluxion.jit(my_function)(jnp.ones(11))
        fluxion.monitoring.record_event("/my/event")
        fluxion.monitoring.record_event_duration_secs("/my/duration", 1.5, tag="t")
    finally:
        fluxion.monitoring.unregister_event_listener(on_event)
        fluxion.monitoring.unregister_event_duration_listener(on_duration)
        fluxion.monitoring.unregister_event_time_span_listener(on_span)
    names = {(e, kw.get("fun_name")) for e, _, kw in durations}
    assert ("/jax/core/compile/jaxpr_trace_duration", "my_function") in names
    assert ("/jax/core/compile/backend_compile_duration", "jit_my_function") in names
    assert ("/jax/core/compile/jaxpr_to_mlir_module_duration", "jit_my_function") in names
    assert all(d >= 0 for _, d, _ in durations) and all(d >= 0 for _, d in spans)
    assert "/my/event" in events and ("/my/duration", 1.5, {"tag": "t"}) in durations
    n = len(events)
    fluxion.monitoring.record_event("/after")
    assert len(events) == n  # unregistered
    with pytest.raises(AssertionError):
        fluxion.monitoring.unregister_event_listener(on_event)


def test_monitoring_api_matches_jax():
    public = {n for n in dir(jax.monitoring) if not n.startswith("_") and
              callable(getattr(jax.monitoring, n))}
    assert public <= set(dir(fluxion.monitoring))


def test_compilation_cache_set_cache_dir_and_its_events(tmp_path):
    from fluxion.experimental.compilation_cache import compilation_cache as cc
    saved = {k: getattr(fluxion.config, k) for k in ("enable_compilation_cache",
                                                     "compilation_cache_dir")}
    events = []
    listener = lambda e, **kw: events.append(e)  # noqa: E731
    fluxion.monitoring.register_event_listener(listener)
    fluxion.config.update("enable_compilation_cache", True)
    cc.set_cache_dir(str(tmp_path))
    try:
        assert fluxion.config.compilation_cache_dir == str(tmp_path)
        fluxion.jit(lambda a: a * 7 - 3)(jnp.ones(13))
        assert any(p.is_file() for p in tmp_path.rglob("*"))  # the executable was written
        assert "/jax/compilation_cache/compile_requests_use_cache" in events
        assert "/jax/compilation_cache/cache_misses" in events
    finally:
        fluxion.monitoring.unregister_event_listener(listener)
        for k, v in saved.items():
            fluxion.config.update(k, v)


@BOTH
def test_dtypes_itemsize_bits_and_extended(lib):
    mod, np_ = _mods(lib)
    bits = [mod.dtypes.itemsize_bits(d) for d in (np_.int4, np_.uint4, bool, "float32",
                                                   np_.bfloat16, np_.complex64, np_.float8_e4m3fn,
                                                   np.int64, np_.int2)]
    assert bits == [4, 4, 8, 32, 16, 64, 8, 64, 2]
    with pytest.raises(ValueError, match="dtype cannot be None"):
        mod.dtypes.itemsize_bits(None)
    k = mod.random.key(0)
    assert mod.dtypes.issubdtype(k.dtype, mod.dtypes.prng_key)
    assert mod.dtypes.issubdtype(k.dtype, mod.dtypes.extended)
    assert np_.issubdtype(k.dtype, mod.dtypes.prng_key)
    assert not mod.dtypes.issubdtype(k.dtype, np.floating)
    assert not np_.issubdtype(np.float32, mod.dtypes.prng_key)
    assert not np_.issubdtype(mod.dtypes.extended, mod.dtypes.prng_key)
    assert issubclass(mod.dtypes.prng_key, mod.dtypes.extended)


@BOTH
def test_debug_log(lib, caplog):
    mod, np_ = _mods(lib)

    @mod.jit
    def f(x):
        mod.debug.log("x is {}", x)
        return x + 1

    with caplog.at_level(logging.INFO):
        f(np_.arange(3))
        mod.effects_barrier()
    records = [r for r in caplog.records if r.getMessage() == "x is [0 1 2]"]
    assert len(records) == 1 and records[0].levelno == logging.INFO
    if lib == "fluxion":  # JAX's record here says "(unknown file)"
        assert records[0].pathname == __file__


@BOTH
def test_abstract_device(lib):
    mod, _ = _mods(lib)
    d = mod.sharding.AbstractDevice(device_kind="cpu", num_cores=None, platform="cpu")
    assert repr(d) == "AbstractDevice(device_kind=cpu, num_cores=None, platform=cpu)"
    assert d == mod.sharding.AbstractDevice("cpu", None, "cpu")


def test_explain_cache_misses_names_the_changed_flag(caplog):
    f = fluxion.jit(lambda a: a + 1)
    x = jnp.ones(3)
    f(x)
    with fluxion.explain_cache_misses(True), caplog.at_level(logging.WARNING, logger="fluxion"):
        with fluxion.numpy_rank_promotion("raise"):
            f(x)
        with fluxion.enable_x64(True), fluxion.default_matmul_precision("highest"):
            f(x)
    msgs = [r.getMessage() for r in caplog.records if "TRACING CACHE MISS" in r.getMessage()]
    assert len(msgs) == 2, msgs
    assert "numpy_rank_promotion changed from allow to raise" in msgs[0]
    assert "enable_x64 changed from False to True" in msgs[1]
    assert "default_matmul_precision changed from None to highest" in msgs[1]


def test_parse_flags_with_absl(monkeypatch):
    # JAX's absl-style test programs call config.parse_flags_with_absl() at import.
    monkeypatch.setattr(sys, "argv", ["prog", "--jax_numpy_rank_promotion=raise",
                                      "--jax_not_a_flag=3", "--nojax_debug_nans",
                                      "--fluxion_debug_infs=true", "--", "--jax_enable_x64"])
    try:
        fluxion.config.parse_flags_with_absl()
        assert fluxion.config.numpy_rank_promotion == "raise"
        assert fluxion.config.debug_infs is True and fluxion.config.debug_nans is False
        assert fluxion.config.enable_x64 is False  # (after "--": not ours)
    finally:
        fluxion.config.update("numpy_rank_promotion", "allow")
        fluxion.config.update("debug_infs", False)


def test_jax_flags_jax_programs_set_are_accepted_with_jaxs_values():
    names = ["jax_use_shardy_partitioner", "jax_raise_persistent_cache_errors",
             "jax_persistent_cache_enable_xla_caches",
             "jax_compilation_cache_include_metadata_in_key",
             "jax_compilation_cache_check_contents", "jax_pprint_use_color",
             "jax_include_full_tracebacks_in_locations", "jax_traceback_in_locations_limit",
             "jax_optimization_level", "jax_memory_fitting_level",
             "jax_exec_time_optimization_effort", "jax_memory_fitting_effort", "jax_use_magma",
             "jax_persistent_cache_min_entry_size_bytes", "jax_compilation_cache_max_size"]
    for name in names:
        default = getattr(jax.config, name)
        assert getattr(fluxion.config, name[4:]) == default, name
        fluxion.config.update(name, default)
    with pytest.raises(AttributeError, match="Unrecognized config option"):
        fluxion.config.update("jax_scan3", True)
