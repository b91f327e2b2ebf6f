"""`smap`: shard_map over one mesh axis (of the mesh set by `set_mesh`), its inputs and
outputs mapped along integer axes as `vmap` names them."""
from __future__ import annotations

import functools
from typing import Callable

from fluxion._src import core
from fluxion._src.api import check_callable
from fluxion._src.mesh import PartitionSpec, get_mesh
from fluxion._src.traceback_util import api_boundary
from fluxion._src.tree_util import tree_leaves, tree_map


class _InferType:
    """`in_axes` default: each input's mapped axis is read from its sharding."""

    def __repr__(self):
        return "Infer"


Infer = _InferType()


def _axis_to_spec(axis_name, axis):
    if axis is None:
        return PartitionSpec()
    return PartitionSpec(*([None] * axis), axis_name)


def _is_axis_leaf(x):
    return x is None or isinstance(x, int)


def smap(f: Callable | None = None, /, *, in_axes=Infer, out_axes, axis_name):
    """Single-axis `shard_map`: `f` runs once per position along mesh axis `axis_name` of the
    current mesh (`set_mesh`), on the block of each input split along its `in_axes` (None:
    the whole input); outputs are concatenated along `out_axes` (None: the same everywhere).

    `in_axes` defaults to each input's sharding: the dimension split over `axis_name`.
    """
    kwargs = dict(in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    if f is None:
        return lambda g: _smap(g, **kwargs)
    return _smap(f, **kwargs)


def _smap(f, *, in_axes, out_axes, axis_name):
    from fluxion._src.shard_map import shard_map
    check_callable(f)
    if isinstance(axis_name, (list, tuple)):
        raise TypeError(f"smap axis_name should be a `str` or a `Hashable`, but got {axis_name}")
    if in_axes is not None and in_axes is not Infer and not isinstance(in_axes, (int, tuple)):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or a tuple of "
                        "entries corresponding to the positional arguments passed to the "
                        f"function, but got {in_axes}.")
    if in_axes is not Infer and not all(isinstance(a, int) for a in tree_leaves(in_axes)):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or (nested) "
                        f"container with those types as leaves, but got {in_axes}.")
    if not all(isinstance(a, int) for a in tree_leaves(out_axes)):
        raise TypeError("smap out_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {out_axes}.")
    to_spec = functools.partial(_axis_to_spec, axis_name)
    out_specs = tree_map(to_spec, out_axes, is_leaf=lambda x: x is None)

    @functools.wraps(f)
    @api_boundary
    def wrapped(*args):
        mesh = get_mesh()
        if mesh is None:
            raise ValueError("smap needs a mesh: call it under `jax.set_mesh(mesh)` (a mesh "
                             f"with axis {axis_name!r}).")
        if in_axes is Infer:
            in_specs = tuple(tree_map(lambda x: _inferred_spec(x, axis_name), a) for a in args)
        else:
            axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
            in_specs = tree_map(to_spec, axes, is_leaf=lambda x: x is None)
        mapped = shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                           axis_names={axis_name})
        return mapped(*args)

    return wrapped


def _inferred_spec(x, axis_name):
    """The spec of `x` over `axis_name` alone, from its sharding."""
    if isinstance(x, core.Tracer):
        raise NotImplementedError(
            "smap can infer in_axes only from concrete arrays' shardings (fluxion's traced "
            "values carry no sharding); pass in_axes explicitly.")
    spec = getattr(getattr(x, "sharding", None), "spec", None) or ()
    for dim, entry in enumerate(spec):
        names = entry if isinstance(entry, tuple) else (entry,)
        if axis_name in names:
            return _axis_to_spec(axis_name, dim)
    return PartitionSpec()
