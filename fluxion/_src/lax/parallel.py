"""Collectives over named axes: psum, pmean, pmax, pmin, all_gather, axis_index, ppermute,
all_to_all, psum_scatter.

Inside `vmap(..., axis_name=n)` the batch trace named `n` rewrites each collective into ordinary
array operations over the batch dimension (`collective_rules`). Abstract evaluation reads axis
sizes from the named-axis environment, so collectives also trace under jit inside vmap.
"""
from __future__ import annotations

import math

import numpy as np

from fluxion._src import ad, batching, core, dtypes
from fluxion._src.batching import not_mapped
from fluxion._src.core import ShapedArray

__all__ = ["psum", "pmean", "pmax", "pmin", "all_gather", "axis_index", "ppermute", "pshuffle",
           "all_to_all", "psum_scatter", "axis_size"]


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _total_size(names) -> int:
    size = 1
    for n in names:
        size *= batching.axis_size(n)
    return size


def _canonical_groups(axis_index_groups, axis_name) -> tuple | None:
    """`axis_index_groups` as a tuple of tuples of ints, after JAX's checks: named axes only,
    and the groups cover the indices 0..n-1 exactly once (n: the indices given; the lowering
    checks n against the axis size)."""
    if axis_index_groups is None:
        return None
    if any(isinstance(n, int) for n in _names(axis_name)):
        raise ValueError("axis_index_groups only supported for sums over just named axes")
    groups = tuple(tuple(int(i) for i in g) for g in axis_index_groups)
    flat = [i for g in groups for i in g]
    if sorted(flat) != list(range(len(flat))):
        raise ValueError("axis_index_groups must cover all indices exactly once")
    return groups


def _same_size_groups(groups, name: str) -> None:
    """Collectives whose result shape follows the group size need equal groups."""
    if groups is not None and len({len(g) for g in groups}) > 1:
        raise ValueError(f"{name}: axis_index_groups must all have the same size, got sizes "
                         f"{[len(g) for g in groups]}")


def _group_size(axis_name, axis_index_groups) -> int:
    """The number of examples a collective combines: the named axes' size, or with
    `axis_index_groups` the size of the first group (as JAX, also for uneven groups)."""
    if axis_index_groups is not None:
        return len(axis_index_groups[0])
    return _total_size(_names(axis_name))


def _index_in_group(axis_name, axis_index_groups):
    """This example's position along the named axes, or within its group."""
    index = axis_index(axis_name)
    if axis_index_groups is None:
        return index
    from fluxion._src.lax import structural
    table = np.zeros(sum(len(g) for g in axis_index_groups), np.int32)
    for group in axis_index_groups:
        table[list(group)] = np.arange(len(group), dtype=np.int32)
    return structural.dynamic_index_in_dim(table, index, 0, keepdims=False)


def _no_groups_under_vmap(axis_index_groups, message: str) -> None:
    """JAX's vmap collectives refuse `axis_index_groups` (NotImplementedError, its words)."""
    if axis_index_groups is not None:
        raise NotImplementedError(message)


_VMAP_REDUCTION_GROUPS = ("axis_index_groups not supported in vmap collectives. Please open a "
                          "feature request!")


def _no_lowering(name):
    def rule(ctx, *args, **params):
        raise NotImplementedError(
            f"'{name}' over axis {params.get('axis_name')!r} can only be used inside a "
            "transformation that binds that axis name (vmap with axis_name=...).")
    return rule


def _collective(name: str, abstract_eval, multiple_results: bool = False) -> core.Primitive:
    from fluxion._src.compiler import lowering
    prim = core.Primitive(name)
    prim.multiple_results = multiple_results
    prim.def_abstract_eval(abstract_eval)

    def impl(*args, **params):
        for n in _names(params["axis_name"]):
            batching.axis_size(n)  # raises NameError for an unbound name
        raise NotImplementedError(f"'{name}' needs an enclosing vmap binding its axis name")
    prim.def_impl(impl)
    lowering.register_lowering(prim, _no_lowering(name))
    return prim


# ---------------------------------------------------------------------------------------------
# psum / pmax / pmin (pmean is psum divided by the axis size)

