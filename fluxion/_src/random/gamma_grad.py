"""d(sample)/d(alpha) of Gamma(alpha, 1) samples, by implicit differentiation of the CDF.

A sample x with CDF P(alpha, x) = u held fixed moves with alpha as
dx/dalpha = -(dP/dalpha) / (dP/dx). Both derivatives come from the regularized incomplete
gamma function: its power series where x <= max(1, alpha), else its continued fraction for
Q = 1 - P (XLA's `RandomGammaGrad`, as JAX evaluates it). Each loop runs on whole arrays; an
element stops updating once its own term is below the tolerance, so every element gets what
an elementwise loop would give it.
"""
from __future__ import annotations

import numpy as np

from fluxion._src import core, dtypes
from fluxion._src.lax import control_flow, lax
from fluxion._src.lax import structural


def _c(like, value):
    dtype = core.get_aval(like).dtype
    return lax._convert_element_type(np.asarray(value, dtype), dtype)


def _any(pred):
    ndim = core.get_aval(pred).ndim
    return lax.reduce_or(pred, tuple(range(ndim))) if ndim else pred


def _series_sample_derivative(x, a, enabled, eps):
    """-(dP/da) * x / a ... from the series P = x^a e^-x / Gamma(a + 1) * sum_n x^n / (a+1)_n,
    carrying the series sum and its derivative with respect to a."""
    def cond(state):
        return _any(state[0])

    def body(state):
        active, r, c, total, dc_da, dtotal_da = state
        r_new = r + _c(r, 1)
        dc_da_new = dc_da * (x / r_new) - (c * x) / (r_new * r_new)
        dtotal_da_new = dtotal_da + dc_da_new
        c_new = c * (x / r_new)
        total_new = total + c_new
        still = active & (lax.abs(dc_da_new / dtotal_da_new) > eps)
        keep = lambda new, old: structural.select(active, new, old)
        return (still, keep(r_new, r), keep(c_new, c), keep(total_new, total),
                keep(dc_da_new, dc_da), keep(dtotal_da_new, dtotal_da))

    one, zero = structural.full_like(a, 1), structural.full_like(a, 0)
    _, _, _, total, _, dtotal_da = control_flow.while_loop(
        cond, body, (enabled, a, one, one, zero, zero))
    dlog_prefactor_da = lax.log(x) - lax.digamma(a + _c(a, 1))
    return -(dtotal_da + total * dlog_prefactor_da) * x / a


def _continued_fraction_sample_derivative(x, a, enabled, eps):
    """The same derivative from the continued fraction of Q(a, x), whose convergents pk / qk
    and their derivatives with respect to a follow a three-term recurrence (rescaled by eps
    when they grow large)."""
    def cond(state):
        return (state[5] < _c(state[5], 2000)) & _any(state[0])

    def body(state):
        (active, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = state
        c = c + _c(c, 1)
        y_new = y + _c(y, 1)
        z_new = z + _c(z, 2)
        yc = y_new * c
        pk = pkm1 * z_new - pkm2 * yc
        qk = qkm1 * z_new - qkm2 * yc
        nonzero = qk != _c(qk, 0)
        r = pk / qk
        t_new = structural.select(nonzero, lax.abs((ans - r) / r), structural.full_like(r, 1))
        ans_new = structural.select(nonzero, r, ans)
        dpk_da = dpkm1_da * z_new - pkm1 - dpkm2_da * yc + pkm2 * c
        dqk_da = dqkm1_da * z_new - qkm1 - dqkm2_da * yc + qkm2 * c
        dans_da_new = structural.select(nonzero, (dpk_da - ans_new * dqk_da) / qk, dans_da)
        change = structural.select(nonzero, lax.abs(dans_da_new - dans_da),
                                   structural.full_like(dans_da, 1))
        shifted = [pkm1, pk, qkm1, qk, dpkm1_da, dqkm1_da, dpk_da, dqk_da]
        rescale = lax.abs(pk) > _c(pk, 1 / eps)
        shifted = [structural.select(rescale, v * _c(v, eps), v) for v in shifted]
        pkm2_n, pkm1_n, qkm2_n, qkm1_n, dpkm2_n, dqkm2_n, dpkm1_n, dqkm1_n = shifted
        still = active & (change > _c(change, eps))
        keep = lambda new, old: structural.select(active, new, old)
        return (still, keep(ans_new, ans), keep(t_new, t), keep(y_new, y), keep(z_new, z), c,
                keep(pkm1_n, pkm1), keep(qkm1_n, qkm1), keep(pkm2_n, pkm2), keep(qkm2_n, qkm2),
                keep(dpkm2_n, dpkm2_da), keep(dqkm2_n, dqkm2_da), keep(dpkm1_n, dpkm1_da),
                keep(dqkm1_n, dqkm1_da), keep(dans_da_new, dans_da))

    y = _c(a, 1) - a
    z = x + y + _c(x, 1)
    pkm1 = x + _c(x, 1)
    qkm1 = z * x
    ans = pkm1 / qkm1
    zero = structural.full_like(x, 0)
    dqkm1_da = -x
    dans_da = (zero - ans * dqkm1_da) / qkm1
    init = (enabled, ans, structural.full_like(x, 1), y, z, _c(x, 0), pkm1, qkm1,
            structural.full_like(x, 1), x, zero, zero, zero, dqkm1_da, dans_da)
    state = control_flow.while_loop(cond, body, init)
    ans, dans_da = state[1], state[14]
    dlog_prefactor_da = lax.log(x) - lax.digamma(a)
    return -(dans_da + ans * dlog_prefactor_da) * x


def random_gamma_grad(a, x):
    """Elementwise derivative of a Gamma(a, 1) sample `x` with respect to `a`."""
    dtype = core.get_aval(a).dtype
    upcast = dtype in (dtypes.float16, dtypes.bfloat16)
    if upcast:  # computed in float32, as JAX does
        a = lax.convert_element_type(a, dtypes.float32)
        x = lax.convert_element_type(x, dtypes.float32)
    work = core.get_aval(a).dtype
    finfo = dtypes.finfo(work)
    eps = finfo.eps
    is_nan = (a != a) | (x != x)
    x_is_zero = x == _c(x, 0)
    domain_error = (x < _c(x, 0)) | (a <= _c(a, 0))
    use_continued_fraction = (x > _c(x, 1)) & (x > a)
    log_prefactor = a * lax.log(x) - x - lax.lgamma(a)
    underflow = log_prefactor < _c(a, -np.log(finfo.max))
    enabled = ~(x_is_zero | domain_error | underflow | is_nan)
    output = structural.select(
        use_continued_fraction,
        -_continued_fraction_sample_derivative(x, a, enabled & use_continued_fraction, eps),
        _series_sample_derivative(x, a, enabled & ~use_continued_fraction, eps))
    output = structural.select(x_is_zero, structural.full_like(output, 0), output)
    output = structural.select(domain_error | is_nan, structural.full_like(a, np.nan), output)
    return lax.convert_element_type(output, dtype) if upcast else output
