"""Special functions of jax.lax: zeta, bessel_i0e, bessel_i1e, the regularized incomplete gamma
functions (igamma, igammac, igamma_grad_a, random_gamma_grad) and the regularized incomplete
beta function (betainc).

zeta and bessel_i1e lower to CHLO ops. The others are written with lax operations and
lowered by tracing them (`lower_fun`): a power series where it converges fast and a continued
fraction (modified Lentz iteration) elsewhere, each run in a `while_loop` until every element
has converged. f16/bf16 inputs are computed in float32.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import ad, batching, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.lax import lax, structural
from fluxion._src.lax.base import FLOAT, binop, hlo_elementwise, naryop, unop
from fluxion._src.lax.control_flow import while_loop

__all__ = ["zeta", "zeta_p", "bessel_i0e", "bessel_i0e_p", "bessel_i1e", "bessel_i1e_p",
           "igamma", "igamma_p", "igammac", "igammac_p", "igamma_grad_a", "igamma_grad_a_p",
           "random_gamma_grad", "betainc", "regularized_incomplete_beta_p"]

_MAX_ITERATIONS = 2000


def _full(x, value):
    return structural.full(x.shape, value, x.dtype)


def _upcast(fun):
    """Run `fun` in float32 for half-precision inputs and cast the result back."""
    def wrapped(*args):
        dt = args[0].dtype
        if dt in (np.dtype(np.float32), np.dtype(np.float64)):
            return fun(*args)
        out = fun(*[lax.convert_element_type(a, np.float32) for a in args])
        return lax.convert_element_type(out, dt)
    return wrapped


def _broadcast_all(*args):
    """Operands broadcast to the op's shape (rank-0 ones, and size-1 dimensions)."""
    shape = np.broadcast_shapes(*[a.shape for a in args])
    return [a if a.shape == shape else
            lax.broadcast_in_dim(a, shape, tuple(range(a.ndim)) if a.shape else ())
            for a in args]


def _eps(dt) -> float:
    return float(np.finfo(dt).eps)


def _tiny(dt) -> float:
    return float(np.finfo(dt).tiny) * 16


# ---------------------------------------------------------------------------------------------
# zeta and the exponentially scaled Bessel functions

zeta_p = binop("zeta", FLOAT, "chlo.zeta")
batching.defbroadcasting(zeta_p)


def zeta(x, q):
    """Elementwise Hurwitz zeta function: sum over n >= 0 of (n + q) ** -x."""
    return zeta_p.bind(x, q)


bessel_i1e_p = unop("bessel_i1e", FLOAT, "chlo.bessel_i1e")
batching.defvectorized(bessel_i1e_p)


def _bessel_i0e_impl(x):
    """exp(-|x|) I0(x): the power series for |x| <= 20, the asymptotic series beyond."""
    ax = lax.abs(x)
    quarter_sq = lax.mul(lax.mul(ax, ax), _full(ax, 0.25))
    term, total = _full(ax, 1.0), _full(ax, 1.0)
    for k in range(1, 80):
        term = lax.div(lax.mul(term, quarter_sq), _full(ax, float(k * k)))
        total = lax.add(total, term)
    small = lax.mul(lax.exp(lax.neg(ax)), total)
    big_x = lax.max(ax, _full(ax, 20.0))
    inv = lax.div(_full(ax, 1.0), big_x)
    coef, series, power = 1.0, _full(ax, 1.0), _full(ax, 1.0)
    for k in range(1, 30):
        coef *= (2 * k - 1) ** 2 / (8.0 * k)
        power = lax.mul(power, inv)
        series = lax.add(series, lax.mul(_full(ax, coef), power))
    large = lax.mul(series, lax.rsqrt(lax.mul(big_x, _full(ax, 2 * np.pi))))
    return structural.select(lax.le(ax, _full(ax, 20.0)), small, large)


bessel_i0e_p = unop("bessel_i0e", FLOAT, lowering.lower_fun(_upcast(_bessel_i0e_impl),
                                                            multiple_results=False))
batching.defvectorized(bessel_i0e_p)


def bessel_i0e(x):
    """Exponentially scaled modified Bessel function of order 0: exp(-|x|) I0(x)."""
    return bessel_i0e_p.bind(x)


