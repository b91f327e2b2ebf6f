"""The small jax.experimental modules: xla_metadata, compute_on, shard_alike, layout, pjit,
random (stateful_rng), topologies; JAX is the oracle."""
import re
import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental import compute_on as j_compute_on
from jax.experimental import layout as j_layout
from jax.experimental import random as j_random
from jax.experimental import shard_alike as j_shard_alike
from jax.experimental import topologies as j_topologies
from jax.experimental import xla_metadata as j_xla_metadata

import fluxion
import fluxion.numpy as jnp
from fluxion.experimental import compute_on as f_compute_on
from fluxion.experimental import layout as f_layout
from fluxion.experimental import random as f_random
from fluxion.experimental import shard_alike as f_shard_alike
from fluxion.experimental import topologies as f_topologies
from fluxion.experimental import xla_metadata as f_xla_metadata

_TAGGED = re.compile(r'(stablehlo\.[a-z_]+)"?[^\n]*?mhlo\.frontend_attributes = \{([^}]*)\}')


def _tagged_ops(text):
    """Sorted (op name, sorted attributes) of the ops with frontend attributes."""
    # fluxion's generic syntax writes an op's attributes after its regions: drop their bodies
    text = re.sub(r"\(\{\n.*?\n\s*\}\)", "", text, flags=re.S)
    return sorted((op, tuple(sorted(a.strip() for a in attrs.split(","))))
                  for op, attrs in _TAGGED.findall(text))


def _both(make):
    """`make(jax, jnp, set_xla_metadata)` lowered by both frameworks: their tagged ops."""
    x = np.arange(4, dtype=np.float32)
    ours = fluxion.jit(make(fluxion, jnp, f_xla_metadata.set_xla_metadata)).lower(x).as_text()
    theirs = jax.jit(make(jax, jjnp, j_xla_metadata.set_xla_metadata)).lower(x).as_text()
    return _tagged_ops(ours), _tagged_ops(theirs)


# ---------------------------------------------------------------------------------------------
# xla_metadata

def _ctx_fn(jx, np_, meta):
    def f(x):
        with meta(a="b", c=1):
            y = x * 2
            with meta(c=None, d=True):
                y = np_.sin(y)
        return np_.cos(y) + 1
    return f


def _decorated_fn(jx, np_, meta):
    @meta(k="v", n=2.5)
    def f(x):
        return np_.exp(x) * x
    return f


def _value_fn(jx, np_, meta):
    return lambda x: np_.cos(meta(np_.sin(x), tag="s"))


def _grad_fn(jx, np_, meta):
    def g(x):
        with meta(a=True):
            return np_.sum(np_.sin(x) * x)
    return jx.grad(g)


@pytest.mark.parametrize("make", [_ctx_fn, _decorated_fn, _value_fn])
def test_xla_metadata_frontend_attributes_match_jax(make):
    ours, theirs = _both(make)
    assert ours and ours == theirs


def test_xla_metadata_decorating_a_jitted_function_tags_its_lowering_as_jax():
    def tagged(jx, np_, meta):
        @meta(_xla_log=True)
        @jx.jit
        def f(x):
            return np_.sin(x) * np_.cos(x)
        x = np.arange(4, dtype=np.float32)
        np.testing.assert_allclose(f(x), np.sin(x) * np.cos(x), rtol=1e-6)
        return _tagged_ops(f.lower(x).as_text())
    ours = tagged(fluxion, jnp, f_xla_metadata.set_xla_metadata)
    theirs = tagged(jax, jjnp, j_xla_metadata.set_xla_metadata)
    assert ours and ours == theirs


def test_xla_metadata_reaches_the_backward_pass_as_jax():
    # The two frameworks' backward passes differ op by op (how the sum's transpose
    # broadcasts); both tag the forward sine and its derivative's cosine.
    ours, theirs = _both(_grad_fn)
    assert {a for _, a in ours} == {a for _, a in theirs} == {('a = "true"',)}
    assert {"stablehlo.sine", "stablehlo.cosine"} <= {o for o, _ in ours} & {o for o, _ in theirs}


def test_xla_metadata_values_and_cache():
    x = np.linspace(0, 1, 5, dtype=np.float32)
    f = fluxion.jit(lambda x: jnp.sin(x) * 3)
    plain = f.lower(x).as_text()
    with f_xla_metadata.set_xla_metadata(tag="t"):
        tagged = f.lower(x).as_text()
        np.testing.assert_allclose(f(x), np.sin(x) * 3, rtol=1e-6)
    assert "frontend_attributes" not in plain and 'tag = "t"' in tagged
    assert "frontend_attributes" not in f.lower(x).as_text()
    g = lambda x: f_xla_metadata.set_xla_metadata({"a": x}, m=1)["a"] * 2
    np.testing.assert_allclose(fluxion.grad(lambda x: jnp.sum(g(x)))(x), 2 * np.ones(5))
    np.testing.assert_allclose(fluxion.vmap(g)(x), 2 * x)


# ---------------------------------------------------------------------------------------------
# compute_on

