"""Debugging from inside transformed code (`jax.debug`)."""
from fluxion._src.callbacks import debug_callback as callback  # noqa: F401
from fluxion._src.debugging import print, breakpoint, log  # noqa: F401  (shadow the builtins, as jax.debug does)
from fluxion._src.sharding_viz import (visualize_array_sharding, visualize_sharding,  # noqa: F401
                                       inspect_array_sharding)
from fluxion._src.effects import DebugEffect, OrderedDebugEffect  # noqa: E402,F401
