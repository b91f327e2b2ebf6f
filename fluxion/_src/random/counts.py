"""Counting distributions: poisson, binomial and multinomial (JAX's algorithms: Knuth's
product of uniforms and Hormann's transformed rejection for large means).

The rejection loops run on whole arrays: each iteration draws fresh uniforms for every
element from one key, and an element keeps its first accepted value.
"""
from __future__ import annotations

import numpy as np

import fluxion.numpy as jnp
from fluxion._src import dtypes
from fluxion._src.lax import control_flow, lax, structural, windowed
from fluxion._src.numpy import util
from fluxion._src.random import prng
from fluxion._src.random._common import canonical_shape, check_shape, static_jit, user_dtype
from fluxion._src.random.basic import _uniform, unstack
from fluxion._src.random.keys import check_key

select = structural.select
full_like = structural.full_like


# ---------------------------------------------------------------------------------------------
# poisson

def _poisson_knuth(key, lam, shape, dtype, max_iters):
    # Count uniforms until their product drops below exp(-lam).
    def body(carry):
        i, k, key, log_prod = carry
        key, subkey = unstack(prng.split(key, (2,)))
        k = select(log_prod > -lam, k + 1, k)
        u = _uniform(subkey, 0.0, 1.0, shape, dtypes.float32)
        return i + 1, k, key, log_prod + jnp.log(u)

    def cond(carry):
        i, log_prod = carry[0], carry[3]
        return (log_prod > -lam).any() & (i < max_iters)

    k_init = full_like(lam, 0, dtype, shape)
    log_prod_init = full_like(lam, 0, dtypes.float32, shape)
    k = control_flow.while_loop(cond, body, (0, k_init, key, log_prod_init))[1]
    return (k - 1).astype(dtype)


def _poisson_rejection(key, lam, shape, dtype, max_iters):
    # Hormann (1993), "The transformed rejection method for generating Poisson random
    # variables" (PTRS).
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = unstack(prng.split(key, (3,)))
        u = _uniform(subkey_0, 0.0, 1.0, shape, lam.dtype) - 0.5
        v = _uniform(subkey_1, 0.0, 1.0, shape, lam.dtype)
        u_shifted = 0.5 - abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t))
        return i + 1, select(accept, k, k_out), accepted | accept, key

    def cond(carry):
        i, _, accepted, _ = carry
        return (~accepted).any() & (i < max_iters)

    k_init = full_like(lam, -1, lam.dtype, shape)
    accepted = full_like(lam, False, dtypes.bool_, shape)
    k = control_flow.while_loop(cond, body, (0, k_init, accepted, key))[1]
    return k.astype(dtype)


def _poisson(key, lam, shape, dtype):
    use_knuth = (lam != lam) | (lam < 10)
    lam_knuth = select(use_knuth, lam, full_like(lam, 0.0))
    lam_rejection = select(use_knuth, full_like(lam, 100000.0), lam)
    max_iters = dtype.type(dtypes.iinfo(dtype).max)
    result = select(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype, max_iters),
                    _poisson_rejection(key, lam_rejection, shape, dtype, max_iters))
    return select(lam == 0, jnp.zeros_like(result), result)


_poisson_jit = static_jit(_poisson, 2)


def poisson(key, lam, shape=None, dtype=None, *, out_sharding=None):
    """Poisson samples of rate `lam` (computed in float32; default dtype int32).

    Rates below 10 use Knuth's algorithm, larger ones transformed rejection.
    """
    key, _ = check_key("poisson", key)
    dtype = user_dtype(dtype, int)
    if not dtypes.is_integer(dtype):
        raise ValueError(f"Invalid integer data type '{dtype.kind}'.")
    shape = np.shape(lam) if shape is None else canonical_shape(shape)
    lam = lax.convert_element_type(util.broadcast_to(lam, shape), dtypes.float32)
    return _poisson_jit(key, lam, shape, dtype)


# ---------------------------------------------------------------------------------------------
# binomial

_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                           0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                           0.0118967099458917, 0.010411265261972, 0.00925546218271273,
                           0.00833056343336287])


def _stirling_approx_tail(k):
    """log(k!) minus its Stirling approximation: tabulated for k <= 9, else a series."""
    table = jnp.array(_STIRLING_TAIL, dtype=k.dtype)
    use_table = k <= 9
    k = structural.clamp(util.lax_const(k, 0.0), k, util.lax_const(k, 9.0))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    k = jnp.floor(k)
    return select(use_table, table[jnp.asarray(k, dtype="int32")], approx)