@pytest.mark.parametrize("ctype", ["device_host", "device", "tpu_sparsecore", "gpu_stream:3"])
def test_compute_on_marks_the_result_ops_as_jax(ctype):
    x = np.ones(3, np.float32)
    f = lambda co, np_: (lambda x: co(ctype)(lambda x: np_.sin(x) * 2)(x))
    ours = _tagged_ops(fluxion.jit(f(f_compute_on.compute_on, jnp)).lower(x).as_text())
    theirs = _tagged_ops(jax.jit(f(j_compute_on.compute_on, jjnp)).lower(x).as_text())
    assert ours and ours == theirs
    np.testing.assert_allclose(fluxion.jit(f(f_compute_on.compute_on, jnp))(x), np.sin(x) * 2)


def test_compute_on_reductions_and_broadcasts_as_jax():
    def make(co, np_):
        def f(x, y):
            with co("device_host"):
                z = np_.sum(x * y, axis=0) + np_.maximum(x, 0.5).mean()
            return np_.tanh(z) @ y
        return f
    x = np.ones((3, 3), np.float32)
    ours = _tagged_ops(fluxion.jit(make(f_compute_on.compute_on, jnp)).lower(x, x).as_text())
    theirs = _tagged_ops(jax.jit(make(j_compute_on.compute_on, jjnp)).lower(x, x).as_text())
    assert ("stablehlo.reduce", ('_xla_compute_type = "host"',)) in ours
    assert ours == theirs


@pytest.mark.parametrize("bad", ["foo", 3, None])
def test_compute_on_rejects_as_jax(bad):
    with pytest.raises(Exception) as theirs:
        with j_compute_on.compute_on(bad):
            pass
    with pytest.raises(theirs.type, match=re.escape(str(theirs.value))):
        with f_compute_on.compute_on(bad):
            pass


def test_compute_on_nested_and_compute_on2():
    x = np.ones(2, np.float32)

    def f(x):
        with f_compute_on.compute_on("device_host"):
            with f_compute_on.compute_on("device"):
                return x + 1
    assert '_xla_compute_type = "dense"' in fluxion.jit(f).lower(x).as_text()
    g = f_compute_on.compute_on2(lambda x: (x * 2, x), compute_type="device_host",
                                 out_memory_spaces=fluxion.memory.Space.Device)
    np.testing.assert_allclose(fluxion.jit(g)(x)[0], 2 * x)
    with pytest.raises(ValueError, match="Invalid compute type"):
        f_compute_on.compute_on2(lambda x: x, compute_type="cpu", out_memory_spaces=None)


# ---------------------------------------------------------------------------------------------
# shard_alike

def test_shard_alike_identity_jvp_grad_vmap():
    sa = f_shard_alike.shard_alike
    x, y = np.arange(3.0, dtype=np.float32), np.ones(3, np.float32)
    for fn in (sa, fluxion.jit(sa)):
        a, b = fn({"p": x}, {"p": y})
        np.testing.assert_array_equal(a["p"], x)
        np.testing.assert_array_equal(b["p"], y)
    loss = lambda x, y: jnp.sum(sa(x, y)[0] * 3 + jnp.sin(sa(x, y)[1]))
    jloss = lambda x, y: jjnp.sum(j_shard_alike.shard_alike(x, y)[0] * 3
                                  + jjnp.sin(j_shard_alike.shard_alike(x, y)[1]))
    for ours, theirs in zip(fluxion.grad(loss, (0, 1))(x, y), jax.grad(jloss, (0, 1))(x, y)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    _, t = fluxion.jvp(sa, (x, y), (y, x))
    np.testing.assert_array_equal(t[0], y)
    np.testing.assert_array_equal(t[1], x)
    xs, ys = np.arange(6.0, dtype=np.float32).reshape(2, 3), np.ones((3, 2), np.float32)
    for in_axes, args in [((0, 1), (xs, ys)), ((0, None), (xs, y)), ((None, 1), (x, ys))]:
        got = fluxion.vmap(sa, in_axes=in_axes)(*args)
        want = jax.vmap(j_shard_alike.shard_alike, in_axes=in_axes)(*args)
        for g_, w in zip(got, want):
            np.testing.assert_array_equal(g_, w)


def test_shard_alike_lowering_and_errors():
    text = fluxion.jit(f_shard_alike.shard_alike).lower(np.ones(2), np.ones(2)).as_text()
    groups = re.findall(r"sdy.sharding_group.*group_id=(\d+)", text)
    assert len(groups) == 2 and groups[0] == groups[1]
    with pytest.raises(ValueError, match="Trees should be equal"):
        f_shard_alike.shard_alike((np.ones(2),), [np.ones(2)])
    with pytest.raises(ValueError, match="leaves shapes of `x` and `y` should match"):
        f_shard_alike.shard_alike(np.ones(2), np.ones(3))


# ---------------------------------------------------------------------------------------------
# layout

def test_layout_format_of_arrays_and_jit():
    for shape, dtype in [((2, 3), np.float32), ((), np.bool_), ((4, 1, 2), np.int8)]:
        x = np.zeros(shape, dtype)
        ours, theirs = fluxion.numpy.asarray(x).format, jjnp.asarray(x).format
        assert repr(ours.layout) == repr(theirs.layout)
    x = jnp.ones((2, 3))
    L, F = f_layout.Layout, f_layout.Format
    f = fluxion.jit(lambda x: x * 2, in_shardings=F(L.AUTO), out_shardings=F(L.AUTO))
    np.testing.assert_allclose(f(x), 2 * np.ones((2, 3)))
    y = fluxion.jit(lambda x: x.T, out_shardings=F(L((0, 1)), x.sharding))(x)
    assert y.format == F(L((0, 1), ()), x.sharding)
    with pytest.raises(NotImplementedError, match="layout"):
        fluxion.jit(lambda x: x, out_shardings=F(L((1, 0)), x.sharding))
    np.testing.assert_allclose(fluxion.jit(
        lambda x: f_layout.with_layout_constraint(x * 2, L((0, 1))))(x), 2 * np.ones((2, 3)))
    z = fluxion.device_put(np.arange(6.0).reshape(2, 3), F(L((0, 1)), x.sharding))
    assert z.format == x.format
    np.testing.assert_array_equal(z, np.arange(6.0).reshape(2, 3))
    with pytest.raises(NotImplementedError, match="device_put"):
        fluxion.device_put(x, F(L((1, 0)), x.sharding))


@pytest.mark.parametrize("args", [(("L", (1, 0)),), (("L", (1, 0)), "s"), ("bad",), (None, "bad")])
def test_layout_format_errors_match_jax(args):
    def build(mod, shard):
        a = [mod.Layout(v[1]) if isinstance(v, tuple) else shard if v == "s" else v for v in args]
        return mod.Format(*a)
    try:
        build(j_layout, jax.sharding.SingleDeviceSharding(jax.devices()[0]))
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)):
            build(f_layout, fluxion.sharding.SingleDeviceSharding(fluxion.devices()[0]))
    else:
        build(f_layout, fluxion.sharding.SingleDeviceSharding(fluxion.devices()[0]))


