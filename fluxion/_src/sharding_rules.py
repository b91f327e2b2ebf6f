"""The sharding rules of primitives on Explicit mesh axes (JAX's `*_sharding_rule`s), used by
the pass of sharding_types.py: each maps its operands' specs to its results' specs, raises
ShardingTypeError when they are inconsistent, or returns a Deferred error where the result's
sharding is ambiguous (an `out_sharding` settles it). A primitive without a rule gives
replicated results; call-like primitives are analysed through their jaxprs. The rules of
the linalg primitives are in sharding_rules_linalg.py, those of convolutions and window
reductions in sharding_rules_windowed.py."""
from __future__ import annotations

from fluxion._src import core
from fluxion._src.core import ClosedJaxpr, Jaxpr
from fluxion._src.mesh import AxisType, PartitionSpec
from fluxion._src.sharding_types import (_TRANSPOSED, Deferred, ShardingTypeError,
                                         _backward_aware, _entry, _fmt, _passes_deferred,
                                         _resolves_deferred, explicit_names, infer_jaxpr,
                                         pspec_string, rules, spec_of, type_string, unsharded)


def _replicated_rule(ctx, ins, in_avals, out_avals, params):
    return [unsharded(len(a.shape)) for a in out_avals]


def _same_as_operand_rule(ctx, ins, in_avals, out_avals, params):
    return [ins[0]] * len(out_avals)


def _each_operand_rule(ctx, ins, in_avals, out_avals, params):
    return list(ins)


def _elementwise_rule(name):
    def rule(ctx, ins, in_avals, out_avals, params):
        return [broadcast_specs(name, ins, in_avals)] * len(out_avals)
    return rule


def broadcast_specs(name, ins, in_avals) -> tuple:
    """JAX's broadcasting_sharding_rule: per dimension the operands' common entry, where a
    size-1 unsharded dimension or an unsharded one gives way to a sharded one."""
    ranked = [(s, a.shape) for s, a in zip(ins, in_avals) if a.shape]
    if not ranked:
        return ()
    ndim = len(ranked[0][1])
    out = []
    for d in range(ndim):
        entries = [s[d] for s, _ in ranked]
        if all(e == entries[0] for e in entries):
            out.append(entries[0])
            continue
        nontrivial = [s[d] for s, shape in ranked if not (shape[d] == 1 and not s[d])]
        if not nontrivial:
            out.append(())
        elif all(e == nontrivial[0] for e in nontrivial):
            out.append(nontrivial[0])
        else:
            chosen = ()
            for e in entries:
                if not chosen and e:
                    chosen = e
                elif chosen and e and e != chosen:
                    raise ShardingTypeError(
                        f"{name} got incompatible shardings for broadcasting: "
                        f"{', '.join(_fmt(s) for s, _ in ranked)}.")
            out.append(chosen)
    return tuple(out)


def _reduce_axes_rule(ctx, ins, in_avals, out_avals, params):
    axes = set(params["axes"])
    return [tuple(e for i, e in enumerate(ins[0]) if i not in axes)]


def _dot_general_rule(ctx, ins, in_avals, out_avals, params):
    lhs, rhs = ins
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    lcs, rcs = tuple(lhs[i] for i in lc), tuple(rhs[i] for i in rc)
    lbs, rbs = tuple(lhs[i] for i in lb), tuple(rhs[i] for i in rb)
    if any(l and r and l != r for l, r in zip(lbs, rbs)):
        return [Deferred(f"dot_general requires lhs batch dimensions and rhs batch dimensions "
                         f"to have the consistent sharding, got {_fmt(lbs)} and {_fmt(rbs)}.")]
    if any(l and r and l != r for l, r in zip(lcs, rcs)):
        return [Deferred(f"dot_general requires contracting dimensions to have consistent "
                         f"sharding, got {_fmt(lcs)} and {_fmt(rcs)}.")]
    if any(l and r for l, r in zip(lcs, rcs)) and not params.get(_TRANSPOSED):
        return [Deferred("Contracting dimensions are sharded and it is ambiguous how the output "
                         "should be sharded. Please specify the output sharding via the "
                         f"`out_sharding` parameter. Got lhs_contracting_spec={_fmt(lcs)} and "
                         f"rhs_contracting_spec={_fmt(rcs)}")]
    lfree = [lhs[i] for i in range(len(lhs)) if i not in set(lc) | set(lb)]
    rfree = [rhs[i] for i in range(len(rhs)) if i not in set(rc) | set(rb)]
    out = tuple(lbs) + tuple(lfree) + tuple(rfree)
    used = [a for e in out for a in e]
    if len(used) != len(set(used)):
        return [Deferred(f"dot_general: the output spec {_fmt(out)} would name a mesh axis "
                         "twice; specify the output sharding via the `out_sharding` parameter")]
    return [out]


