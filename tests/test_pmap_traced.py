"""pmap under jit, grad, vmap and nested pmap (the `xla_pmap` equation).

The cases need 8 CPU devices: tests/test_eight_devices.py runs this file, with the suite's
other 8-device files, in one fresh process that has them (for fluxion and JAX)."""

import numpy as np
import pytest

from _eight_devices import ON_8_DEVICES as ON_8

N = 8


def on_8_devices(test):
    """The test itself where 8 devices exist (tests/test_eight_devices.py runs this file so)."""
    return test if ON_8 else None


if ON_8:
    import jax
    import jax.numpy as jjnp

    import fluxion as fx
    import fluxion.numpy as jnp
    from fluxion import lax


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# --------------------------------------------------------------------------------------------
# The equation

@on_8_devices
def test_make_jaxpr_shows_xla_pmap():
    f = fx.pmap(lambda v, c: lax.psum(v * c, "i"), "i", in_axes=(0, None))
    jaxpr = fx.make_jaxpr(f)(_x((4, 3)), 2.0).jaxpr
    (eqn,) = jaxpr.eqns
    assert eqn.primitive.name == "xla_pmap"
    assert eqn.params["axis_size"] == 4 and eqn.params["axis_name"] == "i"
    assert eqn.params["in_axes"] == (0, None) and eqn.params["out_axes"] == (0,)
    body = [e.primitive.name for e in eqn.params["jaxpr"].jaxpr.eqns]
    assert body[-2:] == ["mul", "psum"], body
    assert "xla_pmap" in str(fx.make_jaxpr(f)(_x((4, 3)), 2.0))


# --------------------------------------------------------------------------------------------
# jit of pmap

COLLECTIVES = {
    "psum": (lambda v: lax.psum(v, "i"), lambda v: jax.lax.psum(v, "i")),
    "pmean": (lambda v: lax.pmean(v, "i"), lambda v: jax.lax.pmean(v, "i")),
    "pmax": (lambda v: lax.pmax(v, "i"), lambda v: jax.lax.pmax(v, "i")),
    "all_gather": (lambda v: lax.all_gather(v, "i"), lambda v: jax.lax.all_gather(v, "i")),
    "ppermute": (lambda v: lax.ppermute(v, "i", [(k, (k + 1) % N) for k in range(N)]),
                 lambda v: jax.lax.ppermute(v, "i", [(k, (k + 1) % N) for k in range(N)])),
    "axis_index": (lambda v: v * lax.axis_index("i"), lambda v: v * jax.lax.axis_index("i")),
    "psum_scatter": (lambda v: lax.psum_scatter(v, "i", tiled=True),
                     lambda v: jax.lax.psum_scatter(v, "i", tiled=True)),
}


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_jit_of_pmap_matches_jax(name):
    ours, theirs = COLLECTIVES[name]
    x = _x((N, 16))
    got = fx.jit(fx.pmap(lambda v: jnp.sin(ours(v)), "i"))(x)
    want = jax.jit(jax.pmap(lambda v: jjnp.sin(theirs(v)), "i"))(x)
    assert got.shape == want.shape
    _close(got, want)


test_jit_of_pmap_matches_jax = on_8_devices(test_jit_of_pmap_matches_jax)


@on_8_devices
def test_jit_of_pmap_against_numpy_with_axes():
    x, c = _x((3, 4)), _x((3,), 1)
    f = fx.jit(lambda a, b: fx.pmap(lambda v, w: (lax.psum(v * w, "i"), v + w), "i",
                                    in_axes=(1, None), out_axes=(None, 1))(a, b))
    total, plus = f(x, c)
    _close(total, (x * c[:, None]).sum(axis=1))
    _close(plus, x + c[:, None])
    # around the pmap the program computes too, once per replica
    g = fx.jit(lambda a: jnp.cos(fx.pmap(lambda v: lax.pmean(v, "i") * 2.0, "i")(a * 3.0)).sum())
    _close(g(x.T), np.cos(np.broadcast_to((x.T * 3.0).mean(0) * 2.0, (4, 3))).sum())


