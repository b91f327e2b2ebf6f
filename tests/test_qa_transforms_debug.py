"""Differential checks of transformation compositions, debugging tools and callbacks against
JAX (the oracle), each a regression test for a mismatch found by the QA sweep."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion import lax


def _weak(x):
    return x.aval.weak_type if hasattr(x, "aval") else x.weak_type


def test_jaxpr_literals_keep_weak_type_when_reevaluated():
    # `c + 1` in a loop body, re-evaluated by jvp or vmap, must stay weakly typed as in JAX.
    def loop(lib):
        return lambda x: lib.lax.while_loop(lambda c: c[0] < 5,
                                            lambda c: (c[0] + 1, c[1] * 1.1), (0, x))[1]
    for lib in (jax, fluxion):
        p, t = lib.jvp(loop(lib), (2.0,), (1.0,))
        assert _weak(p) and _weak(t), lib.__name__
    fori = lambda lib: lib.vmap(lambda n, x: lib.lax.fori_loop(0, n, lambda i, c: c * 2.0 + i, x),
                                (0, None))
    got, want = fori(fluxion)(fnp.array([0, 4]), 1.0), fori(jax)(jjnp.array([0, 4]), 1.0)
    np.testing.assert_allclose(got, want)
    assert _weak(got) and _weak(want)


def test_collectives_under_vmap_bool_and_axis_bounds():
    x = np.array([True, False, True])
    got = fluxion.vmap(lambda v: lax.psum(v, "i"), axis_name="i")(x)
    want = jax.vmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")(x)
    assert got.dtype == want.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    m = np.arange(18.0, dtype=np.float32).reshape(3, 6)
    for kw in (dict(axis=1, tiled=True), dict(axis=2), dict(axis=-3)):
        with pytest.raises(ValueError, match="out of bounds"):
            fluxion.vmap(lambda v: lax.all_gather(v, "i", **kw), axis_name="i")(m)
    with pytest.raises(ValueError, match="out of bounds"):
        fluxion.vmap(lambda v: lax.all_gather(v, "i", tiled=True), axis_name="i")(m[:, 0])
    got = fluxion.vmap(lambda v: lax.all_gather(v, "i", axis=-2), axis_name="i")(m)
    want = jax.vmap(lambda v: jax.lax.all_gather(v, "i", axis=-2), axis_name="i")(m)
    np.testing.assert_array_equal(got, want)


def test_make_jaxpr_effects_and_text_as_jax():
    printer = lambda lib: (lambda x: (lib.debug.print("x={}", x, ordered=True), x * 2)[1])
    jf, jj = fluxion.make_jaxpr(printer(fluxion))(1.0), jax.make_jaxpr(printer(jax))(1.0)
    assert [type(e).__name__ for e in jf.effects] == [type(e).__name__ for e in jj.effects] \
        == ["OrderedDebugEffect"]
    assert jf.jaxpr.effects == jf.effects
    assert not fluxion.make_jaxpr(lambda x: x * 2)(1.0).effects
    x = np.ones((2, 3), np.float32)

    def prog(lib):
        l = lib.lax
        return lambda x: (l.broadcast_in_dim(x, (4, 2, 3), (1, 2)), l.broadcast_in_dim(1.0, (2,), ()),
                          l.reduce_max(x, (0,)), l.reduce_or(x > 0, (1,)),
                          l.dot_general(x, x, (((1,), (1,)), ((0,), (0,)))),
                          l.fori_loop(0, 3, lambda i, c: c * 2.0, x))
    assert str(fluxion.make_jaxpr(prog(fluxion))(x)) == str(jax.make_jaxpr(prog(jax))(x))
