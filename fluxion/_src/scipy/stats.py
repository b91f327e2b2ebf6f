"""`fluxion.scipy.stats`: densities, mass functions and CDFs of common distributions.

Location-scale families share one helper: a standardized log density `f(z)` becomes
`logpdf(x, loc, scale) = f((x - loc) / scale) - log(scale)`. Outside a support the log
density is -inf, as in SciPy.
"""
from __future__ import annotations

import math
import types
from typing import Any, NamedTuple

import numpy as np

import fluxion.numpy as jnp
from fluxion._src.numpy import util as _npu
from fluxion import lax
from fluxion._src import dtypes
from fluxion._src.nn_activations import log1mexp
from fluxion._src.numpy.eager import compile_eagerly
from fluxion._src.numpy.util import canonicalize_axis, check_arraylike
from fluxion._src.scipy import special as sp
from fluxion._src.scipy.special import _inexact


def _standardize(x, loc, scale):
    x, loc, scale = _inexact(x, loc, scale)
    return (x - loc) / scale, scale


_DISTRIBUTIONS: list[types.ModuleType] = []


def _namespace(name, **functions):
    """A distribution's functions as a module (in JAX each distribution is a submodule of
    `jax.scipy.stats`; fluxion/scipy/stats.py names these and makes them importable)."""
    module = types.ModuleType(name, f"The {name} distribution.")
    vars(module).update(functions)
    _DISTRIBUTIONS.append(module)
    return module


def _location_scale(name, log_density, cdf=None, log_cdf=None, sf=None, log_sf=None,
                    ppf=None, isf=None):
    """The functions of a location-scale family from those of its standard member."""
    functions = {}

    def logpdf(x, loc=0, scale=1):
        z, scale = _standardize(x, loc, scale)
        return log_density(z) - jnp.log(scale)
    functions["logpdf"] = logpdf
    functions["pdf"] = lambda x, loc=0, scale=1: jnp.exp(logpdf(x, loc, scale))
    for key, standard in [("cdf", cdf), ("logcdf", log_cdf), ("sf", sf), ("logsf", log_sf)]:
        if standard is not None:
            functions[key] = (lambda f: lambda x, loc=0, scale=1:
                              f(_standardize(x, loc, scale)[0]))(standard)
    for key, standard in [("ppf", ppf), ("isf", isf)]:
        if standard is not None:
            def quantile(q, loc=0, scale=1, f=standard):
                q, loc, scale = _inexact(q, loc, scale)
                return f(q) * scale + loc
            functions[key] = quantile
    for fn_name, fn in functions.items():
        fn.__name__ = fn_name
        fn.__doc__ = f"The {fn_name} of the {name} distribution (with loc and scale)."
    return _namespace(name, **functions)


_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

norm = _location_scale(
    "normal", lambda z: -0.5 * z * z - _HALF_LOG_2PI,
    cdf=sp.ndtr, log_cdf=sp.log_ndtr, sf=lambda z: sp.ndtr(-z), log_sf=lambda z: sp.log_ndtr(-z),
    ppf=sp.ndtri, isf=lambda q: -sp.ndtri(q))

def _logistic_log_density(z):
    a = jnp.abs(z)  # the density is symmetric; this form cannot overflow
    return -a - 2 * jnp.log1p(jnp.exp(-a))


logistic = _location_scale(
    "logistic", _logistic_log_density,
    cdf=sp.expit, sf=lambda z: sp.expit(-z), ppf=sp.logit, isf=lambda q: -sp.logit(q))

laplace = _location_scale(
    "Laplace", lambda z: -jnp.abs(z) - math.log(2.0),
    cdf=lambda z: jnp.where(z < 0, 0.5 * jnp.exp(z), 1 - 0.5 * jnp.exp(-z)))

def _cauchy_ppf(q):
    """tan(pi (q - 1/2)), accurate in the tails: there pi q (or pi (1 - q), exact for
    q > 1/2) is small and -cot(pi q) = cot(pi (1 - q)) loses nothing; NaN outside [0, 1]."""
    middle = jnp.tan(math.pi * (q - 0.5))
    lower = -1 / jnp.tan(math.pi * q)
    upper = 1 / jnp.tan(math.pi * (1 - q))
    value = jnp.where(q < 0.25, lower, jnp.where(q > 0.75, upper, middle))
    return jnp.where((q >= 0) & (q <= 1), value, jnp.nan)


