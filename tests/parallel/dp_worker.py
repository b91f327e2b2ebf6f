"""One process of a data-parallel run: `dp_worker.py RANK NPROC PORT [die]`.

Trains a linear model for 3 SGD steps with pmap + pmean over all processes' devices and
prints the final parameters; with `die`, rank 1 exits before the first step."""
import os
import sys

import numpy as np

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import lax

rank, nproc, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
die = len(sys.argv) > 4
jax.distributed.initialize(f"127.0.0.1:{port}", nproc, rank, initialization_timeout=30,
                           heartbeat_timeout_seconds=5)
assert jax.process_index() == rank and jax.process_count() == nproc
assert len(jax.devices()) == nproc * len(jax.local_devices())

rng = np.random.default_rng(0)
X = rng.standard_normal((8, 5)).astype(np.float32)
Y = rng.standard_normal((8,)).astype(np.float32)
per = X.shape[0] // nproc
x, y = X[rank * per:(rank + 1) * per], Y[rank * per:(rank + 1) * per]


def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


def step(w, x, y):
    g = lax.pmean(jax.grad(loss)(w, x, y), "p")
    return w - 0.1 * g


pstep = jax.pmap(step, "p", in_axes=(None, 0, 0), out_axes=None)
w = np.zeros(5, np.float32)
if die and rank == 1:
    os._exit(3)
for _ in range(3):
    w = pstep(w, x[None], y[None])
from fluxion.experimental import multihost_utils as mh  # noqa: E402
gathered = mh.process_allgather(np.full((2,), rank, np.float32))
assert np.array_equal(gathered, np.repeat(np.arange(nproc, dtype=np.float32)[:, None], 2, 1)), gathered
assert np.array_equal(mh.process_allgather(np.full((2,), rank, np.int32), tiled=True),
                      np.repeat(np.arange(nproc), 2))
assert float(mh.broadcast_one_to_all(np.float32(rank + 7))) == 7.0
mh.sync_global_devices("end")
print("PARAMS", " ".join(repr(float(v)) for v in np.asarray(w)), flush=True)
jax.distributed.shutdown()
