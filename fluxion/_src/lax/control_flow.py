"""Structured control flow: cond, switch, while_loop, fori_loop, scan, map, associative_scan,
custom_root and custom_linear_solve.

Branches and loop bodies are traced once into closed jaxprs whose constants are hoisted into
explicit leading operands. The primitives `cond`, `while`, `scan` and `custom_linear_solve`
carry those jaxprs as parameters; each has its abstract evaluation, lowering (stablehlo.case /
stablehlo.while), JVP, partial evaluation, transposition and batching rules here.
"""
from __future__ import annotations

import collections
import collections.abc
import inspect
import operator
from typing import Callable, Sequence

import numpy as np

from fluxion._src.export import shape_poly
from fluxion._src import ad, batching, core, dtypes, key_flow, staging
from fluxion._src.array import Array
from fluxion._src.call_transforms import closure_convert, jvp_jaxpr, memoized, partial_eval_jaxpr
from fluxion._src.call_transforms import trace_closure_converted as _trace_fun
from fluxion._src.compiler import lowering
from fluxion._src.config import config
from fluxion._src.core import ClosedJaxpr, Jaxpr, ShapedArray, Var
from fluxion._src.lax import lax, structural
from fluxion._src.lax.base import standard_primitive
from fluxion._src.lax.stop_gradient import stop_gradient
from fluxion._src.traceback_util import api_boundary
from fluxion._src.tree_util import (flatten_one_level, keystr, tree_flatten, tree_flatten_with_path,
                                    tree_map, tree_unflatten)

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map", "associative_scan",
           "custom_root", "custom_linear_solve", "cond_p", "while_p", "scan_p", "linear_solve_p"]

_no_operand = object()


# =============================================================================================
# Shared helpers

def _split(seq, sizes: Sequence[int]) -> list[list]:
    """`seq` cut into consecutive pieces of the given sizes, plus the rest."""
    pieces, start = [], 0
    for n in sizes:
        pieces.append(list(seq[start:start + n]))
        start += n
    pieces.append(list(seq[start:]))
    return pieces


def _same_types(avals1, avals2) -> bool:
    """Equal shapes and dtypes (weak types may differ, as in JAX's `typematch`)."""
    return len(avals1) == len(avals2) and all(
        a.shape == b.shape and a.dtype == b.dtype for a, b in zip(avals1, avals2))


def _mapped_aval(aval: ShapedArray, size: int) -> ShapedArray:
    return aval.update(shape=(size,) + aval.shape)


def _unmapped_aval(aval: ShapedArray) -> ShapedArray:
    return aval.update(shape=aval.shape[1:])


def _fun_description(fun) -> str:
    """'name at file:line', as JAX names a user function in control-flow errors."""
    name = getattr(fun, "__name__", type(fun).__name__)
    code = getattr(inspect.unwrap(fun), "__code__", None)
    return name if code is None else f"{name} at {code.co_filename}:{code.co_firstlineno}"


def _trace_flat(fun: Callable, avals, origin: str) -> ClosedJaxpr:
    """Trace `fun` (flat lists of arrays in and out) into a closed jaxpr."""
    return staging.trace_to_jaxpr(fun, list(avals), origin=origin)


def _eval(closed: ClosedJaxpr, *args) -> list:
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _with_invars(closed: ClosedJaxpr, invars, outvars=None) -> ClosedJaxpr:
    """`closed` with new binders (a permutation, or extra unused ones) and maybe new outputs."""
    j = closed.jaxpr
    outvars = j.outvars if outvars is None else outvars
    return ClosedJaxpr(Jaxpr(j.constvars, invars, outvars, j.eqns, j.effects, j.debug_info),
                       closed.consts)


def _permute_invars(closed: ClosedJaxpr, order: Sequence[int]) -> ClosedJaxpr:
    """New binder i is old binder order[i]."""
    return _with_invars(closed, [closed.jaxpr.invars[i] for i in order])


def _as_array(x):
    """`x` as an array value (operands forwarded to outputs come back as arrays, not scalars)."""
    if isinstance(x, (Array, core.Tracer)):
        return x
    return lax._convert_element_type(x, None, dtypes.is_weakly_typed(x))


def _stack(xs: Sequence):
    return structural.concatenate([structural.expand_dims(x, (0,)) for x in xs], 0)


def _zeros(aval: ShapedArray):
    # aval.dtype exactly: a body traced under enable_x64 may have 64-bit outputs outside it
    return structural._machinery_full(aval.shape, 0, aval.dtype, False)


def _nonzero(tangents) -> list:
    return [t for t in tangents if type(t) is not ad.Zero]


def _fill_zeros(nonzero_vals, mask, avals) -> list:
    """Values where `mask` is set (taken in order from `nonzero_vals`), symbolic zeros elsewhere."""
    it = iter(nonzero_vals)
    return [next(it) if m else ad.Zero(ad.tangent_aval(a)) for m, a in zip(mask, avals)]


def _fixpoint(initial: list, step: Callable) -> list:
    """Grow the boolean mask `initial` by OR-ing in step(mask) until it stops changing."""
    mask = list(initial)
    for _ in range(len(mask) + 1):
        new = [a or b for a, b in zip(mask, step(mask))]
        if new == mask:
            return mask
        mask = new
    raise AssertionError("fixpoint not reached")


# ---------------------------------------------------------------------------------------------
# Explaining mismatched pytree structures and types, worded as JAX words them

class _Leaf:
    def __repr__(self):
        return "pytree leaf"


def _describe_node(tree) -> str:
    return "pytree leaf" if isinstance(tree, _Leaf) else str(type(tree))


def _structure_differences(tree1, tree2, path=()):
    """Yields (path, thing1, thing2, explanation) for each place the two trees differ."""
    leaf1, leaf2 = isinstance(tree1, _Leaf), isinstance(tree2, _Leaf)
    if leaf1 and leaf2:
        return
    if leaf1 or leaf2 or type(tree1) is not type(tree2):
        yield path, _describe_node(tree1), _describe_node(tree2), "their Python types differ"
        return
    if isinstance(tree1, (list, tuple)) and len(tree1) != len(tree2):
        yield (path, f"{type(tree1).__name__} of length {len(tree1)}",
               f"{type(tree2).__name__} of length {len(tree2)}", "the lengths do not match")
        return
    children1, meta1 = flatten_one_level(tree1)
    children2, meta2 = flatten_one_level(tree2)
    children1, children2 = list(children1), list(children2)
    if len(children1) != len(children2):
        diff = _key_difference(tree1, tree2)
        yield (path, f"{type(tree1)} with {_children(len(children1))}",
               f"{type(tree2)} with {_children(len(children2))}",
               "the numbers of children do not match"
               + (diff and f", with the symmetric difference of key sets: {{{diff}}}"))
        return
    if meta1 != meta2:
        yield (path, f"{type(tree1)} with pytree metadata {meta1}",
               f"{type(tree2)} with pytree metadata {meta2}",
               "the pytree node metadata does not match")
        return
    for key, c1, c2 in zip(_child_keys(tree1), children1, children2):
        yield from _structure_differences(c1, c2, path + tuple(key))


def _children(n: int) -> str:
    return f"{n} child" + ("ren" if n > 1 else "")


def _child_keys(tree) -> list:
    return [k for k, _ in tree_flatten_with_path(tree, is_leaf=lambda x: x is not tree)[0]]


def _key_difference(tree1, tree2) -> str:
    """The keys (dict keys, attribute names) only one of two nodes has, as JAX lists them; ''
    where the children have no such keys."""
    try:
        keys1 = {k[0].key for k in _child_keys(tree1)}
        keys2 = {k[0].key for k in _child_keys(tree2)}
    except (AttributeError, TypeError, IndexError):
        return ""
    return " ".join(repr(k) for k in keys1.symmetric_difference(keys2))


def _leaves_tree(treedef):
    return tree_unflatten(treedef, [_Leaf() for _ in range(treedef.num_leaves)])


def _type_name(aval: ShapedArray) -> str:
    return aval.str_short(short_dtypes=False)


def _type_mismatch_reason(a: ShapedArray, b: ShapedArray) -> str:
    problems = []
    if a.dtype != b.dtype:
        problems.append("the dtypes do not match")
    if a.shape != b.shape:
        problems.append("the shapes do not match")
    return ", so " + ", and ".join(problems) if problems else ""


def _bulleted(diffs: list[str], capitalize: bool = True) -> str:
    if len(diffs) == 1:
        first = diffs[0][0].upper() if capitalize else diffs[0][0]
        return first + diffs[0][1:] + ".\n"
    return "\n".join(f"  * {d};" for d in diffs[:-1]) + f"\n  * {diffs[-1]}.\n"


def _check_branch_outputs(api_name, name1, name2, fun1, fun2, tree1, avals1, tree2, avals2):
    """TypeError unless two branches return the same pytree structure and types."""
    header = f"{name1} is {_fun_description(fun1)}\n{name2} is {_fun_description(fun2)}\n\n"
    if tree1 != tree2:
        diffs = [f"{name1} output{f' at path {keystr(p)}' if p else ''} is a {t1} but {name2} "
                 f"output{f' at path {keystr(p)}' if p else ''} is a {t2}, so {why}"
                 for p, t1, t2, why in _structure_differences(_leaves_tree(tree1),
                                                              _leaves_tree(tree2))]
        raise TypeError(f"{api_name} branch outputs must have the same pytree structure, but "
                        f"they differ:\n\n{header}{_bulleted(diffs, capitalize=False)}\nRevise "
                        f"{name1} and/or {name2} so that they have the same pytree structure.")
    if not _same_types(avals1, avals2):
        paths = [p for p, _ in tree_flatten_with_path(tree_unflatten(tree1, avals1))[0]]
        diffs = [f"the output of {name1}{f' at path {keystr(p)}' if p else ''} has type "
                 f"{_type_name(a)} but the corresponding output of {name2} has type "
                 f"{_type_name(b)}{_type_mismatch_reason(a, b)}"
                 for p, a, b in zip(paths, avals1, avals2) if not _same_types([a], [b])]
        raise TypeError(f"{api_name} branches must have equal output types but they differ.\n\n"
                        f"{header}{_bulleted(diffs)}\nRevise {name1} and/or {name2} so that all "
                        "output types match.")


def _carry_name(body_fun) -> str | None:
    try:
        params = list(inspect.signature(body_fun).parameters)
    except (TypeError, ValueError):
        return None
    return params[0] if params else None


def _check_carry_type(name, body_fun, in_tree, in_avals, out_tree, out_avals):
    """TypeError unless a loop body returns a carry of the input carry's structure and types."""
    carry = _carry_name(body_fun)

    def component(path):
        if carry:
            return f"the input carry component {carry}{keystr(path)}" if path else \
                f"the input carry {carry}"
        return f"the input carry at path {keystr(path)}" if path else "the input carry"

    if in_tree != out_tree:
        diffs = [f"{component(p)} is a {t1} but the corresponding component of the carry output "
                 f"is a {t2}, so {why}"
                 for p, t1, t2, why in _structure_differences(_leaves_tree(in_tree),
                                                              _leaves_tree(out_tree))]
        raise TypeError(f"{name} function carry input and carry output must have the same "
                        f"pytree structure, but they differ:\n\n{_bulleted(diffs)}\nRevise the "
                        "function so that the carry output has the same pytree structure as the "
                        "carry input.")
    if not _same_types(in_avals, out_avals):
        paths = [p for p, _ in tree_flatten_with_path(tree_unflatten(in_tree, in_avals))[0]]
        diffs = [f"{component(p)} has type {_type_name(a)} but the corresponding output carry "
                 f"component has type {_type_name(b)}{_type_mismatch_reason(a, b)}"
                 for p, a, b in zip(paths, in_avals, out_avals) if not _same_types([a], [b])]
        raise TypeError(f"{name} function carry input and carry output must have equal types, "
                        f"but they differ:\n\n{_bulleted(diffs)}\nRevise the function so that all "
                        "output types match the corresponding input types.")