cauchy = _location_scale(
    "Cauchy", lambda z: -math.log(math.pi) - jnp.log1p(z * z),
    cdf=lambda z: 0.5 + jnp.arctan(z) / math.pi,
    log_cdf=lambda z: jnp.log(0.5 + jnp.arctan(z) / math.pi),
    sf=lambda z: 0.5 - jnp.arctan(z) / math.pi,
    log_sf=lambda z: jnp.log(0.5 - jnp.arctan(z) / math.pi),
    ppf=_cauchy_ppf, isf=lambda q: -_cauchy_ppf(q))

uniform = _location_scale(
    "uniform", lambda z: jnp.where((z >= 0) & (z <= 1), 0.0, -jnp.inf),
    cdf=lambda z: _npu.convert(jnp.clip(z, 0.0, 1.0), z.dtype),  # strong, as in JAX
    ppf=lambda q: jnp.where((q >= 0) & (q <= 1), q, jnp.nan))

expon = _location_scale(
    "exponential", lambda z: jnp.where(z >= 0, -z, -jnp.inf),
    cdf=lambda z: jnp.where(z >= 0, -jnp.expm1(-z), 0.0),
    log_cdf=lambda z: jnp.where(z >= 0, log1mexp(z), -jnp.inf),
    sf=lambda z: jnp.where(z >= 0, jnp.exp(-z), 1.0),
    log_sf=lambda z: jnp.where(z >= 0, -z, 0.0),
    ppf=lambda q: jnp.where((q >= 0) & (q <= 1), -jnp.log1p(-q), jnp.nan))

gumbel_r = _location_scale(
    "right-skewed Gumbel", lambda z: -z - jnp.exp(-z),
    cdf=lambda z: jnp.exp(-jnp.exp(-z)), log_cdf=lambda z: -jnp.exp(-z),
    sf=lambda z: -jnp.expm1(-jnp.exp(-z)), log_sf=lambda z: jnp.log(-jnp.expm1(-jnp.exp(-z))),
    ppf=lambda q: -jnp.log(-jnp.log(q)))

gumbel_l = _location_scale(
    "left-skewed Gumbel", lambda z: z - jnp.exp(z),
    cdf=lambda z: -jnp.expm1(-jnp.exp(z)), log_cdf=lambda z: jnp.log(-jnp.expm1(-jnp.exp(z))),
    sf=lambda z: jnp.exp(-jnp.exp(z)), log_sf=lambda z: -jnp.exp(z),
    ppf=lambda q: jnp.log(-jnp.log1p(-q)))


# ---------------------------------------------------------------------------------------------
# Shape families

