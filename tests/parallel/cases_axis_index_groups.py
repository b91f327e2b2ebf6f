"""`axis_index_groups` of psum, pmean, pmax, pmin, all_gather, all_to_all, psum_scatter and
pswapaxes under pmap and shard_map, against JAX 0.10.2 (and NumPy where JAX has no answer);
run by tests/test_eight_devices.py in a process with 8 CPU devices for fluxion and JAX. Under
vmap both refuse the groups (tests/test_parallel_jaxsuite.py)."""
import numpy as np
import pytest

import fluxion as jax
from fluxion import lax

N = 8
pytestmark = pytest.mark.skipif(jax.device_count() < N, reason="needs 8 CPU devices")

if jax.device_count() >= N:
    import jax as jjax

EVEN = [[0, 2, 4, 6], [1, 3, 5, 7]]
PAIRS = [[3, 0], [1, 2], [7, 5], [4, 6]]
UNEVEN = [[0, 1, 2], [3, 4, 5, 6, 7]]


def _x(shape=(N, 4), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _ops(lax_, groups):
    """Per-device bodies over axis 'i' of a float32[4] block, in fluxion's or JAX's lax."""
    g = dict(axis_index_groups=groups)
    return {
        "psum": lambda v: lax_.psum(v, "i", **g),
        "psum_int": lambda v: v * lax_.psum(1, "i", **g),
        "pmean": lambda v: lax_.pmean(v, "i", **g),
        "pmax": lambda v: lax_.pmax(v, "i", **g),
        "pmin": lambda v: lax_.pmin(v, "i", **g),
        "all_gather": lambda v: lax_.all_gather(v, "i", **g),
        "all_gather_tiled": lambda v: lax_.all_gather(v, "i", tiled=True, **g),
        "all_to_all": lambda v: lax_.all_to_all(v.reshape(len(groups[0]), -1), "i", 0, 0, **g),
        "all_to_all_tiled": lambda v: lax_.all_to_all(v.reshape(1, -1), "i", 1, 0, tiled=True,
                                                      **g),
        "psum_scatter": lambda v: lax_.psum_scatter(v, "i", tiled=True, **g),
        "pswapaxes": lambda v: lax_.pswapaxes(v.reshape(len(groups[0]), -1), "i", 0, **g),
    }


OPS = list(_ops(lax, EVEN))
REDUCTIONS = ["psum", "psum_int", "pmean", "pmax", "pmin"]
LINEAR = ["psum", "pmean", "all_gather", "all_gather_tiled", "all_to_all", "all_to_all_tiled",
          "psum_scatter", "pswapaxes"]


def _shard_map(lib, body):
    """`body` on each device's row of an (8, ...) array, over a one-axis mesh 'i'."""
    mesh = lib.sharding.Mesh(np.array(lib.devices()), ("i",))
    spec = lib.sharding.PartitionSpec("i")
    return lib.shard_map(lambda v: body(v[0])[None], mesh=mesh, in_specs=spec, out_specs=spec,
                         check_vma=False)


def _same(ours, theirs, rtol=1e-6):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("groups", [EVEN, PAIRS], ids=["even", "pairs"])
@pytest.mark.parametrize("name", OPS)
def test_values_under_pmap_and_shard_map_match_jax(name, groups):
    x = _x()
    ours, theirs = _ops(lax, groups)[name], _ops(jjax.lax, groups)[name]
    want = jjax.pmap(theirs, "i")(x)
    _same(jax.pmap(ours, "i")(x), want)
    _same(jax.jit(jax.pmap(ours, "i"))(x), want)
    _same(jax.jit(_shard_map(jax, ours))(x), jjax.jit(_shard_map(jjax, theirs))(x))


@pytest.mark.parametrize("name", REDUCTIONS)
def test_uneven_groups_of_reductions_match_jax(name):
    # as JAX, pmean (and psum of a constant) count the first group's size for every group
    x = _x(seed=1)
    _same(jax.pmap(_ops(lax, UNEVEN)[name], "i")(x),
          jjax.pmap(_ops(jjax.lax, UNEVEN)[name], "i")(x))


def test_reductions_against_numpy():
    x = _x(seed=2)
    out = jax.pmap(lambda v: (lax.psum(v, "i", axis_index_groups=UNEVEN),
                              lax.pmax(v, "i", axis_index_groups=EVEN)), "i")(x)
    sums = np.concatenate([np.broadcast_to(x[g].sum(0), (len(g), 4)) for g in UNEVEN])
    np.testing.assert_allclose(np.asarray(out[0]), sums, rtol=1e-5)
    maxes = np.stack([x[EVEN[k % 2]].max(0) for k in range(N)])
    np.testing.assert_array_equal(np.asarray(out[1]), maxes)


@pytest.mark.parametrize("name", LINEAR)
def test_grad_matches_jax(name):
    x = _x(seed=3)
    ours, theirs = _ops(lax, PAIRS)[name], _ops(jjax.lax, PAIRS)[name]

    def loss(lib, body):
        return lambda v: (lib.numpy.sin(body(v)) ** 2).sum()

    want = jjax.pmap(jjax.grad(loss(jjax, theirs)), "i")(x)
    _same(jax.pmap(jax.grad(loss(jax, ours)), "i")(x), want, rtol=1e-5)
    _same(jax.jit(jax.grad(loss(jax, _shard_map(jax, ours))))(x),
          jjax.jit(jjax.grad(loss(jjax, _shard_map(jjax, theirs))))(x), rtol=1e-5)


def test_grad_of_pmax_within_groups_against_numpy():
    # JAX has no derivative of pmax; fluxion's goes to the examples attaining the maximum
    x = _x(seed=4)
    got = jax.pmap(jax.grad(lambda v: jax.numpy.sin(lax.pmax(v, "i", axis_index_groups=EVEN))
                            .sum()), "i")(x)
    want = np.zeros_like(x)
    for g in EVEN:
        top = np.argmax(x[g], 0)
        for col in range(4):
            want[g[top[col]], col] = len(g) * np.cos(x[g[top[col]], col])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)


