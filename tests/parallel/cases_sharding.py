"""Sharding cases (global arrays, jit with shardings, constraints); run by
tests/test_eight_devices.py in a process with 8 CPU devices. JAX, run in a subprocess with 8 host
devices, is the oracle for the shardings XLA picks."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.experimental.shard_alike import shard_alike
from fluxion.sharding import (AbstractMesh, Mesh, NamedSharding, PartitionSpec as P,
                              Sharding, AxisType)

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 CPU devices")


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def mesh():
    # Auto axes: these cases compare with JAX's partitioner (Explicit axes:
    # tests/test_explicit_axes.py)
    return jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)


# ---- the same programs under JAX (Auto axes: XLA's partitioner picks unspecified layouts)

_ORACLE = textwrap.dedent('''
    import json, numpy as np, jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    S = lambda *s: NamedSharding(mesh, P(*s))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal((4, 6)).astype(np.float32)
    out = {}
    def rec(name, arr):
        out[name] = {"spec": [list(p) if isinstance(p, tuple) else p for p in arr.sharding.spec],
                     "shards": [[[s.start, s.stop] for s in sh.index] + [sh.replica_id, sh.device.id]
                                for sh in arr.addressable_shards],
                     "value": np.asarray(arr).tolist()}
    x = jax.device_put(a, S("x"))
    rec("put_x", x)
    rec("put_xy", jax.device_put(a, S("x", "y")))
    rec("put_rep", jax.device_put(a, S()))
    rec("put_yx", jax.device_put(a, S(("y", "x"))))
    rec("mul", jax.jit(lambda t: t * 2)(x))
    rec("sum0", jax.jit(lambda t: t.sum(0))(x))
    rec("transpose", jax.jit(lambda t: t.T)(x))
    rec("matmul", jax.jit(lambda p, q: p @ q, in_shardings=(S("x", "y"), S("y", None)),
                          out_shardings=S("x"))(a, b))
    rec("matmul_auto", jax.jit(lambda p, q: p @ q, in_shardings=(S("x", "y"), S("y", None)))(a, b))
    rec("wsc", jax.jit(lambda t: jax.lax.with_sharding_constraint(jnp.sin(t), S(None, "y")))(a))
    rec("grad", jax.jit(jax.grad(lambda t: (jnp.tanh(t) ** 2).sum()))(x))
    rec("out_rep", jax.jit(lambda t: t + 1, out_shardings=S())(x))
    from jax.experimental.shard_alike import shard_alike
    rec("shard_alike", jax.jit(lambda t, u: shard_alike(t * 2, u + 1)[1])(x, a))
    rec("shard_alike_xy", jax.jit(lambda t, u: shard_alike(t, u * 3)[1])(jax.device_put(a, S("x", "y")), a))
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def oracle():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", _ORACLE], env=env, capture_output=True,
                          text=True, timeout=240, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _record(arr):
    return {"spec": [list(p) if isinstance(p, tuple) else p for p in arr.sharding.spec],
            "shards": [[[s.start, s.stop] for s in sh.index] + [sh.replica_id, sh.device.id]
                       for sh in arr.addressable_shards],
            "value": np.asarray(arr)}


def _programs(mesh):
    S = lambda *s: NamedSharding(mesh, P(*s))  # noqa: E731
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal((4, 6)).astype(np.float32)
    x = jax.device_put(a, S("x"))
    return {
        "put_x": lambda: x,
        "put_xy": lambda: jax.device_put(a, S("x", "y")),
        "put_rep": lambda: jax.device_put(a, S()),
        "put_yx": lambda: jax.device_put(a, S(("y", "x"))),
        "mul": lambda: jax.jit(lambda t: t * 2)(x),
        "sum0": lambda: jax.jit(lambda t: t.sum(0))(x),
        "transpose": lambda: jax.jit(lambda t: t.T)(x),
        "matmul": lambda: jax.jit(lambda p, q: p @ q, in_shardings=(S("x", "y"), S("y", None)),
                                  out_shardings=S("x"))(a, b),
        "matmul_auto": lambda: jax.jit(lambda p, q: p @ q,
                                       in_shardings=(S("x", "y"), S("y", None)))(a, b),
        "wsc": lambda: jax.jit(lambda t: lax.with_sharding_constraint(jnp.sin(t), S(None, "y")))(a),
        "grad": lambda: jax.jit(jax.grad(lambda t: (jnp.tanh(t) ** 2).sum()))(x),
        "out_rep": lambda: jax.jit(lambda t: t + 1, out_shardings=S())(x),
        "shard_alike": lambda: jax.jit(lambda t, u: shard_alike(t * 2, u + 1)[1])(x, a),
        "shard_alike_xy": lambda: jax.jit(lambda t, u: shard_alike(t, u * 3)[1])(
            jax.device_put(a, S("x", "y")), a),
    }


@pytest.mark.parametrize("name", ["put_x", "put_xy", "put_rep", "put_yx", "mul", "sum0",
                                  "transpose", "matmul", "matmul_auto", "wsc", "grad",
                                  "out_rep", "shard_alike", "shard_alike_xy"])
def test_shardings_shards_and_values_match_jax(mesh, oracle, name):
    got = _record(_programs(mesh)[name]())
    want = oracle[name]
    assert got["spec"] == want["spec"], (got["spec"], want["spec"])
    assert got["shards"] == want["shards"]
    np.testing.assert_allclose(got["value"], np.asarray(want["value"]), rtol=2e-5, atol=2e-5)


# ---- against NumPy

def test_device_put_shards_hold_numpy_blocks(mesh):
    a = _x((8, 6))
    x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    assert x.shape == (8, 6) and x.dtype == np.float32
    assert not x.is_fully_replicated and x.is_fully_addressable
    assert len(x.addressable_shards) == len(x.global_shards) == 8
    for k, shard in enumerate(x.addressable_shards):
        i, j = divmod(k, 2)
        assert shard.device == mesh.devices[i, j]
        assert shard.data.shape == (2, 3)
        assert shard.replica_id == 0
        np.testing.assert_array_equal(np.asarray(shard.data), a[2 * i:2 * i + 2, 3 * j:3 * j + 3])
    np.testing.assert_array_equal(np.asarray(x), a)
    assert x.devices() == set(mesh.devices.flat)


def test_replicated_shards_count_replicas(mesh):
    x = jax.device_put(_x((8, 4)), NamedSharding(mesh, P("y")))
    ids = [s.replica_id for s in x.addressable_shards]
    assert ids == [0, 0, 1, 1, 2, 2, 3, 3]
    assert {s.data.shape for s in x.addressable_shards} == {(4, 4)}
    assert jax.device_put(_x((8, 4)), NamedSharding(mesh, P())).is_fully_replicated


def test_sharded_jit_equals_unsharded_jit(mesh):
    a, b = _x((16, 8)), _x((8, 4), 1)

    def f(p, q):
        return jnp.tanh(p @ q).sum(axis=1) + jnp.max(p, axis=1)

    plain = jax.jit(f)(a, b)
    sharded = jax.jit(f, in_shardings=(NamedSharding(mesh, P("x", "y")),
                                       NamedSharding(mesh, P("y"))),
                      out_shardings=NamedSharding(mesh, P("x")))(a, b)
    assert sharded.sharding.spec == P("x")
    np.testing.assert_allclose(np.asarray(sharded), np.asarray(plain), rtol=1e-5, atol=1e-5)


def test_compiled_program_has_the_partitioner_collectives(mesh):
    f = jax.jit(lambda p, q: p @ q, in_shardings=(NamedSharding(mesh, P("x", "y")),
                                                  NamedSharding(mesh, P("y", None))),
                out_shardings=NamedSharding(mesh, P("x")))
    lowered = f.lower(_x((16, 8)), _x((8, 4)))
    text = lowered.as_text()
    assert "mhlo.num_partitions = 8" in text and "sdy.mesh @mesh" in text
    assert '#sdy.sharding<@mesh, [{"x"}, {"y"}]>' in text
    hlo = lowered.compile().as_text()
    assert "all-reduce(" in hlo and "replica_groups={{0,1},{2,3},{4,5},{6,7}}" in hlo


def test_eager_ops_keep_global_arrays_sharded(mesh):
    a = _x((8, 4))
    x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    y = jnp.sin(x) * 2 + 1
    assert y.sharding.spec == P("x", "y")
    np.testing.assert_allclose(np.asarray(y), np.sin(a) * 2 + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(x.sum()), a.sum(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(x[3]), a[3])


def test_with_sharding_constraint_eagerly_moves_data(mesh):
    a = _x((8, 4))
    y = lax.with_sharding_constraint(a, NamedSharding(mesh, P(None, "y")))
    assert y.sharding == NamedSharding(mesh, P(None, "y"))
    assert [s.data.shape for s in y.addressable_shards] == [(8, 2)] * 8
    np.testing.assert_array_equal(np.asarray(y), a)


def test_with_sharding_constraint_under_vmap(mesh):
    a = _x((8, 4))
    f = jax.jit(jax.vmap(lambda r: lax.with_sharding_constraint(r * 2, NamedSharding(mesh, P("y")))))
    out = f(a)
    assert out.sharding.spec == P(None, "y")
    np.testing.assert_allclose(np.asarray(out), a * 2)


def test_grad_of_sharded_program_matches_finite_differences(mesh):
    a = _x((8, 4)).astype(np.float64)
    S = NamedSharding(mesh, P("x"))
    with jax.enable_x64(True):
        loss = jax.jit(lambda t: jnp.sum(jnp.sin(t) * t), in_shardings=S)
        g = jax.grad(loss)(a)
        np.testing.assert_allclose(np.asarray(g), np.cos(a) * a + np.sin(a), rtol=1e-9)
        gx = jax.jit(jax.grad(lambda t: jnp.sum(jnp.sin(t) * t)))(jax.device_put(a, S))
        assert gx.sharding.spec == P("x")
        eps = 1e-6
        e = np.zeros_like(a)
        e[2, 1] = eps
        fd = (float(loss(a + e)) - float(loss(a - e))) / (2 * eps)
        np.testing.assert_allclose(np.asarray(gx)[2, 1], fd, rtol=1e-6)


def test_set_mesh_and_bare_partition_specs(mesh):
    a = _x((8, 4))
    with pytest.raises(ValueError, match="requires a mesh"):
        jax.device_put(a, P("x"))
    with jax.set_mesh(mesh):
        x = jax.device_put(a, P("x"))
        r = jax.sharding.reshard(x, P(None, "x"))
        y = jax.jit(lambda t: t + 1, out_shardings=P("y"))(x)
    assert x.sharding == NamedSharding(mesh, P("x"))
    assert r.sharding == NamedSharding(mesh, P(None, "x"))
    assert y.sharding == NamedSharding(mesh, P("y"))
    np.testing.assert_array_equal(np.asarray(r), a)
    with mesh:
        assert jax.device_put(a, P("y")).sharding.spec == P("y")


def test_make_array_from_callback_and_single_device_arrays(mesh):
    a = _x((8, 4))
    s = NamedSharding(mesh, P("x", "y"))
    seen = []

    def cb(index):
        seen.append(index)
        return a[index]

    x = jax.make_array_from_callback(a.shape, s, cb)
    assert len(seen) == 8 and x.sharding == s
    np.testing.assert_array_equal(np.asarray(x), a)
    m = s.addressable_devices_indices_map(a.shape)
    arrays = [jax.device_put(a[idx], d) for d, idx in m.items()]
    y = jax.make_array_from_single_device_arrays(a.shape, s, arrays)
    assert y.sharding == s
    np.testing.assert_array_equal(np.asarray(y), a)
    z = jax.make_array_from_process_local_data(s, a)
    np.testing.assert_array_equal(np.asarray(z), a)
    with pytest.raises(ValueError, match="blocks of shape"):
        jax.make_array_from_single_device_arrays(a.shape, s, [jax.device_put(a, d) for d in m])


def test_donated_sharded_argument_is_consumed(mesh):
    x = jax.device_put(_x((8, 4)), NamedSharding(mesh, P("x")))
    host = np.asarray(x).copy()
    out = jax.jit(lambda t: t * 3, donate_argnums=0)(x)
    assert x.is_deleted()
    np.testing.assert_allclose(np.asarray(out), host * 3)


def test_shardings_and_meshes(mesh):
    s = NamedSharding(mesh, P("x", None))
    assert s.shard_shape((8, 6)) == (2, 6)
    assert s.num_devices == 8 and s.device_set == set(mesh.devices.flat)
    assert s == NamedSharding(jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2),
                              P("x", None))
    assert s != NamedSharding(jax.make_mesh((4, 2), ("x", "y")), P("x", None))  # Explicit
    assert hash(s) == hash(NamedSharding(mesh, P("x", None)))
    assert s.is_equivalent_to(NamedSharding(mesh, P("x")), 2)
    assert mesh.abstract_mesh.shape_tuple == AbstractMesh((4, 2), ("x", "y")).shape_tuple
    assert mesh.abstract_mesh != AbstractMesh((4, 2), ("x", "y"))  # it records the device kind
    assert mesh.abstract_mesh == mesh.abstract_mesh and mesh.abstract_mesh.abstract_device
    assert mesh.shape == {"x": 4, "y": 2}
    assert isinstance(s, Sharding) and isinstance(Mesh(mesh.devices, ("a", "b")), Mesh)
    d = s.devices_indices_map((8, 6))
    assert d[mesh.devices[1, 1]] == (slice(2, 4), slice(None))


def test_errors(mesh):
    with pytest.raises(ValueError, match="not found in mesh"):
        NamedSharding(mesh, P("z"))
    with pytest.raises(ValueError, match="divisible by 4"):
        jax.device_put(np.ones(6), NamedSharding(mesh, P("x")))
    with pytest.raises(ValueError, match="rank of at least 2"):
        jax.device_put(np.ones(8), NamedSharding(mesh, P("x", "y")))
    with pytest.raises(ValueError, match="at most one positional dimension"):
        NamedSharding(mesh, P("x", "x"))
    other = jax.make_mesh((2, 4), ("x", "y"))
    x = jax.device_put(np.ones((8, 4)), NamedSharding(mesh, P("x")))
    y = jax.device_put(np.ones((8, 4)), NamedSharding(other, P("x")))
    with pytest.raises(ValueError, match="incompatible devices"):
        jax.jit(lambda p, q: p + q)(x, y)


# ---- visualize_array_sharding: the layout of JAX's (rich, without colour)

def test_visualize_array_sharding_text(mesh, capsys):
    jax.debug.visualize_array_sharding(jax.device_put(np.zeros((8, 8)), NamedSharding(mesh, P("x", "y"))))
    jax.debug.visualize_array_sharding(jax.device_put(np.zeros(8), NamedSharding(mesh, P("y"))))
    out = capsys.readouterr().out
    row = "│  CPU {}   │  CPU {}   │"
    grid = ["┌──────────┬──────────┐", row.format(0, 1), "├──────────┼──────────┤",
            row.format(2, 3), "├──────────┼──────────┤", row.format(4, 5),
            "├──────────┼──────────┤", row.format(6, 7), "└──────────┴──────────┘", ""]
    line = ["┌───────────┬───────────┐", "│CPU 0,2,4,6│CPU 1,3,5,7│",
            "└───────────┴───────────┘", ""]
    assert out == "\n".join(grid) + "\n" + "\n".join(line) + "\n"


def test_jit_seen_with_plain_arrays_still_partitions_global_ones(mesh):
    a = _x((8, 4))
    f = jax.jit(lambda t: t * 2)
    plain = f(jnp.asarray(a))  # fills the single-device fast path for this signature
    assert isinstance(plain.sharding, jax.sharding.SingleDeviceSharding)
    out = f(jax.device_put(a, NamedSharding(mesh, P("x", "y"))))
    assert out.sharding == NamedSharding(mesh, P("x", "y"))
    np.testing.assert_allclose(np.asarray(out), a * 2)


def test_numpy_api_on_global_arrays(mesh):
    a = _x((8, 4))
    x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    cases = [
        (lambda t: t.astype(jnp.int32), lambda t: t.astype(np.int32)),
        (lambda t: jnp.reshape(t, (4, 8)), lambda t: t.reshape(4, 8)),
        (lambda t: t.at[0].set(1.0), lambda t: np.concatenate([np.ones((1, 4), t.dtype), t[1:]])),
        (lambda t: jnp.concatenate([t, t]), lambda t: np.concatenate([t, t])),
        (lambda t: jnp.where(t > 0, t, 0.0), lambda t: np.where(t > 0, t, 0.0)),
        (lambda t: t @ t.T, lambda t: t @ t.T),
        (lambda t: t + jnp.ones((8, 4)), lambda t: t + 1),
        (lambda t: jax.vmap(lambda r: r * 2)(t), lambda t: t * 2),
    ]
    for f, ref in cases:
        out = f(x)
        assert isinstance(out.sharding, NamedSharding)
        np.testing.assert_allclose(np.asarray(out), ref(a), rtol=1e-5, atol=1e-5)
    assert float(x.sum()) == pytest.approx(float(a.sum()), rel=1e-5)
    np.testing.assert_array_equal(np.asarray(jax.device_get(x)), a)


def test_multihost_utils_local_global_in_one_process(mesh):
    from fluxion.experimental import multihost_utils
    a, b = _x((8, 4)), _x((4,), 1)
    g = multihost_utils.host_local_array_to_global_array((a, b), mesh, (P("x"), P()))
    assert g[0].sharding == NamedSharding(mesh, P("x")) and g[1].sharding.spec == P()
    back = multihost_utils.global_array_to_host_local_array(g, mesh, P())
    np.testing.assert_array_equal(np.asarray(back[0]), a)
    np.testing.assert_array_equal(np.asarray(back[1]), b)


def test_serialized_executable_loads_on_another_device():
    from fluxion.experimental import serialize_executable as se
    x = _x((6,))
    compiled = jax.jit(lambda v: jnp.sin(v) * 3 + np.arange(6, dtype=np.float32)).lower(x).compile()
    blob, in_tree, out_tree = se.serialize(compiled)
    loaded = se.deserialize_and_load(blob, in_tree, out_tree,
                                     execution_devices=[jax.devices()[3]])
    out = loaded(x)
    assert out.device == jax.devices()[3]
    np.testing.assert_allclose(np.asarray(out), np.sin(x) * 3 + np.arange(6), rtol=1e-6)
    assert loaded(jax.device_put(x, jax.devices()[3])).device == jax.devices()[3]


def test_refs_in_a_jit_partitioned_by_its_arguments_are_discharged():
    """(They reached the lowering undischarged: "No lowering rule for primitive 'get'".) More
    cases: tests/parallel/cases_refs_sharded_jit.py."""
    mesh = jax.make_mesh((8,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("i")))

    def step(r, v):
        r[...] = r[...] + v
        return v * 2
    single = jax.new_ref(jnp.zeros(8))
    with pytest.raises(ValueError, match="incompatible devices"):  # as JAX: not moved
        jax.jit(step)(single, x)
    np.testing.assert_array_equal(np.asarray(jax.jit(step)(single, jnp.arange(8.0))),
                                  np.arange(8.0) * 2)
    np.testing.assert_array_equal(np.asarray(single[...]), np.arange(8.0))
    ref = jax.new_ref(jax.device_put(jnp.zeros(8), NamedSharding(mesh, P("i"))))
    np.testing.assert_array_equal(np.asarray(jax.jit(step)(ref, x)), np.arange(8.0) * 2)
    np.testing.assert_array_equal(np.asarray(ref[...]), np.arange(8.0))
    assert ref[...].sharding == NamedSharding(mesh, P("i"))