def _promote_weak_inputs(values, in_avals, out_avals):
    """As JAX does: a weakly typed initial carry whose dtype differs from what the body returns
    is converted to the promoted dtype. Returns (values, whether any changed)."""
    new, changed = [], False
    for x, a, o in zip(values, in_avals, out_avals):
        if a.weak_type and (a.shape, a.dtype) != (o.shape, o.dtype):
            x = lax.convert_element_type(x, dtypes.result_type(x, o.dtype))
            changed = True
        new.append(x)
    return new, changed


# ---------------------------------------------------------------------------------------------
# Batching a jaxpr (bodies are batched under the caller's axis name, so collectives inside see it)

@memoized
def _batch_jaxpr(closed: ClosedJaxpr, in_batched, instantiate, axis_name, axis_size):
    """`closed` over a batch: inputs batched at axis 0 where `in_batched`; outputs batched at 0
    where the computation makes them so or `instantiate` asks. Returns (jaxpr, out_batched)."""
    in_avals = [_mapped_aval(a, axis_size) if b else a for a, b in zip(closed.in_avals, in_batched)]
    out_batched: list[bool] = []

    def fun(*xs):
        outs, dims = batching.batch_flat(lambda *a: _eval(closed, *a), xs,
                                         [0 if b else None for b in in_batched], axis_name,
                                         axis_size)
        out_batched[:] = [d is not None or inst for d, inst in zip(dims, instantiate)]
        return [batching.bdim_at_front(o, d, axis_size) if b else o
                for o, d, b in zip(outs, dims, out_batched)]

    return _trace_flat(fun, in_avals, "batch_jaxpr"), tuple(out_batched)


def _batched_select(pred, on_true, on_false):
    """select(pred, on_true, on_false) for a per-member predicate `pred` (shape (B,)) and cases
    batched at axis 0."""
    shape = core.get_aval(on_true).shape
    if core.get_aval(pred).shape != shape:
        pred = lax.broadcast_in_dim(pred, shape, (0,))
    return structural.select(pred, on_true, on_false)


# =============================================================================================
# cond and switch

def _cond_abstract_eval(index, *args, branches):
    if index.shape != () or index.dtype != np.int32:
        raise TypeError(f"cond: the branch index must be an int32 scalar, got {index.str_short()}.")
    for i, branch in enumerate(branches):
        if not _same_types(branch.in_avals, args):
            raise TypeError(f"cond: branch {i} takes {[a.str_short() for a in branch.in_avals]} "
                            f"but is applied to {[a.str_short() for a in args]}.")
        if not _same_types(branch.out_avals, branches[0].out_avals):
            raise TypeError(f"cond: branch {i} returns "
                            f"{[a.str_short() for a in branch.out_avals]} but branch 0 returns "
                            f"{[a.str_short() for a in branches[0].out_avals]}.")
    return branches[0].out_avals


def _cond_lowering(ctx, index, *args, branches):
    regions = []
    for branch in branches:
        region = ctx.new_block([])
        region.ret(ctx.lower_jaxpr(branch, list(args), block=region))
        regions.append(region)
    return ctx.op("stablehlo.case", [index], ctx.avals_out, regions=regions)


cond_p = standard_primitive("cond", _cond_abstract_eval, _cond_lowering, multiple_results=True)


def _merge_consts(jaxprs_and_consts):
    """Give every branch all branches' constants (deduplicated) as its leading arguments."""
    consts, position = [], {}
    for _, cs in jaxprs_and_consts:
        for c in cs:
            if id(c) not in position:
                position[id(c)] = len(consts)
                consts.append(c)
    const_avals = [core.get_aval(c) for c in consts]
    merged = []
    for closed, cs in jaxprs_and_consts:
        own = closed.jaxpr.invars[:len(cs)]
        binders = [Var(a) for a in const_avals]
        for c, v in zip(cs, own):
            binders[position[id(c)]] = v
        merged.append(_with_invars(closed, binders + closed.jaxpr.invars[len(cs):]))
    return merged, consts


def _forwarded_outputs(branches) -> list:
    """For each output, the argument index every branch returns unchanged there (else None)."""
    per_branch = []
    for b in branches:
        index = {id(v): i for i, v in enumerate(b.jaxpr.invars)}
        per_branch.append([index.get(id(v)) if isinstance(v, Var) else None
                           for v in b.jaxpr.outvars])
    return [fs[0] if len(set(fs)) == 1 else None for fs in zip(*per_branch)]


def _check_ref_operands(fun, leaves, tree, consts, traced_for: str, before_trace: bool):
    """JAX's aliasing rule for Refs among a control-flow function's operands: a Ref may be
    one operand only (checked before tracing), and not also be closed over (after it)."""
    if not staging.refs_among(leaves):
        return
    from fluxion._src.state import aliasing
    aliasing.check_operands(fun, leaves, tree, [] if before_trace else consts, traced_for)


def _trace_branches(funs, operands, api_name):
    """Trace each branch on the operands: (leaves, [(jaxpr, consts, out_tree), ...])."""
    leaves, in_tree = tree_flatten(operands)
    avals = [core.get_aval(x) for x in leaves]
    for f in funs:
        _check_ref_operands(f, leaves, in_tree, (), api_name, before_trace=True)
    if not config.debug_key_reuse:
        traced = [_trace_fun(f, in_tree, avals, f"{api_name} branch") for f in funs]
        for f, (_, consts, _) in zip(funs, traced):
            _check_ref_operands(f, leaves, in_tree, consts, api_name, before_trace=False)
        return leaves, traced
    scopes = [key_flow.Scope() for _ in funs]
    traced = [_trace_fun(key_flow.in_scope(f, s), in_tree, avals, f"{api_name} branch")
              for f, s in zip(funs, scopes)]
    key_flow.cond_rule(scopes, operands, _merge_consts([(j, cs) for j, cs, _ in traced])[1])
    return leaves, traced


def _bind_traced_branches(index, traced, leaves):
    """Bind `cond` on traced branches (in index order); returns the output pytree."""
    branches, consts = _merge_consts([(jaxpr, cs) for jaxpr, cs, _ in traced])
    # Outputs that every branch passes through unchanged are returned directly, as JAX does.
    forwarded = _forwarded_outputs(branches)
    branches = [_with_invars(b, b.jaxpr.invars,
                             [v for v, f in zip(b.jaxpr.outvars, forwarded) if f is None])
                for b in branches]
    outs = iter(cond_p.bind(index, *consts, *leaves, branches=tuple(branches)))
    inputs = consts + leaves
    results = [next(outs) if f is None else _as_array(inputs[f]) for f in forwarded]
    return tree_unflatten(traced[0][2], results)


def _pred_to_index(pred):
    if pred is None:
        raise TypeError("cond predicate is None")
    if isinstance(pred, collections.abc.Sequence) or np.ndim(pred) != 0:  # str, list, tuple
        what = (f"type {type(pred)}" if isinstance(pred, collections.abc.Sequence)
                else f"shape {np.shape(pred)}.")
        raise TypeError(f"Pred must be a scalar, got {pred} of {what}")
    try:
        dtype = core.get_aval(pred).dtype
    except TypeError:
        raise TypeError(f"Pred type must be either boolean or number, got {pred}.") from None
    if dtype != dtypes.bool_:
        if dtype.kind not in "iuf":
            raise TypeError(f"Pred type must be either boolean or number, got {dtype}.")
        pred = lax.ne(pred, np.zeros((), dtype))
    return lax.convert_element_type(pred, np.int32)


@api_boundary
def cond(pred, true_fun: Callable, false_fun: Callable, *operands, operand=_no_operand):
    """Apply ``true_fun(*operands)`` if `pred` is true, else ``false_fun(*operands)``.

    Parameters
    ----------
    pred : scalar bool (or number, compared with 0)
    true_fun, false_fun : callables of the operands returning pytrees of one structure and
        types. Both are traced; only the selected one runs (under `vmap` with a batched `pred`
        both run and the results are selected).
    *operands : pytrees of arrays passed to the branch.

    The older form ``cond(pred, true_operand, true_fun, false_operand, false_fun)``, which
    JAX still accepts (NumPyro calls it), gives each branch its own operand.
    """
    if not (callable(true_fun) and callable(false_fun)):
        if callable(false_fun) and len(operands) == 2 and callable(operands[1]):
            true_operand, true_branch, false_operand, false_branch = (
                true_fun, false_fun, *operands)
            return cond(pred, lambda x, _: true_branch(x), lambda _, y: false_branch(y),
                        true_operand, false_operand)
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    if operand is not _no_operand:
        if operands:
            raise TypeError("if 'operand' keyword is passed then no positional operands can be "
                            f"passed, got operand={operand} and positional operands {operands}")
        operands = (operand,)
    index = _pred_to_index(pred)
    if config.disable_jit and core.is_concrete(index):
        return (true_fun if int(index) else false_fun)(*operands)
    # true_fun is traced first, as in JAX (the order a user sees their prints in)
    leaves, (true_traced, false_traced) = _trace_branches([true_fun, false_fun], operands, "cond")
    _check_branch_outputs("cond", "true_fun", "false_fun", true_fun, false_fun, true_traced[2],
                          true_traced[0].out_avals, false_traced[2], false_traced[0].out_avals)
    return _bind_traced_branches(index, [false_traced, true_traced], leaves)


