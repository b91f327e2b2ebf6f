"""IREE as a second compiler: the same StableHLO through IREE (llvm-cpu) agrees with XLA."""
import numpy as np
import pytest

pytest.importorskip("iree.compiler")
pytest.importorskip("iree.runtime")

import fluxion  # noqa: E402
import fluxion.numpy as jnp  # noqa: E402
from fluxion import export, lax  # noqa: E402

RNG = np.random.default_rng(0)


def both(f, *args, rtol=2e-5, atol=2e-6):
    """f compiled by XLA and by IREE on the same arguments: same pytrees, dtypes, values."""
    xla = fluxion.jit(f)(*args)
    iree = fluxion.jit(f, backend="iree")(*args)
    lx, tx = fluxion.tree_util.tree_flatten(xla)
    li, ti = fluxion.tree_util.tree_flatten(iree)
    assert tx == ti
    for a, b in zip(lx, li):
        assert type(b) is type(a) and b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=rtol, atol=atol)
    return iree


def test_elementwise_families():
    x = RNG.uniform(0.1, 2.0, (3, 4)).astype(np.float32)
    i = RNG.integers(-50, 50, (3, 4)).astype(np.int32)

    def f(x, i):
        floats = [jnp.sin(x), jnp.exp(x), jnp.log(x), jnp.tanh(x), jnp.sqrt(x), x ** 1.5,
                  lax.erf(x), jnp.arctan2(x, x + 1), jnp.maximum(x, 1.0), jnp.floor(x * 3),
                  lax.logistic(x), jnp.where(x > 1, x, -x)]
        ints = [i + 3, i * i, i // 7, i % 5, jnp.abs(i), i >> 2, i & 12, jnp.sign(i)]
        bools = [x > 1.0, (i > 0) ^ (x < 0.5)]
        return floats, ints, bools, x.astype(jnp.int32), i.astype(jnp.float32)
    both(f, x, i, rtol=1e-5, atol=1e-5)


def test_dot_general_and_convolution():
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((2, 4, 5)).astype(np.float32)
    img = RNG.standard_normal((2, 3, 9, 9)).astype(np.float32)
    ker = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)

    def f(a, b, img, ker):
        return (jnp.matmul(a, b), jnp.einsum("bij,bjk->ik", a, b),
                lax.conv_general_dilated(img, ker, (2, 1), "SAME", rhs_dilation=(1, 2)),
                lax.conv(img, ker, (1, 1), "VALID"))
    both(f, a, b, img, ker, rtol=1e-4, atol=1e-4)


def test_reductions_gather_scatter():
    x = RNG.standard_normal((5, 6)).astype(np.float32)
    idx = np.array([4, 0, 2, 2], np.int32)

    def f(x, idx):
        return (x.sum(), x.max(axis=0), jnp.argmax(x, axis=1), x.mean(axis=1), jnp.cumsum(x, 0),
                x[idx], x[idx, 1:3], x.at[idx].add(1.0), x.at[idx, 0].set(-5.0),
                jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1))
    both(f, x, idx, rtol=1e-5, atol=1e-5)


def test_control_flow():
    x = RNG.standard_normal((4,)).astype(np.float32)

    def f(x):
        y = lax.fori_loop(0, 5, lambda i, c: c * 0.9 + i, x)
        z = lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: v - 1, x)
        carry, ys = lax.scan(lambda c, e: (c + e, c * e), 0.0, x)
        w = lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 3, c[1] * 1.1), (0, x))
        return y, z, carry, ys, w
    both(f, x)


def test_mlp_training_step():
    sizes = [8, 16, 4]
    params = [(RNG.standard_normal((m, n)).astype(np.float32) / 3, np.zeros(n, np.float32))
              for m, n in zip(sizes[:-1], sizes[1:])]
    x = RNG.standard_normal((10, 8)).astype(np.float32)
    y = RNG.standard_normal((10, 4)).astype(np.float32)

    def loss(params, x, y):
        for w, b in params[:-1]:
            x = jnp.tanh(x @ w + b)
        w, b = params[-1]
        return jnp.mean((x @ w + b - y) ** 2)

    def step(params, x, y):
        value, grads = fluxion.value_and_grad(loss)(params, x, y)
        return value, fluxion.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)

    new = both(step, params, x, y, rtol=1e-4, atol=1e-5)
    # and the IREE step decreases the loss as the XLA one does
    iree_step = fluxion.jit(step, backend="iree")
    p = new[1]
    for _ in range(3):
        v, p = iree_step(p, x, y)
    assert float(v) < float(new[0])


def test_exported_artifact_runs_on_iree():
    def h(x):
        return jnp.tanh(x @ x.T).sum(axis=1)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    exp = export.deserialize(export.export(fluxion.jit(h))(x).serialize())
    got = fluxion.jit(exp.call, backend="iree")(x)
    np.testing.assert_allclose(got, h(x), rtol=1e-5)


def test_default_backend_config():
    fluxion.config.update("default_backend", "iree")
    try:
        def k(x):
            return x * 3.0 + 1.0
        out = fluxion.jit(k)(np.ones(3, np.float32))
        jitted = fluxion.jit(k)
        assert jitted._cache_size() == 1
        (entry,) = jitted._cache.values()
        assert type(entry.compiled.executable).__name__ == "IreeExecutable"
    finally:
        fluxion.config.update("default_backend", None)
    np.testing.assert_allclose(out, 4.0)


def test_ops_iree_lacks_are_refused_before_compiling():
    a = np.eye(3, dtype=np.float32) * 2
    with pytest.raises(NotImplementedError, match="IREE cannot compile .*lapack"):
        fluxion.jit(jnp.linalg.inv, backend="iree")(a)

    def cb(x):
        return fluxion.pure_callback(lambda v: np.asarray(v) * 2, fluxion.ShapeDtypeStruct(
            x.shape, x.dtype), x)
    with pytest.raises(NotImplementedError, match="host callbacks"):
        fluxion.jit(cb, backend="iree")(a)