def bessel_i1e(x):
    """Exponentially scaled modified Bessel function of order 1: exp(-|x|) I1(x)."""
    return bessel_i1e_p.bind(x)


ad.defjvp2(bessel_i0e_p, lambda g, y, x: lax.mul(g, lax.sub(bessel_i1e(x),
                                                            lax.mul(lax.sign(x), y))))


def _bessel_i1e_jvp(g, y, x):
    eps = _eps(x.dtype)
    not_tiny = lax.gt(lax.abs(x), _full(x, eps))
    safe_x = structural.select(not_tiny, x, _full(x, eps))
    dy = lax.sub(bessel_i0e(safe_x),
                 lax.mul(y, lax.add(lax.sign(safe_x), lax.div(_full(x, 1.0), safe_x))))
    return lax.mul(g, structural.select(not_tiny, dy, _full(x, 0.5)))


ad.defjvp2(bessel_i1e_p, _bessel_i1e_jvp)


# ---------------------------------------------------------------------------------------------
# Regularized incomplete gamma functions

def _log_prefix(a, x):
    """log(x^a e^-x / Gamma(a))."""
    return lax.sub(lax.sub(lax.mul(a, lax.log(x)), x), lax.lgamma(a))


def _gamma_series(a, x):
    """P(a, x) by its power series: x^a e^-x / Gamma(a+1) * sum_n x^n / ((a+1)...(a+n))."""
    eps = _eps(a.dtype)

    def cond(c):
        n, _, _, done = c
        return lax.bitwise_and(lax.lt(n, np.int32(_MAX_ITERATIONS)),
                               lax.bitwise_not(lax.reduce_and(done, tuple(range(done.ndim)))))

    def body(c):
        n, term, total, done = c
        denom = lax.add(a, lax.convert_element_type(lax.add(n, np.int32(1)), a.dtype))
        new_term = lax.div(lax.mul(term, x), denom)
        new_total = lax.add(total, new_term)
        converged = lax.le(lax.abs(new_term), lax.mul(lax.abs(new_total), _full(a, eps)))
        term = structural.select(done, term, new_term)
        total = structural.select(done, total, new_total)
        return lax.add(n, np.int32(1)), term, total, lax.bitwise_or(done, converged)

    one = _full(a, 1.0)
    _, _, total, _ = while_loop(cond, body, (np.int32(0), one, one, lax.ne(a, a)))
    log_front = lax.sub(_log_prefix(a, x), lax.log(a))
    return lax.mul(lax.exp(log_front), total)


def _gamma_continued_fraction(a, x):
    """Q(a, x) by its continued fraction, evaluated with the modified Lentz method."""
    eps, tiny = _eps(a.dtype), _tiny(a.dtype)

    def guard(v):
        return structural.select(lax.lt(lax.abs(v), _full(v, tiny)), _full(v, tiny), v)

    def cond(c):
        i, *_, done = c
        return lax.bitwise_and(lax.lt(i, np.int32(_MAX_ITERATIONS)),
                               lax.bitwise_not(lax.reduce_and(done, tuple(range(done.ndim)))))

    def body(c):
        i, b, cc, d, h, done = c
        fi = lax.broadcast_in_dim(lax.convert_element_type(i, a.dtype), a.shape, ())
        an = lax.neg(lax.mul(fi, lax.sub(fi, a)))
        b2 = lax.add(b, _full(a, 2.0))
        d2 = lax.div(_full(a, 1.0), guard(lax.add(lax.mul(an, d), b2)))
        c2 = guard(lax.add(b2, lax.div(an, cc)))
        delta = lax.mul(d2, c2)
        h2 = lax.mul(h, delta)
        converged = lax.le(lax.abs(lax.sub(delta, _full(a, 1.0))), _full(a, eps))
        keep = lambda old, new: structural.select(done, old, new)  # noqa: E731
        return (lax.add(i, np.int32(1)), keep(b, b2), keep(cc, c2), keep(d, d2), keep(h, h2),
                lax.bitwise_or(done, converged))

    b0 = lax.add(lax.sub(x, a), _full(a, 1.0))
    d0 = lax.div(_full(a, 1.0), guard(b0))
    init = (np.int32(1), b0, _full(a, 1.0 / tiny), d0, d0, lax.ne(a, a))
    *_, h, _ = while_loop(cond, body, init)
    return lax.mul(lax.exp(_log_prefix(a, x)), h)