def _reduction_collective(name, reduce_fn, unbatched_fn):
    def abstract_eval(x, *, axis_name, axis_index_groups=None):
        _total_size(_names(axis_name))
        return x

    prim = _collective(name, abstract_eval)

    def rule(trace, vals, dims, *, axis_name, axis_index_groups=None):
        _no_groups_under_vmap(axis_index_groups, _VMAP_REDUCTION_GROUPS)
        (x,), (d,) = vals, dims
        params = dict(axis_name=axis_name, axis_index_groups=axis_index_groups)
        out = unbatched_fn(x, trace.axis_size) if d is not_mapped else reduce_fn(x, (d,))
        rest = tuple(n for n in _names(axis_name) if n != trace.axis_name)
        if rest:
            out = prim.bind(out, **{**params, "axis_name": rest})
        return out, not_mapped

    batching.collective_rules[prim] = rule
    batching.primitive_batchers[prim] = lambda vals, dims, **params: (
        prim.bind(*vals, **params), dims[0])
    return prim


def _lax():
    from fluxion._src.lax import lax
    return lax


psum_p = _reduction_collective(
    "psum", lambda x, axes: _lax().reduce_sum(x, axes),
    lambda x, size: _lax().mul(x, _lax()._convert_element_type(size, core.get_aval(x).dtype, False)))
pmax_p = _reduction_collective("pmax", lambda x, axes: _lax().reduce_max(x, axes), lambda x, size: x)
pmin_p = _reduction_collective("pmin", lambda x, axes: _lax().reduce_min(x, axes), lambda x, size: x)
ad.deflinear(psum_p, lambda ct, x, *, axis_name, axis_index_groups=None: [
    psum_p.bind(ct, axis_name=axis_name, axis_index_groups=axis_index_groups)])


def _extremum_jvp(prim):
    # The tangent of the extreme value: the mean of the tangents of the examples attaining it.
    def jvp(primals, tangents, *, axis_name, axis_index_groups=None):
        from fluxion._src.lax import lax
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axis_name=axis_name, axis_index_groups=axis_index_groups)
        if type(t) is ad.Zero:
            return out, t
        dtype = core.get_aval(x).dtype
        hit = lax._convert_element_type(lax.eq(x, out), dtype, False)
        params = dict(axis_name=axis_name, axis_index_groups=axis_index_groups)
        num = psum_p.bind(lax.mul(t, hit), **params)
        return out, lax.div(num, psum_p.bind(hit, **params))
    return jvp


ad.primitive_jvps[pmax_p] = _extremum_jvp(pmax_p)
ad.primitive_jvps[pmin_p] = _extremum_jvp(pmin_p)


def psum(x, axis_name, *, axis_index_groups=None):
    """Sum `x` (a pytree) over the named mapped axis; a Python number gives number * size.

    `axis_index_groups` (a list of lists of axis indices covering the axis once) sums within
    each group instead (under pmap and shard_map)."""
    from fluxion._src.tree_util import tree_map
    groups = _canonical_groups(axis_index_groups, axis_name)

    name = tuple(axis_name) if isinstance(axis_name, list) else axis_name

    def one(leaf):
        if dtypes.is_python_scalar(leaf) or isinstance(leaf, (np.ndarray, np.generic)):
            # A constant is the same in every example: its sum is known statically.
            return leaf * _group_size(axis_name, groups)
        if core.get_aval(leaf).dtype == dtypes.bool_:  # as JAX: a count of the true examples
            from fluxion._src.lax import lax
            leaf = lax._convert_element_type(leaf, np.dtype(np.int32), False)
        return psum_p.bind(leaf, axis_name=name, axis_index_groups=groups)
    return tree_map(one, x)


def pmean(x, axis_name, *, axis_index_groups=None):
    """Mean of `x` over the named mapped axis (or within each of `axis_index_groups`; as in
    JAX, the sum is divided by the size of the first group)."""
    from fluxion._src.tree_util import tree_map
    groups = _canonical_groups(axis_index_groups, axis_name)
    size = _group_size(axis_name, groups)
    summed = psum(x, axis_name, axis_index_groups=axis_index_groups)
    return tree_map(lambda s: s / size, summed)


def pmax(x, axis_name, *, axis_index_groups=None):
    """Maximum of `x` over the named mapped axis."""
    from fluxion._src.tree_util import tree_map
    groups = _canonical_groups(axis_index_groups, axis_name)
    return tree_map(lambda l: pmax_p.bind(l, axis_name=axis_name, axis_index_groups=groups), x)


