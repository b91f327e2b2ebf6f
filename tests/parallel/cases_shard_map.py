"""shard_map cases; run by tests/test_eight_devices.py in a process with 8 CPU devices."""
import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.sharding import Mesh, PartitionSpec as P
from fluxion.experimental.shard_map import shard_map as old_shard_map

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 CPU devices")


def _auto_mesh(shape, names):
    """A mesh whose axes are Auto: host arrays may be passed to shard_map over it (over
    Explicit axes an argument must already be laid out as its in_spec says, as in JAX)."""
    return jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Auto,) * len(shape))


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_blockwise_identity_and_layout():
    mesh = _auto_mesh((4, 2), ("x", "y"))
    a = _x((8, 6))
    f = jax.shard_map(lambda b: b * 2, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))
    np.testing.assert_allclose(np.asarray(f(a)), a * 2)
    shape = jax.shard_map(lambda b: jnp.zeros((1, 1)) + b.shape[0] * 10 + b.shape[1],
                          mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))(a)
    np.testing.assert_array_equal(np.asarray(shape), np.full((4, 2), 23.0))


def test_sharded_matmul_with_psum_matches_numpy():
    mesh = _auto_mesh((4, 2), ("x", "y"))
    a, b = _x((8, 16)), _x((16, 4), 1)

    def block(a_blk, b_blk):  # a: rows over x, contraction over y; b: contraction over y
        return lax.psum(a_blk @ b_blk, "y")

    f = jax.shard_map(block, mesh=mesh, in_specs=(P("x", "y"), P("y", None)),
                      out_specs=P("x", None))
    np.testing.assert_allclose(np.asarray(f(a, b)), a @ b, rtol=1e-4, atol=1e-5)


def test_collectives_inside_against_numpy():
    mesh = Mesh(np.array(jax.devices()), ("i",))
    x = _x((8, 3))
    f = old_shard_map(lambda v: (lax.pmax(v, "i"), lax.all_gather(v, "i", tiled=True),
                                 lax.axis_index("i") + jnp.zeros((1,), jnp.int32)),
                      mesh=mesh, in_specs=P("i"), out_specs=(P(), P(), P("i")),
                      check_rep=False)  # all_gather's output varies over "i", as in JAX
    mx, gathered, idx = f(x)
    np.testing.assert_allclose(np.asarray(mx), x.max(0, keepdims=True))
    np.testing.assert_allclose(np.asarray(gathered), x)
    np.testing.assert_array_equal(np.asarray(idx), np.arange(8))


def test_two_axis_reduction_groups():
    mesh = _auto_mesh((2, 4), ("a", "b"))
    x = _x((2, 4))
    for name, ref in (("a", x.sum(0, keepdims=True)), ("b", x.sum(1, keepdims=True))):
        spec = P(None, "b") if name == "a" else P("a", None)
        f = jax.shard_map(lambda v: lax.psum(v, name), mesh=mesh, in_specs=P("a", "b"),
                          out_specs=spec)
        np.testing.assert_allclose(np.asarray(f(x)), ref, rtol=1e-5)


