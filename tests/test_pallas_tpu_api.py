"""TPU-style Pallas kernels in interpret mode: scalar prefetch, compiler parameters, DMAs and
semaphores, Ref views, small vector ops. Each kernel runs with JAX's interpret mode (the
oracle) and with fluxion, eagerly and under jit."""
import importlib

import numpy as np
import pytest

import fluxion
import fluxion.numpy as fjnp

jax_oracle = pytest.importorskip("jax")


def _libs(name):
    """(jax-like module, its numpy, pl, pltpu) of "jax" or "fluxion"."""
    jax = importlib.import_module(name)
    return (jax, importlib.import_module(name + ".numpy"),
            importlib.import_module(name + ".experimental.pallas"),
            importlib.import_module(name + ".experimental.pallas.tpu"))


def _check_same(make, *args, rtol=0, atol=0):
    """`make(jax, jnp, pl, pltpu)` returns a function of `args`: JAX's interpret-mode result
    is the truth; fluxion's must match eagerly and under jit."""
    want = make(*_libs("jax"))(*args)
    fn = make(*_libs("fluxion"))
    for got in (fn(*args), fluxion.jit(fn)(*args)):
        w_leaves = jax_oracle.tree_util.tree_leaves(want)
        g_leaves = fluxion.tree_util.tree_leaves(got)
        assert len(w_leaves) == len(g_leaves)
        for w, g in zip(w_leaves, g_leaves):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)
    return want


X = np.arange(24 * 128, dtype=np.float32).reshape(24, 128)


# ---------------------------------------------------------------------------------------------
# 1. Scalar prefetch

def _prefetch_call(jax, jnp, pl, pltpu):
    def kernel(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2 + idx_ref[pl.program_id(0)]
    gs = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(3,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0)))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((24, 128), jnp.float32),
                          grid_spec=gs, interpret=True)


def test_scalar_prefetch_drives_index_maps_and_reaches_the_kernel():
    _check_same(_prefetch_call, np.array([2, 0, 1], np.int32), X)


def test_scalar_prefetch_two_operands_and_scratch():
    def make(jax, jnp, pl, pltpu):
        def kernel(rows, scale, x_ref, o_ref, acc):
            @pl.when(pl.program_id(0) == 0)
            def _():
                acc[...] = jnp.zeros_like(acc)
            acc[...] += x_ref[...] * scale[0]
            o_ref[...] = acc[...] + rows[pl.program_id(0)]
        gs = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2, grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, rows, scale: (rows[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, rows, scale: (0, 0)),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                              grid_spec=gs, interpret=True)
    _check_same(make, np.array([1, 2, 2, 0], np.int32), np.array([3], np.int32), X)


def test_scalar_prefetch_under_vmap():
    idx = np.array([[2, 0, 1], [1, 1, 0]], np.int32)
    xs = np.stack([X, X + 1])
    want = jax_oracle.vmap(_prefetch_call(*_libs("jax")))(idx, xs)
    got = fluxion.vmap(_prefetch_call(*_libs("fluxion")))(idx, xs)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    want = jax_oracle.vmap(_prefetch_call(*_libs("jax")), (None, 0))(idx[0], xs)
    got = fluxion.vmap(_prefetch_call(*_libs("fluxion")), (None, 0))(idx[0], xs)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_scalar_prefetch_with_too_few_operands_raises():
    with pytest.raises(ValueError, match="num_scalar_prefetch"):
        _prefetch_call(*_libs("fluxion"))()


# ---------------------------------------------------------------------------------------------
# 2. Compiler parameters and pipeline modes

def test_compiler_params_and_buffered_are_accepted_and_change_nothing():
    def make(jax, jnp, pl, pltpu):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
        params = pltpu.CompilerParams(dimension_semantics=(pltpu.PARALLEL, "arbitrary"),
                                      vmem_limit_bytes=2 ** 20)
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((24, 128), jnp.float32), grid=(3, 2),
            in_specs=[pl.BlockSpec((8, 64), lambda i, j: (i, j),
                                   pipeline_mode=pl.Buffered(3))],
            out_specs=pl.BlockSpec((8, 64), lambda i, j: (i, j)), compiler_params=params,
            interpret=True)
    _check_same(make, X)


