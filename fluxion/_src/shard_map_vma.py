"""shard_map's `check_vma`: which manual mesh axes each value of a shard_map body may vary
over (its "varying manual axes", vma), and the error JAX raises when `out_specs` claim an
output is the same along an axis it may vary over.

The analysis runs over the traced body jaxpr. An input varies over the mesh axes its in_spec
names; an equation's outputs vary over the union of its inputs' axes, except that psum, pmean,
pmax and pmin over `a` remove `a`, and axis_index, all_gather, ppermute, all_to_all,
psum_scatter and `pcast(..., to='varying')` over `a` add it (as JAX's rules do). Calls (jit,
checkpoint, custom_jvp/vjp) are analysed through their jaxprs. As in JAX, where vma is part of
a value's type, a loop's carry must come out of its body varying over exactly the axes it went
in with, and the branches of a cond must agree: otherwise JAX's TypeError.
"""
from __future__ import annotations

import weakref

from fluxion._src import core


class ManualAxisType:
    """How a value inside shard_map relates to the manual mesh axes (`jax.sharding.
    ManualAxisType`): the axes it may vary over (`varying`), those over which it holds
    partial sums still to be reduced (`unreduced`) and those already reduced (`reduced`).

    Instances are interned: equal sets give the same object. An axis cannot be both varying
    and unreduced, nor both varying and reduced. fluxion's avals do not carry this type;
    `jaxpr_vma` computes the `varying` part over a jaxpr.
    """
    __slots__ = ("varying", "unreduced", "reduced", "__weakref__")
    _interned: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def __new__(cls, *, varying=frozenset(), unreduced=frozenset(), reduced=frozenset()):
        varying, unreduced, reduced = map(frozenset, (varying, unreduced, reduced))
        if varying & unreduced:
            raise ValueError("varying and unreduced cannot have common mesh axes. Got "
                             f"varying={varying} and unreduced={unreduced}")
        if varying & reduced:
            raise ValueError("varying and reduced cannot have common mesh axes. Got "
                             f"varying={varying} and reduced={reduced}")
        key = (varying, unreduced, reduced)
        obj = cls._interned.get(key)
        if obj is None:
            obj = object.__new__(cls)
            object.__setattr__(obj, "varying", varying)
            object.__setattr__(obj, "unreduced", unreduced)
            object.__setattr__(obj, "reduced", reduced)
            cls._interned[key] = obj
        return obj

    def __setattr__(self, name, value):
        raise AttributeError(f"ManualAxisType is immutable (cannot set {name!r})")

    def __reduce__(self):
        return _manual_axis_type, (self.varying, self.unreduced, self.reduced)

    def __repr__(self):
        return (f"ManualAxisType(varying={self.varying}, unreduced={self.unreduced}, "
                f"reduced={self.reduced})")


def _manual_axis_type(varying, unreduced, reduced):
    return ManualAxisType(varying=varying, unreduced=unreduced, reduced=reduced)

_REDUCTIONS = frozenset({"psum", "pmax", "pmin"})


def _names(params) -> tuple:
    names = params.get("axis_name", params.get("axes", ()))
    return tuple(names) if isinstance(names, (tuple, list)) else (names,)


def _closed_parts(j):
    """(jaxpr, consts) of a Jaxpr or ClosedJaxpr."""
    if isinstance(j, core.ClosedJaxpr):
        return j.jaxpr, j.consts
    return j, ()


# The mesh's axis order while `check_out_vma` runs, for printing types as JAX does.
_axis_order: tuple = ()


def _vma_type(aval, vma) -> str:
    """`float32[2]{V:x}`: the aval and its varying manual axes, as JAX prints them."""
    axes = [a for a in _axis_order if a in vma] + sorted(set(vma) - set(_axis_order), key=str)
    text = aval.str_short(short_dtypes=False)
    if not axes:
        return text
    return text + "{V:" + (str(axes[0]) if len(axes) == 1 else f"({','.join(map(str, axes))})") + "}"


def _pcast_hint(missing) -> str:
    axes = tuple(a for a in _axis_order if a in missing)
    return f"`jax.lax.pcast(..., {axes!r}, to='varying')`"


