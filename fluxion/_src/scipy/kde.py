"""`fluxion.scipy.stats.gaussian_kde`: kernel density estimation with Gaussian kernels.

The estimate is sum_i w_i N(x; x_i, C) with C the data covariance times a bandwidth factor
squared. The object is a pytree (its arrays are the leaves), so it passes through jit and vmap.
"""
from __future__ import annotations

import math

import numpy as np

import fluxion.numpy as jnp
from fluxion import random
from fluxion._src import dtypes
from fluxion._src.numpy.util import check_arraylike, promote_dtypes_inexact
from fluxion._src.scipy import linalg
from fluxion._src.scipy.special import logsumexp, ndtr
from fluxion._src.tree_util import register_pytree_node_class

_FIELDS = ("neff", "dataset", "weights", "covariance", "inv_cov")


def _reject_complex(x, what: str):
    if dtypes.issubdtype(jnp.asarray(x).dtype, np.complexfloating):
        raise NotImplementedError(f"gaussian_kde does not support complex {what}")


@register_pytree_node_class
class gaussian_kde:
    """Gaussian kernel density estimate of `dataset` (shape (d, n), or (n,) for d = 1).

    Parameters
    ----------
    dataset : array_like
    bw_method : "scott", "silverman", a scalar or a callable of the kde, optional
        The bandwidth factor (default "scott": neff ** (-1 / (d + 4))).
    weights : array_like, optional
        Weights of the points (normalized to sum to one).
    """
    __slots__ = _FIELDS

    def __init__(self, dataset, bw_method=None, weights=None):
        check_arraylike("gaussian_kde", dataset)
        _reject_complex(dataset, "data")
        dataset = jnp.atleast_2d(dataset)
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is None:
            (dataset,) = promote_dtypes_inexact(dataset)
            weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
        else:
            check_arraylike("gaussian_kde", weights)
            dataset, weights = promote_dtypes_inexact(dataset, weights)
            weights = jnp.atleast_1d(weights)
            if weights.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if weights.shape[0] != n:
                raise ValueError("`weights` input should be of length n")
            weights = weights / jnp.sum(weights)
        self._set("dataset", dataset)
        self._set("weights", weights)
        neff = self._set("neff", 1 / jnp.sum(weights ** 2))
        if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
            factor = neff ** (-1.0 / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = (neff * (d + 2) / 4.0) ** (-1.0 / (d + 4))
        elif jnp.isscalar(bw_method) and not isinstance(bw_method, str):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a "
                             "callable.")
        data_cov = jnp.atleast_2d(jnp.cov(dataset, rowvar=True, bias=False, aweights=weights))
        self._set("covariance", data_cov * factor ** 2)
        self._set("inv_cov", jnp.linalg.inv(data_cov) / factor ** 2)

    def _set(self, name, value):
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r} of gaussian_kde")

    def tree_flatten(self):
        return tuple(getattr(self, f) for f in _FIELDS), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        del aux_data
        kde = cls.__new__(cls)
        for name, value in zip(_FIELDS, children):
            kde._set(name, value)
        return kde

    @property
    def d(self) -> int:
        """The number of dimensions."""
        return self.dataset.shape[0]

    @property
    def n(self) -> int:
        """The number of data points."""
        return self.dataset.shape[1]

    def _points(self, points):
        check_arraylike("evaluate", points)
        _reject_complex(points, "coordinates")
        points = jnp.atleast_2d(points)
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return jnp.reshape(points, (self.d, 1))
            raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return points

    def _log_kernels(self, points):
        """log N(point_j; x_i, C) for every point j (rows) and data point i (columns)."""
        data, points, inv_cov = promote_dtypes_inexact(self.dataset, self._points(points),
                                                       self.inv_cov)
        whiten = linalg.cholesky(inv_cov, lower=True)  # inv_cov = W W^T
        diff = (points.T[:, None, :] - data.T[None, :, :]) @ whiten
        log_norm = jnp.sum(jnp.log(jnp.diagonal(whiten))) - 0.5 * self.d * math.log(2 * math.pi)
        return log_norm - 0.5 * jnp.sum(diff * diff, axis=-1)

    def evaluate(self, points):
        """The estimated density at `points` (shape (d, m))."""
        return jnp.sum(self.weights * jnp.exp(self._log_kernels(points)), axis=-1)

    __call__ = pdf = evaluate

    def logpdf(self, x):
        """The log of the estimated density at `x`, computed without underflow."""
        return logsumexp(self._log_kernels(x) + jnp.log(self.weights), axis=-1)

    def _convolved_mass(self, cov, mean_columns, target, weights):
        """sum_i w_i N(m; x_i, C + cov) for every column m of mean_columns."""
        factor = linalg.cho_factor(self.covariance + cov)
        norm = 1.0 / (math.sqrt(2 * math.pi) ** self.d * jnp.prod(jnp.diag(factor[0])))
        diff = target[:, :, None] - mean_columns[:, None, :]  # (d, n, m)
        flat = jnp.reshape(diff, (self.d, -1))
        solved = jnp.reshape(linalg.cho_solve(factor, flat), diff.shape)
        quad = 0.5 * jnp.sum(diff * solved, axis=0)
        return norm * jnp.sum(jnp.exp(-quad) * weights[:, None], axis=0)

    def integrate_gaussian(self, mean, cov):
        """The integral of the estimate times the Gaussian N(mean, cov)."""
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        return self._convolved_mass(cov, mean[:, None], self.dataset, self.weights)[0]

    def integrate_box_1d(self, low, high):
        """The estimate's mass between scalars `low` and `high` (one-dimensional data only)."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.sqrt(self.covariance[0, 0])
        data = self.dataset[0]
        return jnp.sum(self.weights * (ndtr((high - data) / sigma) - ndtr((low - data) / sigma)))

    def integrate_kde(self, other):
        """The integral of the product of this estimate and `other`."""
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        small, large = (self, other) if self.n < other.n else (other, self)
        values = self._convolved_mass(other.covariance, small.dataset, large.dataset,
                                      large.weights)
        return jnp.sum(values * small.weights)

    def resample(self, key, shape=()):
        """Draws from the estimate, shape (d, *shape): a data point picked by weight plus
        Gaussian noise of the kernel's covariance (the same draws as JAX for a key)."""
        index_key, noise_key = random.split(key)
        index = random.choice(index_key, self.n, shape=shape, p=self.weights)
        noise = random.multivariate_normal(noise_key, jnp.zeros(self.d, self.covariance.dtype),
                                           self.covariance, shape=shape,
                                           dtype=self.dataset.dtype)
        return self.dataset[:, index] + jnp.moveaxis(noise, -1, 0)

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        """Not supported (as in JAX): use `integrate_box_1d`."""
        raise NotImplementedError("only 1D box integrations are supported; use "
                                  "`integrate_box_1d`")

    def set_bandwidth(self, bw_method=None):
        """Not supported (as in JAX): the bandwidth is fixed at construction."""
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")