def _transpose_rule(ctx, ins, in_avals, out_avals, params):
    return [tuple(ins[0][i] for i in params["permutation"])]


def _given_sharding(ctx, params, ndim):
    s = params.get("sharding")
    return None if s is None else spec_of(s, ndim, ctx.explicit)


def _broadcast_in_dim_rule(ctx, ins, in_avals, out_avals, params):
    given = _given_sharding(ctx, params, len(out_avals[0].shape))
    if given is not None:
        return [given]
    dims = list(params["broadcast_dimensions"])
    out = [()] * len(params["shape"])
    for e, d in zip(ins[0], dims):
        # a size-1 dimension broadcast to a bigger one cannot stay split
        out[d] = e if in_avals[0].shape[dims.index(d)] == params["shape"][d] else ()
    return [tuple(out)]


def _squeeze_rule(ctx, ins, in_avals, out_avals, params):
    dims = {d % max(len(ins[0]), 1) for d in params["dimensions"]}
    return [tuple(e for i, e in enumerate(ins[0]) if i not in dims)]


def _varying_shape_rule(name):
    def rule(ctx, ins, in_avals, out_avals, params):
        spec, shape = ins[0], in_avals[0].shape
        out_shape = out_avals[0].shape
        for n, m, e in zip(shape, out_shape, spec):
            if n != m and e and m % ctx.size(e):
                return [Deferred(
                    f"{name} on sharded dims where out dim ({m}) is not divisible by mesh axes "
                    f"({ctx.size(e)}) with spec ({_entry(e)}) is not implemented. Got input "
                    f"type={type_string(in_avals[0], spec)} and output shape={tuple(out_shape)}")
                    ] * len(out_avals)
        return [spec] * len(out_avals)
    return rule


def _reduce_rule(ctx, ins, in_avals, out_avals, params):
    """lax.reduce over several operands: the operands' common sharding less the reduced
    dimensions."""
    n = len(ins) // 2
    spec = broadcast_specs("reduce", ins[:n], in_avals[:n])
    dims = set(params["dimensions"])
    return [tuple(e for d, e in enumerate(spec) if d not in dims)] * len(out_avals)


def _split_rule(ctx, ins, in_avals, out_avals, params):
    return [_varying_shape_rule("split")(ctx, ins, in_avals, [a], params)[0]
            for a in out_avals]


def _common_sharding(ins):
    """The operands' common spec, None if they differ. A wholly unsharded operand gives way:
    fluxion's iotas and broadcasts (as vmap's index arrays) come unsharded where JAX's take
    the other operands' sharding."""
    sharded = [s for s in ins if any(s)] or [ins[0]]
    return sharded[0] if all(s == sharded[0] for s in sharded[1:]) else None


def _concatenate_rule(ctx, ins, in_avals, out_avals, params):
    spec = _common_sharding(ins)
    if spec is None:
        raise ShardingTypeError("All operands should have the same sharding. Got shardings "
                                + ", ".join(_fmt(s) for s in ins))
    return [spec]


def _select_n_rule(ctx, ins, in_avals, out_avals, params):
    # Broadcasting's rule over `which` and the cases: fluxion's jnp broadcasts scalars and
    # smaller operands unsharded, where JAX's give them the result's sharding first.
    return [broadcast_specs("select_n", ins, in_avals)]


def _dynamic_update_slice_rule(ctx, ins, in_avals, out_avals, params):
    if ins[0] != ins[1]:
        raise ShardingTypeError(
            "dynamic_update_slice operand sharding must be equal to update sharding, got "
            f"operand sharding {type_string(in_avals[0], ins[0])} and update sharding "
            f"{type_string(in_avals[1], ins[1])}.")
    return [ins[0]]


def _iota_rule(ctx, ins, in_avals, out_avals, params):
    given = _given_sharding(ctx, params, len(out_avals[0].shape))
    return [given if given is not None else unsharded(len(out_avals[0].shape))]