def _check_loop_carry(api: str, avals, carry_in, carry_out) -> None:
    """TypeError (JAX's) unless every carry leaves the body with the vma it entered with."""
    diffs = [(i, a, m_in, m_out) for i, (a, m_in, m_out) in
             enumerate(zip(avals, carry_in, carry_out)) if m_in != m_out]
    if not diffs:
        return
    lines = []
    for i, aval, m_in, m_out in diffs:
        what = f"the input carry component [{i}]" if len(avals) > 1 else "the input carry"
        line = (f"{what[0].upper()}{what[1:]} has type {_vma_type(aval, m_in)} but the "
                f"corresponding output carry component has type {_vma_type(aval, m_out)}, so "
                "the manual axis types do not match.")
        if m_out - m_in:
            line += (f"\n\nThis might be fixed by applying {_pcast_hint(m_out - m_in)}, to the "
                     f"initial carry value corresponding to {what}.")
        lines.append(line)
    raise TypeError(f"{api} body function carry input and carry output must have equal types, "
                    "but they differ:\n\n" + "\n\n".join(lines) + "\n\nRevise the function so "
                    "that all output types match the corresponding input types.")


def _check_branches(avals, branch_outs) -> None:
    """TypeError (JAX's) unless every branch of a cond/switch gives each output the same vma."""
    two = len(branch_outs) == 2
    for i, aval in enumerate(avals):
        first = branch_outs[0][i]
        for b, outs in enumerate(branch_outs[1:], 1):
            if outs[i] == first:
                continue
            if two:  # cond(pred, true_fun, false_fun): branches are (false_fun, true_fun)
                api, (n1, m1), (n2, m2) = "cond", ("true_fun", outs[i]), ("false_fun", first)
            else:
                api, (n1, m1), (n2, m2) = "switch", ("branch 0", first), (f"branch {b}", outs[i])
            where = f" at index {i}" if len(avals) > 1 else ""
            raise TypeError(
                f"{api} branches must have equal output types but they differ.\n\nThe output "
                f"of {n1}{where} has type {_vma_type(aval, m1)} but the corresponding output of "
                f"{n2} has type {_vma_type(aval, m2)}, so the manual axis types do not match."
                "\n\nRevise the branches so that all output types match (`jax.lax.pcast(..., "
                "to='varying')` makes a value vary over more axes).")


def jaxpr_vma(jaxpr, in_vma, manual: frozenset) -> list:
    """The vma of each output of `jaxpr` (a Jaxpr or ClosedJaxpr) given its inputs' vmas."""
    jaxpr, _ = _closed_parts(jaxpr)
    env: dict = {}
    for v in jaxpr.constvars:
        env[v] = frozenset()
    for v, m in zip(jaxpr.invars, in_vma):
        env[v] = frozenset(m)

    def read(a):
        return env.get(a, frozenset()) if isinstance(a, core.Var) else frozenset()

    for eqn in jaxpr.eqns:
        ins = [read(a) for a in eqn.invars]
        outs = _eqn_vma(eqn, ins, manual)
        for v, m in zip(eqn.outvars, outs):
            env[v] = m
    return [read(a) for a in jaxpr.outvars]


def _union(ms) -> frozenset:
    out = frozenset()
    for m in ms:
        out |= m
    return out


def _eqn_vma(eqn, ins, manual) -> list:
    name, params = eqn.primitive.name, eqn.params
    n_out = len(eqn.outvars)
    if name in _REDUCTIONS:
        if params.get("axis_index_groups") is not None:
            # within groups: the results differ from group to group
            return [ins[0] | (frozenset(_names(params)) & manual)]
        return [ins[0] - frozenset(_names(params))]
    if name == "cond":
        # As in JAX, a varying predicate (of cond or while) does not make the outputs vary.
        branch_outs = [jaxpr_vma(br, ins[1:], manual) for br in params["branches"]]
        _check_branches([v.aval for v in eqn.outvars], branch_outs)
        return branch_outs[0]
    if name == "scan":
        return _scan_vma(params, ins, manual)
    if name == "while":
        return _while_vma(params, ins, manual)
    if name == "shard_map":
        return _shard_map_vma(params, ins, manual)
    if "axis_name" in params or name == "pvary":
        added = frozenset(_names(params)) & manual
        return [_union(ins) | added] * n_out
    subs = [j for j in params.values() if isinstance(j, (core.Jaxpr, core.ClosedJaxpr))]
    if len(subs) == 1:
        sub, _ = _closed_parts(subs[0])
        if len(sub.invars) == len(ins) and len(sub.outvars) == n_out:
            return jaxpr_vma(sub, ins, manual)
    # Anything else: every output may vary wherever an input does, or wherever a collective
    # inside a nested jaxpr makes a value vary.
    out = _union(ins)
    for j in _nested_jaxprs(params):
        sub, _ = _closed_parts(j)
        out |= _union(jaxpr_vma(sub, [out] * len(sub.invars), manual))
    return [out] * n_out


