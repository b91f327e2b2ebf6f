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


# ---------------------------------------------------------------------------------------------
# Pallas (JAX's interpret mode is the oracle)

from jax.experimental import pallas as jpl  # noqa: E402
from fluxion.experimental import pallas as fpl  # noqa: E402


def _both_pallas(make, *args):
    """make(J, jnp, pl, pallas_kwargs) -> function; its results in JAX (interpret) and fluxion."""
    rj = make(jax, jax.numpy, jpl, {"interpret": True})(*args)
    rf = make(fluxion, fjnp, fpl, {})(*args)
    return rj, rf


def test_pallas_kernel_arguments_follow_the_operand_and_out_shape_pytrees():
    x = np.arange(8, dtype=np.float32)

    def make(J, jnp, pl, kw):
        def k(d_ref, y_ref, o):  # one argument per operand; a dict out_shape is one argument
            o["a"][...] = d_ref["p"][...] + d_ref["q"][1][...] * y_ref[...]
            o["b"][...] = d_ref["q"][0][...] * 3
        s = J.ShapeDtypeStruct((8,), np.float32)
        return pl.pallas_call(k, out_shape={"a": s, "b": s}, **kw)
    rj, rf = _both_pallas(make, {"p": x, "q": (x + 1, x * 2)}, x - 1)
    for key in ("a", "b"):
        np.testing.assert_allclose(np.asarray(rf[key]), np.asarray(rj[key]))

    def make(J, jnp, pl, kw):
        def k(x_ref, o1, o2):  # a list out_shape: one argument per element, a tuple back
            o1[...] = x_ref[...] + 1
            o2[0][...] = x_ref[...] * 2
        s = J.ShapeDtypeStruct((8,), np.float32)
        return pl.pallas_call(k, out_shape=[s, [s]], **kw)
    rj, rf = _both_pallas(make, x)
    assert type(rf) is type(rj) is tuple and isinstance(rf[1], list)
    np.testing.assert_allclose(np.asarray(rf[1][0]), np.asarray(rj[1][0]))


def test_pallas_tpu_scratch_memory_spaces():
    x = np.arange(32, dtype=np.float32).reshape(8, 4)

    def make(J, jnp, pl, kw):
        if J is jax:
            from jax.experimental.pallas import tpu as pltpu
        else:
            from fluxion.experimental.pallas import tpu as pltpu

        def k(x_ref, o_ref, acc_ref, any_ref):
            @pl.when(pl.program_id(0) == 0)
            def _():
                acc_ref[...] = jnp.zeros_like(acc_ref)
            acc_ref[...] += x_ref[...]
            any_ref[...] = acc_ref[...] * 2
            o_ref[...] = any_ref[...]
        spec = pl.BlockSpec((2, 4), lambda i: (i, 0))
        return pl.pallas_call(k, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), grid=(4,),
                              in_specs=[spec], out_specs=spec,
                              scratch_shapes=[pltpu.VMEM((2, 4), np.float32),
                                              pl.MemorySpace.ANY((2, 4), np.float32)], **kw)
    rj, rf = _both_pallas(make, x)
    np.testing.assert_allclose(np.asarray(rf), np.asarray(rj))
