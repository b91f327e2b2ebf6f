"""Measuring workloads on two frameworks side by side, and reporting the results.

Nothing here imports fluxion or JAX at module level: a workload receives the framework's
modules as arguments, so the same workload code runs on both.
"""
from __future__ import annotations

import dataclasses
import datetime
import gc
import importlib
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time
from typing import Callable

# The most a fluxion/JAX ratio may be for each kind of measurement (lower is better).
TARGETS = {
    "dispatch": 1.0,
    "eager": 0.5,
    "tracing": 0.5,
    "first_call": 0.7,
    "steady": 1.05,
    "memory": 1.0,
    "eager_call": 1.0,  # each call of the eager jnp suite (40)
    "warm_cache_first_call": 0.2,  # issue 14: fluxion's warm persistent cache vs JAX cold (80)
    "both_caches_warm": 1.0,  # issue 14: both persistent caches warm (81)
}

# Targets on the geometric mean of a kind's ratios (a summary row after the workload's rows).
GEOMEAN_TARGETS = {"eager_call": 0.7}

SECONDS_PER_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


# ---------------------------------------------------------------------------------------------
# Frameworks

@dataclasses.dataclass
class Framework:
    """One side of the comparison: its column label and its (jax-like, jnp-like) modules.

    A framework that failed to import keeps the error, and every workload reports it."""

    label: str
    module_name: str
    jax: object = None
    jnp: object = None
    import_error: str | None = None

    def has_submodule(self, name: str) -> bool:
        if self.import_error is not None:
            return False
        return importlib.util.find_spec(f"{self.module_name}.{name}") is not None


def load_framework(label: str, module_name: str) -> Framework:
    """Import `module_name`, its numpy module and the submodules workloads reach as attributes."""
    try:
        top = importlib.import_module(module_name)
        jnp = importlib.import_module(f"{module_name}.numpy")
        for sub in ("lax", "nn", "random"):
            if importlib.util.find_spec(f"{module_name}.{sub}") is not None:
                importlib.import_module(f"{module_name}.{sub}")
    except Exception as e:  # a broken tree still gets a report, with the other framework measured
        return Framework(label, module_name, import_error=f"import failed: {short_error(e)}")
    return Framework(label, module_name, top, jnp)


# ---------------------------------------------------------------------------------------------
# Measures: each `measure(block_seconds)` returns one sample, in seconds or in bytes.

class Steady:
    """Steady-state time per call of `step`, a zero-argument callable that blocks on its result.

    Warms up on construction; a sample times a block of calls lasting about `block_seconds`
    and returns the mean time per call (divided by `per`, e.g. the steps of a scan).
    """

    def __init__(self, step: Callable[[], object], warmup: int = 2, per: int = 1):
        self.step = step
        self.per = per
        self.calls = None
        for _ in range(warmup):
            step()

    def _calls_per_block(self, block_seconds: float) -> int:
        calls, start = 0, time.perf_counter()
        elapsed = 0.0
        while calls == 0 or elapsed < min(0.02, block_seconds):
            self.step()
            calls += 1
            elapsed = time.perf_counter() - start
        return max(1, round(block_seconds * calls / elapsed))

    def measure(self, block_seconds: float) -> float:
        if self.calls is None:
            self.calls = self._calls_per_block(block_seconds)
        step = self.step
        start = time.perf_counter()
        for _ in range(self.calls):
            step()
        return (time.perf_counter() - start) / self.calls / self.per


class Timed:
    """The wall time of one call of `fn` (e.g. a compilation from scratch)."""

    def __init__(self, fn: Callable[[], object]):
        self.fn = fn

    def measure(self, block_seconds: float) -> float:
        start = time.perf_counter()
        self.fn()
        return time.perf_counter() - start


class Value:
    """A number `fn` computes, such as bytes of memory; `details` keeps its breakdown."""

    def __init__(self, fn: Callable[[], tuple[float, dict]]):
        self.fn = fn
        self.details: dict = {}

    def measure(self, block_seconds: float) -> float:
        value, self.details = self.fn()
        return value


class Measures:
    """A probe made of one measure per table row, sampled in row order."""

    def __init__(self, **measures):
        self.measures = measures

    def sample(self, block_seconds: float) -> dict:
        return {key: m.measure(block_seconds) for key, m in self.measures.items()}

    @property
    def details(self) -> dict:
        return {k: m.details for k, m in self.measures.items() if getattr(m, "details", None)}


def short_error(e: BaseException, limit: int = 300) -> str:
    """`Type: first line of the message`, cut to `limit` characters."""
    lines = str(e).strip().splitlines()
    text = f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Workloads and running them