@on_8_devices
def test_jit_with_two_pmaps_of_different_sizes():
    def f(a, b):
        s = fx.pmap(lambda v: lax.psum(v, "i"), "i")(a)
        t = fx.pmap(lambda v: lax.all_gather(v, "k"), "k")(b)
        return s.sum() + t.sum(), t
    a, b = _x((8, 2)), _x((2, 3), 1)
    total, t = fx.jit(f)(a, b)
    _close(total, a.sum() * 8 + b.sum() * 2, rtol=1e-4)
    _close(t, np.broadcast_to(b, (2, 2, 3)))


@on_8_devices
def test_scan_and_cond_inside_pmap_under_jit():
    def body(v):
        def step(carry, row):
            carry = lax.cond(row.sum() > 0, lambda c: c + row, lambda c: c - row, carry)
            return carry, lax.psum(carry, "i")
        last, hist = lax.scan(step, jnp.zeros(v.shape[1:]), v)
        return last, hist

    x = _x((N, 5, 3))
    last, hist = fx.jit(fx.pmap(body, "i"))(x)
    want_last = np.zeros((N, 3), np.float32)
    want_hist = np.zeros((N, 5, 3), np.float32)
    for t in range(5):
        rows = x[:, t]
        want_last = np.where((rows.sum(1) > 0)[:, None], want_last + rows, want_last - rows)
        want_hist[:, t] = want_last.sum(0)
    _close(last, want_last)
    _close(hist, want_hist, rtol=1e-4)
    jwant = jax.jit(jax.pmap(lambda v: jax.lax.scan(
        lambda c, r: (lambda c2: (c2, jax.lax.psum(c2, "i")))(
            jax.lax.cond(r.sum() > 0, lambda c: c + r, lambda c: c - r, c)),
        jjnp.zeros(v.shape[1:]), v), "i"))(x)
    _close(hist, jwant[1], rtol=1e-4)


@on_8_devices
def test_pmap_inside_scan_and_cond_under_jit():
    x = _x((3, 4, 2))
    psum = fx.pmap(lambda v: lax.psum(v, "i"), "i")
    f = fx.jit(lambda a: lax.scan(lambda c, r: (c + psum(r).sum(), None), 0.0, a)[0])
    _close(f(x), x.sum() * 4, rtol=1e-4)
    g = fx.jit(lambda a, p: lax.cond(p, psum, lambda v: v * 2.0, a))
    _close(g(x[0], True), np.broadcast_to(x[0].sum(0), (4, 2)))
    _close(g(x[0], False), x[0] * 2)


@on_8_devices
def test_jit_of_pmap_output_reads_and_chains():
    x = _x((N, 4))
    y = fx.jit(fx.pmap(lambda v: v * 2.0, "i"))(x)
    z = fx.pmap(lambda v: lax.psum(v, "i"), "i")(y)  # an eager pmap of the jit result
    _close(z, np.broadcast_to((x * 2).sum(0), (N, 4)))
    eager = fx.pmap(lambda v: v + 1.0, "i")(x)
    _close(fx.jit(fx.pmap(lambda v: v * v, "i"))(eager), (x + 1) ** 2)
    assert len(eager.addressable_shards) == N
    assert {s.device.id for s in eager.addressable_shards} == set(range(N))


@on_8_devices
def test_lowered_jit_of_pmap_is_a_replicated_program():
    f = fx.jit(lambda a: fx.pmap(lambda v: lax.psum(v, "i"), "i")(a) + 1.0)
    x = _x((4, 3))
    lowered = f.lower(x)
    text = lowered.as_text()
    assert "mhlo.num_replicas = 4" in text
    assert "stablehlo.replica_id" in text and "stablehlo.all_reduce" in text
    assert "stablehlo.all_gather" in text
    compiled = lowered.compile()
    _close(compiled(x), np.broadcast_to(x.sum(0), (4, 3)) + 1.0)
    assert "ENTRY" in compiled.as_text() and "replica-id" in compiled.as_text()
    assert compiled.cost_analysis() is not None


