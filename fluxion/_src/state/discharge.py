"""The discharge pass: a jaxpr that reads and writes Refs becomes a pure one.

Each discharged Ref becomes a value carried through the program: reads slice it, writes
produce its next value, and the final values of Refs that were inputs become extra outputs.
Refs created inside the jaxpr (`new_ref`) are always discharged; those among the inputs when
`should_discharge` says so. Primitives with bodies (`scan`, `while`, `cond`, `jit`) that touch
a discharged Ref get discharged bodies carrying its value (see `discharge_rules`).
"""
from __future__ import annotations

from typing import Callable, Sequence

from fluxion._src import core, staging
from fluxion._src.caches import BoundedDict
from fluxion._src.call_transforms import memoized
from fluxion._src.core import ClosedJaxpr, Jaxpr, Literal
from fluxion._src.state import indexing
from fluxion._src.state.primitives import addupdate_p, freeze_p, get_p, new_ref_p, swap_p
from fluxion._src.state.types import is_ref_aval

# primitive -> rule(ref_mask, vals, params) -> (new values of the Ref operands, outputs):
# `vals` has the current value in place of each discharged Ref (ref_mask[i], a key naming the
# Ref, else False); the rule returns
# a list aligned with the operands, holding each such Ref's value afterwards (None: unchanged).
discharge_rules: dict[core.Primitive, Callable] = {}

STATE_PRIMITIVES = frozenset([get_p, swap_p, addupdate_p, new_ref_p, freeze_p])
# Primitives whose jaxpr params own the Refs they use (a kernel's block Refs): equations of
# them are pure, whatever their bodies do.
SCOPED_STATE_PRIMITIVES: set = set()


class _Cell:
    """The current value of a Ref being discharged."""

    __slots__ = ("value", "freed")

    def __init__(self, value):
        self.value = value
        self.freed = False  # by freeze/free_ref: any later use is an error


def eval_discharged(jaxpr: Jaxpr, consts: Sequence, args: Sequence,
                    should_discharge: Sequence[bool]) -> tuple[list, list]:
    """Run `jaxpr` at the current trace with the marked Ref inputs given as values.

    Returns (outputs, final values of the marked inputs)."""
    env: dict[int, object] = {}

    def read(v):
        return v.val if type(v) is Literal else env[id(v)]

    for v, c in zip(jaxpr.constvars, consts):
        env[id(v)] = c
    cells = []
    for v, x, d in zip(jaxpr.invars, args, should_discharge):
        if d:
            cell = _Cell(x)
            cells.append(cell)
            env[id(v)] = cell
        else:
            env[id(v)] = x
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        if eqn.primitive is new_ref_p:
            outs = [_Cell(_as_array_value(ins[0]))]
        elif any(type(x) is _Cell for x in ins):
            if any(type(x) is _Cell and x.freed for x in ins):
                raise ValueError(f"'{eqn.primitive.name}' of a Ref that was already frozen or "
                                 "freed (fluxion.ref.freeze, free_ref): it can no longer be "
                                 "used.")
            if eqn.primitive is freeze_p:
                ins[0].freed = True
            rule = discharge_rules.get(eqn.primitive)
            if rule is None:
                raise NotImplementedError(
                    f"Refs cannot yet be used inside '{eqn.primitive.name}': it has no state "
                    "discharge rule.")
            # Each discharged operand is marked by its cell's identity (a Ref passed twice,
            # or to both a loop's cond and body, is one carried value).
            mask = [id(x) if type(x) is _Cell else False for x in ins]
            new_vals, outs = rule(mask, [x.value if type(x) is _Cell else x for x in ins],
                                  eqn.params)
            for x, nv in zip(ins, new_vals):
                if nv is not None:
                    x.value = nv
        else:  # bodies with Refs of their own are discharged too
            params = eqn.params
            if eqn.primitive not in SCOPED_STATE_PRIMITIVES and any(
                    has_state(sub) for sub in core.subjaxprs(params)):
                params = pure_params(params)
            outs = eqn.primitive.bind(*ins, **params)
            if not eqn.primitive.multiple_results:
                outs = [outs]
        for v, x in zip(eqn.outvars, outs):
            env[id(v)] = x
    outs = [read(v) for v in jaxpr.outvars]
    if any(type(x) is _Cell for x in outs):
        raise ValueError("a Ref created inside a function cannot be returned from it "
                         "(return its value, `ref[...]`, instead)")
    return outs, [c.value for c in cells]


