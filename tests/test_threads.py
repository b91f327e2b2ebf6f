"""Threads making a process's first fluxion calls at once share one backend."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import threading
    import numpy as np
    import fluxion, fluxion.numpy as jnp

    errors, barrier = [], threading.Barrier(8)

    def work(i):
        try:
            barrier.wait()
            x = jnp.ones(3) * i
            assert np.allclose(fluxion.jit(lambda a: a + 1)(x), i + 1)
            assert np.allclose(jnp.sin(x), np.sin(np.full(3, i, np.float32)), atol=1e-6)
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    from fluxion._src.compiler import backend
    clients = {id(b.client) for b in backend._backends.values()}
    print(len(errors), len(clients), errors[:1])
""")


def test_first_calls_from_eight_threads_share_one_client():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] == ["0", "1"], out.stdout
