"""Effects: what a primitive does besides computing its outputs.

A primitive declares its effects with `declare_effects(prim, rule)` where `rule(params)` gives a
frozenset of `Effect`s. A jaxpr's effects are those of its equations, nested jaxprs included.
An effectful equation is never removed as dead code; lowering threads a token through the
ordered ones (see `callbacks.py`), so they happen in program order.
"""
from __future__ import annotations

from typing import Callable

from fluxion._src import core


class Effect:
    """Base class of effects. `ordered` effects keep program order with each other."""

    ordered = False

    def __repr__(self):
        return type(self).__name__


class IOEffect(Effect):
    pass


class OrderedIOEffect(Effect):
    ordered = True


class DebugEffect(Effect):
    """The effect of `fluxion.debug.callback` / `print` / `breakpoint`: never dead code, but
    free to run in any order with other debug callbacks (`jax.debug.DebugEffect`)."""


class OrderedDebugEffect(Effect):
    """The effect of a debug callback with `ordered=True`: it keeps program order with the
    other ordered effects (`jax.debug.OrderedDebugEffect`)."""

    ordered = True


io_effect = IOEffect()
ordered_io_effect = OrderedIOEffect()
debug_effect = DebugEffect()
ordered_debug_effect = OrderedDebugEffect()

no_effects: frozenset = frozenset()

# primitive -> rule(params) -> frozenset[Effect]
_effect_rules: dict[core.Primitive, Callable[[dict], frozenset]] = {}


def declare_effects(prim: core.Primitive, rule: Callable[[dict], frozenset],
                    always: bool = True) -> None:
    """Declare that `prim` has the effects `rule(params)`; such equations are never dead code.

    With `always=False` the rule may give no effects for some params (then the equation is
    an ordinary one)."""
    _effect_rules[prim] = rule
    if always:
        prim.has_side_effect = True  # what staging's dead-code elimination reads


def eqn_effects(eqn) -> frozenset:
    """The effects of one equation: the primitive's own and those of its nested jaxprs."""
    rule = _effect_rules.get(eqn.primitive)
    out = rule(eqn.params) if rule is not None else no_effects
    for sub in core.subjaxprs(eqn.params):
        inner = jaxpr_effects(sub)
        if inner:
            out = out | inner
    return out


def jaxpr_effects(jaxpr) -> frozenset:
    """All effects of a jaxpr (or ClosedJaxpr), nested jaxprs included."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    out = no_effects
    if not _effect_rules:
        return out
    for eqn in jaxpr.eqns:
        e = eqn_effects(eqn)
        if e:
            out = out | e
    return out


def has_effects(eqn) -> bool:
    """True when `eqn` must be kept though nothing reads its outputs."""
    rule = _effect_rules.get(eqn.primitive)
    if rule is not None and rule(eqn.params):
        return True
    for sub in core.subjaxprs(eqn.params):
        if jaxpr_effects(sub):
            return True
    return False


def ordered_effects(jaxpr) -> frozenset:
    return frozenset(e for e in jaxpr_effects(jaxpr) if e.ordered)
