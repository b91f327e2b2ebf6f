"""The state primitives and their rules: `new_ref`, `get`, `swap`, `addupdate`, `freeze`.

`get(ref, *starts)` reads ``ref[index]``; `swap(ref, value, *starts)` writes `value` there
and returns what was there; `addupdate(ref, value, *starts)` adds `value` there. The index is
the static `indexer` param with one int32 start operand per dimension (see `indexing.py`).
Eagerly they act on `Ref` objects; staged, they are removed by the discharge pass before
lowering (`discharge.py`), so they have no lowering rules of their own.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import ad, batching, core, dtypes, effects
from fluxion._src.core import ShapedArray
from fluxion._src.state import indexing
from fluxion._src.state.types import AbstractRef, Ref, is_ref_aval, ref_effect


def _check_ref(aval, name):
    if not is_ref_aval(aval):
        raise TypeError(f"{name} expects a Ref as its first operand, got {aval.str_short()}")


def _check_starts(starts, indexer, name):
    if len(starts) != len(indexer):
        raise TypeError(f"{name}: {len(starts)} start indices for an index of rank {len(indexer)}")
    for s, e in zip(starts, indexer):
        want = e[1] if indexing.is_array_entry(e) else ()
        if s.shape != want or s.dtype != np.int32:
            raise TypeError(f"{name}: start indices must be int32 scalars (int32 arrays for "
                            f"array indices), got {s.str_short()}")


def _state_effects(params):
    return frozenset([ref_effect])


# ---------------------------------------------------------------------------------------------
# new_ref: a fresh Ref holding a copy of a value

new_ref_p = core.Primitive("new_ref")


@new_ref_p.def_abstract_eval
def _new_ref_abstract_eval(x, *, memory_space, kind):
    if is_ref_aval(x):
        raise TypeError("new_ref: the initial value must be an array, not a Ref")
    return AbstractRef(x.strip_weak_type(), memory_space, kind)  # traced: strong, as JAX


@new_ref_p.def_impl
def _new_ref_impl(x, *, memory_space, kind):
    from fluxion._src.lax import lax
    aval = core.get_aval(x)
    # An Array; as in JAX the Ref's type and its buffer keep a weak type (the repr shows the
    # buffer's, which a write makes strong; reads have the Ref's).
    value = lax._convert_element_type(x, aval.dtype, weak_type=aval.weak_type)
    return Ref(value, AbstractRef(aval, memory_space, kind))


def _new_ref_jvp(primals, tangents, *, memory_space, kind):
    (x,), (t,) = primals, tangents
    ref = new_ref_p.bind(x, memory_space=memory_space, kind=kind)
    aval = core.get_aval(x)
    if not dtypes.is_inexact(aval.dtype):
        return ref, ad.Zero(ad.tangent_aval(aval))
    trace = core.current_trace()
    if type(t) is ad.Zero and isinstance(trace, ad.PartialEvalTrace):
        # Under linearization the tangent Ref belongs to the linear program even when it
        # starts at zero: stage its creation, so every later access of it is staged in order.
        return ref, trace.stage(new_ref_p, [ad.instantiate(t)], dict(memory_space=memory_space,
                                                                      kind=kind))
    return ref, new_ref_p.bind(ad.instantiate(t), memory_space=memory_space, kind=kind)


def _new_ref_batch(args, dims, *, memory_space, kind):
    return new_ref_p.bind(args[0], memory_space=memory_space, kind=kind), dims[0]


ad.primitive_jvps[new_ref_p] = _new_ref_jvp
ad.jvp_on_zero_tangents.add(new_ref_p)
batching.primitive_batchers[new_ref_p] = _new_ref_batch
effects.declare_effects(new_ref_p, _state_effects)


# ---------------------------------------------------------------------------------------------
# get

get_p = core.Primitive("get")


@get_p.def_abstract_eval
def _get_abstract_eval(ref, *starts, indexer):
    _check_ref(ref, "get")
    _check_starts(starts, indexer, "get")
    return ShapedArray(indexing.result_shape(indexer), ref.dtype, ref.inner_aval.weak_type)


@get_p.def_impl
def _get_impl(ref, *starts, indexer):
    out = indexing.read(ref._read_value(), starts, indexer)
    if ref.aval.inner_aval.weak_type:  # a read has the Ref's type, as in JAX
        from fluxion._src.lax import lax
        out = lax._convert_element_type(out, None, weak_type=True)
    return out


def _get_jvp(primals, tangents, *, indexer):
    ref, *starts = primals
    out = get_p.bind(ref, *starts, indexer=indexer)
    t_ref = tangents[0]
    if type(t_ref) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    return out, get_p.bind(t_ref, *starts, indexer=indexer)


def _get_transpose(ct, ref, *starts, indexer):
    # The Ref holds cotangents: reading it linearly transposes to accumulating into it.
    if type(ct) is not ad.Zero:
        addupdate_p.bind(ref, ct, *starts, indexer=indexer)
    return [None] * (1 + len(starts))


def _batched_indexer(indexer, ref_dim, size):
    """The indexer with a full (unsqueezed) dimension at the Ref's batch dimension, and the
    position of that dimension in the result."""
    new = list(indexer)
    new.insert(ref_dim, (size, 1, False))
    out_dim = sum(1 for _, _, sq in new[:ref_dim] if not sq)
    return tuple(new), out_dim


def _whole(ref):
    """(starts, indexer) of all of `ref` (its physical, batched shape)."""
    shape = core.get_aval(ref).shape
    return [np.int32(0)] * len(shape), tuple((n, 1, False) for n in shape)


def _batch_size(args, dims):
    return next(core.get_aval(a).shape[d] for a, d in zip(args, dims)
                if d is not batching.not_mapped)


def _batched_index_access(ref, ref_dim, value, value_dim, starts, start_dims, indexer, kind):
    """A read or write at batched indices: the whole Ref's value is read, the access is
    vmapped as a pure function of it, and a write stores the whole new value. Returns
    (output, output dim)."""
    size = _batch_size([ref, value, *starts], [ref_dim, value_dim, *start_dims])
    w_starts, w_indexer = _whole(ref)
    full = get_p.bind(ref, *w_starts, indexer=w_indexer)

    def access(x, v, *s):
        if kind == "get":
            return [indexing.read(x, s, indexer)]
        old = indexing.read(x, s, indexer)
        return [old, indexing.write(x, v, s, indexer, add=kind != "swap")]

    if kind == "get":
        (out,), (out_dim,) = batching.batch_flat(
            lambda x, *s: access(x, None, *s), [full, *starts], [ref_dim, *start_dims], None, size)
        return out, out_dim
    if ref_dim is batching.not_mapped:
        raise _unbatched_ref_error(ref, "set/swap" if kind == "swap" else "addupdate")
    (old, new), (old_dim, new_dim) = batching.batch_flat(
        access, [full, value, *starts], [ref_dim, value_dim, *start_dims], None, size)
    new = batching.matchaxis(new, new_dim, ref_dim, size)
    swap_p.bind(ref, new, *w_starts, indexer=w_indexer)
    return old, old_dim


def _get_batch(args, dims, *, indexer):
    ref, *starts = args
    ref_dim, *start_dims = dims
    if any(d is not batching.not_mapped for d in start_dims) or indexing.has_arrays(indexer):
        return _batched_index_access(ref, ref_dim, None, None, starts, start_dims, indexer,
                                     "get")
    size = core.get_aval(ref).shape[ref_dim]
    new, out_dim = _batched_indexer(indexer, ref_dim, size)
    starts = list(starts)
    starts.insert(ref_dim, np.int32(0))
    return get_p.bind(ref, *starts, indexer=new), out_dim


ad.primitive_jvps[get_p] = _get_jvp
ad.primitive_transposes[get_p] = _get_transpose
batching.primitive_batchers[get_p] = _get_batch
effects.declare_effects(get_p, _state_effects)


# ---------------------------------------------------------------------------------------------
# swap

swap_p = core.Primitive("swap")


def _check_value(ref, value, indexer, name):
    shape = indexing.result_shape(indexer)
    if value.shape != shape or value.dtype != ref.dtype:
        raise TypeError(f"{name}: cannot write {value.str_short()} to a slice of type "
                        f"{ShapedArray(shape, ref.dtype).str_short()} of {ref.str_short()}")


@swap_p.def_abstract_eval
def _swap_abstract_eval(ref, value, *starts, indexer):
    _check_ref(ref, "swap")
    _check_starts(starts, indexer, "swap")
    _check_value(ref, value, indexer, "swap")
    return ShapedArray(indexing.result_shape(indexer), ref.dtype, ref.inner_aval.weak_type)


@swap_p.def_impl
def _swap_impl(ref, value, *starts, indexer):
    x = ref._read_value()
    old = indexing.read(x, starts, indexer)
    ref._store(indexing.write(x, value, starts, indexer))
    return old


def _swap_jvp(primals, tangents, *, indexer):
    ref, value, *starts = primals
    t_ref, t_value = tangents[:2]
    if type(t_ref) is ad.Zero:  # a Ref without a tangent (created outside the derivative)
        _check_no_tangent(t_value, ref, "set/swap")
        out = swap_p.bind(ref, value, *starts, indexer=indexer)
        return out, ad.Zero.from_primal_value(out)
    out = swap_p.bind(ref, value, *starts, indexer=indexer)
    return out, swap_p.bind(t_ref, ad.instantiate(t_value), *starts, indexer=indexer)


def _check_no_tangent(t_value, ref, what):
    if type(t_value) is not ad.Zero and core.get_aval(t_value).dtype != dtypes.float0:
        # JAX raises a plain Exception here, with this message.
        raise Exception(  # noqa: TRY002
            f"performing {_article(what)} {what} operation with a differentiated value on a "
            f"non-differentiated array reference of type {core.get_aval(ref)}. "
            "Move the array reference to be an argument of the differentiated function?")


def _unbatched_ref_error(ref, what):
    return Exception(  # noqa: TRY002  (JAX's class and message)
        f"performing {_article(what)} {what} operation with vmapped value on an unbatched "
        f"array reference of type {core.get_aval(ref)}. Move the array reference to be an "
        "argument to the vmapped function?")


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _swap_transpose(ct, ref, value, *starts, indexer):
    # swap(ref, x) is linear in x (writing it) and in the old contents (reading them).
    ct = ad.instantiate(ct) if type(ct) is ad.Zero else ct
    ct_value = swap_p.bind(ref, ct, *starts, indexer=indexer)
    return [None, ct_value] + [None] * len(starts)


def _swap_batch(args, dims, *, indexer):
    ref, value, *starts = args
    ref_dim, value_dim, *start_dims = dims
    if any(d is not batching.not_mapped for d in start_dims) or indexing.has_arrays(indexer):
        return _batched_index_access(ref, ref_dim, value, value_dim, starts, start_dims, indexer,
                                     "swap")
    if ref_dim is batching.not_mapped:
        raise _unbatched_ref_error(ref, "set/swap")
    size = core.get_aval(ref).shape[ref_dim]
    new, out_dim = _batched_indexer(indexer, ref_dim, size)
    value = batching.matchaxis(value, value_dim, out_dim, size)
    starts = list(starts)
    starts.insert(ref_dim, np.int32(0))
    return swap_p.bind(ref, value, *starts, indexer=new), out_dim


ad.primitive_jvps[swap_p] = _swap_jvp
ad.primitive_transposes[swap_p] = _swap_transpose
batching.primitive_batchers[swap_p] = _swap_batch
effects.declare_effects(swap_p, _state_effects)


# ---------------------------------------------------------------------------------------------
# addupdate

addupdate_p = core.Primitive("addupdate")
addupdate_p.multiple_results = True


@addupdate_p.def_abstract_eval
def _addupdate_abstract_eval(ref, value, *starts, indexer):
    _check_ref(ref, "addupdate")
    _check_starts(starts, indexer, "addupdate")
    _check_value(ref, value, indexer, "addupdate")
    return []


@addupdate_p.def_impl
def _addupdate_impl(ref, value, *starts, indexer):
    ref._store(indexing.write(ref._read_value(), value, starts, indexer, add=True))
    return []


def _addupdate_jvp(primals, tangents, *, indexer):
    ref, value, *starts = primals
    t_ref, t_value = tangents[:2]
    if type(t_ref) is ad.Zero:
        _check_no_tangent(t_value, ref, "addupdate")
    addupdate_p.bind(ref, value, *starts, indexer=indexer)
    if type(t_ref) is not ad.Zero and type(t_value) is not ad.Zero:
        addupdate_p.bind(t_ref, t_value, *starts, indexer=indexer)
    return [], []


def _addupdate_transpose(ct, ref, value, *starts, indexer):
    ct_value = get_p.bind(ref, *starts, indexer=indexer)
    return [None, ct_value] + [None] * len(starts)


def _addupdate_batch(args, dims, *, indexer):
    ref, value, *starts = args
    ref_dim, value_dim, *start_dims = dims
    if any(d is not batching.not_mapped for d in start_dims) or indexing.has_arrays(indexer):
        _batched_index_access(ref, ref_dim, value, value_dim, starts, start_dims, indexer,
                              "addupdate")
        return [], []
    if ref_dim is batching.not_mapped:
        raise _unbatched_ref_error(ref, "addupdate")
    size = core.get_aval(ref).shape[ref_dim]
    new, out_dim = _batched_indexer(indexer, ref_dim, size)
    value = batching.matchaxis(value, value_dim, out_dim, size)
    starts = list(starts)
    starts.insert(ref_dim, np.int32(0))
    return addupdate_p.bind(ref, value, *starts, indexer=new), []


ad.primitive_jvps[addupdate_p] = _addupdate_jvp
ad.primitive_transposes[addupdate_p] = _addupdate_transpose
batching.primitive_batchers[addupdate_p] = _addupdate_batch
effects.declare_effects(addupdate_p, _state_effects)


def _writes_refused_on_outer_refs(batch_rule, what):
    """A write under vmap to a Ref from outside the vmapped function (not batched) is JAX's
    error even when the value is not batched either: the vmapped function would write once
    per member. (Refs made inside the function are batched, so writes to them run.)"""
    def rule(trace, vals, dims, **params):
        if dims[0] is batching.not_mapped:
            raise _unbatched_ref_error(vals[0], what)
        return batch_rule(vals, dims, **params)
    return rule


batching.trace_rules[swap_p] = _writes_refused_on_outer_refs(_swap_batch, "set/swap")
batching.trace_rules[addupdate_p] = _writes_refused_on_outer_refs(_addupdate_batch, "addupdate")


# ---------------------------------------------------------------------------------------------
# freeze: the value of a Ref, which can no longer be used

freeze_p = core.Primitive("freeze")


@freeze_p.def_abstract_eval
def _freeze_abstract_eval(ref):
    _check_ref(ref, "freeze")
    return ref.inner_aval


@freeze_p.def_impl
def _freeze_impl(ref):
    value = ref._read_value()
    ref._frozen = True
    return value


def _freeze_jvp(primals, tangents):
    out = freeze_p.bind(primals[0])
    if type(tangents[0]) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    return out, freeze_p.bind(tangents[0])


ad.primitive_jvps[freeze_p] = _freeze_jvp
batching.primitive_batchers[freeze_p] = lambda args, dims: (freeze_p.bind(args[0]), dims[0])
effects.declare_effects(freeze_p, _state_effects)


# ---------------------------------------------------------------------------------------------
# Printing, as JAX does: `b:f32[2] <- a[1:3]`, `a[0] <- c`, `a[...] += c`

def _pp_state(eqn, context):
    from fluxion._src import pretty_printer as pp
    prim = eqn.primitive
    ref = context(eqn.invars[0])
    n_value = 0 if prim is get_p else 1
    starts = [context(v) for v in eqn.invars[1 + n_value:]]
    where = ref + indexing.pp_indexer(eqn.params["indexer"], starts, eqn.invars[0].aval.shape)
    if prim is get_p:
        lhs = core.pp_vars(eqn.outvars, context, print_shapes=True)
        return pp.concat([lhs, pp.text(f" <- {where}")])
    value = context(eqn.invars[1])
    if prim is addupdate_p:
        return pp.text(f"{where} += {value}")
    lhs = core.pp_vars(eqn.outvars, context, print_shapes=True)
    return pp.concat([lhs, pp.text(f", {where} <- {where}, {value}")])


for _p in (get_p, swap_p, addupdate_p):
    core.pp_eqn_rules[_p] = _pp_state


# ---------------------------------------------------------------------------------------------
# The user-facing functions (`fluxion.ref`)

def _as_ref_operand(ref, name):
    aval = core.get_aval(ref)
    if not is_ref_aval(aval):
        raise TypeError(f"{name} expects a Ref, got {aval.str_short()}")
    return aval


def get(ref, idx=None):
    """``ref[idx]``: read (part of) a Ref. `idx` as in NumPy basic indexing, plus `ds` slices."""
    aval = _as_ref_operand(ref, "get")
    starts, indexer = indexing.normalize(aval.shape, idx)
    return get_p.bind(ref, *starts, indexer=indexer)


def _implicitly_castable(vaval, dtype) -> bool:
    """JAX's rule for a write of another dtype: a weakly typed float into a float Ref, or any
    integer into an integer Ref, is cast; anything else (a Python float into an int Ref, an
    int into a float Ref, a bool) is an error."""
    both = lambda kind: (dtypes.issubdtype(vaval.dtype, kind)
                         and dtypes.issubdtype(dtype, kind))
    return (vaval.weak_type and both(np.floating)) or both(np.integer)


def _value_for(aval, indexer, value, name):
    import fluxion.numpy as jnp
    from fluxion._src.array import Array
    shape = indexing.result_shape(indexer)
    vaval = core.get_aval(value)
    if is_ref_aval(vaval):
        raise TypeError(f"{name}: cannot write a Ref into a Ref")
    if vaval.dtype != aval.dtype:
        if not _implicitly_castable(vaval, aval.dtype):
            raise ValueError(f"Invalid dtype for `{name}`: cannot write a value of dtype "
                             f"{vaval.dtype.name} to a Ref of dtype {aval.dtype.name}")
        value = jnp.asarray(value, dtype=aval.dtype)
        vaval = core.get_aval(value)
    if vaval.shape != shape:
        try:
            np.broadcast_shapes(vaval.shape, shape)
        except ValueError:  # JAX's class
            raise ValueError(f"Invalid shape for `{name}`: cannot write a value of shape "
                             f"{vaval.shape} to a slice of shape {shape}") from None
        value = jnp.broadcast_to(value, shape)
    elif not isinstance(value, (Array, core.Tracer)):  # a host value (Python or NumPy scalar)
        value = jnp.asarray(value, dtype=aval.dtype)
    return value


def swap(ref, idx, value):
    """Write `value` at ``ref[idx]`` and return what was there."""
    aval = _as_ref_operand(ref, "swap")
    starts, indexer = indexing.normalize(aval.shape, idx)
    value = _value_for(aval, indexer, value, "swap")
    return swap_p.bind(ref, value, *starts, indexer=indexer)


def set(ref, idx, value) -> None:  # noqa: A001 (JAX's name)
    """``ref[idx] = value``."""
    swap(ref, idx, value)


def addupdate(ref, idx, x) -> None:
    """``ref[idx] += x``, as one operation."""
    aval = _as_ref_operand(ref, "addupdate")
    starts, indexer = indexing.normalize(aval.shape, idx)
    x = _value_for(aval, indexer, x, "addupdate")
    addupdate_p.bind(ref, x, *starts, indexer=indexer)


def new_ref(init_val, *, memory_space=None, kind=None):
    """A new mutable Ref holding `init_val` (``jax.new_ref``).

    Parameters
    ----------
    init_val : array_like
        The initial value; the Ref has its shape and dtype.
    memory_space : optional
        Where the buffer lives (Pallas memory spaces); None for the default memory.

    Returns
    -------
    Ref
    """
    aval = core.get_aval(init_val)
    if is_ref_aval(aval):
        raise TypeError("new_ref: the initial value must be an array, not a Ref")
    return new_ref_p.bind(init_val, memory_space=memory_space, kind=kind)


def empty_ref(ty, memory_space=None):
    """A new Ref of type `ty` (a ShapeDtypeStruct or aval); its contents are unspecified
    (zeros here)."""
    from fluxion._src.lax import structural
    shape, dtype = tuple(ty.shape), np.dtype(ty.dtype)
    return new_ref(structural.full(shape, 0, dtype), memory_space=memory_space)


def freeze(ref):
    """The value of `ref`; the Ref can no longer be used afterwards."""
    _as_ref_operand(ref, "freeze")
    return freeze_p.bind(ref)


def free_ref(ref) -> None:
    """Release `ref`: it can no longer be used."""
    freeze(ref)
