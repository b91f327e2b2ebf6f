"""(50-54) scipy, nn and example-library workloads: special functions over 10^6 floats, a
conjugate-gradient solve, BFGS on the Rosenbrock function, a stax CNN training step."""
from __future__ import annotations

import importlib

import numpy as np

from benchmarks.harness import Measures, Row, Steady, Value, Workload


def _sub(jax, name):
    return importlib.import_module(f"{jax.__name__}.{name}")


def special_functions(jax, jnp, sizes):
    special = _sub(jax, "scipy.special")
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(sizes["n"]).astype(np.float32))
    unit = jnp.asarray(rng.uniform(0.01, 0.99, sizes["n"]).astype(np.float32))
    positive = jnp.asarray(rng.uniform(0.1, 20.0, sizes["n"]).astype(np.float32))
    calls = {"logsumexp": (special.logsumexp, x), "gammaln": (special.gammaln, positive),
             "erfinv": (special.erfinv, unit * 2 - 1), "ndtri": (special.ndtri, unit)}
    measures = {}
    for name, (fn, arg) in calls.items():
        compiled = jax.jit(fn)
        measures[name] = Steady(lambda c=compiled, a=arg: c(a).block_until_ready())
    return Measures(**measures)


def conjugate_gradient(jax, jnp, sizes):
    cg = _sub(jax, "scipy.sparse.linalg").cg
    n = sizes["n"]
    rng = np.random.default_rng(0)
    q = rng.standard_normal((n, n)).astype(np.float32) / np.sqrt(n)
    a = jnp.asarray(q @ q.T + np.eye(n, dtype=np.float32))
    b = jnp.asarray(rng.standard_normal(n).astype(np.float32))
    solve = jax.jit(lambda a, b: cg(a, b, tol=0.0, maxiter=sizes["iterations"])[0])
    return Measures(cg=Steady(lambda: solve(a, b).block_until_ready()))


def _rosenbrock(jnp):
    return lambda x: jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def bfgs(jax, jnp, sizes):
    minimize = _sub(jax, "scipy.optimize").minimize
    x0 = jnp.asarray(np.linspace(-1.0, 1.5, sizes["n"]).astype(np.float32))
    run = jax.jit(lambda x: minimize(_rosenbrock(jnp), x, method="BFGS"))
    result = run(x0)

    def iterations():
        return float(run(x0).nit), {}
    return Measures(bfgs=Steady(lambda: run(x0).x.block_until_ready()),
                    bfgs_iterations=Value(iterations)) if int(result.nit) >= 0 else None


def stax_cnn_step(jax, jnp, sizes):
    stax = _sub(jax, "example_libraries.stax")
    optimizers = _sub(jax, "example_libraries.optimizers")
    init, apply = stax.serial(stax.Conv(16, (3, 3), padding="SAME"), stax.Relu,
                              stax.Conv(16, (3, 3), padding="SAME"), stax.Relu,
                              stax.MaxPool((2, 2), strides=(2, 2)), stax.Flatten,
                              stax.Dense(64), stax.Relu, stax.Dense(10), stax.LogSoftmax)
    _, params = init(_sub(jax, "random").PRNGKey(0), (-1, 28, 28, 1))
    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((sizes["batch"], 28, 28, 1)).astype(np.float32))
    y = jnp.asarray(rng.integers(0, 10, sizes["batch"]).astype(np.int32))

    def loss(p):
        return -jnp.mean(jnp.take_along_axis(apply(p, x), y[:, None], axis=1))

    @jax.jit
    def step(i, state):
        return opt_update(i, jax.grad(loss)(get_params(state)), state)
    state = {"s": opt_init(params)}

    def run():
        state["s"] = step(0, state["s"])
        jax.block_until_ready(state["s"])
    return Measures(stax_cnn=Steady(run))


WORKLOADS = [
    Workload(50, "scipy_special",
             tuple(Row(name, f"jit {name} over {{n:,}} f32", "ms", "steady")
                   for name in ("logsumexp", "gammaln", "erfinv", "ndtri")),
             special_functions, {"n": 10**6}, {"n": 10**5}, requires="scipy"),
    Workload(51, "scipy_cg",
             (Row("cg", "sparse.linalg.cg, {n}x{n} SPD, {iterations} iterations (jitted)", "ms",
                  "steady"),),
             conjugate_gradient, {"n": 1000, "iterations": 100}, {"n": 200, "iterations": 20},
             requires="scipy"),
    Workload(52, "scipy_bfgs",
             (Row("bfgs", "optimize.minimize BFGS, {n}-dim Rosenbrock (jitted)", "ms", "steady"),
              Row("bfgs_iterations", "  BFGS iterations taken (equal is the target)", "count",
                  None)),
             bfgs, {"n": 100}, {"n": 10}, requires="scipy"),
    Workload(53, "stax_cnn_step",
             (Row("stax_cnn", "stax CNN + optimizers.adam training step, batch {batch}, 28x28",
                  "ms", "steady"),),
             stax_cnn_step, {"batch": 128}, {"batch": 16}, requires="example_libraries"),
]