def _zeta_values(count: int):
    """zeta(2) .. zeta(count + 1) in double precision (Euler-Maclaurin after 50 terms)."""
    values = []
    for k in range(2, count + 2):
        n = 50
        head = sum(m ** -k for m in range(1, n))
        values.append(head + n ** (1 - k) / (k - 1) + 0.5 * n ** -k + k * n ** (-k - 1) / 12
                      - k * (k + 1) * (k + 2) * n ** (-k - 3) / 720)
    return values


# log Gamma(1 + a) = -euler a + sum_k (-1)^k zeta(k) a^k / k for |a| < 1: used for a < 1/4,
# where lgamma(1 + a) would see 1 + a rounded.
_LGAMMA1P = [(-1) ** k * z / k for k, z in enumerate(_zeta_values(24), start=2)]
_EULER = np.euler_gamma


def _upper_gamma_small_a(a, x):
    """Q(a, x) for 0 < a < 1/4 and 0 < x < 2, without the cancellation of 1 - P:
    Q = -expm1(a log x - log Gamma(1 + a)) - a x^a / Gamma(1 + a) sum_n (-x)^n / (n! (a + n))."""
    lgamma1p = _full(a, 0.0)
    for c in _LGAMMA1P[::-1]:
        lgamma1p = lax.mul(lax.add(lgamma1p, _full(a, c)), a)
    lgamma1p = lax.mul(lax.sub(lgamma1p, _full(a, _EULER)), a)
    log_front = lax.sub(lax.mul(a, lax.log(x)), lgamma1p)
    head = lax.neg(lax.expm1(log_front))
    total, term = _full(a, 0.0), _full(a, 1.0)
    for n in range(1, 40):  # x < 2: 2^40 / 40! is far below float64's eps
        term = lax.mul(term, lax.div(lax.neg(x), _full(x, float(n))))
        total = lax.add(total, lax.div(term, lax.add(a, _full(a, float(n)))))
    tail = lax.mul(lax.mul(a, lax.exp(log_front)), total)
    return lax.sub(head, tail)


def _igamma_impl(a, x, upper: bool):
    a, x = _broadcast_all(a, x)
    one = _full(a, 1.0)
    # P(0, x) = 1 for x > 0 (the limit, as SciPy; JAX gives NaN for 0 < x < 1).
    a_zero = lax.eq(a, _full(a, 0.0))
    a_orig, a = a, structural.select(a_zero, one, a)
    use_series = lax.lt(x, lax.add(a, _full(a, 1.0)))
    # Each method on the inputs it is meant for (safe values elsewhere, then selected away).
    xs = structural.select(use_series, x, one)
    xc = structural.select(use_series, lax.add(a, _full(a, 2.0)), x)
    xs = structural.select(lax.gt(xs, _full(a, 0.0)), xs, one)
    p_series = _gamma_series(a, xs)
    q_fraction = _gamma_continued_fraction(a, xc)
    if upper:
        out = structural.select(use_series, lax.sub(one, p_series), q_fraction)
        # Small a: P is near 1 and 1 - P cancels (a = 1e-5, x = 1 lost 5% in float32).
        small_a = lax.bitwise_and(lax.lt(a, _full(a, 0.25)), lax.lt(x, _full(x, 2.0)))
        small_a = lax.bitwise_and(small_a, lax.gt(x, _full(x, 0.0)))
        q_small = _upper_gamma_small_a(structural.select(small_a, a, _full(a, 0.125)),
                                       structural.select(small_a, x, one))
        out = structural.select(small_a, q_small, out)
        at_zero, at_inf = one, _full(a, 0.0)
    else:
        out = structural.select(use_series, p_series, lax.sub(one, q_fraction))
        at_zero, at_inf = _full(a, 0.0), one
    out = structural.select(lax.eq(x, _full(x, 0.0)), at_zero, out)
    out = structural.select(lax.bitwise_or(lax.eq(x, _full(x, np.inf)), a_zero), at_inf, out)
    x_zero = lax.eq(x, _full(x, 0.0))
    invalid = lax.bitwise_or(
        lax.bitwise_or(lax.lt(x, _full(x, 0.0)), lax.lt(a_orig, _full(a, 0.0))),
        lax.bitwise_or(lax.bitwise_or(lax.ne(a_orig, a_orig), lax.ne(x, x)),
                       lax.bitwise_and(a_zero, x_zero)))
    return structural.select(invalid, _full(a, np.nan), out)


