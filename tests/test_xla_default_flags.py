"""The suite compiles with test-only XLA:CPU flags (see conftest.py); this runs a seeded slice
of the differential fuzzer and the eager-executable tests under XLA's default flags, as users
run them."""
import os
import subprocess
import sys

from conftest import TEST_XLA_FLAGS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_fuzz_slice_agrees_with_jax_under_xla_default_flags():
    flags = os.environ.get("XLA_FLAGS", "").replace(TEST_XLA_FLAGS, "").strip()
    # 6 fuzz programs (derandomized: the same ones every run) rather than 25, and the eager
    # cache's tests but its size bound, which compiles hundreds of executables.
    env = dict(os.environ, FLUXION_TEST_XLA_DEFAULTS="1", XLA_FLAGS=flags,
               FLUXION_FUZZ_SLICE_EXAMPLES="6")
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
         "tests/test_fuzz_slice.py", "tests/test_numpy_eager_cache.py",
         "--deselect", "tests/test_numpy_eager_cache.py::test_cache_is_bounded",
         "tests/test_xla_default_flags.py::test_flags_are_the_defaults_in_the_child"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    assert " passed" in child.stdout and "skipped" not in child.stdout, child.stdout[-2000:]


def test_flags_are_the_defaults_in_the_child():
    if os.environ.get("FLUXION_TEST_XLA_DEFAULTS") == "1":
        assert TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", "")
