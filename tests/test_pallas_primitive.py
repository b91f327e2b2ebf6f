"""pallas_call as a primitive: its jaxpr, its lowering (no Ref left), vmap as a grid
dimension (against a Python loop and JAX's interpret mode), and the per-platform seam."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion.experimental import pallas as pl
from fluxion._src.compiler import lowering

rng = np.random.default_rng(3)


def _scaled_add(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + y_ref[...] + pl.program_id(0).astype(jnp.float32)


def _call(shape=(10, 12), block=(4, 8)):
    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    return pl.pallas_call(_scaled_add, fluxion.ShapeDtypeStruct(shape, jnp.float32),
                          grid=(pl.cdiv(shape[0], block[0]), pl.cdiv(shape[1], block[1])),
                          in_specs=[spec, spec], out_specs=spec)


def _want(x, y, block=(4, 8)):
    rows = np.arange(x.shape[-2]) // block[0]
    return x * 2 + y + rows[:, None]


def test_jaxpr_has_one_pallas_call_with_a_ref_kernel():
    x = np.ones((10, 12), np.float32)
    jaxpr = fluxion.make_jaxpr(_call())(x, x)
    assert [e.primitive.name for e in jaxpr.eqns] == ["pallas_call"]
    eqn = jaxpr.eqns[0]
    assert eqn.params["grid"] == (3, 2)
    kernel = eqn.params["jaxpr"].jaxpr
    assert [v.aval.str_short() for v in kernel.invars] == [
        "i32[]", "i32[]", "Ref{f32[4,8]}", "Ref{f32[4,8]}", "Ref{f32[4,8]}"]


def test_lowered_program_has_no_ref_and_runs():
    x = rng.standard_normal((10, 12)).astype(np.float32)
    y = rng.standard_normal((10, 12)).astype(np.float32)
    f = fluxion.jit(_call())
    text = f.lower(x, y).as_text()
    assert "Ref" not in text and "stablehlo.while" in text
    np.testing.assert_allclose(np.asarray(f(x, y)), _want(x, y), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(_call()(x, y)), _want(x, y), rtol=1e-6)


def test_vmap_adds_a_grid_dimension_and_matches_a_loop():
    xs = rng.standard_normal((3, 10, 12)).astype(np.float32)
    y = rng.standard_normal((10, 12)).astype(np.float32)
    f = _call()
    batched = fluxion.vmap(f, in_axes=(0, None))
    jaxpr = fluxion.make_jaxpr(batched)(xs, y)
    (eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "pallas_call"]
    assert eqn.params["grid"] == (3, 3, 2)
    got = batched(xs, y)
    want = np.stack([np.asarray(f(x, y)) for x in xs])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    # batch axis not in front, both operands batched, and vmap of vmap
    got = fluxion.vmap(f, in_axes=(1, 1))(xs.transpose(1, 0, 2), xs.transpose(1, 0, 2))
    np.testing.assert_allclose(np.asarray(got), np.stack([_want(x, x) for x in xs]), rtol=1e-6)
    xss = np.stack([xs, xs + 1])
    got = fluxion.jit(fluxion.vmap(fluxion.vmap(f, in_axes=(0, None)), in_axes=(0, None)))(xss, y)
    want = np.stack([[_want(x, y) for x in b] for b in xss])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_vmap_with_scratch_and_alias_matches_loop():
    def kernel(x_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)
        acc_ref[...] += x_ref[...]
        o_ref[...] = acc_ref[...]

    f = pl.pallas_call(kernel, fluxion.ShapeDtypeStruct((4, 6), jnp.float32), grid=(4,),
                       in_specs=[pl.BlockSpec((None, 6), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((None, 6), lambda i: (i, 0)),
                       scratch_shapes=[pl.ANY((6,), jnp.float32)])
    xs = rng.standard_normal((2, 4, 6)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fluxion.vmap(f)(xs)), np.cumsum(xs, axis=1),
                               rtol=1e-5)

    def double_first(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    g = pl.pallas_call(double_first, fluxion.ShapeDtypeStruct((8,), jnp.float32), grid=(1,),
                       in_specs=[pl.BlockSpec((4,), lambda i: (0,))],
                       out_specs=pl.BlockSpec((4,), lambda i: (0,)),
                       input_output_aliases={0: 0})
    xs = rng.standard_normal((3, 8)).astype(np.float32)
    want = np.stack([np.asarray(g(x)) for x in xs])
    np.testing.assert_allclose(np.asarray(fluxion.vmap(g)(xs)), want)
    np.testing.assert_allclose(want[:, :4], 2 * xs[:, :4])
    np.testing.assert_allclose(want[:, 4:], xs[:, 4:])


def test_vmap_matches_jax_interpret_mode():
    jax = pytest.importorskip("jax")
    jpl = pytest.importorskip("jax.experimental.pallas")
    import jax.numpy as rjnp

    def make_kernel(m, plm):
        def kernel(x_ref, o_ref):
            i = plm.program_id(0).astype(m.float32)

            @plm.loop(0, 4)
            def _(j):
                o_ref[:, plm.ds(j, 1)] = x_ref[:, plm.ds(j, 1)] * 2 + x_ref[:, plm.ds(0, 1)] + i
        return kernel

    xs = rng.standard_normal((2, 9, 4)).astype(np.float32)
    spec_j = jpl.BlockSpec((3, 4), lambda i: (i, 0))
    want = jax.vmap(jpl.pallas_call(make_kernel(rjnp, jpl), jax.ShapeDtypeStruct((9, 4), rjnp.float32),
                                    grid=(3,), in_specs=[spec_j], out_specs=spec_j,
                                    interpret=True))(xs)
    spec = pl.BlockSpec((3, 4), lambda i: (i, 0))
    got = fluxion.vmap(pl.pallas_call(make_kernel(jnp, pl), fluxion.ShapeDtypeStruct((9, 4), jnp.float32),
                                      grid=(3,), in_specs=[spec], out_specs=spec))(xs)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_lowering_is_per_platform():
    x = np.ones((10, 12), np.float32)
    jaxpr = fluxion.make_jaxpr(_call())(x, x)
    cpu = lowering.lower_jaxpr_to_module(jaxpr.jaxpr, "cpu")
    assert "stablehlo.while" in cpu
    with pytest.raises(NotImplementedError, match="_scaled_add.*cuda"):
        lowering.lower_jaxpr_to_module(jaxpr.jaxpr, "cuda")
    spec = pl.BlockSpec((4, 8), lambda i, j: (i, j))
    interp = pl.pallas_call(_scaled_add, fluxion.ShapeDtypeStruct((10, 12), jnp.float32),
                            grid=(3, 2), in_specs=[spec, spec], out_specs=spec, interpret=True)
    jaxpr = fluxion.make_jaxpr(interp)(x, x)
    assert "stablehlo.while" in lowering.lower_jaxpr_to_module(jaxpr.jaxpr, "cuda")


def test_eager_calls_share_one_executable():
    from fluxion._src import dispatch
    x = np.ones((10, 12), np.float32)
    _call()(x, x)
    n = len(dispatch._primitive_cache)
    _call()(x, x)
    _call()(x, x)
    assert len(dispatch._primitive_cache) == n


def test_kernel_helpers_outside_a_kernel_raise():
    with pytest.raises(RuntimeError, match="program_id"):
        pl.program_id(0)


def test_grad_needs_custom_vjp():
    with pytest.raises(NotImplementedError, match="pallas_call"):
        fluxion.grad(lambda x: _call()(x, x).sum())(np.ones((10, 12), np.float32))
