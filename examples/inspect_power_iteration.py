"""fluxion demo: trace, inspect, lower and run a real computation.

Power iteration finds the dominant eigenvalue and eigenvector of a symmetric matrix. One
iteration is a jitted function; the demo prints its jaxpr (fluxion's IR), the StableHLO that
fluxion emits for it, the optimized HLO that XLA compiled, and checks the result against NumPy.
"""
import time

import numpy as np

import fluxion as jax
import fluxion.numpy as jnp


def power_iteration_step(matrix, vector):
    """One step: v <- A v / |A v|; also returns the Rayleigh quotient v.A.v."""
    product = matrix @ vector
    norm = jnp.sqrt(jnp.sum(product * product))
    new_vector = product / norm
    eigenvalue = jnp.sum(new_vector * (matrix @ new_vector))
    return new_vector, eigenvalue


def main():
    rng = np.random.default_rng(0)
    n = 256
    a = rng.standard_normal((n, n)).astype(np.float32)
    matrix_np = a @ a.T / n  # symmetric positive semi-definite: a well-separated top eigenvalue
    matrix = jax.device_put(matrix_np)
    vector = jax.device_put(np.ones(n, np.float32) / np.sqrt(n))

    print("== jaxpr of one power-iteration step ==")
    print(jax.make_jaxpr(power_iteration_step)(matrix, vector))

    step = jax.jit(power_iteration_step)
    lowered = step.lower(matrix, vector)
    print("\n== StableHLO emitted by fluxion ==")
    print(lowered.as_text())
    compiled = lowered.compile()
    print("== XLA's optimized HLO (first lines) ==")
    print("\n".join(compiled.as_text().splitlines()[:12]))

    start = time.perf_counter()
    eigenvalue = None
    for _ in range(500):
        vector, eigenvalue = step(matrix, vector)
    eigenvalue = float(eigenvalue.block_until_ready())
    elapsed = time.perf_counter() - start

    dominant = np.linalg.eigvalsh(matrix_np.astype(np.float64))[-1]
    print(f"\n500 jitted steps in {elapsed * 1e3:.1f} ms on {jax.devices()[0]}")
    print(f"dominant eigenvalue: fluxion {eigenvalue:.5f}   numpy.linalg.eigvalsh {dominant:.5f}")
    assert abs(eigenvalue - dominant) < 1e-2 * abs(dominant), "power iteration did not converge"
    print("OK")


if __name__ == "__main__":
    main()
