"""Bad input catalogue: pmap, collectives and their axis names, shard_map, meshes,
distributed.initialize, and arrays that were deleted or donated.

The family's process has the one CPU device of a default run, so "more devices than exist"
needs only two. distributed.initialize refuses to run after a computation, so its argument
checks run in a fresh interpreter each (`_fresh`), with a time limit: none may hang.
"""
import builtins
import os
import subprocess
import sys

import numpy as np

from catalogue import Case, family_test


def np_(m):
    return m.numpy


def _mesh(m, names=("x",)):
    return m.sharding.Mesh(np.array(m.devices()[:1]).reshape((1,) * len(names)), names)


def _P(m, *spec):
    return m.sharding.PartitionSpec(*spec)


def _smap(m, f, in_specs, out_specs, *args, **kw):
    return m.shard_map(f, mesh=_mesh(m), in_specs=in_specs, out_specs=out_specs, **kw)(*args)


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fresh(m, code, timeout=60, devices=None):
    """Run `code` (with `m` the framework) in a new interpreter, with `devices` CPU devices if
    given; re-raise its exception (by class name: a builtin class, else RuntimeError)."""
    prog = (f"import {m.__name__} as m\n"
            "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) +
            "except Exception as e:\n"
            "    print('@@', type(e).__name__, str(e).replace(chr(10), ' ')[:400])\n"
            "else:\n"
            "    print('@@ None')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, env.get("PYTHONPATH")]))
    if devices:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                            f" --xla_force_host_platform_device_count={devices}")
    proc = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                          timeout=timeout, env=env)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("@@")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"the fresh process ended with {proc.returncode}: "
                             f"{proc.stderr[-1000:]}")
    _, name, *msg = lines[-1].split(" ", 2)
    if name != "None":
        raise getattr(builtins, name, RuntimeError)(" ".join(msg))


def _deleted(m):
    x = np_(m).arange(3.0)
    x.delete()
    return x


def _donated(m):
    x = np_(m).arange(3.0)
    m.jit(lambda a: a * 2, donate_argnums=0)(x)
    return x


