"""Benchmark fluxion against JAX on the same machine, in one run.

    python benchmarks/run.py [--quick] [--only 1,5] [--reps N] [--out PATH]

Each workload runs on both frameworks, alternating them repetition by repetition; the table
(stdout) shows medians and the fluxion/JAX ratio against its target, and the same numbers with
every sample go to a JSON file. See benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# fluxion's persistent compilation cache is off while benchmarking: rows that time compiles
# must compile. workloads_export.py turns it on, in temporary directories, where it measures it.
os.environ.setdefault("FLUXION_ENABLE_COMPILATION_CACHE", "0")

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import harness  # noqa: E402
from benchmarks.registry import all_workloads  # noqa: E402

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer repetitions and smaller sizes (under a minute)")
    parser.add_argument("--only", type=_numbers, default=None, metavar="N,M",
                        help="run only these workloads, by number")
    parser.add_argument("--reps", type=int, default=None,
                        help="repetitions per framework for every workload")
    parser.add_argument("--out", default=DEFAULT_OUT, help="where to write the JSON results")
    parser.add_argument("--platform", default="cpu",
                        help="JAX_PLATFORMS for both frameworks (default: cpu)")
    parser.add_argument("--candidate", default="fluxion", choices=("fluxion", "jax"),
                        help="the framework compared with JAX; 'jax' gives an A/A run that "
                             "shows the noise floor")
    return parser.parse_args(argv)


def _numbers(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,5, got {text!r}") from None


def selected_workloads(only) -> list:
    workloads = all_workloads()
    if only is None:
        return workloads
    known = {w.number for w in workloads}
    unknown = sorted(set(only) - known)
    if unknown:
        raise SystemExit(f"unknown workload numbers {unknown}; known: {sorted(known)}")
    return [w for w in workloads if w.number in only]


def load_frameworks(candidate: str) -> list:
    """The candidate first, JAX second: the order the harness alternates them in."""
    label = "fluxion" if candidate == "fluxion" else "jax (A/A)"
    return [harness.load_framework(label, candidate), harness.load_framework("jax", "jax")]


def run_benchmarks(workloads, frameworks, settings) -> list[dict]:
    results = []
    for workload in workloads:
        start = time.perf_counter()
        harness.progress(f"[{workload.number}] {workload.name} ...")
        results.extend(harness.run_workload(workload, frameworks, settings))
        harness.progress(f"[{workload.number}] done in {time.perf_counter() - start:.1f} s")
    return results


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ["JAX_PLATFORMS"] = args.platform  # read by both frameworks and the helper processes
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    workloads = selected_workloads(args.only)
    settings = harness.settings_for(args.quick, args.reps)
    frameworks = load_frameworks(args.candidate)
    env = harness.environment(frameworks, settings)
    env["candidate_module"] = args.candidate
    results = run_benchmarks(workloads, frameworks, settings)
    print(harness.markdown_table(results, env, [fw.label for fw in frameworks]))
    harness.write_json(args.out, env, results)
    print(f"\nJSON results written to {os.path.abspath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