def _binomial_inversion(key, count, prob, shape, dtype, max_iters):
    # The number of geometric(prob) waiting times that fit in `count` trials.
    log1minusprob = jnp.log1p(-prob)

    def body(carry):
        i, num_geom, geom_sum, key = carry
        subkey, key = unstack(prng.split(key, (2,)))
        num_geom_out = select(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform(subkey, 0.0, 1.0, shape, prob.dtype)
        geom = jnp.ceil(jnp.log(u) / log1minusprob)
        return i + 1, num_geom_out, geom_sum + geom, key

    def cond(carry):
        i, geom_sum = carry[0], carry[2]
        return (geom_sum <= count).any() & (i < max_iters)

    zeros = full_like(prob, 0, prob.dtype, shape)
    k = control_flow.while_loop(cond, body, (0, zeros, zeros, key))[1]
    return (k - 1).astype(dtype)


def _btrs(key, count, prob, shape, dtype, max_iters):
    # Hormann (1993), "The generation of binomial random variates" (BTRS).
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = unstack(prng.split(key, (3,)))
        u = _uniform(subkey_0, 0.0, 1.0, shape, prob.dtype)
        v = _uniform(subkey_1, 0.0, 1.0, shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        upper_bound = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
                       + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
                       + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
                       + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
                       - _stirling_approx_tail(k) - _stirling_approx_tail(count - k))
        accept = accept1 | (~reject & (v <= upper_bound))
        return i + 1, select(accept, k, k_out), accepted | accept, key

    def cond(carry):
        i, accepted = carry[0], carry[2]
        return (~accepted).any() & (i < max_iters)

    k_init = full_like(prob, -1, prob.dtype, shape)
    carry = (0, k_init, jnp.full(shape, False, bool), key)
    return control_flow.while_loop(cond, body, carry)[1].astype(dtype)


def _binomial(key, count, prob, shape, dtype):
    if shape is None:
        shape = util.broadcast_shapes(np.shape(count), np.shape(prob))
    else:
        check_shape("binomial", shape, np.shape(count), np.shape(prob))
    (prob,) = util.promote_dtypes_inexact(prob)
    count = lax.convert_element_type(count, prob.dtype)
    count = util.broadcast_to(count, shape)
    prob = util.broadcast_to(prob, shape)
    # Sample with q = min(p, 1 - p) and reflect.
    p_lt_half = prob < 0.5
    q = select(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = jnp.isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan = jnp.isnan(q)
    q_l_0 = q < 0.0
    q = select(q_is_nan | q_l_0, full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = jnp.floor(count)
    count_inv = select(use_inversion, count, full_like(count, 0.0))
    count_btrs = select(use_inversion, full_like(count, 10000.0), count)
    q_btrs = select(use_inversion, full_like(q, 0.5), q)
    max_iters = dtype.type(dtypes.finfo(dtype).max)
    samples = select(use_inversion,
                     _binomial_inversion(key, count_inv, q, shape, dtype, max_iters),
                     _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = select(invalid, jnp.full_like(samples, np.nan, dtype), samples)
    samples = select(count_inf & ~invalid, jnp.full_like(samples, np.inf, dtype), samples)
    return select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                  count.astype(dtype) - samples)


_binomial_jit = static_jit(_binomial, 2)


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) samples, as floats (NaN for invalid parameters, inf for n = inf).

    Small means n * min(p, 1 - p) <= 10 use inversion, larger ones BTRS rejection.
    """
    key, _ = check_key("binomial", key)
    util.check_arraylike("binomial", n, p)
    dtype = user_dtype(dtype, float)
    if not dtypes.is_float(dtype):
        raise ValueError(f"dtype argument to `binomial` must be a float dtype, got {dtype}")
    if shape is not None:
        shape = canonical_shape(shape)
    return _binomial_jit(key, n, p, shape, dtype)


# ---------------------------------------------------------------------------------------------
# multinomial

def _multinomial(key, n, p, shape, dtype, unroll):
    n, p = util.promote_dtypes_inexact(n, p)
    if shape is None:
        shape = p.shape
    n = util.broadcast_to(n, shape[:-1])
    p = util.broadcast_to(p, shape)

    # Category by category: a binomial draw from what remains, with the category's share of
    # the remaining probability.
    def step(remainder, ratio_key):
        ratio, key = ratio_key
        count = _binomial(key, remainder, ratio.clip(0, 1), None, remainder.dtype)
        return remainder - count, count

    p = jnp.moveaxis(p, -1, 0)
    remaining_probs = windowed.cumsum(p, 0, reverse=True)
    ratios = p / jnp.where(remaining_probs == 0, 1, remaining_probs)
    keys = prng.split(key, (ratios.shape[0],))
    _, counts = control_flow.scan(step, n, (ratios, keys), unroll=unroll)
    out_dtype = dtypes.default_float_dtype() if dtype is None else dtype
    return jnp.moveaxis(counts, 0, -1).astype(out_dtype)


_multinomial_jit = static_jit(_multinomial, 3)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Multinomial samples: counts of `n` draws over the categories of `p` (last axis).

    Parameters
    ----------
    key : a PRNG key.
    n : the number of draws, broadcast against ``shape[:-1]``.
    p : category probabilities along the last axis.
    shape : the result shape (default ``p.shape``).
    dtype : the result dtype (default float32, or float64 with x64 enabled).
    unroll : the unroll factor of the scan over categories.
    """
    key, _ = check_key("multinomial", key)
    util.check_arraylike("multinomial", n, p)
    if shape is not None:
        shape = canonical_shape(shape)
    if dtype is not None:
        dtype = user_dtype(dtype, float)
    return _multinomial_jit(key, n, p, shape, dtype, unroll)
