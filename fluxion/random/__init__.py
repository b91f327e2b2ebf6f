"""fluxion.random: JAX's counter-based PRNG (threefry2x32) and samplers, bit for bit.

Keys are legacy uint32[2] arrays (`PRNGKey`) or typed keys (`key`); every function accepts
either. Samples equal `jax.random`'s for the same key, shape and dtype.
"""
from fluxion._src.random.keys import (  # noqa: F401
    PRNGKey, key, key_data, wrap_key_data, key_impl, key_dtype, split, fold_in, clone,
    PRNGKeyArray)
from fluxion._src.random.basic import bits, uniform, normal, bernoulli, rademacher  # noqa: F401
from fluxion._src.random.continuous import (  # noqa: F401
    truncated_normal, lognormal, exponential, laplace, logistic, cauchy, maxwell, gumbel, pareto,
    double_sided_maxwell, weibull_min, rayleigh, wald, triangular, multivariate_normal,
    orthogonal)
from fluxion._src.random.discrete import (  # noqa: F401
    randint, permutation, choice, categorical, geometric)
from fluxion._src.random.gamma import (  # noqa: F401
    gamma, loggamma, beta, dirichlet, chisquare, f, t, generalized_normal, ball, random_gamma_p)
from fluxion._src.random.counts import poisson, binomial, multinomial  # noqa: F401


def _take_out_sharding():
    """Samplers whose signature has `out_sharding` get it as a constraint on their result."""
    import inspect
    from fluxion._src.sharding_types import accepts_out_sharding
    g = globals()
    for name, f in list(g.items()):
        if name.startswith("_") or not inspect.isfunction(f):
            continue
        if "out_sharding" in inspect.signature(f).parameters:
            g[name] = accepts_out_sharding(f)


_take_out_sharding()
