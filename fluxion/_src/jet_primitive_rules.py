"""Jet rules of lax's primitives (those holding jaxprs are in jet_call_rules).

Every rule works on unscaled Taylor coefficients: ``u = [x_0, x_1, ..., x_K]``. Most
nonlinear rules solve the recurrence that ``y' = f'(x) x'`` gives coefficient by coefficient:
``k y_k = sum_{j=1..k} j x_j c_{k-j}``, with ``c`` the series of ``f'(x)``.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from fluxion import lax
from fluxion._src import ad, core
from fluxion._src.checkpoint import name_p as checkpoint_name_p
from fluxion._src.sharded_jit import sharding_like_p
from fluxion._src.jet import (def_comp, def_deriv, deflinear, defzero, deriv_series, jet2,
                              jet_rules, zero_series)


def _conv(c, u, k):
    """``sum_{j=1..k} j u_j c_{k-j} / k``: coefficient k of y where y' = c u'."""
    return sum(j * c[k - j] * u[j] for j in range(1, k + 1)) / k


# ---------------------------------------------------------------------------------------------
# Piecewise-constant and linear primitives (those ad marks so are found without a rule)

for _p in (lax.le_p, lax.lt_p, lax.gt_p, lax.ge_p, lax.eq_p, lax.ne_p, lax.not_p, lax.and_p,
           lax.or_p, lax.xor_p, lax.floor_p, lax.ceil_p, lax.round_p, lax.sign_p,
           lax.stop_gradient_p, lax.is_finite_p):
    defzero(_p)

for _p in (lax.add_p, lax.sub_p, lax.neg_p, lax.convert_element_type_p, lax.broadcast_in_dim_p,
           lax.concatenate_p, lax.pad_p, lax.reshape_p, lax.squeeze_p, lax.rev_p,
           lax.transpose_p, lax.slice_p, lax.reduce_sum_p, lax.reduce_window_sum_p, lax.cumsum_p,
           lax.copy_p, lax.real_p, lax.imag_p, lax.complex_p, lax.conj_p, lax.fft_p,
           lax.device_put_p, lax.optimization_barrier_p, checkpoint_name_p, ad.add_any_p):
    deflinear(_p)


def _dynamic_slice_rule(primals, series, **params):
    operand, *starts = primals
    out = lax.dynamic_slice_p.bind(operand, *starts, **params)
    return out, [lax.dynamic_slice_p.bind(t, *starts, **params) for t in series[0]]


def _dynamic_update_slice_rule(primals, series, **params):
    operand, update, *starts = primals
    out = lax.dynamic_update_slice_p.bind(operand, update, *starts, **params)
    return out, [lax.dynamic_update_slice_p.bind(a, b, *starts, **params)
                 for a, b in zip(series[0], series[1])]


def _gather_rule(primals, series, **params):
    operand, indices = primals
    out = lax.gather_p.bind(operand, indices, **params)
    return out, [lax.gather_p.bind(t, indices, **params) for t in series[0]]


def _scatter_linear_rule(prim, primals, series, **params):
    # scatter-add, and scatter (overwrite) taken as linear in (operand, updates) jointly: each
    # coefficient is scattered as the primal is (for repeated indices, the same writer wins
    # as long as XLA orders the writes alike).
    operand, indices, updates = primals
    out = prim.bind(operand, indices, updates, **params)
    return out, [prim.bind(a, indices, b, **params) for a, b in zip(series[0], series[2])]


def _select_n_rule(primals, series, **params):
    which, *cases = primals
    out = lax.select_n(which, *cases)
    return out, [lax.select_n(which, *terms) for terms in zip(*series[1:])]


def _cumulative_rule(combine, primals, series, *, axis, reverse):
    # As JAX: the parallel prefix scan of `combine`, whose primitives all have rules.
    scan = partial(lax.associative_scan, combine, axis=axis, reverse=reverse)
    return jet2(scan, primals, series)


def _sharding_like_rule(primals, series, **params):
    x, like = primals  # a layout hint: linear in x, `like` only lends its sharding
    return sharding_like_p.bind(x, like), [sharding_like_p.bind(t, like) for t in series[0]]


jet_rules[lax.dynamic_slice_p] = _dynamic_slice_rule
jet_rules[sharding_like_p] = _sharding_like_rule
jet_rules[lax.dynamic_update_slice_p] = _dynamic_update_slice_rule
jet_rules[lax.gather_p] = _gather_rule
jet_rules[lax.scatter_add_p] = partial(_scatter_linear_rule, lax.scatter_add_p)
jet_rules[lax.scatter_p] = partial(_scatter_linear_rule, lax.scatter_p)
jet_rules[lax.select_n_p] = _select_n_rule
jet_rules[lax.cumprod_p] = partial(_cumulative_rule, lax.mul)
jet_rules[lax.cummax_p] = partial(_cumulative_rule, lax.max)
jet_rules[lax.cummin_p] = partial(_cumulative_rule, lax.min)


# ---------------------------------------------------------------------------------------------
# Products and quotients

def _bilinear_rule(prim, primals, series, **params):
    # (uw)_k = sum_{j=0..k} u_j w_{k-j} for any bilinear product.
    u = [primals[0]] + list(series[0])
    w = [primals[1]] + list(series[1])
    v = [sum(prim.bind(u[j], w[k - j], **params) for j in range(k + 1)) for k in range(len(u))]
    return v[0], v[1:]


def _div_rule(primals, series, **_):
    # u = v w, solved for v_k = (u_k - sum_{j<k} v_j w_{k-j}) / w_0.
    u = [primals[0]] + list(series[0])
    w = [primals[1]] + list(series[1])
    v = []
    for k in range(len(u)):
        conv = sum(v[j] * w[k - j] for j in range(k))
        v.append(lax.div(u[k] - conv, w[0]) if k else lax.div(u[0], w[0]))
    return v[0], v[1:]


def _pow_by_squaring(x, n: int):
    if n < 0:
        return _pow_by_squaring(1 / x, -n)
    result = None
    while n:
        if n & 1:
            result = x if result is None else result * x
        n >>= 1
        if n:
            x = x * x
    return result


def _integer_pow_rule(primals, series, *, y):
    if y == 0:
        return lax.integer_pow(primals[0], 0), zero_series
    return jet2(lambda x: _pow_by_squaring(x, y), primals, series)


jet_rules[lax.mul_p] = partial(_bilinear_rule, lax.mul_p)
jet_rules[lax.dot_general_p] = partial(_bilinear_rule, lax.dot_general_p)
jet_rules[lax.conv_general_dilated_p] = partial(_bilinear_rule, lax.conv_general_dilated_p)
jet_rules[lax.div_p] = _div_rule
jet_rules[lax.integer_pow_p] = _integer_pow_rule
def_comp(lax.square_p, lambda x: x * x)


# ---------------------------------------------------------------------------------------------
# exp, log, pow and their relatives

def _exp_series(y0, u):
    """Series of y = exp(x) given y_0 and x's series u: y' = y x'."""
    v = [y0] + [None] * (len(u) - 1)
    for k in range(1, len(v)):
        v[k] = _conv(v, u, k)
    return v


