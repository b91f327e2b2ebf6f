"""Interfaces for extending fluxion with new primitives (`jax.extend`'s names).

`fluxion.extend.core.Primitive` defines a primitive; `fluxion.interpreters.mlir` lowers it.
"""
from fluxion.extend import backend, core  # noqa: F401