PMAP_CASES = [
    Case("pmap_not_callable", lambda m: m.pmap(3), match="callable"),
    Case("pmap_more_devices_than_exist", lambda m: m.pmap(lambda x: x * 2)(np_(m).ones((2, 3))),
         match="devices"),
    Case("pmap_leading_axis_vs_devices", lambda m: m.pmap(lambda x: x, devices=m.devices()[:1])(
        np_(m).ones((2, 3))), match="[Ll]eading axis size"),
    Case("pmap_inconsistent_sizes", lambda m: m.pmap(lambda x, y: x + y)(
        np_(m).ones((1, 2)), np_(m).ones((2, 2))), match="inconsistent sizes"),
    Case("pmap_scalar_argument", lambda m: m.pmap(lambda x: x)(1.0), match='rank'),
    Case("pmap_nothing_mapped", lambda m: m.pmap(lambda x: x, in_axes=None)(np_(m).ones(1)), match='mapped axis'),
    # JAX: IndexError (tuple index out of range).
    Case("pmap_in_axes_beyond_rank", lambda m: m.pmap(lambda x: x, in_axes=2)(np_(m).ones((1, 2))),
         raises=ValueError, match="axis 2", jax_ok=False),
    Case("pmap_in_axes_wrong_length", lambda m: m.pmap(lambda x, y: x, in_axes=(0,))(
        np_(m).ones(1), np_(m).ones(1)), match='in_axes'),
    Case("pmap_static_broadcasted_beyond", lambda m: m.pmap(
        lambda x: x, static_broadcasted_argnums=3)(np_(m).ones(1)), match='static_broadcasted_argnums'),
    Case("pmap_unknown_axis_in_psum", lambda m: m.pmap(lambda x: m.lax.psum(x, "j"),
                                                       axis_name="i")(np_(m).ones(1)),
         match="j"),
    Case("pmap_unknown_axis_in_axis_index", lambda m: m.pmap(
        lambda x: x + m.lax.axis_index("j"), axis_name="i")(np_(m).ones(1)), match="j"),
    Case("pmap_unnamed_psum", lambda m: m.pmap(lambda x: m.lax.psum(x, "i"))(np_(m).ones(1)),
         match="i"),
    Case("ppermute_out_of_range", lambda m: m.pmap(
        lambda x: m.lax.ppermute(x, "i", perm=[(0, 5)]), axis_name="i")(np_(m).ones(1)), match='outside the axis'),
    Case("ppermute_duplicate_destination", lambda m: m.pmap(
        lambda x: m.lax.ppermute(x, "i", perm=[(0, 0), (0, 0)]), axis_name="i")(np_(m).ones(1)), match='unique'),
    # collectives with no axis bound at all
    Case("psum_outside_any_map", lambda m: m.lax.psum(1.0, "i"), match="i"),
    Case("pmean_under_jit_unbound", lambda m: m.jit(lambda x: m.lax.pmean(x, "i"))(1.0), match='unbound axis name: i'),
    Case("psum_under_grad_unbound", lambda m: m.grad(lambda x: m.lax.psum(x, "i"))(1.0), match='unbound axis name: i'),
    Case("all_gather_unbound", lambda m: m.jit(lambda x: m.lax.all_gather(x, "i"))(np_(m).ones(2)), match='unbound axis name: i'),
    Case("axis_index_unbound", lambda m: m.jit(lambda: m.lax.axis_index("i"))(), match='unbound axis name: i'),
    Case("psum_vmap_other_name", lambda m: m.vmap(lambda x: m.lax.psum(x, "j"),
                                                  axis_name="i")(np_(m).ones(2)), match='unbound axis name: j'),
]

MESH_CASES = [
    Case("mesh_ndim_vs_names", lambda m: m.sharding.Mesh(np.array(m.devices()[:1]), ("x", "y")),
         match="ndim"),
    Case("make_mesh_more_devices", lambda m: m.make_mesh((2,), ("x",)), match="[Dd]evices"),
    Case("make_mesh_names_vs_shape", lambda m: m.make_mesh((1,), ("x", "y")), match='axis_names'),
    Case("shard_map_unknown_axis_in_spec", lambda m: _smap(
        m, lambda b: b, _P(m, "y"), _P(m, "x"), np_(m).ones(2)), match="refers to 'y'"),
    Case("shard_map_spec_longer_than_rank", lambda m: _smap(
        m, lambda b: b, _P(m, "x", None), _P(m, "x"), np_(m).ones(2)), match='rank'),
    Case("shard_map_specs_tree_mismatch", lambda m: _smap(
        m, lambda a, b: a, (_P(m, "x"),) * 3, _P(m, "x"), np_(m).ones(2), np_(m).ones(2)), match='in_specs'),
    Case("shard_map_out_spec_unknown_axis", lambda m: _smap(
        m, lambda b: b, _P(m, "x"), _P(m, "z"), np_(m).ones(2)), match="refers to 'z'"),
    Case("shard_map_out_specs_tree_mismatch", lambda m: _smap(
        m, lambda b: (b, b), _P(m, "x"), (_P(m, "x"),) * 3, np_(m).ones(2)), match='out_specs'),
    Case("shard_map_unknown_axis_in_psum", lambda m: _smap(
        m, lambda b: m.lax.psum(b, "q"), _P(m, "x"), _P(m, "x"), np_(m).ones(2)), match="q",
         raises=NameError, jax_ok=False),  # JAX: a bare AssertionError
    Case("shard_map_spec_repeats_axis", lambda m: _smap(
        m, lambda b: b, _P(m, "x", "x"), _P(m, "x", "x"), np_(m).ones((2, 2))), match="`x`"),
    Case("shard_map_spec_repeats_axis_in_tuple", lambda m: _smap(
        m, lambda b: b, _P(m, ("x", "x")), _P(m, "x"), np_(m).ones((2, 2))), match='`x`'),
]

