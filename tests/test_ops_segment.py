"""fluxion.ops segment reductions against NumPy loops and JAX 0.10's jax.ops (values, dtypes,
out-of-range ids, empty segments, bucket_size, mode); grad by finite differences, vmap
against a Python loop, jit against eager."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import ops
from fluxion.errors import ConcretizationTypeError

RNG = np.random.default_rng(0)
NAMES = ("segment_sum", "segment_prod", "segment_max", "segment_min")
NP_REDUCE = {"segment_sum": (np.add, 0), "segment_prod": (np.multiply, 1),
             "segment_max": (np.maximum, None), "segment_min": (np.minimum, None)}


def np_segment(name, data, ids, num):
    """The reduction by a loop over entries; ids outside [0, num) are dropped."""
    op, ident = NP_REDUCE[name]
    data = np.asarray(data)
    if ident is None:
        if data.dtype == np.bool_:
            ident = name == "segment_min"
        elif np.issubdtype(data.dtype, np.integer):
            info = np.iinfo(data.dtype)
            ident = info.min if name == "segment_max" else info.max
        else:
            ident = -np.inf if name == "segment_max" else np.inf
    out = np.full((num,) + data.shape[1:], ident, data.dtype)
    for d, i in zip(data, ids):
        if 0 <= i < num:
            out[i] = op(out[i], d)
    return out


def check_same(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.weak_type == want.weak_type
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_values_match_a_loop_and_jax(name, dtype):
    data = (RNG.normal(size=(7, 2)) * 3).astype(dtype)
    ids = np.array([3, 0, 3, -1, 5, 0, 1])  # -1 and 5 are out of range: dropped; 2 is empty
    want = np_segment(name, data, ids, 4)
    got = getattr(ops, name)(data, ids, 4)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    check_same(got, getattr(jax.ops, name)(data, ids, 4))


@pytest.mark.parametrize("name", ["segment_max", "segment_min"])
def test_bool_identities(name):
    data, ids = np.array([True, False, True]), np.array([0, 0, 2])
    got = getattr(ops, name)(data, ids, 4)
    np.testing.assert_array_equal(np.asarray(got), np_segment(name, data, ids, 4))
    check_same(got, getattr(jax.ops, name)(data, ids, 4))


def test_default_num_segments_and_scalar_data():
    ids = np.array([0, 0, 1, 1, 4])
    check_same(ops.segment_sum(jnp.arange(5), ids), jax.ops.segment_sum(jjnp.arange(5), ids))
    # scalar data broadcasts over the ids; Python scalars give strongly typed results
    check_same(ops.segment_prod(3., np.array([0, 0]), 3),
               jax.ops.segment_prod(3., np.array([0, 0]), 3))


@pytest.mark.parametrize("name", ["segment_sum", "segment_prod"])
def test_bucket_size_as_jax(name):
    data = RNG.normal(size=(10, 3)).astype(np.float32)
    ids = RNG.integers(0, 4, size=10)
    got = getattr(ops, name)(data, ids, 4, bucket_size=3)
    np.testing.assert_allclose(np.asarray(got), np_segment(name, data, ids, 4), rtol=1e-5)
    check_same(got, getattr(jax.ops, name)(data, ids, 4, bucket_size=3))


def test_mode_clip_keeps_out_of_range_ids():
    data, ids = np.arange(4.0, dtype=np.float32), np.array([0, 7, 1, 9])
    got = ops.segment_sum(data, ids, 3, mode="clip")
    np.testing.assert_array_equal(np.asarray(got), [0., 2., 4.])
    check_same(got, jax.ops.segment_sum(data, ids, 3, mode="clip"))
    got = ops.segment_sum(data, ids, 3, mode=fluxion.lax.GatherScatterMode.FILL_OR_DROP)
    np.testing.assert_array_equal(np.asarray(got), [0., 2., 0.])


def test_errors():
    f = fluxion.jit(lambda d, s: ops.segment_max(d, s))
    with pytest.raises(ConcretizationTypeError, match="num_segments"):
        f(jnp.ones(3), jnp.array([0, 1, 1]))
    with pytest.raises(ValueError, match="num_segments must be non-negative"):
        ops.segment_sum(jnp.ones(3), jnp.array([0, 1, 1]), -1)
    with pytest.raises(TypeError):
        ops.segment_sum([1., 2.], jnp.array([0, 1]))


def test_jit_matches_eager_with_static_num_segments():
    data = RNG.normal(size=(6,)).astype(np.float32)
    ids = np.array([2, 2, 0, 1, 0, 2])
    f = fluxion.jit(lambda d, s: [getattr(ops, n)(d, s, 3) for n in NAMES])
    for got, name in zip(f(data, ids), NAMES):
        np.testing.assert_allclose(np.asarray(got), np.asarray(getattr(ops, name)(data, ids, 3)),
                                   rtol=1e-6)


def test_grad_by_finite_differences_and_jax():
    data = RNG.normal(size=(6, 2))
    ids = np.array([2, 2, 0, 1, 0, 5])
    w = RNG.normal(size=(3, 2))

    def loss(mod, name):
        return lambda d: (getattr(mod.ops, name)(d, ids, 3) * w).sum()

    for name in ("segment_sum", "segment_max", "segment_min"):
        got = np.asarray(fluxion.grad(loss(fluxion, name))(data.astype(np.float32)))
        want = np.asarray(jax.grad(loss(jax, name))(data.astype(np.float32)))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        f64 = lambda d: float(np.sum(np_segment(name, d, ids, 3) * w))  # noqa: E731
        eps = 1e-4
        fd = np.zeros_like(data)
        for i in np.ndindex(data.shape):
            e = np.zeros_like(data)
            e[i] = eps
            fd[i] = (f64(data + e) - f64(data - e)) / (2 * eps)
        np.testing.assert_allclose(got, fd, rtol=1e-3, atol=1e-3)


def test_segment_prod_grad_needs_unique_indices_as_in_jax():
    data = RNG.normal(size=(3,)).astype(np.float32)
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        fluxion.grad(lambda d: ops.segment_prod(d, np.array([0, 1, 0]), 2).sum())(data)
    f = lambda mod: lambda d: (mod.ops.segment_prod(d, np.array([2, 0, 1]), 3,  # noqa: E731
                                                    unique_indices=True) * np.arange(3.)).sum()
    np.testing.assert_allclose(np.asarray(fluxion.grad(f(fluxion))(data)),
                               np.asarray(jax.grad(f(jax))(data)), rtol=1e-6)


def test_vmap_matches_a_python_loop():
    data = RNG.normal(size=(3, 5)).astype(np.float32)
    ids = RNG.integers(-1, 4, size=(3, 5))
    for name in ("segment_sum", "segment_max"):
        f = fluxion.vmap(lambda d, s: getattr(ops, name)(d, s, 4))
        got = np.asarray(f(data, ids))
        want = np.stack([np_segment(name, data[b], ids[b], 4) for b in range(3)])
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # data batched, ids shared
    got = fluxion.vmap(lambda d: ops.segment_min(d, ids[0], 4))(data)
    want = np.stack([np_segment("segment_min", d, ids[0], 4) for d in data])
    np.testing.assert_allclose(np.asarray(got), want)


def test_top_level_attribute():
    assert fluxion.ops.segment_sum is ops.segment_sum
