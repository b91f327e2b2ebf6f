"""The public functions of Refs (`fluxion.new_ref`, `fluxion.ref.*`) and `run_state`."""
from __future__ import annotations

from fluxion._src.state import stateful_call, transform_rules  # noqa: F401  (registrations)
from fluxion._src.state.run_state import run_state, run_state_p
from fluxion._src.state.discharge import discharge_state, eval_discharged
from fluxion._src.state.indexing import Slice, ds
from fluxion._src.state.primitives import (addupdate, empty_ref, free_ref, freeze, get,
                                           new_ref, set, swap)
from fluxion._src.state.types import AbstractRef, Ref

__all__ = ["AbstractRef", "Ref", "Slice", "addupdate", "discharge_state", "ds", "empty_ref",
           "free_ref", "freeze", "get", "new_ref", "run_state", "run_state_p", "set", "swap"]
