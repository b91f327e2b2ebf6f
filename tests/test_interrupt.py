"""A KeyboardInterrupt during a long computation leaves fluxion usable."""
import signal
import subprocess
import sys
import textwrap
import time

SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    import fluxion, fluxion.numpy as jnp

    @fluxion.jit
    def slow(x):
        return fluxion.lax.fori_loop(0, 20_000_000, lambda i, c: c * 0.999999 + 1e-6, x)

    slow(jnp.ones(2)).block_until_ready()  # compiled before the interrupt
    print("ready", flush=True)
    try:
        for _ in range(100):
            np.asarray(slow(jnp.ones(2)))
        print("not interrupted", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    print("after", float(jnp.sum(jnp.arange(4.0))), float(fluxion.jit(lambda a: a * 2)(3.0)))
""")


def test_keyboard_interrupt_leaves_fluxion_usable():
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert out.splitlines() == ["interrupted", "after 6.0 6.0"], out
