"""The last small public names of JAX's modules, each against JAX: errors, debug effects,
memory spaces, ManualAxisType, remat policy answers and print_saved_residuals, checkify's
debug_check / init_error, key_reuse, custom_dce, and scipy.stats distribution modules."""
import contextlib
import functools
import importlib
import io
import pickle
import re

import jax
import jax.ad_checkpoint
import jax.experimental.checkify
import jax.numpy as jnp_jax
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import ad_checkpoint, debug, errors, memory, sharding
from fluxion._src import effects
from fluxion.experimental import checkify
from fluxion.experimental.custom_dce import custom_dce


# ---------------------------------------------------------------------------------------------
# errors

def test_index_error_classes_match_jax():
    assert issubclass(errors.JAXIndexError, IndexError)
    assert issubclass(errors.NonConcreteBooleanIndexError, errors.JAXIndexError)
    assert [c.__name__ for c in errors.NonConcreteBooleanIndexError.__mro__[:2]] == \
        [c.__name__ for c in jax.errors.NonConcreteBooleanIndexError.__mro__[:2]]


@pytest.mark.parametrize("case", ["mask", "update", "scalar"])
def test_traced_boolean_mask_raises_as_jax(case):
    def run(lib, np_):
        x = np_.arange(-5, 5)
        if case == "mask":
            return lib.jit(lambda x: x[x > 0])(x)
        if case == "update":
            return lib.jit(lambda x: x.at[x > 0].set(0))(x)
        return lib.jit(lambda x, m: x[m])(x, True)

    with pytest.raises(jax.errors.NonConcreteBooleanIndexError) as theirs:
        run(jax, jnp_jax)
    with pytest.raises(errors.NonConcreteBooleanIndexError) as ours:
        run(fluxion, jnp)
    assert str(ours.value).splitlines()[0] == str(theirs.value).splitlines()[0]


def test_errors_dir_lists_jax_names():
    theirs = {n for n in dir(jax.errors) if not n.startswith("_")}
    assert theirs <= set(dir(errors))


# ---------------------------------------------------------------------------------------------
# debug effects

@pytest.mark.parametrize("ordered", [False, True])
def test_debug_print_carries_debug_effect(ordered):
    def f(x):
        debug.print("x={}", x, ordered=ordered)
        return x

    def g(x):
        jax.debug.print("x={}", x, ordered=ordered)
        return x

    ours = effects.jaxpr_effects(fluxion.make_jaxpr(f)(1.0))
    theirs = jax.make_jaxpr(g)(1.0).effects
    want_ours = debug.OrderedDebugEffect if ordered else debug.DebugEffect
    want_theirs = jax.debug.OrderedDebugEffect if ordered else jax.debug.DebugEffect
    assert [type(e).__name__ for e in ours] == [type(e).__name__ for e in theirs]
    assert all(isinstance(e, want_ours) for e in ours) and ours
    assert all(isinstance(e, want_theirs) for e in theirs)


# ---------------------------------------------------------------------------------------------
# memory spaces and ManualAxisType

def test_memory_space_members_and_device_put():
    assert fluxion.memory is memory  # `fluxion.memory.Space` after `import fluxion`, as in JAX
    assert [m.name for m in memory.Space] == [m.name for m in jax.memory.Space]
    assert repr(memory.Space.Host) == repr(jax.memory.Space.Host)
    x = np.arange(4.0, dtype=np.float32)
    for space in ("Device", "Host"):
        got = fluxion.device_put(x, getattr(memory.Space, space))
        want = jax.device_put(x, getattr(jax.memory.Space, space))
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(ValueError, match="Any"):
        fluxion.device_put(x, memory.Space.Any)


def test_manual_axis_type_matches_jax():
    M, JM = sharding.ManualAxisType, jax.sharding.ManualAxisType
    a = M(varying=frozenset({"x"}), reduced={"y"})
    assert a is M(varying={"x"}, reduced=frozenset({"y"}))  # interned
    assert pickle.loads(pickle.dumps(a)) is a
    assert repr(a) == repr(JM(varying=frozenset({"x"}), reduced=frozenset({"y"})))
    assert (a.varying, a.unreduced, a.reduced) == (frozenset("x"), frozenset(), frozenset("y"))
    for kw in [dict(varying=frozenset("x"), unreduced=frozenset("x")),
               dict(varying=frozenset("x"), reduced=frozenset("x"))]:
        with pytest.raises(ValueError) as theirs:
            JM(**kw)
        with pytest.raises(ValueError) as ours:
            M(**kw)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(AttributeError):
        a.varying = frozenset()