@api_boundary
def switch(index, branches: Sequence[Callable], *operands, operand=_no_operand):
    """Apply ``branches[index](*operands)``, with `index` clamped to [0, len(branches) - 1].

    Parameters
    ----------
    index : scalar integer
    branches : sequence of callables of the operands, returning pytrees of one structure and
        types. All are traced; only the selected one runs.
    *operands : pytrees of arrays passed to the branch.
    """
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    if operand is not _no_operand:
        if operands:
            raise TypeError("if 'operand' keyword is passed then no positional operands can be "
                            f"passed, got operand={operand} and positional operands {operands}")
        operands = (operand,)
    if np.ndim(index) != 0:
        raise TypeError(f"Branch index must be scalar, got {index} of shape {np.shape(index)}.")
    try:
        index_dtype = core.get_aval(index).dtype
    except TypeError:
        raise TypeError(f"Index type must be an integer, got {index}.") from None
    if index_dtype.kind not in "iu":
        raise TypeError(f"Index type must be an integer, got {index} as {index_dtype}")
    branches = tuple(branches)
    if not branches:
        raise ValueError("Empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    index = lax.convert_element_type(index, np.int32)
    index = structural.clamp(np.int32(0), index, np.int32(len(branches) - 1))
    if config.disable_jit and core.is_concrete(index):
        return branches[int(index)](*operands)
    leaves, traced = _trace_branches(branches, operands, "switch")
    for i, (jaxpr, _, tree) in enumerate(traced[1:], 1):
        _check_branch_outputs("switch", "branch 0", f"branch{i}", branches[0], branches[i],
                              traced[0][2], traced[0][0].out_avals, tree, jaxpr.out_avals)
    return _bind_traced_branches(index, traced, leaves)


# ---------------------------------------------------------------------------------------------
# cond: differentiation

def _cond_jvp(primals, tangents, *, branches):
    index, *ops = primals
    ops_nonzero = tuple(type(t) is not ad.Zero for t in tangents[1:])
    out_nonzero = [any(m) for m in zip(*(jvp_jaxpr(b, ops_nonzero)[1] for b in branches))]
    jvp_branches = tuple(jvp_jaxpr(b, ops_nonzero, tuple(out_nonzero))[0] for b in branches)
    outs = cond_p.bind(index, *ops, *_nonzero(tangents[1:]), branches=jvp_branches)
    n = len(out_nonzero)
    return outs[:n], _fill_zeros(outs[n:], out_nonzero, branches[0].out_avals)


def _merge_residuals(res_avals_per_branch):
    """One list of residual slots serving all branches: a branch's residuals take slots of equal
    type, sharing them with other branches. Returns (slot avals, each branch's slot indices)."""
    slots: list[ShapedArray] = []
    indices = []
    for avals in res_avals_per_branch:
        taken: set[int] = set()
        mine = []
        for a in avals:
            slot = next((k for k, s in enumerate(slots) if s == a and k not in taken), None)
            if slot is None:
                slot = len(slots)
                slots.append(a)
            taken.add(slot)
            mine.append(slot)
        indices.append(mine)
    return slots, indices


def _pad_residual_outputs(known: ClosedJaxpr, num_outs: int, slot_avals, slots) -> ClosedJaxpr:
    """A known branch returning all residual slots (zeros in the slots it does not fill)."""
    def fun(*args):
        outs = _eval(known, *args)
        residuals = [_zeros(a) for a in slot_avals]
        for slot, r in zip(slots, outs[num_outs:]):
            residuals[slot] = r
        return outs[:num_outs] + residuals
    return _trace_flat(fun, known.in_avals, "cond_partial_eval")


def _pad_residual_inputs(staged: ClosedJaxpr, num_res: int, slot_avals, slots) -> ClosedJaxpr:
    """A staged branch taking all residual slots (ignoring those of other branches)."""
    binders = [Var(a) for a in slot_avals]
    for slot, v in zip(slots, staged.jaxpr.invars[:num_res]):
        binders[slot] = v
    return _with_invars(staged, binders + staged.jaxpr.invars[num_res:])


def _cond_partial_eval(trace: ad.PartialEvalTrace, prim, args, params):
    branches = params["branches"]
    index, *ops = args
    if trace.is_unknown(index):
        return trace.stage(cond_p, args, params)
    ops_unknown = tuple(trace.is_unknown(x) for x in ops)
    out_unknown = tuple(any(u) for u in zip(*(partial_eval_jaxpr(b, ops_unknown)[2]
                                               for b in branches)))
    splits = [partial_eval_jaxpr(b, ops_unknown, out_unknown) for b in branches]
    num_known_outs = len(out_unknown) - sum(out_unknown)
    slot_avals, slots = _merge_residuals(
        [known.out_avals[num_known_outs:] for known, _, _, _ in splits])
    known_branches = tuple(_pad_residual_outputs(known, num_known_outs, slot_avals, s)
                           for (known, _, _, _), s in zip(splits, slots))
    staged_branches = tuple(_pad_residual_inputs(staged, n_res, slot_avals, s)
                            for (_, staged, _, n_res), s in zip(splits, slots))
    known_ops = [x for x, u in zip(ops, ops_unknown) if not u]
    with core.set_current_trace(trace.parent):
        known_results = cond_p.bind(index, *known_ops, branches=known_branches)
    known_outs, residuals = known_results[:num_known_outs], known_results[num_known_outs:]
    unknown_ops = [x for x, u in zip(ops, ops_unknown) if u]
    staged_outs = trace.stage(cond_p, [index, *residuals, *unknown_ops],
                              dict(branches=staged_branches))
    known_iter, staged_iter = iter(known_outs), iter(staged_outs)
    return [next(staged_iter) if u else next(known_iter) for u in out_unknown]


@memoized
def _transpose_branch(closed: ClosedJaxpr, linear, ct_nonzero) -> ClosedJaxpr:
    """A branch mapping (non-linear arguments, nonzero output cotangents) to the cotangents of
    its linear arguments."""
    in_avals = closed.in_avals
    nonlin_avals = [a for a, lin in zip(in_avals, linear) if not lin]
    ct_avals = [ad.tangent_aval(a) for a, nz in zip(closed.out_avals, ct_nonzero) if nz]

    def fun(*args):
        nonlin = iter(args[:len(nonlin_avals)])
        primals = [ad.UndefinedPrimal(a) if lin else next(nonlin)
                   for a, lin in zip(in_avals, linear)]
        cts_out = _fill_zeros(args[len(nonlin_avals):], ct_nonzero, closed.out_avals)
        cts_in = ad.backward_pass(closed.jaxpr, closed.consts, primals, cts_out)
        return [ad.instantiate(ct) for ct, lin in zip(cts_in, linear) if lin]

    return _trace_flat(fun, nonlin_avals + ct_avals, "cond_transpose")


def _cond_transpose(cts, index, *ops, branches):
    if ad.is_undefined_primal(index):
        raise ValueError("cond transpose: the branch index cannot be a linear argument.")
    linear = tuple(ad.is_undefined_primal(x) for x in ops)
    ct_nonzero = tuple(type(ct) is not ad.Zero for ct in cts)
    transposed = tuple(_transpose_branch(b, linear, ct_nonzero) for b in branches)
    nonlin = [x for x, lin in zip(ops, linear) if not lin]
    cts_in = iter(cond_p.bind(index, *nonlin, *_nonzero(cts), branches=transposed))
    return [None] + [next(cts_in) if lin else None for lin in linear]


# ---------------------------------------------------------------------------------------------
# cond: batching

def _cond_batch(trace, vals, dims, *, branches):
    size, axis_name = trace.axis_size, trace.axis_name
    (index, *ops), (index_dim, *op_dims) = vals, dims
    if index_dim is not None:
        return _cond_batched_index(index, index_dim, ops, op_dims, branches, axis_name, size)
    ops = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(ops, op_dims)]
    ops_batched = tuple(d is not None for d in op_dims)
    n_out = len(branches[0].out_avals)
    out_batched = tuple(any(b) for b in zip(*(
        _batch_jaxpr(b, ops_batched, (False,) * n_out, axis_name, size)[1] for b in branches)))
    batched = tuple(_batch_jaxpr(b, ops_batched, out_batched, axis_name, size)[0] for b in branches)
    outs = cond_p.bind(index, *ops, branches=batched)
    return outs, [0 if b else None for b in out_batched]


def _has_io_effect(*jaxprs) -> bool:
    from fluxion._src import effects
    return any(isinstance(e, (effects.IOEffect, effects.OrderedIOEffect))
               for j in jaxprs for e in effects.jaxpr_effects(j))


def _cond_batched_index(index, index_dim, ops, op_dims, branches, axis_name, size):
    """A per-member branch index: every branch runs on the whole batch and each member's
    outputs are selected from its branch (so collectives or effects in branches run for all);
    an io_callback would run for members that did not take its branch, so it is refused."""
    if _has_io_effect(*branches):
        raise NotImplementedError("IO effect not supported in vmap-of-cond.")
    index = batching.moveaxis(index, index_dim, 0)
    ops = [batching.bdim_at_front(x, d, size) for x, d in zip(ops, op_dims)]
    all_batched = (True,) * len(ops)
    n_out = len(branches[0].out_avals)
    branch_outs = []
    for i, branch in enumerate(branches):
        batched, _ = _batch_jaxpr(branch, all_batched, (True,) * n_out, axis_name, size)
        # Members that do not take this branch see its inputs through stop_gradient, so that
        # reverse mode cannot pick up NaNs or infinities from a branch they did not take.
        taken = lax.eq(index, np.int32(i))
        ops_i = [_batched_select(taken, x, stop_gradient(x)) for x in ops]
        branch_outs.append(_eval(batched, *ops_i))
    outs = [structural.select_n(_broadcast_index(index, o[0]), *o) for o in zip(*branch_outs)]
    return outs, [0] * n_out


def _broadcast_index(index, like):
    shape = core.get_aval(like).shape
    return index if len(shape) == 1 else lax.broadcast_in_dim(index, shape, (0,))


ad.primitive_jvps[cond_p] = _cond_jvp
ad.partial_eval_rules[cond_p] = _cond_partial_eval
ad.primitive_transposes[cond_p] = _cond_transpose
batching.trace_rules[cond_p] = _cond_batch


# =============================================================================================
# while_loop

def _while_abstract_eval(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cond_consts, body_consts, carry = _split(avals, [cond_nconsts, body_nconsts])
    if not _same_types(cond_jaxpr.in_avals, cond_consts + carry):
        raise TypeError(f"while: cond_jaxpr takes {[a.str_short() for a in cond_jaxpr.in_avals]} "
                        f"but is applied to {[a.str_short() for a in cond_consts + carry]}.")
    if not _same_types(body_jaxpr.in_avals, body_consts + carry):
        raise TypeError(f"while: body_jaxpr takes {[a.str_short() for a in body_jaxpr.in_avals]} "
                        f"but is applied to {[a.str_short() for a in body_consts + carry]}.")
    if not _same_types(cond_jaxpr.out_avals, [ShapedArray((), dtypes.bool_)]):
        raise TypeError(f"while: cond_jaxpr must return a boolean scalar, got "
                        f"{[a.str_short() for a in cond_jaxpr.out_avals]}.")
    if not _same_types(body_jaxpr.out_avals, carry):
        raise TypeError(f"while: body_jaxpr returns "
                        f"{[a.str_short() for a in body_jaxpr.out_avals]} for a carry of "
                        f"{[a.str_short() for a in carry]}.")
    return body_jaxpr.out_avals


def _while_lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    # Constants reach the regions by implicit capture; only the carry is loop-carried.
    cond_consts, body_consts, init = _split(args, [cond_nconsts, body_nconsts])
    carry_avals = [x.aval for x in init]
    cond_region = ctx.new_block(carry_avals)
    cond_region.ret(ctx.lower_jaxpr(cond_jaxpr, cond_consts + cond_region.args, block=cond_region))
    body_region = ctx.new_block(carry_avals)
    body_region.ret(ctx.lower_jaxpr(body_jaxpr, body_consts + body_region.args, block=body_region))
    return ctx.op("stablehlo.while", init, carry_avals, regions=[cond_region, body_region])


while_p = standard_primitive("while", _while_abstract_eval, _while_lowering, multiple_results=True)


def _check_cond_output(tree, jaxpr: ClosedJaxpr) -> None:
    if tree.num_leaves != 1 or tree.num_nodes != 1:
        raise TypeError(f"cond_fun must return a boolean scalar, but got pytree {tree}.")
    if not _same_types(jaxpr.out_avals, [ShapedArray((), dtypes.bool_)]):
        raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) "
                        f"{jaxpr.out_avals}.")


def _python_while(cond_fun, body_fun, init_val):
    # Arrays, not the caller's NumPy values: a body updating one in place (x += 1) must
    # change neither the caller's value nor another carry leaf aliasing it.
    val = tree_map(_as_array, init_val)
    while cond_fun(val):
        val = body_fun(val)
    return val


