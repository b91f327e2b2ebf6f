"""Special functions (`jax.scipy.special`)."""
from fluxion._src.scipy.special import (  # noqa: F401
    beta, betaln, boxcox, boxcox1p, comb, digamma, entr, erf, erfc, erfinv, expit, factorial,
    gamma, gammaln, gammasgn, kl_div, log_ndtr, log_softmax, logit, loggamma, logsumexp,
    multigammaln, ndtr, ndtri, poch, polygamma, rel_entr, softmax, xlog1py, xlogy,
    betainc, gammainc, gammaincc, i0, i0e, i1, i1e, zeta)
