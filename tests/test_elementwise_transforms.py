"""Derivatives and batching of the elementwise lax primitives: check_grads to second order in
both modes (float64), JAX's conventions at non-differentiable points, vmap against a loop."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.test_util import check_grads

jax = pytest.importorskip("jax")

rng = np.random.default_rng(0)
POS = np.array([0.3, 0.9, 1.7])          # inside every domain used below
UNIT = np.array([-0.6, 0.1, 0.45])       # inside (-1, 1)
ANY = np.array([-1.3, 0.2, 2.1])
ABOVE_ONE = np.array([1.2, 1.9, 3.0])

UNARY = [
    ("neg", lax.neg, ANY), ("exp", lax.exp, ANY), ("exp2", lax.exp2, ANY), ("expm1", lax.expm1, ANY),
    ("log", lax.log, POS), ("log1p", lax.log1p, POS), ("tanh", lax.tanh, ANY),
    ("logistic", lax.logistic, ANY), ("sin", lax.sin, ANY), ("cos", lax.cos, ANY), ("tan", lax.tan, UNIT),
    ("asin", lax.asin, UNIT), ("acos", lax.acos, UNIT), ("atan", lax.atan, ANY), ("sinh", lax.sinh, ANY),
    ("cosh", lax.cosh, ANY), ("asinh", lax.asinh, ANY), ("acosh", lax.acosh, ABOVE_ONE),
    ("atanh", lax.atanh, UNIT), ("sqrt", lax.sqrt, POS), ("rsqrt", lax.rsqrt, POS), ("cbrt", lax.cbrt, POS),
    ("erf", lax.erf, ANY), ("erfc", lax.erfc, ANY), ("erf_inv", lax.erf_inv, UNIT), ("lgamma", lax.lgamma, POS),
    ("digamma", lax.digamma, POS), ("abs", lax.abs, ANY), ("square", lax.square, ANY),
    ("integer_pow3", lambda x: lax.integer_pow(x, 3), ANY),
    ("integer_pow-2", lambda x: lax.integer_pow(x, -2), POS),
]
BINARY = [
    ("add", lax.add, ANY, POS), ("sub", lax.sub, ANY, POS), ("mul", lax.mul, ANY, POS),
    ("div", lax.div, ANY, POS), ("rem", lax.rem, np.array([-1.25, 0.65, 6.2]), POS), ("pow", lax.pow, POS, ANY),
    ("atan2", lax.atan2, ANY, POS), ("max", lax.max, ANY, POS[::-1]), ("min", lax.min, ANY, POS[::-1]),
]


@pytest.mark.parametrize("name, fn, x", UNARY, ids=[u[0] for u in UNARY])
def test_unary_check_grads(name, fn, x):
    with fluxion.enable_x64():
        check_grads(fn, (x,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name, fn, x, y", BINARY, ids=[b[0] for b in BINARY])
def test_binary_check_grads(name, fn, x, y):
    with fluxion.enable_x64():
        check_grads(fn, (x, y), order=2, modes=("fwd", "rev"))
        check_grads(lambda a: fn(a, y[0]), (x,), order=1, modes=("rev",))  # rank-0 operand


def test_complex_grads():
    with fluxion.enable_x64():
        z = np.array([0.3 + 0.4j, -1.0 + 0.2j])
        for fn in (lax.exp, lax.sin, lambda z: lax.mul(z, z), lax.log, lax.sqrt):
            check_grads(fn, (z,), order=1, modes=("fwd", "rev"))
        check_grads(lambda x, y: lax.complex(x, y), (np.array([0.5]), np.array([-1.5])), order=1,
                    modes=("fwd",))
        # Mixed real/complex functions follow JAX's cotangent convention: compare with JAX.
        ct = np.array([0.7, -1.3])
        for ours, theirs in ((lax.abs, jax.lax.abs),
                             (lambda z: lax.real(z) * lax.imag(z), lambda z: jax.lax.real(z) * jax.lax.imag(z))):
            with jax.enable_x64(True):
                expected = jax.vjp(theirs, z)[1](ct)[0]
            np.testing.assert_allclose(fluxion.vjp(ours, z)[1](ct)[0], expected, rtol=1e-12)
        with jax.enable_x64(True):
            expected = jax.vjp(jax.lax.complex, np.array([0.5]), np.array([-1.5]))[1](np.array([1 + 2j]))
        got = fluxion.vjp(lax.complex, np.array([0.5]), np.array([-1.5]))[1](np.array([1 + 2j]))
        np.testing.assert_allclose(got[0], expected[0])
        np.testing.assert_allclose(got[1], expected[1])


@pytest.mark.parametrize("fun, jfun, x", [
    (jnp.abs, jax.numpy.abs, 0.0),
    (jnp.sqrt, jax.numpy.sqrt, 0.0),
    (lambda x: jnp.maximum(x, 1.0), lambda x: jax.numpy.maximum(x, 1.0), 1.0),
    (lambda x: jnp.minimum(x, 1.0), lambda x: jax.numpy.minimum(x, 1.0), 1.0),
    (lambda x: jnp.clip(x, 0.0, 1.0), lambda x: jax.numpy.clip(x, 0.0, 1.0), 1.0),
    (lambda x: jnp.clip(x, 0.0, 1.0), lambda x: jax.numpy.clip(x, 0.0, 1.0), 0.0),
    (lambda x: jnp.where(x > 0, x, 0.0), lambda x: jax.numpy.where(x > 0, x, 0.0), 0.0),
    (lambda x: x ** 0.0, lambda x: x ** 0.0, 0.0),
    (lambda x: 0.0 ** x, lambda x: 0.0 ** x, 1.0),
    (jnp.sign, jax.numpy.sign, 0.5),
    (jnp.round, jax.numpy.round, 0.5),
])
def test_conventions_at_non_differentiable_points_match_jax(fun, jfun, x):
    np.testing.assert_allclose(fluxion.grad(fun)(x), jax.grad(jfun)(x))


def test_max_tie_splits_gradient():
    ours = fluxion.grad(lambda x: lax.max(x, 2.0))(2.0)
    theirs = jax.grad(lambda x: jax.lax.max(x, 2.0))(2.0)
    assert float(ours) == float(theirs) == 0.5
    assert ours.weak_type == theirs.weak_type


def test_integer_and_boolean_ops_have_zero_tangents():
    out, t = fluxion.jvp(lambda x: lax.floor(x) + lax.sign(x) + lax.convert_element_type(x > 1, np.float32),
                         (np.float32(1.5),), (np.float32(1.0),))
    assert float(t) == 0.0


UNARY_BATCH = [fn for _, fn, _ in UNARY]


@pytest.mark.parametrize("in_axis", [0, 1, -1])
def test_vmap_unary_matches_loop(in_axis):
    x = np.abs(rng.standard_normal((3, 4))).astype(np.float32) * 0.5 + 0.1
    for fn in UNARY_BATCH:
        out = fluxion.vmap(fn, in_axes=in_axis)(x)
        expected = np.stack([np.asarray(fn(np.take(x, i, axis=in_axis))) for i in range(x.shape[in_axis])])
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


BINARY_BATCH = [fn for _, fn, _, _ in BINARY] + [lax.eq, lax.lt, lax.ge, lax.nextafter]


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 1), (1, 0), (0, -1)])
def test_vmap_binary_matches_loop(in_axes):
    a = np.abs(rng.standard_normal((4, 4))).astype(np.float32) + 0.5
    b = np.abs(rng.standard_normal((4, 4))).astype(np.float32) + 0.5
    # An unmapped operand is one example's worth: it must have the per-example rank.
    a = a[0] if in_axes[0] is None else a
    b = b[0] if in_axes[1] is None else b
    size = 4
    for fn in BINARY_BATCH:
        out = fluxion.vmap(fn, in_axes=in_axes)(a, b)
        pick = lambda v, ax, i: v if ax is None else np.take(v, i, axis=ax)
        expected = np.stack([np.asarray(fn(pick(a, in_axes[0], i), pick(b, in_axes[1], i)))
                             for i in range(size)])
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_vmap_of_batched_scalar_with_unbatched_array():
    s = np.arange(3, dtype=np.float32)
    v = np.ones(5, np.float32)
    out = fluxion.vmap(lambda s, v: lax.mul(s, v), in_axes=(0, None))(s, v)
    np.testing.assert_allclose(out, s[:, None] * v[None, :])


def test_vmap_integer_and_bitwise_ops():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    b = (np.arange(12, dtype=np.int32).reshape(3, 4) % 3) + 1
    for fn, ref in ((lax.bitwise_and, np.bitwise_and), (lax.shift_left, np.left_shift),
                    (lax.div, lambda x, y: np.trunc(x / y).astype(np.int32)), (lax.rem, np.fmod)):
        np.testing.assert_array_equal(fluxion.vmap(fn, in_axes=(1, 1), out_axes=1)(a, b), ref(a, b))
    np.testing.assert_array_equal(fluxion.vmap(lax.population_count)(a), [[bin(v).count("1") for v in r] for r in a])


def test_logaddexp_derivative_at_ties_and_infinities_matches_jax():
    for args in ((1.0, 1.0), (0.0, 3.0), (-np.inf, 0.0), (2.0, -np.inf)):
        ours = fluxion.grad(jnp.logaddexp, argnums=(0, 1))(*args)
        theirs = jax.grad(jax.numpy.logaddexp, argnums=(0, 1))(*args)
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
