import os
import sys

import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion.experimental import pallas as pl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "kernels"))
import matmul_softmax as ks  # noqa: E402

rng = np.random.default_rng(0)


@pytest.mark.parametrize("shape", [(64, 48, 40), (70, 50, 33)])
def test_tiled_matmul_scratch(shape):
    m, k, n = shape
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = rng.standard_normal((k, n)).astype(np.float32)
    out = jax.jit(lambda a, b: ks.matmul(a, b, 32, 16, 16))(x, y)
    np.testing.assert_allclose(np.asarray(out), x @ y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16])
def test_softmax_rows_nondividing(dtype):
    x = rng.standard_normal((21, 16)).astype(np.float32)
    out = ks.softmax(jnp.asarray(x, dtype), br=8)
    e = np.exp(x - x.max(1, keepdims=True))
    tol = 1e-5 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(np.asarray(out, np.float32), e / e.sum(1, keepdims=True),
                               rtol=tol, atol=tol)


def test_ds_squeezed_program_id_and_loop():
    def kernel(x_ref, o_ref):
        i = pl.program_id(0)

        @pl.loop(0, 2)
        def _(j):
            o_ref[pl.ds(j * 4, 4)] = x_ref[pl.ds(j * 4, 4)] * 2 + i
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    out = pl.pallas_call(kernel, jax.ShapeDtypeStruct((3, 8), jnp.float32), grid=(3,),
                         in_specs=[pl.BlockSpec((None, 8), lambda i: (i, 0))],
                         out_specs=pl.BlockSpec((pl.squeezed, 8), lambda i: (i, 0)))(x)
    np.testing.assert_array_equal(np.asarray(out), x * 2 + np.arange(3)[:, None])


def test_vmap_matches_loop():
    xs = rng.standard_normal((3, 10, 8)).astype(np.float32)
    got = jax.vmap(lambda x: ks.softmax(x, br=4))(xs)
    want = np.stack([np.asarray(ks.softmax(x, br=4)) for x in xs])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_index_map_arity_error_names_kernel():
    def mykern(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    f = pl.pallas_call(mykern, jax.ShapeDtypeStruct((8, 8), jnp.float32), grid=(2,),
                       in_specs=[pl.BlockSpec((4, 8), lambda i: (i,))],
                       out_specs=pl.BlockSpec((4, 8), lambda i: (i, 0)))
    with pytest.raises(ValueError, match="mykern.*index_map"):
        f(np.zeros((8, 8), np.float32))


def test_run_state():
    def f(refs):
        a, b = refs
        b[...] = a[...] + 1
        a[...] = a[...] * 3
    a, b = pl.run_state(f)((jnp.ones(3), jnp.zeros(3)))
    np.testing.assert_array_equal(np.asarray(a), 3 * np.ones(3))
    np.testing.assert_array_equal(np.asarray(b), 2 * np.ones(3))


def test_same_as_jax_interpret_mode():
    jpl = pytest.importorskip("jax.experimental.pallas")
    import jax as real_jax
    import jax.numpy as rjnp

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + 1.0
    x = rng.standard_normal((10, 12)).astype(np.float32)
    want = jpl.pallas_call(kernel, real_jax.ShapeDtypeStruct((10, 12), rjnp.float32),
                           grid=(3, 2), in_specs=[jpl.BlockSpec((4, 8), lambda i, j: (i, j))],
                           out_specs=jpl.BlockSpec((4, 8), lambda i, j: (i, j)),
                           interpret=True)(x)
    got = pl.pallas_call(kernel, jax.ShapeDtypeStruct((10, 12), jnp.float32),
                         grid=(3, 2), in_specs=[pl.BlockSpec((4, 8), lambda i, j: (i, j))],
                         out_specs=pl.BlockSpec((4, 8), lambda i, j: (i, j)),
                         interpret=True)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_element_and_blocked_dims():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1
    x = np.arange(12, dtype=np.float32)
    out = pl.pallas_call(kernel, jax.ShapeDtypeStruct((8,), jnp.float32), grid=(2,),
                         in_specs=[pl.BlockSpec((pl.Element(4),), lambda i: (i * 4 + 2,))],
                         out_specs=pl.BlockSpec((pl.Blocked(4),), lambda i: (i,)))(x)
    np.testing.assert_array_equal(np.asarray(out), x[2:10] + 1)


def test_input_output_alias_keeps_unwritten_blocks():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 10
    x = np.arange(8, dtype=np.float32)
    out = pl.pallas_call(kernel, jax.ShapeDtypeStruct((8,), jnp.float32), grid=(1,),
                         in_specs=[pl.BlockSpec((4,), lambda i: (0,))],
                         out_specs=pl.BlockSpec((4,), lambda i: (0,)),
                         input_output_aliases={0: 0})(x)
    np.testing.assert_array_equal(np.asarray(out), np.r_[x[:4] * 10, x[4:]])


def test_block_rank_error_and_run_scoped():
    def kernel(x_ref, o_ref):
        def body(tmp):
            tmp[...] = x_ref[...] * 2
            o_ref[...] = tmp[...] + 1
        pl.run_scoped(body, pl.ANY((4,), jnp.float32))
    out = pl.pallas_call(kernel, jax.ShapeDtypeStruct((4,), jnp.float32))(np.ones(4, np.float32))
    np.testing.assert_array_equal(np.asarray(out), 3 * np.ones(4))
    with pytest.raises(ValueError, match="rank"):
        pl.pallas_call(kernel, jax.ShapeDtypeStruct((4,), jnp.float32),
                       in_specs=[pl.BlockSpec((2, 2), lambda: (0, 0))])(np.ones(4, np.float32))