def _sort_rule(ctx, ins, in_avals, out_avals, params):
    # JAX's messages, with the specs where JAX prints whole NamedShardings
    dimension = params["dimension"]
    for s in ins:
        if s[dimension]:
            raise ShardingTypeError("Arguments to sort must be unsharded over the sorting "
                                    f"dimension. Got arg sharding={pspec_string(s)} and "
                                    f"sorting dimension={dimension}")
    spec = _common_sharding(ins)
    if spec is None:
        raise ShardingTypeError("Arguments to sort must have equal shardings, got: "
                                + " ".join(pspec_string(s) for s in ins))
    return [spec] * len(out_avals)


def _gather_rule(ctx, ins, in_avals, out_avals, params):
    """JAX's gather rule: operand dimensions that are indexed into must be replicated or
    sliced whole; batching dimensions pair the operand's and the indices' shardings (either
    may be unsharded); the other dimensions of the indices must be unsharded."""
    operand, indices = ins
    if not any(operand) and not any(indices):
        return [unsharded(len(out_avals[0].shape))]
    dn = params["dimension_numbers"]
    slice_sizes = params["slice_sizes"]
    op_shape = in_avals[0].shape
    op_batch = tuple(getattr(dn, "operand_batching_dims", ()))
    idx_batch = tuple(getattr(dn, "start_indices_batching_dims", ()))
    ok = (all(slice_sizes[i] == op_shape[i] or not operand[i] for i in dn.start_index_map)
          and all(not operand[o] or not indices[i] or operand[o] == indices[i]
                  for o, i in zip(op_batch, idx_batch))
          and not any(e for i, e in enumerate(indices) if i not in idx_batch))
    if ok:
        idx = list(indices)
        for o, i in zip(op_batch, idx_batch):
            idx[i] = idx[i] or operand[o]
        offset_src = iter(i for i in range(len(operand))
                          if i not in dn.collapsed_slice_dims and i not in op_batch)
        idx_src = iter(idx)
        out = tuple(operand[next(offset_src)] if d in dn.offset_dims else next(idx_src)
                    for d in range(len(out_avals[0].shape)))
        used = [a for e in out for a in e]
        if len(used) == len(set(used)):
            return [out]
    return [Deferred(
        "Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather "
        "indexing as out sharding could not be resolved unambiguously (or would require "
        f"collectives on inputs). Got operand={type_string(in_avals[0], operand)}, "
        f"indices={type_string(in_avals[1], indices)}")]


def _reshape_rule(ctx, ins, in_avals, out_avals, params):
    given = _given_sharding(ctx, params, len(out_avals[0].shape))
    if given is not None:
        return [given]
    spec, shape = ins[0], tuple(in_avals[0].shape)
    new = tuple(params["new_sizes"])
    if params.get("dimensions") is not None:
        perm = params["dimensions"]
        spec, shape = tuple(spec[i] for i in perm), tuple(shape[i] for i in perm)
        if any(spec):
            return [Deferred(_reshape_message(in_avals[0], ins[0], new))]
    if not any(spec):
        return [unsharded(len(new))]
    out = reshape_spec(ctx, spec, shape, new)
    return [Deferred(_reshape_message(in_avals[0], ins[0], new)) if out is None else out]


def _reshape_message(aval, spec, new):
    return ("This reshape is not supported. Please specify the sharding of the output via the "
            f"`out_sharding` argument of jax.lax.reshape. Got operand shape: "
            f"{type_string(aval, spec)}, new sizes: {tuple(new)}")


