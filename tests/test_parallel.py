"""The parallel suite (tests/parallel/cases_*.py) needs 8 CPU devices, but this process's
backend was created with one; run it in one fresh subprocess with FLUXION_NUM_CPU_DEVICES=8."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_parallel_suite_on_8_cpu_devices():
    env = dict(os.environ, FLUXION_NUM_CPU_DEVICES="8", PYTHONPATH=str(ROOT))
    cases = sorted(str(p) for p in (ROOT / "tests" / "parallel").glob("cases_*.py"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "--rootdir", str(ROOT), *cases],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and " skipped" not in proc.stdout, proc.stdout[-2000:]
