"""`fluxion.scipy.interpolate.RegularGridInterpolator`: linear or nearest interpolation on a
rectilinear grid (each axis strictly increasing)."""
from __future__ import annotations

import itertools

import numpy as np

import fluxion.numpy as jnp
from fluxion._src.scipy.special import _inexact
from fluxion._src.tree_util import register_pytree_node


def _as_points(xi, ndim: int):
    """Query points as an array (..., ndim), from an array or a tuple of coordinate arrays."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        coords = jnp.broadcast_arrays(*[jnp.asarray(c) for c in xi])
        return jnp.stack(coords, axis=-1)
    xi = jnp.asarray(xi)
    return xi.reshape(-1, ndim) if xi.ndim == 1 else xi


def _check_grid_sizes(grid, values_shape):
    """Raise SciPy's ValueError when a grid axis and `values` disagree in length."""
    for axis, g in enumerate(grid):
        if g.ndim != 1 or g.shape[0] != values_shape[axis]:
            raise ValueError(f"there are {g.shape[0] if g.ndim else 1} points in dimension "
                             f"{axis}, but values has {values_shape[axis]} values in that "
                             "dimension")


class RegularGridInterpolator:
    """Interpolate `values` given on the grid `points` (one increasing array per axis).

    Parameters
    ----------
    method : "linear" or "nearest".
    bounds_error : must be False (errors cannot depend on values under jit).
    fill_value : the value outside the grid (NaN by default); None extrapolates.
    """

    def __init__(self, points, values, method="linear", bounds_error=False, fill_value=np.nan):
        if method not in ("linear", "nearest"):
            raise ValueError(f"method {method!r} is not defined")
        if bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT")
        values = jnp.asarray(values)
        if len(points) > values.ndim:
            raise ValueError(f"there are {len(points)} point arrays, but values has "
                             f"{values.ndim} dimensions")
        self.method, self.bounds_error = method, bounds_error
        self.values = _inexact(values)
        if fill_value is not None:
            fill_value = jnp.asarray(fill_value)
            if not jnp.can_cast(fill_value.dtype, self.values.dtype, casting="same_kind"):
                raise ValueError("fill_value must be either 'None' or of a type compatible "
                                 "with values")
        self.fill_value = fill_value
        self.grid = tuple(jnp.asarray(p) for p in points)
        _check_grid_sizes(self.grid, self.values.shape)

    def __call__(self, xi, method=None):
        method = self.method if method is None else method
        if method not in ("linear", "nearest"):
            raise ValueError(f"method {method!r} is not defined")
        ndim = len(self.grid)
        xi = _as_points(xi, ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[-1]}, "
                             f"but this RegularGridInterpolator has dimension {ndim}")
        shape = xi.shape
        xi = xi.reshape(-1, ndim)
        cells, fractions, outside = [], [], jnp.zeros(xi.shape[0], bool)
        for axis, g in enumerate(self.grid):
            x = xi[:, axis]
            # The cell of each point: searchsorted(g, x) - 1, clamped to [0, size - 2].
            cell = jnp.clip(jnp.sum(g[None, :] < x[:, None], axis=1) - 1, 0, g.shape[0] - 2)
            cells.append(cell)
            fractions.append((x - g[cell]) / (g[cell + 1] - g[cell]))
            outside = outside | (x < g[0]) | (x > g[-1])
        trailing = (slice(None),) + (None,) * (self.values.ndim - ndim)
        if method == "linear":
            result = 0.0
            for corner in itertools.product((0, 1), repeat=ndim):
                weight = 1.0
                for up, t in zip(corner, fractions):
                    weight = weight * (t if up else 1 - t)
                index = tuple(c + up for c, up in zip(cells, corner))
                result = result + self.values[index] * weight[trailing]
        else:
            result = self.values[tuple(jnp.where(t <= 0.5, c, c + 1)
                                       for c, t in zip(cells, fractions))]
            # A NaN coordinate has no nearest grid point (SciPy answers NaN).
            nan_point = jnp.any(jnp.isnan(xi), axis=1)
            result = jnp.where(nan_point[trailing], np.nan, result)
        if self.fill_value is not None:
            result = jnp.where(outside[trailing], self.fill_value, result)
        return result.reshape(shape[:-1] + self.values.shape[ndim:])


register_pytree_node(
    RegularGridInterpolator,
    lambda r: ((r.grid, r.values, r.fill_value), (r.method, r.bounds_error)),
    lambda aux, children: RegularGridInterpolator(children[0], children[1], aux[0], aux[1],
                                                  children[2]))