def reshape_spec(ctx, spec, shape, new):
    """JAX's reshape rules: size-1 dimensions come and go unsharded; one dimension split into
    several takes its axes major to minor (each part a multiple of its axes); several merged
    into one take their axes in order, when only the leading ones are sharded. None: the
    result's sharding is ambiguous."""
    if [n for n in shape if n != 1] == [n for n in new if n != 1]:
        kept = iter(e for n, e in zip(shape, spec) if n != 1)
        return tuple(() if n == 1 else next(kept) for n in new)
    out, i, j = [], 0, 0
    while i < len(shape) or j < len(new):
        if i < len(shape) and j < len(new) and shape[i] == new[j]:
            out.append(spec[i])
            i, j = i + 1, j + 1
            continue
        # find the smallest group shape[i:i2] and new[j:j2] with equal products
        i2, j2 = i + 1, j + 1
        a = shape[i] if i < len(shape) else 1
        b = new[j] if j < len(new) else 1
        while a != b:
            if a < b:
                if i2 >= len(shape):
                    return None
                a *= shape[i2]
                i2 += 1
            else:
                if j2 >= len(new):
                    return None
                b *= new[j2]
                j2 += 1
        src, dst = list(range(i, i2)), list(range(j, j2))
        if len(src) == 1:  # split one dimension into new[j:j2]
            axes = list(spec[i])
            parts = []
            for n in new[j:j2]:
                mine = []
                while n > 1 and axes:
                    k = ctx.sizes[axes[0]]
                    if n % k:
                        return None
                    n //= k
                    mine.append(axes.pop(0))
                parts.append(tuple(mine))
            if axes:
                return None
            out.extend(parts)
        elif len(dst) == 1:  # merge shape[i:i2] into one (its size-1 dimensions aside)
            entries = [spec[k] for k in src if shape[k] != 1 or spec[k]]
            if all(not e for e in entries):
                out.append(())
            else:
                while entries and not entries[-1]:
                    entries.pop()
                if any(not e for e in entries):
                    return None
                merged = tuple(a for e in entries for a in e)
                if new[j] % ctx.size(merged):
                    return None
                out.append(merged)
        else:
            if any(spec[k] for k in src):
                return None
            out.extend([()] * len(dst))
        i, j = i2, j2
    return tuple(out)


def _cumulative_rule(ctx, ins, in_avals, out_avals, params):
    axis = params["axis"]
    if ins[0][axis]:
        raise ShardingTypeError(f"Input should be unsharded over the axis being reduced. Got "
                                f"input type={type_string(in_avals[0], ins[0], False)} and "
                                f"axis={axis}")
    return [ins[0]]


def _top_k_rule(ctx, ins, in_avals, out_avals, params):
    axis = len(in_avals[0].shape) - 1
    if ins[0][axis]:
        raise ShardingTypeError("The input should be unsharded over the axis along which to "
                                "compute the top_k values. Got input type="
                                f"{type_string(in_avals[0], ins[0], False)} and axis={axis}")
    return [ins[0]] * len(out_avals)


def _scatter_rule(ctx, ins, in_avals, out_avals, params):
    """JAX's scatter rule (its gather rule in reverse): batching dimensions resolve between
    operand, indices and updates; window dimensions resolve between operand and updates
    (the same or one unsharded when a full slice, unsharded otherwise: fluxion's jnp and
    backward passes make updates and zero operands unsharded where JAX's give them the other
    operand's sharding); the rest of the indices and updates and the operand's inserted window
    dimensions are unsharded."""
    operand, indices, updates = ins[:3]
    if not any(operand) and not any(indices) and not any(updates):
        return [operand]
    if not indices:
        return [Deferred("scatter indices need an index vector dimension")]
    dn = params["dimension_numbers"]
    op_shape, up_shape = in_avals[0].shape, in_avals[2].shape
    op_batch = tuple(getattr(dn, "operand_batching_dims", ()))
    idx_batch = tuple(getattr(dn, "scatter_indices_batching_dims", ()))
    vector_dim = len(indices) - 1
    query_dims = [d for d in range(len(updates)) if d not in dn.update_window_dims]
    up_batch = tuple(query_dims[i] for i in idx_batch)
    op_window = [i for i in range(len(operand))
                 if i not in dn.inserted_window_dims and i not in op_batch]
    ok = (all(len({e for e in (operand[o], indices[i], updates[u]) if e}) <= 1
              for o, i, u in zip(op_batch, idx_batch, up_batch))
          and all((up_shape[u] == op_shape[o] and len({updates[u], operand[o]} - {()}) <= 1)
                  or (not updates[u] and not operand[o])
                  for u, o in zip(dn.update_window_dims, op_window))
          and not any(operand[i] for i in dn.inserted_window_dims)
          and not any(updates[d] for d in query_dims if d not in up_batch)
          and not any(indices[d] for d in range(vector_dim) if d not in idx_batch)
          and not indices[vector_dim])
    if ok:
        out = list(operand)
        for o, i, u in zip(op_batch, idx_batch, up_batch):
            out[o] = out[o] or indices[i] or updates[u]
        for u, o in zip(dn.update_window_dims, op_window):
            out[o] = out[o] or updates[u]
        return [tuple(out)]
    return [Deferred("Use `.at[...].set/add/mul/...(out_sharding=)` to provide output "
                     "PartitionSpec for the scatter update as out sharding could not be "
                     "resolved unambiguously (or would require collectives on inputs). Got "
                     f"operand={type_string(in_avals[0], operand)}, "
                     f"indices={type_string(in_avals[1], indices)}, "
                     f"updates={type_string(in_avals[2], updates)}")]


