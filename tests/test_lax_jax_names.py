"""The jax.lax functions added with the namespace: values and dtypes against JAX and NumPy,
derivatives, vmap against a loop, jit against eager, errors."""
import jax
import numpy as np
import pytest

import fluxion
from fluxion import lax
from fluxion.test_util import check_grads

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def _same(got, want, **kw):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **kw)


@pytest.mark.parametrize("name,call", [
    ("stack", lambda m, x: m.lax.stack([x, 2 * x, x], axis=-1)),
    ("unstack", lambda m, x: m.lax.unstack(x, axis=1)),
    ("tile", lambda m, x: m.lax.tile(x, (2, 1, 3))),
    ("split", lambda m, x: m.lax.split(x, (1, 0, 3), axis=2)),
    ("optimization_barrier", lambda m, x: m.lax.optimization_barrier((x, x * 2))),
])
def test_structural_ops_values_grads_vmap(name, call, x64):
    ours, theirs = call(fluxion, X), call(jax, X)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        _same(a, b)
    jitted = fluxion.jit(lambda x: call(fluxion, x))(X)
    for a, b in zip(jax.tree_util.tree_leaves(jitted), jax.tree_util.tree_leaves(theirs)):
        _same(a, b)
    check_grads(lambda x: call(fluxion, x), (X.astype(np.float64),), order=2,
                modes=["fwd", "rev"])
    xs = np.stack([X, 2 * X, -X], axis=1)
    batched = fluxion.vmap(lambda x: call(fluxion, x), in_axes=1)(xs)
    loop = [call(fluxion, xs[:, i]) for i in range(xs.shape[1])]
    for j, leaf in enumerate(jax.tree_util.tree_leaves(batched)):
        want = np.stack([np.asarray(jax.tree_util.tree_leaves(l)[j]) for l in loop])
        np.testing.assert_allclose(leaf, want)


def test_structural_errors_match_jax():
    for call in [lambda m: m.lax.split(X, (1, 2), axis=2), lambda m: m.lax.split(X, (5, -1), 2),
                 lambda m: m.lax.tile(X, (1, 2)), lambda m: m.lax.stack([X, X[0]]),
                 lambda m: m.lax.unstack(X, axis=3)]:
        with pytest.raises(Exception) as want:
            call(jax)
        with pytest.raises(want.type):
            call(fluxion)


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                                "uint64"])
def test_mulhi_against_jax(dt, x64):
    info = np.iinfo(dt)
    a = RNG.integers(info.min, info.max, size=200, dtype=dt, endpoint=True)
    b = RNG.integers(info.min, info.max, size=200, dtype=dt, endpoint=True)
    a[:4] = [info.min, info.max, 0, info.min]
    b[:4] = [info.min, info.max, info.max, -1 if info.min < 0 else 1]
    jax.config.update("jax_enable_x64", True)
    try:
        want = np.asarray(jax.lax.mulhi(a, b))
    finally:
        jax.config.update("jax_enable_x64", False)
    np.testing.assert_array_equal(lax.mulhi(a, b), want)
    np.testing.assert_array_equal(fluxion.vmap(lax.mulhi)(a, b), want)


def test_mulhi_32_bit_without_x64():
    a = np.array([-5, 2**30, 7, -2**31, 2**31 - 1], np.int32)
    b = np.array([3, 8, -9, -2**31, 2**31 - 1], np.int32)
    np.testing.assert_array_equal(lax.mulhi(a, b), (a.astype(np.int64) * b) >> 32)
    with pytest.raises(TypeError):
        lax.mulhi(np.float32(1), np.float32(2))


def test_rng_bit_generator_matches_jax_bits():
    key = np.array([1, 2, 3, 4], np.uint32)
    for dt in [np.uint8, np.uint16, np.uint32]:
        ours, theirs = lax.rng_bit_generator(key, (3, 5), dt), jax.lax.rng_bit_generator(
            key, (3, 5), dt)
        _same(ours[0], theirs[0])
        _same(ours[1], theirs[1])
    for alg in [lax.RandomAlgorithm.RNG_THREE_FRY, lax.RandomAlgorithm.RNG_PHILOX]:
        jalg = jax.lax.RandomAlgorithm[alg.name]
        _same(lax.rng_bit_generator(key, (7,), algorithm=alg)[1],
              jax.lax.rng_bit_generator(key, (7,), algorithm=jalg)[1])
    with pytest.raises(TypeError):
        lax.rng_bit_generator(key.astype(np.int32), (3,))
    u = lax.rng_uniform(np.float32(2), np.float32(3), (1000,))
    assert u.dtype == np.float32 and u.shape == (1000,)
    assert 2 <= float(u.min()) and float(u.max()) < 3 and abs(float(u.mean()) - 2.5) < 0.05


