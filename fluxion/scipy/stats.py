"""Statistical distributions and functions (`jax.scipy.stats`)."""
from fluxion._src.scipy.kde import gaussian_kde  # noqa: F401
from fluxion._src.scipy.stats import (  # noqa: F401
    bernoulli, beta, betabinom, binom, chi2, gamma, gennorm, poisson, cauchy, dirichlet, expon, geom, gumbel_l, gumbel_r, laplace,
    logistic, mode, multinomial, multivariate_normal, nbinom, norm, pareto, rankdata, sem, t, truncnorm, uniform,
    vonmises, wrapcauchy)

import importlib.machinery as _machinery  # noqa: E402
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402

# Each distribution is a module, importable by name (`import fluxion.scipy.stats.norm`) as in
# JAX: once this module (a package with no files of its own) is imported, the import system
# finds them in sys.modules.
__path__: list = []
for _name, _module in list(globals().items()):
    if isinstance(_module, _types.ModuleType) and not _name.startswith("_"):
        _module.__name__ = f"{__name__}.{_name}"
        _module.__spec__ = _machinery.ModuleSpec(_module.__name__, None)
        _sys.modules[_module.__name__] = _module
del _name, _module
