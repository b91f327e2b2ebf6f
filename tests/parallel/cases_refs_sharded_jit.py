"""Refs in a jit partitioned by its arguments (global Arrays, in_shardings / out_shardings);
run by tests/test_eight_devices.py in a process with 8 CPU devices. The same programs run under
JAX 0.10.2 (a subprocess with 8 host devices), the oracle for values, result shardings and
error classes."""
import textwrap

import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from _jax_oracle import run_here, run_under_jax

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 CPU devices")

# Run as is under JAX and, with `jax` and `jnp` bound to fluxion, here. `rec` keeps a result's
# value, dtype and (with spec=True) the spec of its sharding; `attempt` keeps an error's class.
_PROGRAMS = textwrap.dedent('''
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    S = lambda *s: NamedSharding(mesh, P(*s))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal((8, 4)).astype(np.float32)
    out = {}

    def rec(name, arr, spec=True):
        out[name] = {"spec": [list(p) if isinstance(p, tuple) else p for p in arr.sharding.spec]
                     if spec else None,
                     "value": np.asarray(arr).tolist(), "dtype": str(arr.dtype)}

    def attempt(name, fn):
        try:
            fn()
        except Exception as e:
            out[name] = {"error": type(e).__name__}

    def ref_argument():
        r = jax.new_ref(jax.device_put(a, S("x")))
        @jax.jit
        def f(r, y):
            r[...] += y
            return r[...].sum(1)
        rec("ref_argument_out", f(r, jax.device_put(b, S("x", "y"))))
        rec("ref_argument_ref", r[...])
    attempt("ref_argument", ref_argument)

    def ref_only():
        r = jax.new_ref(jax.device_put(a, S(None, "y")))
        @jax.jit
        def f(r):
            r[...] = r[...] * 2
        f(r)
        f(r)
        rec("ref_only_ref", r[...])
    attempt("ref_only", ref_only)

    def closed_over():
        c = jax.new_ref(jax.device_put(a, S("x", "y")))
        @jax.jit
        def g(y):
            c[...] = c[...] * 2 + y
            return y + 1
        rec("closed_over_out", g(jax.device_put(b, S("x"))))
        rec("closed_over_ref", c[...])
        rec("closed_over_host_out", g(b), spec=False)
        rec("closed_over_host_ref", c[...])
    attempt("closed_over", closed_over)

    def sgd():
        params = {"w": jax.new_ref(jax.device_put(a, S("x"))),
                  "b": jax.new_ref(jax.device_put(b[0], S()))}
        xs = jax.device_put(b, S("x"))
        @jax.jit
        def step(params, xs):
            def loss(p):
                return jnp.mean((xs * p["w"] + p["b"]) ** 2)
            values = jax.tree.map(lambda r: r[...], params)
            l, g = jax.value_and_grad(loss)(values)
            for k in params:
                params[k][...] -= 0.1 * g[k]
            return l
        for i in range(3):
            rec(f"sgd_loss{i}", step(params, xs))
        rec("sgd_w", params["w"][...])
        rec("sgd_b", params["b"][...])
    attempt("sgd", sgd)

    def given_shardings():
        r = jax.new_ref(jax.device_put(a, S("x")))
        def f(r, y):
            r[...] = r[...] - y
            return (y * 2).sum(0)
        f = jax.jit(f, in_shardings=(S("x"), S(None, "y")), out_shardings=S("y"))
        rec("given_out", f(r, b))
        rec("given_ref", r[...])
    attempt("given_shardings", given_shardings)

    def out_shardings_only():
        r = jax.new_ref(jax.device_put(a, S("x", "y")))
        rec("out_shardings_only_out",
            jax.jit(lambda r: r[...].sum(0), out_shardings=S("x"))(r))
    attempt("out_shardings_only", out_shardings_only)

    def read_only():
        r = jax.new_ref(jax.device_put(a, S("x")))
        rec("read_only_out", jax.jit(lambda r, y: r[...] @ y.T)(r, jax.device_put(b, S("x"))))
        rec("read_only_ref", r[...])
    attempt("read_only", read_only)

    def lowered():
        r = jax.new_ref(jax.device_put(a, S("x")))
        def f(r, y):
            r[...] += y
            return r[...].sum()
        lowered = jax.jit(f).lower(r, jax.device_put(b, S("x")))
        out["lowered_text"] = {"value": 'sdy.sharding<@mesh, [{"x"}, {}]>' in lowered.as_text()}
        rec("lowered_out", lowered.compile()(r, jax.device_put(b, S("x"))))
        rec("lowered_ref", r[...])
    attempt("lowered", lowered)

    def in_sharding_mismatch():
        r = jax.new_ref(jax.device_put(a, S("y")))
        jax.jit(lambda r: r[...].sum(), in_shardings=S("x"))(r)
    attempt("in_sharding_mismatch", in_sharding_mismatch)

    def single_device_ref():
        r = jax.new_ref(jnp.asarray(a))
        def f(r, y):
            r[...] = r[...] + y
            return y * 3
        jax.jit(f)(r, jax.device_put(b, S("x")))
    attempt("single_device_ref", single_device_ref)

    def explicit_adam():  # the training cookbook's pattern, on an Explicit mesh axis
        mesh = jax.make_mesh((8,), ("fsdp",), axis_types=(AxisType.Explicit,))
        rng = np.random.default_rng(1)
        with jax.set_mesh(mesh):
            w = jax.device_put(rng.standard_normal((16, 4)).astype(np.float32), P("fsdp", None))
            xs = jax.device_put(rng.standard_normal((8, 16)).astype(np.float32), P("fsdp", None))
            # jnp.array(0): JAX makes it on the mesh; fluxion on one device, uncommitted
            state = {"w": jax.new_ref(w), "mu": jax.new_ref(jnp.zeros_like(w)),
                     "count": jax.new_ref(jnp.array(0))}
            @jax.jit
            def step(state, xs):
                def loss(w):
                    return jnp.mean(jnp.tanh(xs @ w) ** 2)
                l, g = jax.value_and_grad(loss)(state["w"][...])
                state["mu"][...] = 0.9 * state["mu"][...] + 0.1 * g
                state["count"][...] += 1
                state["w"][...] -= 0.5 * state["mu"][...] / (1 - 0.9 ** state["count"][...])
                return {"loss": l}
            for i in range(3):
                rec(f"adam_loss{i}", step(state, xs)["loss"])
            rec("adam_w", state["w"][...])
            rec("adam_mu", state["mu"][...])
            rec("adam_count", state["count"][...])
    attempt("explicit_adam", explicit_adam)
''')


