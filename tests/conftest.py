import importlib.metadata
import sys
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# XLA:CPU compiles the suite's small programs (fluxion's and the JAX oracle's) 2.5 times faster
# with LLVM at -O0 and XLA's classic fusion emitters; most of the suite's time is such
# compiles. XLA's HLO passes run as always, so the programs are optimized the same way; only
# the machine code differs. `make fuzz`, `make demo` and `make bench` use XLA's defaults, and
# tests/test_xla_default_flags.py runs a slice of the fuzzer under them inside the suite.
# FLUXION_TEST_XLA_DEFAULTS=1 runs the whole suite with XLA's defaults.
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
# The flags are checked on the pinned jaxlib; XLA aborts on a flag it does not know.
if os.environ.get("FLUXION_TEST_XLA_DEFAULTS", "0") != "1" and \
        importlib.metadata.version("jaxlib").startswith("0.10.") and \
        TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f'{os.environ.get("XLA_FLAGS", "")} {TEST_XLA_FLAGS}'.strip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fluxion  # noqa: E402


@pytest.fixture
def x64():
    """Run a test with 64-bit types enabled."""
    with fluxion.enable_x64(True):
        yield


@pytest.fixture
def x64_both():
    """64-bit types in fluxion and in JAX (the oracle) for one test, for tight comparisons."""
    import jax
    with fluxion.enable_x64(True), jax.enable_x64(True):
        yield


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64_mode(request):
    """Run the test with x64 off, then on, in both libraries; restore the flags afterwards."""
    import jax
    old_jax, old_ours = jax.config.jax_enable_x64, fluxion.config.enable_x64
    jax.config.update("jax_enable_x64", request.param)
    fluxion.config.update("enable_x64", request.param)
    try:
        yield request.param
    finally:
        jax.config.update("jax_enable_x64", old_jax)
        fluxion.config.update("enable_x64", old_ours)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# The persistent compilation cache is off in the suite: tests must not share the user's cache
# nor depend on each other's entries. tests/test_compilation_cache.py turns it on in temporary
# directories. Subprocesses started by tests inherit the environment variable.
os.environ.setdefault("FLUXION_ENABLE_COMPILATION_CACHE", "0")
fluxion.config.update("enable_compilation_cache",
                      os.environ["FLUXION_ENABLE_COMPILATION_CACHE"].lower() in ("1", "true"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "cpu_only(reason): the test checks what the CPU backend does (LAPACK "
        "targets, XLA:CPU's refusals, handlers registered for the host); skipped when the "
        "default device is another platform, as on a GPU machine (benchmarks/gpu_suite.sh)")


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if item.get_closest_marker("cpu_only")]
    if marked and fluxion.default_backend() != "cpu":
        for item in marked:
            why = item.get_closest_marker("cpu_only").kwargs.get("reason", "CPU behaviour")
            item.add_marker(pytest.mark.skip(reason=f"CPU only: {why}"))


@pytest.fixture(autouse=True, scope="module")
def _release_jax_oracle_executables():
    """Clear JAX's caches after each test module: JAX is only the oracle here, and the
    executables its caches keep would pile up in a worker that runs thousands of tests (each
    holds memory mappings, and a process may have 65,530 before XLA crashes compiling)."""
    yield
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.clear_caches()