def _nested_jaxprs(params):
    for v in params.values():
        for j in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(j, (core.Jaxpr, core.ClosedJaxpr)):
                yield j


def _scan_vma(params, ins, manual) -> list:
    nc, nk = params["num_consts"], params["num_carry"]
    consts, carry, xs = ins[:nc], list(ins[nc:nc + nk]), ins[nc + nk:]
    outs = jaxpr_vma(params["jaxpr"], [*consts, *carry, *xs], manual)
    body, _ = _closed_parts(params["jaxpr"])
    _check_loop_carry("scan", [v.aval for v in body.invars[nc:nc + nk]], carry, outs[:nk])
    return [*carry, *outs[nk:]]


def _while_vma(params, ins, manual) -> list:
    nb = params["body_nconsts"]
    start = params["cond_nconsts"]
    bconsts, carry = ins[start:start + nb], list(ins[start + nb:])
    outs = jaxpr_vma(params["body_jaxpr"], [*bconsts, *carry], manual)
    body, _ = _closed_parts(params["body_jaxpr"])
    _check_loop_carry("while_loop", [v.aval for v in body.invars[nb:]], carry, outs)
    return carry


def _shard_map_vma(params, ins, manual) -> list:
    """A nested shard_map: its inputs also vary over their in_specs' axes inside, its outputs
    over what the inner body infers."""
    inner_manual = manual | frozenset(params["manual_axes"])
    inner_ins = [m | frozenset(s.used_axes()) for m, s in zip(ins, params["in_specs"])]
    outs = jaxpr_vma(params["jaxpr"], inner_ins, inner_manual)
    return [o & manual for o in outs]


# ---------------------------------------------------------------------------------------------
# The error

def _spec_text(spec) -> str:
    return f"P{tuple(spec)!r}"


def _axes_text(mesh, names) -> str:
    return ",".join(str(a) for a in mesh.axis_names if a in names)


def check_out_vma(fun, mesh, manual, in_specs, out_specs, out_paths, closed):
    """Raise JAX's ValueError when an output of the body `closed` may vary over a manual mesh
    axis its out_spec leaves out."""
    global _axis_order
    manual = frozenset(manual)
    in_vma = [frozenset(s.used_axes()) & manual for s in in_specs]
    _axis_order = tuple(mesh.axis_names)
    try:
        out_vma = jaxpr_vma(closed, in_vma, manual)
    finally:
        _axis_order = ()
    msgs = []
    for spec, path, vma in zip(out_specs, out_paths, out_vma):
        used = set(spec.used_axes())
        unmentioned = [a for a in mesh.axis_names if a not in used]
        if not any(a in vma for a in unmentioned if a in manual):
            continue
        if len(unmentioned) > 1:
            diff = _axes_text(mesh, [a for a in unmentioned if a in vma])
            msgs.append(
                f"* out_specs{path} is {_spec_text(spec)} which implies that the corresponding "
                f"output value is only varying across mesh axes {{{_axes_text(mesh, used)}}} "
                f"and not {{{diff}}}, but it was inferred to be possibly varying over "
                f"{{{_axes_text(mesh, vma)}}}")
        else:
            msgs.append(
                f"* out_specs{path} is {_spec_text(spec)} which implies that the corresponding "
                f"output value is replicated across mesh axis '{unmentioned[0]}', but could "
                f"not infer replication over any axes")
    if not msgs:
        return
    if len(msgs) == 1:
        msgs = [msgs[0][2:]]
    fun_name = getattr(fun, "__name__", str(fun))
    raise ValueError(
        f"shard_map applied to the function '{fun_name}' was given out_specs which require "
        f"replication which can't be statically inferred given the mesh:\n\n"
        f"The mesh given has shape {tuple(mesh.shape.values())} with corresponding axis names "
        f"{tuple(mesh.axis_names)}.\n\n" + "\n\n".join(msgs) + "\n\n"
        "Check if these output values are meant to be replicated over those mesh axes. If not, "
        "consider revising the corresponding out_specs entries. If so, consider disabling the "
        "check by passing the check_vma=False argument to `fluxion.shard_map`.")