def _exp_rule(primals, series, **_):
    x, = primals
    v = _exp_series(lax.exp(x), [x] + list(series[0]))
    return v[0], v[1:]


def _exp2_rule(primals, series, **_):
    x, = primals
    ln2 = float(np.log(2.))
    v = _exp_series(lax.exp2(x), [x] + [t * ln2 for t in series[0]])
    return v[0], v[1:]


def _log_rule(primals, series, **_):
    # x = exp(y) gives k x_k = sum_j j y_j x_{k-j}, solved for y_k.
    x, = primals
    u = [x] + list(series[0])
    v = [lax.log(x)] + [None] * len(series[0])
    for k in range(1, len(v)):
        conv = sum(j * v[j] * u[k - j] for j in range(1, k))
        v[k] = (u[k] - conv / k) / u[0]
    return v[0], v[1:]


def _pow_rule(primals, series, **_):
    # x ** y = exp(y log x).
    x, y = primals
    z0, zs = jet2(lambda a, b: lax.mul(b, lax.log(a)), primals, series)
    v = _exp_series(lax.pow(x, y), [z0] + list(zs))
    return v[0], v[1:]


jet_rules[lax.exp_p] = _exp_rule
jet_rules[lax.exp2_p] = _exp2_rule
jet_rules[lax.log_p] = _log_rule
jet_rules[lax.pow_p] = _pow_rule
def_comp(lax.expm1_p, lambda x: lax.exp(x) - 1)
def_comp(lax.log1p_p, lambda x: lax.log(1 + x))
def_comp(lax.sqrt_p, lambda x: lax.pow(x, lax.full_like(x, 0.5)))
def_comp(lax.rsqrt_p, lambda x: lax.pow(x, lax.full_like(x, -0.5)))