def _as_array_value(x):
    from fluxion._src.lax import lax
    aval = core.get_aval(x)
    return lax.convert_element_type(x, aval.dtype) if aval.weak_type else x


def discharge_state(jaxpr: Jaxpr, consts: Sequence,
                    should_discharge: Sequence[bool] | None = None) -> ClosedJaxpr:
    """The pure version of `jaxpr`: marked Ref inputs (default: all) become values of their
    inner type, and their final values are appended to the outputs."""
    if should_discharge is None:
        should_discharge = [is_ref_aval(v.aval) for v in jaxpr.invars]
    should_discharge = list(should_discharge)
    in_avals = [v.aval.inner_aval if d else v.aval
                for v, d in zip(jaxpr.invars, should_discharge)]

    def fun(*args):
        outs, finals = eval_discharged(jaxpr, consts, args, should_discharge)
        return list(outs) + list(finals)

    return staging.trace_to_jaxpr(fun, in_avals, origin="discharge_state")


_has_state_cache = BoundedDict(4096)  # id(jaxpr) -> (jaxpr, answer)


def has_state(jaxpr: Jaxpr) -> bool:
    """True when `jaxpr` (nested jaxprs included) uses state primitives or takes Refs."""
    hit = _has_state_cache.get(id(jaxpr))
    if hit is not None and hit[0] is jaxpr:
        return hit[1]
    answer = _has_state(jaxpr)
    _has_state_cache[id(jaxpr)] = (jaxpr, answer)
    return answer


def _has_state(jaxpr: Jaxpr) -> bool:
    if any(is_ref_aval(v.aval) for v in jaxpr.constvars) or any(
            is_ref_aval(v.aval) for v in jaxpr.invars):
        return True
    for eqn in jaxpr.eqns:
        if eqn.primitive in STATE_PRIMITIVES:
            return True
        if eqn.primitive in SCOPED_STATE_PRIMITIVES:
            continue
        for sub in core.subjaxprs(eqn.params):
            if has_state(sub):
                return True
    return False


@memoized
def _pure_body(closed: ClosedJaxpr) -> ClosedJaxpr:
    return discharge_state(closed.jaxpr, closed.consts, [False] * len(closed.jaxpr.invars))


def pure_params(params: dict) -> dict:
    """`params` with every body that uses Refs of its own (`new_ref` inside) discharged. For
    an equation without Ref operands the bodies' Refs are all local, and the pure bodies have
    the same type."""
    def fix(value):
        if isinstance(value, ClosedJaxpr) and has_state(value.jaxpr):
            return _pure_body(value)
        if isinstance(value, tuple) and any(isinstance(v, ClosedJaxpr) for v in value):
            fixed = [fix(v) for v in value]
            # Named tuples (custom_linear_solve's jaxprs) keep their type.
            return type(value)(*fixed) if hasattr(value, "_fields") else tuple(fixed)
        return value
    return {k: fix(v) for k, v in params.items()}


# ---------------------------------------------------------------------------------------------
# The state primitives themselves

def _get_discharge(mask, vals, params):
    x, *starts = vals
    return [None] * len(vals), [indexing.read(x, starts, params["indexer"])]


def _swap_discharge(mask, vals, params):
    x, value, *starts = vals
    old = indexing.read(x, starts, params["indexer"])
    new = indexing.write(x, value, starts, params["indexer"])
    return [new] + [None] * (len(vals) - 1), [old]


def _addupdate_discharge(mask, vals, params):
    x, value, *starts = vals
    indexer = params["indexer"]
    new = indexing.write(x, value, starts, indexer, add=True)
    return [new] + [None] * (len(vals) - 1), []


def _freeze_discharge(mask, vals, params):
    return [None], [vals[0]]


discharge_rules[get_p] = _get_discharge
discharge_rules[swap_p] = _swap_discharge
discharge_rules[addupdate_p] = _addupdate_discharge
discharge_rules[freeze_p] = _freeze_discharge


# ---------------------------------------------------------------------------------------------
# Primitives with bodies: each discharged Ref operand becomes a carried value

def _eval_closed(closed: ClosedJaxpr, *args):
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _discharged_body(closed: ClosedJaxpr, mask) -> ClosedJaxpr:
    return discharge_state(closed.jaxpr, closed.consts, mask)


def _jit_discharge(mask, vals, params):
    from fluxion._src.dispatch import jit_p
    closed = params["jaxpr"]
    new = _discharged_body(closed, mask)
    n_out = len(closed.out_avals)
    outs = jit_p.bind(*vals, **{**params, "jaxpr": new})
    finals = iter(outs[n_out:])
    return [next(finals) if m else None for m in mask], outs[:n_out]


