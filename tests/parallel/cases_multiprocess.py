"""Several local processes on 127.0.0.1 (each with one CPU device) joined by
fluxion.distributed; run by tests/test_eight_devices.py."""
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(nproc, *extra):
    port = _free_port()
    env = dict(os.environ, FLUXION_NUM_CPU_DEVICES="1", PYTHONPATH=str(ROOT))
    env.pop("XLA_FLAGS", None)
    return [subprocess.Popen([sys.executable, str(HERE / "dp_worker.py"), str(r), str(nproc),
                              str(port), *extra], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for r in range(nproc)]


def _reference():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 5)).astype(np.float32)
    Y = rng.standard_normal((8,)).astype(np.float32)
    w = np.zeros(5, np.float32)
    for _ in range(3):
        w = w - 0.1 * (2 * X.T @ (X @ w - Y) / len(Y))
    return w


@pytest.mark.parametrize("nproc", [2, 4])
def test_data_parallel_step_matches_single_process(nproc):
    procs = _launch(nproc)
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        params = np.array([float(v) for v in out.split("PARAMS")[1].split()])
        np.testing.assert_allclose(params, _reference(), rtol=1e-4, atol=1e-5)


def test_dead_process_fails_others_without_hang():
    procs = _launch(2, "die")
    results = [p.communicate(timeout=120) for p in procs]  # a hang would time out here
    assert procs[1].returncode == 3
    assert procs[0].returncode != 0, results[0][0][-2000:]


def _run_snippet(code):
    env = dict(os.environ, FLUXION_NUM_CPU_DEVICES="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


def test_port_in_use_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = _run_snippet(
            "import fluxion\n"
            "try:\n"
            f"    fluxion.distributed.initialize('127.0.0.1:{port}', 2, 0, initialization_timeout=3)\n"
            "except RuntimeError as e:\n"
            "    print('ERR', e)\n")
    assert "ERR" in proc.stdout, proc.stdout + proc.stderr[-2000:]


def test_unreachable_coordinator_is_a_clear_error():
    port = _free_port()
    proc = _run_snippet(
        "import fluxion\n"
        "try:\n"
        f"    fluxion.distributed.initialize('127.0.0.1:{port}', 2, 1, initialization_timeout=3)\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n")
    assert "ERR" in proc.stdout and "could not connect" in proc.stdout, proc.stdout + proc.stderr[-2000:]