def test_errors():
    mesh = _auto_mesh((8,), ("x",))
    with pytest.raises(ValueError, match="not divisible"):
        jax.shard_map(lambda v: v, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(np.zeros(6))
    with pytest.raises(ValueError, match="must be >="):
        jax.make_mesh((16,), ("x",))
    # Over Explicit axes the argument's layout must be its in_spec's, as in JAX; a mesh
    # passed to shard_map must be the context mesh when there is one.
    explicit = jax.make_mesh((8,), ("x",))
    with pytest.raises(ValueError, match=r"in_specs passed to shard_map: P\('x',\) does not "
                       r"match the specs of the input: P\(None,\) for arg: float32\[8\]"):
        jax.shard_map(lambda v: v, mesh=explicit, in_specs=P("x"), out_specs=P("x"))(
            np.zeros(8, np.float32))
    with jax.set_mesh(explicit), pytest.raises(ValueError, match="should match the mesh"):
        jax.shard_map(lambda v: v, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(np.zeros(8))


def test_pbroadcast_pcast_are_value_identities():
    mesh = _auto_mesh((8,), ("x",))
    x = _x((8, 2))
    f = jax.shard_map(lambda v: lax.pcast(lax.pbroadcast(v, "x"), "x", to="varying"),
                      mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    np.testing.assert_array_equal(np.asarray(f(x)), x)
    with pytest.raises(NameError):
        jax.shard_map(lambda v: lax.pbroadcast(v, "nope"), mesh=mesh, in_specs=P("x"),
                      out_specs=P("x"))(x)


@pytest.mark.parametrize("use_jit", [False, True])
def test_collectives_over_a_tuple_of_axis_names(use_jit):
    # Found by JAX's shard_map_test: axis_index, ppermute and all_gather over ('x', 'y')
    # raised NameError (the names were looked up as one).
    mesh = jax.make_mesh((2, 2, 2), ("x", "y", "z"), axis_types=(jax.sharding.AxisType.Auto,) * 3)

    def body(a):
        n = lax.axis_size(("x", "y"))
        return (lax.axis_index(("x", "y"))[None, None, None],
                lax.axis_index(("z", "x"))[None, None, None],
                lax.ppermute(a, ("x", "y"), perm=[(j, (j + 1) % n) for j in range(n)]),
                lax.all_gather(a, ("y", "z"), tiled=True))

    f = jax.shard_map(body, mesh=mesh, in_specs=P(("x", "y", "z")),
                      out_specs=(P("x", "y", "z"), P("x", "y", "z"), P(("x", "y", "z")),
                                 P(("x", "y", "z"))))
    a = np.arange(16, dtype=np.float32)
    xy, zx, permuted, gathered = (jax.jit(f) if use_jit else f)(a)
    ix, iy, iz = np.meshgrid(np.arange(2), np.arange(2), np.arange(2), indexing="ij")
    np.testing.assert_array_equal(np.asarray(xy), 2 * ix + iy)
    np.testing.assert_array_equal(np.asarray(zx), 2 * iz + ix)
    blocks = a.reshape(2, 2, 2, 2)  # (x, y, z, 2 elements)
    src = (2 * ix + iy - 1) % 4  # the (x, y) position whose block each device receives
    expected = blocks[src // 2, src % 2, iz]
    np.testing.assert_array_equal(np.asarray(permuted), expected.reshape(-1))
    expected_gather = np.stack([blocks[i].reshape(-1) for i in range(2)])  # all of (y, z)
    np.testing.assert_array_equal(np.asarray(gathered).reshape(2, 2, 2, 8),
                                  np.broadcast_to(expected_gather[:, None, None, :],
                                                  (2, 2, 2, 8)))


def test_result_specs_keep_size_one_mesh_axes():
    # Found by JAX's shard_map_test and pmap_test: XLA's chosen layout was named without the
    # size-1 axes (P(None, 'y')); JAX 0.10.2 gives the specs asserted here.
    auto = jax.sharding.AxisType.Auto
    NS = jax.sharding.NamedSharding
    mesh = jax.make_mesh((1, 4, 1), ("data", "seq", "model"), axis_types=(auto,) * 3)
    spec = P("data", "seq", "model")
    x = jax.device_put(jnp.ones([2, 16, 4]), NS(mesh, spec))
    y = jax.shard_map(lambda b: b * b + 2, mesh=mesh, in_specs=spec, out_specs=spec)(x)
    assert y.sharding.spec == spec
    mesh2 = jax.make_mesh((1, 2), ("x", "y"), axis_types=(auto,) * 2)
    inp = jax.device_put(jnp.zeros((2, 2)), NS(mesh2, P("x", "y")))
    out = jax.shard_map(lambda b: b, mesh=mesh2, in_specs=P("x", "y"), out_specs=P("x", "y"))(inp)
    assert out.sharding == NS(mesh2, P("x", "y"))
    for result in (jnp.copy(inp), inp + 1, jax.jit(lambda a: a * 2)(inp)):
        assert result.sharding.spec == P("x", "y")
    assert inp.sum(0).sharding.spec == P("y")
