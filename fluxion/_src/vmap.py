"""`vmap`: vectorize a function over an axis of its inputs."""
from __future__ import annotations

import functools
import inspect
from typing import Callable

import numpy as np
import optree

from fluxion._src import batching, core, key_flow, source_info, staging
from fluxion._src.config import config
from fluxion._src.api import check_callable, fun_name
from fluxion._src.traceback_util import api_boundary
from fluxion._src import tree_util
from fluxion._src.tree_util import NAMESPACE, tree_flatten, tree_unflatten


def _is_axis_leaf(x) -> bool:
    return x is None or isinstance(x, int)


def broadcast_prefix(prefix, tree, what: str) -> list:
    """One entry of `prefix` (a pytree prefix of `tree` with int/None leaves) per leaf of `tree`."""
    def mismatch(p, t):
        return ValueError(f"vmap {what} specification must be a tree prefix of the corresponding "
                          f"value, got specification {prefix} for value tree "
                          f"{optree.tree_structure(tree, namespace=NAMESPACE)}.")
    return tree_util.broadcast_prefix(prefix, tree, _is_axis_leaf, mismatch)


def _check_axis(axis, ndim: int, shape, where: str) -> int:
    if axis is None:
        return None
    if not isinstance(axis, int):
        raise TypeError(f"vmap in_axes must be an int, None, or a pytree of them; got {axis!r} for {where}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"vmap was requested to map its argument along axis {axis}, which "
                         f"implies that its rank should be at least {axis + 1 if axis >= 0 else -axis}, "
                         f"but is only {ndim} (its shape is {shape})")
    return axis % ndim


def _arg_names(fun, n: int) -> list[str]:
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"args[{i}]" for i in range(n)]


def _is_axis(a) -> bool:
    return isinstance(a, (int, np.integer)) and not isinstance(a, bool)


def _check_axes_spec(in_axes, out_axes) -> None:
    """JAX's TypeErrors, when vmap is applied, for in_axes/out_axes that are not ints or None
    (or containers of them)."""
    if not (in_axes is None or _is_axis(in_axes) or type(in_axes) is tuple):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries corresponding "
                        f"to the positional arguments passed to the function, but got {in_axes}.")
    if not all(_is_axis(a) for a in tree_util.tree_leaves(in_axes)):
        raise TypeError("vmap in_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {in_axes}.")
    if not all(_is_axis(a) for a in tree_util.tree_leaves(out_axes)):
        raise TypeError("vmap out_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {out_axes}.")


def vmap(fun: Callable, in_axes=0, out_axes=0, axis_name=None, axis_size: int | None = None,
         spmd_axis_name=None):
    """Vectorize `fun` over an axis of its inputs.

    Parameters
    ----------
    fun : callable of arrays (pytrees allowed).
    in_axes : int, None, or a pytree prefix of the positional arguments (a tuple with one
        entry per argument) giving the mapped axis of each input (None: not mapped).
        Keyword arguments are mapped over axis 0.
    out_axes : int, None, or a pytree prefix of the output: where the mapped axis goes.
    axis_name : hashable, optional
        Names the mapped axis for collectives (`lax.psum(x, axis_name)`, ...).
    axis_size : int, optional
        The mapped size, needed when no input is mapped.
    """
    check_callable(fun)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    _check_axes_spec(in_axes, out_axes)
    if axis_name is not None:
        hash(axis_name)  # JAX's TypeError for an unhashable name (a list)
    name = fun_name(fun)

    @functools.wraps(fun)
    @api_boundary
    def vmapped(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap in_axes must be an int, None, or a tuple of entries "
                             f"corresponding to the positional arguments passed to the function, "
                             f"but got len(in_axes)={len(in_axes)}, len(args)={len(args)}")
        leaves, in_tree = tree_flatten((args, kwargs))
        if staging.refs_among(leaves):
            from fluxion._src.state import aliasing
            aliasing.check_ref_arguments(fun, leaves, in_tree, (), origin="vmap")
        axes = broadcast_prefix((in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args),
                                 {k: 0 for k in kwargs}), (args, kwargs), "in_axes")
        names = _arg_names(fun, len(args))
        arg_of_leaf = []
        for i, a in enumerate(args):
            arg_of_leaf += [names[i]] * len(tree_flatten(a)[0])
        for k, v in sorted(kwargs.items()):
            arg_of_leaf += [f"kwargs[{k!r}]"] * len(tree_flatten(v)[0])
        dims, sizes = [], []
        for x, ax, where in zip(leaves, axes, arg_of_leaf):
            aval = core.get_aval(x)
            d = _check_axis(ax, aval.ndim, aval.shape, where)
            dims.append(d)
            if d is not None:
                sizes.append((aval.shape[d], d, where, aval))
        size = _mapped_size(sizes, axis_size)
        box = []
        f = key_flow.transparent(fun, (args, kwargs)) if config.debug_key_reuse else fun

        def flat_fun(*xs):
            a, kw = tree_unflatten(in_tree, xs)
            out = f(*a, **kw)
            out_leaves, out_tree = tree_flatten(out)
            _check_outputs(out_leaves)
            box.append((out, out_tree))
            return out_leaves

        with source_info.extend_name_stack(f"vmap({name})"):
            out_vals, out_dims = batching.batch_flat(flat_fun, leaves, dims, axis_name, size,
                                                     spmd_axis_name)
        out, out_tree = box[0]
        out_ax = broadcast_prefix(out_axes, out, "out_axes")
        results = []
        for v, d, target in zip(out_vals, out_dims, out_ax):
            if target is None:
                if d is not None:
                    raise ValueError("vmap has mapped output but out_axes is None")
                results.append(v)
                continue
            ndim = core.get_aval(v).ndim + (d is None)
            if not -ndim <= target < ndim:
                raise ValueError(f"vmap out_axes specification: axis {target} is out of bounds "
                                 f"for array of dimension {ndim}")
            results.append(batching.matchaxis(v, d, target % ndim, size))
        return tree_unflatten(out_tree, results)

    return vmapped


def _check_outputs(leaves) -> None:
    """Raise JAX's TypeError for an output leaf that is not an array (a str, an object)."""
    for x in leaves:
        if not isinstance(x, core.Tracer) and not core.valid_jaxtype(x):
            raise TypeError(f"Output from batched function {x!r} with type {type(x)} is not a "
                            "valid JAX type")


def _mapped_size(sizes, axis_size):
    if not sizes:
        if axis_size is None:
            raise ValueError("vmap must have at least one non-None value in in_axes")
        return axis_size
    distinct = {s for s, *_ in sizes}
    if axis_size is not None:
        distinct.add(axis_size)
    if len(distinct) > 1:
        lines = [f"  * one axis had size {s}: axis {d} of "
                 f"{w if w.startswith('kwargs[') else 'argument ' + w} of type "
                 f"{a.dtype.name}[{','.join(map(str, a.shape))}]" for s, d, w, a in sizes]
        if axis_size is not None:
            lines.append(f"  * axis_size was given as {axis_size}")
        raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n"
                         + ";\n".join(lines))
    return distinct.pop()
