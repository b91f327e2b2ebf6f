"""Where fluxion's time goes when it runs one tiny op: `python benchmarks/profile_dispatch.py`.

Times (wall clock and this thread's CPU time), per call of x + y on f32[3], each call waiting
for its result:
  - the bare jaxlib floor: `loaded.execute_sharded(bufs).consume_with_handlers(handlers)` on
    the very executable fluxion's jit compiled, with its input buffers and result handlers;
  - fluxion's jit fast path and its eager op, and the same two on JAX;
then prints cProfile listings of fluxion's two paths. It reads fluxion internals (the jit
cache, the eager primitive cache) only to reach the executable; it changes nothing.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import fluxion  # noqa: E402
import fluxion.numpy as fnp  # noqa: E402


def per_call_us(fn, calls: int, reps: int, clock) -> float:
    """Median over `reps` blocks of the mean `clock` time of `calls` calls, in microseconds."""
    for _ in range(min(calls, 200)):
        fn()
    blocks = []
    for _ in range(reps):
        start = clock()
        for _ in range(calls):
            fn()
        blocks.append((clock() - start) / calls * 1e6)
    return statistics.median(blocks)


def fluxion_paths():
    add = fluxion.jit(lambda x, y: x + y)
    x = fnp.ones((3,), fnp.float32)
    y = fnp.ones((3,), fnp.float32)
    add(x, y).block_until_ready()
    (x + y).block_until_ready()
    (entry,) = add._cache.values()
    executable = entry.compiled.executable  # fluxion's backend.Executable around jaxlib's
    bufs = [x._buf, y._buf]
    loaded, handlers = executable.loaded, executable.handlers

    def bare():
        loaded.execute_sharded(bufs).consume_with_handlers(handlers)[0].block_until_ready()

    return {
        "jaxlib execute_sharded + consume_with_handlers (fluxion's executable)": bare,
        "fluxion jit(x + y)": lambda: add(x, y).block_until_ready(),
        "fluxion eager x + y": lambda: (x + y).block_until_ready(),
    }


def jax_paths():
    add = jax.jit(lambda x, y: x + y)
    x = jnp.ones((3,), jnp.float32)
    y = jnp.ones((3,), jnp.float32)
    return {
        "jax jit(x + y)": lambda: add(x, y).block_until_ready(),
        "jax eager x + y": lambda: (x + y).block_until_ready(),
    }


def profile(fn, calls: int, top: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime")
    stats.print_stats(top)
    return out.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    flx, jx = fluxion_paths(), jax_paths()
    print(f"µs per call, median of {args.reps} blocks of {args.calls} calls, each blocking on its "
          "result.\nwall: elapsed time; cpu: CPU time of this thread, which a busy shared machine "
          "disturbs much less.")
    print(f"  {'wall':>8} {'cpu':>8}")
    for name, fn in {**flx, **jx}.items():
        wall = per_call_us(fn, args.calls, args.reps, time.perf_counter)
        cpu = per_call_us(fn, args.calls, args.reps, time.thread_time)
        print(f"  {wall:8.2f} {cpu:8.2f}  {name}")
    for name in ("fluxion jit(x + y)", "fluxion eager x + y"):
        print(f"\n=== cProfile of {name}, {args.calls} calls, sorted by own time ===")
        print(profile(flx[name], args.calls, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