def pmin(x, axis_name, *, axis_index_groups=None):
    """Minimum of `x` over the named mapped axis."""
    from fluxion._src.tree_util import tree_map
    groups = _canonical_groups(axis_index_groups, axis_name)
    return tree_map(lambda l: pmin_p.bind(l, axis_name=axis_name, axis_index_groups=groups), x)


def axis_size(axis_name) -> int:
    """The size of the named mapped axis."""
    return _total_size(_names(axis_name))


# ---------------------------------------------------------------------------------------------
# axis_index

def _axis_index_abstract_eval(*, axis_name):
    _total_size(_names(axis_name))  # raises NameError for an unbound name
    return ShapedArray((), np.int32)


axis_index_p = _collective("axis_index", _axis_index_abstract_eval)


def _axis_index_rule(trace, vals, dims, *, axis_name):
    """The index along this vmap's axis; for several names, the row-major index over them all
    (JAX's: names[0] varies slowest), each other name's part from its own vmap."""
    from fluxion._src.lax import lax, structural
    names = _names(axis_name)
    strides = [_total_size(names[k + 1:]) for k in range(len(names))]
    out = structural.iota(np.int32, trace.axis_size)
    for name, stride in zip(names, strides):
        if name == trace.axis_name:
            if stride != 1:
                out = lax.mul(out, np.int32(stride))
    for name, stride in zip(names, strides):
        if name != trace.axis_name:
            other = axis_index_p.bind(axis_name=name)
            out = lax.add(out, lax.mul(other, np.int32(stride)) if stride != 1 else other)
    return out, 0


batching.collective_rules[axis_index_p] = _axis_index_rule
ad.defjvp_zero(axis_index_p)


def axis_index(axis_name):
    """The index of the current example along the named mapped axis (int32); over several
    names, the row-major index over them all (the first name varies slowest)."""
    names = _names(axis_name)
    if len(names) == 1:
        return axis_index_p.bind(axis_name=names[0])
    from fluxion._src.lax import lax
    index = None
    for k, name in enumerate(names):
        term = axis_index_p.bind(axis_name=name)
        stride = _total_size(names[k + 1:])
        term = lax.mul(term, np.int32(stride)) if stride != 1 else term
        index = term if index is None else lax.add(index, term)
    return index


# ---------------------------------------------------------------------------------------------
# all_gather

def _all_gather_abstract_eval(x, *, axis_name, axis, tiled, axis_index_groups=None):
    _total_size(_names(axis_name))  # raises NameError for an unbound name
    size = _group_size(axis_name, axis_index_groups)
    shape = list(x.shape)
    if tiled:
        shape[axis] *= size
    else:
        shape.insert(axis, size)
    return x.update(shape=tuple(shape))


all_gather_p = _collective("all_gather", _all_gather_abstract_eval)


def _all_gather_rule(trace, vals, dims, *, axis_name, axis, tiled, axis_index_groups=None):
    from fluxion._src.lax import lax
    _no_groups_under_vmap(axis_index_groups, "axis_index_groups not supported in vmap")
    (x,), (d,) = vals, dims
    if d is not_mapped:
        x, d = batching.broadcast_batch(x, trace.axis_size, 0), 0
    out = batching.moveaxis(x, d, axis)
    if tiled:
        shape = list(core.get_aval(out).shape)
        merged = shape[axis] * shape[axis + 1]
        out = lax.reshape(out, tuple(shape[:axis] + [merged] + shape[axis + 2:]))
    return out, not_mapped


def _single_axis(rule, name):
    """`rule` for one axis name; several (a tuple) under nested vmaps are refused, as in
    JAX (whose vmap rules assert), instead of gathering over the innermost axis only."""
    def checked(trace, vals, dims, **params):
        if len(_names(params["axis_name"])) > 1:
            raise NotImplementedError(f"{name} over several axis names "
                                      f"{params['axis_name']!r} is not supported under vmap")
        return rule(trace, vals, dims, **params)
    return checked


batching.collective_rules[all_gather_p] = _single_axis(_all_gather_rule, "all_gather")


def _all_gather_transpose(ct, x, *, axis_name, axis, tiled, axis_index_groups=None):
    # Every example receives everyone's value, so x's cotangent sums its slot over examples.
    from fluxion._src.lax import structural
    summed = psum_p.bind(ad.instantiate(ct), axis_name=axis_name,
                         axis_index_groups=axis_index_groups)
    index = _index_in_group(axis_name, axis_index_groups)
    if tiled:
        chunk = x.aval.shape[axis]
        return [structural.dynamic_slice_in_dim(summed, index * chunk, chunk, axis)]
    return [structural.dynamic_index_in_dim(summed, index, axis, keepdims=False)]