def test_with_layout_constraint_rank_check():
    with pytest.raises(ValueError, match="rank of the value"):
        f_layout.with_layout_constraint(jnp.ones(3), f_layout.Layout((0, 1)))
    with pytest.raises(ValueError, match="must be of type `Layout`"):
        f_layout.with_layout_constraint(jnp.ones(3), None)


# ---------------------------------------------------------------------------------------------
# pjit, random, topologies

def test_pjit_is_deprecated_jit():
    import fluxion.experimental.pjit as m
    with pytest.warns(DeprecationWarning, match="pjit has been deprecated"):
        pjit = m.pjit
    mesh = fluxion.sharding.Mesh(np.array(fluxion.devices()[:1]), ("x",))
    f = pjit(lambda x, n: x * n, in_shardings=fluxion.sharding.PartitionSpec("x"),
             static_argnums=1)
    with mesh:
        np.testing.assert_allclose(f(jnp.arange(4.0), 3), 3 * np.arange(4.0))
    np.testing.assert_allclose(
        pjit(lambda x: x + 1, compiler_options={"xla_cpu_enable_fast_math": True})(1.), 2.)
    with pytest.raises(fluxion.errors.JaxRuntimeError, match="No such compile option"):
        pjit(lambda x: x, compiler_options={"no_such_option": True})(1.)


def _draws(random):
    rng = random.stateful_rng(42)
    out = [rng.uniform(), rng.uniform(), rng.normal(1.0, 2.0, size=3), rng.integers(10, size=4),
           rng.random((2,)), rng.uniform(np.zeros(2), 3.0)]
    ju = (fluxion if random is f_random else jax).jit(rng.uniform)
    out += [ju(), ju(), random.key_data(rng.key()) if hasattr(random, "key_data") else
            (fluxion if random is f_random else jax).random.key_data(rng.key())]
    rng = random.stateful_rng(123)
    vmap = (fluxion if random is f_random else jax).vmap
    out.append(vmap(lambda r, x: x + r.uniform())(rng.split(3), np.zeros(3, np.float32)))
    out += [r.integers(0, 10, 2) for r in rng.spawn(2)]
    return out


def test_stateful_rng_matches_jax():
    for ours, theirs in zip(_draws(f_random), _draws(j_random), strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    with pytest.raises(TypeError, match="explicit seed"):
        fluxion.jit(lambda: f_random.stateful_rng().uniform())()
    assert f_random.stateful_rng().uniform().shape == ()
    with pytest.raises(ValueError, match="typed PRNG key"):
        f_random.StatefulPRNG(jnp.zeros(2, jnp.uint32), fluxion.new_ref(0))


def test_topologies_as_jax():
    topo = f_topologies.get_attached_topology()
    assert topo.devices == fluxion.devices()
    mesh = f_topologies.make_mesh(topo, (len(topo.devices),), ("x",))
    assert mesh.shape == {"x": len(topo.devices)}
    for args in [("x", "cpu"), ()]:
        with pytest.raises(Exception) as theirs:
            j_topologies.get_topology_desc(*args)
        with pytest.raises(theirs.type):
            f_topologies.get_topology_desc(*args)
