"""Taylor-mode automatic differentiation (`jet`): a trace whose tracers carry a truncated
Taylor series, and per-primitive rules in `jet_rules` propagating it.

Inside the trace (and in every rule) a series holds the *unscaled* Taylor coefficients
``x_1, ..., x_K`` of ``x(t) = x_0 + x_1 t + ... + x_K t^K``; `jet` converts from and to
derivatives (``k! x_k``) at its boundary unless ``factorial_scaled=False``.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Sequence


from fluxion._src import ad, core
from fluxion._src.core import Trace, Tracer
from fluxion._src.tree_util import (register_pytree_node, tree_flatten, tree_structure,
                                    tree_unflatten, treedef_is_leaf)


# ---------------------------------------------------------------------------------------------
# Symbolic zeros

class ZeroTerm:
    """A Taylor coefficient known to be zero."""

    def __repr__(self):
        return "zero_term"


class ZeroSeries:
    """A whole series of Taylor coefficients known to be zero."""

    def __repr__(self):
        return "zero_series"


zero_term = ZeroTerm()
zero_series = ZeroSeries()
register_pytree_node(ZeroTerm, lambda z: ((), None), lambda _, xs: zero_term)
register_pytree_node(ZeroSeries, lambda z: ((), None), lambda _, xs: zero_series)


class JetRuleError(NotImplementedError, KeyError):
    """No jet rule for a primitive. A KeyError too, which is what JAX raises."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


# ---------------------------------------------------------------------------------------------
# The trace

# primitive -> rule(primals_in, series_in, **params) -> (primal_out, series_out), run at the
# parent trace; series_in holds concrete (instantiated) coefficients, series_out may be
# zero_series. Multiple-result primitives return lists of both.
jet_rules: dict[core.Primitive, Callable] = {}
# primitive -> rule(trace, args, **params) -> outputs: call-like primitives whose body is
# evaluated under this very trace (custom_jvp_call, checkpoint, ...). Used only when some
# argument has a series.
jet_trace_rules: dict[core.Primitive, Callable] = {}


class JetTracer(Tracer):
    __slots__ = ("primal", "terms")

    def __init__(self, trace, primal, terms):
        self._trace = trace
        self.primal = primal
        self.terms = terms

    @property
    def aval(self):
        return core.get_aval(self.primal)

    def to_concrete_value(self):
        p = self.primal
        return p.to_concrete_value() if isinstance(p, Tracer) else p


class JetTrace(Trace):
    def __init__(self, order: int):
        self.parent = core.current_trace()
        self.order = order
        self.origin = "jet"
        self.is_live = True

    def __repr__(self):
        return "JetTrace"

    def to_primal_terms_pair(self, x):
        if isinstance(x, JetTracer) and x._trace is self:
            return x.primal, x.terms
        return x, zero_series

    def wrap(self, primal, terms):
        if terms is zero_series or all(t is zero_term for t in terms):
            return primal
        return JetTracer(self, primal, list(terms))

    def process_primitive(self, primitive, args, params):
        primals, series = zip(*map(self.to_primal_terms_pair, args)) if args else ((), ())
        if all(s is zero_series for s in series):
            with core.set_current_trace(self.parent):
                return primitive.bind(*primals, **params)
        trace_rule = jet_trace_rules.get(primitive)
        if trace_rule is not None:
            return trace_rule(self, args, **params)
        with core.set_current_trace(self.parent):
            rule = jet_rules.get(primitive) or _fallback_rule(primitive)
            series = [instantiate_series(x, s, self.order) for x, s in zip(primals, series)]
            primal_out, series_out = rule(list(primals), series, **params)
        if primitive.multiple_results:
            if series_out is zero_series:
                return list(primal_out)
            return [self.wrap(p, s) for p, s in zip(primal_out, series_out)]
        return self.wrap(primal_out, series_out)


def _zeros_like(x):
    from fluxion._src.lax.structural import full_like
    return full_like(x, 0)


def instantiate_series(x, series, order: int) -> list:
    """`series` with its symbolic zeros replaced by arrays of zeros shaped like `x`."""
    if series is zero_series:
        series = [zero_term] * order
    return [_zeros_like(x) if t is zero_term else t for t in series]


def _fallback_rule(primitive):
    """Primitives without a jet rule: linear ones (ad.deflinear) apply to each coefficient,
    ones with zero derivative (ad.defjvp_zero) give a zero series; others raise."""
    if primitive in ad.linear_primitives:
        return partial(linear_prop, primitive)
    if primitive in ad.zero_jvp_primitives:
        return partial(zero_prop, primitive)
    raise JetRuleError(f"Jet rule for '{primitive.name}' not implemented. Define one with "
                       f"fluxion.experimental.jet.jet_rules[{primitive.name}_p].")


def jet_flat(fun: Callable, primals: Sequence, series: Sequence, order: int):
    """Run `fun` (flat lists in and out) on jet tracers; returns (primal_outs, series_outs),
    zero_series where an output's series is zero."""
    trace = JetTrace(order)
    ins = [trace.wrap(p, s) for p, s in zip(primals, series)]
    try:
        with core.set_current_trace(trace):
            outs = fun(*ins)
        pairs = [trace.to_primal_terms_pair(x) for x in outs]
    finally:
        trace.is_live = False
    return [p for p, _ in pairs], [s for _, s in pairs]