def test_eq_to_le_to_lt_to_total_order():
    x = np.array([-0.0, 0.0, np.nan, 1.0, -np.inf], np.float32)
    y = np.array([0.0, -0.0, np.nan, np.nan, 1.0], np.float32)
    for name in ["eq_to_p", "le_to_p", "lt_to_p"]:
        _same(getattr(lax, name).bind(x, y), getattr(jax.lax, name).bind(x, y))
        xi = np.array([-1, 0, 3, 1, -5], np.int32)
        _same(getattr(lax, name).bind(xi, np.int32(1)), getattr(jax.lax, name).bind(xi, np.int32(1)))


def test_small_helpers_against_jax():
    assert lax.broadcast_shapes((2, 1), (3,), ()) == jax.lax.broadcast_shapes((2, 1), (3,), ())
    _same(lax.broadcast_like(np.float32(1.5), X), jax.lax.broadcast_like(np.float32(1.5), X))
    _same(lax.broadcast_like(X[0, 0], X), jax.lax.broadcast_like(X[0, 0], X))
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5))
    _same(lax.batch_matmul(a.astype(np.float32), b.astype(np.float32)),
          jax.lax.batch_matmul(a.astype(np.float32), b.astype(np.float32)), rtol=1e-5)
    with pytest.raises(ValueError):
        lax.batch_matmul(a, b[0])
    for v in [1, 1.0, 1j, True, np.int8(3), np.ones(2, np.float16)]:
        assert lax.dtype(v) == jax.lax.dtype(v)
    # Only the type is defined: JAX's empty holds whatever the GPU's memory held.
    empty, jax_empty = lax.empty((2, 3), np.int32), jax.lax.empty((2, 3), np.int32)
    assert (empty.shape, empty.dtype) == (jax_empty.shape, jax_empty.dtype)
    idx = (np.array([0, -1, 1]), np.array([2, 0, -3]))
    _same(lax.index_take(X, idx, (0, 2)), jax.lax.index_take(X, idx, (0, 2)))
    _same(lax.shape_as_value((2, 3)), jax.lax.shape_as_value((2, 3)))
    for args in [((1, 3, 8, 8), (4, 3, 3, 3), (2, 2), "SAME", ("NCHW", "OIHW", "NCHW")),
                 ((1, 8, 8, 3), (3, 3, 3, 4), (2, 1), [(1, 2), (0, 1)], ("NHWC", "HWIO", "NHWC")),
                 ((2, 7, 3), (3, 3, 5), (3,), "VALID", ("NWC", "WIO", "NWC"))]:
        assert lax.conv_transpose_shape_tuple(*args) == jax.lax.conv_transpose_shape_tuple(*args)
    _same(lax.stage(X), X)


def test_type_names():
    assert [m.name for m in lax.RandomAlgorithm] == [m.name for m in jax.lax.RandomAlgorithm]
    assert [(m.name, m.value) for m in lax.DotAlgorithmPreset] == [
        (m.name, m.value) for m in jax.lax.DotAlgorithmPreset]
    assert [(m.name, m.value) for m in lax.AccuracyMode] == [
        (m.name, m.value) for m in jax.lax.AccuracyMode]
    with pytest.raises(ValueError):
        lax.Tolerance()
    assert lax.Tolerance(atol=1e-3) == lax.Tolerance(atol=1e-3)
    alg = lax.DotAlgorithm(np.float32, np.float32, np.float32)
    assert alg.lhs_component_count == 1
    dn = lax.RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])
    assert dn.lhs_ragged_dimensions == [0]


@pytest.mark.parametrize("fn", ["approx_max_k", "approx_min_k"])
def test_approx_top_k(fn, x64):
    x = RNG.standard_normal((3, 9)).astype(np.float32)
    for kw in [{}, {"reduction_dimension": 0}, {"recall_target": 0.5}]:
        k = 2
        ours, theirs = getattr(lax, fn)(x, k, **kw), getattr(jax.lax, fn)(x, k, **kw)
        _same(ours[0], theirs[0])
        _same(ours[1], theirs[1])
    f = lambda x: getattr(lax, fn)(x, 3)[0]  # noqa: E731
    check_grads(f, (x.astype(np.float64),), order=2, modes=["fwd", "rev"])
    np.testing.assert_array_equal(fluxion.vmap(f, in_axes=1, out_axes=1)(x[None].repeat(2, 0)
                                                                         .transpose(1, 0, 2)),
                                  np.stack([f(x), f(x)], 1))
    with pytest.raises(ValueError):
        getattr(lax, fn)(x.astype(np.int32), 2)


