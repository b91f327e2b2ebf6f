"""Resource soak: memory and live device buffers over many calls (figures for
docs/reliability.md). `python benchmarks/soak.py [--calls N] [--retraces M]`."""
from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--retraces", type=int, default=1_000)
    args = parser.parse_args(argv)
    import numpy as np
    import fluxion
    import fluxion.numpy as jnp
    from fluxion._src.compiler import backend
    client = backend.get_backend().client
    x, y = jnp.ones(3), jnp.ones(3)
    f = fluxion.jit(lambda a, b: a * b + 1.0)

    def jit_calls(n):
        for _ in range(n):
            f(x, y)

    def eager_ops(n):
        for _ in range(n):
            x * y

    def retraces(n):
        g = fluxion.jit(lambda a: jnp.tanh(a) * 2)
        for i in range(n):
            g(np.ones(i + 1, np.float32))

    print("| workload | count | RSS growth | Python heap growth (tracemalloc) | live buffers |")
    print("|---|---|---|---|---|")
    for name, run, count in [("jit calls", jit_calls, args.calls),
                             ("eager ops", eager_ops, args.calls),
                             ("retraces with new shapes", retraces, args.retraces)]:
        run(min(count, 1000))  # warm up: compile, fill caches
        gc.collect()
        tracemalloc.start()
        heap0, rss0, live0 = tracemalloc.get_traced_memory()[0], rss_bytes(), len(client.live_arrays())
        run(count)
        gc.collect()
        heap1, rss1, live1 = tracemalloc.get_traced_memory()[0], rss_bytes(), len(client.live_arrays())
        tracemalloc.stop()
        print(f"| {name} | {count:,} | {(rss1 - rss0) / 1e6:+.2f} MB | "
              f"{(heap1 - heap0) / 1e3:+.1f} kB | {live1 - live0:+d} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
