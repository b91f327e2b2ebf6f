"""lax tokens (create_token, after_all) and device_put_p: jaxprs as JAX prints them, tokens
through jit (arguments and results), errors, device_put under jit, grad and vmap."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion import lax

jax = pytest.importorskip("jax")


def test_tokens_eager_and_jaxpr():
    t = lax.create_token()
    assert type(t).__name__ == "Token"
    assert type(lax.after_all(t, lax.create_token(3))).__name__ == "Token"
    assert type(lax.after_all()).__name__ == "Token"
    f = lambda x: lax.after_all(lax.create_token(x), lax.create_token())  # noqa: E731
    assert str(fluxion.make_jaxpr(f)(1.0)) == str(jax.make_jaxpr(
        lambda x: jax.lax.after_all(jax.lax.create_token(x), jax.lax.create_token()))(1.0))


def test_tokens_through_jit():
    t = lax.create_token()
    f = fluxion.jit(lambda t, x: (lax.after_all(t, lax.create_token(x)), x + 1))
    text = f.lower(t, fnp.ones(2)).as_text()
    assert "@main(%arg0: !stablehlo.token" in text and "-> (!stablehlo.token," in text
    for _ in range(2):  # the second call takes the cached path
        tok, y = f(t, fnp.ones(2))
        assert type(tok) is type(t)
        np.testing.assert_array_equal(y, [2.0, 2.0])
    tok2, _ = f(tok, fnp.ones(2))  # a token from one executable feeds another
    assert type(tok2) is type(t)
    g = fluxion.jit(lambda: lax.create_token())
    assert type(g()) is type(t)


def test_tokens_errors_and_transformations():
    with pytest.raises(TypeError, match="must be tokens"):
        lax.after_all(1.0)
    with pytest.raises(TypeError, match="must be tokens"):
        fluxion.jit(lambda x: lax.after_all(x))(1.0)
    out = fluxion.vmap(lambda x: (lax.after_all(lax.create_token(x)), x * 2)[1])(fnp.ones(3))
    np.testing.assert_array_equal(out, [2.0, 2.0, 2.0])
    primal, tangent = fluxion.jvp(lambda x: (lax.create_token(), x * 2)[1], (1.0,), (1.0,))
    assert float(tangent) == 2.0
    assert fluxion.grad(lambda x: (lax.create_token(), x * x)[1])(3.0) == 6.0


def test_device_put_p():
    assert lax.device_put_p.multiple_results
    ours = fluxion.make_jaxpr(lambda x: fluxion.device_put((x, 2 * x)))(1.0)
    theirs = jax.make_jaxpr(lambda x: jax.device_put((x, 2 * x)))(1.0)
    assert str(ours) == str(theirs)
    f = fluxion.jit(lambda x: fluxion.device_put(x) * 3)
    np.testing.assert_array_equal(f(np.arange(3.0, dtype=np.float32)), [0.0, 3.0, 6.0])
    assert fluxion.grad(lambda x: fluxion.device_put(x) * 2)(1.0) == 2.0
    g = str(fluxion.make_jaxpr(fluxion.grad(lambda x: fluxion.device_put(x) * 2))(1.0))
    assert "ALWAYS_COPY" in g  # the cotangent goes back as a copy, as in JAX
    out = fluxion.vmap(lambda x: fluxion.device_put(x) + 1)(fnp.arange(3.0))
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])
    t, dt = fluxion.jvp(lambda x: fluxion.device_put(x) * 3, (2.0,), (1.0,))
    assert (float(t), float(dt)) == (6.0, 3.0)
    # concrete values do not bind it
    x = fluxion.device_put(np.ones(2, np.float32))
    np.testing.assert_array_equal(x, [1.0, 1.0])