DISTRIBUTED_CASES = [
    Case("distributed_after_computation", lambda m: (
        (np_(m).ones(2) + 1).block_until_ready(),
        m.distributed.initialize("localhost:12345", 2, 0)), match="before"),
    Case("distributed_process_id_out_of_range", lambda m: _fresh(
        m, "m.distributed.initialize('localhost:12346', num_processes=2, process_id=5)"),
         raises=ValueError, jax_ok=False, match="process_id"),
    Case("distributed_missing_arguments", lambda m: _fresh(
        m, "m.distributed.initialize('localhost:12347')"), raises=ValueError, jax_ok=False, match='must be given'),
    # JAX: IndexError (list index out of range).
    Case("distributed_address_without_port", lambda m: _fresh(
        m, "m.distributed.initialize('nonsense', num_processes=1, process_id=0)"),
         raises=ValueError, match="host:port", jax_ok=False),
    Case("distributed_num_processes_str", lambda m: _fresh(
        m, "m.distributed.initialize('localhost:12348', num_processes='2', process_id=0)"),
         raises=TypeError, match="num_processes", jax_ok=False),
    # JAX accepts any local_device_ids here.
    Case("distributed_local_device_ids_str", lambda m: _fresh(
        m, "m.distributed.initialize('localhost:12349', num_processes=1, process_id=0, "
           "local_device_ids='x')"), raises=TypeError, match="local_device_ids", jax_ok=False),
    # A process that initializes and never calls shutdown() must still exit cleanly (it
    # aborted in jaxlib's client when the service went first).
    Case("distributed_exit_without_shutdown", lambda m: _fresh(
        m, "import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); "
           "port = s.getsockname()[1]; s.close()\n"
           "m.distributed.initialize(f'localhost:{port}', num_processes=1, process_id=0)\n"
           "m.numpy.ones(2).block_until_ready()"), raises=None, jax_ok=False),
]

_TWO = ("d = m.devices()\n"
        "x = m.device_put(m.numpy.ones(2), d[0])\n"
        "y = m.device_put(m.numpy.ones(2), d[1])\n")

# In a process with two CPU devices (jaxlib's message counted replicas before).
DEVICE_CASES = [
    Case("mixed_devices_eager", lambda m: _fresh(m, _TWO + "(x + y).block_until_ready()",
                                                 devices=2), raises=ValueError,
         match="incompatible devices"),
    Case("mixed_devices_jit", lambda m: _fresh(
        m, _TWO + "m.jit(lambda a, b: a @ b)(x, y).block_until_ready()", devices=2),
         raises=ValueError, match="incompatible devices"),
    Case("mixed_devices_grad", lambda m: _fresh(
        m, _TWO + "m.grad(lambda a, b: (a * b).sum())(x, y).block_until_ready()", devices=2),
         raises=ValueError, match="incompatible devices"),
    # A program compiled ahead of time for device 0, called on an array committed to device 1
    # (a plain jit call would run on device 1: computation follows data).
    Case("compiled_for_another_device", lambda m: _fresh(
        m, _TWO + "m.jit(lambda a: a * 2).lower(x).compile()(y).block_until_ready()",
        devices=2), raises=ValueError, match="input shardings that disagree"),
]

_EIGHT = ("import numpy as np\n"
          "from {0}.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
          "mesh = Mesh(np.array(m.devices()), ('x',))\n")