@on_8_devices
def test_pmap_outputs_as_jax():
    x = _x((4, 3))
    got = fx.pmap(lambda v: v * 2.0)(x)
    want = jax.pmap(lambda v: v * 2.0)(x)
    assert got.sharding.spec == tuple(want.sharding.spec)
    assert [d.id for d in got.sharding.mesh.devices.flat] == \
        [d.id for d in want.sharding.mesh.devices.flat]
    assert not got.is_fully_replicated and not want.is_fully_replicated
    for ours, theirs in zip(got.addressable_shards, want.addressable_shards, strict=True):
        assert ours.device.id == theirs.device.id and ours.index == theirs.index
        assert ours.replica_id == theirs.replica_id
        _close(ours.data, theirs.data)
        assert ours.data.shape == theirs.data.shape
    # mapped on another axis (JAX's out_axes=1)
    _close(fx.pmap(lambda v: v + 1.0, out_axes=1)(x), jax.pmap(lambda v: v + 1.0, out_axes=1)(x))


def _same_layout(got, want):
    """Same sharding (mesh axis names, devices, spec), shards and values as JAX's Array."""
    assert got.shape == want.shape and got.dtype == want.dtype
    assert tuple(got.sharding.mesh.axis_names) == tuple(want.sharding.mesh.axis_names)
    assert [d.id for d in got.sharding.mesh.devices.flat] == \
        [d.id for d in want.sharding.mesh.devices.flat]
    assert tuple(got.sharding.spec) == tuple(want.sharding.spec)
    assert got.is_fully_replicated == want.is_fully_replicated
    for ours, theirs in zip(got.addressable_shards, want.addressable_shards, strict=True):
        assert ours.device.id == theirs.device.id and ours.index == theirs.index
        assert ours.replica_id == theirs.replica_id
        assert ours.data.shape == theirs.data.shape
        _close(ours.data, theirs.data)  # XLA may sum in another order
    _close(got, want)


JIT_OUTPUT_LAYOUTS = {  # (fluxion, jax) programs; sharded or replicated over the pmap devices
    "mapped": lambda p, l, np_: p(lambda v: v * 3.0),
    "mapped_named": lambda p, l, np_: p(lambda v: v - 1.0, "i"),
    "elementwise_after": lambda p, l, np_: lambda x: np_.cos(p(lambda v: v * 2.0, "i")(x) * 2.0 + x),
    "out_axes_1": lambda p, l, np_: p(lambda v: v * 2.0, out_axes=1),
    "reduced": lambda p, l, np_: lambda x: p(lambda v: v * 2.0)(x).sum(),
    "unmapped_psum": lambda p, l, np_: p(lambda v: l.psum(v, "i"), "i", out_axes=None),
    "fewer_devices": lambda p, l, np_: lambda x: p(lambda v: v + 1.0, "i")(x[:4]),
    "mixed": lambda p, l, np_: lambda x: (p(lambda v: v * v, "i")(x), x.sum(),
                                           p(lambda v: l.pmax(v, "i"), "i", out_axes=None)(x)),
}


@on_8_devices
@pytest.mark.parametrize("name", sorted(JIT_OUTPUT_LAYOUTS))
def test_jit_of_pmap_outputs_laid_out_as_jax(name):
    make = JIT_OUTPUT_LAYOUTS[name]
    x = _x((N, 3))
    got = fx.jit(make(fx.pmap, lax, jnp))(x)
    want = jax.jit(make(jax.pmap, jax.lax, jjnp))(x)
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same_layout(g, w)


@on_8_devices
def test_sharded_jit_of_pmap_result_feeds_pmap_and_grad():
    x = _x((N, 3))
    y = fx.jit(fx.pmap(lambda v: jnp.sin(v), "i"))(x)
    assert len(y.addressable_shards) == N
    _close(fx.pmap(lambda v: lax.psum(v, "i"), "i")(y), np.broadcast_to(np.sin(x).sum(0), x.shape))
    _close(fx.jit(lambda a: a * 2.0)(y), np.sin(x) * 2.0)
    _close(y + 1.0, np.sin(x) + 1.0)
    loss = lambda a: fx.pmap(lambda v: jnp.sin(v) * v, "i")(a).sum()
    jloss = lambda a: jax.pmap(lambda v: jjnp.sin(v) * v, "i")(a).sum()
    _close(fx.jit(fx.grad(loss))(x), jax.jit(jax.grad(jloss))(x))
    _close(fx.grad(fx.jit(loss))(x), jax.grad(jax.jit(jloss))(x))