ad.deflinear(all_gather_p, _all_gather_transpose)


def all_gather(x, axis_name, *, axis_index_groups=None, axis: int = 0, tiled: bool = False):
    """Gather `x` from every example of the named axis (or of its group in
    `axis_index_groups`, groups of one size), stacked (or concatenated if tiled) along
    `axis`."""
    from fluxion._src.tree_util import tree_map
    groups = _canonical_groups(axis_index_groups, axis_name)
    _same_size_groups(groups, "all_gather")

    def one(leaf):
        ndim = core.get_aval(leaf).ndim + (0 if tiled else 1)
        if not -ndim <= axis < ndim:  # JAX's class and message
            raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
        ax = axis % ndim
        return all_gather_p.bind(leaf, axis_name=axis_name, axis=ax, tiled=tiled,
                                 axis_index_groups=groups)
    return tree_map(one, x)


# ---------------------------------------------------------------------------------------------
# ppermute

def _ppermute_abstract_eval(x, *, axis_name, perm):
    size = _total_size(_names(axis_name))
    bad = [pair for pair in perm if not all(0 <= i < size for i in pair)]
    if bad:  # JAX's class (an IndexError from its lookup), with a message naming the pair
        raise IndexError(f"ppermute perm pair {bad[0]} is outside the axis {axis_name!r} of "
                         f"size {size}")
    return x


ppermute_p = _collective("ppermute", _ppermute_abstract_eval)


def _ppermute_rule(trace, vals, dims, *, axis_name, perm):
    from fluxion._src.lax import lax, structural
    from fluxion._src.numpy import indexing  # noqa: F401  (installs __getitem__)
    (x,), (d,) = vals, dims
    size = trace.axis_size
    if d is not_mapped:
        x, d = batching.broadcast_batch(x, size, 0), 0
    x = batching.moveaxis(x, d, 0)
    source = np.full(size, -1, np.int64)
    for src, dst in perm:
        source[dst] = src
    gathered = x[np.where(source < 0, 0, source).astype(np.int32)]
    mask_shape = (size,) + (1,) * (core.get_aval(x).ndim - 1)
    keep = np.asarray(source >= 0).reshape(mask_shape)
    zeros = lax._convert_element_type(0, core.get_aval(x).dtype, False)
    keep_b = lax.broadcast_in_dim(keep, core.get_aval(gathered).shape, tuple(range(len(mask_shape))))
    return structural.select(keep_b, gathered, lax.broadcast_in_dim(zeros, core.get_aval(gathered).shape, ())), 0


batching.collective_rules[ppermute_p] = _single_axis(_ppermute_rule, "ppermute")


def _ppermute_transpose(ct, x, *, axis_name, perm):
    inverse = tuple((dst, src) for src, dst in perm)
    return [ppermute_p.bind(ct, axis_name=axis_name, perm=inverse)]


ad.deflinear(ppermute_p, _ppermute_transpose)