def _pareto_logpdf(x, b, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    b = _inexact(b)
    return jnp.where(z >= 1, jnp.log(b) - (b + 1) * jnp.log(z) - jnp.log(scale), -jnp.inf)


def _pareto_logcdf(x, b, loc=0, scale=1):
    z, _ = _standardize(x, loc, scale)
    return jnp.where(z >= 1, jnp.log1p(-z ** -_inexact(b)), -jnp.inf)


def _pareto_logsf(x, b, loc=0, scale=1):
    z, _ = _standardize(x, loc, scale)
    return jnp.where(z >= 1, -_inexact(b) * jnp.log(z), 0.0)


def _pareto_ppf(q, b, loc=0, scale=1):
    q, b, loc, scale = _inexact(q, b, loc, scale)
    return jnp.where((q >= 0) & (q <= 1), scale * (1 - q) ** (-1 / b) + loc, jnp.nan)


pareto = _namespace(
    "pareto", logpdf=_pareto_logpdf, pdf=lambda *a, **k: jnp.exp(_pareto_logpdf(*a, **k)),
    logcdf=_pareto_logcdf, cdf=lambda *a, **k: jnp.exp(_pareto_logcdf(*a, **k)),
    logsf=_pareto_logsf, sf=lambda *a, **k: jnp.exp(_pareto_logsf(*a, **k)), ppf=_pareto_ppf)


def _t_logpdf(x, df, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    df = _inexact(df)
    return (sp.gammaln((df + 1) / 2) - sp.gammaln(df / 2) - 0.5 * jnp.log(df * math.pi)
            - (df + 1) / 2 * jnp.log1p(z * z / df) - jnp.log(scale))


t = _namespace("t", logpdf=_t_logpdf, pdf=lambda *a, **k: jnp.exp(_t_logpdf(*a, **k)))


# ---------------------------------------------------------------------------------------------
# Discrete distributions

def _bernoulli_logpmf(k, p, loc=0):
    k, p, loc = _inexact(k, p, loc)
    x = k - loc
    value = sp.xlogy(x, p) + sp.xlog1py(1 - x, -p)
    return jnp.where((x == 0) | (x == 1), value, -jnp.inf)


def _bernoulli_cdf(k, p):
    k, p = _inexact(k, p)
    return jnp.where(k < 0, 0.0, jnp.where(k < 1, 1 - p, 1.0))


def _bernoulli_ppf(q, p):
    q, p = _inexact(q, p)
    return jnp.where((q < 0) | (q > 1), jnp.nan, jnp.where(q <= 1 - p, 0.0, 1.0))


bernoulli = _namespace("bernoulli", logpmf=_bernoulli_logpmf,
                       pmf=lambda *a, **k: jnp.exp(_bernoulli_logpmf(*a, **k)),
                       cdf=_bernoulli_cdf, ppf=_bernoulli_ppf)


def _geom_logpmf(k, p, loc=0):
    k, p, loc = _inexact(k, p, loc)
    x = k - loc
    return jnp.where(x <= 0, -jnp.inf, sp.xlog1py(x - 1, -p) + jnp.log(p))


geom = _namespace("geom", logpmf=_geom_logpmf, pmf=lambda *a, **k: jnp.exp(_geom_logpmf(*a, **k)))


def _log_choose(n, k):
    """log C(n, k), exactly 0 at k = 0 and k = n (XLA's lgamma(1) is 5e-7 in float32)."""
    value = sp.gammaln(n + 1) - sp.gammaln(k + 1) - sp.gammaln(n - k + 1)
    return jnp.where((k == 0) | (k == n), 0.0, value)


def _binom_logpmf(k, n, p, loc=0):
    k, n, p, loc = _inexact(k, n, p, loc)
    x = k - loc
    value = _log_choose(n, x) + sp.xlogy(x, p) + sp.xlog1py(n - x, -p)
    return jnp.where((x >= 0) & (x <= n) & (x == jnp.floor(x)), value, -jnp.inf)


binom = _namespace("binom", logpmf=_binom_logpmf,
                   pmf=lambda *a, **k: jnp.exp(_binom_logpmf(*a, **k)))


def _nbinom_logpmf(k, n, p, loc=0):
    k, n, p, loc = _inexact(k, n, p, loc)
    x = k - loc
    # log C(n + x - 1, x), exactly 0 at x = 0 (lgamma(1) is 5e-7 in float32 on XLA).
    log_comb = jnp.where(x == 0, 0.0, sp.gammaln(n + x) - sp.gammaln(x + 1) - sp.gammaln(n))
    value = log_comb + n * jnp.log(p) + sp.xlog1py(x, -p)
    return jnp.where(x >= 0, value, -jnp.inf)


nbinom = _namespace("nbinom", logpmf=_nbinom_logpmf,
                    pmf=lambda *a, **k: jnp.exp(_nbinom_logpmf(*a, **k)))


def _betabinom_logpmf(k, n, a, b, loc=0):
    k, n, a, b, loc = _inexact(k, n, a, b, loc)
    x = k - loc
    value = _log_choose(n, x) + sp.betaln(x + a, n - x + b) - sp.betaln(a, b)
    return jnp.where((x >= 0) & (x <= n) & (x == jnp.floor(x)), value, -jnp.inf)


betabinom = _namespace("betabinom", logpmf=_betabinom_logpmf,
                       pmf=lambda *a, **k: jnp.exp(_betabinom_logpmf(*a, **k)))


def _multinomial_logpmf(x, n, p):
    p = _inexact(p)
    x, n = _npu.promote_args_numeric("multinomial.logpmf", x, n)
    if not jnp.issubdtype(x.dtype, jnp.integer):
        raise ValueError(f"x and n must be of integer type; got x.dtype={x.dtype}, n.dtype={n.dtype}")
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    value = sp.gammaln(n + 1) + jnp.sum(sp.xlogy(x, p) - sp.gammaln(x + 1), axis=-1)
    return jnp.where(jnp.sum(x, axis=-1) == n, value, -jnp.inf)


multinomial = _namespace("multinomial", logpmf=_multinomial_logpmf,
                         pmf=lambda *a, **k: jnp.exp(_multinomial_logpmf(*a, **k)))


def _dirichlet_logpdf(x, alpha):
    x, alpha = _inexact(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    if x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError(f"`x` must have either the same number of entries as `alpha` or one "
                         f"entry fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
    if x.shape[0] != alpha.shape[0]:
        x = jnp.concatenate([x, 1 - jnp.sum(x, 0, keepdims=True)], axis=0)
    normalizer = jnp.sum(sp.gammaln(alpha)) - sp.gammaln(jnp.sum(alpha))
    if x.ndim > 1:
        alpha = alpha.reshape(alpha.shape + (1,) * (x.ndim - 1))
    log_density = jnp.sum(sp.xlogy(alpha - 1, x), axis=0) - normalizer
    on_simplex = jnp.all(x > 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - 1) < 1e-6)
    return jnp.where(on_simplex, log_density, -jnp.inf)


dirichlet = _namespace("dirichlet", logpdf=_dirichlet_logpdf,
                       pdf=lambda *a, **k: jnp.exp(_dirichlet_logpdf(*a, **k)))


def _wrapcauchy_logpdf(x, c):
    x, c = _inexact(x, c)
    value = jnp.log(1 - c * c) - math.log(2 * math.pi) - jnp.log(1 + c * c - 2 * c * jnp.cos(x))
    inside = (x >= 0) & (x <= 2 * math.pi)
    return jnp.where((c > 0) & (c < 1), jnp.where(inside, value, -jnp.inf), jnp.nan)


wrapcauchy = _namespace("wrapcauchy", logpdf=_wrapcauchy_logpdf,
                        pdf=lambda *a, **k: jnp.exp(_wrapcauchy_logpdf(*a, **k)))


# ---------------------------------------------------------------------------------------------
# Statistics of samples

def sem(a, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False):
    """Standard error of the mean: std(a, ddof) / sqrt(n)."""
    if nan_policy not in ("propagate", "omit"):
        raise ValueError(f"nan_policy must be 'propagate' or 'omit', got {nan_policy!r}")
    a = _inexact(a)
    ndim = a.ndim
    if axis is None:
        a, axis = a.ravel(), 0
    if nan_policy == "omit":
        count = jnp.sum(~jnp.isnan(a), axis=axis, keepdims=keepdims)
        mean = jnp.nanmean(a, axis=axis, keepdims=True)
        squares = jnp.nansum((a - mean) ** 2, axis=axis, keepdims=keepdims)
        out = jnp.sqrt(squares / (count - ddof)) / jnp.sqrt(count)
    else:
        out = jnp.std(a, axis=axis, ddof=ddof, keepdims=keepdims) / math.sqrt(a.shape[axis])
    if keepdims and a.ndim != ndim:  # axis=None: one size-1 dimension per input dimension
        out = out.reshape((1,) * ndim)
    return out


class ModeResult(NamedTuple):
    """The result of `mode`: the most common value and how often it occurs."""
    mode: Any
    count: Any


def mode(a, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False):
    """The most common value along `axis` (the smallest of equally common ones) and its count;
    NaNs count as equal to each other."""
    check_arraylike("mode", a)
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of "
                         "{'propagate', 'omit', 'raise'}")
    if nan_policy == "omit":
        raise NotImplementedError(f"Logic for `nan_policy` of {nan_policy} is not implemented")
    if nan_policy == "raise":
        raise NotImplementedError("In order to best JIT compile `mode`, we cannot know whether "
                                  "`x` contains nans. Please check if nans exist in `x` outside "
                                  "of the `mode` function.")
    x = jnp.atleast_1d(a)
    if axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
        x, axis = jnp.ravel(x), 0
    else:
        axis = canonicalize_axis(axis, x.ndim)
        out_shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape) if keepdims
                          or i != axis)
    x = jnp.moveaxis(x, axis, 0)
    if x.shape[0] == 0:
        empty = jnp.full(out_shape, np.nan, dtypes.default_float_dtype())
        return ModeResult(empty, jnp.zeros(out_shape, dtypes.default_float_dtype()))
    x = jnp.sort(x, axis=0)
    same = x[1:] == x[:-1]
    if jnp.issubdtype(x.dtype, np.inexact):
        same = same | (jnp.isnan(x[1:]) & jnp.isnan(x[:-1]))
    position = jnp.arange(x.shape[0], dtype=dtypes.default_int_dtype())
    position = position.reshape((-1,) + (1,) * (x.ndim - 1))
    starts = jnp.concatenate([jnp.ones((1,) + x.shape[1:], bool), ~same], axis=0)
    run_start = lax.cummax(jnp.where(starts, position, 0), axis=0)
    run_length = position - run_start + 1  # so far: at a run's last element, its length
    best = jnp.argmax(run_length, axis=0)  # the first longest run: the smallest value
    value = jnp.take_along_axis(x, best[None], axis=0)[0]
    count = jnp.max(run_length, axis=0)
    return ModeResult(value.reshape(out_shape), count.reshape(out_shape))


