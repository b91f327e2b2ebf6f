"""fluxion: composable transformations of NumPy programs, compiled by OpenXLA.

`import fluxion as jax` and `import fluxion.numpy as jnp` run JAX programs.
"""
import os as _os

# XLA's C++ logging reads this when jaxlib's extension loads (which the first imports below
# may do): without it every process starts with INFO lines about its PJRT devices.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from fluxion._src.config import config, enable_x64, disable_jit, default_device  # noqa: F401
from fluxion._src.basearray import Array  # noqa: F401
from fluxion._src.api import (jit, make_jaxpr, eval_shape, ShapeDtypeStruct, devices,  # noqa: F401
                              local_devices, device_count, local_device_count, default_backend,
                              device_put, device_get, block_until_ready, process_index,
                              process_count, process_indices, host_id, host_count, host_ids)
from fluxion._src.config import (debug_nans, debug_infs, log_compiles,  # noqa: F401
                                 explain_cache_misses, check_tracer_leaks, checking_leaks)
from fluxion._src.dtypes import float0  # noqa: F401
from fluxion._src.ad_api import grad, value_and_grad, jvp, vjp, linearize  # noqa: F401
from fluxion._src.ad_api import jacfwd, jacrev, jacobian, hessian  # noqa: F401
from fluxion._src.vmap import vmap  # noqa: F401
from fluxion._src.custom_derivatives import custom_jvp, custom_vjp  # noqa: F401
from fluxion._src.checkpoint import checkpoint, remat, checkpoint_policies  # noqa: F401
from fluxion._src import jit_rules as _jit_rules  # noqa: F401  (differentiation of jit calls)
from fluxion import numpy, lax, tree_util, errors, extend, interpreters  # noqa: F401
from fluxion.tree_util import tree_map, tree_flatten, tree_unflatten, tree_leaves, tree_structure  # noqa: F401
from fluxion import core, dtypes, ad_checkpoint, test_util, nn, random, tree, image, scipy  # noqa: F401
from fluxion.interpreters import ad as _ad, batching as _batching  # noqa: F401

__version__ = "0.1.0"

# Debugging and observability (issue 13)
from fluxion._src.callbacks import pure_callback, effects_barrier  # noqa: F401
from fluxion import debug, experimental  # noqa: F401
from fluxion._src.runtime_info import clear_caches, live_arrays, print_environment_info  # noqa: F401
from fluxion._src.transfer_guard import (transfer_guard, transfer_guard_host_to_device,  # noqa: F401
                                         transfer_guard_device_to_host)
from fluxion import profiler  # noqa: F401
from fluxion._src.source_info import named_scope, named_call  # noqa: F401
# ---- parallelism: pmap over devices (fluxion/_src/pmap.py)
from fluxion._src.pmap import pmap  # noqa: E402,F401
from fluxion._src.shard_map import shard_map  # noqa: E402,F401
from fluxion._src.mesh import PartitionSpec as P, make_mesh  # noqa: E402,F401
from fluxion import sharding  # noqa: E402,F401
from fluxion import distributed  # noqa: E402,F401

# Portability (issue 14): fluxion.export
from fluxion import export  # noqa: E402,F401
# ---- sharding: global arrays partitioned by XLA (fluxion/_src/sharding_impls.py, sharded_jit.py)
from fluxion._src.mesh import set_mesh, get_mesh  # noqa: E402,F401
from fluxion._src.global_array import (make_array_from_callback,  # noqa: E402,F401
                                       make_array_from_single_device_arrays,
                                       make_array_from_process_local_data)
from fluxion._src.sharding_impls import NamedSharding  # noqa: E402,F401
from fluxion._src.sharded_jit import reshard  # noqa: E402,F401
from fluxion._src.state.api import Ref, new_ref, empty_ref, free_ref, freeze  # noqa: E402,F401
from fluxion import ref  # noqa: E402,F401
# ---- configuration flags as JAX's top-level context managers (fluxion/_src/config_flags.py)
from fluxion._src.config_flags import (  # noqa: E402,F401
    numpy_rank_promotion, numpy_dtype_promotion, default_matmul_precision, enable_checks,
    no_tracing, no_execution, thread_guard, transfer_guard_device_to_device,
    threefry_partitionable, debug_key_reuse, enable_custom_prng, default_prng_impl,
    legacy_prng_key, allow_f16_reductions, array_garbage_collection_guard, auto_pcast,
    remove_size_one_mesh_axis_from_type, jax2tf_associative_scan_reductions)
# ---- runtime names and small modules of JAX's top level
from fluxion._src.runtime_names import Device, Shard, copy_to_host_async  # noqa: E402,F401
from fluxion import dlpack, monitoring, stages, typing, version, lib  # noqa: E402,F401
# ---- top-level transformations (fluxion/_src/linear_transpose.py, custom_batching.py, ...)
from fluxion._src.linear_transpose import linear_transpose  # noqa: E402,F401
from fluxion._src.custom_gradient import custom_gradient  # noqa: E402,F401
from fluxion._src.closure_conversion import closure_convert  # noqa: E402,F401
from fluxion import custom_derivatives  # noqa: E402,F401
from fluxion import custom_batching  # noqa: E402,F401
from fluxion._src.compile_time_eval import ensure_compile_time_eval  # noqa: E402,F401
from fluxion._src.fwd_and_bwd import fwd_and_bwd  # noqa: E402,F401
from fluxion._src.smap import smap  # noqa: E402,F401
from fluxion._src.state.indexing import ds  # noqa: E402,F401
from fluxion._src.user_context import make_user_context  # noqa: E402,F401
from fluxion._src.config import softmax_custom_jvp  # noqa: E402,F401
from fluxion._src import grad_refs as _grad_refs  # noqa: E402
import types as _types  # noqa: E402
ad = _types.SimpleNamespace(DontWant=_grad_refs.DontWant, DidntWant=_grad_refs.DidntWant,
                            GradRef=_grad_refs.GradRef, GradValue=_grad_refs.GradValue)
from fluxion._src.sharding_types import typeof  # noqa: E402,F401
from fluxion import ops  # noqa: E402,F401
from fluxion import ffi  # noqa: E402,F401
from fluxion import memory  # noqa: E402,F401

# Names JAX 0.10 removed: reading one raises JAX's AttributeError, which says what replaces it.
_REMOVED = {
    name: (f"jax.{name} is deprecated; use jax.device_put instead. See "
           "https://docs.jax.dev/en/latest/migrate_pmap.html#drop-in-replacements for a "
           "drop-in replacement.")
    for name in ("device_put_replicated", "device_put_sharded")}


def __getattr__(name):
    if name in _REMOVED:
        raise AttributeError(_REMOVED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