def ppermute(x, axis_name, perm):
    """Send each example's `x` to another: `perm` is a sequence of (source, destination) index
    pairs; destinations nobody sends to receive zeros."""
    from fluxion._src.tree_util import tree_map
    perm = tuple((int(s), int(t)) for s, t in perm)
    srcs, dsts = [s for s, _ in perm], [t for _, t in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got perm={perm}")
    return tree_map(lambda l: ppermute_p.bind(l, axis_name=axis_name, perm=perm), x)


def pshuffle(x, axis_name, perm):
    """Example i receives the value of example perm[i]."""
    if set(perm) != set(range(len(perm))):  # JAX's check and words
        raise ValueError(f"`perm` does not represent a permutation: {perm}")
    return ppermute(x, axis_name, [(src, dst) for dst, src in enumerate(perm)])


# ---------------------------------------------------------------------------------------------
# all_to_all and psum_scatter

def _all_to_all_abstract_eval(x, *, axis_name, split_axis, concat_axis, tiled, axis_index_groups=None):
    _total_size(_names(axis_name))  # raises NameError for an unbound name
    size = _group_size(axis_name, axis_index_groups)
    shape = list(x.shape)
    if shape[split_axis] % size:
        raise ValueError(f"all_to_all: split axis of size {shape[split_axis]} is not divisible "
                         f"by the axis size {size}")
    if tiled:
        shape[split_axis] //= size
        shape[concat_axis] *= size
    else:
        if shape[split_axis] != size:
            raise ValueError(f"all_to_all with tiled=False needs the split axis to have the axis "
                             f"size {size}, got {shape[split_axis]}")
        del shape[split_axis]
        shape.insert(concat_axis, size)
    return x.update(shape=tuple(shape))


all_to_all_p = _collective("all_to_all", _all_to_all_abstract_eval)


def _all_to_all_rule(trace, vals, dims, *, axis_name, split_axis, concat_axis, tiled,
                     axis_index_groups=None):
    from fluxion._src.lax import lax
    (x,), (d,) = vals, dims
    size = trace.axis_size
    aval = core.get_aval(x)
    example = aval if d is not_mapped else aval.update(shape=aval.shape[:d] + aval.shape[d + 1:])
    _all_to_all_abstract_eval(example, axis_name=axis_name, split_axis=split_axis,
                              concat_axis=concat_axis, tiled=tiled)  # the shape checks
    if d is not_mapped:
        x, d = batching.broadcast_batch(x, size, 0), 0
    x = batching.moveaxis(x, d, 0)  # (B, *example_shape)
    shape = list(core.get_aval(x).shape)
    s = split_axis + 1
    if tiled:
        # split the split axis into (size, chunk): x[i, ..., j, chunk, ...]
        chunk = shape[s] // size
        x = lax.reshape(x, tuple(shape[:s] + [size, chunk] + shape[s + 1:]))
        # out[j] = concat over i of x[i, ..., j, ...] along concat_axis
        x = batching.moveaxis(x, s, 0)        # (j, i, ...rest with chunk at s)
        x = batching.moveaxis(x, 1, concat_axis + 1)
        out_shape = list(core.get_aval(x).shape)
        c = concat_axis + 1
        merged = out_shape[c] * out_shape[c + 1]
        x = lax.reshape(x, tuple(out_shape[:c] + [merged] + out_shape[c + 2:]))
        return x, 0
    x = batching.moveaxis(x, s, 0)            # (j, i, rest without split axis)
    x = batching.moveaxis(x, 1, concat_axis + 1)
    return x, 0


def _all_to_all_over_axes(x, names, split_axis, concat_axis, tiled):
    """all_to_all over several axis names (major first), as one all_to_all per name.

    The split axis is cut into one sub-axis per name; exchanging each sub-axis over its name
    in place turns destination indices into source indices, and the block of source
    sub-axes, merged, is the combined source axis that moves to `concat_axis`.
    """
    from fluxion._src.lax import lax
    sizes = [batching.axis_size(n) for n in names]
    total = math.prod(sizes)
    shape = list(core.get_aval(x).shape)
    if tiled:  # exchange chunks: a (total, chunk) split axis, merged into concat_axis after
        x = lax.reshape(x, tuple(shape[:split_axis] + [total, shape[split_axis] // total]
                                 + shape[split_axis + 1:]))
        x = _all_to_all_over_axes(x, names, split_axis, split_axis, False)
        x = batching.moveaxis(x, split_axis, concat_axis)
        out = list(core.get_aval(x).shape)
        merged = out[concat_axis] * out[concat_axis + 1]
        return lax.reshape(x, tuple(out[:concat_axis] + [merged] + out[concat_axis + 2:]))
    x = lax.reshape(x, tuple(shape[:split_axis] + sizes + shape[split_axis + 1:]))
    for k, name in enumerate(names):
        x = all_to_all_p.bind(x, axis_name=name, split_axis=split_axis + k,
                              concat_axis=split_axis + k, tiled=False, axis_index_groups=None)
    x = lax.reshape(x, tuple(shape))
    return batching.moveaxis(x, split_axis, concat_axis)


def _all_to_all_collective_rule(trace, vals, dims, *, axis_name, split_axis, concat_axis, tiled,
                                axis_index_groups=None):
    """One axis name: `_all_to_all_rule`; several: one exchange per name, traced at `trace`
    (the names of enclosing vmaps pass through it to theirs)."""
    _no_groups_under_vmap(axis_index_groups, "Please open a feature request!")
    names = _names(axis_name)
    if len(names) == 1:
        return _all_to_all_rule(trace, vals, dims, axis_name=axis_name, split_axis=split_axis,
                                concat_axis=concat_axis, tiled=tiled)
    (x,), (d,) = vals, dims
    example = core.get_aval(x)
    if d is not not_mapped:
        example = example.update(shape=example.shape[:d] + example.shape[d + 1:])
    _all_to_all_abstract_eval(example, axis_name=axis_name, split_axis=split_axis,
                              concat_axis=concat_axis, tiled=tiled)  # the shape checks
    with core.set_current_trace(trace):
        out = _all_to_all_over_axes(trace.wrap(x, d), names, split_axis, concat_axis, tiled)
    return trace.unpack(out)


batching.collective_rules[all_to_all_p] = _all_to_all_collective_rule


def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, axis_index_groups=None,
               tiled: bool = False):
    """Split `x` along split_axis into one chunk per example, send chunk j to example j, and
    concatenate what arrives along concat_axis. `x` may be a pytree."""
    from fluxion._src.tree_util import tree_map
    groups = _canonical_groups(axis_index_groups, axis_name)
    _same_size_groups(groups, "all_to_all")
    return tree_map(lambda l: all_to_all_p.bind(
        l, axis_name=axis_name, split_axis=int(split_axis), concat_axis=int(concat_axis),
        tiled=bool(tiled), axis_index_groups=groups), x)


def pswapaxes(x, axis_name, axis: int, *, axis_index_groups=None):
    """Swap the mapped axis `axis_name` with the positional axis `axis` of `x` (a pytree).

    `x.shape[axis]` must equal the size of the mapped axis: this is
    `all_to_all(x, axis_name, axis, axis)`, so the result has the shape of `x`.
    """
    from fluxion._src.tree_util import tree_map

    def one(leaf):
        ndim = core.get_aval(leaf).ndim
        if not -ndim <= axis < ndim:
            raise IndexError(f"pswapaxes: axis {axis} is out of bounds for an array of rank {ndim}")
        return all_to_all(leaf, axis_name, axis % ndim, axis % ndim,
                          axis_index_groups=axis_index_groups)
    return tree_map(one, x)


__all__ += ["pswapaxes"]


def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, axis_index_groups=None,
                 tiled: bool = False):
    """psum, then example j keeps the j-th chunk along scatter_dimension (of each leaf of
    `x`, a pytree)."""
    from fluxion._src.tree_util import tree_map
    groups = _canonical_groups(axis_index_groups, axis_name)
    _same_size_groups(groups, "psum_scatter")
    return tree_map(lambda l: _psum_scatter_leaf(l, axis_name, scatter_dimension, tiled, groups),
                    x)


