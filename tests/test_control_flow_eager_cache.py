"""Eager control flow compiles once per body structure, and never confuses two bodies.

Outside jit, each call of lax.scan / cond / while_loop / fori_loop traces its body again (so
it sees the current values of the variables it closes over) and finds its executable by the
structure of the traced jaxpr.
"""
import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import lax
from fluxion._src import core, dispatch

X = np.arange(3, dtype=np.float32)

PROGRAMS = {
    "fori": lambda k: lax.fori_loop(0, 4, lambda i, c: c * k + i, jnp.asarray(X)),
    "scan": lambda k: lax.scan(lambda c, a: (c * k + a, c), jnp.asarray(X),
                               jnp.ones((3, 3)))[0],
    "cond": lambda k: lax.cond(X[0] > -1, lambda a: a * k, lambda a: a - k, jnp.asarray(X)),
    "while": lambda k: lax.while_loop(lambda c: c[2] < 10.0, lambda c: c * k + 1.0 + c[2],
                                      jnp.asarray(X)),
    "fori_dynamic": lambda k: lax.fori_loop(jnp.int32(0), jnp.int32(4),
                                            lambda i, c: c * k + i, jnp.asarray(X)),
}


def _reference(name, k):
    x = X.copy()
    if name in ("fori", "fori_dynamic"):
        for i in range(4):
            x = x * k + i
    elif name == "scan":
        for _ in range(3):
            x = x * k + 1
    elif name == "cond":
        x = x * k
    else:  # terminates for every k >= 0 used: x[2] grows by at least 1 + x[2] each step
        while x[2] < 10.0:
            x = x * k + 1.0 + x[2]
    return x


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_repeated_eager_calls_reuse_one_executable(name):
    program = PROGRAMS[name]
    np.testing.assert_allclose(np.asarray(program(2.0)), _reference(name, 2.0), rtol=1e-6)
    size = len(dispatch._primitive_cache)
    for _ in range(3):  # a fresh lambda each call, structurally the same
        np.testing.assert_allclose(np.asarray(program(2.0)), _reference(name, 2.0), rtol=1e-6)
    assert len(dispatch._primitive_cache) == size


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_bodies_differing_in_a_constant_are_not_confused(name):
    program = PROGRAMS[name]
    for k in (2.0, 3.0, 2.0, -0.0, 0.0):
        expected = _reference(name, k)
        got = np.asarray(program(k))
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


def test_rebinding_a_closed_over_array_is_seen():
    scale = jnp.asarray(np.float32(2.0))

    def body(i, c):
        return c * scale

    first = lax.fori_loop(0, 2, body, jnp.ones(3))
    scale = jnp.asarray(np.float32(3.0))  # noqa: F841  (read by body)
    second = lax.fori_loop(0, 2, body, jnp.ones(3))
    np.testing.assert_array_equal(np.asarray(first), np.full(3, 4.0))
    np.testing.assert_array_equal(np.asarray(second), np.full(3, 9.0))


def test_different_custom_jvp_functions_in_bodies_are_not_confused():
    def make(offset):
        @jax.custom_jvp
        def f(x):
            return x + offset

        @f.defjvp
        def f_jvp(primals, tangents):
            return f(primals[0]), tangents[0]
        return f

    plus_one, plus_two = make(1.0), make(2.0)
    out1 = lax.fori_loop(0, 3, lambda i, c: plus_one(c), jnp.zeros(2))
    out2 = lax.fori_loop(0, 3, lambda i, c: plus_two(c), jnp.zeros(2))
    np.testing.assert_array_equal(np.asarray(out1), np.full(2, 3.0))
    np.testing.assert_array_equal(np.asarray(out2), np.full(2, 6.0))


def test_eager_grad_through_scan_does_not_grow_the_cache():
    def loss(w):
        return lax.scan(lambda c, a: (jnp.tanh(c * w + a), None), jnp.zeros(3),
                        jnp.ones((4, 3)))[0].sum()

    g = jax.grad(loss)
    first = g(jnp.float32(0.5))
    size = len(dispatch._primitive_cache)
    for _ in range(3):
        assert float(g(jnp.float32(0.5))) == float(first)
    assert len(dispatch._primitive_cache) == size


def test_fingerprint_tells_literals_and_params_apart():
    def fingerprint(f, *args):
        return core.jaxpr_fingerprint(jax.make_jaxpr(f)(*args).jaxpr)

    x = jnp.ones(3)
    assert fingerprint(lambda a: a * 2.0, x) == fingerprint(lambda b: b * 2.0, x)
    assert fingerprint(lambda a: a * 2.0, x) != fingerprint(lambda a: a * 3.0, x)
    assert fingerprint(lambda a: a + 0.0, x) != fingerprint(lambda a: a + -0.0, x)
    assert fingerprint(lambda a: a.sum(0), jnp.ones((2, 2))) != fingerprint(
        lambda a: a.sum(1), jnp.ones((2, 2)))
    assert fingerprint(lambda a: a * 2.0, x) != fingerprint(lambda a: a * 2.0, jnp.ones(4))
    assert fingerprint(lambda a, b: a - b, x, x) != fingerprint(lambda a, b: b - a, x, x)