# --------------------------------------------------------------------------------------------
# grad and jvp through pmap

GRAD_BODIES = {
    "psum": (lambda v: jnp.sin(lax.psum(v * v, "i")), lambda v: jjnp.sin(jax.lax.psum(v * v, "i"))),
    "pmean": (lambda v: jnp.tanh(lax.pmean(v, "i")) * v,
              lambda v: jjnp.tanh(jax.lax.pmean(v, "i")) * v),
    "all_gather": (lambda v: jnp.cos(lax.all_gather(v, "i")).sum(0) * v,
                   lambda v: jjnp.cos(jax.lax.all_gather(v, "i")).sum(0) * v),
    "ppermute": (lambda v: lax.ppermute(v ** 3, "i", [(k, (k + 3) % N) for k in range(N)]) * v,
                 lambda v: jax.lax.ppermute(v ** 3, "i", [(k, (k + 3) % N) for k in range(N)]) * v),
}


@pytest.mark.parametrize("name", sorted(GRAD_BODIES))
@pytest.mark.parametrize("jitted", [False, True])
def test_grad_through_pmap_matches_jax(name, jitted):
    ours, theirs = GRAD_BODIES[name]
    x = _x((N, 3))
    w = np.linspace(0.5, 1.5, N * 3, dtype=np.float32).reshape(N, 3)
    grad = fx.grad(lambda a: (fx.pmap(ours, "i")(a) * w).sum())
    got = (fx.jit(grad) if jitted else grad)(x)
    want = jax.grad(lambda a: (jax.pmap(theirs, "i")(a) * w).sum())(x)
    _close(got, want, rtol=1e-4, atol=1e-5)


test_grad_through_pmap_matches_jax = on_8_devices(test_grad_through_pmap_matches_jax)


@on_8_devices
def test_grad_with_unmapped_operand_and_result_matches_jax():
    x = _x((4, 3))

    def ours(a, c):
        s, p = fx.pmap(lambda v, k: (lax.psum(v * k, "i"), jnp.sin(v) * k), "i",
                       in_axes=(0, None), out_axes=(None, 0))(a, c)
        return (s ** 2).sum() + p.sum()

    def theirs(a, c):
        s, p = jax.pmap(lambda v, k: (jax.lax.psum(v * k, "i"), jjnp.sin(v) * k), "i",
                        in_axes=(0, None), out_axes=(None, 0))(a, c)
        return (s ** 2).sum() + p.sum()

    got = fx.grad(ours, argnums=(0, 1))(x, np.float32(1.5))
    want = jax.grad(theirs, argnums=(0, 1))(x, np.float32(1.5))
    _close(got[0], want[0], rtol=1e-4)
    _close(got[1], want[1], rtol=1e-4)


@on_8_devices
def test_grads_against_finite_differences():
    from fluxion.test_util import check_grads
    x = _x((4, 3))
    f = lambda a: fx.pmap(lambda v: jnp.sin(lax.psum(v, "i")) * lax.all_gather(v, "i").sum(0)
                          + lax.ppermute(v, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]), "i")(a)
    check_grads(f, (x,), order=1, modes=("fwd", "rev"), atol=5e-2, rtol=5e-2)


@on_8_devices
def test_jvp_of_pmap_matches_jax():
    x, t = _x((N, 3)), _x((N, 3), 1)
    f = fx.pmap(lambda v: jnp.exp(lax.pmean(v, "i")) * v, "i")
    g = jax.pmap(lambda v: jjnp.exp(jax.lax.pmean(v, "i")) * v, "i")
    got = fx.jvp(f, (x,), (t,))
    want = jax.jvp(g, (x,), (t,))
    _close(got[0], want[0])
    _close(got[1], want[1], rtol=1e-4)


# --------------------------------------------------------------------------------------------
# vmap of pmap

