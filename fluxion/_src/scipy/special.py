"""`fluxion.scipy.special`: special functions, written with lax and fluxion.numpy.

Each function takes arrays (promoted to an inexact dtype as in JAX) and differentiates through
its definition unless it says otherwise.
"""
from __future__ import annotations

import functools
import math

import numpy as np

import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src import core, nn_functions
from fluxion._src.custom_derivatives import custom_jvp
from fluxion._src.numpy.util import broadcast_arrays_for_op, promote_dtypes_inexact
from fluxion._src.nn_functions import logsumexp  # noqa: F401


def _inexact(*args):
    """The arguments as arrays of their common inexact dtype (jnp's promotion)."""
    arrays = promote_dtypes_inexact(*args)
    return arrays if len(arrays) > 1 else arrays[0]


def _elementwise(name, *args):
    """`_inexact`, broadcast to one shape: lax's special functions need operands of equal rank."""
    return broadcast_arrays_for_op(name, *promote_dtypes_inexact(*args))


def _real_only(name, x):
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs.")


# ---------------------------------------------------------------------------------------------
# Error function, logistic, normal distribution

def erf(x):
    """The error function."""
    return lax.erf(_inexact(x))


def erfc(x):
    """The complementary error function, 1 - erf(x)."""
    return lax.erfc(_inexact(x))


def erfinv(x):
    """The inverse of erf."""
    return lax.erf_inv(_inexact(x))


def expit(x):
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    return lax.logistic(_inexact(x))


def logit(x):
    """log(x / (1 - x)), the inverse of expit."""
    x = _inexact(x)
    return lax.log(x / (1 - x))


def softmax(x, /, *, axis=None):
    """exp(x) / sum(exp(x)) over `axis` (SciPy's default: all axes)."""
    return nn_functions.softmax(_inexact(x), axis=axis)


def log_softmax(x, /, *, axis=None):
    """x - logsumexp(x) over `axis` (SciPy's default: all axes)."""
    return nn_functions.log_softmax(_inexact(x), axis=axis)


def ndtr(x):
    """The standard normal CDF."""
    x = jnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):  # as JAX (and so its stats.norm.cdf)
        raise TypeError(f"x.dtype={x.dtype} is not supported, see docstring for supported "
                        "types.")
    half_sqrt2 = 0.5 * math.sqrt(2.0)
    w = x * jnp.asarray(half_sqrt2, x.dtype)
    z = jnp.abs(w)
    y = jnp.where(z < half_sqrt2, 1.0 + lax.erf(w),
                  jnp.where(w > 0, 2.0 - lax.erfc(z), lax.erfc(z)))
    return 0.5 * y


# Cephes ndtri.c (S. L. Moshier): rational approximations of the inverse normal CDF on
# (exp(-2), 1 - exp(-2)), and for the tails with z = sqrt(-2 log p) below and above 8.
_NDTRI_P0 = [-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
             1.39312609387279679503e1, -1.23916583867381258016e0]
_NDTRI_Q0 = [1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
             -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
             1.59056225126211695515e1, -1.18331621121330003142e0]
_NDTRI_P1 = [4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
             4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
             -1.40256079171354495875e-1, -3.50424626827848203418e-2,
             -8.57456785154685413611e-4]
_NDTRI_Q1 = [1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
             1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
             -3.80806407691578277194e-2, -9.33259480895457427372e-4]
_NDTRI_P2 = [3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
             1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
             3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9]
_NDTRI_Q2 = [1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
             2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
             2.89247864745380683936e-6, 6.79019408009981274425e-9]


def _polyval(coefficients, x):
    out = jnp.zeros_like(x)
    for c in coefficients:
        out = out * x + c
    return out


