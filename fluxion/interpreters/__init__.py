"""Hooks for giving new primitives their rules, under JAX's module names.

`fluxion.interpreters.mlir` registers how a primitive lowers to StableHLO (see
docs/custom_primitives.md).
"""
from fluxion.interpreters import mlir  # noqa: F401
