"""Mutable references (``jax.ref``): `new_ref`, reading and writing them, `freeze`."""
from fluxion._src.state.api import (  # noqa: F401
    AbstractRef, Ref, addupdate, empty_ref, free_ref, freeze, get, new_ref, set, swap)