# ---------------------------------------------------------------------------------------------
# The truncated normal

def _log_diff_exp(x, y):
    """log(exp(x) - exp(y)) for x >= y, stably."""
    return x + jnp.log(-jnp.expm1(y - x))


def _log_gauss_mass(a, b):
    """log P(a < Z < b) for a standard normal Z, accurate in both tails and the middle."""
    a, b = jnp.broadcast_arrays(*_inexact(a, b))
    left, right = b <= 0, a > 0
    lo, hi = jnp.where(right, -b, a), jnp.where(right, -a, b)  # mirror the right tail
    tail = _log_diff_exp(sp.log_ndtr(hi), sp.log_ndtr(lo))
    central = jnp.log1p(-sp.ndtr(a) - sp.ndtr(-b))
    return jnp.where(left | right, tail, central)


def _truncnorm_logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _inexact(x, a, b, loc, scale)
    value = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    value = jnp.where((z < a) | (z > b), -jnp.inf, value)
    return jnp.where(a >= b, jnp.nan, value)


def _truncnorm_logcdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _inexact(x, a, b, loc, scale)
    x, a, b = jnp.broadcast_arrays(x, a, b)
    z = (x - loc) / scale
    total = _log_gauss_mass(a, b)
    log_cdf = _log_gauss_mass(a, z) - total
    log_sf = _log_gauss_mass(z, b) - total
    inner = jnp.where(log_cdf > -0.1, jnp.log1p(-jnp.exp(log_sf)), log_cdf)
    value = jnp.where(z >= b, 0.0, jnp.where(z <= a, -jnp.inf, inner))
    return jnp.where(a >= b, jnp.nan, value)


