"""One process of a 2-process run with global Arrays over both processes' devices:
`global_array_worker.py RANK PORT` (2 CPU devices per process, FLUXION_NUM_CPU_DEVICES=2).

Every check compares with NumPy on the whole data, which each process can compute; the
process prints DONE at the end. Run by tests/test_multiprocess_global_arrays.py."""
import sys

import numpy as np

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.experimental import multihost_utils as mh
from fluxion.sharding import Mesh, NamedSharding, PartitionSpec as P

rank, port = int(sys.argv[1]), int(sys.argv[2])
jax.distributed.initialize(f"127.0.0.1:{port}", 2, rank, initialization_timeout=30,
                           heartbeat_timeout_seconds=5)
assert jax.process_count() == 2 and jax.device_count() == 4 and jax.local_device_count() == 2

# rows of the mesh are processes: "x" crosses processes, "y" stays inside one
mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("x", "y"))
rng = np.random.default_rng(0)
G = rng.standard_normal((8, 4)).astype(np.float32)
W = rng.standard_normal((4, 6)).astype(np.float32)


def check_shards(arr, want, n_local=2):
    shards = arr.addressable_shards
    assert len(shards) == n_local, shards
    for sh in shards:
        assert sh.device.process_index == rank
        np.testing.assert_allclose(np.asarray(sh.data), want[sh.index], rtol=1e-5, atol=1e-5)
    assert len(arr.global_shards) == 4
    assert sum(s.data is None for s in arr.global_shards) == 4 - n_local


# 1. this process's rows -> one global array (global shape inferred)
rows = NamedSharding(mesh, P("x"))
a = jax.make_array_from_process_local_data(rows, G[4 * rank:4 * rank + 4])
assert a.shape == (8, 4) and a.sharding == rows and not a.is_fully_addressable
check_shards(a, G)
try:
    np.asarray(a)
    raise AssertionError("reading a non-addressable array should fail")
except RuntimeError as e:
    assert "non-addressable" in str(e)
assert repr(a) == "Array(shape=(8, 4), dtype=float32)"

# 2. the same with an explicit global shape, and from a callback
cols = NamedSharding(mesh, P("x", "y"))
b = jax.make_array_from_process_local_data(cols, G[4 * rank:4 * rank + 4], (8, 4))
check_shards(b, G)
try:
    jax.make_array_from_process_local_data(rows, G[:3], (8, 4))
    raise AssertionError("local data matching neither the global nor the process shape")
except ValueError as e:
    assert "Invalid host data" in str(e), e
pair = jax.make_array_from_process_local_data(
    {"r": rows, "c": cols}, {"r": G[4 * rank:4 * rank + 4], "c": G[4 * rank:4 * rank + 4]},
    {"r": (8, 4), "c": None})
assert pair["r"].sharding == rows and pair["c"].sharding == cols
check_shards(pair["r"], G)
check_shards(pair["c"], G)
asked = []
c = jax.make_array_from_callback((8, 4), cols, lambda idx: asked.append(idx) or G[idx])
check_shards(c, G)
assert len(asked) == 2  # only this process's blocks

# 3. a partitioned jit across both processes with given in/out shardings
f = jax.jit(lambda x, w: jnp.tanh(x @ w), in_shardings=(cols, NamedSharding(mesh, P())),
            out_shardings=rows)
y = f(c, W)
assert y.sharding == rows and y.shape == (8, 6)
check_shards(y, np.tanh(G @ W))
np.testing.assert_allclose(mh.process_allgather(y, tiled=True), np.tanh(G @ W), rtol=1e-5,
                           atol=1e-5)
try:
    mh.process_allgather(y)
    raise AssertionError("an untiled gather of a global array should fail")
except ValueError as e:
    assert "tiled=True" in str(e)

# 4. a reduction over the cross-process axis, read on every process
s = jax.jit(lambda x: jnp.sum(x * 2.0, axis=0), out_shardings=NamedSharding(mesh, P()))(a)
assert s.is_fully_replicated
np.testing.assert_allclose(np.asarray(s), 2 * G.sum(0), rtol=1e-5)