# ---------------------------------------------------------------------------------------------
# Trigonometric and hyperbolic functions

def _sin_cos_series(sign, fns, x, terms):
    # s' = c x', c' = sign s x'.
    u = [x] + list(terms)
    s = [fns[0](x)] + [None] * len(terms)
    c = [fns[1](x)] + [None] * len(terms)
    for k in range(1, len(s)):
        s[k] = _conv(c, u, k)
        c[k] = sign * _conv(s, u, k)
    return s, c


def _sinusoidal_rule(sign, fns, which, primals, series, **_):
    out = _sin_cos_series(sign, fns, primals[0], series[0])[which]
    return out[0], out[1:]


def _tan_rule(primals, series, **_):
    # y' = (1 + y^2) x', with e = 1 + y^2 known up to the coefficient before y's.
    x, = primals
    u = [x] + list(series[0])
    v = [lax.tan(x)] + [None] * len(series[0])
    e = [1 + v[0] * v[0]] + [None] * len(series[0])
    for k in range(1, len(v)):
        v[k] = _conv(e, u, k)
        e[k] = sum(v[j] * v[k - j] for j in range(k + 1))
    return v[0], v[1:]


def _logistic_rule(primals, series, **_):
    # y' = y (1 - y) x' = e x'.
    x, = primals
    u = [x] + list(series[0])
    v = [lax.logistic(x)] + [None] * len(series[0])
    e = [v[0] * (1 - v[0])] + [None] * len(series[0])
    for k in range(1, len(v)):
        v[k] = _conv(e, u, k)
        e[k] = (1 - v[0]) * v[k] - sum(v[j] * v[k - j] for j in range(1, k + 1))
    return v[0], v[1:]


def _tanh_rule(primals, series, **_):
    # tanh(x) = 2 logistic(2x) - 1; the primal from tanh itself.
    x, = primals
    _, terms = _logistic_rule([2 * x], [[2 * t for t in series[0]]])
    return lax.tanh(x), [2 * t for t in terms]


def _atan2_rule(primals, series, **_):
    # atan2(x, y) = atan(x / y) up to a constant: c = 1 / (1 + (x/y)^2).
    x, y = primals
    q0, qs = jet2(lax.div, primals, series)
    c0, cs = jet2(lambda q: 1 / (1 + q * q), (q0,), (qs,))
    c, u = [c0] + list(cs), [q0] + list(qs)
    v = [lax.atan2(x, y)] + [None] * len(qs)
    for k in range(1, len(v)):
        v[k] = _conv(c, u, k)
    return v[0], v[1:]