def ndtri(p):
    """The inverse of the standard normal CDF (Cephes' rational approximations)."""
    p = jnp.asarray(p)
    if p.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={p.dtype} is not supported, see docstring for supported "
                        "types.")
    p = lax.convert_element_type(p, p.dtype)  # a strong result for a Python float, as JAX
    high = 1.0 - math.exp(-2.0)
    q = jnp.where(p > high, 1.0 - p, p)  # the tail nearer the value
    q = jnp.where(q == 0, 0.5, q)  # p = 0 or 1: any value that keeps NaNs out
    w = q - 0.5
    ww = w * w
    # The same operation order as JAX's, so that the values agree bit for bit.
    centre = (w + w * ww * (_polyval(_NDTRI_P0, ww) / _polyval(_NDTRI_Q0, ww))) \
        * -math.sqrt(2.0 * math.pi)
    z = jnp.sqrt(-2.0 * jnp.log(q))
    inv = 1.0 / z
    start = z - jnp.log(z) / z
    far = start - _polyval(_NDTRI_P2, inv) / _polyval(_NDTRI_Q2, inv) / z
    near = start - _polyval(_NDTRI_P1, inv) / _polyval(_NDTRI_Q1, inv) / z
    x = jnp.where(q > math.exp(-2.0), centre, jnp.where(z >= 8.0, far, near))
    x = jnp.where(p > high, x, -x)
    return jnp.where(p == 0, -np.inf, jnp.where(p == 1, np.inf, x))


def _double_factorial(n: int) -> int:
    return math.prod(range(n, 0, -2))


def _asymptotic_series(x, order):
    """1 - 1/x^2 + 3/x^4 - 15/x^6 + ...: the series of log_ndtr for very negative x."""
    total = jnp.ones_like(x)
    x2n = x * x
    for n in range(1, order + 1):
        term = _double_factorial(2 * n - 1) / x2n
        total = total - term if n % 2 else total + term
        x2n = x2n * x * x
    return total


def log_ndtr(x, series_order: int = 3):
    """log of the standard normal CDF, accurate far into both tails."""
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    x = jnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.dtype} is not supported.")
    return _log_ndtr(x, series_order)


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _log_ndtr(x, series_order):
    lower, upper = (-20.0, 8.0) if x.dtype == np.float64 else (-10.0, 5.0)
    above = x > upper
    cdf = ndtr(jnp.where(above, -x, jnp.maximum(x, lower)))
    tail_x = jnp.minimum(x, lower)  # where x is not in the lower tail, a harmless value
    log_scale = -0.5 * tail_x * tail_x - jnp.log(-tail_x) - 0.5 * math.log(2.0 * math.pi)
    lower_tail = log_scale + jnp.log(_asymptotic_series(tail_x, series_order))
    return jnp.where(above, -cdf, jnp.where(x > lower, jnp.log(cdf), lower_tail))


@_log_ndtr.defjvp
def _log_ndtr_jvp(series_order, primals, tangents):
    # d/dx log Phi(x) = phi(x) / Phi(x): the derivative of the truncated tail series would be
    # off by its truncation error (1e-4 relative at x = -12 in float32).
    (x,), (dx,) = primals, tangents
    out = _log_ndtr(x, series_order)
    log_pdf = -0.5 * x * x - 0.5 * math.log(2.0 * math.pi)
    return out, dx * jnp.exp(log_pdf - out)


# ---------------------------------------------------------------------------------------------
# Gamma and beta functions

def gammaln(x):
    """log |Gamma(x)|."""
    return lax.lgamma(_inexact(x))


