"""Compiling and running jaxprs that take Refs: the compiled program is the discharged one,
taking the Refs' values and returning their new values, which are stored back after the call.

Registered as `dispatch.discharge_hook`, so `jit`, eager control flow on Refs and AOT
lowering (`jit(f).lower(...)`) all go through it.
"""
from __future__ import annotations

from fluxion._src import core, dispatch
from fluxion._src.caches import BoundedDict
from fluxion._src.config import config
from fluxion._src.core import ClosedJaxpr, Jaxpr, JaxprEqn, Var
from fluxion._src.state.discharge import discharge_state, has_state
from fluxion._src.state.types import Ref, is_ref_aval


class StatefulPlan:
    """How to run a closed jaxpr with Refs among its consts and inputs."""

    def __init__(self, closed: ClosedJaxpr):
        jaxpr = closed.jaxpr
        ref_consts = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if is_ref_aval(v.aval)]
        plain = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if not is_ref_aval(v.aval)]
        for _, c in ref_consts:
            if type(c) is not Ref:
                raise TypeError(f"a Ref constant of a compiled function must be a Ref, got {c!r}")
        self.ref_consts = [c for _, c in ref_consts]
        self.ref_in_positions = [i for i, v in enumerate(jaxpr.invars) if is_ref_aval(v.aval)]
        self.n_out = len(jaxpr.outvars)
        self.in_avals = closed.in_avals
        self.out_avals = closed.out_avals
        lifted = Jaxpr([v for v, _ in plain], [v for v, _ in ref_consts] + jaxpr.invars,
                       jaxpr.outvars, jaxpr.eqns, jaxpr.effects, jaxpr.debug_info)
        mask = [True] * len(ref_consts) + [is_ref_aval(v.aval) for v in jaxpr.invars]
        self.discharged = discharge_state(lifted, [c for _, c in plain], mask)
        if has_state(self.discharged.jaxpr):
            names = sorted({e.primitive.name for e in self.discharged.jaxpr.eqns
                            if any(has_state(sub) for sub in core.subjaxprs(e.params))})
            raise NotImplementedError(
                f"Refs could not be removed from the program: they are used inside {names}, "
                "which have no state discharge rule.")

    def donated(self, donated_invars):
        if donated_invars is None:
            return None
        return (False,) * len(self.ref_consts) + tuple(donated_invars)


class StatefulFunction:
    """A compiled discharged program called like the original: Refs in, new values stored."""

    __slots__ = ("compiled", "ref_consts", "ref_in_positions", "n_out", "in_avals", "out_avals")

    def __init__(self, compiled, plan: StatefulPlan):
        self.compiled = compiled
        self.ref_consts = plan.ref_consts
        self.ref_in_positions = plan.ref_in_positions
        self.n_out = plan.n_out
        self.in_avals = plan.in_avals
        self.out_avals = plan.out_avals

    @property
    def executable(self):
        return self.compiled.executable

    @property
    def const_bufs(self):
        return self.compiled.const_bufs

    def __call__(self, args):
        refs = list(self.ref_consts)
        vals = [r._read_value() for r in refs]
        for a in args:
            if type(a) is Ref:
                refs.append(a)
                vals.append(a._read_value())
            else:
                vals.append(a)
        outs = self.compiled(vals)
        for r, v in zip(refs, outs[self.n_out:]):
            r._store(v)
        return outs[:self.n_out]

    def array_call(self, single_output: bool):
        if single_output:
            return lambda args: self(args)[0]
        return self


def _plan(closed: ClosedJaxpr):
    if not has_state(closed.jaxpr):
        return None
    return StatefulPlan(closed)


def _compile(closed, name, donated_invars, text, compiler):
    plan = _plan(closed)
    if plan is None:
        return None
    compiled = dispatch.compile_closed_jaxpr(plan.discharged, name=name,
                                             donated_invars=plan.donated(donated_invars),
                                             text=text, compiler=compiler)
    return StatefulFunction(compiled, plan)


def _lower(closed, name, platform, donated_invars):
    plan = _plan(closed)
    if plan is None:
        return None
    return dispatch.lower_closed_jaxpr(plan.discharged, name, platform,
                                       plan.donated(donated_invars))




# ---------------------------------------------------------------------------------------------
# Eager primitives applied to Refs (control flow whose body reads or writes a Ref). One Ref
# passed twice (to a while loop's cond and body) is one input of the compiled program.

_eager_cache: dict = BoundedDict(1024)


def _apply(prim, args, params):
    distinct: dict[int, int] = {}
    unique_args, positions = [], []
    for a in args:
        if type(a) is Ref:
            if id(a) not in distinct:
                distinct[id(a)] = len(unique_args)
                unique_args.append(a)
            positions.append(distinct[id(a)])
        else:
            positions.append(len(unique_args))
            unique_args.append(a)
    avals = tuple(core.get_aval(a) for a in unique_args)
    structural = core.structural_params_key(params)
    try:
        key = (prim, tuple(params.items()) if structural is None else structural,
               config.trace_key, avals, tuple(positions))
        compiled = _eager_cache.get(key)
    except TypeError:
        key, compiled = None, None
    if compiled is None:
        invars = [Var(a) for a in avals]
        eqn_in = [invars[p] for p in positions]
        out_avals = prim.abstract_eval_avals([v.aval for v in eqn_in], params)
        outvars = [Var(a) for a in out_avals]
        jaxpr = Jaxpr([], invars, outvars, [JaxprEqn(eqn_in, outvars, prim, params)])
        compiled = dispatch.compile_closed_jaxpr(ClosedJaxpr(jaxpr, []), name=prim.name)
        if key is not None:
            _eager_cache[key] = compiled
    outs = compiled(unique_args)
    return outs if prim.multiple_results else outs[0]


dispatch.discharge_hooks = (_compile, _lower, _apply)
