"""pmap cases; run by tests/test_eight_devices.py in a process with 8 CPU devices."""
import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.test_util import check_grads

N = 8
pytestmark = pytest.mark.skipif(jax.device_count() < N, reason="needs 8 CPU devices")


def _x(shape=(N, 3), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name,ref", [
    ("psum", lambda x: np.broadcast_to(x.sum(0), x.shape)),
    ("pmean", lambda x: np.broadcast_to(x.mean(0), x.shape)),
    ("pmax", lambda x: np.broadcast_to(x.max(0), x.shape)),
    ("pmin", lambda x: np.broadcast_to(x.min(0), x.shape)),
])
def test_reductions_against_numpy(name, ref):
    x = _x()
    out = jax.pmap(lambda v: getattr(lax, name)(v, "i"), "i")(x)
    np.testing.assert_allclose(np.asarray(out), ref(x), rtol=1e-5)


def test_axis_index_and_all_gather():
    x = _x()
    np.testing.assert_array_equal(jax.pmap(lambda v: lax.axis_index("i"), "i")(x), np.arange(N))
    out = jax.pmap(lambda v: lax.all_gather(v, "i"), "i")(x)
    np.testing.assert_array_equal(np.asarray(out), np.broadcast_to(x, (N,) + x.shape))
    tiled = jax.pmap(lambda v: lax.all_gather(v, "i", tiled=True), "i")(x)
    np.testing.assert_array_equal(np.asarray(tiled), np.broadcast_to(x.reshape(-1), (N, 3 * N)))


def test_ppermute_pshuffle_psum_scatter():
    x = _x()
    perm = [(i, (i + 1) % N) for i in range(N)]
    out = jax.pmap(lambda v: lax.ppermute(v, "i", perm), "i")(x)
    np.testing.assert_array_equal(np.asarray(out), np.roll(x, 1, axis=0))
    order = list(np.random.default_rng(1).permutation(N))
    out = jax.pmap(lambda v: lax.pshuffle(v, "i", order), "i")(x)
    np.testing.assert_array_equal(np.asarray(out), x[order])
    y = _x((N, N, 2))
    out = jax.pmap(lambda v: lax.psum_scatter(v, "i"), "i")(y)
    np.testing.assert_allclose(np.asarray(out), y.sum(0), rtol=1e-5)


@pytest.mark.parametrize("split,concat,tiled", [(0, 0, False), (0, 1, False), (1, 0, False),
                                                (0, 1, True), (1, 0, True)])
def test_all_to_all_matches_vmap(split, concat, tiled):
    shape = [N, 2 * N, 2 * N] if tiled else [N, N, N]
    y = _x(tuple(shape))
    f = lambda v: lax.all_to_all(v, "i", split, concat, tiled=tiled)
    np.testing.assert_array_equal(np.asarray(jax.pmap(f, "i")(y)),
                                  np.asarray(jax.vmap(f, axis_name="i")(y)))


def test_pmap_matches_vmap_and_numpy():
    x = _x((N, 4, 5))
    f = lambda v: jnp.tanh(v @ v.T).sum(0) - lax.pmean(v, "i")[:, 0]
    np.testing.assert_allclose(np.asarray(jax.pmap(f, "i")(x)),
                               np.asarray(jax.vmap(f, axis_name="i")(x)), rtol=1e-5, atol=1e-6)


def test_in_axes_out_axes_static_and_kwargs():
    x, b = _x((3, N)), np.float32(2.0)
    f = jax.pmap(lambda v, c, k: v * c + k, in_axes=(1, None, None),
                 static_broadcasted_argnums=(2,))
    np.testing.assert_allclose(np.asarray(f(x, b, 1.5)), (x * 2 + 1.5).T, rtol=1e-6)
    g = jax.pmap(lambda v: (v, lax.psum(v, "i")), "i", out_axes=(0, None))
    a, s = g(_x())
    assert np.asarray(s).shape == (3,)
    np.testing.assert_allclose(np.asarray(s), _x().sum(0), rtol=1e-5)


