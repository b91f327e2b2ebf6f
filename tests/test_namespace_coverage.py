"""Every public name of JAX's namespaces exists in fluxion's, except those listed here with the
reason (docs/differences.md says more)."""
import importlib

import jax
import pytest

import fluxion

# namespace -> {missing name: reason}
_HELPER = "an import inside JAX's module, not part of its API"
NOT_PROVIDED = {
    "example_libraries.optimizers": {n: _HELPER for n in [
        "jax", "map", "partial", "safe_map", "safe_zip", "unzip2", "zip"]},
    "experimental.serialize_executable": {n: _HELPER for n in [
        "Sequence", "annotations", "io", "jax", "pickle", "xc"]},
    "experimental.topologies": {n: _HELPER for n in [
        "Sequence", "annotations", "jax", "mesh_utils", "xb"]},
    "experimental.multihost_utils": {
        **{n: _HELPER for n in [
            "Any", "P", "ad", "array", "batching", "core", "distributed", "dtypes", "jax",
            "jnp", "lru_cache", "mlir", "partial", "pjit_lib", "prng", "pxla", "safe_zip",
            "sharding_impls", "tree_flatten", "tree_unflatten", "xla_bridge", "xla_client",
            "zlib"]},
        **{n: "JAX's internal primitives and rules of host_local_array_to_global_array and "
              "its inverse (fluxion's are functions, not primitives)" for n in [
            "global_array_to_host_local_array_impl", "global_array_to_host_local_array_p",
            "gtl_abstract_eval", "host_local_array_to_global_array_impl",
            "host_local_array_to_global_array_p", "ltg_abstract_eval", "ltg_batcher"]},
        "reached_preemption_sync_point": "needs the coordination service's preemption "
                                         "sync manager, which fluxion.distributed does not set up",
    },
    "experimental.sparse": {
        "util": "submodule of JAX's package layout holding its internal helpers",
        **{n: "JAX's internal sparse primitives; fluxion's BCOO operations are compositions "
              "of lax operations" for n in [
            "bcoo_dot_general_p", "bcoo_dot_general_sampled_p", "bcoo_extract_p",
            "bcoo_fromdense_p", "bcoo_sort_indices_p", "bcoo_spdot_general_p",
            "bcoo_sum_duplicates_p", "bcoo_todense_p", "bcoo_transpose_p", "bcsr_dot_general_p",
            "bcsr_extract_p", "bcsr_fromdense_p", "bcsr_todense_p", "coo_fromdense_p",
            "coo_matmat_p", "coo_matvec_p", "coo_todense_p", "csr_fromdense_p", "csr_matmat_p",
            "csr_matvec_p", "csr_todense_p", "todense_p"]},
        **{n: "not yet implemented (docs/differences.md, experimental.sparse)" for n in [
            "SparseTracer", "bcoo_conv_general_dilated",
            "bcoo_dot_general_sampled", "bcoo_dynamic_slice", "bcoo_gather",
            "bcsr_broadcast_in_dim", "bcsr_concatenate", "bcsr_extract",
            "bcsr_sum_duplicates"]},
    },
}

NAMESPACES = ["numpy", "numpy.linalg", "numpy.fft", "lax", "lax.linalg", "nn", "nn.initializers",
              "random", "tree", "tree_util", "image", "scipy.special", "scipy.stats",
              "scipy.linalg", "scipy.fft", "scipy.signal", "scipy.optimize", "scipy.sparse.linalg", "scipy.ndimage",
              "scipy.integrate", "scipy.interpolate", "scipy.cluster.vq", "scipy.spatial.transform",
              "example_libraries.stax", "example_libraries.optimizers", "ffi", "profiler",
              "experimental.serialize_executable", "experimental.multihost_utils",
              "errors", "debug", "sharding", "ad_checkpoint", "experimental.checkify",
              "experimental.key_reuse", "experimental.pjit", "experimental.shard_alike",
              "experimental.compute_on", "experimental.layout", "experimental.xla_metadata",
              "experimental.random", "experimental.topologies", "experimental.sparse"]


def _public(module):
    return {n for n in dir(module) if not n.startswith("_")}


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_public_name_exists(namespace):
    theirs = importlib.import_module(f"jax.{namespace}")
    ours = importlib.import_module(f"fluxion.{namespace}")
    allowed = NOT_PROVIDED.get(namespace, {})
    missing = sorted(_public(theirs) - _public(ours) - set(allowed))
    assert not missing, f"fluxion.{namespace} lacks {len(missing)}: {missing}"
    stale = sorted(set(allowed) & _public(ours))
    assert not stale, f"listed as not provided but present: {stale}"