def test_ragged_dot_against_jax_and_grads(x64):
    lhs = RNG.standard_normal((7, 4)).astype(np.float32)
    rhs = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    for sizes in ([2, 0, 4], [2, 1, 2], [7, 0, 0]):
        gs = np.array(sizes, np.int32)
        _same(lax.ragged_dot(lhs, rhs, gs), jax.lax.ragged_dot(lhs, rhs, gs), rtol=1e-5,
              atol=1e-6)
        dn = lax.RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])
        _same(lax.ragged_dot_general(lhs, rhs, gs, dn), jax.lax.ragged_dot(lhs, rhs, gs),
              rtol=1e-5, atol=1e-6)
    gs = np.array([2, 1, 2], np.int32)
    check_grads(lambda a, b: lax.ragged_dot(a, b, gs), (lhs.astype(np.float64),
                                                        rhs.astype(np.float64)),
                order=1, modes=["fwd", "rev"])
    with pytest.raises(TypeError):
        lax.ragged_dot(lhs, rhs[:, :3], gs)


@pytest.mark.parametrize("dn", [None, ("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC")])
def test_conv_patches_and_local(dn):
    img = RNG.standard_normal((2, 3, 6, 5)).astype(np.float32)
    if dn is not None and dn[0] == "NHWC":
        img = img.transpose(0, 2, 3, 1)
    for strides, padding in [((1, 2), "SAME"), ((1, 1), "VALID"), ((2, 1), [(1, 0), (0, 2)])]:
        _same(lax.conv_general_dilated_patches(img, (2, 3), strides, padding,
                                               dimension_numbers=dn),
              jax.lax.conv_general_dilated_patches(img, (2, 3), strides, padding,
                                                   dimension_numbers=dn))
    patches = jax.lax.conv_general_dilated_patches(img, (2, 3), (1, 1), "VALID",
                                                   dimension_numbers=dn)
    spec = dn[2] if dn else "NCHW"
    spatial = tuple(patches.shape[spec.index(c)] for c in ("H", "W"))
    rhs_spec = dn[1] if dn else "OIHW"
    sizes = {"O": 4, "I": 18, "H": spatial[0], "W": spatial[1]}
    w = RNG.standard_normal(tuple(sizes[c] for c in rhs_spec)).astype(np.float32)
    _same(lax.conv_general_dilated_local(img, w, (1, 1), "VALID", (2, 3), dimension_numbers=dn),
          jax.lax.conv_general_dilated_local(img, w, (1, 1), "VALID", (2, 3),
                                             dimension_numbers=dn), rtol=1e-5, atol=1e-5)


