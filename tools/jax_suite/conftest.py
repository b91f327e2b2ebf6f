"""pytest setup for JAX's rewritten test files: JAX's test helpers (the oracle) compile and
differentiate with fluxion, and hand fluxion values to JAX only as NumPy arrays."""
import jax  # noqa: F401  (JAX's internals: the tests' test_util, dtypes, config)
import numpy as np
from jax._src import test_util as jtu
from jax._src.internal_test_util import lax_test_util

import fluxion
import fluxion.test_util


class _FluxionApi:
    """Stands for `jax._src.api` inside JAX's test_util: `_CompileAndCheck` jits with fluxion."""

    def __getattr__(self, name):
        return getattr(fluxion, name)


jtu.api = _FluxionApi()
jtu.check_grads = fluxion.test_util.check_grads

_promote_like_jnp = jtu.promote_like_jnp


def _promote_like_jnp_on_numpy(fun, inexact=False):
    # JAX's version calls jax.numpy.asarray, which rejects fluxion Arrays.
    wrapped = _promote_like_jnp(fun, inexact)

    def call(*args, **kwargs):
        args = [np.asarray(a) if isinstance(a, fluxion.Array) else a for a in args]
        return wrapped(*args, **kwargs)
    return call


jtu.promote_like_jnp = _promote_like_jnp_on_numpy


def _fluxion_slicer(x, bdim):
    # lax_test_util slices vmap test inputs with JAX's lax: fluxion's keeps them fluxion's.
    if bdim is None:
        return lambda _: x
    return lambda i: fluxion.lax.index_in_dim(x, i, bdim, keepdims=False)


lax_test_util.slicer = _fluxion_slicer


def _fluxion_axis_types(axis_types):
    return None if axis_types is None else tuple(
        getattr(fluxion.sharding.AxisType, t.name) for t in axis_types)


def _fluxion_create_mesh(mesh_shape, axis_names, iota_order=False, axis_types=None):
    # JAX's meshes cannot shard fluxion arrays: the tests' helpers build fluxion's.
    import math
    axis_types = _fluxion_axis_types(axis_types) or (
        (fluxion.sharding.AxisType.Auto,) * len(mesh_shape))
    if iota_order:
        devices = sorted(fluxion.devices(), key=lambda d: d.id)[:math.prod(mesh_shape)]
        return fluxion.sharding.Mesh(np.array(devices).reshape(mesh_shape), axis_names,
                                     axis_types=axis_types)
    return fluxion.make_mesh(mesh_shape, axis_names, axis_types=axis_types)


def _fluxion_with_explicit_mesh(sizes, names, axis_types=None, iota_order=False):
    def decorator(fn):
        def with_mesh(*args, **kwargs):
            types = _fluxion_axis_types(axis_types) or (
                (fluxion.sharding.AxisType.Explicit,) * len(names))
            mesh = _fluxion_create_mesh(sizes, names, iota_order, axis_types=types)
            with fluxion.set_mesh(mesh):
                return fn(*args, **kwargs, mesh=mesh)
        return with_mesh
    return decorator


jtu.create_mesh = _fluxion_create_mesh
jtu.with_explicit_mesh = _fluxion_with_explicit_mesh
