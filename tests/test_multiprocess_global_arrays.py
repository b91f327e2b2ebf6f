"""Global Arrays over the devices of two local processes (2 CPU devices each) joined by
fluxion.distributed: built from each process's data, run through partitioned `jit`s (gloo
carries XLA's collectives), read back shard by shard and with process_allgather. The checks
themselves run in tests/parallel/global_array_worker.py, against NumPy."""
import os
import pathlib
import socket
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "parallel" / "global_array_worker.py"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_global_arrays_across_two_processes():
    port = _free_port()
    env = dict(os.environ, FLUXION_NUM_CPU_DEVICES="2", PYTHONPATH=str(ROOT))
    env.pop("XLA_FLAGS", None)
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(r), str(port)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    results = []
    try:
        for p in procs:
            results.append(p.communicate(timeout=240))  # a hang fails here, never blocks
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for rank, (p, (out, err)) in enumerate(zip(procs, results)):
        assert p.returncode == 0, f"process {rank}:\n{out[-2000:]}\n{err[-4000:]}"
        assert f"DONE {rank}" in out, out[-2000:]
