"""Repeated calls do not grow memory: no Python allocation survives a jit call or eager op."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import gc, sys
    import fluxion, fluxion.numpy as jnp
    x, y = jnp.ones(3), jnp.ones(3)
    f = fluxion.jit(lambda a, b: a + b)
    def blocks_added(run, n=20000):
        run(200)
        gc.collect(); before = sys.getallocatedblocks()
        run(n)
        gc.collect(); return sys.getallocatedblocks() - before
    def jit_calls(n):
        for _ in range(n): f(x, y)
    def eager_ops(n):
        for _ in range(n): x * y
    print(blocks_added(jit_calls), blocks_added(eager_ops))
""")


def test_jit_calls_and_eager_ops_do_not_leak_allocations():
    # Before the fix, jaxlib's per-execution traceback records left one block per call.
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    jit_blocks, eager_blocks = map(int, out.stdout.split())
    assert jit_blocks < 500 and eager_blocks < 500, out.stdout


def _live_buffers():
    from fluxion._src.compiler import backend
    return len(backend.get_backend().client.live_arrays())


def test_dropping_arrays_frees_their_device_buffers():
    import gc
    import fluxion.numpy as jnp
    jnp.arange(100.0) + 1.5  # compiled first: a compile may evict an old executable, and
    # with it the device constants it held
    gc.collect()  # garbage of earlier tests in this worker must not be freed while we count
    gc.disable()
    try:
        base = _live_buffers()
        xs = [jnp.arange(100.0) + 1.5 for _ in range(200)]
    finally:
        gc.enable()
    assert _live_buffers() >= base + 200
    del xs
    gc.collect()
    assert _live_buffers() <= base + 2  # the cached constant 1.5, at most


def test_retracing_a_closure_over_a_large_constant_keeps_one_device_copy():
    import numpy as np
    import fluxion
    import fluxion.numpy as jnp
    big = np.arange(1_000_000, dtype=np.float32)
    f = fluxion.jit(lambda x: x + big)
    f(jnp.ones((1, 1_000_000))).block_until_ready()
    base = _live_buffers()
    for n in range(2, 8):  # six retraces, each a new executable
        f(jnp.ones((n, 1_000_000))).block_until_ready()
    assert _live_buffers() <= base + 6  # the six inputs jnp.ones made, no constant copies
    np.testing.assert_allclose(f(jnp.ones((2, 1_000_000)))[1, :3], [1, 2, 3])
    big2 = big.copy()
    big2[0] = -5  # different contents: a separate constant
    g = fluxion.jit(lambda x: x + big2)
    np.testing.assert_allclose(g(jnp.ones((1, 1_000_000)))[0, :2], [-4, 2])
