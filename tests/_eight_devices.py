"""Tests that need 8 CPU devices. The suite's own processes have one, so
tests/test_eight_devices.py runs every file in EIGHT_DEVICE_FILES in one fresh pytest process
with 8 CPU devices for fluxion and for JAX; in that process ON_8_DEVICES is true and those files
define their cases. One process for all of them: each extra one costs ~5 s of interpreter,
jaxlib, JAX and fluxion start-up.

To run one such file by hand: `python tests/_eight_devices.py tests/test_explicit_axes.py`."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ON_8_DEVICES = os.environ.get("FLUXION_NUM_CPU_DEVICES") == "8"
EIGHT_DEVICE_FILES = [
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "parallel").glob("cases_*.py")),
    "tests/test_explicit_axes.py", "tests/test_explicit_axes_linalg_conv.py",
    "tests/test_device_placement.py", "tests/test_pmap_traced.py",
    "tests/test_shard_map_check_vma.py", "tests/test_shard_map_partial.py"]


def run_on_8_devices(args, extra_env=None, timeout=600):
    """Run `python *args` from the repository root with 8 CPU devices in both frameworks."""
    env = dict(os.environ, FLUXION_NUM_CPU_DEVICES="8", JAX_NUM_CPU_DEVICES="8",
               JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT),
               XLA_FLAGS="--xla_force_host_platform_device_count=8", **(extra_env or {}))
    env.pop("FLUXION_DEFAULT_DEVICE", None)
    env.pop("JAX_DEFAULT_DEVICE", None)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def assert_files_pass_on_8_devices(test_files, extra_env=None, timeout=600):
    """pytest on `test_files` with 8 devices: it exits 0, something passed, nothing skipped."""
    proc = run_on_8_devices(["-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                             "--rootdir", str(ROOT), *map(str, test_files)], extra_env, timeout)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and " skipped" not in proc.stdout, proc.stdout[-2000:]


if __name__ == "__main__":
    proc = run_on_8_devices(["-m", "pytest", "-p", "no:xdist", *sys.argv[1:]])
    print(proc.stdout + proc.stderr)
    sys.exit(proc.returncode)
