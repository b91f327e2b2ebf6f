"""Taylor-mode higher-order automatic differentiation (`fluxion.experimental.jet`).

``jet(fun, primals, series)`` propagates truncated Taylor series through `fun`; see
:func:`jet`. Rules of primitives live in `jet_rules`.
"""
from fluxion._src.jet import (  # noqa: F401
    JetRuleError,
    JetTrace,
    JetTracer,
    ZeroSeries,
    ZeroTerm,
    def_comp,
    def_deriv,
    deflinear,
    defzero,
    deriv_prop,
    fact,
    jet,
    jet2,
    jet_rules,
    linear_prop,
    zero_prop,
    zero_series,
    zero_term,
)
