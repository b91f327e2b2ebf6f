#!/bin/sh
# Run JAX 0.10.2's own test files against fluxion (a QA tool, not part of `make test`).
#   tools/jax_suite/run.sh lax_numpy_reducers_test linalg_test ...
# Needs a JAX git checkout (JAX_REPO, default ../jax) for the test files, and absl-py and
# hypothesis (installed here into $WORK/site). Logs go to $WORK/log_<name>.txt.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
JAX_REPO=${JAX_REPO:-$ROOT/../jax}
WORK=${WORK:-/tmp/jax_suite}
PY=${PY:-$ROOT/.venv/bin/python}
mkdir -p "$WORK"
cp "$HERE/conftest.py" "$WORK/"
[ -d "$WORK/site" ] || "$PY" -m pip install -q --target "$WORK/site" absl-py hypothesis
for name in "$@"; do
  git -C "$JAX_REPO" show "jax-v0.10.2:tests/$name.py" > "$WORK/orig_$name.py"
  "$PY" "$HERE/rewrite.py" "$WORK/orig_$name.py" "$WORK/test_$name.py"
  (cd "$WORK" && PYTHONPATH="$WORK/site:$ROOT" "$PY" -m pytest -o addopts= -p no:cacheprovider \
      -q -n 1 "test_$name.py" > "log_$name.txt" 2>&1) || true
  echo "$name: $(tail -1 "$WORK/log_$name.txt")"
done
