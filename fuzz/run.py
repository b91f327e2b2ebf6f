"""Differential fuzzing of fluxion against JAX: `python -m fuzz.run --count N --seed S`.

Programs are numbered by seed (fuzz/programs.py builds one from its seed), so a mismatch is
reproduced by its seed alone. Prints each mismatching program with what differed, then the
number of programs, of distinct ops used, of evaluations compared and of mismatches. Exit
status 1 on mismatches.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import time
import warnings

CHUNK = 50


def run_seeds(first: int, count: int) -> tuple[list, set, int]:
    """(reports of mismatching programs, op names used, evaluations compared)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    warnings.simplefilter("ignore")
    from fuzz.programs import check, make_program
    reports, ops_used, compared = [], set(), 0
    for seed in range(first, first + count):
        program = make_program(seed)
        ops_used.update(op.name for op in program.ops)
        mismatches, n = check(program)
        compared += n
        if mismatches:
            reports.append("MISMATCH " + program.describe() + "".join(
                "\n    " + m.replace("\n", "\n    ") for m in mismatches))
    return reports, ops_used, compared


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="seed of the first program")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    chunks = [(s, min(CHUNK, args.seed + args.count - s))
              for s in range(args.seed, args.seed + args.count, CHUNK)]
    ops_used, compared, bad, done = set(), 0, 0, 0
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for (reports, ops, n), (_, size) in zip(pool.map(run_seeds, *zip(*chunks)), chunks):
            for report in reports:
                print(report, flush=True)
            ops_used |= ops
            compared += n
            bad += len(reports)
            done += size
            print(f"... {done} programs, {bad} with mismatches, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    print(f"{args.count} programs, {len(ops_used)} distinct ops, {compared} evaluations "
          f"compared, {bad} programs with mismatches, {time.perf_counter() - start:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