@api_boundary
def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """Run ``val = body_fun(val)`` while ``cond_fun(val)`` is true, from `init_val`.

    Parameters
    ----------
    cond_fun : callable of the carry returning a boolean scalar.
    body_fun : callable returning a carry of the same pytree structure and types.
    init_val : pytree of arrays, the initial carry.

    Forward-mode differentiation works; reverse mode does not (use `scan`, or `fori_loop`
    with static bounds).
    """
    if not (callable(body_fun) and callable(cond_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    if config.disable_jit:
        try:
            return _python_while(cond_fun, body_fun, init_val)
        except core.ConcretizationTypeError:
            pass  # not concrete (e.g. under vmap): run the primitive
    leaves, in_tree = tree_flatten(init_val)
    args_tree = tree_flatten((init_val,))[1]
    if config.debug_key_reuse:
        scopes = key_flow.Scope(), key_flow.Scope()
        cond_fun, body_fun = (key_flow.in_scope(f, s) for f, s in zip((cond_fun, body_fun), scopes))

    def trace(values):
        avals = [core.get_aval(x) for x in values]
        cond_jaxpr, cond_consts, cond_tree = _trace_fun(cond_fun, args_tree, avals,
                                                        "while_loop cond")
        _check_cond_output(cond_tree, cond_jaxpr)
        body_jaxpr, body_consts, body_tree = _trace_fun(body_fun, args_tree, avals,
                                                        "while_loop body")
        return avals, (cond_jaxpr, cond_consts), (body_jaxpr, body_consts), body_tree

    avals, cond, body, body_tree = trace(leaves)
    if body_tree == in_tree:
        leaves, changed = _promote_weak_inputs(leaves, avals, body[0].out_avals)
        if changed:
            avals, cond, body, body_tree = trace(leaves)
    _check_carry_type("while_loop body", body_fun, in_tree, avals, body_tree, body[0].out_avals)
    if config.debug_key_reuse:
        key_flow.while_rule(*scopes, init_val)
    (cond_jaxpr, cond_consts), (body_jaxpr, body_consts) = cond, body
    return tree_unflatten(in_tree, _bind_while(cond_consts, body_consts, leaves, cond_jaxpr,
                                               body_jaxpr))


def _bind_while(cond_consts, body_consts, init, cond_jaxpr, body_jaxpr) -> list:
    """Bind while_loop; carries the body passes through unchanged become consts of the cond
    and the body and come back as their initial values (JAX's read-only carries)."""
    invariant = _invariant_carries(body_jaxpr, len(body_consts), len(init))
    if not any(invariant):
        return while_p.bind(*cond_consts, *body_consts, *init, cond_jaxpr=cond_jaxpr,
                            body_jaxpr=body_jaxpr, cond_nconsts=len(cond_consts),
                            body_nconsts=len(body_consts))

    def split(closed, nconsts, outvars=None):
        j = closed.jaxpr
        carry = j.invars[nconsts:]
        fixed = [v for v, f in zip(carry, invariant) if f]
        moving = [v for v, f in zip(carry, invariant) if not f]
        return _with_invars(closed, j.invars[:nconsts] + fixed + moving, outvars)
    moving_outs = [v for v, f in zip(body_jaxpr.jaxpr.outvars, invariant) if not f]
    fixed_init = [x for x, f in zip(init, invariant) if f]
    outs = iter(while_p.bind(
        *cond_consts, *fixed_init, *body_consts, *fixed_init,
        *[x for x, f in zip(init, invariant) if not f],
        cond_jaxpr=split(cond_jaxpr, len(cond_consts)),
        body_jaxpr=split(body_jaxpr, len(body_consts), moving_outs),
        cond_nconsts=len(cond_consts) + len(fixed_init),
        body_nconsts=len(body_consts) + len(fixed_init)))
    return [_as_array(x) if f else next(outs) for x, f in zip(init, invariant)]


# ---------------------------------------------------------------------------------------------
# while: differentiation

def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    nonzero = [type(t) is not ad.Zero for t in tangents]
    _, bconst_nz, init_nz = _split(nonzero, [cond_nconsts, body_nconsts])
    carry_nz = _fixpoint(init_nz, lambda nz: jvp_jaxpr(body_jaxpr, tuple(bconst_nz + nz),
                                                       tuple(nz))[1])
    body_jvp, _ = jvp_jaxpr(body_jaxpr, tuple(bconst_nz + carry_nz), tuple(carry_nz))
    cond_consts, body_consts, init = _split(primals, [cond_nconsts, body_nconsts])
    _, bconst_dot, init_dot = _split(tangents, [cond_nconsts, body_nconsts])
    bconst_dot = _nonzero(bconst_dot)
    init_dot = [ad.instantiate(t) for t, nz in zip(init_dot, carry_nz) if nz]
    # body_jvp takes (consts, carry, const tangents, carry tangents); the loop wants the
    # constants first and the carry (primals then tangents) last.
    n_c, n_carry, n_cd, n_td = body_nconsts, len(init), len(bconst_dot), len(init_dot)
    order = (list(range(n_c)) + list(range(n_c + n_carry, n_c + n_carry + n_cd))
             + list(range(n_c, n_c + n_carry))
             + list(range(n_c + n_carry + n_cd, n_c + n_carry + n_cd + n_td)))
    body = _permute_invars(body_jvp, order)
    cond = _with_invars(cond_jaxpr, cond_jaxpr.jaxpr.invars +
                        [Var(core.get_aval(t)) for t in init_dot])
    outs = while_p.bind(*cond_consts, *body_consts, *bconst_dot, *init, *init_dot,
                        cond_jaxpr=cond, body_jaxpr=body, cond_nconsts=cond_nconsts,
                        body_nconsts=body_nconsts + n_cd)
    return outs[:n_carry], _fill_zeros(outs[n_carry:], carry_nz, body_jaxpr.out_avals)


def _known_outputs_only(known: ClosedJaxpr, num_outs: int) -> ClosedJaxpr:
    """The known part of a split jaxpr without its residual outputs (and what computes them)."""
    j = known.jaxpr
    pruned = staging.dce_jaxpr(Jaxpr(j.constvars, j.invars, j.outvars[:num_outs], j.eqns))
    return ClosedJaxpr(pruned, known.consts)


def _while_partial_eval(trace: ad.PartialEvalTrace, prim, args, params):
    """Known carries are computed by a loop of the known part of the body; the unknown ones by
    the whole loop, staged (recomputing the known part, as JAX does: a while loop cannot save
    per-iteration residuals)."""
    cond_jaxpr, body_jaxpr = params["cond_jaxpr"], params["body_jaxpr"]
    cond_nconsts, body_nconsts = params["cond_nconsts"], params["body_nconsts"]
    unknown = [trace.is_unknown(x) for x in args]
    cconst_uk, bconst_uk, init_uk = _split(unknown, [cond_nconsts, body_nconsts])
    carry_uk = _fixpoint(init_uk, lambda uk: partial_eval_jaxpr(
        body_jaxpr, tuple(bconst_uk + uk), tuple(uk))[2])
    cond_known, _, (pred_uk,), _ = partial_eval_jaxpr(cond_jaxpr, tuple(cconst_uk + carry_uk))
    if pred_uk or all(carry_uk):
        return trace.stage(while_p, args, params)
    body_known, _, _, _ = partial_eval_jaxpr(body_jaxpr, tuple(bconst_uk + carry_uk),
                                             tuple(carry_uk))
    num_known = len(carry_uk) - sum(carry_uk)
    known_args = [x for x, u in zip(args, cconst_uk + bconst_uk + carry_uk) if not u]
    with core.set_current_trace(trace.parent):
        known_outs = while_p.bind(
            *known_args, cond_jaxpr=_known_outputs_only(cond_known, 1),
            body_jaxpr=_known_outputs_only(body_known, num_known),
            cond_nconsts=cond_nconsts - sum(cconst_uk), body_nconsts=body_nconsts - sum(bconst_uk))
    staged_outs = trace.stage(while_p, args, params)
    known_iter = iter(known_outs)
    return [s if u else next(known_iter) for s, u in zip(staged_outs, carry_uk)]


def _while_transpose_error(*args, **params):
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or "
                     "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or using "
                     "fori_loop with static start/stop.")


# ---------------------------------------------------------------------------------------------
# while: batching

# The debug_info of a batched while_loop's condition (checkify refuses such loops, as JAX).
BATCHED_PREDICATE = "while_loop condition of a batched predicate"


@memoized
def _any_member_continues(batched_cond: ClosedJaxpr) -> ClosedJaxpr:
    """The loop condition of a batched predicate: whether any member is still running."""
    def fun(*args):
        (pred,) = _eval(batched_cond, *args)
        return [lax.reduce_or(pred, (0,))]
    closed = _trace_flat(fun, batched_cond.in_avals, "while_batch")
    closed.jaxpr.debug_info = BATCHED_PREDICATE
    return closed


@memoized
def _masked_body(batched_cond: ClosedJaxpr, batched_body: ClosedJaxpr, cond_nconsts: int):
    """A batched body taking (cond consts, body consts, carry) that updates only the members
    whose predicate still holds."""
    num_carry = len(batched_body.out_avals)

    def fun(*args):
        cond_consts, body_consts, carry = _split(args, [cond_nconsts,
                                                        len(args) - cond_nconsts - num_carry])
        (pred,) = _eval(batched_cond, *cond_consts, *carry)
        new = _eval(batched_body, *body_consts, *carry)
        return [_batched_select(pred, n, c) for n, c in zip(new, carry)]

    avals = batched_cond.in_avals[:cond_nconsts] + batched_body.in_avals
    return _trace_flat(fun, avals, "while_batch")


def _while_batch(trace, vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    size, axis_name = trace.axis_size, trace.axis_name
    vals = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(vals, dims)]
    batched = [d is not None for d in dims]
    cconst_bat, bconst_bat, init_bat = _split(batched, [cond_nconsts, body_nconsts])
    cond_consts, body_consts, init = _split(vals, [cond_nconsts, body_nconsts])
    carry_bat = _fixpoint(init_bat, lambda bat: _batch_jaxpr(
        body_jaxpr, tuple(bconst_bat + bat), tuple(bat), axis_name, size)[1])
    _, (pred_bat,) = _batch_jaxpr(cond_jaxpr, tuple(cconst_bat + carry_bat), (False,),
                                  axis_name, size)
    if pred_bat:
        if _has_io_effect(body_jaxpr, cond_jaxpr):  # it would run for finished members too
            raise NotImplementedError("IO effects not supported in while_loop with batched "
                                      "predicate")
        carry_bat = [True] * len(init)
    body, _ = _batch_jaxpr(body_jaxpr, tuple(bconst_bat + carry_bat), tuple(carry_bat),
                           axis_name, size)
    cond, _ = _batch_jaxpr(cond_jaxpr, tuple(cconst_bat + carry_bat), (pred_bat,), axis_name, size)
    init = [batching.bdim_at_front(x, 0 if was else None, size) if now else x
            for x, was, now in zip(init, init_bat, carry_bat)]
    if pred_bat:
        outs = while_p.bind(*cond_consts, *cond_consts, *body_consts, *init,
                            cond_jaxpr=_any_member_continues(cond),
                            body_jaxpr=_masked_body(cond, body, cond_nconsts),
                            cond_nconsts=cond_nconsts, body_nconsts=cond_nconsts + body_nconsts)
    else:
        outs = while_p.bind(*cond_consts, *body_consts, *init, cond_jaxpr=cond, body_jaxpr=body,
                            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
    return outs, [0 if b else None for b in carry_bat]


ad.primitive_jvps[while_p] = _while_jvp
ad.partial_eval_rules[while_p] = _while_partial_eval
ad.primitive_transposes[while_p] = _while_transpose_error
batching.trace_rules[while_p] = _while_batch


# =============================================================================================
# scan

def _scan_abstract_eval(*avals, jaxpr, length, reverse, num_consts, num_carry, unroll):
    consts, carry, xs = _split(avals, [num_consts, num_carry])
    if any(not x.shape or x.shape[0] != length for x in xs):
        raise TypeError(f"scan: every scanned-over input must have leading dimension {length}, "
                        f"got {[x.str_short() for x in xs]}.")
    body_avals = consts + carry + [_unmapped_aval(x) for x in xs]
    if not _same_types(jaxpr.in_avals, body_avals):
        raise TypeError(f"scan: jaxpr takes {[a.str_short() for a in jaxpr.in_avals]} but is "
                        f"applied to {[a.str_short() for a in body_avals]}.")
    carry_out, ys = _split(jaxpr.out_avals, [num_carry])
    if not _same_types(carry_out, carry):
        raise TypeError(f"scan: jaxpr returns a carry of {[a.str_short() for a in carry_out]} "
                        f"for a carry of {[a.str_short() for a in carry]}.")
    return carry_out + [_mapped_aval(y, length) for y in ys]


def _scan_loop(*args, jaxpr, length, reverse, num_consts, num_carry, unroll):
    """The scan as a while loop over trips of `unroll` steps each, reading rows of xs and writing
    rows of ys by index; steps that do not fill a whole trip run unrolled after the loop."""
    consts, init, xs = _split(args, [num_consts, num_carry])
    num_ys = len(jaxpr.out_avals) - num_carry

    def step(carry, x):
        outs = _eval(jaxpr, *consts, *carry, *x)
        return outs[:num_carry], outs[num_carry:]

    def unrolled(carry, block, n):
        """n steps over the rows of `block`; returns the carry and the ys stacked in row order."""
        rows = [None] * n
        for k in range(n):
            r = n - 1 - k if reverse else k
            carry, rows[r] = step(carry, [structural.index_in_dim(x, r, keepdims=False)
                                          for x in block])
        return carry, [_stack([row[j] for row in rows]) for j in range(num_ys)]

    trips, rest = (0, length) if unroll == 0 else divmod(length, unroll)
    if unroll != 1 and trips == 1 and rest == 0:
        trips, rest = 0, length  # unrolled completely: no loop
    carry = list(init)
    ys = [_zeros(_mapped_aval(a, length)) for a in jaxpr.out_avals[num_carry:]]
    if trips:
        loop_start = rest if reverse else 0

        def body(state):
            i, carry, ys = state
            trip = lax.sub(np.int32(trips - 1), i) if reverse else i
            start = trip if unroll == 1 else lax.add(np.int32(loop_start),
                                                      lax.mul(trip, np.int32(unroll)))
            if unroll == 1:
                carry, y = step(carry, [structural.dynamic_index_in_dim(
                    x, start, keepdims=False, allow_negative_indices=False) for x in xs])
                ys = [structural.dynamic_update_index_in_dim(b, v, start, 0,
                                                             allow_negative_indices=False)
                      for b, v in zip(ys, y)]
            else:
                block = [structural.dynamic_slice_in_dim(x, start, unroll,
                                                         allow_negative_indices=False)
                         for x in xs]
                carry, y = unrolled(carry, block, unroll)
                ys = [structural.dynamic_update_slice_in_dim(b, v, start, 0,
                                                             allow_negative_indices=False)
                      for b, v in zip(ys, y)]
            return lax.add(i, np.int32(1)), carry, ys

        n_trips = (lax.convert_element_type(shape_poly.dimension_as_value(trips), np.int32)
                   if type(trips) is shape_poly.DimExpr else np.int32(trips))
        _, carry, ys = while_loop(lambda state: lax.lt(state[0], n_trips), body,
                                  (np.int32(0), carry, ys))
    if rest:
        rest_start = 0 if reverse else trips * unroll
        block = [structural.slice_in_dim(x, rest_start, rest_start + rest) for x in xs]
        carry, y = unrolled(carry, block, rest)
        ys = [structural.dynamic_update_slice_in_dim(b, v, np.int32(rest_start), 0)
              for b, v in zip(ys, y)]
    return carry + ys


scan_p = standard_primitive("scan", _scan_abstract_eval,
                            lowering.lower_fun(_scan_loop, multiple_results=True),
                            multiple_results=True)


def _scan_length(xs_leaves, length) -> int:
    lengths = []
    for x in xs_leaves:
        shape = np.shape(x)
        if not shape:
            raise ValueError(f"scan got value with no leading axis to scan over: {x}.")
        lengths.append(shape[0])
    if length is not None:
        length = operator.index(core.concrete_or_error(
            length, "The `length` argument to `scan` expects a concrete `int` value. For "
                    "scan-like iteration with a dynamic length, use `while_loop` or `fori_loop`."))
        if any(n != length for n in lengths):
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {lengths}.")
        return length
    if len(set(lengths)) > 1:
        raise ValueError("scan got values with different leading axis sizes: "
                         f"{', '.join(str(n) for n in lengths)}.")
    if not lengths:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    return lengths[0]


def _canonical_unroll(unroll, length: int) -> int:
    unroll = core.concrete_or_error(
        unroll, "The `unroll` argument to `scan` expects a concrete `int` or `bool` value.")
    if isinstance(unroll, (bool, np.bool_)):
        return max(length, 1) if unroll else 1
    unroll = operator.index(unroll)
    if unroll < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    return unroll


def _python_scan(f, init, xs_leaves, xs_tree, length: int, reverse: bool):
    if length == 0:
        raise ValueError("zero-length scan is not supported in disable_jit() mode because the "
                         "output type is unknown.")
    carry, ys = init, []
    for i in (reversed(range(length)) if reverse else range(length)):
        x = tree_unflatten(xs_tree, [structural.index_in_dim(leaf, i, keepdims=False)
                                     for leaf in xs_leaves])
        carry, y = f(carry, x)
        ys.append(y)
    if reverse:
        ys.reverse()
    y_leaves = [tree_flatten(y)[0] for y in ys]
    stacked = [_stack([leaves[j] for leaves in y_leaves]) for j in range(len(y_leaves[0]))]
    return carry, tree_unflatten(tree_flatten(ys[0])[1], stacked)


def _pair_body(f, out_trees: list):
    """`f` returning flat leaves of (carry, y), recording their two tree structures."""
    def body(carry, x):
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            leaves, tree = tree_flatten(out)
            shown = tree_unflatten(tree, [core.get_aval(v) for v in leaves])
            raise TypeError(f"scan body output must be a pair, got {shown}.")
        carry_leaves, carry_tree = tree_flatten(out[0])
        y_leaves, y_tree = tree_flatten(out[1])
        out_trees.append((carry_tree, y_tree))
        return carry_leaves + y_leaves
    body.user_function = f  # error messages name the user's function
    return body


@api_boundary
def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1):
    """Loop ``carry, y = f(carry, x)`` over the leading axis of `xs`, stacking the ys.

    Parameters
    ----------
    f : callable ``(carry, x) -> (carry, y)``; the carry keeps its pytree structure and types.
    init : pytree of arrays, the initial carry.
    xs : pytree of arrays sharing a leading axis, or None (then `length` gives the trip count).
    length : int, optional
    reverse : bool
        Scan from the end of `xs` (the ys keep the order of `xs`).
    unroll : int or bool
        Steps per iteration of the compiled loop (True: all of them).

    Returns
    -------
    (final carry, stacked ys)
    """
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    init_leaves, init_tree = tree_flatten(init)
    xs_leaves, xs_tree = tree_flatten(xs)
    length = _scan_length(xs_leaves, length)
    if config.disable_jit:
        return _python_scan(f, init, xs_leaves, xs_tree, length, reverse)
    args_tree = tree_flatten((init, xs))[1]
    x_avals = [_unmapped_aval(core.get_aval(x)) for x in xs_leaves]
    out_trees: list = []
    if config.debug_key_reuse:
        scope = key_flow.Scope()
        body = _pair_body(key_flow.in_scope(f, scope), out_trees)
    else:
        body = _pair_body(f, out_trees)

    def trace(init_vals):
        carry_avals = [core.get_aval(x) for x in init_vals]
        jaxpr, consts, _ = _trace_fun(body, args_tree, carry_avals + x_avals, "scan body")
        return carry_avals, jaxpr, consts, out_trees[-1]

    _check_ref_operands(f, init_leaves + xs_leaves, args_tree, (), "scan", before_trace=True)
    carry_avals, jaxpr, consts, (carry_tree, y_tree) = trace(init_leaves)
    _check_ref_operands(f, init_leaves + xs_leaves, args_tree, consts, "scan",
                        before_trace=False)
    if carry_tree == init_tree:
        init_leaves, changed = _promote_weak_inputs(init_leaves, carry_avals, jaxpr.out_avals)
        if changed:
            carry_avals, jaxpr, consts, (carry_tree, y_tree) = trace(init_leaves)
    _check_carry_type("scan body", f, init_tree, carry_avals, carry_tree,
                      jaxpr.out_avals[:carry_tree.num_leaves])
    if config.debug_key_reuse:
        key_flow.scan_rule(scope, init, xs, len(init_leaves))
    carry_out, ys = _bind_scan(consts, init_leaves, xs_leaves, jaxpr, length=length,
                               reverse=bool(reverse), unroll=_canonical_unroll(unroll, length))
    return tree_unflatten(init_tree, carry_out), tree_unflatten(y_tree, ys)


def _invariant_carries(body: ClosedJaxpr, num_consts: int, num_carry: int) -> list[bool]:
    """Which carries the body returns unchanged (its output is the very input binder)."""
    j = body.jaxpr
    return [j.outvars[i] is j.invars[num_consts + i] for i in range(num_carry)]


def _bind_scan(consts, init, xs, jaxpr, **params):
    """Bind scan; returns (final carry, stacked ys). Carries the body passes through unchanged
    become consts and come back as their initial values, as in JAX (so vmap sees them
    unbatched when they were)."""
    nc, n = len(consts), len(init)
    invariant = _invariant_carries(jaxpr, nc, n)
    j = jaxpr.jaxpr
    carry_vars = j.invars[nc:nc + n]
    fixed = [v for v, f in zip(carry_vars, invariant) if f]
    moving = [v for v, f in zip(carry_vars, invariant) if not f]
    body = _with_invars(jaxpr, j.invars[:nc] + fixed + moving + j.invars[nc + n:],
                        [v for v, f in zip(j.outvars[:n], invariant) if not f] + j.outvars[n:])
    fixed_init = [x for x, f in zip(init, invariant) if f]
    outs = scan_p.bind(*consts, *fixed_init, *[x for x, f in zip(init, invariant) if not f],
                       *xs, jaxpr=body, num_consts=nc + len(fixed_init),
                       num_carry=n - len(fixed_init), **params)
    moved = iter(outs[:n - len(fixed_init)])
    carry = [_as_array(x) if f else next(moved) for x, f in zip(init, invariant)]
    return carry, outs[n - len(fixed_init):]


# ---------------------------------------------------------------------------------------------
# scan: differentiation

def _reorder(closed: ClosedJaxpr, in_order, out_order) -> ClosedJaxpr:
    j = closed.jaxpr
    return _with_invars(closed, [j.invars[i] for i in in_order], [j.outvars[i] for i in out_order])


def _ranges(*bounds) -> list[int]:
    """The concatenation of range(lo, hi) for consecutive (lo, hi) pairs."""
    return [i for lo, hi in zip(bounds[::2], bounds[1::2]) for i in range(lo, hi)]


def _scan_jvp(primals, tangents, *, jaxpr, length, reverse, num_consts, num_carry, unroll):
    num_ys = len(jaxpr.out_avals) - num_carry
    nonzero = [type(t) is not ad.Zero for t in tangents]
    const_nz, init_nz, xs_nz = _split(nonzero, [num_consts, num_carry])
    carry_nz = _fixpoint(init_nz, lambda nz: jvp_jaxpr(
        jaxpr, tuple(const_nz + nz + xs_nz), tuple(nz + [False] * num_ys))[1][:num_carry])
    jvp_closed, out_nz = jvp_jaxpr(jaxpr, tuple(const_nz + carry_nz + xs_nz),
                                   tuple(carry_nz + [False] * num_ys))
    consts, init, xs = _split(primals, [num_consts, num_carry])
    const_dot, init_dot, xs_dot = _split(tangents, [num_consts, num_carry])
    const_dot, xs_dot = _nonzero(const_dot), _nonzero(xs_dot)
    init_dot = [ad.instantiate(t) for t, nz in zip(init_dot, carry_nz) if nz]
    # jvp_closed maps (consts, carry, xs, their nonzero tangents in that order) to (carry, ys,
    # nonzero tangents); the scan wants each group followed by its tangents.
    nc, nca, nx = num_consts, num_carry, len(xs)
    ncd, ntd, nxd = len(const_dot), len(init_dot), len(xs_dot)
    p = nc + nca + nx
    in_order = _ranges(0, nc, p, p + ncd, nc, nc + nca, p + ncd, p + ncd + ntd, nc + nca, p,
                       p + ncd + ntd, p + ncd + ntd + nxd)
    q, nyd = nca + num_ys, sum(out_nz[num_carry:])
    out_order = _ranges(0, nca, q, q + ntd, nca, q, q + ntd, q + ntd + nyd)
    outs = scan_p.bind(*consts, *const_dot, *init, *init_dot, *xs, *xs_dot,
                       jaxpr=_reorder(jvp_closed, in_order, out_order), length=length,
                       reverse=reverse, num_consts=nc + ncd, num_carry=nca + ntd, unroll=unroll)
    carry, carry_dot, ys, ys_dot = _split(outs, [nca, ntd, num_ys])
    primals_out = carry + ys
    return primals_out, _fill_zeros(carry_dot + ys_dot, out_nz,
                                    [core.get_aval(x) for x in primals_out])


def _hoist_loop_invariants(known: ClosedJaxpr, consts, num_res: int):
    """Split the residuals of a scan's known body into loop-invariant ones, computed now from
    the constants alone, and per-iteration ones, left as extra stacked outputs of the body.

    Returns (body, body_consts, hoisted mask, hoisted residual values)."""
    num_outs = len(known.out_avals) - num_res
    pe = ad.PartialEvalTrace("scan partial evaluation")
    try:
        loop_args = [pe.new_arg(a) for a in known.in_avals[len(consts):]]
        with core.set_current_trace(pe):
            outs = _eval(known, *consts, *loop_args)
        residuals = outs[num_outs:]
        hoisted = [not pe.is_unknown(r) for r in residuals]
        staged = pe.to_jaxpr(outs[:num_outs] + [r for r, h in zip(residuals, hoisted) if not h])
    finally:
        pe.is_live = False
    body, body_consts = closure_convert(staged)
    return body, body_consts, hoisted, [r for r, h in zip(residuals, hoisted) if h]


def _scan_partial_eval(trace: ad.PartialEvalTrace, prim, args, params):
    jaxpr, num_consts, num_carry = params["jaxpr"], params["num_consts"], params["num_carry"]
    num_ys = len(jaxpr.out_avals) - num_carry
    const_uk, init_uk, xs_uk = _split([trace.is_unknown(x) for x in args], [num_consts, num_carry])
    carry_uk = _fixpoint(init_uk, lambda uk: partial_eval_jaxpr(
        jaxpr, tuple(const_uk + uk + xs_uk), tuple(uk + [False] * num_ys))[2][:num_carry])
    in_uk = const_uk + carry_uk + xs_uk
    known, staged, out_uk, num_res = partial_eval_jaxpr(jaxpr, tuple(in_uk),
                                                        tuple(carry_uk + [False] * num_ys))
    known_args = [x for x, u in zip(args, in_uk) if not u]
    num_known_consts = num_consts - sum(const_uk)
    with core.set_current_trace(trace.parent):
        body, body_consts, hoisted, invariant_res = _hoist_loop_invariants(
            known, known_args[:num_known_consts], num_res)
        known_results = scan_p.bind(*body_consts, *known_args[num_known_consts:], jaxpr=body,
                                    length=params["length"], reverse=params["reverse"],
                                    num_consts=len(body_consts),
                                    num_carry=num_carry - sum(carry_uk), unroll=params["unroll"])
    num_known_outs = len(out_uk) - sum(out_uk)
    known_outs, stacked_res = known_results[:num_known_outs], known_results[num_known_outs:]
    # The staged body takes (residuals, unknown inputs); as a scan it takes the invariant
    # residuals as constants and the stacked ones as scanned-over inputs, last.
    n_unknown = len(staged.in_avals) - num_res
    invariant = [i for i, h in enumerate(hoisted) if h]
    stacked = [i for i, h in enumerate(hoisted) if not h]
    staged = _permute_invars(staged,
                             invariant + list(range(num_res, num_res + n_unknown)) + stacked)
    unknown_args = [x for x, u in zip(args, in_uk) if u]
    staged_outs = trace.stage(scan_p, [*invariant_res, *unknown_args, *stacked_res],
                              dict(params, jaxpr=staged, num_consts=len(invariant) + sum(const_uk),
                                   num_carry=sum(carry_uk)))
    known_iter, staged_iter = iter(known_outs), iter(staged_outs)
    return [next(staged_iter) if u else next(known_iter) for u in out_uk]


@memoized
def _transpose_scan_body(jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, const_linear,
                         xs_linear, ys_nonzero) -> ClosedJaxpr:
    """The body of the transposed scan of a scan linear in its carry, in the consts marked
    `const_linear` and in the xs marked `xs_linear`.

    It takes (non-linear consts; the linear consts' cotangent sums so far and the carry
    cotangent; the nonzero ys cotangents and the non-linear xs) and returns (updated sums and
    the carry cotangent of the previous step; the linear xs' cotangents)."""
    const_avals, carry_avals, x_avals = _split(jaxpr.in_avals, [num_consts, num_carry])
    y_avals = jaxpr.out_avals[num_carry:]
    res_avals = [a for a, lin in zip(const_avals, const_linear) if not lin]
    sum_avals = [a for a, lin in zip(const_avals, const_linear) if lin]
    ct_y_avals = [ad.tangent_aval(a) for a, nz in zip(y_avals, ys_nonzero) if nz]
    xres_avals = [a for a, lin in zip(x_avals, xs_linear) if not lin]

    def fun(*args):
        res, sums, ct_carry, ct_ys, xres = _split(
            args, [len(res_avals), len(sum_avals), num_carry, len(ct_y_avals)])
        res_iter, xres_iter = iter(res), iter(xres)
        primals = ([ad.UndefinedPrimal(a) if lin else next(res_iter)
                    for a, lin in zip(const_avals, const_linear)]
                   + [ad.UndefinedPrimal(a) for a in carry_avals]
                   + [ad.UndefinedPrimal(a) if lin else next(xres_iter)
                      for a, lin in zip(x_avals, xs_linear)])
        cts_out = ct_carry + _fill_zeros(ct_ys, ys_nonzero, y_avals)
        cts_in = ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, primals, cts_out)
        ct_consts, ct_carry_in, ct_xs = _split(cts_in, [num_consts, num_carry])
        new_sums = [ad.instantiate(ad.add_tangents(s, ct)) for s, ct in
                    zip(sums, [ct for ct, lin in zip(ct_consts, const_linear) if lin])]
        return (new_sums + [ad.instantiate(ct) for ct in ct_carry_in]
                + [ad.instantiate(ct) for ct, lin in zip(ct_xs, xs_linear) if lin])

    return _trace_flat(fun, res_avals + sum_avals + carry_avals + ct_y_avals + xres_avals,
                       "scan_transpose")