def _sharding_like_rule(ctx, ins, in_avals, out_avals, params):
    return [ins[1]] if in_avals[0].shape == in_avals[1].shape else [ins[0]]


def _constraint_rule(ctx, ins, in_avals, out_avals, params):
    from fluxion._src.sharding_impls import AxesTypes
    sharding = params["sharding"]
    if isinstance(sharding, AxesTypes):  # auto_axes / explicit_axes: the layout stays
        if isinstance(ins[0], Deferred):
            raise ins[0].error()
        if sharding.axis_type is AxisType.Explicit:
            return [ins[0]]
        gone = set(ctx.mesh.axis_names if sharding.axes is None else sharding.axes)
        return [tuple(tuple(a for a in e if a not in gone) for e in ins[0])]
    mesh = getattr(sharding, "mesh", None)
    explicit = ctx.explicit & explicit_names(mesh) if mesh is not None else ctx.explicit
    return [spec_of(sharding, len(out_avals[0].shape), explicit)]


def _inner_jaxpr(params, n_in, n_out):
    found = None
    for v in params.values():
        if isinstance(v, (Jaxpr, ClosedJaxpr)):
            j = v.jaxpr if isinstance(v, ClosedJaxpr) else v
            if len(j.invars) == n_in and len(j.outvars) == n_out:
                if found is not None:
                    return None
                found = v
    return found


def _call_rule(ctx, ins, in_avals, out_avals, params):
    return infer_jaxpr(_inner_jaxpr(params, len(ins), len(out_avals)), ins, ctx)


def _fallback_rule(ctx, ins, in_avals, out_avals, params):
    """A call-like primitive (one jaxpr param taking its operands) is analysed through its
    jaxpr; any other primitive without a rule gives replicated results."""
    if _inner_jaxpr(params, len(ins), len(out_avals)) is not None:
        return _call_rule(ctx, ins, in_avals, out_avals, params)
    return _replicated_rule(ctx, ins, in_avals, out_avals, params)


def _agree(what, a, b):
    for x, y in zip(a, b):
        if isinstance(x, Deferred) or isinstance(y, Deferred):
            raise (x if isinstance(x, Deferred) else y).error()
        if x != y:
            raise ShardingTypeError(f"{what}: got shardings {_fmt(x)} and {_fmt(y)}, which "
                                    "must be equal")


def _cond_rule(ctx, ins, in_avals, out_avals, params):
    outs = None
    for branch in params["branches"]:
        o = infer_jaxpr(branch, ins[1:], ctx)
        if outs is None:
            outs = o
        else:
            _agree("cond branches must return values of the same sharding", outs, o)
    return outs


def _while_rule(ctx, ins, in_avals, out_avals, params):
    cn, bn = params["cond_nconsts"], params["body_nconsts"]
    carry = ins[cn + bn:]
    out = infer_jaxpr(params["body_jaxpr"], ins[cn:cn + bn] + carry, ctx)
    _agree("while_loop body_fun output and input must have identical types", carry, out)
    return carry


def _scan_rule(ctx, ins, in_avals, out_avals, params):
    nc, nk = params["num_consts"], params["num_carry"]
    consts, carry, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
    if any(s and s[0] for s in xs):
        raise ValueError("0th dimension of all xs should be replicated. Got "
                         + ", ".join(pspec_string(s) for s in xs))
    out = infer_jaxpr(params["jaxpr"], consts + carry + [s[1:] for s in xs], ctx)
    _agree("scan body function carry input and carry output must have equal types",
           carry, out[:nk])
    return carry + [((),) + tuple(s) for s in out[nk:]]


def _shard_map_rule(ctx, ins, in_avals, out_avals, params):
    return [spec_of(s if isinstance(s, PartitionSpec) else PartitionSpec(*s), len(a.shape),
                    ctx.explicit) for s, a in zip(params["out_specs"], out_avals)]