@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the table: what is measured, its unit and which target applies."""

    key: str
    title: str
    unit: str  # "us", "ms", "s" (a time) or "bytes"
    kind: str | None  # a key of TARGETS, or None for a number shown without a target


@dataclasses.dataclass(frozen=True)
class Workload:
    """A benchmark: `setup(jax, jnp, sizes)` returns a probe whose `sample(block_seconds)`
    gives one value per row (a float, or a str naming the error for that row)."""

    number: int
    name: str
    rows: tuple
    setup: Callable
    sizes: dict
    quick_sizes: dict
    reps: int | None = None  # full-mode repetitions when this workload needs fewer than usual
    requires: str | None = None  # a submodule every framework needs, e.g. "random"


@dataclasses.dataclass(frozen=True)
class Settings:
    quick: bool
    reps: int
    block_seconds: float
    fixed_reps: bool = False  # True: `reps` overrides each workload's own count


def settings_for(quick: bool, reps: int | None = None) -> Settings:
    if quick:
        return Settings(True, reps or 3, 0.03, fixed_reps=reps is not None)
    return Settings(False, reps or 9, 0.2, fixed_reps=reps is not None)


def _sizes(workload: Workload, settings: Settings) -> dict:
    return workload.quick_sizes if settings.quick else workload.sizes


def _reps(workload: Workload, settings: Settings) -> int:
    if settings.fixed_reps or workload.reps is None:
        return settings.reps
    return min(workload.reps, settings.reps) if settings.quick else workload.reps


def _setup_probes(workload, frameworks, sizes, errors) -> dict:
    probes = {}
    for fw in frameworks:
        if fw.import_error is not None:
            errors[fw.label] = fw.import_error
            continue
        gc.collect()
        try:
            probes[fw.label] = workload.setup(fw.jax, fw.jnp, sizes)
        except Exception as e:  # a missing feature or a failure: report it, measure the rest
            errors[fw.label] = short_error(e)
    return probes


def _sample_alternating(workload, frameworks, probes, reps, block_seconds, errors, row_errors):
    """Samples per framework and row, taking the frameworks in turn within each repetition."""
    samples = {fw.label: {r.key: [] for r in workload.rows} for fw in frameworks}
    for _ in range(reps):
        for fw in frameworks:
            probe = probes.get(fw.label)
            if probe is None:
                continue
            gc.collect()
            try:
                values = probe.sample(block_seconds)
            except Exception as e:
                errors[fw.label] = short_error(e)
                del probes[fw.label]
                continue
            for key, value in values.items():
                if isinstance(value, str):
                    row_errors.setdefault(fw.label, {})[key] = value
                else:
                    samples[fw.label][key].append(value)
    return samples


def _scale(value: float, unit: str) -> float:
    return value / SECONDS_PER_UNIT[unit] if unit in SECONDS_PER_UNIT else value


def _side(row: Row, values: list, error: str | None) -> dict:
    if error is not None or not values:
        return {"median": None, "min": None, "samples": [], "error": error or "error: no samples"}
    scaled = [_scale(v, row.unit) for v in values]
    return {"median": statistics.median(scaled), "min": min(scaled), "samples": scaled,
            "error": None}


def _title(row: Row, sizes: dict) -> str:
    shown = {k: "-".join(map(str, v)) if isinstance(v, list) else v for k, v in sizes.items()}
    return row.title.format(**shown)


def _status(ratio: float | None, target: float | None) -> str:
    if ratio is None or target is None:
        return "-"
    return "met" if ratio <= target else "missed"


def _missing_submodule_error(workload: Workload, frameworks: list) -> str | None:
    if workload.requires is None:
        return None
    missing = [f"{fw.module_name}.{workload.requires}" for fw in frameworks
               if fw.import_error is None and not fw.has_submodule(workload.requires)]
    return "n/a: " + ", ".join(missing) + " missing" if missing else None


def _row_result(workload, row, frameworks, sizes, reps, probes, samples, errors, row_errors):
    result = {"workload": workload.number, "name": workload.name, "row": row.key,
              "title": _title(row, sizes), "unit": row.unit, "kind": row.kind,
              "target": TARGETS.get(row.kind), "sizes": sizes, "reps": reps}
    for fw in frameworks:
        error = errors.get(fw.label) or row_errors.get(fw.label, {}).get(row.key)
        if error is not None and not error.startswith("n/a"):
            error = "error: " + error
        side = _side(row, samples[fw.label].get(row.key, []), error)
        details = getattr(probes.get(fw.label), "details", None)
        if details:
            side["details"] = details
        result[fw.label] = side
    candidate, baseline = (result[fw.label]["median"] for fw in frameworks)
    result["ratio"] = candidate / baseline if candidate is not None and baseline else None
    result["status"] = _status(result["ratio"], result["target"])
    return result


def run_workload(workload: Workload, frameworks: list, settings: Settings) -> list[dict]:
    """Measure `workload` on each framework, alternating them; one result dict per row.

    `frameworks` is (candidate, baseline): the ratio is candidate / baseline."""
    sizes = _sizes(workload, settings)
    reps = _reps(workload, settings)
    errors: dict = {}
    row_errors: dict = {}
    not_available = _missing_submodule_error(workload, frameworks)
    if not_available:
        errors = {fw.label: not_available for fw in frameworks}
        probes, samples = {}, {fw.label: {} for fw in frameworks}
    else:
        probes = _setup_probes(workload, frameworks, sizes, errors)
        samples = _sample_alternating(workload, frameworks, probes, reps,
                                      settings.block_seconds, errors, row_errors)
    rows = [_row_result(workload, row, frameworks, sizes, reps, probes, samples, errors,
                        row_errors) for row in workload.rows]
    return rows + geomean_rows(workload, rows)


def geomean_rows(workload: Workload, rows: list[dict]) -> list[dict]:
    """A summary row per kind in GEOMEAN_TARGETS: the geometric mean of those rows' ratios."""
    summary = []
    for kind, target in GEOMEAN_TARGETS.items():
        ratios = [r["ratio"] for r in rows if r["kind"] == kind and r["ratio"]]
        if not ratios:
            continue
        mean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        over = sum(x > TARGETS[kind] for x in ratios)
        summary.append({
            "workload": workload.number, "name": workload.name, "row": f"geomean_{kind}",
            "title": f"geometric mean of the {len(ratios)} ratios above ({over} above "
                     f"{TARGETS[kind]:g})",
            "unit": "ratio", "kind": f"geomean_{kind}", "target": target, "sizes": {},
            "reps": rows[0]["reps"], "ratio": mean, "status": _status(mean, target)})
    return summary