def _scan_transpose(cts, *args, jaxpr, length, reverse, num_consts, num_carry, unroll):
    # Carries are transposed as linear even when their initial value is a known constant (a
    # zero tangent instantiated by the JVP): such an input simply gets no cotangent.
    consts, init, xs = _split(args, [num_consts, num_carry])
    const_linear = tuple(ad.is_undefined_primal(x) for x in consts)
    xs_linear = tuple(ad.is_undefined_primal(x) for x in xs)
    ct_carry, ct_ys = _split(cts, [num_carry])
    ct_carry = [ad.instantiate(ct) for ct in ct_carry]
    ys_nonzero = tuple(type(ct) is not ad.Zero for ct in ct_ys)
    body = _transpose_scan_body(jaxpr, num_consts, num_carry, const_linear, xs_linear, ys_nonzero)
    sums = [_zeros(x.aval) for x in consts if ad.is_undefined_primal(x)]
    outs = scan_p.bind(*[x for x in consts if not ad.is_undefined_primal(x)], *sums, *ct_carry,
                       *_nonzero(ct_ys), *[x for x in xs if not ad.is_undefined_primal(x)],
                       jaxpr=body, length=length, reverse=not reverse,
                       num_consts=num_consts - len(sums), num_carry=len(sums) + num_carry,
                       unroll=unroll)
    ct_consts, ct_init, ct_xs = _split(outs, [len(sums), num_carry])
    ct_consts_iter, ct_xs_iter = iter(ct_consts), iter(ct_xs)
    return ([next(ct_consts_iter) if lin else None for lin in const_linear]
            + [ct if ad.is_undefined_primal(x) else None for x, ct in zip(init, ct_init)]
            + [next(ct_xs_iter) if lin else None for lin in xs_linear])