def loggamma(x):
    """The principal branch of log Gamma(x): for real x, NaN where x <= 0 (as SciPy); for
    complex x, the continuation from the positive axis with one cut on the negative axis."""
    x = _inexact(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return _complex_loggamma(x)
    return jnp.where(x > 0, lax.lgamma(x), np.nan)


def _stirling_coefficients(terms: int):
    """B_2j / (2j (2j - 1)) for j = 1..terms: the coefficients of Stirling's series."""
    from fluxion._src.scipy.special_integrals import _bernoulli_numbers
    bernoulli = _bernoulli_numbers(2 * terms)
    return [float(bernoulli[2 * j] / (2 * j * (2 * j - 1))) for j in range(1, terms + 1)]


_STIRLING = _stirling_coefficients(8)
_SHIFT = 8  # Stirling's series is used at |z| >= 8, reached by recurrence


def _loggamma_right(z):
    """log Gamma(z) for Re z >= 1/2: the recurrence log Gamma(z) = log Gamma(z + n) -
    sum_k log(z + k) (principal logs: every z + k is in the right half plane) up to
    Re z >= 8, then Stirling's series."""
    n = jnp.clip(jnp.ceil(_SHIFT - jnp.real(z)), 0, _SHIFT)
    logs = jnp.zeros_like(z)
    for k in range(_SHIFT):
        logs = logs + jnp.where(k < n, jnp.log(z + k), 0)
    v = z + n.astype(z.dtype)
    inverse, inverse2 = 1 / v, 1 / (v * v)
    series = jnp.zeros_like(v)
    for c in _STIRLING[::-1]:
        series = series * inverse2 + c
    stirling = (v - 0.5) * jnp.log(v) - v + 0.5 * math.log(2 * math.pi) + series * inverse
    return stirling - logs


def _log_sin_pi(z):
    """The principal log of sin(pi z), without overflow for large |Im z|."""
    x, y = jnp.real(z), jnp.imag(z)
    r = jnp.fmod(x, 2.0)  # exact: sin(pi x) keeps its digits for large x
    sin_pi, cos_pi = jnp.sin(math.pi * r), jnp.cos(math.pi * r)
    near = jnp.abs(y) < 10
    # |sin(pi z)|^2 = sin(pi x)^2 + sinh(pi y)^2, scaled by the larger (no underflow near 0)
    a, b = jnp.abs(sin_pi), jnp.abs(jnp.sinh(math.pi * jnp.where(near, y, 0.0)))
    big, small = jnp.maximum(a, b), jnp.minimum(a, b)
    ratio = small / jnp.where(big > 0, big, 1.0)
    log_modulus = jnp.where(near, jnp.log(big) + 0.5 * jnp.log1p(ratio * ratio),
                            math.pi * jnp.abs(y) - math.log(2.0))
    # arg of sin(pi x) cosh(pi y) + i cos(pi x) sinh(pi y); on the real axis, the limit from
    # above (as SciPy): a negative value is on the side of the sign of cos(pi x) (taken from
    # r exactly, so that half-integers, where it is 0, go to +pi)
    cos_negative = (jnp.abs(r) > 0.5) & (jnp.abs(r) < 1.5)
    above = jnp.where(cos_negative, -math.pi, math.pi)
    angle = jnp.where(y == 0, jnp.where(sin_pi < 0, above, 0.0),
                      jnp.arctan2(cos_pi * jnp.tanh(math.pi * y), sin_pi))
    return lax.complex(log_modulus, angle)


def _complex_loggamma(z):
    """SciPy's principal branch: the recurrence and Stirling for Re z >= 1/2; the reflection
    log pi - log sin(pi z) - log Gamma(1 - z) elsewhere, moved onto the branch by
    2 pi i sign(Im z) floor(Re z / 2 + 1/4) (Hare, J. Symbolic Comput. 1997)."""
    x, y = jnp.real(z), jnp.imag(z)
    reflect = x < 0.5
    right = _loggamma_right(jnp.where(reflect, 1 - z, z))
    branch = jnp.where(y < 0, -1.0, 1.0) * jnp.floor(0.5 * x + 0.25)
    safe = jnp.where(reflect, z, 0.5)
    reflected = math.log(math.pi) - _log_sin_pi(safe) - right \
        + lax.complex(jnp.zeros_like(x), 2 * math.pi * branch)
    value = jnp.where(reflect, reflected, right)
    pole = (y == 0) & (x <= 0) & (x == jnp.floor(x))
    return jnp.where(pole | jnp.isnan(x) | jnp.isnan(y), complex(np.nan, np.nan), value)


def gammasgn(x):
    """The sign of Gamma(x): NaN at the poles (non-positive integers) and for NaN."""
    x = _inexact(x)
    _real_only("gammasgn", x)
    floor = jnp.floor(x)
    negative = x < 0
    nan = (negative & (x == floor)) | jnp.isnan(x)
    minus = (negative & (floor % 2 != 0)) | ((x == 0) & jnp.signbit(x))
    return jnp.where(nan, np.nan, jnp.where(minus, -1.0, 1.0)).astype(x.dtype)


def gamma(x):
    """The gamma function, sign(Gamma(x)) * exp(log|Gamma(x)|); exp(loggamma(x)) for complex
    x."""
    x = _inexact(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return jnp.exp(_complex_loggamma(x))
    return gammasgn(x) * jnp.exp(gammaln(x))


def digamma(x):
    """The logarithmic derivative of the gamma function."""
    return lax.digamma(_inexact(x))


def polygamma(n, x):
    """The n-th derivative of digamma."""
    n, x = jnp.asarray(n), _inexact(x)
    if not jnp.issubdtype(n.dtype, np.integer):
        raise ValueError(f"polygamma: n must be an integer array, got dtype {n.dtype}")
    from fluxion._src.numpy.util import convert
    from fluxion.core import get_aval
    n = convert(n, x.dtype, get_aval(x).weak_type)  # x's weak type
    n, x = jnp.broadcast_arrays(n, x)  # (lax.polygamma takes equal shapes)
    return lax.polygamma(n, x)


def _log_gamma_ratio(a, b):
    """log(Gamma(b) / Gamma(a + b)) for b >= 8 and a <= b, by the asymptotic series of the
    remainder of Stirling's formula (SciPy's cdflib `algdiv`); the lgamma difference loses all
    digits when b is huge."""
    coefficients = (0.833333333333333e-01, -0.277777777760991e-02, 0.793650666825390e-03,
                    -0.595202931351870e-03, 0.837308034031215e-03, -0.165322962780713e-02)
    h = a / b
    c = h / (1 + h)
    c2 = c * c
    # s[n] = (1 - c**n) / (1 - c) for n = 1, 3, ..., 11
    sums = [1.0]
    for _ in range(5):
        sums.append(1.0 + (c + c2 * sums[-1]))
    t = (1.0 / b) ** 2
    w = coefficients[5] * sums[5]
    for k in range(4, -1, -1):
        w = w * t + coefficients[k] * sums[k]
    w = w * (c / b)
    u = (b + (a - 0.5)) * jnp.log1p(a / b)
    v = a * (jnp.log(b) - 1.0)
    return jnp.where(u <= v, (w - v) - u, (w - u) - v)


def betaln(a, b):
    """log |B(a, b)|; for max(a, b) >= 8 an asymptotic series keeps the digits the
    difference gammaln(b) - gammaln(a + b) would lose."""
    a, b = _inexact(a, b)
    a, b = jnp.minimum(a, b), jnp.maximum(a, b)
    small_b = lax.lgamma(a) + (lax.lgamma(b) - lax.lgamma(a + b))
    large_b = lax.lgamma(a) + _log_gamma_ratio(a, b)
    return jnp.where(b < 8, small_b, large_b)


def beta(a, b):
    """The beta function B(a, b)."""
    a, b = _inexact(a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * jnp.exp(betaln(a, b))


def multigammaln(a, d):
    """log of the multivariate gamma function of dimension `d` (a concrete number, truncated to
    an int as JAX does)."""
    d = int(core.concrete_or_error(d, "The d argument of multigammaln must be concrete"))
    a = _inexact(a)
    constant = 0.25 * d * (d - 1) * math.log(math.pi)
    shifts = (jnp.arange(d, dtype=a.dtype) / 2).reshape((1,) * a.ndim + (d,))  # (no rank
    return jnp.sum(gammaln(a[..., None] - shifts), axis=-1) + constant  # promotion: 'raise')


def factorial(n, exact: bool = False):
    """n! = Gamma(n + 1) (0 for negative n); exact=True is not supported, as in JAX."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n = _inexact(n)
    return jnp.where(n < 0, 0, jnp.exp(gammaln(n + 1)))  # keeps n's dtype and weak type


def poch(z, m):
    """The Pochhammer symbol (rising factorial) Gamma(z + m) / Gamma(z)."""
    z, m = _inexact(z, m)
    _real_only("poch", z)
    return jnp.where(m == 0.0, 1.0, gamma(z + m) / gamma(z)).astype(z.dtype)


def comb(N, k, *, repetition: bool = False):
    """Binomial coefficient C(N, k) (with repetition: C(N + k - 1, k)); 0 outside 0 <= k <= N."""
    N, k = _inexact(N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), 1.0, comb(N + k - 1, k))
    valid = (k <= N) & (N >= 0) & (k >= 0)
    n, kk = jnp.where(valid, N, 0.0), jnp.where(valid, k, 0.0)
    value = jnp.exp(gammaln(n + 1) - gammaln(kk + 1) - gammaln(n + 1 - kk))
    return jnp.where(valid, value, 0.0)


# ---------------------------------------------------------------------------------------------
# Entropy and logs

@custom_jvp
def xlogy(x, y):
    """x * log(y), 0 where x == 0."""
    x, y = _inexact(x, y)
    keep = (x != 0) | jnp.isnan(y)  # a NaN y propagates even where x == 0, as SciPy
    return jnp.where(keep, x * jnp.log(y), jnp.zeros_like(x))


@xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    out = xlogy(x, y)
    x, y = _inexact(x, y)
    # x / y, but 0 at x = y = 0 (JAX: NaN); kept as a quotient where y != 0 so that its own
    # derivative in x (1 / y, the mixed second derivative) survives at x = 0.
    return out, tx * jnp.log(y) + x / jnp.where((x == 0) & (y == 0), 1, y) * ty


@custom_jvp
def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0."""
    x, y = _inexact(x, y)
    keep = (x != 0) | jnp.isnan(y)  # a NaN y propagates even where x == 0, as SciPy
    return jnp.where(keep, x * jnp.log1p(y), jnp.zeros_like(x))


@xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    out = xlog1py(x, y)
    x, y = _inexact(x, y)
    return out, tx * jnp.log1p(y) + x / jnp.where((x == 0) & (y == -1), 1, 1 + y) * ty



def entr(x):
    """-x log x for x > 0, 0 at 0, -inf for x < 0."""
    x = _inexact(x)
    _real_only("entr", x)
    return jnp.where(x < 0, -np.inf, -xlogy(x, x))


def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 for p == 0 <= q; inf otherwise."""
    p, q = _inexact(p, q)
    _real_only("rel_entr", p)
    both = (p > 0) & (q > 0)
    safe_p, safe_q = jnp.where(both, p, 1.0), jnp.where(both, q, 1.0)
    # p log(p / q) has no cancellation (exactly 0 at p == q, where p log p - p log q left
    # rounding noise of order eps p log p under jit); the difference of logs only where the
    # ratio overflows or underflows.
    ratio = safe_p / safe_q
    usable = jnp.isfinite(ratio) & (ratio > 0)
    value = jnp.where(usable, safe_p * jnp.log(jnp.where(usable, ratio, 1.0)),
                      xlogy(safe_p, safe_p) - xlogy(safe_p, safe_q))
    return jnp.where(both, value, jnp.where((p == 0) & (q >= 0), 0.0, np.inf))


def kl_div(p, q):
    """p log(p / q) - p + q (elementwise Kullback-Leibler divergence)."""
    p, q = _inexact(p, q)
    _real_only("kl_div", p)
    return rel_entr(p, q) - p + q


def boxcox1p(x, lmbda):
    """((1 + x)**lmbda - 1) / lmbda, and log1p(x) at lmbda == 0."""
    x, lmbda = _inexact(x, lmbda)
    zero = lmbda == 0
    safe = jnp.where(zero, 1.0, lmbda)
    log1p_x = jnp.log1p(x)
    return jnp.where(zero, log1p_x, jnp.expm1(safe * log1p_x) / safe)


def boxcox(x, lmbda):
    """(x**lmbda - 1) / lmbda, and log(x) at lmbda == 0."""
    x, lmbda = _inexact(x, lmbda)
    zero = lmbda == 0
    safe = jnp.where(zero, 1.0, lmbda)
    log_x = jnp.log(x)  # not log1p(x - 1): x - 1 rounds small x to -1
    return jnp.where(zero, log_x, jnp.expm1(safe * log_x) / safe)


# ---------------------------------------------------------------------------------------------
# Incomplete gamma and beta, zeta, modified Bessel functions (on lax's special functions)

def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    a, x = _elementwise("scipy.special", a, x)
    return lax.igamma(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    a, x = _elementwise("scipy.special", a, x)
    return lax.igammac(a, x)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    a, b, x = _elementwise("scipy.special", a, b, x)
    return lax.betainc(a, b, x)


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (k + q)**-x (q is required, as in JAX)."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to "
                                  "compute the Hurwitz Zeta function.")
    x, q = _elementwise("scipy.special", x, q)
    return _zeta(x, q)


@custom_jvp
def _zeta(x, q):
    return lax.zeta(x, q)


def _zeta_euler_maclaurin(s, a, terms: int = 12, corrections: int = 10):
    """zeta(s, a) by the Euler-Maclaurin formula: `terms` summands, the integral of the rest,
    and `corrections` Bernoulli terms (differentiable in s, unlike lax.zeta)."""
    from fluxion._src.scipy.special_integrals import _bernoulli_numbers
    bernoulli = _bernoulli_numbers(2 * corrections)
    total = jnp.zeros_like(s)
    for k in range(terms):
        total = total + (a + k) ** -s
    end = a + terms
    total = total + end ** (1 - s) / (s - 1) + 0.5 * end ** -s
    rising = s  # s (s + 1) ... (s + 2j - 2)
    for j in range(1, corrections + 1):
        coefficient = float(bernoulli[2 * j] / math.factorial(2 * j))
        total = total + coefficient * rising * end ** (-s - 2 * j + 1)
        rising = rising * (s + 2 * j - 1) * (s + 2 * j)
    return total


@_zeta.defjvp
def _zeta_jvp(primals, tangents):
    # d/dq zeta(x, q) = -x zeta(x + 1, q); d/dx from the Euler-Maclaurin series (lax.zeta has
    # no derivative in x).
    from fluxion._src.ad_api import jvp
    x, q = primals
    dx, dq = tangents
    out = _zeta(x, q)
    d_in_x = jvp(lambda s: _zeta_euler_maclaurin(s, q), (x,), (dx,))[1]
    return out, d_in_x - x * lax.zeta(x + 1, q) * dq


def i0e(x):
    """The exponentially scaled modified Bessel function of order 0, exp(-|x|) I0(x)."""
    return lax.bessel_i0e(_inexact(x))


def i1e(x):
    """The exponentially scaled modified Bessel function of order 1, exp(-|x|) I1(x)."""
    return lax.bessel_i1e(_inexact(x))


def i0(x):
    """The modified Bessel function of order 0."""
    x = _inexact(x)
    return jnp.exp(jnp.abs(x)) * i0e(x)


def i1(x):
    """The modified Bessel function of order 1."""
    x = _inexact(x)
    return jnp.exp(jnp.abs(x)) * i1e(x)
