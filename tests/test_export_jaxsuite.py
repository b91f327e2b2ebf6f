"""fluxion.export and ahead-of-time stages against JAX 0.10.2 (what JAX's export_test and
aot_test found)."""
import jax
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import export

X4 = np.linspace(-1, 1, 4, dtype=np.float32)


def test_export_takes_library_functions_as_jax_does():
    # JAX's jnp.sin is a jitted function, so export(jnp.sin) works there (its own docstring
    # example); fluxion refused it as "not the result of jit".
    exp = export.export(jnp.sin)(X4)
    want = jax.export.export(jax.numpy.sin)(X4)
    assert exp.fun_name == want.fun_name == "sin"
    assert [a.shape for a in exp.in_avals] == [a.shape for a in want.in_avals]
    got = export.deserialize(exp.serialize()).call(X4)
    np.testing.assert_allclose(got, np.sin(X4), rtol=1e-6)
    np.testing.assert_allclose(fluxion.jit(exp.call)(X4), np.sin(X4), rtol=1e-6)


def test_export_still_refuses_a_plain_user_function():
    with pytest.raises(ValueError, match="must be the result of `jit`"):
        export.export(lambda x: jnp.sin(x))
    with pytest.raises(ValueError, match="must be the result of `jit`"):
        jax.export.export(lambda x: jax.numpy.sin(x))


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e8m0fnu",
                                   "float4_e2m1fn"])
def test_serialized_export_keeps_ml_dtypes(dtype):
    # The reader took NumPy's kind "V" of ml_dtypes' types for "not an array dtype".
    x = np.arange(6).astype(dtype)
    spec = fluxion.ShapeDtypeStruct(export.symbolic_shape("b"), x.dtype)
    exp = export.deserialize(export.export(fluxion.jit(lambda v: v + v))(spec).serialize())
    assert exp.in_avals[0].dtype == x.dtype
    want = jax.jit(lambda v: v + v)(x)
    np.testing.assert_array_equal(np.asarray(exp.call(x)).astype(np.float32),
                                  np.asarray(want).astype(np.float32))
    np.testing.assert_array_equal(np.asarray(fluxion.jit(exp.call)(x)).astype(np.float32),
                                  np.asarray(want).astype(np.float32))


def _compiled_pair(lib):
    f = lib.jit(lambda x, y: (x + y, {"a": x}))
    return f.lower(np.ones(3, np.float32), np.ones((2, 3), np.float32)).compile()


def _describe(tree):
    return [(type(s.sharding).__name__, s.layout.major_to_minor) if hasattr(s, "layout")
            else type(s).__name__ for s in tree]


def test_compiled_gives_shardings_and_formats_as_jax():
    # Compiled had no input_shardings/output_shardings/input_formats/output_formats.
    got, want = _compiled_pair(fluxion), _compiled_pair(jax)
    for name in ["input_shardings", "output_shardings", "input_formats", "output_formats"]:
        g, w = getattr(got, name), getattr(want, name)
        assert str(fluxion.tree_util.tree_structure(g))[10:] == \
            str(jax.tree_util.tree_structure(w))[9:]  # PyTreeSpec(...) against PyTreeDef(...)
        assert _describe(fluxion.tree_util.tree_leaves(g)) == \
            _describe(jax.tree_util.tree_leaves(w))
    dev = got.input_shardings[0][0].device_set
    assert {d.id for d in dev} == {0}


ODICT = __import__("collections").OrderedDict([("foo", np.float32(1)), ("baz", np.float32(2))])


def test_ordereddict_arguments_serialize_as_in_jax():
    # JAX registers collections.OrderedDict for serialization; fluxion refused it.
    exp = export.export(fluxion.jit(lambda d: (d, d["foo"] * 3)))(ODICT)
    back = export.deserialize(exp.serialize())
    assert back.in_tree == exp.in_tree and back.out_tree == exp.out_tree
    res = back.call(ODICT)
    assert type(res[0]) is type(ODICT) and list(res[0]) == ["foo", "baz"]
    np.testing.assert_allclose(res[1], 3.0)
    # ... and crosses to JAX's format under JAX's registered name
    jexp = jax.export.deserialize(exp.serialize(format="jax"))
    jres = jexp.call(ODICT)
    assert type(jres[0]) is type(ODICT) and list(jres[0]) == ["foo", "baz"]
    want = jax.export.export(jax.jit(lambda d: (d, d["foo"] * 3)))(ODICT).serialize()
    assert list(export.deserialize(want).call(ODICT)[0]) == ["foo", "baz"]


def test_dict_with_tuple_keys_is_a_type_error_as_in_jax():
    args = {(0, 1): np.float32(42.0), (1, 2): np.float32(43.0)}
    match = "Serialization is supported only for dictionaries with string keys"
    exp = export.export(fluxion.jit(lambda d: d[(0, 1)] + d[(1, 2)]))(args)
    with pytest.raises(TypeError, match=match):
        exp.serialize()
    with pytest.raises(TypeError, match=match):
        exp.serialize(format="jax")
    int_keys = export.export(fluxion.jit(lambda d: d[0]))({0: np.float32(1)})
    with pytest.raises(TypeError, match=match):  # JAX's format has str keys only
        int_keys.serialize(format="jax")
    jexp = jax.export.export(jax.jit(lambda d: d[(0, 1)] + d[(1, 2)]))(args)
    with pytest.raises(TypeError, match=match):
        jexp.serialize()