igamma_p = binop("igamma", FLOAT, lowering.lower_fun(
    _upcast(lambda a, x: _igamma_impl(a, x, upper=False)), multiple_results=False))
igammac_p = binop("igammac", FLOAT, lowering.lower_fun(
    _upcast(lambda a, x: _igamma_impl(a, x, upper=True)), multiple_results=False))


def _all_done(done):
    return lax.reduce_and(done, tuple(range(done.ndim)))


def _gamma_series_grad_a(a, x, per_density=False):
    """dP/da from the power series, carrying each term's derivative in `a` alongside it and
    iterating until both the terms and their derivatives are negligible. `per_density`
    divides by the gamma density x^(a-1) e^-x / Gamma(a) analytically (no exponentials)."""
    eps = _eps(a.dtype)
    zero, one = _full(a, 0.0), _full(a, 1.0)

    def cond(c):
        n, *_, done = c
        return lax.bitwise_and(lax.lt(n, np.int32(_MAX_ITERATIONS)),
                               lax.bitwise_not(_all_done(done)))

    def body(c):
        n, term, dterm, total, dtotal, done = c
        denom = lax.add(a, lax.broadcast_in_dim(
            lax.convert_element_type(lax.add(n, np.int32(1)), a.dtype), a.shape, ()))
        term2 = lax.div(lax.mul(term, x), denom)
        dterm2 = lax.sub(lax.div(lax.mul(dterm, x), denom), lax.div(term2, denom))
        total2, dtotal2 = lax.add(total, term2), lax.add(dtotal, dterm2)
        converged = lax.bitwise_and(
            lax.le(lax.abs(term2), lax.mul(lax.abs(total2), _full(a, eps))),
            lax.le(lax.abs(dterm2), lax.mul(lax.abs(dtotal2), _full(a, eps))))
        keep = lambda old, new: structural.select(done, old, new)  # noqa: E731
        return (lax.add(n, np.int32(1)), keep(term, term2), keep(dterm, dterm2),
                keep(total, total2), keep(dtotal, dtotal2), lax.bitwise_or(done, converged))

    init = (np.int32(0), one, zero, one, zero, lax.ne(a, a))
    _, _, _, total, dtotal, _ = while_loop(cond, body, init)
    a1 = lax.add(a, one)
    dlog_front = lax.sub(lax.log(x), lax.digamma(a1))
    inner = lax.add(lax.mul(dlog_front, total), dtotal)
    if per_density:  # the front x^a e^-x / Gamma(a+1) over the density is x / a
        return lax.mul(lax.div(x, a), inner)
    log_front = lax.sub(lax.sub(lax.mul(a, lax.log(x)), x), lax.lgamma(a1))
    return lax.mul(lax.exp(log_front), inner)