def test_two_axes_in_shard_map_and_nested_pmap():
    x = _x((N, 4), seed=5)

    def run(lib, names):
        mesh = lib.sharding.Mesh(np.array(lib.devices()).reshape(2, 4), ("a", "b"))
        spec = lib.sharding.PartitionSpec(("a", "b"))
        return lib.jit(lib.shard_map(
            lambda v: lib.lax.psum(v, names, axis_index_groups=EVEN), mesh=mesh,
            in_specs=spec, out_specs=spec, check_vma=False))(x)

    for names in (("a", "b"), ("b", "a")):  # the groups index the names' row-major order
        _same(run(jax, names), run(jjax, names))
    # JAX 0.10.2 refuses nested pmaps; NumPy: index i*4 + j along ("i", "j")
    nested = jax.pmap(jax.pmap(lambda v: lax.psum(v, ("i", "j"), axis_index_groups=EVEN),
                               "j"), "i")(x.reshape(2, 4, 4))
    want = np.stack([x[EVEN[k % 2]].sum(0) for k in range(N)]).reshape(2, 4, 4)
    np.testing.assert_allclose(np.asarray(nested), want, rtol=1e-5)


def test_grouped_psum_with_check_vma():
    # JAX raises a bare NotImplementedError here; fluxion computes it, and the result counts
    # as varying over the axis (the groups differ)
    x = _x(seed=6)
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("i",))
    spec = jax.sharding.PartitionSpec("i")
    body = lambda v: lax.psum(v, "i", axis_index_groups=EVEN)
    got = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec))(x)
    _same(got, jjax.jit(_shard_map(jjax, lambda v: jjax.lax.psum(v, "i",
                                                                 axis_index_groups=EVEN)))(x))
    with pytest.raises(ValueError, match="replicated"):
        jax.shard_map(body, mesh=mesh, in_specs=spec, out_specs=jax.sharding.PartitionSpec())(x)


@pytest.mark.parametrize("call", [
    lambda l: l.psum(np.float32(1) * l.axis_index("i"), "i",
                     axis_index_groups=[[0, 1, 2, 3], [3, 4, 5, 6, 7]]),
    lambda l: l.all_gather(np.float32(1) * l.axis_index("i"), "i",
                           axis_index_groups=[[0, 1, 2, 3], [3, 4, 5, 6]]),
    lambda l: l.all_gather(np.ones(4, np.float32), "i", axis_index_groups=UNEVEN),
    lambda l: l.psum(np.float32(1) * l.axis_index("i"), ("i", 0), axis_index_groups=EVEN),
], ids=["psum_twice", "all_gather_twice", "all_gather_uneven", "positional_axis"])
def test_bad_groups_are_value_errors_as_in_jax(call):
    for lib, lax_ in ((jax, lax), (jjax, jjax.lax)):
        with pytest.raises(ValueError):
            lib.pmap(lambda v: call(lax_) + v, "i")(_x())


def test_groups_not_covering_the_axis_are_a_value_error():
    # JAX leaves this to XLA's verifier (an internal error from the compiler)
    with pytest.raises(ValueError, match="must cover the indices of axis 'i'"):
        jax.pmap(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [2, 3]]), "i")(_x())