jet_rules[lax.sin_p] = partial(_sinusoidal_rule, -1, (lax.sin, lax.cos), 0)
jet_rules[lax.cos_p] = partial(_sinusoidal_rule, -1, (lax.sin, lax.cos), 1)
jet_rules[lax.sinh_p] = partial(_sinusoidal_rule, 1, (lax.sinh, lax.cosh), 0)
jet_rules[lax.cosh_p] = partial(_sinusoidal_rule, 1, (lax.sinh, lax.cosh), 1)
jet_rules[lax.tan_p] = _tan_rule
jet_rules[lax.logistic_p] = _logistic_rule
jet_rules[lax.tanh_p] = _tanh_rule
jet_rules[lax.atan2_p] = _atan2_rule
def_deriv(lax.atan_p, lambda x: 1 / (1 + x * x))
def_deriv(lax.asin_p, lambda x: lax.rsqrt(1 - x * x))
def_deriv(lax.acos_p, lambda x: -lax.rsqrt(1 - x * x))
def_comp(lax.asinh_p, lambda x: lax.log(x + lax.sqrt(x * x + 1)))
def_comp(lax.acosh_p, lambda x: lax.log(x + lax.sqrt(x * x - 1)))
def_comp(lax.atanh_p, lambda x: 0.5 * lax.log(lax.div(1 + x, 1 - x)))


# ---------------------------------------------------------------------------------------------
# Special functions

def _erf_deriv(x):
    return lax.mul(lax.full_like(x, 2. / np.sqrt(np.pi)), lax.exp(lax.neg(x * x)))


def _erf_inv_rule(primals, series, **_):
    # y = erf_inv(x): y' = c x' with c = sqrt(pi)/2 exp(y^2), so c's series follows y's; each
    # step needs c only up to the coefficient before.
    x, = primals
    u = [x] + list(series[0])
    n = len(u)
    v = [lax.erf_inv(x)] + [None] * (n - 1)
    sq = [v[0] * v[0]] + [None] * (n - 1)      # y^2
    ex = [lax.exp(sq[0])] + [None] * (n - 1)   # exp(y^2)
    const = float(np.sqrt(np.pi) / 2.)
    c = [const * ex[0]] + [None] * (n - 1)
    for k in range(1, n):
        v[k] = _conv(c, u, k)
        if k < n - 1:
            sq[k] = sum(v[j] * v[k - j] for j in range(k + 1))
            ex[k] = _conv(ex, sq, k)
            c[k] = const * ex[k]
    return v[0], v[1:]


def _rem_rule(primals, series, **_):
    # rem(x, y) = x - y trunc(x / y); trunc(x / y) is piecewise constant.
    x, y = primals
    out = lax.rem(x, y)
    q = lax.round(lax.div(x - out, y))  # trunc(x / y), exactly an integer
    return out, [a - q * b for a, b in zip(*series)]


def _polygamma_rule(primals, series, **_):
    # The order m has no derivative (as in JAX's jvp); d/dx polygamma(m, x) = polygamma(m+1, x).
    m, x = primals
    v = deriv_series(lax.polygamma(m, x), lambda x: lax.polygamma(m + 1, x), x, series[1])
    return v[0], v[1:]


def_deriv(lax.erf_p, _erf_deriv)
def_deriv(lax.lgamma_p, lax.digamma)
def_deriv(lax.digamma_p, lambda x: lax.polygamma(lax.full_like(x, 1), x))
jet_rules[lax.polygamma_p] = _polygamma_rule
def_deriv(lax.cbrt_p, lambda x: 1 / (3 * lax.square(lax.cbrt(x))))
def_comp(lax.erfc_p, lambda x: 1 - lax.erf(x))
jet_rules[lax.erf_inv_p] = _erf_inv_rule
jet_rules[lax.rem_p] = _rem_rule
def_comp(lax.clamp_p, lambda lo, x, hi: lax.min(lax.max(lo, x), hi))


# ---------------------------------------------------------------------------------------------
# Choosers: abs, max, min and their reductions (ties take the mean, as JAX)