def _truncnorm_logsf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _inexact(x, a, b, loc, scale)
    return _truncnorm_logcdf(-x, -b, -a, -loc, scale)


truncnorm = _namespace(
    "truncnorm", logpdf=_truncnorm_logpdf, pdf=lambda *a, **k: jnp.exp(_truncnorm_logpdf(*a, **k)),
    logcdf=_truncnorm_logcdf, cdf=lambda *a, **k: jnp.exp(_truncnorm_logcdf(*a, **k)),
    logsf=_truncnorm_logsf, sf=lambda *a, **k: jnp.exp(_truncnorm_logsf(*a, **k)))


# ---------------------------------------------------------------------------------------------
# Ranks

def rankdata(a, method: str = "average", *, axis: int | None = None,
             nan_policy: str = "propagate"):
    """Ranks of the data, 1-based; ties by `method`: 'average', 'min', 'max', 'dense' or
    'ordinal'."""
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"unknown method '{method}'")
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"nan_policy must be 'propagate', 'raise' or 'omit', got {nan_policy}")
    if nan_policy != "propagate":
        raise NotImplementedError("The 'raise' and 'omit' nan_policy values are not supported")
    a = jnp.asarray(a)
    if axis is not None:
        moved = jnp.moveaxis(a, axis, 0)  # (sizes spelled out: an empty axis has no -1)
        rows = moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))
        return jnp.moveaxis(_rank_rows(rows.T, method).T.reshape(moved.shape), 0, axis)
    a = a.ravel()
    ranks = _rank_flat(a, method)
    if jnp.issubdtype(a.dtype, jnp.inexact):  # 'propagate': a NaN makes every rank NaN
        ranks = jnp.where(jnp.isnan(a).any(), jnp.nan, ranks)
    return ranks