def test_compiler_params_fields_match_jax():
    import dataclasses
    _, _, fpl, fpltpu = _libs("fluxion")
    _, _, jpl, jpltpu = _libs("jax")
    for ours, theirs in ((fpltpu.CompilerParams, jpltpu.CompilerParams),
                         (fpltpu.InterpretParams, jpltpu.InterpretParams),
                         (fpl.Buffered, jpl.Buffered)):
        fields = lambda c: [(f.name, f.default) for f in dataclasses.fields(c)]  # noqa: E731
        assert fields(ours) == fields(theirs), ours
    assert issubclass(fpltpu.CompilerParams, fpl.CompilerParams)
    assert fpltpu.CompilerParams(dimension_semantics=["parallel"]).dimension_semantics == \
        ("parallel",)
    assert [s.value for s in fpltpu.GridDimensionSemantics] == \
        [s.value for s in jpltpu.GridDimensionSemantics]
    assert fpltpu.ARBITRARY.value == "arbitrary" and fpltpu.CORE_PARALLEL.value == \
        "core_parallel"


# ---------------------------------------------------------------------------------------------
# 3. DMAs, semaphores, Ref views

def _dma_call(jax, jnp, pl, pltpu):
    def kernel(x_hbm, o_ref, r_ref, buf, sems, rsem):
        copy = pltpu.make_async_copy(x_hbm.at[pl.ds(8, 8)], buf, sems.at[1])
        copy.start()
        r_ref[0] = pl.semaphore_read(sems.at[1])
        copy.wait()
        r_ref[1] = pl.semaphore_read(sems.at[1])
        pl.semaphore_signal(rsem, 3)
        pl.semaphore_wait(rsem, 2)
        r_ref[2] = pl.semaphore_read(rsem)
        o_ref[...] = buf[...] * 3
    return pl.pallas_call(
        kernel, out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),
                           jax.ShapeDtypeStruct((3,), jnp.int32)),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=(pl.BlockSpec(), pl.BlockSpec(memory_space=pltpu.SMEM)),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,)),
                        pltpu.SemaphoreType.REGULAR],
        interpret=True)


def test_async_copy_and_semaphore_counts():
    out, counts = _check_same(_dma_call, X[:16])
    assert list(np.asarray(counts)) == [1024, 0, 1]


def test_dma_into_an_any_output_with_views_and_grid():
    def make(jax, jnp, pl, pltpu):
        def kernel(x_hbm, o_hbm, buf, sem):
            i = pl.program_id(0)
            pltpu.sync_copy(x_hbm.at[pl.ds(i * 4, 4), pl.ds(0, 64)], buf)
            buf[...] = buf[...] + 1
            pltpu.async_copy(buf, o_hbm.at[pl.ds(i * 4, 4)], sem).wait()
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((24, 64), jnp.float32), grid=(6,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.VMEM((4, 64), jnp.float32), pltpu.SemaphoreType.DMA],
            interpret=True)
    _check_same(make, X)


def test_with_scoped_semaphore_and_buffer():
    def make(jax, jnp, pl, pltpu):
        def kernel(a_hbm, o_ref):
            i = pl.program_id(0)

            @pl.with_scoped(pltpu.VMEM((8, 128), jnp.float32), sem=pltpu.SemaphoreType.DMA)
            def copy_in(scale, buf, sem):
                pltpu.async_copy(a_hbm.at[pl.ds(i * 8, 8)], buf, sem).wait()
                o_ref[...] = buf[...] * scale
            copy_in(2.0)
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((24, 128), jnp.float32), grid=(3,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), interpret=True)
    _check_same(make, X)


def test_empty_ref_like_in_a_kernel():
    def make(jax, jnp, pl, pltpu):
        def kernel(x_ref, o_ref):
            t = pl.empty_ref_like(pltpu.VMEM((4,), jnp.float32))
            u = pl.empty_ref_like(jax.ShapeDtypeStruct((4,), jnp.float32))
            t[...] = x_ref[...] * 2
            u[...] = t[...] + 1
            o_ref[...] = u[...]
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4,), jnp.float32),
                              interpret=True)
    _check_same(make, np.arange(4, dtype=np.float32))
    with pytest.raises(ValueError, match="empty_ref_like does not support"):
        _libs("fluxion")[2].empty_ref_like(fjnp.ones(3))


def test_interpret_params_accepted_as_interpret():
    def make(jax, jnp, pl, pltpu):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] - 1
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((24, 128), jnp.float32),
                              interpret=pltpu.InterpretParams())
    _check_same(make, X)