# ---------------------------------------------------------------------------------------------
# scan: batching

def _scan_batch(trace, vals, dims, *, jaxpr, length, reverse, num_consts, num_carry, unroll):
    size, axis_name = trace.axis_size, trace.axis_name
    num_ys = len(jaxpr.out_avals) - num_carry
    const_bat, init_bat, xs_bat = _split([d is not None for d in dims], [num_consts, num_carry])
    carry_bat = _fixpoint(init_bat, lambda bat: _batch_jaxpr(
        jaxpr, tuple(const_bat + bat + xs_bat), tuple(bat + [False] * num_ys), axis_name,
        size)[1][:num_carry])
    body, out_bat = _batch_jaxpr(jaxpr, tuple(const_bat + carry_bat + xs_bat),
                                 tuple(carry_bat + [False] * num_ys), axis_name, size)
    consts, init, xs = _split(vals, [num_consts, num_carry])
    const_dims, init_dims, xs_dims = _split(dims, [num_consts, num_carry])
    consts = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(consts, const_dims)]
    init = [batching.bdim_at_front(x, d, size) if b else x
            for x, d, b in zip(init, init_dims, carry_bat)]
    # Each step sees a slice of xs, batched at its axis 0: axis 1 of the scanned-over value.
    xs = [x if d is None else batching.moveaxis(x, d, 1) for x, d in zip(xs, xs_dims)]
    outs = scan_p.bind(*consts, *init, *xs, jaxpr=body, length=length, reverse=reverse,
                       num_consts=num_consts, num_carry=num_carry, unroll=unroll)
    return outs, [0 if b else None for b in carry_bat] + [1 if b else None
                                                          for b in out_bat[num_carry:]]


