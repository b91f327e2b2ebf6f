#!/usr/bin/env bash
# The test suite (or the test files named) on a GPU machine: jaxlib with its CUDA plugin, JAX
# beside it as the oracle. JAX takes the plugin first in every process (fluxion then shares
# it; the other order leaves JAX on the CPU), and each test's result is written as it ends,
# so a run cut off by a time limit still names its failures.
#   benchmarks/gpu_suite.sh LOG [pytest arguments...]     (default: the whole of tests/)
# WORKERS sets pytest-xdist's process count (default 14), PYTHON the interpreter (python3).
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
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_DEFAULT_MATMUL_PRECISION=highest
export PYTHONUNBUFFERED=1
"${PYTHON:-python3}" -m pytest -o addopts= -v -n "${WORKERS:-14}" -p no:cacheprovider --timeout 120 \
    --tb=line "$@" > "$log" 2>&1
status=$?
grep -E "(FAILED|ERROR) tests/" "$log" | sed -E 's/^\[gw[0-9]+\] \[ *[0-9]+%\] //' | sort -u
tail -1 "$log"
exit $status
