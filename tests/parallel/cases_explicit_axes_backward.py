"""Explicit mesh axes inside a traced jit (the training cookbook's patterns): a gradient
through a dot whose operand is an intermediate value, and `zeros_like` of a traced value, take
their operands' sharding types as in JAX. Run by tests/test_eight_devices.py with 8 CPU devices;
JAX 0.10.2 in a subprocess is the oracle."""
import textwrap

import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from _jax_oracle import run_here, run_under_jax

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 CPU devices")

# Run under JAX and, with `jax`/`jnp` bound to fluxion, here.
_PROGRAMS = textwrap.dedent('''
    import numpy as np
    from jax.sharding import AxisType, PartitionSpec as P
    mesh = jax.make_mesh((8,), ("fsdp",), axis_types=(AxisType.Explicit,))
    rng = np.random.default_rng(0)
    out = {}

    def rec(name, arr):
        out[name] = {"spec": [list(p) if isinstance(p, tuple) else p for p in arr.sharding.spec],
                     "value": np.asarray(arr).tolist()}

    with jax.set_mesh(mesh):
        x = jax.device_put(rng.standard_normal((8, 4, 16)).astype(np.float32),
                           P("fsdp", None, None))
        w = jax.device_put(rng.standard_normal((16, 8)).astype(np.float32), P("fsdp", None))

        def loss(x, w):  # the weight's contracted axis and the batch axis are both fsdp
            h = jnp.einsum("bsd,dl->bsl", jnp.sin(x), w, out_sharding=P("fsdp", None, None))
            return jnp.tanh(h).sum()
        gx, gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, w)
        rec("grad_x", gx)
        rec("grad_w", gw)

        @jax.jit
        def init():  # the cookbook's Adam state: zeros like each (traced) parameter
            p = jax.nn.initializers.he_normal(1, 1)(jax.random.key(0), (8, 4), "float32",
                                                     P("fsdp", None))
            return p, jnp.zeros_like(p), jnp.ones_like(p), jnp.full_like(p, 2.0)
        for name, arr in zip(["param", "zeros_like", "ones_like", "full_like"], init()):
            rec(name, arr)
        rec("zeros_like_arg", jax.jit(jnp.zeros_like)(w))
''')


@pytest.fixture(scope="module")
def oracle():
    return run_under_jax(_PROGRAMS)


@pytest.fixture(scope="module")
def got():
    return run_here(_PROGRAMS, jax, jnp)


@pytest.mark.parametrize("name", ["grad_x", "grad_w", "param", "zeros_like",
                                  "ones_like", "full_like", "zeros_like_arg"])
def test_matches_jax(got, oracle, name):
    assert got[name]["spec"] == oracle[name]["spec"]
    np.testing.assert_allclose(np.asarray(got[name]["value"]),
                               np.asarray(oracle[name]["value"]), rtol=2e-5, atol=2e-5)
