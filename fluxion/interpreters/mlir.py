"""Lowering rules for primitives (`jax.interpreters.mlir`'s names).

A rule is ``rule(ctx, *operands, **params)``: the operands are StableHLO values (each with an
``.aval``), the params are the primitive's, and it returns one value or a list of them. ``ctx``
(a `LoweringRuleContext`) knows the equation's ``avals_in``, ``avals_out`` and ``platform``
and emits ops: ``ctx.constant``, ``ctx.broadcast``, ``ctx.add``, ``ctx.max``, ``ctx.select``,
``ctx.compare``, ``ctx.dot_general``, ``ctx.custom_call``, ... or any op with ``ctx.op1``.
"""
from fluxion._src.compiler.lowering import (LoweringRuleContext, lower_fun,  # noqa: F401
                                            register_lowering)

__all__ = ["LoweringRuleContext", "lower_fun", "register_lowering"]
