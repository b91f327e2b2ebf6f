"""The benchmark harness runs workloads (1) and (2) on fluxion and JAX and yields numbers."""
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import harness, run  # noqa: E402


@pytest.fixture(scope="module")
def frameworks():
    return run.load_frameworks("fluxion")


@pytest.mark.parametrize("number", [1, 2])
def test_tiny_op_workload_measures_both_frameworks(frameworks, number):
    settings = harness.settings_for(quick=True, reps=2)
    (workload,) = run.selected_workloads([number])
    (result,) = harness.run_workload(workload, frameworks, settings)
    for label in ("fluxion", "jax"):
        side = result[label]
        assert side["error"] is None, side["error"]
        assert len(side["samples"]) == 2
        assert math.isfinite(side["median"]) and side["median"] > 0
    assert result["ratio"] > 0
    assert result["status"] in ("met", "missed")


def test_failing_workload_reports_an_error_and_keeps_the_other_side(frameworks):
    def setup(jax, jnp, sizes):
        if jax.__name__ == "fluxion":
            raise NotImplementedError("no rule for this\nsecond line")
        return harness.Measures(value=harness.Value(lambda: (1.0, {})))

    workload = harness.Workload(0, "probe", (harness.Row("value", "a value", "bytes", "memory"),),
                                setup, {}, {})
    (result,) = harness.run_workload(workload, frameworks, harness.settings_for(quick=True, reps=2))
    assert result["fluxion"]["error"] == "error: NotImplementedError: no rule for this"
    assert result["jax"]["median"] == 1.0
    assert result["ratio"] is None and result["status"] == "-"


def test_markdown_table_and_json(frameworks, tmp_path):
    settings = harness.settings_for(quick=True, reps=1)
    results = harness.run_workload(run.selected_workloads([2])[0], frameworks, settings)
    env = harness.environment(frameworks, settings)
    table = harness.markdown_table(results, env, ["fluxion", "jax"])
    assert "| 2 | eager x + y, f32[3] (per op) |" in table
    path = tmp_path / "results.json"
    harness.write_json(str(path), env, results)
    assert '"cpu_model"' in path.read_text()


def test_compare_hlo_counts_ops_of_both_syntaxes():
    import jax
    import fluxion
    from benchmarks import compare_hlo

    def program(lib):
        return lambda x: lib.numpy.sum(lib.numpy.tanh(x) * 2.0)
    x = [[1.0, 2.0], [3.0, 4.0]]
    ours = compare_hlo.op_counts(fluxion, program(fluxion), (fluxion.numpy.asarray(x),))
    theirs = compare_hlo.op_counts(jax, program(jax), (jax.numpy.asarray(x),))
    for emitted, optimized in (ours, theirs):
        assert emitted["stablehlo.tanh"] == 1 and emitted["stablehlo.multiply"] == 1
        assert "func.func" not in emitted and "stablehlo.return" not in emitted
        assert optimized["tanh"] == 1