def _psum_scatter_leaf(x, axis_name, scatter_dimension, tiled, groups):
    from fluxion._src.lax import structural
    summed = psum(x, axis_name, axis_index_groups=groups)
    index = _index_in_group(axis_name, groups)
    size = _group_size(axis_name, groups)
    shape = core.get_aval(summed).shape
    if tiled:
        if shape[scatter_dimension] % size:
            raise ValueError(f"psum_scatter: dimension of size {shape[scatter_dimension]} is not "
                             f"divisible by the axis size {size}")
        chunk = shape[scatter_dimension] // size
        return structural.dynamic_slice_in_dim(summed, index * chunk, chunk, scatter_dimension)
    if shape[scatter_dimension] != size:
        raise ValueError(f"psum_scatter with tiled=False needs dimension {scatter_dimension} of "
                         f"size {size}, got {shape[scatter_dimension]}")
    return structural.dynamic_index_in_dim(summed, index, scatter_dimension, keepdims=False)


# ---------------------------------------------------------------------------------------------
# Varying-manual-axes casts. Values carry no type of the mesh axes they vary over; `pvary_p`
# only marks, in the traced program, where a value becomes varying, for shard_map's check_vma
# analysis (shard_map_vma.py). On values it is the identity, and so are its derivative and
# transpose (fluxion's shard_map transpose treats invariant values as per-device copies).

def _pvary_impl(x, *, axes):
    return x


pvary_p = core.Primitive("pvary")
pvary_p.def_impl(_pvary_impl)
pvary_p.def_abstract_eval(lambda x, *, axes: x)
ad.deflinear(pvary_p, lambda ct, x, *, axes: [ct])
batching.primitive_batchers[pvary_p] = lambda vals, dims, *, axes: (
    pvary_p.bind(vals[0], axes=axes), dims[0])


def _pvary_collective_rule(trace, vals, dims, *, axes):
    rest = tuple(n for n in axes if n != trace.axis_name)
    x = pvary_p.bind(vals[0], axes=rest) if rest else vals[0]
    return x, dims[0]


