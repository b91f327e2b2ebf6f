"""Programs run under JAX 0.10.2 on 8 CPU devices in a subprocess (the oracle) and, with `jax`
and `jnp` bound to fluxion, in the test process: each records its results in a dict `out`."""
import json
import os
import subprocess
import sys


def run_under_jax(programs: str) -> dict:
    """`out` of `programs` run by JAX with 8 CPU devices."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    env.pop("PYTHONPATH", None)
    script = "import json, jax, jax.numpy as jnp\n" + programs + "\nprint(json.dumps(out))\n"
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=240, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_here(programs: str, jax, jnp) -> dict:
    """`out` of `programs` run by fluxion (`jax`, `jnp` are fluxion's modules)."""
    namespace = {"jax": jax, "jnp": jnp}
    exec(programs.replace("from jax.sharding", "from fluxion.sharding"), namespace)
    return namespace["out"]
