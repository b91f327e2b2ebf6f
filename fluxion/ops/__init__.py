"""Segment reductions (`jax.ops`)."""
from fluxion._src.ops.segment import (segment_sum, segment_prod, segment_max,  # noqa: F401
                                      segment_min)