def test_ref_views_read_and_write_through():
    def kernel(x_ref, o_ref):
        o_ref[...] = fjnp.zeros_like(o_ref)
        v = o_ref.at[1:3]
        v[:, 0] = x_ref.at[2][:2]
        v.at[1][4:6] = fjnp.full((2,), 7.0)
        o_ref[0, 0] = v.at[0][0] + v.shape[1]
    from fluxion.experimental import pallas as pl
    out = pl.pallas_call(kernel, fluxion.ShapeDtypeStruct((4, 8), fjnp.float32))(
        np.arange(32, dtype=np.float32).reshape(4, 8))
    want = np.zeros((4, 8), np.float32)
    want[1:3, 0] = [16, 17]
    want[2, 4:6] = 7
    want[0, 0] = 16 + 8
    np.testing.assert_array_equal(np.asarray(out), want)
    r = fluxion.new_ref(fjnp.arange(6.0))
    r.at[2:5][1] = 10.0
    np.testing.assert_array_equal(np.asarray(r[...]), [0, 1, 2, 10, 4, 5])


def test_dma_and_semaphore_errors():
    def run(kernel, scratch):
        _, jnp, pl, pltpu = _libs("fluxion")
        return pl.pallas_call(kernel, out_shape=fluxion.ShapeDtypeStruct((8,), jnp.float32),
                              scratch_shapes=scratch)(np.zeros(8, np.float32))
    pltpu = _libs("fluxion")[3]
    pl = _libs("fluxion")[2]
    with pytest.raises(TypeError, match="same shape"):
        run(lambda x, o, s: pltpu.make_async_copy(x.at[:4], o, s),
            [pltpu.SemaphoreType.DMA])
    with pytest.raises(TypeError, match="same dtype"):
        run(lambda x, o, b, s: pltpu.make_async_copy(x, b, s),
            [pltpu.VMEM((8,), np.int32), pltpu.SemaphoreType.DMA])
    with pytest.raises(ValueError, match="semaphore"):
        run(lambda x, o, t: pl.semaphore_signal(t), [pltpu.VMEM((1,), np.float32)])
    with pytest.raises(ValueError, match="single semaphore"):
        run(lambda x, o, s: pl.semaphore_read(s), [pltpu.SemaphoreType.REGULAR((2,))])


# ---------------------------------------------------------------------------------------------
# 4. Small kernel ops

def test_roll_reciprocal_bitcast():
    def make(jax, jnp, pl, pltpu):
        def kernel(x_ref, i_ref, o_ref, r_ref, s_ref, b_ref):
            x = x_ref[...]
            o_ref[...] = pltpu.roll(x, 3, 1) + pl.reciprocal(x + 1, approx=False)
            r_ref[...] = pl.reciprocal(x + 1, approx=True)
            s_ref[...] = pltpu.roll(x, 1, 1, stride=2, stride_axis=0)
            b_ref[...] = pltpu.bitcast(pltpu.bitcast(i_ref[...], jnp.int8) + 1, jnp.int32)
        f32 = lambda s: jax.ShapeDtypeStruct(s, jnp.float32)  # noqa: E731
        return pl.pallas_call(kernel, out_shape=(f32((8, 128)), f32((8, 128)), f32((8, 128)),
                                                 jax.ShapeDtypeStruct((8, 128), jnp.int32)),
                              interpret=True)
    ints = np.arange(8 * 128, dtype=np.int32).reshape(8, 128) * 1000003
    _check_same(make, X[:8] / 100, ints, rtol=1e-6)


def test_roll_errors_match_jax():
    _, jnp, _, pltpu = _libs("fluxion")
    _, _, _, jpltpu = _libs("jax")
    x = np.ones((8, 128), np.float32)
    for kwargs in (dict(shift=-1, axis=0), dict(shift=1, axis=2),
                   dict(shift=1, axis=0, stride=1),
                   dict(shift=1, axis=0, stride=1, stride_axis=0)):
        with pytest.raises(ValueError) as want:
            jpltpu.roll(x, **kwargs)
        with pytest.raises(ValueError, match=str(want.value)):
            pltpu.roll(jnp.asarray(x), **kwargs)
    with pytest.raises(ValueError, match="1D"):
        pltpu.bitcast(jnp.ones(8), jnp.int32)


