"""Triton-style Pallas kernels in interpret mode (`plt`): masked loads and stores, atomics,
hints. Kernels JAX's interpret mode runs are compared with it (eagerly and under jit); the
operations it cannot run on the CPU (bitwise atomics, masked atomics, approx_tanh,
debug_barrier) are checked against NumPy."""
import importlib

import numpy as np
import pytest

import fluxion
import fluxion.numpy as fjnp
from fluxion.experimental import pallas as fpl
from fluxion.experimental.pallas import triton as fplt

jax_oracle = pytest.importorskip("jax")


def _libs(name):
    """(jax-like module, its numpy, pl, plt) of "jax" or "fluxion"."""
    return tuple(importlib.import_module(name + suffix) for suffix in
                 ("", ".numpy", ".experimental.pallas", ".experimental.pallas.triton"))


def _check_same(make, *args):
    want = make(*_libs("jax"))(*args)
    fn = make(*_libs("fluxion"))
    for got in (fn(*args), fluxion.jit(fn)(*args)):
        for w, g in zip(jax_oracle.tree_util.tree_leaves(want),
                        fluxion.tree_util.tree_leaves(got), strict=True):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
    return want


def test_masked_load_and_store_past_the_end():
    def make(jax, jnp, pl, plt):
        def kernel(x_ref, o_ref):
            i = pl.program_id(0)
            offs = i * 8 + jnp.arange(8)
            v = plt.load(x_ref.at[pl.ds(i * 8, 8)], mask=offs < 13, other=-1.0)
            plt.store(o_ref.at[pl.ds(i * 8, 8)], v * 2 + 1, mask=offs < 11)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((13,), jnp.float32),
                              grid=(2,), interpret=True,
                              compiler_params=plt.CompilerParams(num_warps=4, num_stages=2))
    out = _check_same(make, np.arange(13, dtype=np.float32))
    assert np.isnan(np.asarray(out)[11:]).all()  # never written


def test_unmasked_load_past_the_end_reads_nan():
    def make(jax, jnp, pl, plt):
        def kernel(x_ref, o_ref):
            o_ref[...] = plt.load(x_ref.at[pl.ds(pl.program_id(0) * 8, 8)])
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2, 8), jnp.float32),
                              grid=(2,), out_specs=pl.BlockSpec((None, 8), lambda i: (i, 0)),
                              interpret=True)
    out = np.asarray(_check_same(make, np.arange(13, dtype=np.float32)))
    assert np.isnan(out[1, 5:]).all()


@pytest.mark.parametrize("op", ["atomic_add", "atomic_max", "atomic_min"])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_atomics_return_the_old_value(op, dtype):
    def make(jax, jnp, pl, plt):
        def kernel(x_ref, o_ref, old_ref):
            o_ref[...] = x_ref[...]
            old_ref[0] = getattr(plt, op)(o_ref, jnp.int32(2), jnp.asarray(6, dtype))
            old_ref[1:5] = getattr(plt, op)(o_ref, pl.ds(3, 4), x_ref[pl.ds(0, 4)])
        return pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((8,), dtype),
                                                 jax.ShapeDtypeStruct((5,), dtype)),
                              interpret=True)
    _check_same(make, (np.arange(8) * 3 % 7).astype(dtype))


def test_atomic_add_at_an_index_array_and_cas():
    def make(jax, jnp, pl, plt):
        def kernel(x_ref, i_ref, v_ref, o_ref, old_ref, s):
            o_ref[...] = x_ref[...]
            old_ref[0:3] = plt.atomic_add(o_ref, i_ref[...], v_ref[...])
            s[...] = x_ref[5]
            old_ref[3] = plt.atomic_cas(s, 15.0, 99.0)
            old_ref[4] = plt.atomic_cas(s, 15.0, 7.0)
            old_ref[5] = s[...]
        return pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((8,), jnp.float32),
                                                 jax.ShapeDtypeStruct((6,), jnp.float32)),
                              scratch_shapes=[pl.ANY((), jnp.float32)], interpret=True)
    _check_same(make, np.arange(8, dtype=np.float32) * 3, np.array([1, 3, 6], np.int32),
                np.array([10, 20, 30], np.float32))


def _run_fluxion(kernel, x, n_old):
    return fpl.pallas_call(kernel, out_shape=(fluxion.ShapeDtypeStruct(x.shape, x.dtype),
                                              fluxion.ShapeDtypeStruct((n_old,), x.dtype)))(x)


@pytest.mark.parametrize("op,np_op", [("atomic_and", np.bitwise_and),
                                      ("atomic_or", np.bitwise_or),
                                      ("atomic_xor", np.bitwise_xor),
                                      ("atomic_xchg", lambda old, v: v)])
def test_atomics_jax_cannot_interpret(op, np_op):
    x = np.array([12, 7, 5, 9, 3, 0], np.int32)
    vals = np.array([6, 3, 10], np.int32)

    def kernel(x_ref, o_ref, old_ref):
        o_ref[...] = x_ref[...]
        old_ref[...] = getattr(fplt, op)(o_ref, fpl.ds(1, 3), fjnp.asarray(vals),
                                         mask=fjnp.array([True, False, True]))
    for fn in (lambda x: _run_fluxion(kernel, x, 3),
               fluxion.jit(lambda x: _run_fluxion(kernel, x, 3))):
        out, old = fn(x)
        want = x.copy()
        want[[1, 3]] = np_op(x[[1, 3]], vals[[0, 2]])
        np.testing.assert_array_equal(np.asarray(out), want)
        np.testing.assert_array_equal(np.asarray(old), x[1:4])


