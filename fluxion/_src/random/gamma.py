"""Gamma samples and the distributions built on them: loggamma, beta, dirichlet, chisquare,
f, t, generalized_normal and ball.

`random_gamma_p(key_data, a, log_space)` draws one Gamma(a, 1) sample per element of `a`,
each from its own key split off `key_data`, by Marsaglia and Tsang's rejection method (a
while loop per element; vectorized, the loop runs until every element is accepted). Its JVP
with respect to `a` differentiates the sample implicitly through the CDF (`gamma_grad`).
"""
from __future__ import annotations

import math

import numpy as np

import fluxion.numpy as jnp
from fluxion._src import ad, batching, core, dtypes
from fluxion._src.compiler import lowering
from fluxion._src.lax import control_flow, lax, structural
from fluxion._src.lax.base import standard_primitive
from fluxion._src.nn_functions import softmax
from fluxion._src.numpy import util
from fluxion._src.random import prng
from fluxion._src.random._common import (canonical_shape, check_out_sharding, check_safe_to_cast,
                                         check_shape, require_float, shape_from_params, static_jit,
                                         user_dtype)
from fluxion._src.random.basic import float_sampler_args, _normal, _rademacher, _uniform, unstack
from fluxion._src.random.continuous import _exponential
from fluxion._src.random.gamma_grad import random_gamma_grad
from fluxion._src.random.keys import check_key
from fluxion._src.vmap import vmap


# ---------------------------------------------------------------------------------------------
# The primitive

def _gamma_one(key, alpha, log_space):
    """One Gamma(alpha, 1) sample (Marsaglia & Tsang, 2000); alpha < 1 is boosted to alpha + 1
    and the sample scaled by U ** (1 / alpha)."""
    c_ = lambda v: lax._convert_element_type(np.asarray(v, alpha.dtype), alpha.dtype)
    zero, one, minus_one, two = c_(0), c_(1), c_(-1), c_(2)
    dtype = alpha.dtype
    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = structural.select(boost_mask, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, c_(1.0 / 3.0))
    c = lax.div(c_(1.0 / 3.0), lax.sqrt(d))

    def rejected(state):
        _, x2, v, u = state
        squeeze = lax.ge(u, lax.sub(one, lax.mul(c_(0.0331), lax.mul(x2, x2))))
        log_test = lax.ge(lax.log(u), lax.add(lax.mul(x2, c_(0.5)),
                                               lax.mul(d, lax.add(lax.sub(one, v), lax.log(v)))))
        return lax.bitwise_and(squeeze, log_test)

    def propose(state):
        def next_normal(kxv):
            key, subkey = unstack(prng.split(kxv[0], (2,)))
            x = _normal(subkey, (), dtype)
            return key, x, lax.add(one, lax.mul(x, c))

        key, x_key, u_key = unstack(prng.split(state[0], (3,)))
        _, x, v = control_flow.while_loop(lambda kxv: lax.le(kxv[2], zero), next_normal,
                                          (x_key, zero, minus_one))
        u = _uniform(u_key, 0.0, 1.0, (), dtype)
        return key, lax.mul(x, x), lax.mul(lax.mul(v, v), v), u

    key, subkey = unstack(prng.split(key, (2,)))
    _, _, v, _ = control_flow.while_loop(rejected, propose, (key, zero, one, two))
    if log_space:
        log_samples = lax.neg(_exponential(subkey, (), dtype))
        log_boost = structural.select(boost_mask | (log_samples == zero), zero,
                                      lax.mul(log_samples, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(v)), log_boost)
    samples = 1 - _uniform(subkey, 0.0, 1.0, (), dtype)
    boost = structural.select(boost_mask, one, lax.pow(samples, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, v), boost)


def _gamma_impl(key, a, *, log_space):
    a_shape = core.get_aval(a).shape
    keys_shape = core.get_aval(key).shape[:-1]
    split_count = math.prod(a_shape[len(keys_shape):])
    keys = lax.reshape(key, (math.prod(keys_shape),) + prng.KEY_SHAPE)
    keys = vmap(lambda k: prng.split(k, (split_count,)))(keys)
    keys = lax.reshape(keys, (math.prod(a_shape),) + prng.KEY_SHAPE)
    alphas = lax.reshape(a, (math.prod(a_shape),))
    samples = vmap(lambda k, alpha: _gamma_one(k, alpha, log_space))(keys, alphas)
    return lax.reshape(samples, a_shape)


def _random_gamma_abstract_eval(key, a, *, log_space):
    if key.dtype != dtypes.uint32 or key.shape[-1:] != prng.KEY_SHAPE:
        raise TypeError(f"random_gamma expects raw key data of shape (..., 2) and dtype uint32, "
                        f"got {key.str_short()}")
    if not dtypes.is_float(a.dtype):
        raise TypeError(f"random_gamma expects a floating-point alpha, got {a.str_short()}")
    return a.update(weak_type=False)