def _reshape_rows(lib):
    return lambda x: lib.numpy.reshape(x, (-1, x.shape[1]))


@pytest.mark.parametrize("inner_spec, outer_spec, shape", [
    ("3, a, a + b", "3, 4, c", (3, 4, 12)),
    ("3, a, b", "3, 4, c", (3, 4, 12)),
    ("3, a, b", "3, c + 4, 12", (3, 6, 12)),
])
def test_polymorphic_export_called_with_more_static_symbolic_shapes(inner_spec, outer_spec,
                                                                    shape):
    # The call passed a tensor<3x4x?xf32> to a function of tensor<3x?x?xf32>: MLIR refused
    # the module ("operand type mismatch").
    inner = export.export(fluxion.jit(_reshape_rows(fluxion)))(
        fluxion.ShapeDtypeStruct(export.symbolic_shape(inner_spec), np.float32))
    outer = export.export(fluxion.jit(lambda x: inner.call(x) + _reshape_rows(fluxion)(x)))(
        fluxion.ShapeDtypeStruct(export.symbolic_shape(outer_spec), np.float32))
    jinner = jax.export.export(jax.jit(_reshape_rows(jax)))(
        jax.ShapeDtypeStruct(jax.export.symbolic_shape(inner_spec), np.float32))
    if "a + b" not in inner_spec:  # JAX cannot prove b = c - 4 >= 1 there (see differences)
        jouter = jax.export.export(jax.jit(lambda x: jinner.call(x) + _reshape_rows(jax)(x)))(
            jax.ShapeDtypeStruct(jax.export.symbolic_shape(outer_spec), np.float32))
        assert [str(d) for d in outer.out_avals[0].shape] == \
            [str(d) for d in jouter.out_avals[0].shape]
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    want = 2 * x.reshape(-1, x.shape[1])
    np.testing.assert_array_equal(export.deserialize(outer.serialize()).call(x), want)
    np.testing.assert_array_equal(fluxion.jit(outer.call)(x), want)


@pytest.mark.parametrize("spec", ["4", "3, a, a + b"])
@pytest.mark.parametrize("arg", [((6,), np.float32), ((4, 1), np.float32), ((4,), np.int32),
                                 ((4, 4, 6), np.float32), ((3, 4), np.float32),
                                 ((3, 4, 6), np.int32)])
def test_call_with_wrong_argument_types_gives_jax_messages(spec, arg):
    # fluxion's own wording ("was exported for an argument 0 of shape ...") replaced JAX's.
    x = np.ones(*arg)

    def message(exp):
        with pytest.raises(ValueError) as info:
            exp.call(x)
        return str(info.value)
    got = export.export(fluxion.jit(lambda v: v))(
        fluxion.ShapeDtypeStruct(export.symbolic_shape(spec), np.float32))
    want = jax.export.export(jax.jit(lambda v: v))(
        jax.ShapeDtypeStruct(jax.export.symbolic_shape(spec), np.float32))
    assert message(got) == message(want)


class _Described:
    """A pytree node whose constructor checks its aux data against its leaf's shape."""

    def __init__(self, array, names):
        assert len(names) == array.shape[0], (names, array)
        self.array, self.names = array, names


def _register_described(lib):
    lib.tree_util.register_pytree_node(
        _Described, lambda d: ((d.array,), d.names), lambda names, kids: _Described(kids[0],
                                                                                     names))
    lib.export.register_pytree_node_serialization(
        _Described, serialized_name="tests.Described",
        serialize_auxdata=lambda names: "/".join(names).encode(),
        deserialize_auxdata=lambda data: tuple(bytes(data).decode().split("/")))


_register_described(fluxion)
_register_described(jax)


def _described(n):
    return _Described(np.arange(n, dtype=np.float32), tuple(str(i) for i in range(n)))


@pytest.mark.parametrize("fmt", ["fluxion", "jax"])
def test_custom_nodes_whose_constructor_reads_leaf_shapes(fmt):
    # Serialization rebuilt each node around placeholder leaves without shapes, so such a
    # constructor failed; JAX walks the structure and rebuilds it around the avals.
    args = ({"a": _described(2), "b": [_described(3), _described(4)]},)
    exp = export.export(fluxion.jit(lambda x: (x, x["a"].array.sum())))(*args)
    back = export.deserialize(exp.serialize(format=fmt))
    assert back.in_tree == exp.in_tree and back.out_tree == exp.out_tree
    res = back.call(*args)
    assert res[0]["b"][1].names == ("0", "1", "2", "3")
    np.testing.assert_allclose(res[1], 1.0)
    if fmt == "jax":
        jres = jax.export.deserialize(exp.serialize(format="jax")).call(*args)
        assert jres[0]["b"][0].names == ("0", "1", "2")


def test_typed_prng_keys_serialize():
    # A key array (a pytree node in fluxion) was "an unregistered type" for serialization.
    def f(lib):
        return lib.jit(lambda k: (k, lib.random.split(k, 2)))
    key = fluxion.random.key(42)
    exp = export.deserialize(export.export(f(fluxion))(key).serialize())
    want = jax.random.key_data(f(jax)(jax.random.key(42))[1])
    for res in (exp.call(key), fluxion.jit(exp.call)(key)):
        np.testing.assert_array_equal(fluxion.random.key_data(res[0]), [0, 42])
        np.testing.assert_array_equal(fluxion.random.key_data(res[1]), want)