ad.primitive_jvps[scan_p] = _scan_jvp
ad.partial_eval_rules[scan_p] = _scan_partial_eval
ad.primitive_transposes[scan_p] = _scan_transpose
batching.trace_rules[scan_p] = _scan_batch


# =============================================================================================
# fori_loop and map

def _fori_index_dtype(lower, upper):
    """The dtype of the loop index: the bounds' common dtype (a weakly typed signed integer
    bound takes the other's dtype)."""
    lo, hi = core.get_aval(lower), core.get_aval(upper)
    if lo.dtype == hi.dtype:
        return lo.dtype
    if lo.dtype.kind == "i" and hi.dtype.kind == "i" and lo.weak_type != hi.weak_type:
        return hi.dtype if lo.weak_type else lo.dtype
    raise TypeError("lower and upper arguments to fori_loop must have equal types, got "
                    f"{lo.dtype.name} and {hi.dtype.name}")


def _static_bounds(lower, upper):
    """(lower, upper) as Python ints when both are known now, else None."""
    if not (core.is_concrete(lower) and core.is_concrete(upper)):
        return None
    return int(core.concrete_or_error(lower)), int(core.concrete_or_error(upper))


@api_boundary
def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: int | bool | None = None):
    """Run ``val = body_fun(i, val)`` for i in range(lower, upper), from `init_val`.

    With bounds known at trace time the loop is a `scan` (reverse-mode differentiable, and
    `unroll` applies); otherwise it is a `while_loop`.
    """
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    lower, upper = (shape_poly.dimension_as_value(b) if type(b) is shape_poly.DimExpr else b
                    for b in (lower, upper))
    dtype = _fori_index_dtype(lower, upper)
    bounds = _static_bounds(lower, upper)
    if bounds is not None:
        lo, hi = bounds
        if config.disable_jit and hi <= lo:
            return init_val  # run eagerly, a zero-trip loop has nothing to infer types from

        def scan_body(loop_carry, _):
            i, val = loop_carry
            return (lax.add(i, 1), body_fun(i, val)), None
        scan_body.user_function = body_fun  # error messages name the user's function

        (_, result), _ = scan(scan_body, (lo, init_val), None, length=max(hi - lo, 0),
                              unroll=False if unroll is None else unroll)
        return result
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are statically "
                         "known.")
    if core.get_aval(lower).dtype != dtype:
        lower = lax.convert_element_type(lower, dtype)
    if core.get_aval(upper).dtype != dtype:
        upper = lax.convert_element_type(upper, dtype)

    def while_body(loop_carry):
        i, stop, val = loop_carry
        return lax.add(i, np.ones((), dtype)), stop, body_fun(i, val)
    while_body.user_function = body_fun

    _, _, result = while_loop(lambda loop_carry: lax.lt(loop_carry[0], loop_carry[1]),
                              while_body, (lower, upper, init_val))
    return result


def _split_batches(leaf, batch_size: int):
    """(leading rows regrouped as (batches, batch_size, ...) or None, remaining rows or None)."""
    shape = core.get_aval(leaf).shape
    num_batches = shape[0] // batch_size if batch_size else 0
    whole = num_batches * batch_size
    batched = rest = None
    if num_batches:
        batched = lax.reshape(structural.slice_in_dim(leaf, 0, whole),
                              (num_batches, batch_size) + shape[1:])
    if whole < shape[0]:
        rest = structural.slice_in_dim(leaf, whole, shape[0])
    return batched, rest


def _merge_leading_axes(x):
    shape = core.get_aval(x).shape
    return lax.reshape(x, (shape[0] * shape[1],) + shape[2:])


@api_boundary
def map(f: Callable, xs, *, batch_size: int | None = None):
    """``stack([f(x) for x in xs])`` over the leading axis of the pytree `xs`, as one loop.

    With `batch_size`, each step applies ``vmap(f)`` to that many rows (0: all rows at once);
    leftover rows go through one more ``vmap(f)``.
    """
    if batch_size is None:
        _, ys = scan(lambda _, x: ((), f(x)), (), xs)
        return ys
    from fluxion._src.vmap import vmap
    leaves, tree = tree_flatten(xs)
    if not leaves:
        return vmap(f)(xs)
    batched, rest = zip(*(_split_batches(leaf, batch_size) for leaf in leaves))
    pieces = []
    if batched[0] is not None:
        _, ys = scan(lambda _, x: ((), vmap(f)(x)), (), tree_unflatten(tree, batched))
        y_leaves, y_tree = tree_flatten(ys)
        pieces.append([_merge_leading_axes(y) for y in y_leaves])
    if rest[0] is not None:
        y_leaves, y_tree = tree_flatten(vmap(f)(tree_unflatten(tree, rest)))
        pieces.append(y_leaves)
    joined = [p[0] if len(p) == 1 else structural.concatenate(list(p), 0) for p in zip(*pieces)]
    return tree_unflatten(y_tree, joined)


# =============================================================================================
# associative_scan

def _interleave(evens, odds, axis: int):
    """Elements of `evens` at even positions along `axis` and of `odds` at odd ones."""
    n_even, n_odd = core.get_aval(evens).shape[axis], core.get_aval(odds).shape[axis]
    ndim = core.get_aval(evens).ndim
    even_pad, odd_pad = [(0, 0, 0)] * ndim, [(0, 0, 0)] * ndim
    even_pad[axis] = (0, 1 if n_even == n_odd else 0, 1)
    odd_pad[axis] = (1, 0 if n_even == n_odd else 1, 1)
    dtype = core.get_aval(evens).dtype
    zero = np.zeros((), dtype)
    combine = lax.bitwise_or if dtype == dtypes.bool_ else lax.add
    return combine(structural.pad(evens, zero, even_pad), structural.pad(odds, zero, odd_pad))


def check_constant_scan_size(size) -> None:
    """The odd/even recursion unrolls over the axis: a symbolic size is JAX's
    NotImplementedError."""
    if isinstance(size, shape_poly.DimExpr):
        raise NotImplementedError(f"associative scan over axis of non-constant size: {size}. "
                                  "The parallel scan is built for a known length; export with "
                                  "a constant size for that axis.")


@api_boundary
def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0):
    """All prefix combinations ``[a, fn(a, b), fn(fn(a, b), c), ...]`` along `axis`, computed
    in parallel (Blelloch) for an associative `fn` that acts elementwise over that axis.

    Parameters
    ----------
    fn : associative callable ``(a, b) -> c`` on pytrees shaped like `elems`.
    elems : pytree of arrays sharing the size of `axis`.
    reverse : bool
        Combine from the end instead.
    axis : int
    """
    if not callable(fn):
        raise TypeError("lax.associative_scan: fn argument should be callable.")
    leaves, tree = tree_flatten(elems)
    if not leaves:
        raise ValueError("associative_scan needs at least one array in elems.")
    ndim = core.get_aval(leaves[0]).ndim
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for array of dimension "
                                      f"{ndim}")
    axis %= ndim
    sizes = [core.get_aval(x).shape[axis] if core.get_aval(x).ndim > axis else None
             for x in leaves]
    if len(set(sizes)) != 1:
        raise ValueError("Array inputs to associative_scan must have the same first dimension. "
                         f"(saw: {[core.get_aval(x).shape for x in leaves]})")
    check_constant_scan_size(sizes[0])
    if reverse:
        leaves = [structural.rev(x, (axis,)) for x in leaves]

    def combine(a, b):
        return tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))[0]

    def every_other(xs, start, stop=None):
        return [structural.slice_in_dim(x, start, stop, 2, axis) for x in xs]

    def prefix_scan(xs):
        n = core.get_aval(xs[0]).shape[axis]
        if n < 2:
            return xs
        # Scan the sums of adjacent pairs: they are the results at odd positions.
        odds = prefix_scan(combine(every_other(xs, 0, -1), every_other(xs, 1)))
        # Even positions (but the first) add the next element to the preceding odd result.
        previous = [structural.slice_in_dim(o, 0, -1, axis=axis) for o in odds] if n % 2 == 0 \
            else odds
        evens = combine(previous, every_other(xs, 2))
        evens = [structural.concatenate([structural.slice_in_dim(x, 0, 1, axis=axis), e], axis)
                 for x, e in zip(xs, evens)]
        return [_interleave(e, o, axis) for e, o in zip(evens, odds)]

    result = prefix_scan(leaves)
    if reverse:
        result = [structural.rev(x, (axis,)) for x in result]
    return tree_unflatten(tree, result)


# =============================================================================================
# custom_linear_solve

class _LinearSolveTuple(collections.namedtuple("_LinearSolveTuple",
                                               "matvec vecmat solve transpose_solve")):
    __slots__ = ()

    def transpose(self) -> "_LinearSolveTuple":
        return _LinearSolveTuple(self.vecmat, self.matvec, self.transpose_solve, self.solve)


def _split_linear_solve_args(args, const_lengths):
    pieces = _split(args, list(const_lengths))
    return _LinearSolveTuple(*pieces[:4]), pieces[4]


def _check_tree(func_name, expected_name, actual_tree, expected_tree, has_aux=False):
    if has_aux:
        children = actual_tree.children()
        if len(children) != 2:
            raise ValueError(f"{func_name}() produced a pytree with structure {actual_tree}, but "
                             "a pytree tuple with auxiliary output was expected because has_aux "
                             "was set to True.")
        actual_tree = children[0]
    if actual_tree != expected_tree:
        raise TypeError(f"{func_name}() output pytree structure must match {expected_name}, got "
                        f"{actual_tree} and {expected_tree}.")


def _shape_checked(fun, name: str, expected_shapes, has_aux: bool):
    def checked(x):
        out = fun(x)
        leaves = tree_flatten(out[0] if has_aux else out)[0]
        shapes = [np.shape(y) for y in leaves]
        if shapes != expected_shapes:
            raise ValueError(f"{name}() output shapes must match b, got {shapes} and "
                             f"{expected_shapes}")
        return out
    return checked


def _linear_transpose(matvec, b_tree, b_avals):
    """The transpose of the linear function `matvec` (by reverse-mode differentiation)."""
    from fluxion._src.ad_api import vjp

    def vecmat(y):
        point = tree_unflatten(b_tree, [_zeros(a) for a in b_avals])
        _, pullback = vjp(matvec, point)
        return pullback(y)[0]
    return vecmat


def _linear_solve_abstract_eval(*avals, const_lengths, jaxprs):
    b = list(avals[sum(const_lengths):])
    return b + jaxprs.solve.out_avals[len(b):]


def _linear_solve_impl(*args, const_lengths, jaxprs):
    params, b = _split_linear_solve_args(args, const_lengths)
    return _eval(jaxprs.solve, *params.solve, *b)


linear_solve_p = standard_primitive("custom_linear_solve", _linear_solve_abstract_eval,
                                    lowering.lower_fun(_linear_solve_impl, multiple_results=True),
                                    multiple_results=True)


