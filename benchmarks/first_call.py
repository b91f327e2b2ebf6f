"""Workload (4) in a fresh process: `python benchmarks/first_call.py MODULE SIZES_JSON`.

Prints one JSON line: the seconds `import MODULE, MODULE.numpy` took, and the seconds the first
call of jit(grad(tanh MLP loss)) took (or the error it raised). NumPy and the benchmark code are
imported before the clock starts, so the import time is the framework's own.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.workloads import run_first_call_report  # noqa: E402


def main(argv):
    module_name, sizes = argv[1], json.loads(argv[2])
    print(json.dumps(run_first_call_report(module_name, sizes)))


if __name__ == "__main__":
    main(sys.argv)