@on_8_devices
def test_vmap_of_pmap_against_a_loop():
    xs, c = _x((3, 4, 5)), _x((4,), 1)
    f = fx.pmap(lambda v, k: (lax.psum(v, "i") * k, v - lax.pmax(v, "i")), "i")
    got = fx.vmap(f, in_axes=(0, None))(xs, c)
    for b in range(3):
        want = f(xs[b], c)
        _close(got[0][b], want[0])
        _close(got[1][b], want[1])
    # the batch on another axis, an unmapped pmap operand batched, out_axes=None, under jit
    h = fx.pmap(lambda v, k: (lax.psum(v * k, "i"), v * k), "i", in_axes=(0, None),
                out_axes=(None, 1))
    ys, ks = _x((4, 3, 2)), _x((3, 2), 2)
    got = fx.jit(fx.vmap(h, in_axes=(1, 0), out_axes=(0, 2)))(ys, ks)
    for b in range(3):
        want = h(ys[:, b], ks[b])
        _close(got[0][b], want[0])
        _close(got[1][:, :, b], want[1])


@on_8_devices
def test_vmap_axis_collectives_inside_pmap_keep_both_names():
    xs = _x((3, 4, 2))
    f = fx.vmap(fx.pmap(lambda v: lax.psum(v, "b") + lax.psum(v, "i") + lax.psum(v, ("b", "i")),
                        "i"), axis_name="b")
    want = xs.sum(0, keepdims=True) + xs.sum(1, keepdims=True) + xs.sum((0, 1), keepdims=True)
    _close(f(xs), want)
    _close(fx.jit(f)(xs), want)


@on_8_devices
def test_grad_of_vmap_of_pmap_matches_jax():
    xs = _x((3, 4, 2))
    got = fx.grad(lambda a: fx.vmap(fx.pmap(lambda v: jnp.sin(lax.psum(v, "i")) * v, "i"))(a).sum())(xs)
    want = jax.grad(lambda a: jax.vmap(jax.pmap(
        lambda v: jjnp.sin(jax.lax.psum(v, "i")) * v, "i"))(a).sum())(xs)
    _close(got, want, rtol=1e-4)


@on_8_devices
def test_vmap_of_pmap_matches_jax():
    xs = _x((2, N, 3))
    got = fx.vmap(fx.pmap(lambda v: lax.all_gather(v, "i").sum(0) * v, "i"))(xs)
    want = jax.vmap(jax.pmap(lambda v: jax.lax.all_gather(v, "i").sum(0) * v, "i"))(xs)
    _close(got, want)


# --------------------------------------------------------------------------------------------
# Nested pmap (JAX 0.10.2 rejects it: its pmap is a shard_map; the reference is NumPy)

def _nested(body):
    return fx.pmap(fx.pmap(body, axis_name="j"), axis_name="i")


@pytest.mark.parametrize("jitted", [False, True])
def test_nested_pmap_collectives_over_each_axis_and_both(jitted):
    x = _x((4, 2, 3))
    f = _nested(lambda v: (lax.psum(v, "i"), lax.psum(v, "j"), lax.psum(v, ("i", "j")),
                           lax.axis_index("i") * 10 + lax.axis_index("j"),
                           lax.all_gather(v, "i"), lax.pmax(v, "j")))
    f = fx.jit(f) if jitted else f
    si, sj, sij, idx, gi, mj = f(x)
    _close(si, np.broadcast_to(x.sum(0, keepdims=True), x.shape))
    _close(sj, np.broadcast_to(x.sum(1, keepdims=True), x.shape))
    _close(sij, np.broadcast_to(x.sum((0, 1), keepdims=True), x.shape))
    np.testing.assert_array_equal(np.asarray(idx), np.arange(4)[:, None] * 10 + np.arange(2))
    _close(gi, np.broadcast_to(np.moveaxis(x, 1, 0)[None], (4, 2, 4, 3)))
    _close(mj, np.broadcast_to(x.max(1, keepdims=True), x.shape))


test_nested_pmap_collectives_over_each_axis_and_both = on_8_devices(
    test_nested_pmap_collectives_over_each_axis_and_both)