def _cond_discharge(mask, vals, params):
    from fluxion._src.lax.control_flow import cond_p
    index, *ops = vals
    op_mask = mask[1:]
    if mask[0]:
        raise TypeError("cond: the branch index cannot be a Ref")
    branches = params["branches"]
    new = tuple(_discharged_body(b, op_mask) for b in branches)
    n_out = len(branches[0].out_avals)
    outs = cond_p.bind(index, *ops, **{**params, "branches": new})
    finals = iter(outs[n_out:])
    return [None] + [next(finals) if m else None for m in op_mask], outs[:n_out]


def _scan_discharge(mask, vals, params):
    from fluxion._src.lax.control_flow import scan_p
    num_consts, num_carry = params["num_consts"], params["num_carry"]
    if any(mask[num_consts:]):
        raise TypeError("scan: a Ref cannot be part of the carry or of the scanned-over inputs; "
                        "close over it instead")
    body = params["jaxpr"]
    const_mask = mask[:num_consts]
    refs_at = [i for i, m in enumerate(const_mask) if m]
    discharged = _discharged_body(body, list(const_mask) + [False] * (len(body.in_avals) - num_consts))
    n_out = len(body.out_avals)
    consts, rest = vals[:num_consts], vals[num_consts:]
    plain = [c for c, m in zip(consts, const_mask) if not m]
    ref_vals = [consts[i] for i in refs_at]
    n_plain, n_refs = len(plain), len(refs_at)

    def new_body(*args):
        plain_in, refs_in, others = args[:n_plain], args[n_plain:n_plain + n_refs], \
            args[n_plain + n_refs:]
        it_plain, it_refs = iter(plain_in), iter(refs_in)
        full = [next(it_refs) if m else next(it_plain) for m in const_mask]
        outs = _eval_closed(discharged, *full, *others)
        return list(outs[n_out:]) + list(outs[:n_out])

    avals = ([core.get_aval(c) for c in plain] + [core.get_aval(r) for r in ref_vals]
             + list(body.in_avals[num_consts:]))
    new = staging.trace_to_jaxpr(new_body, avals, origin="scan discharge")
    outs = scan_p.bind(*plain, *ref_vals, *rest,
                       **{**params, "jaxpr": new, "num_consts": n_plain,
                          "num_carry": n_refs + num_carry})
    finals = iter(outs[:n_refs])
    return [next(finals) if m else None for m in mask], outs[n_refs:]


def _while_discharge(mask, vals, params):
    from fluxion._src.lax.control_flow import while_p
    cn, bn = params["cond_nconsts"], params["body_nconsts"]
    cond, body = params["cond_jaxpr"], params["body_jaxpr"]
    if any(mask[cn + bn:]):
        raise TypeError("while_loop: a Ref cannot be part of the carry; close over it instead")
    cond_mask, body_mask = mask[:cn], mask[cn:cn + bn]
    cond_consts, body_consts, init = vals[:cn], vals[cn:cn + bn], vals[cn + bn:]
    n_carry = len(init)
    # One carried slot per distinct Ref (the cond may read a Ref the body writes).
    slot_of: dict = {}
    ref_vals = []
    for m, v in zip(list(cond_mask) + list(body_mask), list(cond_consts) + list(body_consts)):
        if m and m not in slot_of:
            slot_of[m] = len(ref_vals)
            ref_vals.append(v)
    n_refs = len(ref_vals)
    cond_plain = [c for c, m in zip(cond_consts, cond_mask) if not m]
    body_plain = [c for c, m in zip(body_consts, body_mask) if not m]
    d_cond = _discharged_body(cond, list(cond_mask) + [False] * n_carry)
    d_body = _discharged_body(body, list(body_mask) + [False] * n_carry)

    def fill(plain, slots, m):
        it_p = iter(plain)
        return [slots[slot_of[x]] if x else next(it_p) for x in m]

    def split(args, n_plain):
        return args[:n_plain], list(args[n_plain:n_plain + n_refs]), args[n_plain + n_refs:]

    def new_cond(*args):
        plain, slots, carry = split(args, len(cond_plain))
        return _eval_closed(d_cond, *fill(plain, slots, cond_mask), *carry)[:1]

    def new_body(*args):
        plain, slots, carry = split(args, len(body_plain))
        outs = _eval_closed(d_body, *fill(plain, slots, body_mask), *carry)
        finals = iter(outs[n_carry:])
        for m in body_mask:
            if m:
                slots[slot_of[m]] = next(finals)
        return slots + list(outs[:n_carry])

    slot_avals = [core.get_aval(r) for r in ref_vals]
    carry_avals = list(body.out_avals)
    cond_new = staging.trace_to_jaxpr(
        new_cond, [core.get_aval(c) for c in cond_plain] + slot_avals + carry_avals,
        origin="while discharge")
    body_new = staging.trace_to_jaxpr(
        new_body, [core.get_aval(c) for c in body_plain] + slot_avals + carry_avals,
        origin="while discharge")
    outs = while_p.bind(*cond_plain, *body_plain, *ref_vals, *init, cond_jaxpr=cond_new,
                        body_jaxpr=body_new, cond_nconsts=len(cond_plain),
                        body_nconsts=len(body_plain))
    finals = outs[:n_refs]
    return [finals[slot_of[m]] if m else None for m in mask], outs[n_refs:]


