"""Hooks for giving new primitives their rules, under JAX's module names.

`fluxion.interpreters.mlir` registers how a primitive lowers to StableHLO (see
docs/custom_primitives.md); `fluxion.interpreters.partial_eval` holds dead-code elimination
(`dce_jaxpr`) and its per-primitive rules (`dce_rules`).
"""
from fluxion.interpreters import mlir  # noqa: F401