# ---------------------------------------------------------------------------------------------
# Public entry points

def fact(n):
    """``n!`` as an array, computed as ``exp(lgamma(n + 1))`` (as JAX does)."""
    from fluxion import lax
    return lax.exp(lax.lgamma(n + 1.))


def jet(fun: Callable, primals, series, factorial_scaled: bool = True, **_):
    r"""Taylor-mode higher-order automatic differentiation.

    Parameters
    ----------
    fun : callable
        Function of arrays returning an array or a pytree of arrays.
    primals : tuple or list
        The point: one array (not a pytree) per positional argument of `fun`.
    series : tuple or list
        For each argument, the list of its Taylor terms ``(h_1, ..., h_K)``; K, the same for
        every argument, is the order.
    factorial_scaled : bool
        If True (default), term k is the k-th derivative ``k! x_k``; if False, the plain
        Taylor coefficient ``x_k``. Applies to inputs and outputs alike.

    Returns
    -------
    (primals_out, series_out)
        ``fun(*primals)`` and, for each output leaf, its K terms (same tree structure).
    """
    try:
        order, = set(map(len, series))
    except ValueError:
        raise ValueError("jet terms have inconsistent lengths for different arguments") from None
    for i, (x, terms) in enumerate(zip(primals, series)):
        if not treedef_is_leaf(tree_structure(x)):
            raise ValueError(f"primal value at position {i} is not an array")
        for j, t in enumerate(terms):
            if not treedef_is_leaf(tree_structure(t)):
                raise ValueError(f"term {j} for argument {i} is not an array")
    if factorial_scaled:
        series = [[t / fact(k + 1) for k, t in enumerate(terms)] for terms in series]
    out_tree = []

    def flat_fun(*xs):
        leaves, tree = tree_flatten(fun(*xs))
        out_tree.append(tree)
        return leaves

    out_primals, out_series = jet_flat(flat_fun, list(primals), [list(s) for s in series],
                                       order)
    out_series = [[_zeros_like(p)] * order if s is zero_series else s
                  for p, s in zip(out_primals, out_series)]
    if factorial_scaled:
        out_series = [[t * fact(k + 1) for k, t in enumerate(terms)] for terms in out_series]
    return tree_unflatten(out_tree[0], out_primals), tree_unflatten(out_tree[0], out_series)


jet2 = partial(jet, factorial_scaled=False)


# ---------------------------------------------------------------------------------------------
# Rule-definition helpers

def zero_prop(prim, primals_in, series_in, **params):
    return prim.bind(*primals_in, **params), zero_series


def defzero(prim) -> None:
    """`prim`'s output does not vary with its inputs (piecewise constant)."""
    jet_rules[prim] = partial(zero_prop, prim)


def linear_prop(prim, primals_in, series_in, **params):
    primal_out = prim.bind(*primals_in, **params)
    series_out = [prim.bind(*terms, **params) for terms in zip(*series_in)]
    if prim.multiple_results:
        series_out = [list(s) for s in zip(*series_out)]
    return primal_out, series_out


def deflinear(prim) -> None:
    """`prim` is linear in all its inputs: it applies to each coefficient."""
    jet_rules[prim] = partial(linear_prop, prim)


def deriv_series(y0, deriv: Callable, x, series) -> list:
    """Coefficients ``[y_0, ..., y_K]`` of y = f(x) from y_0 = f(x_0), f's derivative `deriv`
    (jet-traced) and x's coefficients."""
    # y' = f'(x) x': k y_k = sum_{j=1..k} j x_j c_{k-j}, where c is the series of f'(x). The
    # last coefficient of c is never used, so c is one order lower: a derivative defined
    # through further such rules (lgamma -> digamma -> polygamma) recurses to order zero.
    c0, cs = jet2(deriv, (x,), (list(series[:-1]),))
    c = [c0] + list(cs)
    u = [x] + list(series)
    v = [y0] + [None] * len(series)
    for k in range(1, len(v)):
        v[k] = sum(j * c[k - j] * u[j] for j in range(1, k + 1)) / k
    return v


def deriv_prop(prim, deriv, primals_in, series_in, **params):
    x, = primals_in
    v = deriv_series(prim.bind(x, **params), deriv, x, series_in[0])
    return v[0], v[1:]


def def_deriv(prim, deriv: Callable) -> None:
    """Rule of a unary `prim` from its first derivative `deriv` (itself jet-traced)."""
    jet_rules[prim] = partial(deriv_prop, prim, deriv)


def def_comp(prim, comp: Callable) -> None:
    """Rule of `prim` as the jet of `comp`, a composition of primitives with rules."""
    jet_rules[prim] = lambda primals, series, **_: jet2(comp, primals, series)


# Register the rules.
from fluxion._src import jet_primitive_rules as _rules  # noqa: E402,F401
from fluxion._src import jet_call_rules as _call_rules  # noqa: E402,F401