# ---------------------------------------------------------------------------------------------
# ad_checkpoint: print_saved_residuals and policy answers

def _model(lib, np_, ac):
    def f(x, y):
        a = np_.sin(x)
        b = ac.checkpoint_name(np_.cos(a) * y, "b")
        c = ac.checkpoint_name(np_.exp(b), "c")
        return np_.sum(np_.dot(c, b.T))
    return f


def _policies(lib, ac):
    cp = lib.checkpoint_policies
    return {
        "none": None,
        "default": "checkpoint",
        "names": cp.save_only_these_names("b"),
        "enum": lambda prim, *_, **__: ac.Saveable if prim.name == "exp" else ac.Recompute,
        "offload": cp.save_and_offload_only_these_names(
            names_which_can_be_saved=["b"], names_which_can_be_offloaded=[],
            offload_src="device", offload_dst="pinned_host"),
        "dots_offload": cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
        "both": cp.save_from_both_policies(cp.save_only_these_names("b"), cp.dots_saveable),
    }


def _saved(lib, np_, ac, policy_key):
    f = _model(lib, np_, ac)
    policy = _policies(lib, ac)[policy_key]
    if policy == "checkpoint":
        f = lib.checkpoint(f)
    elif policy is not None:
        f = lib.checkpoint(f, policy=policy)
    x = np.linspace(0.1, 0.9, 9, dtype=np.float32).reshape(3, 3)
    y = np.ones((3, 3), np.float32)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ac.print_saved_residuals(f, x, y)
    grad = lib.grad(f, argnums=(0, 1))(x, y)
    # where a value comes from: JAX gives no source line under pytest, so compare up to it
    lines = [re.sub(r"(output of \S+|named '\w+') from .*", r"\1", s)
             for s in out.getvalue().splitlines()]
    return lines, [np.asarray(g) for g in grad]


@pytest.mark.parametrize("policy", ["none", "default", "names", "enum", "offload",
                                    "dots_offload", "both"])
