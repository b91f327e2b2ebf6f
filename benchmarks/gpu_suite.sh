#!/usr/bin/env bash
# The test suite (or the test files named) on a GPU machine: jaxlib with its CUDA plugin, JAX
# beside it as the oracle. JAX takes the plugin first in every process (fluxion then shares
# it; the other order leaves JAX on the CPU), and each test's result is written as it ends,
# so a run cut off by a time limit still names its failures.
#   benchmarks/gpu_suite.sh LOG [pytest arguments...]     (default: the whole of tests/)
# WORKERS sets pytest-xdist's process count (default 14), PYTHON the interpreter (python3),
# LIMIT a wall-clock cap in seconds (timeout stops pytest and its workers; the log keeps what ended).
# Each failure's traceback goes to LOG.failures as the failure arrives (pytest prints them only
# at the end, which a capped run never reaches).
# Expect failures that come from the platform or from a newer JAX; docs/differences.md
# ("NVIDIA GPUs") lists the known ones.
set -u
log=${1:-gpu_suite.log}
shift || true
[ $# -eq 0 ] && set -- tests --ignore=tests/test_namespace_coverage.py
site=$(mktemp -d)
cat > "$site/sitecustomize.py" <<'PY'
try:
    import jax
    jax.devices()
except Exception as e:  # report it; never stop the process
    print("gpu_suite: JAX could not take the plugin first:", e)
PY
cat > "$site/gpu_suite_failures.py" <<'PY'
import os

def pytest_runtest_logreport(report):
    # xdist's workers load the plugin too; only the controller, which sees every report, writes
    if report.failed and "PYTEST_XDIST_WORKER" not in os.environ:
        with open(os.environ["GPU_SUITE_FAILURES"], "a") as f:
            f.write(f"==== {report.nodeid} ({report.when})\n{report.longreprtext[-4000:]}\n")
PY
export GPU_SUITE_FAILURES="$log.failures"
: > "$GPU_SUITE_FAILURES"
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_DEFAULT_MATMUL_PRECISION=highest
export PYTHONUNBUFFERED=1
${LIMIT:+timeout -k 10 $LIMIT} "${PYTHON:-python3}" -m pytest -o addopts= -v -n "${WORKERS:-14}" -p no:cacheprovider -p gpu_suite_failures --timeout 120 \
    --tb=short "$@" > "$log" 2>&1
status=$?
grep -E "(FAILED|ERROR) tests/" "$log" | sed -E 's/^\[gw[0-9]+\] \[ *[0-9]+%\] //' | sort -u
tail -1 "$log"
exit $status