def _gamma_fraction_grad_a(a, x, per_density=False):
    """dQ/da from the continued fraction: the Lentz recurrences with their derivatives.
    `per_density` divides by the gamma density x^(a-1) e^-x / Gamma(a) analytically."""
    eps, tiny = _eps(a.dtype), _tiny(a.dtype)
    zero, one = _full(a, 0.0), _full(a, 1.0)

    def guarded(v, dv):
        small = lax.lt(lax.abs(v), _full(v, tiny))
        return structural.select(small, _full(v, tiny), v), structural.select(small, zero, dv)

    def cond(c):
        i, *_, done = c
        return lax.bitwise_and(lax.lt(i, np.int32(_MAX_ITERATIONS)),
                               lax.bitwise_not(_all_done(done)))

    def body(c):
        i, b, cc, dc, d, dd, h, dh, done = c
        fi = lax.broadcast_in_dim(lax.convert_element_type(i, a.dtype), a.shape, ())
        an, dan = lax.neg(lax.mul(fi, lax.sub(fi, a))), fi
        b2 = lax.add(b, _full(a, 2.0))  # db/da = -1 throughout
        den, dden = guarded(lax.add(lax.mul(an, d), b2),
                            lax.sub(lax.add(lax.mul(dan, d), lax.mul(an, dd)), one))
        d2 = lax.div(one, den)
        dd2 = lax.neg(lax.mul(lax.mul(d2, d2), dden))
        c2, dc2 = guarded(lax.add(b2, lax.div(an, cc)),
                          lax.sub(lax.sub(lax.div(dan, cc),
                                          lax.div(lax.mul(an, dc), lax.mul(cc, cc))), one))
        delta, ddelta = lax.mul(d2, c2), lax.add(lax.mul(dd2, c2), lax.mul(d2, dc2))
        h2, dh2 = lax.mul(h, delta), lax.add(lax.mul(dh, delta), lax.mul(h, ddelta))
        converged = lax.bitwise_and(
            lax.le(lax.abs(lax.sub(delta, one)), _full(a, eps)),
            lax.le(lax.abs(lax.mul(ddelta, h2)), lax.mul(lax.abs(dh2), _full(a, eps))))
        keep = lambda old, new: structural.select(done, old, new)  # noqa: E731
        return (lax.add(i, np.int32(1)), keep(b, b2), keep(cc, c2), keep(dc, dc2), keep(d, d2),
                keep(dd, dd2), keep(h, h2), keep(dh, dh2), lax.bitwise_or(done, converged))

    b0 = lax.add(lax.sub(x, a), one)
    den0, dden0 = guarded(b0, _full(a, -1.0))
    d0 = lax.div(one, den0)
    dd0 = lax.neg(lax.mul(lax.mul(d0, d0), dden0))
    init = (np.int32(1), b0, _full(a, 1.0 / tiny), zero, d0, dd0, d0, dd0, lax.ne(a, a))
    *_, h, dh, _ = while_loop(cond, body, init)
    dlog_prefix = lax.sub(lax.log(x), lax.digamma(a))
    inner = lax.add(lax.mul(dlog_prefix, h), dh)
    if per_density:  # the prefix x^a e^-x / Gamma(a) over the density is x
        return lax.mul(x, inner)
    return lax.mul(lax.exp(_log_prefix(a, x)), inner)


def _igamma_grad_a_impl(a, x, per_density=False):
    a, x = _broadcast_all(a, x)
    one = _full(a, 1.0)
    use_series = lax.lt(x, lax.add(a, one))
    xs = structural.select(use_series, x, one)
    xs = structural.select(lax.gt(xs, _full(a, 0.0)), xs, one)
    xc = structural.select(use_series, lax.add(a, _full(a, 2.0)), x)
    out = structural.select(use_series, _gamma_series_grad_a(a, xs, per_density),
                            lax.neg(_gamma_fraction_grad_a(a, xc, per_density)))
    flat = lax.bitwise_or(lax.eq(x, _full(x, 0.0)), lax.eq(x, _full(x, np.inf)))
    out = structural.select(flat, _full(a, 0.0), out)
    invalid = lax.bitwise_or(lax.bitwise_or(lax.lt(x, _full(x, 0.0)), lax.le(a, _full(a, 0.0))),
                             lax.bitwise_or(lax.ne(a, a), lax.ne(x, x)))
    return structural.select(invalid, _full(a, np.nan), out)


igamma_grad_a_p = binop("igamma_grad_a", FLOAT, lowering.lower_fun(
    _upcast(_igamma_grad_a_impl), multiple_results=False))


def _random_gamma_grad_impl(a, x):
    # A gamma sample x with P(a, x) = u fixed: dx/da = -(dP/da) / (dP/dx), where dP/dx is
    # the gamma density; the quotient is formed without the density's exponential, which
    # would lose float32 digits to cancellation for large a. A zero sample has derivative 0
    # (as in JAX); an infinite one none.
    a, x = _broadcast_all(a, x)
    out = lax.neg(_igamma_grad_a_impl(a, x, per_density=True))
    out = structural.select(lax.eq(x, _full(x, 0.0)), _full(a, 0.0), out)
    return structural.select(lax.eq(x, _full(x, np.inf)), _full(a, np.nan), out)


