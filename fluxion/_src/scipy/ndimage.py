"""`fluxion.scipy.ndimage.map_coordinates`: interpolate an array at given coordinates."""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax


def _mirror(index, size):
    period = size - 1  # a triangular wave of half-period size - 1
    return jnp.abs((index + period) % (2 * period) - period)


def _reflect(index, size):
    return jnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_BOUNDARY = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round_half_away(x):
    return x if jnp.issubdtype(x.dtype, np.integer) else lax.round(x)


def _nearest(coordinate):
    return [(_round_half_away(coordinate).astype(np.int32), coordinate.dtype.type(1))]


def _linear(coordinate):
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


def map_coordinates(input, coordinates, order: int, mode: str = "constant", cval=0.0):
    """Values of `input` at `coordinates` (one array per axis), by interpolation.

    Parameters
    ----------
    order : 0 (nearest) or 1 (linear).
    mode : 'constant', 'nearest', 'mirror', 'wrap' or 'reflect' (JAX's meanings: 'wrap' is
        SciPy's 'grid-wrap', 'constant' SciPy's 'grid-constant').
    cval : the value outside the array with mode='constant'.
    """
    values = jnp.asarray(input)
    coordinates = [jnp.asarray(c) for c in coordinates]
    cval = jnp.asarray(cval, values.dtype)
    if len(coordinates) != values.ndim:
        raise ValueError(f"coordinates must be a sequence of length input.ndim, but "
                         f"{len(coordinates)} != {values.ndim}")
    if mode not in _BOUNDARY:
        raise NotImplementedError(f"fluxion.scipy.ndimage.map_coordinates does not yet support "
                                  f"mode {mode}; the modes are {set(_BOUNDARY)}.")
    if order not in (0, 1):
        raise NotImplementedError("fluxion.scipy.ndimage.map_coordinates currently requires "
                                  "order<=1")
    nodes = _nearest if order == 0 else _linear
    per_axis = []
    for coordinate, size in zip(coordinates, values.shape):
        per_axis.append([(_BOUNDARY[mode](index, size),
                          ((0 <= index) & (index < size)) if mode == "constant" else None,
                          weight) for index, weight in nodes(coordinate)])
    terms = []
    for corner in itertools.product(*per_axis):
        indices, valid, weights = zip(*corner)
        sample = values[indices]
        if mode == "constant":
            sample = jnp.where(functools.reduce(operator.and_, valid), sample, cval)
        terms.append(functools.reduce(operator.mul, weights) * sample)
    result = functools.reduce(operator.add, terms)
    if jnp.issubdtype(values.dtype, np.integer):
        result = _round_half_away(result)
    return result.astype(values.dtype)
