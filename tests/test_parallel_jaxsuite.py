"""Collectives, pmap and device placement: the bugs JAX 0.10.2's own pmap_test,
shard_map_test and multi_device_test found in fluxion (tools/jax_suite), each checked against
JAX (the oracle, in the same process) or NumPy, eagerly and under jit. They run on one device
(collectives under `vmap(axis_name=...)`); the 8-device ones live in
tests/test_device_placement.py."""
import jax
import numpy as np
import pytest

import fluxion
from fluxion import lax

N = 4
TREE = {"a": np.arange(N * N, dtype=np.float32).reshape(N, N, 1).repeat(2, 2),
        "b": np.arange(N * N, dtype=np.int32).reshape(N, N) * 3}


def _both(fn, tree, jit):
    """`fn(lax_module)` vmapped over axis 'i' of `tree`, for fluxion and JAX."""
    ours = fluxion.vmap(lambda t: fn(lax, t), axis_name="i")
    theirs = jax.vmap(lambda t: fn(jax.lax, t), axis_name="i")
    if jit:
        ours = fluxion.jit(ours)
    return ours(tree), theirs(tree)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name, fn", [
    ("all_to_all", lambda m, t: m.all_to_all(t, "i", 0, 0)),
    ("all_to_all_tiled", lambda m, t: m.all_to_all(t, "i", 0, 0, tiled=True)),
    ("psum_scatter", lambda m, t: m.psum_scatter(t, "i")),
    ("psum_scatter_tiled", lambda m, t: m.psum_scatter(t, "i", scatter_dimension=0, tiled=True)),
])
def test_all_to_all_and_psum_scatter_take_pytrees(name, fn, jit):
    ours, theirs = _both(fn, TREE, jit)
    assert set(ours) == set(theirs)
    for k in theirs:
        assert ours[k].dtype == theirs[k].dtype and ours[k].shape == theirs[k].shape
        np.testing.assert_array_equal(np.asarray(ours[k]), np.asarray(theirs[k]))


@pytest.mark.parametrize("fn", [
    lambda m, x: m.psum(x, "i", axis_index_groups=[[0, 1], [2, 3]]),
    lambda m, x: m.pmean(x, "i", axis_index_groups=[[0, 1], [2, 3]]),
    lambda m, x: m.pmax(x, "i", axis_index_groups=[[0, 1], [2, 3]]),
    lambda m, x: m.pmin(x, "i", axis_index_groups=[[0, 1], [2, 3]]),
    lambda m, x: m.all_gather(x, "i", axis_index_groups=[[0, 1], [2, 3]]),
    lambda m, x: m.all_to_all(x, "i", 0, 0, axis_index_groups=[[0, 1], [2, 3]]),
    lambda m, x: m.psum_scatter(x, "i", axis_index_groups=[[0, 1], [2, 3]], tiled=True),
    lambda m, x: m.pswapaxes(x, "i", 0, axis_index_groups=[[0, 1], [2, 3]]),
])
def test_axis_index_groups_under_vmap_are_refused_as_in_jax(fn):
    # JAX's vmap collectives refuse the groups (pmap and shard_map take them: see
    # tests/parallel/cases_axis_index_groups.py); ignoring them would give whole-axis results.
    x = np.arange(N * 2, dtype=np.float32).reshape(N, 2)  # rows of the group size
    with pytest.raises(NotImplementedError) as theirs:
        jax.vmap(lambda v: fn(jax.lax, v), axis_name="i")(x)
    with pytest.raises(NotImplementedError) as ours:
        fluxion.vmap(lambda v: fn(lax, v), axis_name="i")(x)
    assert str(theirs.value).split(".")[0] in str(ours.value)


def test_psum_of_a_constant_with_axis_index_groups_under_vmap_matches_jax():
    # a constant's sum is known without the collective: the group size times it, as in JAX
    x = np.arange(N, dtype=np.float32)
    groups = [[0, 2], [1, 3]]
    ours = fluxion.vmap(lambda v: v * lax.psum(1, "i", axis_index_groups=groups), axis_name="i")
    theirs = jax.vmap(lambda v: v * jax.lax.psum(1, "i", axis_index_groups=groups),
                      axis_name="i")
    np.testing.assert_array_equal(np.asarray(ours(x)), np.asarray(theirs(x)))