def test_power_of_2_and_strides():
    _, _, pl, _ = _libs("fluxion")
    _, _, jpl, _ = _libs("jax")
    for n in (0, 1, 2, 3, 37, 64, 65):
        assert pl.next_power_of_2(n) == jpl.next_power_of_2(n)
    with pytest.raises(ValueError):
        pl.next_power_of_2(-1)
    assert pl.strides_from_shape((2, 3, 4)) == jpl.strides_from_shape((2, 3, 4)) == (12, 4, 1)


def test_masked_tpu_load_store_touch_and_hints():
    def make(jax, jnp, pl, pltpu):
        def kernel(x_ref, o_ref):
            o_ref[...] = jnp.zeros_like(o_ref)
            v = pltpu.load(x_ref, mask=jnp.arange(8)[None, :] < 5)
            pltpu.store(o_ref, v + 1, mask=jnp.arange(8)[None, :] < 3)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2, 8), jnp.float32),
                              in_specs=[pl.no_block_spec],
                              out_specs=pl.no_block_spec, interpret=True)
    _check_same(make, np.arange(16, dtype=np.float32).reshape(2, 8))


def test_squeezed_instances_and_noops():
    # pl.delay and pltpu.touch have no CPU lowering in JAX's interpret mode; they do nothing
    def make(jax, jnp, pl, pltpu):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] + pl.program_id(0)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 8), jnp.float32),
                              grid=(4,), in_specs=[pl.BlockSpec((pl.Squeezed(), 8),
                                                                lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((None, 8), lambda i: (i, 0)),
                              interpret=True)
    _check_same(make, np.arange(32, dtype=np.float32).reshape(4, 8))
    _, jnp, pl, pltpu = _libs("fluxion")

    def kernel(x_ref, o_ref):
        pl.delay(10)
        pltpu.touch(x_ref)
        o_ref[...] = pltpu.with_memory_space_constraint(x_ref[...], pltpu.VMEM)
    x = np.arange(4, dtype=np.float32)
    out = pl.pallas_call(kernel, out_shape=fluxion.ShapeDtypeStruct((4,), jnp.float32))(x)
    np.testing.assert_array_equal(np.asarray(out), x)
    assert pl.align_to(13, 8) == 16 and pl.squeezed == pl.Squeezed()
    assert [d.value for d in pl.DeviceIdType] == ["mesh", "logical"]
    assert pltpu.is_tpu_device() is False


def test_debug_check_checks_nothing_in_interpret_mode_as_jax():
    def make(jax, jnp, pl, pltpu):
        def kernel(x_ref, o_ref):
            pl.debug_check(x_ref[0] > 0, "x must be positive")
            o_ref[...] = x_ref[...] * 2
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4,), jnp.float32),
                              interpret=True)
    _, _, pl, _ = _libs("fluxion")
    assert pl.enable_debug_checks.value is False
    with pl.enable_debug_checks(True):
        assert pl.enable_debug_checks.value is True
        _check_same(make, -np.ones(4, np.float32))
    assert pl.enable_debug_checks.value is False


# JAX's names that fluxion leaves out, and why (docs/pallas.md, "What is missing")
MISSING = {
    "": {"Indirect", "MemoryRef", "core_map", "enable_poison_buffers",
         "estimate_cost", "get_global", "kernel", "lower_as_mlir",
         "pallas_export_experimental", "select_ref", "semaphore"},
    ".tpu": {"BufferType", "BufferedRef", "BufferedRefBase", "ChipVersion", "CoreType",
             "LoweringException", "SideEffectType", "Tiling", "TpuInfo", "async_remote_copy",
             "core", "core_barrier", "create_tensorcore_mesh", "dma_semaphore",
             "emit_pipeline", "emit_pipeline_with_allocations", "force_tpu_interpret_mode",
             "get_barrier_semaphore", "get_tpu_info", "get_tpu_info_for_chip",
             "make_async_remote_copy", "matmul_acc_lhs", "matmul_pop", "matmul_push_rhs",
             "pack_elementwise", "prng_random_bits", "prng_seed",
             "reset_tpu_interpret_mode_state", "run_on_first_core", "sample_block",
             "set_tpu_interpret_mode", "stateful_bernoulli", "stateful_bits",
             "stateful_normal", "stateful_uniform", "stochastic_round", "to_pallas_key",
             "trace_value", "unpack_elementwise"},
}


