"""Eager pmap results and donation as JAX 0.10.2 has them: an `out_axes=None` result is
replicated over the pmap's devices, and a donated argument is deleted where XLA took its
buffers; run by tests/test_eight_devices.py in a process with 8 CPU devices for fluxion and
JAX."""
import warnings

import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import lax

N = 8
pytestmark = pytest.mark.skipif(jax.device_count() < N, reason="needs 8 CPU devices")

if jax.device_count() >= N:
    import jax as jjax
    import jax.numpy as jjnp


def _x(seed=0):
    return np.random.default_rng(seed).standard_normal((N, 3)).astype(np.float32)


def _layout(y):
    """What the tests compare: the sharding's mesh (devices, names) and spec, replication,
    the shards' devices and indices."""
    s = y.sharding
    return ([d.id for d in s.mesh.devices.flat], tuple(s.mesh.axis_names), tuple(s.spec),
            y.is_fully_replicated,
            [(sh.device.id, str(sh.index)) for sh in y.addressable_shards])


@pytest.mark.parametrize("named", [True, False])
def test_unmapped_result_is_replicated_over_the_devices_as_in_jax(named):
    x = _x()
    kw = {"axis_name": "k"} if named else {}  # unnamed: JAX's internal axis name

    def run(lib):
        mapped = lib.pmap(lambda v: v * 2, **kw)(x)
        unmapped = lib.pmap(lambda v: v.sum() * 2, out_axes=None, **kw)(x)
        return mapped, unmapped

    for o, t in zip(run(jax), run(jjax)):
        assert _layout(o) == _layout(t)
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-6)
        assert o.shape == t.shape and o.dtype == t.dtype


def test_unmapped_result_in_eager_ops_jit_and_the_next_pmap():
    x, w = _x(1), np.ones(3, np.float32)

    def run(lib, np_):
        step = lib.pmap(lambda v, p: p - 0.1 * lib.lax.pmean(v * p, "i"), "i",
                        in_axes=(0, None), out_axes=None)
        p = step(x, w)
        p = step(x, p)  # a replicated result fed back in
        return p, np_.sin(p), lib.jit(lambda a: a * 2)(p)

    for o, t in zip(run(jax, jnp), run(jjax, jjnp)):
        assert _layout(o) == _layout(t)
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-6)


def _donation_cases(lib, np_):
    """Which arguments a pmap with donate_argnums deletes, for fluxion or JAX."""
    x = _x(2)
    out = {}
    mapped = lib.pmap(lambda v: v + 1, "i")(x)
    lib.pmap(lambda v: v * 3, "i", donate_argnums=0)(mapped)
    out["pmap_result"] = mapped.is_deleted()
    kept = lib.pmap(lambda v: v + 1, "i")(x)
    lib.pmap(lambda v: v.sum(), "i", donate_argnums=0)(kept)  # no output can take it
    out["pmap_result_unusable"] = kept.is_deleted()
    single = np_.asarray(x)
    lib.pmap(lambda v: v + 1, "i", donate_argnums=0)(single)  # sliced into copies
    out["single_device_mapped"] = single.is_deleted()
    unmapped = np_.ones(3)
    lib.pmap(lambda u, v: u + v, "i", in_axes=(0, None), donate_argnums=1)(x, unmapped)
    out["unmapped"] = unmapped.is_deleted()
    replicated = lib.pmap(lambda v: lib.lax.psum(v, "i"), "i", out_axes=None)(x)
    lib.pmap(lambda u, v: u + v, "i", in_axes=(0, None), donate_argnums=1)(x, replicated)
    out["replicated_result"] = replicated.is_deleted()
    jitted = np_.asarray(x)
    lib.jit(lib.pmap(lambda v: v + 1, "i", donate_argnums=0))(jitted)
    out["under_jit"] = jitted.is_deleted()
    return out, mapped


def test_donation_deletes_the_arguments_jax_deletes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unusable donations warn in both
        ours, deleted = _donation_cases(jax, jnp)
        theirs, _ = _donation_cases(jjax, jjnp)
    assert ours == theirs
    assert ours["pmap_result"] and ours["unmapped"] and not ours["single_device_mapped"]
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(deleted)
    with pytest.raises(RuntimeError, match="deleted"):
        deleted + 1


def test_donated_results_are_right():
    x, w = _x(3), np.arange(3, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = jax.pmap(lambda u, v: u * v, "i", in_axes=(0, None), donate_argnums=(0, 1))(
            jax.pmap(lambda v: v + 1, "i")(x), jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(got), (x + 1) * w, rtol=1e-6)
