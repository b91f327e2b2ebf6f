"""Every workload of the suite: `workloads.py` plus one `workloads_<topic>.py` per capability.

Each module defines `WORKLOADS`, a list of `harness.Workload`; numbers must be unique across
modules (each topic takes its own range, see benchmarks/README.md).
"""
from __future__ import annotations

import importlib
import pkgutil

import benchmarks


def all_workloads() -> list:
    names = ["workloads"] + sorted(
        info.name for info in pkgutil.iter_modules(benchmarks.__path__)
        if info.name.startswith("workloads_"))
    workloads = []
    for name in names:
        workloads.extend(importlib.import_module(f"benchmarks.{name}").WORKLOADS)
    numbers = [w.number for w in workloads]
    duplicated = sorted({n for n in numbers if numbers.count(n) > 1})
    if duplicated:
        raise RuntimeError(f"benchmark workload numbers used twice: {duplicated}")
    return sorted(workloads, key=lambda w: w.number)