@pytest.fixture(scope="module")
def oracle():
    return run_under_jax(_PROGRAMS)


@pytest.fixture(scope="module")
def got():
    return run_here(_PROGRAMS, jax, jnp)


def _assert_same(got, want, name):
    assert "error" not in got.get(name, {}), got[name]
    g, w = got[name], want[name]
    assert g["spec"] == w["spec"], (name, g["spec"], w["spec"])
    assert g["dtype"] == w["dtype"], (name, g["dtype"], w["dtype"])
    np.testing.assert_allclose(np.asarray(g["value"]), np.asarray(w["value"]), rtol=2e-5,
                               atol=2e-6, err_msg=name)


@pytest.mark.parametrize("name", [
    "ref_argument_out", "ref_argument_ref", "ref_only_ref", "closed_over_out",
    "closed_over_ref", "closed_over_host_ref", "sgd_loss0", "sgd_loss1", "sgd_loss2", "sgd_w",
    "sgd_b", "given_out", "given_ref", "out_shardings_only_out", "read_only_out",
    "read_only_ref", "lowered_out", "lowered_ref", "adam_loss0", "adam_loss1", "adam_loss2",
    "adam_w", "adam_mu", "adam_count"])
def test_values_and_shardings_match_jax(got, oracle, name):
    _assert_same(got, oracle, name)


def test_host_argument_values_match_jax(got, oracle):
    # a host argument's result layout is XLA's choice: JAX leaves the argument's layout to
    # XLA, fluxion replicates it (docs/differences.md); the values agree
    np.testing.assert_allclose(np.asarray(got["closed_over_host_out"]["value"]),
                               np.asarray(oracle["closed_over_host_out"]["value"]), rtol=1e-6)


def test_lowered_text_annotates_the_ref_value(got, oracle):
    assert got["lowered_text"]["value"] is oracle["lowered_text"]["value"] is True


@pytest.mark.parametrize("name", ["in_sharding_mismatch", "single_device_ref"])
def test_errors_match_jax(got, oracle, name):
    assert oracle[name]["error"] == "ValueError"
    assert got[name]["error"] == oracle[name]["error"]


# ---- against NumPy


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((4, 2), ("x", "y"),
                         axis_types=(jax.sharding.AxisType.Auto,) * 2)


def test_ref_holding_sharded_array_stays_sharded_over_steps(mesh):
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x", "y"))
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    r = jax.new_ref(jax.device_put(a, sharding))
    step = jax.jit(lambda r, g: r.__setitem__(Ellipsis, r[...] - 0.5 * g))
    g = jax.device_put(np.ones_like(a), sharding)
    for _ in range(4):
        step(r, g)
    held = r[...]
    assert held.sharding == sharding
    assert [s.data.shape for s in held.addressable_shards] == [(2, 2)] * 8
    np.testing.assert_array_equal(np.asarray(held), a - 2.0)


def test_lowered_compiled_reports_the_functions_shardings(mesh):
    x_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    r = jax.new_ref(jax.device_put(np.ones((8, 4), np.float32), x_sharding))

    def f(r, y):
        r[...] += y
        return y * 2
    compiled = jax.jit(f).lower(r, jax.device_put(np.ones((8, 4), np.float32),
                                                  x_sharding)).compile()
    args_shardings, _ = compiled.input_shardings
    assert [s.spec for s in args_shardings] == [x_sharding.spec] * 2
    assert compiled.output_shardings.spec == x_sharding.spec
    y = compiled(r, jax.device_put(np.full((8, 4), 3, np.float32), x_sharding))
    np.testing.assert_array_equal(np.asarray(y), np.full((8, 4), 6, np.float32))
    np.testing.assert_array_equal(np.asarray(r[...]), np.full((8, 4), 4, np.float32))


def test_jit_and_eager_agree_on_a_sharded_ref(mesh):
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    a = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)

    def update(r, y):
        r[...] = jnp.tanh(r[...]) * y
        return r[...].sum(0)
    eager_ref = jax.new_ref(jax.device_put(a, sharding))
    jit_ref = jax.new_ref(jax.device_put(a, sharding))
    y = jax.device_put(a + 1, sharding)
    want = update(eager_ref, y)
    got = jax.jit(update)(jit_ref, y)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jit_ref[...]), np.asarray(eager_ref[...]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(want), (np.tanh(a) * (a + 1)).sum(0), rtol=1e-5)