def _pmap_closing_over(m, y):
    """A pmap made inside a transformed function whose body closes over its traced `y`."""
    n = m.device_count()
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return m.pmap(lambda z: m.numpy.sin(z * y))(x)


def _check_under_transform(body, transform):
    """`body(m, y)` (a program whose inner map closes over the traced `y`) under `transform`,
    in fluxion and in JAX, with the same results."""
    def run(m):
        f = lambda y: body(m, y)  # noqa: E731
        ys = np.array([0.5, 2.0], dtype=np.float32)
        if transform == "vmap":
            return m.vmap(f)(ys)
        if transform == "grad":
            return m.grad(lambda y: f(y).sum())(np.float32(2.0))
        if transform == "jit":
            return m.jit(f)(np.float32(2.0))
        if transform == "jvp":
            return m.jvp(f, (np.float32(2.0),), (np.float32(1.0),))[1]
        return m.vmap(m.grad(lambda y: f(y).sum()))(ys)
    ours, theirs = run(fluxion), run(jax)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5)


@pytest.mark.parametrize("transform", ["vmap", "grad", "jit", "jvp", "vmap_of_grad"])
def test_pmap_body_closing_over_an_outer_tracer(transform):
    _check_under_transform(_pmap_closing_over, transform)


def _error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


X1 = np.array([3.14], dtype=np.float32)
PMAP_ERRORS = {
    "in_axes_nested": lambda m: m.pmap(lambda x, y: x, in_axes=((0, 0, 0), 0))((X1, X1), X1),
    "in_axes_with_kwargs": lambda m: m.pmap(lambda x, y: x, in_axes=((0, 0), 0))(x=(X1, X1), y=X1),
    "in_axes_too_long": lambda m: m.pmap(lambda x: x, in_axes=(0, 0))(X1),
    "out_axes": lambda m: m.pmap(lambda x, y: ((x, x), x), out_axes=((0, 0, 0), 0))(X1, X1),
    "no_devices": lambda m: m.pmap(lambda x: x, devices=[]),
    "unhashable_static": lambda m: m.pmap(lambda x, y: x + 3, static_broadcasted_argnums=(1,))(
        X1, np.asarray(1)),
    "pshuffle_not_a_permutation": lambda m: m.vmap(
        lambda x: m.lax.pshuffle(x, "i", perm=[1, 1]), axis_name="i")(np.arange(2.0)),
}


@pytest.mark.parametrize("case", sorted(PMAP_ERRORS))
def test_pmap_and_pshuffle_errors_are_jaxs(case):
    ours, theirs = _error(lambda: PMAP_ERRORS[case](fluxion)), _error(lambda: PMAP_ERRORS[case](jax))
    assert ours[0] is theirs[0] is ValueError
    if case == "out_axes":  # JAX 0.10.2 names its internal broadcast_prefix here
        assert ours[1].startswith("pytree structure error: different lengths of tuple at key "
                                  "path\n    pmap out_axes[0]\n")
        return
    # JAX ends its keyword note with a link to its docs; fluxion's points to pmap's docstring.
    assert ours[1].split(" See the description")[0] == theirs[1].split(" See the description")[0]


@pytest.mark.parametrize("name", ["device_put_sharded", "device_put_replicated", "no_such_name"])
def test_removed_top_level_names_raise_jaxs_attribute_error(name):
    with pytest.raises(AttributeError) as theirs:
        getattr(jax, name)
    with pytest.raises(AttributeError) as ours:
        getattr(fluxion, name)
    assert str(ours.value) == str(theirs.value).replace("'jax'", "'fluxion'")


def _pmean_centred(m):
    return m.pmap(lambda x: x - m.lax.pmean(x, "i"), axis_name="i")


def _mapped(m, dtype=np.float32):
    n = m.device_count()
    return np.arange(n * 4, dtype=dtype).reshape(n, 4) + 1


