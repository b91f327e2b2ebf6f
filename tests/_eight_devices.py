"""Tests that need 8 CPU devices rerun their file in a fresh pytest process with 8 devices for
fluxion and for JAX (the suite's own processes have one)."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_on_8_devices(args, extra_env=None, timeout=600):
    """Run `python *args` from the repository root with 8 CPU devices in both frameworks."""
    env = dict(os.environ, FLUXION_NUM_CPU_DEVICES="8", JAX_NUM_CPU_DEVICES="8",
               JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT),
               XLA_FLAGS="--xla_force_host_platform_device_count=8", **(extra_env or {}))
    env.pop("FLUXION_DEFAULT_DEVICE", None)
    env.pop("JAX_DEFAULT_DEVICE", None)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def assert_file_passes_on_8_devices(test_file, extra_env=None, timeout=600):
    """pytest on `test_file` with 8 devices: it exits 0, something passed, nothing skipped."""
    proc = run_on_8_devices(["-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                             "--rootdir", str(ROOT), str(test_file)], extra_env, timeout)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and " skipped" not in proc.stdout, proc.stdout[-2000:]
