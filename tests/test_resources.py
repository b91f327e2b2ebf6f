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
