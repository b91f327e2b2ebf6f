"""The example programs run unchanged under JAX (only their imports renamed) and give the
same losses and parameters as under fluxion, to float32 tolerance."""
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
# (script, steps for the test run)
PROGRAMS = [("stax_cnn.py", 30), ("vae.py", 40), ("bayesian_logistic_regression.py", 40),
            ("gaussian_process.py", 80)]


def as_jax_program(source: str) -> str:
    """The same program importing jax: `fluxion` becomes `jax` in import lines only."""
    return re.sub(r"^(import|from) fluxion\b", r"\1 jax", source, flags=re.M).replace(
        "import jax as jax", "import jax")


def run(source: str, steps: int, tmp_path, name: str) -> dict:
    script = tmp_path / name
    script.write_text(source)
    out = subprocess.run([sys.executable, str(script), str(steps), "--json"], capture_output=True,
                         text=True, timeout=600, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("script,steps", PROGRAMS)
def test_example_agrees_with_jax(script, steps, tmp_path):
    source = (EXAMPLES / script).read_text()
    assert "import jax" not in source  # the fluxion version really runs on fluxion
    ours = run(source, steps, tmp_path, "flx_" + script)
    theirs = run(as_jax_program(source), steps, tmp_path, "jax_" + script)
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=2e-4, atol=2e-5)
    for a, b in zip(ours["params"], theirs["params"]):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-5)
    assert ours.get("iterations") == theirs.get("iterations")
