"""Host callbacks in programs over several devices, against JAX 0.10.2: in a shard_map body
each device calls back with its own block, in a pmap each replica, and in a partitioned jit one
call gets the whole value; ordered callbacks there raise JAX's ValueError. Run by
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
