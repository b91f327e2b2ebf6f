"""Batching rules for primitives (`jax.interpreters.batching`).

A rule is ``rule(args, dims, **params) -> (out, out_dim)``, each dim an int or ``not_mapped``.
``defvectorized`` serves unary elementwise primitives, ``defbroadcasting`` n-ary ones.
"""
from fluxion._src.batching import (not_mapped, primitive_batchers, defvectorized,  # noqa: F401
                                   defbroadcasting, moveaxis, bdim_at_front, matchaxis)