def test_print_saved_residuals_matches_jax(policy):
    ours, g_ours = _saved(fluxion, jnp, ad_checkpoint, policy)
    theirs, g_theirs = _saved(jax, jnp_jax, jax.ad_checkpoint, policy)
    assert ours == theirs
    for a, b in zip(g_ours, g_theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_policy_returning_bad_value_raises_type_error():
    f = fluxion.checkpoint(lambda x: jnp.sin(jnp.sin(x)),
                           policy=lambda *_, **__: ad_checkpoint.Offloadable)
    with pytest.raises(TypeError, match="instantiated `Offloadable"):
        fluxion.grad(f)(1.0)
    f = fluxion.checkpoint(lambda x: jnp.sin(jnp.sin(x)), policy=lambda *_, **__: "yes")
    with pytest.raises(TypeError, match="remat policy should be a bool"):
        fluxion.grad(f)(1.0)


def test_recompute_answer_is_not_saved_though_truthy():
    # `Recompute` is a truthy object: a policy answering it must not save the value
    assert bool(ad_checkpoint.Recompute)
    out = io.StringIO()
    f = fluxion.checkpoint(lambda x: jnp.sin(jnp.sin(x)),
                           policy=lambda *_, **__: ad_checkpoint.Recompute)
    with contextlib.redirect_stdout(out):
        ad_checkpoint.print_saved_residuals(f, 1.0)
    assert out.getvalue().splitlines() == ["f32[] from the argument x"]


# ---------------------------------------------------------------------------------------------
# checkify: debug_check, init_error, ErrorCategory

def _debug_checked(lib, np_, ck):
    def f(x):
        ck.debug_check(x > 0, "must be positive, got {}", x)
        return x * 2
    return f


@pytest.mark.parametrize("value", [-1.0, 3.0])
def test_debug_check_as_jax(value):
    results = []
    for lib, np_, ck in [(fluxion, jnp, checkify), (jax, jnp_jax, jax.experimental.checkify)]:
        f = _debug_checked(lib, np_, ck)
        x = np_.float32(value)
        eager, jitted = f(x), lib.jit(f)(x)  # without checkify: dropped
        err, out = lib.jit(ck.checkify(f))(x)
        verr, vout = ck.checkify(lib.vmap(f))(np_.array([1.0, value], np.float32))
        results.append((float(eager), float(jitted), err.get(), float(out), verr.get(),
                        np.asarray(vout), float(lib.grad(f)(x))))
    ours, theirs = results
    for a, b in zip(ours, theirs):
        if isinstance(a, str) or isinstance(b, str):
            assert (a is None) == (b is None)
            assert a.split(" (")[0] == b.split(" (")[0]
        elif a is None or b is None:
            assert a is b
        else:
            np.testing.assert_allclose(a, b)


def test_init_error_and_error_category():
    assert str(checkify.init_error) == str(jax.experimental.checkify.init_error) == "Error(None)"
    assert checkify.init_error.get() is None
    checkify.check_error(checkify.init_error)  # nothing failed: no exception
    err, out = checkify.checkify(lambda x: (checkify.check_error(checkify.init_error), x)[1])(1.0)
    assert err.get() is None and float(out) == 1.0
    assert all(isinstance(k, checkify.ErrorCategory) for k in checkify.all_checks)


# ---------------------------------------------------------------------------------------------
# key_reuse

def test_key_reuse_module_and_eager_reuse_error():
    importlib.import_module("fluxion.experimental.key_reuse")
    for lib in (fluxion, jax):
        with lib.debug_key_reuse(True):
            key = lib.random.key(0)
            lib.random.normal(key)
            with pytest.raises(lib.errors.KeyReuseError):
                lib.random.normal(key)


# ---------------------------------------------------------------------------------------------
# custom_dce

def _prims(jaxpr) -> set:
    from fluxion._src import core
    out = set()
    for eqn in jaxpr.eqns:
        out.add(eqn.primitive.name)
        for sub in core.subjaxprs(eqn.params):
            out |= _prims(sub)
    return out


def _dce_fun(calls):
    @custom_dce
    def f(x, y):
        return jnp.sin(x) * y, x * jnp.cos(y)

    @f.def_dce
    def rule(used_outs, x, y):
        calls.append(tuple(used_outs))
        return (jnp.sin(x) * y if used_outs[0] else None,
                x * jnp.cos(y) if used_outs[1] else None)
    return f


def test_custom_dce_prunes_under_jit():
    calls = []
    f = _dce_fun(calls)
    x, y = np.float32(1.5), np.float32(0.5)
    np.testing.assert_allclose([float(v) for v in f(x, y)],
                               [np.sin(1.5) * 0.5, 1.5 * np.cos(0.5)], rtol=1e-6)
    assert calls == []  # all outputs used: the function itself runs
    both = fluxion.make_jaxpr(lambda x, y: f(x, y))(x, y).jaxpr
    assert {"sin", "cos"} <= _prims(both)
    first = fluxion.make_jaxpr(lambda x, y: f(x, y)[0])(x, y).jaxpr
    assert "sin" in _prims(first) and "cos" not in _prims(first)
    np.testing.assert_allclose(float(fluxion.jit(lambda x, y: f(x, y)[1])(x, y)),
                               1.5 * np.cos(0.5), rtol=1e-6)
    assert (False, True) in calls
    hlo = fluxion.jit(lambda x, y: f(x, y)[1]).lower(x, y).as_text()
    assert "cosine" in hlo and "sine" not in hlo.replace("cosine", "")
    # nothing used: the call disappears
    unused = fluxion.make_jaxpr(lambda x, y: (f(x, y), 2.0)[1])(x, y).jaxpr
    assert "custom_dce_call" not in _prims(unused)


def test_custom_dce_drops_inputs_the_rule_does_not_read():
    @custom_dce
    def g(x, y):
        return x * 2, y * 3

    g.def_dce(lambda used, x, y: (x * 2 if used[0] else None, y * 3 if used[1] else None))
    eqn, = fluxion.make_jaxpr(lambda x, y: g(x, y)[0])(1.0, 2.0).jaxpr.eqns
    assert len(eqn.invars) == 1 and len(eqn.outvars) == 1


def test_custom_dce_vmap_and_grad():
    f = _dce_fun([])
    xs, y = np.linspace(0, 1, 4).astype(np.float32), np.float32(0.5)
    got = fluxion.jit(fluxion.vmap(lambda x, y: f(x, y)[1], (0, None)))(xs, y)
    np.testing.assert_allclose(np.asarray(got), xs * np.cos(0.5), rtol=1e-6)
    got = fluxion.vmap(f, (0, None))(xs, y)
    np.testing.assert_allclose(np.asarray(got[0]), np.sin(xs) * 0.5, rtol=1e-6)
    g = fluxion.jit(fluxion.grad(lambda x, y: f(x, y)[1], argnums=(0, 1)))(np.float32(1.5), y)
    np.testing.assert_allclose([float(v) for v in g], [np.cos(0.5), -1.5 * np.sin(0.5)],
                               rtol=1e-6)


def test_custom_dce_static_argnums_and_errors():
    @functools.partial(custom_dce, static_argnums=(1,))
    def h(x, n):
        return x * n, x + n

    h.def_dce(lambda used, x, n: (x * n if used[0] else None, x + n if used[1] else None))
    assert float(fluxion.jit(lambda x: h(x, 3)[0])(2.0)) == 6.0
    assert float(fluxion.jit(lambda x: h(x, n=3)[1])(2.0)) == 5.0

    @custom_dce
    def k(x):
        return x, x + 1

    with pytest.raises(AttributeError, match="No DCE rule"):
        k(1.0)
    k.def_dce(lambda used, x: (None, x + 1))
    with pytest.raises(ValueError, match="required outputs"):
        fluxion.jit(lambda x: k(x)[0])(1.0)
    k.def_dce(lambda used, x: x)
    with pytest.raises(TypeError, match="structure"):
        fluxion.jit(lambda x: k(x)[0])(1.0)
    k.def_dce(lambda used, x: (x.astype(jnp.int32), None))
    with pytest.raises(TypeError, match="shapes and dtypes"):
        fluxion.jit(lambda x: k(x)[0])(1.0)


# ---------------------------------------------------------------------------------------------
# scipy.stats distribution modules

_DISTRIBUTIONS = sorted(n for n in dir(jax.scipy.stats)
                        if type(getattr(jax.scipy.stats, n)).__name__ == "module")


@pytest.mark.parametrize("name", _DISTRIBUTIONS)
def test_stats_distributions_import_as_modules(name):
    import fluxion.scipy.stats as stats
    ours = importlib.import_module(f"fluxion.scipy.stats.{name}")
    theirs = importlib.import_module(f"jax.scipy.stats.{name}")
    assert ours is getattr(stats, name) and ours.__name__ == f"fluxion.scipy.stats.{name}"
    pub = lambda m: {n for n in dir(m) if not n.startswith("_")}  # noqa: E731
    assert pub(theirs) <= pub(ours)


def test_stats_import_statement_forms():
    import fluxion.scipy.stats.norm as norm
    from fluxion.scipy.stats.t import logpdf
    x = np.linspace(-2, 2, 5).astype(np.float32)
    np.testing.assert_allclose(np.asarray(norm.logpdf(x)),
                               np.asarray(jax.scipy.stats.norm.logpdf(x)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(logpdf(x, 3.0)),
                               np.asarray(jax.scipy.stats.t.logpdf(x, 3.0)), rtol=1e-6)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("fluxion.scipy.stats.no_such_distribution")


# ---------------------------------------------------------------------------------------------
# interpreters.partial_eval: dce_jaxpr and dce_rules

def _two_outputs_primitive(extend_core, pe, np_):
    """A primitive with outputs (2x, sin x) whose DCE rule keeps just the used one."""
    p = extend_core.Primitive("two_outputs")
    p.multiple_results = True
    p.def_impl(lambda x, which: [v for v, w in zip([x * 2, np_.sin(x)], which) if w])
    p.def_abstract_eval(lambda x, which: [x] * sum(which))
    calls = []

    def rule(used, eqn):
        calls.append(list(used))
        which = tuple(u for u in used)
        return [True], eqn.replace(outvars=[v for v, u in zip(eqn.outvars, used) if u],
                                   params={"which": which})
    pe.dce_rules[p] = rule
    return p, calls


@pytest.mark.parametrize("used", [[True, False, False], [False, True, True], [False, False, True]])
def test_dce_jaxpr_and_dce_rules_match_jax(used):
    import jax.extend.core as jax_core
    from jax.interpreters import partial_eval as jax_pe
    import fluxion.extend.core as flux_core
    from fluxion.interpreters import partial_eval as flux_pe

    def results(lib, extend_core, pe, np_):
        p, calls = _two_outputs_primitive(extend_core, pe, np_)
        try:
            def f(x, y, z):
                a, b = p.bind(x, which=(True, True))
                return a, b * y, z
            jaxpr = lib.make_jaxpr(f)(1.0, 2.0, 3.0).jaxpr
            calls.clear()  # fluxion's tracing runs DCE too (all outputs used)
            new, used_inputs = pe.dce_jaxpr(jaxpr, used, instantiate=[False, False, True])
            eqns = [(e.primitive.name, dict(e.params).get("which")) for e in new.eqns]
            return used_inputs, len(new.invars), len(new.outvars), eqns, calls
        finally:
            del pe.dce_rules[p]

    ours = results(fluxion, flux_core, flux_pe, jnp)
    theirs = results(jax, jax_core, jax_pe, jnp_jax)
    assert ours == theirs


def test_offloadable_answer_saves_in_place():
    # fluxion has one memory space per device: an offloaded value is saved where it is (JAX
    # lists a device_put to host memory instead); the gradient is JAX's
    def run(lib, np_, ac):
        f = lib.checkpoint(_model(lib, np_, ac), policy=lib.checkpoint_policies.
                           save_and_offload_only_these_names(
                               names_which_can_be_saved=[], names_which_can_be_offloaded=["c"],
                               offload_src="device", offload_dst="pinned_host"))
        x = np.linspace(0.1, 0.9, 9, dtype=np.float32).reshape(3, 3)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            ac.print_saved_residuals(f, x, x)
        return out.getvalue(), np.asarray(lib.grad(f)(x, x))

    printed, g_ours = run(fluxion, jnp, ad_checkpoint)
    assert "named 'c'" in printed
    np.testing.assert_allclose(g_ours, run(jax, jnp_jax, jax.ad_checkpoint)[1], rtol=1e-5)


_CELL = '''
def chain(funs):
    def f(x):
        for fun in funs:
            x = fun(x)
        return x
    return f

def g(W, x):
    y = np_.dot(W, x)
    return np_.sin(y)
'''


def _saved_from_cell(lib, np_, ac):
    """print_saved_residuals of functions defined in a notebook-like '<cell>'."""
    namespace = {"np_": np_}
    exec(compile(_CELL, "<cell>", "exec"), namespace)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ac.print_saved_residuals(namespace["chain"]([np_.sin] * 2), 3.0)
        ac.print_saved_residuals(namespace["g"], np.ones((2, 2), np.float32),
                                 np.ones(2, np.float32))
    return out.getvalue().splitlines()


def test_saved_residual_locations_have_column_and_qualified_name_as_in_jax():
    # JAX's lines, printed by JAX 0.10.2 outside pytest (under pytest it prints no location)
    theirs = _saved_from_cell(jax, jnp_jax, jax.ad_checkpoint)
    assert _saved_from_cell(fluxion, jnp, ad_checkpoint) == [
        "f32[] output of cos from <cell>:5:16 (chain.<locals>.f)",
        "f32[] output of cos from <cell>:5:16 (chain.<locals>.f)",
        "f32[2,2] from the argument W", "f32[2] from the argument x",
        "f32[2] output of cos from <cell>:11:11 (g)"]
    assert [line.split(" from ")[0] for line in theirs] == [
        "f32[] output of cos", "f32[] output of cos", "f32[2,2]", "f32[2]", "f32[2] output of cos"]
