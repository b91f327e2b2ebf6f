"""A stateful PRNG (`jax.experimental.random`): a key and a counter in a `Ref`, so that each
draw implicitly advances the state, also inside `jit`."""
from __future__ import annotations

import dataclasses
import operator

import numpy as np

from fluxion._src import core, tree_util
from fluxion._src.state import api as ref
from fluxion._src.state import types as state_types


def _random():
    from fluxion import random
    return random


def _canonicalize_size(size, *args) -> tuple:
    if size is None:
        return np.broadcast_shapes(*(np.shape(a) for a in args))
    if isinstance(size, (int, np.integer)):
        return (operator.index(size),)
    return tuple(map(operator.index, size))


def _is_key(x) -> bool:
    from fluxion import dtypes
    dt = getattr(x, "dtype", None)
    return dt is not None and dtypes.issubdtype(dt, dtypes.prng_key)


def _is_ref(x) -> bool:
    return isinstance(x, state_types.Ref) or isinstance(getattr(x, "aval", None),
                                                         state_types.AbstractRef)


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, slots=True)
class StatefulPRNG:
    """Stateful random generator, made by `stateful_rng`: a typed PRNG key (`_base_key`)
    and a scalar integer `Ref` counting the draws (`_counter`)."""

    _base_key: object
    _counter: object

    def __post_init__(self):
        if not isinstance(self._base_key, (np.ndarray, core.Tracer)) and \
                not hasattr(self._base_key, "aval"):
            return  # a placeholder leaf (pytree machinery unflattening a structure)
        if not _is_key(self._base_key):
            raise ValueError(f"Expected base_key to be a typed PRNG key; got {self._base_key}")
        if not _is_ref(self._counter):
            raise ValueError(
                f"Expected counter to be a scalar integer ref; got {self._counter}")

    def key(self, shape=()):
        """A new independent PRNG key (or an array of `shape` keys); advances the state."""
        if self._base_key.shape:
            raise ValueError("cannot operate on split stateful generator")
        random = _random()
        key = random.fold_in(self._base_key, self._counter[...])
        ref.addupdate(self._counter, ..., 1)
        shape = _canonicalize_size(shape)
        return random.split(key, shape) if shape else key

    def random(self, size=None, dtype=float):
        """Random floats in the half-open interval [0.0, 1.0)."""
        return _random().uniform(self.key(), shape=_canonicalize_size(size), dtype=dtype)

    def uniform(self, low=0, high=1, size=None, *, dtype=float):
        """Uniformly distributed values in [low, high)."""
        return _random().uniform(self.key(), _canonicalize_size(size, low, high),
                                 minval=low, maxval=high, dtype=dtype)

    def normal(self, loc=0, scale=1, size=None, *, dtype=float):
        """Normally distributed values with mean `loc` and standard deviation `scale`."""
        import fluxion.numpy as jnp
        norm = _random().normal(self.key(), _canonicalize_size(size, loc, scale), dtype)
        return (jnp.asarray(loc) + jnp.asarray(scale) * norm).astype(dtype)

    def integers(self, low, high=None, size=None, *, dtype=int):
        """Integers in [low, high) (in [0, low) when `high` is None)."""
        if high is None:
            low, high = 0, low
        return _random().randint(self.key(), _canonicalize_size(size, low, high),
                                 minval=low, maxval=high, dtype=dtype)

    def split(self, num) -> "StatefulPRNG":
        """One generator holding `num` (an int or shape) independent ones, for `vmap`."""
        import fluxion.numpy as jnp
        return StatefulPRNG(self.key(num), ref.new_ref(jnp.zeros(num, dtype=int)))

    def spawn(self, n_children: int) -> list:
        """A list of `n_children` independent generators."""
        return [self.__class__(k, ref.new_ref(0)) for k in self.key(n_children)]


def stateful_rng(seed=None, *, impl=None) -> StatefulPRNG:
    """A stateful random generator (like `numpy.random.default_rng`) seeded with `seed`;
    without a seed (only outside transformations) NumPy's entropy seeds it."""
    if seed is None:
        if core._trace_state.trace is not core.eval_trace:
            raise TypeError("When used within transformed code, "
                            "jax.experimental.random.stateful_rng() requires an explicit "
                            "seed to be set.")
        seed = np.int64(np.random.SeedSequence().entropy & np.iinfo(np.int64).max)
    return StatefulPRNG(_random().key(seed, impl=impl), ref.new_ref(0))
