"""Export of functions partitioned over a mesh (8 CPU devices; run by tests/test_eight_devices.py).
JAX 0.10.2, imported here with 8 CPU devices of its own, is the oracle: the recorded device
count and shardings, the results' values and shardings, and the errors."""
import numpy as np
import pytest

import fluxion as fx
from fluxion import export
from fluxion.sharding import Mesh, NamedSharding, PartitionSpec as P

import jax
from jax.sharding import Mesh as JMesh, NamedSharding as JNamedSharding, PartitionSpec as JP

pytestmark = pytest.mark.skipif(fx.device_count() < 8, reason="needs 8 CPU devices")

X = np.arange(32, dtype=np.float32).reshape(8, 4)
Y = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)


def _f(a, b):
    return a * 2 + b, a.sum()


def _meshes():
    return (Mesh(np.array(fx.devices()).reshape(4, 2), ("x", "y")),
            JMesh(np.array(jax.devices()).reshape(4, 2), ("x", "y")))


def _exports():
    """The same partitioned jit exported by fluxion and by JAX."""
    mesh, jmesh = _meshes()
    ins = lambda S, m: (S(m, P("x", "y")) if S is NamedSharding else S(m, JP("x", "y")),
                        S(m, P()) if S is NamedSharding else S(m, JP()))
    outs = lambda S, m: (S(m, P("x")) if S is NamedSharding else S(m, JP("x")), None)
    ours = export.export(fx.jit(_f, in_shardings=ins(NamedSharding, mesh),
                                out_shardings=outs(NamedSharding, mesh)))(
        fx.ShapeDtypeStruct(X.shape, X.dtype), fx.ShapeDtypeStruct(Y.shape, Y.dtype))
    theirs = jax.export.export(jax.jit(_f, in_shardings=ins(JNamedSharding, jmesh),
                                       out_shardings=outs(JNamedSharding, jmesh)))(
        jax.ShapeDtypeStruct(X.shape, X.dtype), jax.ShapeDtypeStruct(Y.shape, Y.dtype))
    return ours, theirs


def _specs(shardings):
    return [None if s is None else tuple(s.spec) for s in shardings]


def test_export_records_device_count_and_shardings():
    (ours, theirs), (mesh, jmesh) = _exports(), _meshes()
    assert ours.nr_devices == theirs.nr_devices == 8
    assert ours.in_shardings_hlo == theirs.in_shardings_hlo
    assert ours.out_shardings_hlo == theirs.out_shardings_hlo
    assert _specs(ours.in_shardings_jax(mesh)) == _specs(theirs.in_shardings_jax(jmesh))
    assert _specs(ours.out_shardings_jax(mesh)) == _specs(theirs.out_shardings_jax(jmesh))
    assert all(s.mesh == mesh for s in ours.in_shardings_jax(mesh))


def test_module_is_partitioned():
    ours, _ = _exports()
    text = ours.mlir_module()
    assert "mhlo.num_partitions = 8" in text
    assert '"x"=4' in text or '\\22x\\22=4' in text


def test_shape_dtype_struct_sharding_is_recorded():
    mesh, jmesh = _meshes()
    ours = export.export(fx.jit(lambda a: a + 1))(
        fx.ShapeDtypeStruct(X.shape, X.dtype, sharding=NamedSharding(mesh, P("x"))))
    theirs = jax.export.export(jax.jit(lambda a: a + 1))(
        jax.ShapeDtypeStruct(X.shape, X.dtype, sharding=JNamedSharding(jmesh, JP("x"))))
    assert ours.nr_devices == theirs.nr_devices == 8
    assert _specs(ours.in_shardings_jax(mesh)) == _specs(theirs.in_shardings_jax(jmesh))
    assert _specs(ours.out_shardings_jax(mesh)) == _specs(theirs.out_shardings_jax(jmesh))


