"""Special functions (`jax.scipy.special`)."""
from fluxion._src.scipy.special import (  # noqa: F401
    beta, betaln, boxcox, boxcox1p, comb, digamma, entr, erf, erfc, erfinv, expit, factorial,
    gamma, gammaln, gammasgn, kl_div, log_ndtr, log_softmax, logit, loggamma, logsumexp,
    multigammaln, ndtr, ndtri, poch, polygamma, rel_entr, softmax, xlog1py, xlogy,
    betainc, gammainc, gammaincc, i0, i0e, i1, i1e, zeta)
from fluxion._src.scipy.special_faddeeva import dawsn, erfcx, wofz  # noqa: F401
from fluxion._src.scipy.special_hyp import hyp1f1, hyp2f1  # noqa: F401
from fluxion._src.scipy.special_integrals import (  # noqa: F401
    exp1, expi, expn, fresnel, sici, spence)
from fluxion._src.scipy.special_misc import bernoulli, bessel_jn, owens_t, sph_harm_y  # noqa: F401

from fluxion._src.numpy.eager import compile_eagerly as _compile_eagerly  # noqa: E402

# Outside jit each function runs as one cached executable per signature (one dispatch where
# op by op would take one per primitive). sph_harm_y stays op by op: with n_max=None it reads
# the largest degree off the values of n, as in JAX.
_compile_eagerly(globals(), {
    "bernoulli": ("n",), "bessel_jn": ("v", "n_iter"), "comb": ("repetition",),
    "factorial": ("exact",), "log_ndtr": ("series_order",), "log_softmax": ("axis",),
    "logsumexp": ("axis", "keepdims", "return_sign"), "multigammaln": ("d",),
    "softmax": ("axis",)}, names=[n for n in dir() if not n.startswith("_") and n != "sph_harm_y"])


def _deprecated_legendre():
    from fluxion._src.numpy.eager import eager_compiled
    from fluxion._src.scipy import special_legendre
    return {"lpmn": eager_compiled(("m", "n"))(special_legendre.lpmn),
            "lpmn_values": eager_compiled(("m", "n", "is_normalized"))(
                special_legendre.lpmn_values)}


def __getattr__(name):
    # Deprecated in JAX with no replacement; still served, with JAX's warning.
    if name in ("lpmn", "lpmn_values"):
        import warnings
        warnings.warn(f"jax.scipy.special.{name} is deprecated; no replacement is planned.",
                      DeprecationWarning, stacklevel=2)
        return _deprecated_legendre()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
