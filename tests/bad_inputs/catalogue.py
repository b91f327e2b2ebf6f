"""The bad-input catalogue's machinery: each family file lists Cases; one subprocess per family
runs them all, so a case that kills the process (SIGFPE, SIGABRT, SIGSEGV from XLA) fails
instead of taking the test run down.

A Case calls `fn(m)` with `m` the framework module (`fluxion`, or `jax` as the oracle). It
expects an exception whose class is JAX's (found by running the case on JAX in the same
subprocess) or the class named in `raises`; `match` is a regex the message must contain.
`raises=None` means the call must complete (a bad input JAX accepts, e.g. a runtime integer
division by zero) and, if `compare` is set, give JAX's value.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
from typing import Callable

import numpy as np
import pytest

USE_JAX = "jax"  # `raises=USE_JAX`: the class JAX raises


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable
    raises: object = USE_JAX  # USE_JAX, an exception class, or None (no exception)
    match: str | None = None
    jax_ok: bool = True  # False where running the case on JAX would crash or hang
    compare: bool = False  # with raises=None: the value must equal JAX's


def _run_one(case: Case, module):
    try:
        out = case.fn(module)
        if hasattr(out, "block_until_ready"):
            out.block_until_ready()
        return None, "", out
    except Exception as e:  # noqa: BLE001 - the point is to see every class
        return type(e), str(e), None


def _is_subclass_named(cls, expected_cls) -> bool:
    return cls is not None and issubclass(cls, expected_cls)


def run_family(path: str) -> dict:
    """Run every case of the family file at `path`; returns {name: [ok, detail]}."""
    spec = importlib.util.spec_from_file_location("family", path)
    family = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(family)
    import fluxion
    jax = None
    results = {}
    for case in family.CASES:
        cls, msg, value = _run_one(case, fluxion)
        expected = case.raises
        if expected is USE_JAX:
            if jax is None:
                import jax
            jcls, jmsg, _ = _run_one(case, jax)
            if jcls is None:
                results[case.name] = [False, "JAX raises nothing here; name the class"]
                continue
            # Compare by name: JAX's error classes live in jax.errors, ours in fluxion.errors.
            names = {c.__name__ for c in (cls.__mro__ if cls else ())}
            ok = cls is not None and (jcls.__name__ in names)
            detail = f"fluxion: {cls and cls.__name__}: {msg[:300]!r}; jax: {jcls.__name__}"
        elif expected is None:
            ok = cls is None
            detail = f"fluxion raised {cls and cls.__name__}: {msg[:300]!r}"
            if ok and case.compare:
                import jax
                _, _, want = _run_one(case, jax)
                ok = np.array_equal(np.asarray(value), np.asarray(want), equal_nan=True)
                detail = f"fluxion {np.asarray(value)!r} != jax {np.asarray(want)!r}"
        else:
            ok = _is_subclass_named(cls, expected)
            detail = f"fluxion: {cls and cls.__name__}: {msg[:300]!r}; want {expected.__name__}"
        if ok and case.match and not re.search(case.match, msg):
            ok, detail = False, f"message {msg[:400]!r} does not match {case.match!r}"
        results[case.name] = [ok, detail]
    return results


_RESULTS: dict = {}


def _family_results(path: str) -> dict:
    if path not in _RESULTS:
        proc = subprocess.run([sys.executable, __file__, path], capture_output=True, text=True,
                              timeout=600)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
        if proc.returncode != 0 or not lines:
            why = (f"the family's process died with signal {-proc.returncode}"
                   if proc.returncode < 0 else f"exit code {proc.returncode}")
            _RESULTS[path] = {"__crash__": why + "\n" + proc.stderr[-3000:]}
        else:
            _RESULTS[path] = json.loads(lines[-1])
    return _RESULTS[path]


def family_test(cases, path: str):
    """A pytest test parametrized over `cases`, checking their results from one subprocess."""
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "case names must be unique"

    @pytest.mark.parametrize("name", names)
    def test_case(name):
        results = _family_results(path)
        if "__crash__" in results:
            pytest.fail(results["__crash__"])
        ok, detail = results[name]
        assert ok, detail
    return test_case


if __name__ == "__main__":
    # The checkout this file belongs to, ahead of any installed fluxion (a script's own folder
    # comes first on sys.path, not the working directory).
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    print(json.dumps(run_family(sys.argv[1])))