def _rank_flat(a, method):
    """Ranks of a 1-D array without NaNs."""
    order = jnp.argsort(a, stable=True)
    ranks_ordinal = jnp.zeros(a.shape, int).at[order].set(jnp.arange(1, a.size + 1))
    as_float = lambda r: r.astype(jnp.result_type(float))  # noqa: E731  (JAX's rank dtype)
    if method == "ordinal":
        return as_float(ranks_ordinal)
    sorted_a = a[order]
    new_group = jnp.concatenate([jnp.ones((min(a.size, 1),), bool), sorted_a[1:] != sorted_a[:-1]])
    dense_sorted = jnp.cumsum(new_group)
    dense = jnp.zeros(a.shape, dense_sorted.dtype).at[order].set(dense_sorted)
    if method == "dense":
        return as_float(dense)
    # First and last positions (1-based) of each group of ties, by group number.
    starts = jnp.nonzero(new_group, size=a.size, fill_value=a.size)[0] + 1
    count = jnp.sum(new_group)
    ends = jnp.concatenate([starts[1:] - 1, jnp.array([a.size])])
    ends = jnp.where(jnp.arange(a.size) == count - 1, a.size, ends)
    group = dense - 1
    if method == "min":
        return as_float(starts[group])
    if method == "max":
        return as_float(ends[group])
    return as_float(0.5 * (starts[group] + ends[group]))


def _rank_rows(rows, method):
    from fluxion._src.vmap import vmap
    return vmap(lambda r: rankdata(r, method))(rows)


# ---------------------------------------------------------------------------------------------
# Gamma-family densities (their CDFs need the regularized incomplete gamma and beta functions)