random_gamma_grad_p = binop("random_gamma_grad", FLOAT, lowering.lower_fun(
    _upcast(_random_gamma_grad_impl), multiple_results=False))

for _prim in (igamma_p, igammac_p, igamma_grad_a_p, random_gamma_grad_p):
    batching.defbroadcasting(_prim)


def _igamma_dx(g, a, x):
    log_d = lax.sub(lax.sub(lax.mul(lax.sub(a, _full(a, 1.0)), lax.log(x)), x), lax.lgamma(a))
    return lax.mul(g, lax.exp(log_d))


ad.defjvp(igamma_p, lambda g, a, x: lax.mul(g, igamma_grad_a(a, x)), _igamma_dx)
ad.defjvp(igammac_p, lambda g, a, x: lax.neg(lax.mul(g, igamma_grad_a(a, x))),
          lambda g, a, x: lax.neg(_igamma_dx(g, a, x)))


def _random_gamma_grad_jvp(primals, tangents):
    """Forward mode through the implementation's own iterations (as JAX differentiates it);
    reverse mode stays unavailable, the loops having data-dependent trip counts."""
    (out,), (out_tangent,) = ad.jvp_flat(
        lambda a, x: [_upcast(_random_gamma_grad_impl)(a, x)], primals, tangents)
    return out, out_tangent


ad.primitive_jvps[random_gamma_grad_p] = _random_gamma_grad_jvp


def igamma(a, x):
    """Regularized lower incomplete gamma function P(a, x)."""
    return igamma_p.bind(a, x)


