"""Parallel workloads (60-69): pmap, shard_map and sharded jit over 8 CPU devices.

Both frameworks run in one process and each reads its device count when its CPU client is
created, so start the run with 8 host devices for both:
    XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m benchmarks.run --only 60,61,62
(fluxion reads the same flag, or FLUXION_NUM_CPU_DEVICES=8). With fewer devices each row
reports the error.
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Measures, Row, Steady, Value, Workload
from benchmarks.workloads import classification_data, cross_entropy_loss, init_mlp

DEVICES = 8


def _need_devices(jax):
    if jax.device_count() < DEVICES:
        raise RuntimeError(f"needs {DEVICES} devices, found {jax.device_count()}: run with "
                           "XLA_FLAGS=--xla_force_host_platform_device_count=8")


def pmap_train_step(jax, jnp, sizes):
    _need_devices(jax)
    loss = cross_entropy_loss(jax, jnp)

    def step(params, x, labels):
        value, grads = jax.value_and_grad(loss)(params, x, labels)
        grads = jax.lax.pmean(grads, "d")
        return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads), value

    pstep = jax.pmap(step, "d", in_axes=(None, 0, 0), out_axes=(None, 0))
    params = init_mlp(jnp, sizes["layers"])
    x, labels = classification_data(jnp, sizes["batch"], sizes["layers"][0], sizes["layers"][-1])
    x = jnp.reshape(x, (DEVICES, -1, x.shape[-1]))
    labels = jnp.reshape(labels, (DEVICES, -1))

    def run():
        out = pstep(params, x, labels)
        jax.block_until_ready(out)
    return Measures(pmap_step=Steady(run))


def pmap_dispatch(jax, jnp, sizes):
    _need_devices(jax)
    f = jax.pmap(lambda v: v + 1)
    x = jnp.ones((DEVICES, sizes["n"]), jnp.float32)
    return Measures(pmap_dispatch=Steady(lambda: jax.block_until_ready(f(x)), warmup=20))


def _shard_map_matmul(jax, jnp, sizes):
    _need_devices(jax)
    P = jax.sharding.PartitionSpec
    # A plain Mesh: jax.make_mesh's default Explicit axes would require pre-sharded inputs.
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:DEVICES]).reshape(4, 2), ("x", "y"))
    n = sizes["n"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    f = jax.shard_map(lambda u, v: jax.lax.psum(u @ v, "y"), mesh=mesh,
                      in_specs=(P("x", "y"), P("y", None)), out_specs=P("x", None))
    return Measures(sharded_matmul=Steady(lambda: jax.block_until_ready(f(a, b))))


def _two_process_allreduce(jax, jnp, sizes):
    """Launch 2 processes of this framework (1 CPU device each) that psum `mib` MiB through
    pmap over gloo; the row is rank 0's mean time per all-reduce."""
    import os
    import socket
    import subprocess
    import sys

    name = "jax" if jax.__name__ == "jax" else "fluxion"
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "allreduce_worker.py")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def run():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, PYTHONPATH=root)
        procs = [subprocess.Popen([sys.executable, worker, name, str(r), "2", str(port),
                                   str(sizes["mib"]), str(sizes["iters"])], env=env, cwd=root,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in range(2)]
        outs = [p.communicate(timeout=300) for p in procs]
        if any(p.returncode for p in procs):
            raise RuntimeError(outs[0][1][-300:] + outs[1][1][-300:])
        return float(outs[0][0].split("SECONDS")[1]), {}
    return Measures(allreduce=Value(run))


def jit_sharded_train_step(jax, jnp, sizes):
    """The data-parallel step of 60 as one jit program: parameters replicated, the batch split
    over 8 devices by NamedSharding; XLA's partitioner inserts the gradient all-reduce."""
    _need_devices(jax)
    loss = cross_entropy_loss(jax, jnp)
    P = jax.sharding.PartitionSpec
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:DEVICES]), ("d",))
    rep = jax.sharding.NamedSharding(mesh, P())
    split = jax.sharding.NamedSharding(mesh, P("d"))

    def step(params, x, labels):
        value, grads = jax.value_and_grad(loss)(params, x, labels)
        return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads), value

    jstep = jax.jit(step, in_shardings=(rep, split, split), out_shardings=(rep, rep))
    params = jax.device_put(init_mlp(jnp, sizes["layers"]), rep)
    x, labels = classification_data(jnp, sizes["batch"], sizes["layers"][0], sizes["layers"][-1])
    x, labels = jax.device_put(x, split), jax.device_put(labels, split)

    def run():
        jax.block_until_ready(jstep(params, x, labels))
    return Measures(sharded_step=Steady(run))


def _jit_sharded_matmul(jax, jnp, sizes):
    """A matmul of arrays already laid out over a 4x2 mesh, partitioned by XLA."""
    _need_devices(jax)
    P = jax.sharding.PartitionSpec
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:DEVICES]).reshape(4, 2), ("x", "y"))
    n = sizes["n"]
    rng = np.random.default_rng(0)
    S = lambda *spec: jax.sharding.NamedSharding(mesh, P(*spec))  # noqa: E731
    a = jax.device_put(rng.standard_normal((n, n)).astype(np.float32), S("x", "y"))
    b = jax.device_put(rng.standard_normal((n, n)).astype(np.float32), S("y", None))
    f = jax.jit(lambda u, v: u @ v, out_shardings=S("x", None))
    return Measures(jit_sharded_matmul=Steady(lambda: jax.block_until_ready(f(a, b))))


WORKLOADS = [
    Workload(60, "pmap_train_step",
             (Row("pmap_step", "pmap data-parallel train step, MLP {layers}, global batch {batch}, "
                               "8 devices", "ms", "steady"),),
             pmap_train_step, {"layers": [784, 512, 512, 10], "batch": 1024},
             {"layers": [784, 64, 10], "batch": 64}),
    Workload(61, "pmap_dispatch",
             (Row("pmap_dispatch", "pmap dispatch of v + 1, f32[8,{n}]", "us", "dispatch"),),
             pmap_dispatch, {"n": 3}, {"n": 3}),
    Workload(62, "shard_map_matmul",
             (Row("sharded_matmul", "shard_map matmul {n}x{n} over a 4x2 mesh (host inputs)",
                  "ms", "steady"),),
             _shard_map_matmul, {"n": 4096}, {"n": 256}),
    Workload(63, "two_process_allreduce",
             (Row("allreduce", "2 processes x 1 CPU device: pmap psum of {mib} MiB over gloo",
                  "ms", None),),
             _two_process_allreduce, {"mib": 16, "iters": 10}, {"mib": 16, "iters": 3}, reps=3),
    Workload(64, "jit_sharded_train_step",
             (Row("sharded_step", "jit + NamedSharding data-parallel train step, MLP {layers}, "
                                  "global batch {batch}, 8 devices", "ms", "steady"),),
             jit_sharded_train_step, {"layers": [784, 512, 512, 10], "batch": 1024},
             {"layers": [784, 64, 10], "batch": 64}),
    Workload(65, "jit_sharded_matmul",
             (Row("jit_sharded_matmul", "jit matmul {n}x{n} of arrays sharded over a 4x2 mesh",
                  "ms", "steady"),),
             _jit_sharded_matmul, {"n": 4096}, {"n": 256}),
]