# 5. an eager op on a global array stays laid out over both processes
check_shards(c * 3.0 + 1.0, G * 3 + 1)

# 6. shard_map over both axes: psum over "x" crosses processes
psum_x = jax.jit(jax.shard_map(lambda v: lax.psum(v, "x"), mesh=mesh, in_specs=P("x", "y"),
                               out_specs=P(None, "y")))
np.testing.assert_allclose(mh.process_allgather(psum_x(c), tiled=True), G[:4] + G[4:],
                           rtol=1e-5)

# manual over "x" only (across processes), "y" left to the partitioner
part = jax.jit(jax.shard_map(lambda v: lax.psum(jnp.sin(v), "x"), mesh=mesh, in_specs=P("x"),
                             out_specs=P(), axis_names={"x"}), in_shardings=cols)
np.testing.assert_allclose(mh.process_allgather(part(c), tiled=True),
                           np.sin(G[:4]) + np.sin(G[4:]), rtol=1e-5)

# 7. host-local <-> global conversions (the local mesh is this process's row of devices)
assert mesh.local_mesh.devices.shape == (1, 2)
assert [d.process_index for d in mesh.local_mesh.devices.flat] == [rank, rank]
g, r = mh.host_local_array_to_global_array((G[4 * rank:4 * rank + 4], W), mesh, (P("x", "y"), P()))
assert g.shape == (8, 4) and g.sharding == cols and r.shape == W.shape and r.is_fully_replicated
check_shards(g, G)
np.testing.assert_array_equal(np.asarray(r), W)
back = mh.global_array_to_host_local_array(jax.jit(lambda v: v * 2)(g), mesh, P("x"))
assert back.shape == (4, 4) and back.is_fully_addressable
np.testing.assert_allclose(np.asarray(back), 2 * G[4 * rank:4 * rank + 4], rtol=1e-6)

# 8. data-parallel training: the batch split over all 4 devices, parameters replicated
X = rng.standard_normal((16, 4)).astype(np.float32)
Y = rng.standard_normal((16,)).astype(np.float32)
batch = NamedSharding(mesh, P(("x", "y")))
xs = jax.make_array_from_process_local_data(batch, X[8 * rank:8 * rank + 8])
ys = jax.make_array_from_process_local_data(batch, Y[8 * rank:8 * rank + 8])


def loss(w, x, t):
    return jnp.mean((x @ w - t) ** 2)


step = jax.jit(lambda w, x, t: w - 0.1 * jax.grad(loss)(w, x, t),
               out_shardings=NamedSharding(mesh, P()))
w = np.zeros(4, np.float32)
ref = w.copy()
for _ in range(3):
    w = step(w, xs, ys)
    ref = ref - 0.1 * (2 * X.T @ (X @ ref - Y) / len(Y))
np.testing.assert_allclose(np.asarray(w), ref, rtol=1e-4, atol=1e-5)

# assert_equal: equal pytrees pass; a leaf that differs between the processes fails on both.
mh.assert_equal({"a": np.arange(3), "b": 1.5, "c": jnp.ones(2)}, "same")
try:
    mh.assert_equal({"r": np.array([rank, 7])}, "ranks differ")
except AssertionError as e:
    assert str(e).startswith("ranks differ. Expected: {'r': array([0, 7, 1, 7]"), str(e)
else:
    raise AssertionError("assert_equal passed on values that differ between processes")

# live_devices: both processes are alive, so every device is; a list without this process's
# devices is refused.
with mh.live_devices(jax.devices()) as alive:
    assert alive == sorted(jax.devices(), key=lambda d: d.id), alive
others = [d for d in jax.devices() if d.process_index != rank]
try:
    with mh.live_devices(others):
        pass
except ValueError as e:
    assert "local devices" in str(e), str(e)
else:
    raise AssertionError("live_devices accepted devices of other processes only")

mh.sync_global_devices("done")
print("DONE", rank, flush=True)
jax.distributed.shutdown()