@on_8_devices
def test_nested_pmap_ppermute_and_grad():
    x = _x((2, 4, 3))
    perm = [(k, (k + 1) % 4) for k in range(4)]
    f = fx.pmap(fx.pmap(lambda v: lax.ppermute(v, "j", perm) * lax.psum(v, "i"), "j"), "i")
    want = np.roll(x, 1, axis=1) * x.sum(0, keepdims=True)
    _close(f(x), want)
    _close(fx.jit(f)(x), want)
    g = fx.grad(lambda a: (f(a) ** 2).sum())(x)
    eps = 1e-2
    num = np.zeros_like(x)
    loss = lambda a: float(((np.roll(a, 1, axis=1) * a.sum(0, keepdims=True)) ** 2).sum())
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        num[idx] = (loss(x + d) - loss(x - d)) / (2 * eps)
    _close(g, num, rtol=2e-2, atol=2e-2)


@on_8_devices
def test_nested_pmap_beside_a_larger_pmap_under_jit():
    # 8 replicas: the nested 2 x 2 pmap leaves 2 extra replicas per (i, j)
    def f(a, b):
        inner = fx.pmap(fx.pmap(lambda v: (lax.psum(v, "j"), lax.axis_index("i")), "j"), "i")(a)
        wide = fx.pmap(lambda v: lax.psum(v, "k"), "k")(b)
        return inner, wide
    a, b = _x((2, 2, 3)), _x((8,), 1)
    (sj, idx), wide = fx.jit(f)(a, b)
    _close(sj, np.broadcast_to(a.sum(1, keepdims=True), a.shape))
    np.testing.assert_array_equal(np.asarray(idx), [[0, 0], [1, 1]])
    _close(wide, np.full(8, b.sum()), rtol=1e-5)


@on_8_devices
def test_pmap_inside_pmap_under_vmap():
    xs = _x((3, 2, 4, 2))
    f = _nested(lambda v: lax.psum(v, ("i", "j")) - v)
    got = fx.vmap(f)(xs)
    for b in range(3):
        _close(got[b], xs[b].sum((0, 1), keepdims=True) - xs[b])


# --------------------------------------------------------------------------------------------
# Errors

@on_8_devices
def test_inconsistent_mapped_sizes_under_jit():
    with pytest.raises(ValueError, match="inconsistent sizes"):
        fx.jit(fx.pmap(lambda a, b: a + b))(np.ones(4), np.ones(2))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        fx.grad(lambda a: fx.pmap(lambda u, v: u * v)(a, np.ones(2)).sum())(np.ones(4))


@on_8_devices
def test_more_devices_than_exist():
    with pytest.raises(ValueError, match="requires 16 logical devices"):
        fx.jit(fx.pmap(lambda a: a * 2))(np.ones(16))
    with pytest.raises(ValueError, match="requires 16 logical devices"):
        fx.pmap(lambda a: a * 2)(np.ones(16))
    with pytest.raises(ValueError, match="requires 16 logical devices"):  # the nested product
        _nested(lambda v: v + 1)(np.ones((4, 4)))
    with pytest.raises(ValueError, match="requires 16 logical devices"):
        fx.jit(_nested(lambda v: v + 1))(np.ones((4, 4)))


@on_8_devices
@pytest.mark.parametrize("options, message", [
    ({"invalid_key": "invalid_value"}, "No such compile option: 'invalid_key'"),
    ({"xla_embed_ir_in_executable": "invalid_value"}, "is not a valid bool value"),
])
def test_compiler_options_reach_a_program_holding_a_pmap(options, message):
    # Found by JAX's pmap_test: the replicated program ignored them.
    for m in (fx, jax):
        x = _x((N, 4))
        f = m.pmap(lambda a: a - m.lax.pmean(a, "i"), axis_name="i")
        lowered = f.lower(x)
        lowered.compile(compiler_options={"xla_embed_ir_in_executable": True})  # a valid one
        with pytest.raises(m.errors.JaxRuntimeError, match=message):
            lowered.compile(compiler_options=options)
        with pytest.raises(m.errors.JaxRuntimeError, match=message):
            m.jit(f, compiler_options=options)(x)
