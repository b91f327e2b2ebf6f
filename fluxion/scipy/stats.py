"""Statistical distributions and functions (`jax.scipy.stats`)."""
from fluxion._src.scipy.kde import gaussian_kde  # noqa: F401
from fluxion._src.scipy.stats import (  # noqa: F401
    bernoulli, beta, betabinom, binom, chi2, gamma, gennorm, poisson, cauchy, dirichlet, expon, geom, gumbel_l, gumbel_r, laplace,
    logistic, mode, multinomial, multivariate_normal, nbinom, norm, pareto, rankdata, sem, t, truncnorm, uniform,
    vonmises, wrapcauchy)