def _check_results(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
        assert tuple(g.sharding.spec) == tuple(w.sharding.spec)
        assert g.sharding.mesh.shape_tuple == w.sharding.mesh.shape_tuple


@pytest.mark.parametrize("under_jit", [False, True])
def test_call_runs_partitioned(under_jit):
    (ours, theirs), (mesh, jmesh) = _exports(), _meshes()
    xs = [fx.device_put(v, s) for v, s in zip((X, Y), ours.in_shardings_jax(mesh))]
    jxs = [jax.device_put(v, s) for v, s in zip((X, Y), theirs.in_shardings_jax(jmesh))]
    call = fx.jit(ours.call) if under_jit else ours.call
    jcall = jax.jit(theirs.call) if under_jit else theirs.call
    _check_results(call(*xs), jcall(*jxs))


def test_call_with_replicated_arguments_on_the_mesh():
    (ours, theirs), (mesh, jmesh) = _exports(), _meshes()
    got = fx.jit(ours.call, in_shardings=NamedSharding(mesh, P()))(X, Y)
    want = jax.jit(theirs.call, in_shardings=JNamedSharding(jmesh, JP()))(X, Y)
    _check_results(got, want)


def _error(fun, *args):
    with pytest.raises(Exception) as info:
        fun(*args)
    return info.type, str(info.value)


def test_wrong_device_count_is_jaxs_error():
    ours, theirs = _exports()
    assert _error(ours.call, X, Y) == _error(theirs.call, X, Y)
    two = Mesh(np.array(fx.devices()[:2]), ("x",))
    jtwo = JMesh(np.array(jax.devices()[:2]), ("x",))
    got = _error(fx.jit(ours.call, in_shardings=NamedSharding(two, P())), X, Y)
    want = _error(jax.jit(theirs.call, in_shardings=JNamedSharding(jtwo, JP())), X, Y)
    assert got == want
    assert got[0] is ValueError and "exported for 8 devices" in got[1]


def test_fluxion_serialization_keeps_shardings():
    (ours, theirs), (mesh, jmesh) = _exports(), _meshes()
    back = export.deserialize(ours.serialize())
    assert back.nr_devices == 8
    assert _specs(back.in_shardings_jax(mesh)) == _specs(ours.in_shardings_jax(mesh))
    assert _specs(back.out_shardings_jax(mesh)) == _specs(ours.out_shardings_jax(mesh))
    xs = [fx.device_put(v, s) for v, s in zip((X, Y), back.in_shardings_jax(mesh))]
    jxs = [jax.device_put(v, s) for v, s in zip((X, Y), theirs.in_shardings_jax(jmesh))]
    _check_results(back.call(*xs), theirs.call(*jxs))


def test_refusals():
    mesh, _ = _meshes()
    sharded = fx.jit(lambda a: a * 2, in_shardings=NamedSharding(mesh, P("x")))
    (n,) = export.symbolic_shape("8*n")
    with pytest.raises(NotImplementedError, match="symbolic shapes"):
        export.export(sharded)(fx.ShapeDtypeStruct((n, 4), np.float32))
    with pytest.raises(NotImplementedError, match="platform"):
        export.export(sharded, platforms=("cpu", "cuda"))(X)
    exp = export.export(sharded)(X)
    with pytest.raises(NotImplementedError, match="Differentiating"):
        exp.serialize(vjp_order=1)
    x = fx.device_put(X, NamedSharding(mesh, P("x")))
    with pytest.raises(NotImplementedError, match="Differentiating"):
        fx.grad(lambda v: exp.call(v).sum())(x)
    ref = fx.new_ref(fx.device_put(np.ones(X.shape[1:], np.float32), NamedSharding(mesh, P())))
    with_ref = fx.jit(lambda a: a * ref[...], in_shardings=NamedSharding(mesh, P("x")))
    with pytest.raises(NotImplementedError, match="Refs"):
        export.export(with_ref)(X)


def test_jax_artifact_for_8_devices_runs_in_fluxion():
    (_, theirs), (mesh, jmesh) = _exports(), _meshes()
    ours = export.deserialize(theirs.serialize())
    assert ours.nr_devices == 8
    assert _specs(ours.in_shardings_jax(mesh)) == _specs(theirs.in_shardings_jax(jmesh))
    assert _specs(ours.out_shardings_jax(mesh)) == _specs(theirs.out_shardings_jax(jmesh))
    xs = [fx.device_put(v, s) for v, s in zip((X, Y), ours.in_shardings_jax(mesh))]
    jxs = [jax.device_put(v, s) for v, s in zip((X, Y), theirs.in_shardings_jax(jmesh))]
    _check_results(fx.jit(ours.call)(*xs), theirs.call(*jxs))
    assert _error(ours.call, X, Y) == _error(theirs.call, X, Y)


def test_fluxion_artifact_for_8_devices_runs_in_jax():
    (ours, theirs), (mesh, jmesh) = _exports(), _meshes()
    back = jax.export.deserialize(ours.serialize(format="jax"))
    assert back.nr_devices == 8
    assert _specs(back.in_shardings_jax(jmesh)) == _specs(theirs.in_shardings_jax(jmesh))
    assert _specs(back.out_shardings_jax(jmesh)) == _specs(theirs.out_shardings_jax(jmesh))
    jxs = [jax.device_put(v, s) for v, s in zip((X, Y), back.in_shardings_jax(jmesh))]
    _check_results(jax.jit(back.call)(*jxs), theirs.call(*jxs))
    # and back into fluxion through JAX's format
    again = export.deserialize(back.serialize())
    xs = [fx.device_put(v, s) for v, s in zip((X, Y), again.in_shardings_jax(mesh))]
    _check_results(again.call(*xs), theirs.call(*jxs))


def test_call_on_a_mesh_of_other_device_order():
    devices, jdevices = np.array(fx.devices()), np.array(jax.devices())
    ours = export.export(fx.jit(lambda x: x + x, in_shardings=NamedSharding(
        Mesh(devices, ("a",)), P("a"))))(X)
    theirs = jax.export.export(jax.jit(lambda x: x + x, in_shardings=JNamedSharding(
        JMesh(jdevices, ("a",)), JP("a"))))(X)
    run, jrun = Mesh(devices[::-1], ("a",)), JMesh(jdevices[::-1], ("a",))
    got = ours.call(fx.device_put(X, ours.in_shardings_jax(run)[0]))
    want = theirs.call(jax.device_put(X, theirs.in_shardings_jax(jrun)[0]))
    _check_results([got], [want])
    assert [s.device.id for s in got.addressable_shards] == \
        [s.device.id for s in want.addressable_shards]


@pytest.mark.parametrize("round_trip", [False, True])
def test_explicit_axes_results_have_the_exported_types(round_trip):
    mesh, jmesh = fx.make_mesh((4, 2), ("x", "y")), jax.make_mesh((4, 2), ("x", "y"))
    f = lambda x: (x * 2).sum(0)  # noqa: E731
    ours = export.export(fx.jit(f, in_shardings=NamedSharding(mesh, P("x", "y"))))(X)
    theirs = jax.export.export(jax.jit(f, in_shardings=JNamedSharding(jmesh, JP("x", "y"))))(X)
    if round_trip:
        ours = export.deserialize(ours.serialize())
    assert _specs(ours.out_shardings_jax(mesh)) == _specs(theirs.out_shardings_jax(jmesh))
    got = ours.call(fx.device_put(X, NamedSharding(mesh, P("x", "y"))))
    want = theirs.call(jax.device_put(X, JNamedSharding(jmesh, JP("x", "y"))))
    _check_results([got], [want])


def test_host_callbacks_are_refused():
    mesh, _ = _meshes()
    f = fx.jit(lambda x: fx.pure_callback(lambda v: v, fx.ShapeDtypeStruct(x.shape, x.dtype), x),
               in_shardings=NamedSharding(mesh, P("x")))
    with pytest.raises(ValueError, match="calls back into Python"):
        export.export(f)(X)


def test_export_of_global_array_arguments_records_their_shardings():
    mesh, jmesh = _meshes()
    ours = export.export(fx.jit(lambda x: x * 3))(fx.device_put(X, NamedSharding(mesh, P("x"))))
    theirs = jax.export.export(jax.jit(lambda x: x * 3))(
        jax.device_put(X, JNamedSharding(jmesh, JP("x"))))
    assert ours.nr_devices == theirs.nr_devices == 8
    assert _specs(ours.in_shardings_jax(mesh)) == _specs(theirs.in_shardings_jax(jmesh))
    assert _specs(ours.out_shardings_jax(mesh)) == _specs(theirs.out_shardings_jax(jmesh))


def test_damaged_sharding_metadata_is_a_value_error():
    ours, _ = _exports()
    ours._mesh_axes = (("x", 3, 1), ("y", 2, 1))
    with pytest.raises(ValueError, match="do not make 8 devices"):
        export.deserialize(ours.serialize())
    ours, _ = _exports()
    ours._in_specs = (P(("x", 1)), P())
    with pytest.raises(ValueError, match="bad partition spec"):
        export.deserialize(ours.serialize())


def test_vmap_of_a_partitioned_call_loops_over_the_batch():
    mesh, _ = _meshes()
    ours = export.export(fx.jit(lambda x: x * 3, in_shardings=NamedSharding(mesh, P("x"))))(X)
    xs = fx.device_put(np.stack([X, Y]), NamedSharding(mesh, P()))
    np.testing.assert_allclose(np.asarray(fx.jit(fx.vmap(ours.call))(xs)),
                               np.stack([X, Y]) * 3, rtol=1e-6)