batching.collective_rules[pvary_p] = _pvary_collective_rule


def _register_pvary_lowering():
    from fluxion._src.compiler import lowering
    lowering.register_lowering(pvary_p, lambda ctx, x, *, axes: x)


_register_pvary_lowering()


# vary_like_p: `x`, varying (for the check_vma analysis) wherever any of `likes` does. Library
# loops (searchsorted's) start their carries from constants; inside a shard_map body with
# varying operands the carries become varying, which the analysis refuses as JAX does a
# user's loop. JAX's implementations start such carries varying; this is how fluxion's do.

vary_like_p = core.Primitive("vary_like")
vary_like_p.def_impl(lambda x, *likes: x)
vary_like_p.def_abstract_eval(lambda x, *likes: x)


def _vary_like_jvp(primals, tangents):
    x, *likes = primals
    out = vary_like_p.bind(x, *likes)
    tx = tangents[0]
    return out, (tx if type(tx) is ad.Zero else vary_like_p.bind(tx, *likes))


def _vary_like_transpose(ct, x, *likes):
    return [ct, *[None] * len(likes)]


ad.primitive_jvps[vary_like_p] = _vary_like_jvp
ad.primitive_transposes[vary_like_p] = _vary_like_transpose
batching.primitive_batchers[vary_like_p] = lambda vals, dims: (
    vary_like_p.bind(*vals), dims[0])


def _register_vary_like_lowering():
    from fluxion._src.compiler import lowering
    lowering.register_lowering(vary_like_p, lambda ctx, x, *likes: x)


_register_vary_like_lowering()


def vary_like(x, *likes):
    """`x` itself; inside a `shard_map` body it counts as varying over the mesh axes any of
    `likes` varies over (outside any named axis it is `x`, with no equation)."""
    if all(name is None for name, _ in batching._axis_env.frames):
        return x  # no named axis: nothing can vary
    return vary_like_p.bind(x, *likes)


def _pvary(x, axis_name):
    from fluxion._src.tree_util import tree_map
    names = _names(axis_name)
    _total_size(names)
    if not names:
        return x
    return tree_map(lambda l: pvary_p.bind(l, axes=names), x)


def pbroadcast(x, axis_name):
    """Mark `x` as varying over `axis_name` (identity on values)."""
    return _pvary(x, axis_name)


def pcast(x, axis_name, *, to):
    """Cast `x` to varying over `axis_name` (`to='varying'`; identity on values). 'reduced'
    and 'unreduced' are accepted as the identity."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name}")
    if to not in ("varying", "unreduced", "reduced"):
        raise ValueError("Got unexpected `to` value. Allowed `to` values are: "
                         "{'unreduced', 'reduced', 'varying'}")
    if to == "varying":
        return _pvary(x, axis_name)
    _total_size(_names(axis_name))
    return x


__all__ += ["pbroadcast", "pcast"]


# ---------------------------------------------------------------------------------------------
# vmap over another axis than the collective's (inside pmap or shard_map): the collective
# applies to the batched value, its axis parameters shifted past the batch dimension.

def _gather_batcher(vals, dims, *, axis, **params):
    x = batching.moveaxis(vals[0], dims[0], 0)
    return all_gather_p.bind(x, axis=axis + 1, **params), 0


def _ppermute_batcher(vals, dims, **params):
    return ppermute_p.bind(vals[0], **params), dims[0]


def _all_to_all_batcher(vals, dims, *, split_axis, concat_axis, **params):
    x = batching.moveaxis(vals[0], dims[0], 0)
    return all_to_all_p.bind(x, split_axis=split_axis + 1, concat_axis=concat_axis + 1,
                             **params), 0


batching.primitive_batchers[all_gather_p] = _gather_batcher
batching.primitive_batchers[ppermute_p] = _ppermute_batcher
batching.primitive_batchers[all_to_all_p] = _all_to_all_batcher

# all_to_all is linear; its transpose sends every chunk back where it came from.
ad.deflinear(all_to_all_p, lambda ct, x, *, axis_name, split_axis, concat_axis, tiled,
             axis_index_groups=None: [all_to_all_p.bind(
                 ad.instantiate(ct), axis_name=axis_name, split_axis=concat_axis,
                 concat_axis=split_axis, tiled=tiled, axis_index_groups=axis_index_groups)])