def _gamma_logpdf(x, a, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    a = _inexact(a)
    # Outside the support z stands in as 1: no NaN inside (debug_nans, gradients), as JAX
    outside = z < 0
    z = jnp.where(outside, 1, z)
    value = sp.xlogy(a - 1, z) - z - sp.gammaln(a) - jnp.log(scale)
    return jnp.where(outside, -jnp.inf, value)


def _chi2_logpdf(x, df, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    half = _inexact(df) / 2
    outside = z < 0
    z = jnp.where(outside, 1, z)  # (as gamma's)
    value = (sp.xlogy(half - 1, z) - z / 2 - sp.gammaln(half) - half * np.log(2.0)
             - jnp.log(scale))
    return jnp.where(outside, -jnp.inf, value)


def _beta_logpdf(x, a, b, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    a, b = _inexact(a, b)
    outside = (z < 0) | (z > 1)
    z = jnp.where(outside, 0.5, z)  # (as gamma's)
    value = sp.xlogy(a - 1, z) + sp.xlog1py(b - 1, -z) - sp.betaln(a, b) - jnp.log(scale)
    return jnp.where(outside, -jnp.inf, value)


def _gennorm_logpdf(x, beta, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    beta = _inexact(beta)
    return (jnp.log(beta) - np.log(2.0) - sp.gammaln(1 / beta) - jnp.abs(z) ** beta
            - jnp.log(scale))


def _poisson_logpmf(k, mu, loc=0):
    k, mu, loc = _inexact(k, mu, loc)
    x = k - loc
    value = sp.xlogy(x, mu) - sp.gammaln(x + 1) - mu
    return jnp.where((x >= 0) & (x == jnp.floor(x)), value, -jnp.inf)


def _density(name, logpdf):
    return _namespace(name, logpdf=logpdf, pdf=lambda *a, **k: jnp.exp(logpdf(*a, **k)))


gamma = _density("gamma", _gamma_logpdf)
chi2 = _density("chi2", _chi2_logpdf)
beta = _density("beta", _beta_logpdf)
gennorm = _density("gennorm", _gennorm_logpdf)
def _poisson_entropy(mu, loc=0):
    """The entropy of the Poisson distribution (loc shifts it and changes nothing): the sum
    of -p log p over k < 250 for mu < 100, else the asymptotic series in 1/mu."""
    mu, loc = _inexact(mu, loc)
    shape = np.broadcast_shapes(mu.shape, loc.shape)
    small = jnp.where((mu > 0) & (mu < 100), mu, 1.0)
    k = jnp.arange(250, dtype=mu.dtype).reshape((250,) + (1,) * mu.ndim)
    log_p = _poisson_logpmf(k, small)  # finite for every k, so -p log p has a clean gradient
    summed = -jnp.sum(jnp.exp(log_p) * log_p, axis=0)
    big = jnp.where(mu >= 100, mu, 100.0)
    inv = 1 / big
    series = (0.5 * jnp.log(2 * np.pi * np.e * big)
              - inv * (1 / 12 + inv * (1 / 24 + inv * 19 / 360)))
    value = jnp.where(mu < 100, summed, series)
    value = jnp.where(mu == 0, 0.0, jnp.where(mu < 0, jnp.nan, value)).astype(mu.dtype)
    return jnp.broadcast_to(value, shape)


poisson = _namespace("poisson", logpmf=_poisson_logpmf,
                     pmf=lambda *a, **k: jnp.exp(_poisson_logpmf(*a, **k)),
                     entropy=_poisson_entropy)


# CDFs on the regularized incomplete gamma and beta functions.

def _with_cdfs(namespace, cdf, sf):
    namespace.cdf, namespace.sf = cdf, sf
    namespace.logcdf = lambda *a, **k: jnp.log(cdf(*a, **k))
    namespace.logsf = lambda *a, **k: jnp.log(sf(*a, **k))
    return namespace


def _gamma_cdf(x, a, loc=0, scale=1):
    z, _ = _standardize(x, loc, scale)
    return sp.gammainc(a, jnp.maximum(z, 0.0))


def _gamma_sf(x, a, loc=0, scale=1):
    z, _ = _standardize(x, loc, scale)
    return sp.gammaincc(a, jnp.maximum(z, 0.0))


def _chi2_cdf(x, df, loc=0, scale=1):
    z, _ = _standardize(x, loc, scale)
    return sp.gammainc(_inexact(df) / 2, jnp.maximum(z, 0.0) / 2)


def _chi2_sf(x, df, loc=0, scale=1):
    z, _ = _standardize(x, loc, scale)
    return sp.gammaincc(_inexact(df) / 2, jnp.maximum(z, 0.0) / 2)


def _beta_cdf(x, a, b, loc=0, scale=1):
    z, _ = _standardize(x, loc, scale)
    return sp.betainc(a, b, jnp.clip(z, 0.0, 1.0))


def _beta_sf(x, a, b, loc=0, scale=1):
    z, _ = _standardize(x, loc, scale)
    return sp.betainc(b, a, 1 - jnp.clip(z, 0.0, 1.0))


_with_cdfs(gamma, _gamma_cdf, _gamma_sf)
_with_cdfs(chi2, _chi2_cdf, _chi2_sf)
_with_cdfs(beta, _beta_cdf, _beta_sf)


def _gennorm_cdf(x, beta_, loc=0, scale=1):
    z, _ = _standardize(x, loc, scale)
    beta_ = _inexact(beta_)
    return 0.5 + jnp.sign(z) * 0.5 * sp.gammainc(1 / beta_, jnp.abs(z) ** beta_)


gennorm.cdf = _gennorm_cdf


def _poisson_cdf(k, mu, loc=0):
    k, mu, loc = _inexact(k, mu, loc)
    x = jnp.floor(k - loc)
    return jnp.where(x < 0, 0.0, sp.gammaincc(x + 1, mu))


poisson.cdf = _poisson_cdf


def _vonmises_logpdf(x, kappa):
    x, kappa = _inexact(x, kappa)
    value = kappa * (jnp.cos(x) - 1) - jnp.log(2 * math.pi * sp.i0e(kappa))
    return jnp.where(kappa > 0, value, jnp.nan)


vonmises = _density("vonmises", _vonmises_logpdf)


def _multivariate_normal_logpdf(x, mean, cov, allow_singular=None):
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = _inexact(x, mean, cov)
    if not mean.shape:
        return -0.5 * (x - mean) ** 2 / cov - 0.5 * (np.log(2 * np.pi) + jnp.log(cov))
    n = mean.shape[-1]
    y = x - mean
    if not cov.shape:
        return -0.5 * jnp.sum(y * y, axis=-1) / cov - n / 2 * (np.log(2 * np.pi) + jnp.log(cov))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError("multivariate_normal.logpdf got incompatible shapes")
    from fluxion.lax import linalg as lax_linalg
    factor = lax_linalg.cholesky(cov)
    # Solve L z = y for every y at once: y as the columns of a right-hand side.
    batch = np.broadcast_shapes(factor.shape[:-2], y.shape[:-1])
    factor = jnp.broadcast_to(factor, batch + (n, n))
    z = lax_linalg.triangular_solve(factor, jnp.broadcast_to(y, batch + (n,))[..., :, None],
                                    left_side=True, lower=True)[..., 0]
    half_log_det = jnp.sum(jnp.log(jnp.diagonal(factor, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * jnp.sum(z * z, axis=-1) - n / 2 * np.log(2 * np.pi) - half_log_det


multivariate_normal = _namespace(
    "multivariate_normal", logpdf=_multivariate_normal_logpdf,
    pdf=lambda *a, **k: jnp.exp(_multivariate_normal_logpdf(*a, **k)))


# ---------------------------------------------------------------------------------------------
# NaN for NaN arguments and invalid parameters, as SciPy (and mostly JAX). The functions above
# pick their value with `where` on the support, where a NaN comparison is False: without this
# guard a NaN argument or a non-positive scale would give 0, 1 or -inf.

def _positive(v):
    return v > 0


def _probability(v):
    return (v >= 0) & (v <= 1)


# name -> (argument names after the first, {argument: validity test})
_PARAMETERS = {
    "norm": (("loc", "scale"), {}), "logistic": (("loc", "scale"), {}),
    "laplace": (("loc", "scale"), {}), "cauchy": (("loc", "scale"), {}),
    "uniform": (("loc", "scale"), {}), "expon": (("loc", "scale"), {}),
    "gumbel_r": (("loc", "scale"), {}), "gumbel_l": (("loc", "scale"), {}),
    "pareto": (("b", "loc", "scale"), {"b": _positive}),
    "t": (("df", "loc", "scale"), {"df": _positive}),
    "gamma": (("a", "loc", "scale"), {"a": _positive}),
    "chi2": (("df", "loc", "scale"), {"df": _positive}),
    "beta": (("a", "b", "loc", "scale"), {"a": _positive, "b": _positive}),
    "gennorm": (("beta", "loc", "scale"), {"beta": _positive}),
    "bernoulli": (("p", "loc"), {"p": _probability}),
    "geom": (("p", "loc"), {"p": lambda p: (p > 0) & (p <= 1)}),
    "binom": (("n", "p", "loc"), {"n": lambda n: n >= 0, "p": _probability}),
    "nbinom": (("n", "p", "loc"), {"n": lambda n: n >= 0, "p": _probability}),
    "betabinom": (("n", "a", "b", "loc"),
                  {"n": lambda n: n >= 0, "a": _positive, "b": _positive}),
    "poisson": (("mu", "loc"), {}),
    "truncnorm": (("a", "b", "loc", "scale"), {}),
}


def _nan_guarded(fn, names, tests):
    def guarded(*args, **kwargs):
        out = fn(*args, **kwargs)
        values = dict(zip(("x",) + names, args))
        values.update(kwargs)
        bad = None
        for key, value in values.items():
            value = jnp.asarray(value)
            if jnp.issubdtype(value.dtype, jnp.inexact):
                flag = jnp.isnan(value)
                if key == "scale":
                    flag = flag | (value <= 0)
                elif key in tests:
                    flag = flag | ~tests[key](value)
            elif key == "scale":
                flag = value <= 0
            elif key in tests:
                flag = ~tests[key](value)
            else:
                continue
            bad = flag if bad is None else bad | flag
        return out if bad is None else jnp.where(bad, jnp.nan, out)
    guarded.__name__, guarded.__doc__ = getattr(fn, "__name__", "f"), fn.__doc__
    return guarded


for _name, (_names, _tests) in _PARAMETERS.items():
    _family = globals()[_name]
    for _key, _fn in list(vars(_family).items()):
        if callable(_fn) and _key != "entropy":
            setattr(_family, _key, _nan_guarded(_fn, _names, _tests))
del _name, _names, _tests, _family, _key, _fn

# Outside jit each function runs as one cached executable per signature, as JAX jits them.
for _family in _DISTRIBUTIONS:
    compile_eagerly(vars(_family), {"logpdf": ("allow_singular",), "pdf": ("allow_singular",)})
compile_eagerly(globals(), {"sem": ("axis", "ddof", "nan_policy", "keepdims"),
                            "mode": ("axis", "nan_policy", "keepdims"),
                            "rankdata": ("method", "axis", "nan_policy")},
                names=("sem", "mode", "rankdata"))
del _family
