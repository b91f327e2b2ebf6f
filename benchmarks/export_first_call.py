"""Fresh-process helper of workloads_export.py: `python benchmarks/export_first_call.py MODULE
MODE SIZES_JSON [PATH]`.

MODE "jit": the first call of jit(grad(tanh MLP loss)) (whatever caches the environment
configures). MODE "phases": the same first call through the staged API (trace, lower, compile,
call), reporting each stage; with a warm cache "compile" is the executable's load. MODE "load": deserialize the exported gradient at PATH (written by the parent with
MODULE's export API) and make its first call. Prints one JSON line of seconds.
"""
import importlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.workloads import _tanh_mlp_problem, first_call_of_jit_grad, tanh_mlp_loss  # noqa: E402


def first_call_phases(jax, jnp, sizes) -> dict:
    params, x = _tanh_mlp_problem(jnp, sizes)
    jax.block_until_ready((params, x))
    fn = jax.jit(jax.grad(tanh_mlp_loss(jnp)))
    t0 = time.perf_counter()
    lowered = fn.trace(params, x).lower()
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    jax.block_until_ready(compiled(params, x))
    t3 = time.perf_counter()
    return {"trace_lower_s": t1 - t0, "compile_s": t2 - t1, "first_run_s": t3 - t2,
            "first_call_s": t3 - t0}


def main(argv):
    module_name, mode, sizes = argv[1], argv[2], json.loads(argv[3])
    jax = importlib.import_module(module_name)
    jnp = importlib.import_module(f"{module_name}.numpy")
    if mode == "jit":
        print(json.dumps({"first_call_s": first_call_of_jit_grad(jax, jnp, sizes)}))
        return
    if mode == "phases":
        print(json.dumps(first_call_phases(jax, jnp, sizes)))
        return
    export = importlib.import_module(f"{module_name}.export")
    params, x = _tanh_mlp_problem(jnp, sizes)
    jax.block_until_ready((params, x))
    blob = open(argv[4], "rb").read()
    start = time.perf_counter()
    exp = export.deserialize(bytearray(blob))
    loaded = time.perf_counter()
    jax.block_until_ready(exp.call(params, x))
    done = time.perf_counter()
    print(json.dumps({"deserialize_s": loaded - start, "load_and_call_s": done - start}))


if __name__ == "__main__":
    main(sys.argv)
