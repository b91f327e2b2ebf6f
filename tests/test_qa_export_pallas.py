"""Differential QA of export, Pallas and Refs against JAX (the oracle)."""
import numpy as np
import pytest

import jax
from jax import export as jex

import fluxion
import fluxion.numpy as fjnp
from fluxion import export as fex


def _export_both(f_of_jnp, spec, dtype=np.float32):
    """(jax Exported, fluxion Exported) of `f` for one symbolic-shaped argument."""
    out = []
    for J, E, jnp in ((jax, jex, jax.numpy), (fluxion, fex, fjnp)):
        arg = J.ShapeDtypeStruct(E.symbolic_shape(spec), dtype)
        out.append(E.export(J.jit(f_of_jnp(jnp)))(arg))
    return out


def test_symbolic_slices_shapes_and_values_match_jax():
    # strided slices whose length may be 0 (a[1::3] for b=1) and negative starts: JAX's
    # output dimensions, and every concrete size runs
    for i, f in enumerate((lambda a: a[1::3], lambda a: a[::2], lambda a: a[-2:],
                           lambda a: a[-1::-2], lambda a: a[2::-3])):
        ej, ef = _export_both(lambda jnp: f, "b, 2")
        if i < 4:  # fluxion orders min's arguments by name: min(2, b - 1), JAX min(b - 1, 2)
            assert str(ef.out_avals[0].shape) == str(ej.out_avals[0].shape)
        for n in (1, 2, 5):
            x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
            np.testing.assert_array_equal(np.asarray(ef.call(x)), f(x))


def test_symbolic_max_min_bounds():
    from fluxion._src.export import shape_poly
    b, = fex.symbolic_shape("b")
    m = shape_poly.max_dim(0, b - 2)
    assert b - m >= 1 and b - m <= 2 and not (b - m >= 3)
    assert shape_poly.min_dim(b, 3) <= 3 and shape_poly.min_dim(b, 3) >= 1


def test_symbolic_reshape_that_may_not_divide_raises_like_jax():
    for new in ((3, -1), (-1, 2)):
        errs = []
        for J, E, jnp in ((jax, jex, jax.numpy), (fluxion, fex, fjnp)):
            arg = J.ShapeDtypeStruct(E.symbolic_shape("b"), np.float32)
            with pytest.raises(Exception) as info:
                E.export(J.jit(lambda a: a.reshape(new)))(arg)
            assert type(info.value).__name__ == "InconclusiveDimensionOperation"
            errs.append(str(info.value).replace(" - ", " -"))
        assert errs[0] == errs[1]


def test_uses_global_constants_flag_matches_jax():
    for spec in ("a, 4", "3, 4"):
        ej, ef = _export_both(lambda jnp: (lambda a: a @ a.T), spec)
        assert ef.uses_global_constants == ej.uses_global_constants
        assert fex.deserialize(ef.serialize()).uses_global_constants == ej.uses_global_constants
