"""Host callbacks in programs over several devices, against JAX 0.10.2: in a shard_map body
each device calls back with its own block, in a pmap each replica, and in a partitioned jit one
call gets the whole value; an ordered io_callback keeps each device's order, and ordered debug
callbacks raise JAX's ValueError. Run by
tests/test_eight_devices.py in a process with 8 CPU devices for fluxion and JAX."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

N = 8
pytestmark = pytest.mark.skipif(fluxion.device_count() < N, reason="needs 8 CPU devices")

if fluxion.device_count() >= N:
    import jax
    import jax.numpy as jnp


def _libs():
    return [(fluxion, fnp), (jax, jnp)]


def _auto_mesh(lib, shape, names):
    return lib.make_mesh(shape, names, axis_types=(lib.sharding.AxisType.Auto,) * len(shape))


def _run_both(program):
    """program(lib, np_module, calls) -> result; returns per library (result, sorted calls)."""
    out = []
    for lib, lnp in _libs():
        calls = []
        result = np.asarray(program(lib, lnp, calls))
        lib.effects_barrier()
        out.append((result, sorted(calls)))
    return out


@pytest.mark.parametrize("jitted", [False, True])
def test_shard_map_calls_back_on_every_device(jitted):
    def program(lib, lnp, calls):
        P = lib.sharding.PartitionSpec
        mesh = _auto_mesh(lib, (4, 2), ("x", "y"))

        def body(b):
            lib.debug.callback(lambda v: calls.append(("seen", np.asarray(v).tolist())), b)
            doubled = lib.pure_callback(lambda v: np.asarray(v) * 2,
                                        lib.ShapeDtypeStruct(b.shape, b.dtype), b)
            logged = lib.experimental.io_callback(
                lambda v: (calls.append(("io", float(np.asarray(v).sum()))),
                           np.asarray(v).sum().reshape(1))[1],
                lib.ShapeDtypeStruct((1,), b.dtype), doubled)
            return doubled + logged
        f = lib.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))
        f = lib.jit(f) if jitted else f
        return f(lnp.arange(32.0).reshape(8, 4))

    (ours, our_calls), (theirs, their_calls) = _run_both(program)
    np.testing.assert_array_equal(ours, theirs)
    assert our_calls == their_calls and len(our_calls) == 16


def test_pmap_calls_back_on_every_replica():
    def program(lib, lnp, calls):
        def per_device(v):
            lib.debug.callback(lambda a: calls.append(float(a)), v)
            return lib.pure_callback(lambda a: np.asarray(a) + 10,
                                     lib.ShapeDtypeStruct((), v.dtype), v) * 2
        return lib.pmap(per_device)(lnp.arange(8.0))

    (ours, our_calls), (theirs, their_calls) = _run_both(program)
    np.testing.assert_array_equal(ours, theirs)
    assert our_calls == their_calls == [float(i) for i in range(8)]


def test_debug_print_lines_stay_whole(capfd):
    P = fluxion.sharding.PartitionSpec
    mesh = _auto_mesh(fluxion, (8,), ("i",))
    f = fluxion.jit(fluxion.shard_map(lambda b: (fluxion.debug.print("block {}", b), b)[1],
                                      mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    f(fnp.arange(16.0))
    fluxion.effects_barrier()
    lines = capfd.readouterr().out.splitlines()
    assert sorted(lines) == sorted(f"block [{2 * i}. {2 * i + 1}.]" for i in range(8))


def test_partitioned_jit_calls_back_once_with_the_whole_value():
    def program(lib, lnp, calls):
        P = lib.sharding.PartitionSpec
        mesh = _auto_mesh(lib, (8,), ("i",))
        sharding = lib.sharding.NamedSharding(mesh, P("i"))

        def f(x):
            lib.debug.callback(lambda v: calls.append(np.asarray(v).tolist()), x)
            return lib.pure_callback(lambda v: np.asarray(v) * 3,
                                     lib.ShapeDtypeStruct(x.shape, x.dtype), x) + 1
        return lib.jit(f, in_shardings=sharding, out_shardings=sharding)(lnp.arange(8.0))

    (ours, our_calls), (theirs, their_calls) = _run_both(program)
    np.testing.assert_array_equal(ours, theirs)
    assert our_calls == their_calls == [[float(i) for i in range(8)]]


@pytest.mark.parametrize("where", ["shard_map", "pmap"])
def test_ordered_callbacks_over_several_devices_raise_jax_error(where):
    for lib, lnp in _libs():
        def body(v):
            lib.debug.print("{}", v, ordered=True)
            return v
        if where == "pmap":
            f = lib.pmap(body)
        else:
            P = lib.sharding.PartitionSpec
            f = lib.jit(lib.shard_map(body, mesh=_auto_mesh(lib, (8,), ("i",)),
                                      in_specs=P("i"), out_specs=P("i")))
        with pytest.raises(ValueError, match="ordered effects are not supported for more "
                                             "than 1 device"):
            f(lnp.arange(8.0))


def test_ordered_io_callback_keeps_each_devices_order():
    def program(lib, lnp, calls):
        P = lib.sharding.PartitionSpec
        mesh = _auto_mesh(lib, (8,), ("i",))

        def body(ids, b):
            for step in range(3):
                lib.experimental.io_callback(
                    lambda i, v, step=step: calls.append((int(i[0]), step, float(v[0]))),
                    None, ids, b + step, ordered=True)
            return b
        f = lib.shard_map(body, mesh=mesh, in_specs=(P("i"), P("i")), out_specs=P("i"))
        return lib.jit(f)(lnp.arange(8), lnp.arange(8.0))

    (ours, our_calls), (theirs, their_calls) = _run_both(program)
    np.testing.assert_array_equal(ours, theirs)
    assert our_calls == their_calls and len(our_calls) == 24
    # (sorted above; the order within each device is checked on fluxion's own log)
    calls = []
    P = fluxion.sharding.PartitionSpec
    mesh = _auto_mesh(fluxion, (8,), ("i",))

    def body(ids, b):
        for step in range(3):
            fluxion.experimental.io_callback(lambda i, step=step: calls.append((int(i[0]), step)),
                                             None, ids, ordered=True)
        return b
    fluxion.jit(fluxion.shard_map(body, mesh=mesh, in_specs=(P("i"), P("i")),
                                  out_specs=P("i")))(fnp.arange(8), fnp.arange(8.0))
    fluxion.effects_barrier()
    for device in range(8):
        assert [s for d, s in calls if d == device] == [0, 1, 2]


@pytest.mark.parametrize("ordered", [False, True])
def test_io_callback_in_a_partitioned_jit_on_a_chosen_device(ordered):
    def program(lib, lnp, calls):
        P = lib.sharding.PartitionSpec
        mesh = _auto_mesh(lib, (8,), ("i",))
        sharding = lib.sharding.NamedSharding(mesh, P("i"))
        on_device = lib.sharding.SingleDeviceSharding(lib.devices()[3])

        def f(x):
            y = lib.experimental.io_callback(
                lambda v: (calls.append(np.asarray(v).tolist()), np.asarray(v) * 2)[1],
                lib.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=ordered, sharding=on_device)
            return y + 1
        jitted = lib.jit(f, in_shardings=sharding, out_shardings=sharding)
        assert "maximal_mesh_3" in jitted.lower(lnp.arange(8.0)).as_text()
        return jitted(lnp.arange(8.0))

    (ours, our_calls), (theirs, their_calls) = _run_both(program)
    np.testing.assert_array_equal(ours, theirs)
    assert our_calls == their_calls == [[float(i) for i in range(8)]]


def test_ordered_io_callback_in_pmap_runs_as_in_jax():
    def program(lib, lnp, calls):
        return lib.pmap(lambda v: lib.experimental.io_callback(
            lambda a: (calls.append(float(a)), np.asarray(a) * 3)[1],
            lib.ShapeDtypeStruct((), v.dtype), v, ordered=True))(lnp.arange(8.0))

    (ours, our_calls), (theirs, their_calls) = _run_both(program)
    np.testing.assert_array_equal(ours, theirs)
    assert our_calls == their_calls == [float(i) for i in range(8)]


@pytest.mark.parametrize("where", ["partial_auto", "one_device_mesh"])
def test_unsupported_callback_placements_are_clear_errors(where):
    P = fluxion.sharding.PartitionSpec
    if where == "partial_auto":
        mesh = _auto_mesh(fluxion, (4, 2), ("i", "j"))
        f = fluxion.shard_map(lambda b: (fluxion.debug.print("{}", b), b)[1], mesh=mesh,
                              in_specs=P("i"), out_specs=P("i"), axis_names={"i"})
        match = "leaves some mesh axes automatic"
    else:
        mesh = fluxion.sharding.Mesh(np.array(fluxion.devices()[:1]), ("i",))
        f = fluxion.shard_map(lambda b: (fluxion.debug.print("{}", b), b)[1], mesh=mesh,
                              in_specs=P("i"), out_specs=P("i"))
        match = "mesh of one device"
    with pytest.raises(NotImplementedError, match=match):
        fluxion.jit(f)(fnp.arange(8.0))