def _inline_discharge(param):
    """The rule of a call-like primitive that lowers by inlining its body (`param`): discharge
    the body inline."""
    def rule(mask, vals, params):
        body = params[param]
        jaxpr, consts = (body.jaxpr, body.consts) if isinstance(body, ClosedJaxpr) else (body, [])
        outs, finals = eval_discharged(jaxpr, consts, vals, [bool(m) for m in mask])
        it = iter(finals)
        return [next(it) if m else None for m in mask], outs
    return rule


def _linear_solve_discharge(mask, vals, params):
    """`custom_linear_solve` whose functions close over Refs: its forward value is `solve`
    applied to b (as its lowering computes it), run with the Refs' values carried; `matvec`
    and the transposed solves do not run. Differentiating it afterwards differentiates that
    solve (the implicit derivative needs pure functions)."""
    from fluxion._src.lax.control_flow import _split_linear_solve_args
    const_lengths, jaxprs = params["const_lengths"], params["jaxprs"]
    m_params, m_b = _split_linear_solve_args(mask, const_lengths)
    v_params, v_b = _split_linear_solve_args(vals, const_lengths)
    if any(m_b):  # JAX fails here with an incidental AttributeError
        raise AttributeError("custom_linear_solve: the right-hand side b cannot be a Ref; pass "
                             "its value (`ref[...]`)")
    solve = jaxprs.solve
    outs, finals = eval_discharged(solve.jaxpr, solve.consts, list(v_params.solve) + list(v_b),
                                   [bool(m) for m in m_params.solve] + [False] * len(v_b))
    it = iter(finals)
    start = sum(const_lengths[:2])
    new = [None] * len(vals)
    for k, m in enumerate(m_params.solve):
        if m:
            new[start + k] = next(it)
    return new, outs


def _register_control_flow():
    from fluxion._src.dispatch import jit_p
    from fluxion._src.lax.control_flow import cond_p, scan_p, while_p
    discharge_rules[jit_p] = _jit_discharge
    discharge_rules[cond_p] = _cond_discharge
    discharge_rules[scan_p] = _scan_discharge
    discharge_rules[while_p] = _while_discharge
    from fluxion._src.lax.control_flow import linear_solve_p
    discharge_rules[linear_solve_p] = _linear_solve_discharge
    # Calls whose custom derivative or rematerialization has done its work by the time a program
    # is discharged for lowering: their bodies are inlined, as their lowerings do.
    from fluxion._src.checkpoint import checkpoint_p
    from fluxion._src.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
    discharge_rules[custom_jvp_call_p] = _inline_discharge("call_jaxpr")
    discharge_rules[custom_vjp_call_p] = _inline_discharge("call_jaxpr")
    discharge_rules[checkpoint_p] = _inline_discharge("jaxpr")


_register_control_flow()


# ---------------------------------------------------------------------------------------------
# Before transposition: linear programs that use Refs created inside them (the tangent Refs of
# a linearized function) are discharged, leaving pure linear code to transpose.

def _discharge_local_refs(jaxpr: Jaxpr, consts):
    if not has_state(jaxpr):
        return None
    if any(is_ref_aval(v.aval) for v in jaxpr.invars):
        return None
    closed = discharge_state(jaxpr, consts, [False] * len(jaxpr.invars))
    return closed.jaxpr, closed.consts


def _register_ad():
    from fluxion._src import ad
    ad.linear_jaxpr_rewrites.append(_discharge_local_refs)


_register_ad()