# ---------------------------------------------------------------------------------------------
# Environment and reporting

def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(frameworks: list, settings: Settings) -> dict:
    import jaxlib
    import numpy as np
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpu_model": cpu_model(), "cpu_cores": os.cpu_count(),
                    "usable_cores": usable, "load_average_1m": round(os.getloadavg()[0], 2)},
        "versions": {"python": platform.python_version(), "jaxlib": jaxlib.__version__,
                     "numpy": np.__version__},
        "mode": "quick" if settings.quick else "full",
        "reps": settings.reps,
        "block_seconds": settings.block_seconds,
    }
    for fw in frameworks:
        devices = info.setdefault("devices", {})
        if fw.import_error is not None:
            info["versions"][fw.module_name] = devices[fw.label] = fw.import_error
            continue
        info["versions"][fw.module_name] = getattr(fw.jax, "__version__", "?")
        devices[fw.label] = str(fw.jax.devices()[0])
    return info


def _fmt_number(v: float) -> str:
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}" if v >= 0.01 else f"{v:.2e}"


def _fmt_side(side: dict, unit: str, error_width: int = 80) -> str:
    if side["error"] is not None:
        error = side["error"]
        if len(error) > error_width:
            error = error[:error_width - 3] + "..."
        return error.replace("|", "\\|")
    if unit == "bytes":
        return f"{side['median'] / 2**20:.1f} MiB"
    return f"{_fmt_number(side['median'])} {unit.replace('us', 'µs')}"


def markdown_table(results: list[dict], env: dict, labels: list[str]) -> str:
    m, v = env["machine"], env["versions"]
    header = [
        f"## fluxion vs JAX — {env['date']}",
        "",
        f"Machine: {m['cpu_model']}, {m['cpu_cores']} cores ({m['usable_cores']} usable), "
        f"load average {m['load_average_1m']}; devices: "
        + ", ".join(f"{k} {d}" for k, d in env["devices"].items()),
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
        f"Mode: {env['mode']}; medians of alternating repetitions; ratio = "
        f"{labels[0]}/{labels[1]} (lower is better).",
        "",
        f"| # | workload | {labels[0]} | {labels[1]} | ratio | target | status |",
        "|---|---|---|---|---|---|---|",
    ]
    lines = []
    for r in results:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        target = "-" if r["target"] is None else f"<= {r['target']:g}"
        sides = [_fmt_side(r[label], r["unit"]) if label in r else "-" for label in labels[:2]]
        cells = [str(r["workload"]), r["title"], *sides, ratio, target, r["status"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(header + lines)


def write_json(path: str, env: dict, results: list[dict]) -> None:
    def clean(x):  # JSON has no NaN or infinity
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(clean({**env, "results": results}), f, indent=1)
        f.write("\n")


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