def test_outputs_stay_on_devices_and_chain():
    x = _x()
    f = jax.pmap(lambda v: v * 2, "i")
    y = f(x)
    assert len(y.addressable_shards) == N
    assert {s.device.id for s in y.addressable_shards} == set(range(N))
    np.testing.assert_allclose(np.asarray(f(y)), x * 4)
    np.testing.assert_allclose(np.asarray(y + 1), x * 2 + 1)  # usable as an ordinary array
    np.testing.assert_allclose(float(jax.jit(jnp.sum)(y)), (x * 2).sum(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jax.grad(lambda a: (a ** 2).sum())(y)), x * 4, rtol=1e-6)


def test_grad_through_collectives_matches_vmap():
    x = _x()
    for coll in (lambda v: lax.psum(v, "i"), lambda v: lax.pmax(v, "i"),
                 lambda v: lax.pmin(v, "i"), lambda v: lax.all_gather(v, "i")[3],
                 lambda v: lax.ppermute(v, "i", [(i, (i + 3) % N) for i in range(N)])):
        g = lambda v: jax.grad(lambda u: (jnp.sin(coll(u)) * u).sum())(v)
        np.testing.assert_allclose(np.asarray(jax.pmap(g, "i")(x)),
                                   np.asarray(jax.vmap(g, axis_name="i")(x)), rtol=1e-5, atol=1e-6)


def test_pmax_jvp_finite_differences():
    # pmax/pmin over a vmap axis differentiate with the same rule pmap lowers.
    x = _x((N,), seed=3)
    f = lambda v: jax.vmap(lambda u: lax.pmax(u, "i") * u + lax.pmin(u, "i"), axis_name="i")(v)
    check_grads(f, (x,), order=1, modes=("fwd", "rev"), atol=1e-2, rtol=1e-2)


def test_vmap_inside_pmap_both_names():
    x = _x((N, 4, 3))
    f = jax.vmap(lambda v: lax.psum(v, "j") + lax.psum(v, "i"), axis_name="j")
    out = jax.pmap(f, "i")(x)
    np.testing.assert_allclose(np.asarray(out), x.sum(1, keepdims=True) + x.sum(0), rtol=1e-5)


def test_control_flow_inside():
    x = _x()

    def f(v):
        def body(c, _):
            return c + lax.psum(v, "i"), ()
        c, _ = lax.scan(body, jnp.zeros_like(v), None, length=3)
        c = lax.cond(lax.axis_index("i") % 2 == 0, lambda a: a * 2, lambda a: -a, c)
        return lax.fori_loop(0, 2, lambda i, a: a + lax.pmax(v, "i"), c)

    expect = 3 * x.sum(0)
    expect = np.where((np.arange(N) % 2 == 0)[:, None], 2 * expect, -expect) + 2 * x.max(0)
    np.testing.assert_allclose(np.asarray(jax.pmap(f, "i")(x)), expect, rtol=1e-5)


def test_closed_over_constants_and_donation():
    w = np.arange(3, dtype=np.float32)
    x = _x()
    f = jax.pmap(lambda v: v + w, "i", donate_argnums=0)
    np.testing.assert_allclose(np.asarray(f(jnp.asarray(x))), x + w)


def test_devices_argument():
    devs = jax.devices()[4:]
    x = _x((4, 3))
    y = jax.pmap(lambda v: lax.psum(v, "i"), "i", devices=devs)(x)
    assert {s.device.id for s in y.addressable_shards} == {4, 5, 6, 7}
    np.testing.assert_allclose(np.asarray(y)[0], x.sum(0), rtol=1e-5)


def test_errors():
    with pytest.raises(ValueError, match="inconsistent sizes"):
        jax.pmap(lambda a, b: a + b)(np.zeros((8, 2)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="requires 16 logical devices"):
        jax.pmap(lambda a: a)(np.zeros((16, 2)))
    with pytest.raises(NameError):
        jax.pmap(lambda a: lax.psum(a, "j"), "i")(np.zeros((8, 2)))
