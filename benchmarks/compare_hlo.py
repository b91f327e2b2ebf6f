"""Compare the StableHLO fluxion and JAX emit for the benchmark programs: `python
benchmarks/compare_hlo.py [--details]`.

For each program, both frameworks lower the same code (`jit(f).lower(...)`). The table counts
the StableHLO ops each emits and the HLO instructions XLA keeps after optimizing it (what
actually runs). `--details` lists the op kinds whose counts differ.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks import workloads as w  # noqa: E402

# An op name, not an attribute such as `#stablehlo.dot<...>`.
_STABLEHLO_OP = re.compile(r"(?<![#\w])((?:stablehlo|chlo|func)\.[a-z_]+)")
# An HLO instruction: `name = shape opcode(` where a tuple shape may hold spaces.
_HLO_INSTRUCTION = re.compile(r"= (?:\([^=]*?\)|\S+) ([a-z][a-z0-9\-]*)\(")


def programs(jax, jnp):
    """(name, function, arguments) for the benchmark programs, written once for both."""
    sizes = {"layers": 20, "width": 64, "batch": 32}
    params, x = w._tanh_mlp_problem(jnp, sizes)
    yield "grad of 20-layer tanh MLP (3, 4)", jax.grad(w.tanh_mlp_loss(jnp)), (params, x)

    mlp = w.init_mlp(jnp, w.MNIST_MLP)
    data, labels = w.classification_data(jnp, 256, 784, 10)
    yield "train step (5)", w.sgd_train_step(jax, jnp), (mlp, data, labels)

    small = w.init_mlp(jnp, w.SMALL_MLP)
    per_example = jax.vmap(jax.grad(w.cross_entropy_loss(jax, jnp)), in_axes=(None, 0, 0))
    yield "per-example grads (6)", per_example, (small, data[:128], labels[:128])

    rng = np.random.default_rng(0)
    rnn_params = (jnp.asarray(w._normal(rng, (128, 128))), jnp.asarray(w._normal(rng, (128, 128))),
                  jnp.zeros((128,), jnp.float32))
    h0, xs = jnp.zeros((8, 128), jnp.float32), jnp.asarray(w._normal(rng, (1000, 8, 128)))
    yield "scan RNN (7)", w.scan_rnn(jax, jnp), (rnn_params, h0, xs)

    if hasattr(jax, "random"):
        yield ("normal samples (8)", lambda key: jax.random.normal(key, (10**7,), jnp.float32),
               (jax.random.PRNGKey(0),))

    weights = [jnp.asarray(w._normal(rng, (2048, 2048))) for _ in range(4)]

    def chain(x, weights):
        for m in weights:
            x = x @ m
        return x
    yield "matmul chain (9)", chain, (weights[0], weights)


def op_counts(jax, fun, args):
    lowered = jax.jit(fun).lower(*args)
    emitted = collections.Counter(_STABLEHLO_OP.findall(lowered.as_text()))
    for structural in ("func.func", "func.return", "stablehlo.return"):
        emitted.pop(structural, None)  # printed by one syntax, implied by the other
    optimized = collections.Counter(_HLO_INSTRUCTION.findall(lowered.compile().as_text()))
    return emitted, optimized


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", action="store_true", help="list the differing op kinds")
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jax_numpy
    import fluxion
    import fluxion.numpy as fluxion_numpy
    ours = programs(fluxion, fluxion_numpy)
    theirs = programs(jax, jax_numpy)
    print("| program | StableHLO ops emitted: fluxion / JAX | HLO instructions after XLA: "
          "fluxion / JAX |")
    print("|---|---|---|")
    for (name, f_fun, f_args), (_, j_fun, j_args) in zip(ours, theirs):
        f_emitted, f_optimized = op_counts(fluxion, f_fun, f_args)
        j_emitted, j_optimized = op_counts(jax, j_fun, j_args)
        print(f"| {name} | {sum(f_emitted.values())} / {sum(j_emitted.values())} | "
              f"{sum(f_optimized.values())} / {sum(j_optimized.values())} |")
        if args.details:
            for label, a, b in (("emitted", f_emitted, j_emitted),
                                ("after XLA", f_optimized, j_optimized)):
                diff = {k: (a[k], b[k]) for k in sorted(set(a) | set(b)) if a[k] != b[k]}
                if diff:
                    print(f"|   {label} differences (fluxion, JAX): "
                          + ", ".join(f"{k} {n}/{m}" for k, (n, m) in diff.items()) + " | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