def test_platform_dependent_and_composite():
    x = np.arange(3.0, dtype=np.float32)
    # The branch named for the default device's platform runs; any other falls to `default`.
    on_cpu = fluxion.default_backend() == "cpu"
    f = lambda x: lax.platform_dependent(x, cpu=lambda x: x + 1, default=lambda x: x - 1)  # noqa
    g = lambda x: lax.platform_dependent(x, cuda=lambda x: x + 1, default=lambda x: x - 1)  # noqa
    np.testing.assert_array_equal(f(x), x + 1 if on_cpu else x - 1)
    np.testing.assert_array_equal(fluxion.jit(g)(x), x - 1 if on_cpu else x + 1)
    with pytest.raises(NotImplementedError):
        lax.platform_dependent(x, tpu=lambda x: x)
    scale = lax.composite(lambda x, *, k: x * k, "my.scale")
    np.testing.assert_array_equal(scale(x, k=3.0), jax.lax.composite(
        lambda x, *, k: x * k, "my.scale")(x, k=3.0))
    assert fluxion.grad(lambda x: scale(x, k=3.0).sum())(x).tolist() == [3.0, 3.0, 3.0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scaled_dot_against_jax(seed):
    rng = np.random.default_rng(seed)  # its own draws: the data must not depend on test order
    lhs = rng.standard_normal((2, 4, 8)).astype(np.float32)
    rhs = rng.standard_normal((2, 8, 3)).astype(np.float32)
    # Powers of two: exactly representable in JAX's float8_e8m0fnu scales.
    ls = (2.0 ** rng.integers(-2, 3, (2, 4, 2))).astype(np.float32)
    rs = (2.0 ** rng.integers(-2, 3, (2, 2, 3))).astype(np.float32)
    e8 = jax.numpy.float8_e8m0fnu
    for kw in [dict(lhs_scale=ls, rhs_scale=rs), dict(lhs_scale=ls),
               dict(preferred_element_type=np.float32, lhs_scale=ls, rhs_scale=rs), {}]:
        theirs = jax.lax.scaled_dot(lhs, rhs, **{
            k: (jax.numpy.asarray(v).astype(e8) if k.endswith("scale") else v)
            for k, v in kw.items()})
        # A float32 result is summed in another order than JAX's (both within float32
        # rounding of the exact sum of the bfloat16 products); bfloat16 results are equal.
        tol = dict(rtol=1e-6, atol=3e-5) if "preferred_element_type" in kw else {}
        _same(lax.scaled_dot(lhs, rhs, **kw), theirs, **tol)
    with pytest.raises(TypeError):
        lax.scaled_dot(lhs, rhs, lhs_scale=ls[..., :1].repeat(3, -1))


def test_select_and_scatter_p_against_jax():
    from jax._src.lax import windowed_reductions as jax_windowed

    from fluxion._src import staging
    from fluxion._src.core import ShapedArray
    scalar = ShapedArray((), np.dtype(np.float32))
    source = RNG.standard_normal((2, 2)).astype(np.float32)
    operand = RNG.standard_normal((4, 5)).astype(np.float32)
    for jax_select, our_select in [(jax.lax.ge, lax.ge), (jax.lax.le, lax.le)]:
        sel = staging.trace_to_jaxpr(lambda a, b: [our_select(a, b)], [scalar, scalar])
        sca = staging.trace_to_jaxpr(lambda a, b: [lax.max(a, b)], [scalar, scalar])
        params = dict(select_jaxpr=sel.jaxpr, select_consts=tuple(sel.consts),
                      scatter_jaxpr=sca.jaxpr, scatter_consts=tuple(sca.consts),
                      window_dimensions=(2, 3), window_strides=(2, 3), padding=((0, 0), (0, 1)))
        f = lambda o, s: lax.select_and_scatter_p.bind(o, s, np.float32(-9), **params)  # noqa
        want = jax_windowed._select_and_scatter(operand, jax_select, (2, 3), (2, 3),
                                                ((0, 0), (0, 1)), source, np.float32(-9),
                                                jax.lax.max)
        _same(f(operand, source), want)
        _same(fluxion.jit(f)(operand, source), want)
        batched = fluxion.vmap(f)(np.stack([operand, -operand]), np.stack([source, source]))
        _same(batched[0], want)
        with pytest.raises(TypeError):
            f(operand, source[:1])


def test_dce_sink_survives_dce_and_transformations():
    x = np.ones(3, np.float32)
    assert lax.dce_sink(x) is None
    f = lambda x: (lax.dce_sink({"a": x * 2}), x + 1)[1]  # noqa: E731
    eqns = fluxion.make_jaxpr(f)(x).jaxpr.eqns
    assert [e.primitive.name for e in eqns] == ["mul", "dce_sink", "add"]
    assert [e.primitive.name for e in jax.make_jaxpr(
        lambda x: (jax.lax.dce_sink({"a": x * 2}), x + 1)[1])(x).jaxpr.eqns] == [
        "mul", "dce_sink", "add"]
    np.testing.assert_array_equal(fluxion.jit(f)(x), x + 1)
    np.testing.assert_array_equal(fluxion.grad(lambda x: f(x).sum())(x), np.ones(3))
    np.testing.assert_array_equal(fluxion.vmap(f)(np.ones((2, 3))), 2 * np.ones((2, 3)))


def test_platform_dependent_without_a_branch_for_this_platform_raises_like_jax():
    import jax
    for mod in (fluxion, jax):
        with pytest.raises(NotImplementedError, match="translation rule .* not found for platform"):
            mod.lax.platform_dependent(3.0, tpu=lambda x: x + 2.0)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.int8, np.uint16])
def test_mulhi_broadcasts_size_one_dimensions_like_jax(dtype):
    a = (np.arange(3).reshape(3, 1) * 1000003 - 1500000).astype(dtype)
    b = (np.arange(4).reshape(1, 4) * 3000017 - 4000000).astype(dtype)
    want = jax.lax.mulhi(a, b)
    np.testing.assert_array_equal(lax.mulhi(a, b), want)
    np.testing.assert_array_equal(fluxion.jit(lax.mulhi)(a, b), want)
    batched = fluxion.vmap(lax.mulhi, (0, None))(np.stack([a, a]), b)
    np.testing.assert_array_equal(batched, np.stack([want, want]))


@pytest.mark.parametrize("shape, message", [
    ((-1,), r"Only non-negative indices are allowed when broadcasting static shapes, but got "
            r"shape \(-1,\)"),
    ("hello", "Shapes must be 1D sequences of concrete values of integer type, got hello"),
    ((1.5,), "Shapes must be 1D sequences of concrete values of integer type"),
])
def test_broadcast_shapes_of_bad_shapes_raises_like_jax(shape, message):
    for lax_module in (lax, jax.lax):
        with pytest.raises(TypeError, match=message):
            lax_module.broadcast_shapes(shape)
    assert lax.broadcast_shapes((2, 1), (1, 3)) == jax.lax.broadcast_shapes((2, 1), (1, 3))