@api_boundary
def custom_linear_solve(matvec: Callable, b, solve: Callable,
                        transpose_solve: Callable | None = None, symmetric: bool = False,
                        has_aux: bool = False):
    """``solve(matvec, b)``, differentiated implicitly: as the solution x of ``matvec(x) == b``.

    Parameters
    ----------
    matvec : linear callable on pytrees shaped like `b` (differentiable).
    b : pytree of arrays, the right-hand side.
    solve : callable ``(matvec, b) -> x`` (need not be differentiable).
    transpose_solve : callable ``(vecmat, b) -> x`` solving the transposed system; needed for
        reverse mode unless `symmetric`.
    symmetric : bool
        The linear map is symmetric (``transpose_solve`` defaults to `solve`).
    has_aux : bool
        `solve` and `transpose_solve` return ``(x, aux)``.
    """
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_leaves, b_tree = tree_flatten(b)
    b_avals = [core.get_aval(x) for x in b_leaves]
    b_shapes = [a.shape for a in b_avals]
    args_tree = tree_flatten((b,))[1]

    def trace(fun, name, aux):
        jaxpr, consts, tree = _trace_fun(_shape_checked(fun, name, b_shapes, aux), args_tree,
                                         b_avals, f"custom_linear_solve {name}")
        _check_tree(name, "b", tree, b_tree, aux)
        return jaxpr, consts, tree

    matvec_jaxpr, matvec_consts, _ = trace(matvec, "matvec", False)
    solve_jaxpr, solve_consts, out_tree = trace(lambda x: solve(matvec, x), "solve", has_aux)
    vecmat_jaxpr = tr_solve_jaxpr = None
    vecmat_consts, tr_solve_consts = [], []
    if transpose_solve is not None:
        if symmetric:
            vecmat = matvec
            vecmat_jaxpr, vecmat_consts = matvec_jaxpr, matvec_consts
        else:
            vecmat = _linear_transpose(matvec, b_tree, b_avals)
            vecmat_jaxpr, vecmat_consts, _ = trace(vecmat, "vecmat", False)
        tr_solve_jaxpr, tr_solve_consts, _ = trace(lambda x: transpose_solve(vecmat, x),
                                                   "transpose_solve", has_aux)
    all_consts = [matvec_consts, vecmat_consts, solve_consts, tr_solve_consts]
    outs = linear_solve_p.bind(
        *[c for cs in all_consts for c in cs], *b_leaves,
        const_lengths=_LinearSolveTuple(*(len(cs) for cs in all_consts)),
        jaxprs=_LinearSolveTuple(matvec_jaxpr, vecmat_jaxpr, solve_jaxpr, tr_solve_jaxpr))
    return tree_unflatten(out_tree, outs)


def _linear_solve_jvp(primals, tangents, *, const_lengths, jaxprs):
    # A x = b  =>  dA x + A dx = db  =>  dx = A^-1 (db - dA x)
    x = linear_solve_p.bind(*primals, const_lengths=const_lengths, jaxprs=jaxprs)
    params, b = _split_linear_solve_args(primals, const_lengths)
    params_dot, b_dot = _split_linear_solve_args(tangents, const_lengths)
    solution, aux = x[:len(b)], x[len(b):]
    rhs = list(b_dot)
    if any(type(t) is not ad.Zero for t in params_dot.matvec):
        _, matvec_dot = ad.jvp_flat(lambda *a: _eval(jaxprs.matvec, *a),
                                    params.matvec + solution,
                                    params_dot.matvec + [ad.Zero.from_primal_value(s)
                                                         for s in solution])
        rhs = [ad.add_tangents(t, lax.neg(m) if type(m) is not ad.Zero else m)
               for t, m in zip(rhs, matvec_dot)]
    aux_dot = [ad.Zero.from_primal_value(a) for a in aux]
    if all(type(t) is ad.Zero for t in rhs):
        return x, [ad.Zero.from_primal_value(s) for s in solution] + aux_dot
    params_flat = [p for ps in params for p in ps]
    x_dot = linear_solve_p.bind(*params_flat, *[ad.instantiate(t) for t in rhs],
                                const_lengths=const_lengths, jaxprs=jaxprs)
    return x, x_dot[:len(b)] + aux_dot


def _linear_solve_transpose(cts, *args, const_lengths, jaxprs):
    if jaxprs.transpose_solve is None:
        raise TypeError("transpose_solve required for backwards mode automatic differentiation "
                        "of custom_linear_solve")
    params, b = _split_linear_solve_args(args, const_lengths)
    if any(ad.is_undefined_primal(p) for ps in params for p in ps):
        raise NotImplementedError("custom_linear_solve transpose: the linear operator's "
                                  "parameters must not be linear arguments.")
    x_cts = [ad.instantiate(ct) for ct in cts[:len(b)]]
    transposed = params.transpose()
    b_cts = linear_solve_p.bind(*[p for ps in transposed for p in ps], *x_cts,
                                const_lengths=const_lengths.transpose(),
                                jaxprs=jaxprs.transpose())
    return [None] * sum(const_lengths) + list(b_cts[:len(b)])


def _linear_solve_batch(trace, vals, dims, *, const_lengths, jaxprs):
    size, axis_name = trace.axis_size, trace.axis_name
    params_bat, orig_b_bat = _split_linear_solve_args([d is not None for d in dims], const_lengths)
    num_x = len(jaxprs.matvec.out_avals)
    num_aux = len(jaxprs.solve.out_avals) - num_x

    def batch(jaxpr, in_bat, instantiate):
        if jaxpr is None:
            return None, None
        return _batch_jaxpr(jaxpr, tuple(in_bat), tuple(instantiate), axis_name, size)

    # Which parts of x and b are batched must agree across all four jaxprs: a fixpoint.
    b_bat, x_bat = list(orig_b_bat), [False] * (num_x + num_aux)
    for _ in range(len(b_bat) + len(x_bat) + 1):
        solve_b, solve_x_bat = batch(jaxprs.solve, params_bat.solve + b_bat, x_bat)
        vecmat_b, vecmat_x_bat = batch(jaxprs.vecmat, params_bat.vecmat + b_bat, b_bat)
        x_bat_out = list(solve_x_bat) if vecmat_b is None else [
            a or b for a, b in zip(list(vecmat_x_bat) + [True] * num_aux, solve_x_bat)]
        matvec_b, matvec_b_bat = batch(jaxprs.matvec, params_bat.matvec + x_bat_out[:num_x], b_bat)
        tr_solve_b, tr_x_bat = batch(jaxprs.transpose_solve,
                                     params_bat.transpose_solve + x_bat_out[:num_x], x_bat_out)
        tr_b_bat = [False] * len(b_bat) if tr_solve_b is None else tr_x_bat[:len(b_bat)]
        b_bat_out = [m or o or t for m, o, t in zip(matvec_b_bat, orig_b_bat, tr_b_bat)]
        if x_bat_out == x_bat and b_bat_out == b_bat:
            break
        x_bat, b_bat = x_bat_out, b_bat_out
    else:
        raise AssertionError("fixpoint not reached")
    params_vals, b_vals = _split_linear_solve_args(vals, const_lengths)
    params_dims, b_dims = _split_linear_solve_args(dims, const_lengths)
    new_params = [x if d is None else batching.moveaxis(x, d, 0)
                  for ps, ds in zip(params_vals, params_dims) for x, d in zip(ps, ds)]
    new_b = [batching.bdim_at_front(x, d, size) if bat else x
             for x, d, bat in zip(b_vals, b_dims, b_bat)]
    outs = linear_solve_p.bind(*new_params, *new_b, const_lengths=const_lengths,
                               jaxprs=_LinearSolveTuple(matvec_b, vecmat_b, solve_b, tr_solve_b))
    return outs, [0 if bat else None for bat in solve_x_bat]


ad.primitive_jvps[linear_solve_p] = _linear_solve_jvp
ad.primitive_transposes[linear_solve_p] = _linear_solve_transpose
batching.trace_rules[linear_solve_p] = _linear_solve_batch


# =============================================================================================
# custom_root

_RootTuple = collections.namedtuple("_RootTuple", "f solve l_and_s")


def _split_root_args(args, const_lengths):
    pieces = _split(args, list(const_lengths))
    return _RootTuple(*pieces[:3]), pieces[3]


def _root_solution(const_lengths, jaxprs, *args):
    params, guess = _split_root_args(args, const_lengths)
    return _eval(jaxprs.solve, *params.solve, *guess)


def _root_jvp(const_lengths, jaxprs, primals, tangents):
    # With f(m, u*(m)) = 0: du* = -(d_u f)^-1 (d_m f dm), the inverse applied by tangent_solve.
    params, _ = _split_root_args(primals, const_lengths)
    params_dot, _ = _split_root_args(tangents, const_lengths)
    solution_and_aux = _custom_root(const_lengths, jaxprs, *primals)
    num_x = len(jaxprs.f.out_avals)
    solution, aux = solution_and_aux[:num_x], solution_and_aux[num_x:]
    param_tangents = [ad.Zero.from_primal_value(p) if not dtypes.is_inexact(core.get_aval(p).dtype)
                      else t for p, t in zip(params.f, params_dot.f)]
    _, rhs = ad.jvp_flat(lambda *p: _eval(jaxprs.f, *p, *solution), params.f, param_tangents)
    rhs = [ad.instantiate(t) for t in rhs]
    solution_dot = [lax.neg(t) for t in _eval(jaxprs.l_and_s, *params.l_and_s, *solution, *rhs)]
    return solution_and_aux, solution_dot + [structural.zeros_like_array(a) for a in aux]


def _make_custom_root():
    from fluxion._src.custom_derivatives import custom_jvp
    root = custom_jvp(_root_solution, nondiff_argnums=(0, 1))
    root.defjvp(_root_jvp)
    return root


_custom_root = _make_custom_root()


@api_boundary
def custom_root(f: Callable, initial_guess, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False):
    """``solve(f, initial_guess)``, a root of `f`, differentiated by the implicit function
    theorem with respect to the values `f` closes over.

    Parameters
    ----------
    f : callable mapping a pytree like `initial_guess` to one of the same structure.
    initial_guess : pytree of arrays.
    solve : callable ``(f, initial_guess) -> solution`` (need not be differentiable).
    tangent_solve : callable ``(g, y) -> x`` solving ``g(x) = y`` for the linear map g (f
        linearized at the root); for scalars ``lambda g, y: y / g(1.0)``.
    has_aux : bool
        `solve` returns ``(solution, aux)``.
    """
    from fluxion._src.ad_api import linearize
    guess_leaves, guess_tree = tree_flatten(initial_guess)
    guess_avals = [core.get_aval(x) for x in guess_leaves]
    args_tree = tree_flatten((initial_guess,))[1]
    f_jaxpr, f_consts, f_tree = _trace_fun(f, args_tree, guess_avals, "custom_root f")
    _check_tree("f", "initial_guess", f_tree, guess_tree, False)
    solve_jaxpr, solve_consts, solution_tree = _trace_fun(lambda x: solve(f, x), args_tree,
                                                          guess_avals, "custom_root solve")
    _check_tree("solve", "initial_guess", solution_tree, guess_tree, has_aux)

    def linearize_and_solve(x, b):
        _, f_jvp = linearize(f, x)
        return tangent_solve(f_jvp, b)

    l_and_s_jaxpr, l_and_s_consts, l_and_s_tree = _trace_fun(
        linearize_and_solve, tree_flatten((initial_guess, initial_guess))[1], guess_avals * 2,
        "custom_root tangent_solve")
    _check_tree("tangent_solve", "x", l_and_s_tree, guess_tree, False)
    all_consts = [f_consts, solve_consts, l_and_s_consts]
    solution = _custom_root(_RootTuple(*(len(cs) for cs in all_consts)),
                            _RootTuple(f_jaxpr, solve_jaxpr, l_and_s_jaxpr),
                            *[c for cs in all_consts for c in cs], *guess_leaves)
    return tree_unflatten(solution_tree, solution)