@pytest.mark.parametrize("case", ["array", "shape_dtype", "pytree", "two_args", "static"])
def test_pmap_lower_compile_runs_like_the_pmap(case):
    def run(m):
        x = _mapped(m)
        if case == "array":
            return _pmean_centred(m).lower(x).compile()(x)
        if case == "shape_dtype":
            return _pmean_centred(m).lower(m.ShapeDtypeStruct(x.shape, x.dtype)).compile()(x)
        if case == "pytree":
            return m.pmap(lambda t: t[0] * 2).lower((x, ())).compile()((x, ()))
        if case == "two_args":
            f = m.pmap(lambda a, b: (a, b.sum() * a), axis_name="i")
            return f.lower(x, x[:, :2]).compile()(x, x[:, :2])
        f = m.pmap(lambda a, s: a * s, static_broadcasted_argnums=1)
        return f.lower(x, 3).compile()(x)
    ours, theirs = run(fluxion), run(jax)
    for o, t in zip(fluxion.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert o.shape == t.shape and o.dtype == t.dtype
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-6)


def test_pmap_lowered_and_compiled_stages():
    x = _mapped(fluxion)
    lowered = _pmean_centred(fluxion).lower(x)
    assert lowered.in_tree == fluxion.tree_util.tree_structure(((0,), {}))
    ((aval,), kwargs) = lowered.compile().in_avals
    assert kwargs == {} and aval.shape == x.shape and aval.dtype == x.dtype
    assert isinstance(lowered.as_text(), str) and isinstance(lowered.as_text(dialect="hlo"), str)
    assert lowered.compiler_ir() is not None
    compiled = lowered.compile()
    assert compiled.runtime_executable() is not None
    compiled.cost_analysis()
    compiled.memory_analysis()
    with pytest.raises(TypeError, match="Function compiled with input pytree does not match"):
        compiled([x])
    with pytest.raises(TypeError, match="(?s)Argument types differ .*compiled with float32.*called "
                                        "with int32"):
        compiled(x.astype(np.int32))



@pytest.mark.parametrize("case", ["pmap_in", "pmap_out", "pmap_unmapped_out", "array_bytes",
                                  "array_list", "array_float0", "asarray", "jit_array"])
def test_float0_through_pmap_and_jnp_array(case):
    def run(m):
        f0 = m.dtypes.float0
        n = m.device_count()
        if case == "pmap_in":
            return m.pmap(lambda x: x)(np.array([b""] * n, dtype=f0))
        if case == "pmap_out":
            return m.pmap(lambda x: m.numpy.array(b"", dtype=f0))(np.ones(n))
        if case == "pmap_unmapped_out":
            return m.pmap(lambda x: (x, m.numpy.zeros((2,), f0)), out_axes=(0, None))(
                np.ones(n))[1]
        if case == "array_bytes":
            return m.numpy.array(b"", dtype=f0)
        if case == "array_list":
            return m.numpy.array([b"", b""], dtype=f0)
        if case == "array_float0":
            return m.numpy.array(np.zeros(3, f0), dtype=f0)
        if case == "asarray":
            return m.numpy.asarray(b"", dtype=f0)
        return m.jit(lambda: m.numpy.array(b"", dtype=f0))()
    ours, theirs = run(fluxion), run(jax)
    assert ours.dtype == theirs.dtype == jax.dtypes.float0 and ours.shape == theirs.shape


def test_float0_array_of_numbers_is_numpys_type_error():
    for m in (fluxion, jax):
        with pytest.raises(TypeError, match="a bytes-like object is required"):
            m.numpy.array([0, 0], dtype=m.dtypes.float0)


def _shard_map_closing_over(m, y):
    """A shard_map made inside a transformed function whose body closes over its traced `y`."""
    n = m.device_count()
    mesh = m.make_mesh((n,), ("x",), axis_types=(m.sharding.AxisType.Auto,))
    P = m.sharding.PartitionSpec
    x = np.arange(2.0 * n, dtype=np.float32)
    return m.shard_map(lambda a: m.numpy.sin(a * y) + m.lax.psum(a, "x") * y, mesh=mesh,
                       in_specs=P("x"), out_specs=P("x"))(x)


@pytest.mark.parametrize("transform", ["vmap", "grad", "jit", "jvp"])
def test_shard_map_body_closing_over_an_outer_tracer(transform):
    _check_under_transform(_shard_map_closing_over, transform)