random_gamma_p = standard_primitive(
    "random_gamma", _random_gamma_abstract_eval,
    lowering.lower_fun(_gamma_impl, multiple_results=False))


def _gamma_grad(sample, a, *, log_space):
    """d(sample)/d(a), elementwise."""
    if log_space:
        x = lax.exp(sample)
        tiny = structural.full_like(x, dtypes.finfo(core.get_aval(x).dtype).tiny)
        x = structural.select(x == util.lax_const(x, 0), tiny, x)
        return random_gamma_grad(a, x) / x
    return random_gamma_grad(a, sample)


def _random_gamma_batch(args, dims, *, log_space):
    (key, a), (key_dim, a_dim) = args, dims
    size = next(core.get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    key = batching.bdim_at_front(key, key_dim, size)
    a = batching.bdim_at_front(a, a_dim, size)
    return random_gamma_p.bind(key, a, log_space=log_space), 0


ad.defjvp2(random_gamma_p, None,
           lambda g, ans, key, a, *, log_space: g * _gamma_grad(ans, a, log_space=log_space))
batching.primitive_batchers[random_gamma_p] = _random_gamma_batch


# ---------------------------------------------------------------------------------------------
# gamma and loggamma

def _gamma(key, a, shape, dtype, log_space=False):
    if shape is None:
        shape = np.shape(a)
    else:
        check_shape("gamma", shape, np.shape(a))
    a = lax.convert_element_type(a, dtype)
    if np.shape(a) != tuple(shape):
        a = util.broadcast_to(a, shape)
    return random_gamma_p.bind(key, a, log_space=log_space)


_gamma_jit = static_jit(_gamma, 3)


def _gamma_public(name):
    def sampler(key, a, shape=None, dtype=None, *, out_sharding=None):
        key, _ = check_key(name, key)
        check_out_sharding(out_sharding)
        dtype = user_dtype(dtype, float)
        if not dtypes.is_float(dtype):
            raise ValueError(f"dtype argument to `gamma` must be a float dtype, got {dtype}")
        if shape is not None:
            shape = canonical_shape(shape)
        return _gamma_jit(key, a, shape, dtype, name == "loggamma")
    sampler.__name__ = sampler.__qualname__ = name
    return sampler


gamma = _gamma_public("gamma")
gamma.__doc__ = """Gamma(a, 1) samples (shape parameter `a`, scale 1), differentiable in `a`.

    Parameters
    ----------
    key : a PRNG key.
    a : the shape parameter, broadcast-compatible with `shape`.
    shape : the result shape (default: the shape of `a`).
    dtype : a float dtype (default float32, or float64 with x64 enabled).
    """
loggamma = _gamma_public("loggamma")
loggamma.__doc__ = """log of Gamma(a, 1) samples, accurate for small `a` (where the samples
    themselves underflow to 0); arguments as for `gamma`."""


# ---------------------------------------------------------------------------------------------
# Distributions built on gamma

def _beta(key, a, b, shape, dtype):
    a = util.broadcast_to(lax.convert_element_type(a, dtype), shape)
    b = util.broadcast_to(lax.convert_element_type(b, dtype), shape)
    key_a, key_b = unstack(prng.split(key, (2,)))
    log_gamma_a = _gamma(key_a, a, shape, dtype, log_space=True)
    log_gamma_b = _gamma(key_b, b, shape, dtype, log_space=True)
    # Ga / (Ga + Gb), scaled by the larger of the two to avoid underflow.
    log_max = lax.max(log_gamma_a, log_gamma_b)
    gamma_a_scaled = jnp.exp(log_gamma_a - log_max)
    gamma_b_scaled = jnp.exp(log_gamma_b - log_max)
    return gamma_a_scaled / (gamma_a_scaled + gamma_b_scaled)


_beta_jit = static_jit(_beta, 2)


def beta(key, a, b, shape=None, dtype=None, *, out_sharding=None):
    """Beta(a, b) samples on [0, 1], as the ratio Ga / (Ga + Gb) of gamma samples."""
    key, _ = check_key("beta", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, float)
    require_float("beta", dtype)
    check_safe_to_cast("beta", dtype, a, b)
    shape = shape_from_params("beta", shape, a, b)
    return _beta_jit(key, a, b, shape, dtype)


def _dirichlet(key, alpha, shape, dtype):
    if not np.ndim(alpha) >= 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {np.ndim(alpha)}")
    if shape is None:
        shape = np.shape(alpha)[:-1]
    else:
        check_shape("dirichlet", shape, np.shape(alpha)[:-1])
    alpha = lax.convert_element_type(alpha, dtype)
    log_gamma = _gamma(key, alpha, tuple(shape) + np.shape(alpha)[-1:], dtype, log_space=True)
    return softmax(log_gamma, -1)


_dirichlet_jit = static_jit(_dirichlet, 2)


def dirichlet(key, alpha, shape=None, dtype=None, *, out_sharding=None):
    """Dirichlet(alpha) samples along the last axis (normalized gamma samples)."""
    key, _ = check_key("dirichlet", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, float)
    require_float("dirichlet", dtype)
    if shape is not None:
        shape = canonical_shape(shape)
    return _dirichlet_jit(key, alpha, shape, dtype)


def _chisquare(key, df, shape, dtype):
    df = lax.convert_element_type(df, dtype)
    two = util.lax_const(df, 2)
    log_g = _gamma(key, lax.div(df, two), shape, dtype, log_space=True)
    return lax.mul(jnp.exp(log_g), two)


_chisquare_jit = static_jit(_chisquare, 2)


def chisquare(key, df, shape=None, dtype=None, *, out_sharding=None):
    """Chi-square samples with `df` degrees of freedom: 2 * Gamma(df / 2)."""
    key, shape, dtype = float_sampler_args("chisquare", key, shape, dtype, out_sharding, df)
    return _chisquare_jit(key, df, shape, dtype)


def _f(key, dfnum, dfden, shape, dtype):
    dfden = lax.convert_element_type(dfden, dtype)
    dfnum = lax.convert_element_type(dfnum, dtype)
    key_dfd, key_dfn = unstack(prng.split(key, (2,)))
    num = lax.div(_chisquare(key_dfn, dfnum, shape, dtype), dfnum)
    den = lax.div(_chisquare(key_dfd, dfden, shape, dtype), dfden)
    return lax.div(num, den)


_f_jit = static_jit(_f, 2)


def f(key, dfnum, dfden, shape=None, dtype=None, *, out_sharding=None):
    """F-distribution samples: (X1 / dfnum) / (X2 / dfden) for chi-square X1, X2."""
    key, shape, dtype = float_sampler_args("f", key, shape, dtype, out_sharding, dfnum, dfden)
    return _f_jit(key, dfnum, dfden, shape, dtype)


def _t(key, df, shape, dtype):
    df = lax.convert_element_type(df, dtype)
    key_n, key_g = unstack(prng.split(key, (2,)))
    n = _normal(key_n, shape, dtype)
    half_df = lax.div(df, util.lax_const(n, 2))
    g = _gamma(key_g, half_df, shape, dtype)
    return n * jnp.sqrt(half_df / g)


_t_jit = static_jit(_t, 2)


def t(key, df, shape=None, dtype=None, *, out_sharding=None):
    """Student's t samples with `df` degrees of freedom: N * sqrt(df / 2 / Gamma(df / 2))."""
    key, shape, dtype = float_sampler_args("t", key, shape, dtype, out_sharding, df)
    return _t_jit(key, df, shape, dtype)


def _generalized_normal(key, p, shape, dtype):
    key_g, key_r = unstack(prng.split(key, (2,)))
    g = _gamma(key_g, 1 / p, shape, dtype)
    r = _rademacher(key_r, shape, dtype)
    return r * g ** (1 / p)


_generalized_normal_jit = static_jit(_generalized_normal, 2)


def generalized_normal(key, p, shape=(), dtype=None, *, out_sharding=None):
    """Generalized normal samples, density proportional to exp(-|x| ** p)."""
    shape = canonical_shape(shape)
    key, _ = check_key("generalized_normal", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, float)
    require_float("gamma", dtype)  # JAX's message names the inner gamma
    return _generalized_normal_jit(key, p, shape, dtype)


def _ball(key, p, d, shape, dtype):
    k1, k2 = unstack(prng.split(key, (2,)))
    g = _generalized_normal(k1, p, (*shape, d), dtype)
    e = _exponential(k2, shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


_ball_jit = static_jit(_ball, 3)


def ball(key, d, p=2, shape=(), dtype=None, *, out_sharding=None):
    """Points uniformly distributed in the unit p-norm ball of dimension `d`."""
    shape = canonical_shape(shape)
    key, _ = check_key("ball", key)
    check_out_sharding(out_sharding)
    dtype = user_dtype(dtype, float)
    require_float("gamma", dtype)  # JAX's message names the inner gamma
    d = util.static_int(d, "The error occurred in jax.random.ball()")
    if d < 0:
        raise TypeError(f"Shapes must have nonnegative dimensions, got {(*shape, d)}.")
    return _ball_jit(key, p, d, shape, dtype)