@pytest.mark.parametrize("suffix", sorted(MISSING))
def test_public_names_match_jax_minus_the_listed(suffix):
    def public(name):
        module = importlib.import_module(name + ".experimental.pallas" + suffix)
        # submodules are attributes once imported, whoever imported them
        return {n for n in dir(module) if not n.startswith("_")} - {"tpu", "triton"}
    ours, theirs = public("fluxion"), public("jax")
    assert theirs - ours == MISSING[suffix]
    assert ours - theirs <= {"ScratchShape"}


def test_compiler_params_must_be_compiler_params():
    _, jnp, pl, _ = _libs("fluxion")

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    with pytest.raises(TypeError, match="compiler_params"):
        pl.pallas_call(kernel, out_shape=fluxion.ShapeDtypeStruct((8,), jnp.float32),
                       compiler_params=dict(mosaic=dict(vmem_limit_bytes=1)))


def test_scoped_semaphore_is_counted_down_by_wait():
    # JAX 0.10.2's interpret mode leaves a run_scoped DMA semaphore at the copy's size after
    # .wait() (its wait only updates semaphores given as pallas_call scratch); here wait
    # always takes the copy's size off, wherever the semaphore was made.
    _, jnp, pl, pltpu = _libs("fluxion")

    def kernel(x_ref, o_ref):
        def body(buf, sem):
            copy = pltpu.async_copy(x_ref, buf, sem)
            o_ref[0] = pl.semaphore_read(sem)
            copy.wait()
            o_ref[1] = pl.semaphore_read(sem)
        pl.run_scoped(body, pltpu.VMEM((4,), jnp.float32), pltpu.SemaphoreType.DMA)
    out = pl.pallas_call(kernel, out_shape=fluxion.ShapeDtypeStruct((2,), jnp.int32))(
        np.zeros(4, np.float32))
    assert list(np.asarray(out)) == [4, 0]


def test_ref_view_writes_keep_the_ref_write_rules():
    r = fluxion.new_ref(fjnp.zeros((4, 3), fjnp.int32))
    with pytest.raises(ValueError, match="dtype"):
        r.at[1:3][0] = 1.5
    with pytest.raises(ValueError, match="shape"):
        r.at[1:3][0] = fjnp.ones(5, fjnp.int32)
    r.at[1:3].at[1][...] = 7
    assert np.asarray(r[...]).tolist() == [[0, 0, 0], [0, 0, 0], [7, 7, 7], [0, 0, 0]]
    assert r.at[1:3].at[1].shape == (3,) and r.at[1:3].dtype == np.int32


@pytest.mark.parametrize("equation,sizes,shape", [
    ("ab->ba", {}, (8, 128)), ("a(bc)->bac", {"b": 2}, (8, 128)),
    ("a(bc)->(ba)c", {"c": 32}, (8, 128)), ("(ab)c->abc", {"a": 2}, (8, 128)),
    ("abc->(ab)c", {}, (2, 4, 128)), ("a b->b a", {}, (8, 128))])
def test_einshape(equation, sizes, shape):
    def make(jax, jnp, pl, pltpu):
        def kernel(x_ref, o_ref):
            o_ref[...] = pltpu.einshape(equation, x_ref[...], **sizes)
        out = jax_oracle.eval_shape(lambda x: _libs("jax")[3].einshape(equation, x, **sizes),
                                    jax_oracle.ShapeDtypeStruct(shape, np.float32))
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out.shape, jnp.float32),
                              interpret=True)
    _check_same(make, np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


def test_einshape_errors_match_jax():
    _, _, _, pltpu = _libs("fluxion")
    _, _, _, jpltpu = _libs("jax")
    x = np.zeros((10, 20), np.float32)
    for eq, sizes in [("a(bc)->abc", {}), ("a(bc)->abc", {"b": 3}), ("ab->abc", {}),
                      ("abc->ab", {}), ("a(bc)->abc", {"b": 4, "c": 4}), ("ab-ba", {}),
                      ("aa->aa", {}), ("ab->a", {})]:
        with pytest.raises((ValueError, NotImplementedError)) as want:
            jpltpu.einshape(eq, x, **sizes)
        with pytest.raises(want.type) as got:
            pltpu.einshape(eq, fjnp.asarray(x), **sizes)
        assert str(got.value) == str(want.value)