def _shard_map_defaults(m, case):
    """shard_map without `mesh` (the context mesh) or without `in_specs` (inferred)."""
    P, AT = m.sharding.PartitionSpec, m.sharding.AxisType
    n = m.device_count()
    explicit = m.make_mesh((n,), ("x",), axis_types=(AT.Explicit,))
    auto = m.make_mesh((n,), ("x",), axis_types=(AT.Auto,))
    x = np.arange(2.0 * n, dtype=np.float32)
    body = lambda a: a * 2 + m.lax.psum(a.sum(), "x")
    if case == "no_context_mesh":
        return m.shard_map(body, in_specs=P("x"), out_specs=P("x"))(x)
    if case == "context_mesh":
        with m.set_mesh(auto):
            return m.shard_map(body, in_specs=P("x"), out_specs=P("x"))(x)
    if case == "inferred_on_auto_axes":
        with m.set_mesh(auto):
            return m.shard_map(body, out_specs=P("x"))(x)
    with m.set_mesh(explicit):
        xs = m.device_put(x, m.sharding.NamedSharding(explicit, P("x")))
        if case == "inferred_from_context_mesh":
            return m.shard_map(body, out_specs=P("x"))(xs)
        return m.shard_map(body, mesh=explicit, out_specs=P("x"))(xs)


@pytest.mark.parametrize("case", ["context_mesh", "inferred_from_context_mesh",
                                  "inferred_with_mesh"])
def test_shard_map_mesh_and_in_specs_default_as_jaxs(case):
    ours, theirs = _shard_map_defaults(fluxion, case), _shard_map_defaults(jax, case)
    assert ours.shape == theirs.shape
    if case != "context_mesh":  # on one device fluxion's Auto-axes result is laid out P()
        assert ours.sharding.spec == P_(theirs.sharding.spec)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def P_(spec):
    return fluxion.sharding.PartitionSpec(*spec)


@pytest.mark.parametrize("case", ["no_context_mesh", "inferred_on_auto_axes"])
def test_shard_map_default_errors_are_jaxs(case):
    ours = _error(lambda: _shard_map_defaults(fluxion, case))
    theirs = _error(lambda: _shard_map_defaults(jax, case))
    assert ours == theirs


