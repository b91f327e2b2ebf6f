"""One process of the 2-process all-reduce benchmark (63):
`allreduce_worker.py FRAMEWORK RANK NPROC PORT MIB ITERS`; rank 0 prints `SECONDS <mean>`."""
import os
import sys
import time

os.environ.pop("XLA_FLAGS", None)
os.environ["FLUXION_NUM_CPU_DEVICES"] = "1"
framework, rank, nproc, port, mib, iters = sys.argv[1], *map(int, sys.argv[2:7])
if framework == "jax":
    import jax
    import jax.numpy as jnp
else:
    import fluxion as jax
    import fluxion.numpy as jnp
import numpy as np  # noqa: E402

jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=nproc, process_id=rank)
x = np.full((1, mib * (1 << 20) // 4), rank + 1, np.float32)
f = jax.pmap(lambda v: jax.lax.psum(v, "p"), "p")
out = f(x)
jax.block_until_ready(out)
assert float(np.asarray(out)[0, 0]) == nproc * (nproc + 1) / 2
start = time.perf_counter()
for _ in range(iters):
    jax.block_until_ready(f(x))
if rank == 0:
    print("SECONDS", (time.perf_counter() - start) / iters, flush=True)
jax.distributed.shutdown()