def _abs_rule(primals, series, **params):
    x, = primals
    out = lax.abs_p.bind(x, **params)
    signs = lax.select(lax.lt(x, lax.full_like(x, 0)), lax.full_like(x, -1), lax.full_like(x, 1))
    return out, [signs * t for t in series[0]]


def _broadcast_pair(x, y):
    shape = np.broadcast_shapes(np.shape(x), np.shape(y))

    def bcast(a):
        if np.shape(a) == shape:
            return a
        return lax.broadcast_in_dim(a, shape, tuple(range(len(shape) - np.ndim(a), len(shape))))
    return bcast(x), bcast(y)


def _chooser_rule(greater, primals, series, **_):
    x, y = _broadcast_pair(*primals)
    pick_x = lax.gt(x, y) if greater else lax.lt(x, y)
    tie = lax.eq(x, y)
    out = lax.select(pick_x, x, y)

    def choose(a, b):
        a, b = _broadcast_pair(a, b)
        return lax.select(tie, (a + b) / 2, lax.select(pick_x, a, b))
    return out, [choose(a, b) for a, b in zip(*series)]


def _reduce_chooser_rule(prim, primals, series, *, axes, **params):
    x, = primals
    out = prim.bind(x, axes=axes, **params)
    kept = tuple(d for d in range(np.ndim(x)) if d not in axes)
    terms = series[0]
    hits = lax.convert_element_type(
        lax.eq(x, lax.broadcast_in_dim(out, np.shape(x), kept)), core.get_aval(terms[0]).dtype)
    counts = lax.reduce_sum(hits, axes)
    return out, [lax.div(lax.reduce_sum(lax.mul(t, hits), axes), counts) for t in terms]


def _reduce_prod_rule(primals, series, *, axes, **params):
    # A product tree of halvings: log2(n) products, each by the bilinear rule (JAX has none;
    # exp(sum(log x)) would fail at zeros).
    x, = primals
    out = lax.reduce_prod_p.bind(x, axes=axes, **params)
    shape = np.shape(x)
    kept = [d for d in range(len(shape)) if d not in axes]
    n = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    rest = tuple(shape[d] for d in kept)
    if n == 0:
        return out, zero_series

    def product(x):
        x = lax.reshape(lax.transpose(x, tuple(axes) + tuple(kept)), (n,) + rest)
        while x.shape[0] > 1:
            if x.shape[0] % 2:
                x = lax.concatenate([x, lax.full((1,) + rest, 1, x.dtype)], 0)
            strides = (2,) + (1,) * len(rest)
            x = (lax.slice(x, (0,) * x.ndim, x.shape, strides)
                 * lax.slice(x, (1,) + (0,) * len(rest), x.shape, strides))
        return lax.reshape(x, rest)
    _, terms = jet2(product, primals, series)
    return out, terms


def _sort_rule(primals, series, *, dimension, is_stable, num_keys):
    # Sort with an iota riding along; its result is the permutation the series follow.
    from fluxion._src.numpy.indexing import take_along_axis
    iota = lax.broadcasted_iota(np.int32, np.shape(primals[0]), dimension)
    outs = lax.sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable,
                           num_keys=num_keys)
    perm = outs[-1]
    return list(outs[:-1]), [[take_along_axis(t, perm, axis=dimension) for t in terms]
                             for terms in series]


jet_rules[lax.reduce_prod_p] = _reduce_prod_rule
jet_rules[lax.sort_p] = _sort_rule
jet_rules[lax.abs_p] = _abs_rule
jet_rules[lax.max_p] = partial(_chooser_rule, True)
jet_rules[lax.min_p] = partial(_chooser_rule, False)
jet_rules[lax.reduce_max_p] = partial(_reduce_chooser_rule, lax.reduce_max_p)
jet_rules[lax.reduce_min_p] = partial(_reduce_chooser_rule, lax.reduce_min_p)