def register():
    """Fill the registries of sharding_types with the rules of this module."""
    from fluxion._src import sharding_types
    sharding_types.fallback_rule[0] = _fallback_rule
    from fluxion._src.lax import base, control_flow, contractions, indexing, shapes, sorting
    from fluxion._src.lax import structural, reductions, windowed
    from fluxion._src import sharded_jit
    for p in base.elementwise_primitives:
        rules[p] = _elementwise_rule(p.name)
    for name in ("integer_pow", "reduce_precision", "copy", "stop_gradient", "clamp",
                 "is_finite", "real", "imag", "conj", "complex", "nextafter", "pvary",
                 "logistic", "erf_inv", "polygamma", "zeta", "igamma", "igammac",
                 "igamma_grad_a", "random_gamma_grad", "bessel_i1e", "bessel_i0e", "lgamma",
                 "digamma"):
        p = _find(name)
        if p is not None:
            rules.setdefault(p, _elementwise_rule(name))
    rules[shapes.convert_element_type_p] = _same_as_operand_rule
    # the ops jnp puts between an ambiguous contraction and its out_sharding constraint
    _passes_deferred.update([shapes.convert_element_type_p, structural.transpose_p,
                             shapes.reshape_p, structural.squeeze_p])
    for name in ("copy", "reduce_precision", "rev"):
        if _find(name) is not None:
            rules[_find(name)] = _same_as_operand_rule
    for name in ("optimization_barrier", "device_put"):  # several operands, each unchanged
        if _find(name) is not None:
            rules[_find(name)] = _each_operand_rule
    for p in (reductions.reduce_sum_p, reductions.reduce_prod_p, reductions.reduce_max_p,
              reductions.reduce_min_p, reductions.reduce_and_p, reductions.reduce_or_p,
              reductions.reduce_xor_p, sorting.argmax_p, sorting.argmin_p):
        rules[p] = _reduce_axes_rule
    rules[contractions.dot_general_p] = _dot_general_rule
    _backward_aware.add(contractions.dot_general_p)
    rules[structural.transpose_p] = _transpose_rule
    rules[windowed.reduce_p] = _reduce_rule
    rules[shapes.broadcast_in_dim_p] = _broadcast_in_dim_rule
    rules[shapes.reshape_p] = _reshape_rule
    rules[structural.squeeze_p] = _squeeze_rule
    rules[structural.slice_p] = _varying_shape_rule("slicing")
    rules[structural.pad_p] = _varying_shape_rule("padding")
    rules[structural.dynamic_slice_p] = _varying_shape_rule("dynamic_slice")
    rules[structural.dynamic_update_slice_p] = _dynamic_update_slice_rule
    rules[structural.concatenate_p] = _concatenate_rule
    rules[structural.select_n_p] = _select_n_rule
    rules[structural.iota_p] = _iota_rule
    rules[sorting.sort_p] = _sort_rule
    rules[sorting.top_k_p] = _top_k_rule
    from fluxion._src.lax import fft
    rules[fft.fft_p] = _same_as_operand_rule  # as JAX's: the layout is kept, FFT axes too
    for p in (windowed.cumsum_p, windowed.cumprod_p, windowed.cummax_p, windowed.cummin_p,
              windowed.cumlogsumexp_p):
        rules[p] = _cumulative_rule
    for p in (indexing.scatter_p, indexing.scatter_add_p, indexing.scatter_sub_p,
              indexing.scatter_mul_p, indexing.scatter_min_p, indexing.scatter_max_p):
        rules[p] = _scatter_rule
    rules[indexing.gather_p] = _gather_rule
    split = _find("split")
    if split is not None:
        rules[split] = _split_rule
    rules[sharded_jit.sharding_constraint_p] = _constraint_rule
    rules[sharded_jit.sharding_like_p] = _sharding_like_rule
    _resolves_deferred.add(sharded_jit.sharding_like_p)
    _resolves_deferred.add(sharded_jit.sharding_constraint_p)
    rules[control_flow.cond_p] = _cond_rule
    rules[control_flow.while_p] = _while_rule
    rules[control_flow.scan_p] = _scan_rule
    from fluxion._src import sharding_rules_linalg, sharding_rules_windowed
    sharding_rules_linalg.register()
    sharding_rules_windowed.register()
    try:
        from fluxion._src.shard_map import shard_map_p
        rules[shard_map_p] = _shard_map_rule
    except ImportError:
        pass


def _find(name):
    from fluxion._src.lax import (elementwise, structural, special, stop_gradient, derived,
                                  jax_names, shapes, parallel, device_put)
    for mod in (elementwise, structural, special, stop_gradient, derived, jax_names, shapes,
                parallel, device_put):
        p = getattr(mod, f"{name}_p", None)
        if isinstance(p, core.Primitive):
            return p
    return None