# pmap where its devices cannot be laid out, in a process with eight CPU devices. JAX
# raises ValueError (incompatible devices) for the first three; it rejects nested pmap and
# fails with an AttributeError on a Ref closed over by a pmap under jit.
LAYOUT_CASES = [
    Case("pmap_inside_sharded_jit", lambda m: _fresh(m, _EIGHT.format(m.__name__) + (
        "m.jit(lambda a: m.pmap(lambda b: b * 2)(a.reshape(2, -1)),\n"
        "      in_shardings=NamedSharding(mesh, P('x')))(np.ones(8, np.float32))"), devices=8),
         raises=ValueError, match="jit with in_shardings"),
    Case("pmap_inside_shard_map", lambda m: _fresh(m, _EIGHT.format(m.__name__) + (
        "m.shard_map(lambda a: m.pmap(lambda b: b * 2)(a.reshape(1, -1)), mesh=mesh,\n"
        "            in_specs=P('x'), out_specs=P('x'))(np.ones(16, np.float32))"), devices=8),
         raises=ValueError, match="inside shard_map"),
    Case("jit_pmaps_sizes_do_not_divide", lambda m: _fresh(m, (
        "import numpy as np\n"
        "m.jit(lambda a, b: (m.pmap(lambda u: u * 2)(a), m.pmap(lambda u: u + 1)(b)))(\n"
        "    np.ones((4, 2)), np.ones((3, 2)))"), devices=8),
         raises=ValueError, match="size 3 cannot be laid out on the 4 devices"),
    Case("nested_pmap_with_devices", lambda m: _fresh(m, (
        "import numpy as np\n"
        "m.pmap(m.pmap(lambda a: a * 2), devices=m.devices()[:2])(np.ones((2, 2, 3)))"),
        devices=8), raises=NotImplementedError, match="nested pmap with devices=", jax_ok=False),
    Case("pmap_closing_over_ref_under_jit", lambda m: _fresh(m, (
        "import numpy as np\n"
        "r = m.new_ref(m.numpy.zeros((2, 3)))\n"
        "m.jit(lambda y: m.pmap(lambda x: x + r[...])(y))(np.ones((2, 3), np.float32))"),
        devices=2), raises=NotImplementedError, match="Refs under jit", jax_ok=False),
]

DELETED_CASES = [
    Case("deleted_eager_op", lambda m: _deleted(m) + 1, raises=RuntimeError, match="deleted"),
    Case("deleted_to_numpy", lambda m: np.asarray(_deleted(m)), raises=RuntimeError,
         match="deleted"),
    Case("deleted_block_until_ready", lambda m: _deleted(m).block_until_ready(),
         raises=RuntimeError, match="deleted"),
    Case("deleted_indexing", lambda m: _deleted(m)[0], raises=RuntimeError, match="deleted"),
    Case("deleted_device_put", lambda m: m.device_put(_deleted(m)), raises=RuntimeError,
         match="deleted"),
    Case("deleted_under_vmap", lambda m: m.vmap(lambda a: a * 2)(_deleted(m)),
         raises=RuntimeError, match="deleted"),
    Case("deleted_under_grad", lambda m: m.grad(lambda a: (a * 2).sum())(_deleted(m)),
         raises=RuntimeError, match="deleted"),
    Case("donated_eager_op", lambda m: _donated(m) * 3, raises=RuntimeError, match="deleted"),
    Case("donated_to_numpy", lambda m: np.asarray(_donated(m)), raises=RuntimeError,
         match="deleted"),
    Case("donated_again", lambda m: m.jit(lambda a: a + 1, donate_argnums=0)(_donated(m)),
         raises=RuntimeError, match="deleted"),
    Case("donate_argnums_beyond", lambda m: m.jit(lambda a: a, donate_argnums=3)(1.0),
         match="donate_argnums"),
    Case("pmap_deleted", lambda m: m.pmap(lambda a: a)(_deleted(m).reshape(3, 1)[:1]),
         raises=RuntimeError, match="deleted"),
]

CASES = (PMAP_CASES + MESH_CASES + DISTRIBUTED_CASES + DEVICE_CASES + LAYOUT_CASES +
         DELETED_CASES)

test_case = family_test(CASES, __file__)