def test_atomic_errors():
    def run(dtype, op="atomic_max"):
        def kernel(x_ref, o_ref):
            getattr(fplt, op)(o_ref, 0, x_ref[0])
        return fpl.pallas_call(kernel, out_shape=fluxion.ShapeDtypeStruct((8,), dtype))(
            np.zeros(8, dtype))
    with pytest.raises(ValueError, match="does not support f16"):
        run(np.float16)
    for dtype in (np.int8, np.bool_, fjnp.bfloat16):
        with pytest.raises(ValueError, match="does not support"):
            run(dtype)
    with pytest.raises(ValueError, match="integer"):
        run(np.float32, "atomic_or")

    def cas(x_ref, o_ref):
        fplt.atomic_cas(o_ref, 1.0, 2.0)
    with pytest.raises(ValueError, match="ref must be scalar"):
        fpl.pallas_call(cas, out_shape=fluxion.ShapeDtypeStruct((8,), np.float32))(
            np.zeros(8, np.float32))


def test_dot_and_max_contiguous():
    def make(jax, jnp, pl, plt):
        def kernel(x_ref, o_ref, p_ref):
            x = plt.max_contiguous(x_ref[...], 4)
            o_ref[...] = plt.dot(x, x, trans_a=True)
            p_ref[...] = plt.dot(x, x, trans_b=True, allow_tf32=False)
        f32 = jax.ShapeDtypeStruct((4, 4), jnp.float32)
        return pl.pallas_call(kernel, out_shape=(f32, f32), interpret=True)
    _check_same(make, np.arange(16, dtype=np.float32).reshape(4, 4) / 10)
    with pytest.raises(ValueError, match="2D"):
        fplt.dot(fjnp.ones(3), fjnp.ones(3))


def test_approx_tanh_and_debug_barrier():
    # JAX's interpret mode cannot run either on the CPU (no lowering for the PTX asm or the
    # barrier); their meaning is tanh and nothing.
    def kernel(x_ref, o_ref):
        fplt.debug_barrier()
        o_ref[...] = fplt.approx_tanh(x_ref[...])
    x = np.linspace(-3, 3, 16, dtype=np.float32)
    out = fpl.pallas_call(kernel, out_shape=fluxion.ShapeDtypeStruct((16,), np.float32))(x)
    np.testing.assert_allclose(np.asarray(out), np.tanh(x), rtol=1e-6)
    with pytest.raises(TypeError, match="approx_tanh does not accept int32"):
        fplt.approx_tanh(fjnp.arange(3))


def test_public_names_match_jax():
    import jax.experimental.pallas.triton as jplt
    ours = {n for n in dir(fplt) if not n.startswith("_")}
    theirs = {n for n in dir(jplt) if not n.startswith("_")}
    assert theirs - ours == {"elementwise_inline_asm"}  # PTX: see docs/pallas.md


def test_2d_masked_tiles_and_atomics_across_the_grid():
    def make(jax, jnp, pl, plt):
        def kernel(x_ref, s_in_ref, o_ref, s_ref):
            i, j = pl.program_id(0), pl.program_id(1)
            rows = i * 4 + jnp.arange(4)[:, None]
            cols = j * 8 + jnp.arange(8)[None, :]
            mask = (rows < 10) & (cols < 13)
            tile = plt.load(x_ref.at[pl.ds(i * 4, 4), pl.ds(j * 8, 8)], mask=mask, other=0.0)
            plt.store(o_ref.at[pl.ds(i * 4, 4), pl.ds(j * 8, 8)], tile * 2, mask=mask)
            plt.atomic_add(s_ref, pl.ds(1, 2),
                           jnp.stack([jnp.sum(tile), jnp.max(tile)]))
        return pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((10, 13), jnp.float32),
                                                 jax.ShapeDtypeStruct((4,), jnp.float32)),
                              grid=(3, 2), input_output_aliases={1: 1}, interpret=True)
    _check_same(make, np.arange(130, dtype=np.float32).reshape(10, 13) / 7,
                np.zeros(4, np.float32))


def test_atomic_through_a_view():
    # JAX 0.10.2's interpret mode fails on an atomic through `ref.at[...]` (a broadcasting
    # TypeError in its discharge); the meaning is the atomic on that part of the Ref.
    def kernel(x_ref, o_ref, old_ref):
        o_ref[...] = x_ref[...]
        old_ref[...] = fplt.atomic_add(o_ref.at[2:6], fpl.ds(1, 2), fjnp.float32(10))
    x = np.arange(8, dtype=np.float32)
    out, old = fpl.pallas_call(kernel, out_shape=(fluxion.ShapeDtypeStruct((8,), np.float32),
                                                  fluxion.ShapeDtypeStruct((2,), np.float32)))(x)
    np.testing.assert_array_equal(np.asarray(out), [0, 1, 2, 13, 14, 5, 6, 7])
    np.testing.assert_array_equal(np.asarray(old), [3, 4])