def igammac(a, x):
    """Regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return igammac_p.bind(a, x)


def igamma_grad_a(a, x):
    """Derivative of `igamma(a, x)` with respect to `a`."""
    return igamma_grad_a_p.bind(a, x)


def random_gamma_grad(a, x):
    """Derivative of a Gamma(a) sample `x` with respect to `a` (implicit differentiation)."""
    return random_gamma_grad_p.bind(a, x)


# ---------------------------------------------------------------------------------------------
# Regularized incomplete beta function

def _beta_fraction(a, b, x):
    """I_x(a, b) by its continued fraction (modified Lentz), for x < (a+1)/(a+b+2)."""
    eps, tiny = _eps(a.dtype), _tiny(a.dtype)
    one = _full(a, 1.0)

    def guard(v):
        return structural.select(lax.lt(lax.abs(v), _full(v, tiny)), _full(v, tiny), v)

    def step(aa, c, d, h):
        d = lax.div(one, guard(lax.add(one, lax.mul(aa, d))))
        c = guard(lax.add(one, lax.div(aa, c)))
        return c, d, lax.mul(h, lax.mul(d, c)), lax.mul(d, c)

    def cond(carry):
        m, *_, done = carry
        return lax.bitwise_and(lax.lt(m, np.int32(_MAX_ITERATIONS)),
                               lax.bitwise_not(lax.reduce_and(done, tuple(range(done.ndim)))))

    def body(carry):
        m, c, d, h, done = carry
        fm = lax.broadcast_in_dim(lax.convert_element_type(m, a.dtype), a.shape, ())
        m2 = lax.add(fm, fm)
        even = lax.div(lax.mul(lax.mul(fm, lax.sub(b, fm)), x),
                       lax.mul(lax.add(lax.sub(a, one), m2), lax.add(a, m2)))
        c1, d1, h1, _ = step(even, c, d, h)
        odd = lax.neg(lax.div(lax.mul(lax.mul(lax.add(a, fm), lax.add(lax.add(a, b), fm)), x),
                              lax.mul(lax.add(a, m2), lax.add(lax.add(a, one), m2))))
        c2, d2, h2, delta = step(odd, c1, d1, h1)
        converged = lax.le(lax.abs(lax.sub(delta, one)), _full(a, eps))
        keep = lambda old, new: structural.select(done, old, new)  # noqa: E731
        return (lax.add(m, np.int32(1)), keep(c, c2), keep(d, d2), keep(h, h2),
                lax.bitwise_or(done, converged))

    d0 = lax.div(one, guard(lax.sub(one, lax.div(lax.mul(lax.add(a, b), x), lax.add(a, one)))))
    _, _, _, h, _ = while_loop(cond, body, (np.int32(1), one, d0, d0, lax.ne(a, a)))
    log_front = lax.sub(lax.add(lax.mul(a, lax.log(x)), lax.mul(b, lax.log1p(lax.neg(x)))),
                        lax.add(lax.log(a), _log_beta(a, b)))
    return lax.mul(lax.exp(log_front), h)


def _log_beta(a, b):
    return lax.sub(lax.add(lax.lgamma(a), lax.lgamma(b)), lax.lgamma(lax.add(a, b)))


def _betainc_impl(a, b, x):
    a, b, x = _broadcast_all(a, b, x)
    one, half = _full(a, 1.0), _full(a, 0.5)
    flip = lax.gt(x, lax.div(lax.add(a, one), lax.add(lax.add(a, b), _full(a, 2.0))))
    aa, bb = structural.select(flip, b, a), structural.select(flip, a, b)
    xx = structural.select(flip, lax.sub(one, x), x)
    inside = lax.bitwise_and(lax.gt(xx, _full(a, 0.0)), lax.lt(xx, one))
    value = _beta_fraction(aa, bb, structural.select(inside, xx, half))
    value = structural.select(flip, lax.sub(one, value), value)
    zero, inf = _full(a, 0.0), _full(a, np.inf)
    x_zero, x_one = lax.eq(x, zero), lax.eq(x, one)
    value = structural.select(x_zero, zero, value)
    value = structural.select(x_one, one, value)
    # The limits a -> 0 (or b -> inf) put all the mass at 0, b -> 0 (or a -> inf) at 1.
    a_zero = lax.bitwise_or(lax.eq(a, zero), lax.eq(b, inf))
    b_zero = lax.bitwise_or(lax.eq(b, zero), lax.eq(a, inf))
    value = structural.select(lax.bitwise_or(lax.bitwise_and(b_zero, lax.bitwise_not(x_one)),
                                             lax.bitwise_and(a_zero, x_zero)), zero, value)
    value = structural.select(lax.bitwise_or(lax.bitwise_and(a_zero, lax.bitwise_not(x_zero)),
                                             lax.bitwise_and(b_zero, x_one)), one, value)
    invalid = lax.bitwise_or(
        lax.bitwise_or(lax.lt(x, zero), lax.gt(x, one)),
        lax.bitwise_or(lax.lt(a, zero), lax.lt(b, zero)))
    invalid = lax.bitwise_or(invalid, lax.bitwise_and(a_zero, b_zero))
    invalid = lax.bitwise_or(invalid, lax.bitwise_or(
        lax.ne(x, x), lax.bitwise_or(lax.ne(a, a), lax.ne(b, b))))
    return structural.select(invalid, _full(a, np.nan), value)


regularized_incomplete_beta_p = naryop(
    "regularized_incomplete_beta", [FLOAT, FLOAT, FLOAT],
    lowering.lower_fun(_upcast(_betainc_impl), multiple_results=False))
batching.defbroadcasting(regularized_incomplete_beta_p)


def _betainc_dx(g, a, b, x):
    one = _full(x, 1.0)
    log_d = lax.sub(lax.add(lax.mul(lax.sub(a, one), lax.log(x)),
                            lax.mul(lax.sub(b, one), lax.log1p(lax.neg(x)))), _log_beta(a, b))
    return lax.mul(g, lax.exp(log_d))


def _betainc_grad_not_implemented(g, a, b, x):
    raise ValueError("Betainc gradient with respect to a and b not supported.")


ad.defjvp(regularized_incomplete_beta_p, _betainc_grad_not_implemented,
          _betainc_grad_not_implemented, _betainc_dx)


def betainc(a, b, x):
    """Regularized incomplete beta function I_x(a, b)."""
    return regularized_incomplete_beta_p.bind(a, b, x)


del dtypes, hlo_elementwise