@pytest.mark.parametrize("jit", [False, True])
def test_axis_index_over_two_vmapped_names(jit):
    def fn(m, x):
        return (m.lax.axis_index(("i", "j")), m.lax.axis_index(("j", "i")),
                m.lax.axis_index(["i"]) + x)

    def run(m):
        f = m.vmap(m.vmap(lambda x: fn(m, x), axis_name="j"), axis_name="i")
        return (m.jit(f) if jit else f)(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    for o, t in zip(run(fluxion), run(jax)):
        assert o.shape == t.shape and o.dtype == t.dtype
        np.testing.assert_array_equal(np.asarray(o), np.asarray(t))


@pytest.mark.parametrize("static", ["object", "none", "dict", "int"])
@pytest.mark.parametrize("jit", [False, True])
def test_shard_map_in_specs_none_passes_the_argument_as_is(static, jit):
    marker = object()
    value = {"object": marker, "none": None, "dict": {"a": marker}, "int": 3}[static]

    def run(m):
        P = m.sharding.PartitionSpec
        n = m.device_count()
        mesh = m.make_mesh((n,), ("i",), axis_types=(m.sharding.AxisType.Auto,))

        def body(o, x):
            assert o is value or (isinstance(o, dict) and o["a"] is marker)
            return m.numpy.sin(x) * (o if isinstance(o, int) else 1)
        g = lambda x: m.shard_map(body, mesh=mesh, in_specs=(None, P("i")),
                                  out_specs=P("i"))(value, x)
        return (m.jit(g) if jit else g)(np.arange(2.0 * n, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(run(fluxion)), np.asarray(run(jax)), rtol=1e-6)


def _mesh_1d(m):
    n = m.device_count()
    return m.make_mesh((n,), ("x",), axis_types=(m.sharding.AxisType.Auto,))


@pytest.mark.parametrize("jit", [False, True])
def test_shard_map_specs_are_pytree_prefixes(jit):
    def run(m):
        P = m.sharding.PartitionSpec
        n = m.device_count()
        f = m.shard_map(lambda d, t: {"b": d["a"] * 2, "c": t[1]}, mesh=_mesh_1d(m),
                        in_specs=({"a": P("x")}, P()), out_specs={"b": P("x"), "c": P()})
        args = ({"a": np.arange(2.0 * n, dtype=np.float32)}, (np.float32(1), np.ones(3)))
        return (m.jit(f) if jit else f)(*args)
    ours, theirs = run(fluxion), run(jax)
    assert set(ours) == set(theirs)
    for k in theirs:
        np.testing.assert_array_equal(np.asarray(ours[k]), np.asarray(theirs[k]))


def _no_params():
    return ()


def _varargs(a, *rest):
    return ()


SHARD_MAP_SPEC_ERRORS = {
    "in_specs_not_a_prefix": lambda m, P: m.shard_map(
        lambda x: x, mesh=_mesh_1d(m), in_specs=([P("x")],), out_specs=P("x"))(
        [np.ones(8), np.ones(8)]),
    "in_spec_too_long": lambda m, P: m.shard_map(
        lambda d: (), mesh=_mesh_1d(m), in_specs=({"hi": P("x")},), out_specs=())(
        {"hi": [np.float32(3)]}),
    "in_spec_too_long_scalar": lambda m, P: m.shard_map(
        lambda d: (), mesh=_mesh_1d(m), in_specs=P(None), out_specs=())(np.float32(3)),
    "in_spec_too_long_unbindable": lambda m, P: m.shard_map(
        _no_params, mesh=_mesh_1d(m), in_specs=P(None), out_specs=())(np.float32(3)),
    "in_spec_too_long_varargs": lambda m, P: m.shard_map(
        _varargs, mesh=_mesh_1d(m), in_specs=(P(), P("x")), out_specs=())(
        np.float32(3), np.float32(4)),
    "out_spec_too_long": lambda m, P: m.shard_map(
        lambda: {"hi": [np.float32(3)]}, mesh=_mesh_1d(m), in_specs=(),
        out_specs={"hi": P("x")})(),
    "out_spec_too_long_under_jit": lambda m, P: m.jit(m.shard_map(
        lambda: {"hi": [np.float32(3)]}, mesh=_mesh_1d(m), in_specs=(),
        out_specs={"hi": P("x")}))(),
}


@pytest.mark.parametrize("case", sorted(SHARD_MAP_SPEC_ERRORS))
def test_shard_map_spec_errors_are_jaxs(case):
    ours = _error(lambda: SHARD_MAP_SPEC_ERRORS[case](fluxion, fluxion.sharding.PartitionSpec))
    theirs = _error(lambda: SHARD_MAP_SPEC_ERRORS[case](jax, jax.sharding.PartitionSpec))
    assert ours[0] is theirs[0] is ValueError
    # JAX prints the varying mesh axes of a traced output's type ({V:x}); fluxion's have none.
    assert ours[1] == theirs[1].replace("{V:x}", "")


@pytest.mark.parametrize("case, jit", [("searchsorted", False), ("searchsorted", True),
                                       ("searchsorted_scalar", False), ("histogram", False),
                                       ("random_choice", False)])
def test_library_loops_on_varying_values_pass_check_vma(case, jit):
    def run(m):
        P = m.sharding.PartitionSpec
        jnp = m.numpy
        n = m.device_count()
        edges = jnp.linspace(0.0, 10.0, 6)
        q = jnp.arange(4.0 * n)
        bodies = {
            "searchsorted": lambda e, x: jnp.searchsorted(e, x),
            "searchsorted_scalar": lambda e, x: jnp.searchsorted(e, x[0])[None],
            "histogram": lambda e, x: jnp.histogram(x, bins=e)[0][None],
            "random_choice": lambda e, x: m.random.choice(
                m.random.key(0), 6, shape=(4,), p=(x[:1] + e) / (x[:1] + e).sum()),
        }
        f = m.shard_map(bodies[case], mesh=_mesh_1d(m), in_specs=(P(), P("x")),
                        out_specs=P("x"))
        return (m.jit(f) if jit else f)(edges, q)
    np.testing.assert_array_equal(np.asarray(run(fluxion)), np.asarray(run(jax)))
