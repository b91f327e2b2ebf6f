"""Shape polymorphism against JAX 0.10.2 (what JAX's export_test and shape_poly_test found):
each symbolic result is compared with jax.export's, values with NumPy's."""
import jax
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import export

DIVISIONS = [
    lambda a, b, c: (a * a - b * b) // (a + b),
    lambda a, b, c: (a * a + 2 * a * b + b * b) // (a + b),
    lambda a, b, c: (6 * a * c + 3 * c) // (2 * a + 1),
    lambda a, b, c: ((a + b) * (a + c) * (b + c)) // ((b + c) * (a + b)),
    lambda a, b, c: (2 * a + 2) // (a + 1),
    lambda a, b, c: (a * a + 1) // (a + 1),  # not exact: stays a floordiv
    lambda a, b, c: (a * b + a) % (b + 1),
]


@pytest.mark.parametrize("i", range(len(DIVISIONS)))
def test_division_by_a_polynomial_simplifies_as_in_jax(i):
    # Only single-term divisors were divided; (3*c^2 + 36*c + 60) // (c + 2) stayed opaque.
    got = DIVISIONS[i](*export.symbolic_shape("a, b, c"))
    want = DIVISIONS[i](*jax.export.symbolic_shape("a, b, c"))
    assert str(got) == str(want)


@pytest.mark.parametrize("spec", ["3, c + 2, c + 10", "3, c + 4, 12"])
def test_reshape_with_minus_one_by_a_symbolic_polynomial(spec):
    # reshape(x, (-1, x.shape[1])) of a (3, c+2, c+10) array raised "Cannot divide evenly".
    def f(lib):
        return lambda x: lib.numpy.reshape(x, (-1, x.shape[1]))
    exp = export.export(fluxion.jit(f(fluxion)))(
        fluxion.ShapeDtypeStruct(export.symbolic_shape(spec), np.float32))
    want = jax.export.export(jax.jit(f(jax)))(
        jax.ShapeDtypeStruct(jax.export.symbolic_shape(spec), np.float32))
    assert [str(d) for d in exp.out_avals[0].shape] == [str(d) for d in want.out_avals[0].shape]
    x = np.arange(3 * 6 * 14 if "10" in spec else 3 * 8 * 12, dtype=np.float32)
    x = x.reshape((3, 6, 14) if "10" in spec else (3, 8, 12))
    np.testing.assert_array_equal(exp.call(x), x.reshape(-1, x.shape[1]))
    np.testing.assert_array_equal(fluxion.jit(exp.call)(x), x.reshape(-1, x.shape[1]))


def _export_on_both(f, spec, dtype=np.float32, constraints=()):
    """(fluxion's Exported, JAX's) of `f(library)` for one argument of symbolic shape `spec`."""
    return tuple(lib_export.export(f(lib))(lib.ShapeDtypeStruct(
        lib_export.symbolic_shape(spec, constraints=list(constraints)), dtype))
        for lib, lib_export in ((fluxion, export), (jax, jax.export)))


def test_constraint_on_a_variable_no_argument_has():
    # It surfaced as an internal KeyError "Dimension variable 'm1' has no value".
    def message(lib):
        m, = lib.export.symbolic_shape("m", constraints=["m >= m1"])
        with pytest.raises(Exception) as info:
            lib.export.export(lib.jit(lambda x: x))(lib.ShapeDtypeStruct((m,), np.float32))
        return type(info.value).__name__, str(info.value)
    got, want = message(fluxion), message(jax)
    assert got == want and got[0] == "UnexpectedDimVar"


@pytest.mark.parametrize("as_kwarg", [False, True])
def test_export_of_arguments_from_two_symbolic_scopes(as_kwarg):
    # The mix reached concatenate, which raised a TypeError about the shapes.
    def message(lib):
        x = lib.ShapeDtypeStruct(lib.export.symbolic_shape("(w, h1)"), np.float32)
        y = lib.ShapeDtypeStruct(lib.export.symbolic_shape("(w, h2)"), np.float32)
        f = lib.jit(lambda x, y: lib.numpy.concatenate([x, y], axis=1))
        with pytest.raises(ValueError) as info:
            lib.export.export(f)(x, y=y) if as_kwarg else lib.export.export(f)(x, y)
        return str(info.value)
    got, want = message(fluxion).splitlines(), message(jax).splitlines()
    assert got[0] == want[0]
    for g, w in zip(got[1:3], want[1:3]):  # JAX also names where each scope was made
        assert g.split(" scope ")[0] == w.split(" scope ")[0]
    assert got[3] == want[3]


SLICES = [lambda b: (None, None, b), lambda b: (2, None, b), lambda b: (None, None, -b),
          lambda b: (-b, 2 * b + 2, b), lambda b: (2 * b + 2, -4, -b), lambda b: (None, 2, -b)]


@pytest.mark.parametrize("i", range(len(SLICES)))
def test_slice_with_a_symbolic_step(i):
    # x[::b] raised "Symbolic dimension 'b' used in a context that requires a constant".
    def f(lib):
        return lib.jit(lambda x: x[slice(*SLICES[i](x.shape[1]))])
    exp, want = _export_on_both(f, "c, b")
    assert exp.out_avals[0].shape[1] == exp.in_avals[0].shape[1]
    assert len(exp.out_avals[0].shape) == len(want.out_avals[0].shape)
    for shape in [(16, 8), (5, 3), (2, 7)]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        expected = x[slice(*SLICES[i](shape[1]))]
        np.testing.assert_array_equal(exp.call(x), expected)
        np.testing.assert_array_equal(fluxion.jit(exp.call)(x), expected)
        np.testing.assert_array_equal(want.call(x), expected)


VALUE_OPS = {
    "return_dim": lambda x: 2 * x.shape[0],
    "times_np_int32": lambda x: 2 * x.shape[0] * np.int32(2),
    "truediv_int": lambda x: 2 * x.shape[0] / 2,
    "rtruediv_int": lambda x: 2 / x.shape[0],
    "mod_float": lambda x: (2 * x.shape[0]) % 2.0,
    "rmod_array": lambda x: np.arange(1, 5, dtype=np.int32) % (2 * x.shape[0]),
    "floordiv_array": lambda x: (2 * x.shape[0]) // np.arange(1, 5, dtype=np.int32),
    "rfloordiv_array": lambda x: np.arange(1, 5, dtype=np.int32) // (2 * x.shape[0]),
    "rpow": lambda x: 2 ** x.shape[0],
    "divmod_float": lambda x: divmod(2 * x.shape[0], 4.0),
}


@pytest.mark.parametrize("name", sorted(VALUE_OPS))
def test_symbolic_dimension_used_as_a_value(name):
    # These raised (TypeError for `/`, `%`, `//`, `**` with arrays or floats) or gave a DimExpr
    # that jit refused to return; JAX computes them with the dimension's value.
    def f(x):
        return VALUE_OPS[name](x), x
    exp = export.export(fluxion.jit(f))(
        fluxion.ShapeDtypeStruct(export.symbolic_shape("b"), np.int32))
    want = jax.export.export(jax.jit(f))(
        jax.ShapeDtypeStruct(jax.export.symbolic_shape("b"), np.int32))
    got_avals = [(a.dtype, a.weak_type, len(a.shape)) for a in exp.out_avals]
    assert got_avals == [(a.dtype, a.weak_type, len(a.shape)) for a in want.out_avals]
    x = np.arange(3, dtype=np.int32)
    for got in (exp.call(x), fluxion.jit(exp.call)(x)):
        for g, w in zip(fluxion.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(
                want.call(x))):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


ARANGES = {
    "b_5b+2_2": lambda np_, b: np_.arange(b, 5 * b + 2, 2),
    "0_1-b_2": lambda np_, b: np_.arange(0, 1 - b, 2),
    "5b+1_0_-2": lambda np_, b: np_.arange(5 * b + 1, 0, -2),
    "0_10_b": lambda np_, b: np_.arange(0, 10, b),
    "b_1_-b": lambda np_, b: np_.arange(b, 1, -b),
    "0_b_1_f32": lambda np_, b: np_.arange(0, b, 1, np.float32),
}


@pytest.mark.parametrize("name", sorted(ARANGES))
def test_arange_with_symbolic_bounds(name):
    # Only arange(b) was symbolic; arange(b, 5*b + 2, 2) raised "Cannot determine dtype".
    def f(lib):
        return lib.jit(lambda x: ARANGES[name](lib.numpy, x.shape[0]))
    exp, want = _export_on_both(f, "b")
    if "max" not in str(want.out_avals[0]):  # max's arguments print in another order here
        assert str(exp.out_avals[0]) == str(want.out_avals[0])
    for n in (1, 3, 6):
        x = np.zeros(n, np.float32)
        np.testing.assert_array_equal(exp.call(x), ARANGES[name](np, n))
        np.testing.assert_array_equal(fluxion.jit(exp.call)(x), ARANGES[name](np, n))


@pytest.mark.parametrize("args, error, match", [
    ((0.0, "b", None), ValueError, "must be either dimension expressions or integers"),
    ((0, "b", 0), ValueError, "has step == 0"),
    ((0, "b", "b - 2"), export.InconclusiveDimensionOperation, "must be resolved statically"),
])
def test_arange_with_symbolic_bounds_errors(args, error, match):
    def f(x):
        b = x.shape[0]
        vals = [b if a == "b" else b - 2 if a == "b - 2" else a for a in args]
        return fluxion.numpy.arange(*vals)
    with pytest.raises(error, match=match):
        export.export(fluxion.jit(f))(
            fluxion.ShapeDtypeStruct(export.symbolic_shape("b"), np.float32))


def test_floordiv_splits_off_the_divisible_terms_as_jax():
    # (4*b + 3) // 2 stayed floordiv(4*b + 3, 2); JAX gives 2*b + 1.
    for lib in (export, jax.export):
        b, = lib.symbolic_shape("b")
        assert [str(v) for v in ((4 * b + 3) // 2, (4 * b - 3) // 2, (4 * b + 3) % 2,
                                 (6 * b + 7) % 3)] == ["2*b + 1", "2*b - 2", "1", "1"]


@pytest.mark.parametrize("spec, constraint, good, bad", [
    ("a, b", "max(a, b) == b", (2, 3), (3, 2)),
    ("a, b", "floordiv(a, 2) == b", (6, 3), (6, 2)),
    ("c", "mod(c, 4) == 0", (8,), (5,)),
])
def test_equality_constraint_on_an_operation_is_checked_at_call(spec, constraint, good, bad):
    # An equality whose left side the scope rewrites (max(a, b) -> b) was never checked when
    # called (and "max(a, b) == b" recursed without end when lowered).
    def exported(lib):
        s = lib.ShapeDtypeStruct(lib.export.symbolic_shape(spec, constraints=[constraint]),
                                 np.int32)
        return lib.export.export(lib.jit(lambda x: x * 2))(s)
    exp, want = exported(fluxion), exported(jax)
    exp = export.deserialize(exp.serialize())
    np.testing.assert_array_equal(exp.call(np.ones(good, np.int32)), 2)
    for call in (exp.call, fluxion.jit(exp.call)):
        with pytest.raises(ValueError, match="symbolic shape constraint"):
            call(np.ones(bad, np.int32))
    with pytest.raises(ValueError, match="symbolic shape constraint"):
        want.call(np.ones(bad, np.int32))


def test_symbolic_args_specs_takes_a_list_for_tuple_args_as_jax():
    # JAX accepts a list of specs for a tuple of arguments (its backward compatibility);
    # fluxion refused it, and worded a mismatch otherwise than JAX's "pytree structure error".
    x = np.ones(3, np.float32)
    specs = export.symbolic_args_specs((x, x), ["b", "b"])
    assert [str(s.shape) for s in specs] == ["(b,)", "(b,)"]
    for lib in (export, jax.export):
        with pytest.raises(ValueError) as info:
            lib.symbolic_args_specs(([x, x], [x]), [["b", "b"]])
        assert str(info.value).startswith(
            "pytree structure error: different lengths of tuple at key path\n"
            "    export.symbolic_args_specs shapes_specs\n")


STATIC_INDEX_OPS = {
    "slice_in_dim_stride_2": lambda lib, x: lib.lax.slice_in_dim(x, 0, x.shape[0], 2, axis=0),
    "slice_in_dim_start_neg": lambda lib, x: lib.lax.slice_in_dim(x, -1, x.shape[0], 1),
    "index_in_dim_last": lambda lib, x: lib.lax.index_in_dim(x, x.shape[0] - 1, axis=0,
                                                             keepdims=False),
}


@pytest.mark.parametrize("name", sorted(STATIC_INDEX_OPS))
def test_lax_static_index_helpers_take_symbolic_dimensions(name):
    # operator.index refused x.shape[0]; and a strided symbolic slice's lowering gave its
    # size as - floordiv(- b, 2), which its abstract evaluation (floordiv(b - 1, 2) + 1) is not.
    def f(lib):
        return lib.jit(lambda x: STATIC_INDEX_OPS[name](lib, x))
    exp, want = _export_on_both(f, "b, 4")
    assert str(exp.out_avals[0]) == str(want.out_avals[0])
    for n in (1, 4, 5):
        x = np.arange(4 * n, dtype=np.float32).reshape(n, 4)
        np.testing.assert_array_equal(exp.call(x), want.call(x))
        np.testing.assert_array_equal(fluxion.jit(exp.call)(x), want.call(x))


TRIANGLES = {
    "tril": lambda np_, y: np_.tril_indices(y.shape[0]),
    "triu": lambda np_, y: np_.triu_indices(y.shape[0]),
    "tril_static": lambda np_, y: np_.tril_indices(3, 1, 4),  # (the static path still)
}


@pytest.mark.parametrize("name", sorted(TRIANGLES))
def test_triangle_indices_of_symbolic_sizes(name):
    # tril_indices(n) needed a constant n (and nonzero a constant size).
    def f(lib):
        return lib.jit(lambda y: TRIANGLES[name](lib.numpy, y))
    y = np.ones((3, 4), np.float32)
    exp = export.export(f(fluxion))(*export.symbolic_args_specs((y,), "n, m"))
    want = jax.export.export(f(jax))(*jax.export.symbolic_args_specs((y,), "n, m"))
    assert [str(a) for a in exp.out_avals] == [str(a) for a in want.out_avals]
    for shape in [(3, 4), (5, 2), (1, 1)]:
        expected = TRIANGLES[name](np, np.ones(shape))
        for got in (exp.call(np.ones(shape, np.float32)),
                    fluxion.jit(exp.call)(np.ones(shape, np.float32))):
            for g, w in zip(got, expected):
                np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("bucket_size", [None, 2, "poly"])
@pytest.mark.parametrize("op", ["segment_sum", "segment_max", "segment_prod"])
def test_segment_reductions_with_symbolic_num_segments(op, bucket_size):
    # num_segments=x.shape[1] needed a constant.
    x = np.arange(80, dtype=np.float32).reshape(8, 5, 2) / 10
    ids = np.array([0, 0, 0, 1, 1, 3, 3, 3], np.int32)

    def f(lib):
        return lib.jit(lambda x, i: getattr(lib.ops, op)(
            x, i, num_segments=x.shape[1],
            bucket_size=x.shape[2] if bucket_size == "poly" else bucket_size))
    exp = export.export(f(fluxion))(*export.symbolic_args_specs((x, ids), ["b, s, k", "b"]))
    want = f(jax)(x, ids)
    np.testing.assert_allclose(exp.call(x, ids), want, rtol=1e-6)
    np.testing.assert_allclose(fluxion.jit(exp.call)(x, ids), want, rtol=1e-6)


def test_array_of_a_symbolic_shape():
    # jnp.array(x.shape) raised "Cannot determine dtype of b".
    def f(lib):
        jnp_ = lib.numpy
        return lib.jit(lambda x: (jnp_.array(x.shape), jnp_.array([x.shape[0], 2.5])))
    exp, want = _export_on_both(f, "b, 4", np.int32)
    assert [str(a) for a in exp.out_avals] == [str(a) for a in want.out_avals]
    x = np.zeros((3, 4), np.int32)
    for got in (exp.call(x), fluxion.jit(exp.call)(x)):
        np.testing.assert_array_equal(got[0], [3, 4])
        np.testing.assert_array_equal(got[1], [3.0, 2.5])


def test_slice_with_a_negative_symbolic_step_of_one_element():
    # x[0::-b] has one element: its static slice took abs() of the symbolic step.
    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    exp = export.export(fluxion.jit(lambda x: x[slice(0, None, -x.shape[1])]))(
        fluxion.ShapeDtypeStruct(export.symbolic_shape("c, b"), np.float32))
    np.testing.assert_array_equal(exp.call(x), x[0::-8])
    np.testing.assert_array_equal(fluxion.jit(exp.call)(x), x[0::-8])


@pytest.mark.parametrize("axis", [0, 1, None])
def test_repeat_a_symbolic_number_of_times(axis):
    # repeats=x.shape[0] was refused ("repeats must be integers, got dtype object").
    def f(lib):
        return lib.jit(lambda x: lib.numpy.repeat(x, repeats=x.shape[0], axis=axis))
    exp, want = _export_on_both(f, "b, 2")
    assert str(exp.out_avals[0]) == str(want.out_avals[0])
    for n in (1, 3):
        x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
        np.testing.assert_array_equal(exp.call(x), np.repeat(x, n, axis=axis))
        np.testing.assert_array_equal(fluxion.jit(exp.call)(x), np.repeat(x, n, axis=axis))


def test_repeat_a_symbolic_number_of_times_with_total_length_is_refused():
    with pytest.raises(ValueError, match="non-constant `repeats` is supported only"):
        export.export(fluxion.jit(lambda x: fluxion.numpy.repeat(
            x, repeats=x.shape[0], total_repeat_length=8)))(
            fluxion.ShapeDtypeStruct(export.symbolic_shape("b, 2"), np.float32))


SPLITS = {
    "tuple_ct": (lambda np_, a: np_.split(a, (2,)), "b + 4"),
    "tuple_poly": (lambda np_, a: np_.split(a, (a.shape[0] - 2,), axis=0), "b + 4"),
    "sections_ct": (lambda np_, a: np_.split(a, 2, axis=0), "2*b + 4"),
}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_split_of_a_symbolic_axis(name):
    # jnp.split needed a constant axis length and constant indices.
    fn, spec = SPLITS[name]

    def f(lib):
        return lib.jit(lambda a: fn(lib.numpy, a))
    exp, want = _export_on_both(f, spec)
    assert [str(a) for a in exp.out_avals] == [str(a) for a in want.out_avals]
    a = np.arange(16, dtype=np.float32)
    for got in (exp.call(a), fluxion.jit(exp.call)(a)):
        for g, w in zip(got, fn(np, a)):
            np.testing.assert_array_equal(g, w)


def test_split_into_a_symbolic_number_of_sections_is_refused_as_in_jax():
    with pytest.raises(ValueError, match="split with a symbolic number of sections"):
        export.export(fluxion.jit(lambda a: fluxion.numpy.split(a, a.shape[0] // 2)))(
            fluxion.ShapeDtypeStruct(export.symbolic_shape("b + 4"), np.float32))


def test_pad_by_symbolic_widths():
    # jnp.pad refused symbolic widths ("must be of integral type") and lax.pad's lowering
    # needed constants; both are a stablehlo.dynamic_pad now.
    def f(lib):
        return lib.jit(lambda x: (
            lib.numpy.pad(x, [[x.shape[0], 0], [x.shape[1], 1]], constant_values=7.0),
            lib.lax.pad(x, np.float32(0), ((x.shape[0], 1, 0), (0, 0, 1)))))
    exp, want = _export_on_both(f, "b, 5")
    assert [str(a) for a in exp.out_avals] == [str(a) for a in want.out_avals]
    for n in (1, 3):
        x = np.arange(5 * n, dtype=np.float32).reshape(n, 5)
        for got in (exp.call(x), fluxion.jit(exp.call)(x)):
            for g, w in zip(got, want.call(x)):
                np.testing.assert_array_equal(g, w)


def test_mod_of_an_expression_holding_another_floordiv():
    # 12*floordiv(b, 4) % 3 stayed a mod() (any floordiv in the quotient counted as opaque),
    # so reshaping a (1, 3, 4, b // 4) array to (1, 3, -1) failed.
    for lib in (export, jax.export):
        b, = lib.symbolic_shape("b")
        assert [str(v) for v in ((12 * (b // 4)) % 3, (b + 1) % 2, (2 * b + 1) % b)] == \
            ["0", "mod(b + 1, 2)", "mod(2*b + 1, b)"]

    def f(lib):
        return lib.jit(lambda x: lib.numpy.ones((1, 3, 4, x.shape[0] // 4)).reshape((1, 3, -1)))
    spec = fluxion.ShapeDtypeStruct(export.symbolic_shape("b", constraints=["mod(b, 4) == 0"]),
                                    np.float32)
    exp = export.export(f(fluxion))(spec)
    np.testing.assert_array_equal(exp.call(np.zeros(8, np.float32)), np.ones((1, 3, 8)))


def test_polymorphic_export_without_results_is_called():
    # The static wrapper named the results of a call that has none: MLIR could not parse it.
    def exported(lib):
        spec = lib.export.symbolic_args_specs((np.zeros(16, np.int32),), ["a"],
                                              constraints=["a >= 8"])
        return lib.export.export(lib.jit(lambda x: None))(*spec)
    exp, want = exported(fluxion), exported(jax)
    assert exp.call(np.zeros(16, np.int32)) is None is want.call(np.zeros(16, np.int32))
    assert fluxion.jit(exp.call)(np.zeros(16, np.int32)) is None
    with pytest.raises(ValueError, match="symbolic shape constraint a >= 8"):
        exp.call(np.zeros(4, np.int32))


def test_symbolic_args_specs_refuses_a_spec_that_is_no_string():
    # A float spec reached the parser: AttributeError "'float' object has no attribute 'strip'".
    x = np.ones(2, np.float32)
    for lib in (export, jax.export):
        with pytest.raises(ValueError, match="polymorphic shape spec should be None or a string"):
            lib.symbolic_args_specs((x,), [5.0])


SIZED_BY_A_DIMENSION = {
    "top_k": lambda lib, x: lib.lax.top_k(x, x.shape[-1] - 1),
    "linspace_num": lambda lib, x: lib.numpy.linspace(0, 100, x.shape[-1]),
    "bincount_length": lambda lib, x: lib.numpy.bincount(x[0].astype(np.int32) % 4,
                                                         length=x.shape[-1]),
    "zeros_of_a_dimension": lambda lib, x: lib.numpy.zeros(x.shape[-1]),
}


@pytest.mark.parametrize("name", sorted(SIZED_BY_A_DIMENSION))
def test_sizes_given_by_a_symbolic_dimension(name):
    # top_k's k, linspace's num, bincount's length and zeros' shape needed constants (top_k
    # lowers to JAX's stablehlo.dynamic_top_k, which shape refinement makes a chlo.top_k).
    def f(lib):
        return lib.jit(lambda x: SIZED_BY_A_DIMENSION[name](lib, x))
    spec = "a, b"
    exp, want = _export_on_both(f, spec, constraints=["b >= 2"])
    got_avals = [str(a) for a in exp.out_avals]
    assert got_avals == [str(a) for a in want.out_avals]
    x = np.random.RandomState(0).rand(3, 6).astype(np.float32) * 10
    for got in (exp.call(x), export.deserialize(exp.serialize()).call(x),
                fluxion.jit(exp.call)(x)):
        for g, w in zip(fluxion.tree_util.tree_leaves(got),
                        jax.tree_util.tree_leaves(want.call(x))):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def _scatter_grads(lib):
    dn = lib.lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0, 1),
                                         scatter_dims_to_operand_dims=(0, 1))

    def f(op, idx, upd):
        def total(op, upd):
            return lib.numpy.sum(lib.lax.scatter(op, idx, upd, dn, indices_are_sorted=False,
                                                 unique_indices=False))
        return lib.grad(total, argnums=(0, 1))(op, upd)
    return f


def test_derivatives_with_index_arrays_of_a_symbolic_size():
    # sort's JVP and scatter's transpose chose the index dtype by comparing the symbolic size
    # with 2**31 ("inconclusive"); a symbolic size takes int32 indices, as in JAX.
    a = np.random.RandomState(0).rand(16).astype(np.float32)
    spec = fluxion.ShapeDtypeStruct(export.symbolic_shape("b"), np.float32)
    exp = export.export(fluxion.jit(lambda a: fluxion.jvp(fluxion.lax.sort, (a,), (a,))))(spec)
    want = jax.jvp(jax.lax.sort, (a,), (a,))
    for g, w in zip(exp.call(a), want):
        np.testing.assert_allclose(g, w)
    op = np.random.RandomState(1).rand(7, 4).astype(np.float32)
    idx = np.array([[1, 2], [0, 1], [3, 0], [2, 2], [5, 1], [6, 3], [4, 0]], np.int32)
    upd = np.random.RandomState(2).rand(7).astype(np.float32)
    specs = export.symbolic_args_specs((op, idx, upd), ["b, 4", "b, 2", "b"])
    exp = export.export(fluxion.jit(_scatter_grads(fluxion)))(*specs)
    for g, w in zip(exp.call(op, idx, upd), _scatter_grads(jax)(op, idx, upd)):
        np.testing.assert_allclose(g, w)


@pytest.mark.parametrize("index", [1, -2, (1, 2), -1])
def test_int_index_into_a_symbolic_axis_is_clamped_as_jax(index):
    # a[1] of an a[b] asked whether 1 < b ("inconclusive"); JAX reads it clamped.
    def f(lib):
        return lib.jit(lambda a: a[index])
    exp, want = _export_on_both(f, "b, 4")
    for n in (1, 2, 5):
        x = np.arange(4 * n, dtype=np.float32).reshape(n, 4)
        np.testing.assert_array_equal(exp.call(x), want.call(x))
        np.testing.assert_array_equal(fluxion.jit(exp.call)(x), want.call(x))


def test_squeeze_all_axes_of_a_symbolic_shape_is_refused_as_in_jax():
    # It kept b, whatever b is: wrong when b is 1. JAX refuses it.
    for lib in (fluxion, jax):
        with pytest.raises(ValueError, match="squeeze with axis=None is not supported"):
            lib.export.export(lib.jit(lib.numpy.squeeze))(lib.ShapeDtypeStruct(
                lib.export.symbolic_shape("b, 1"), np.float32))
    exp = export.export(fluxion.jit(lambda x: fluxion.numpy.squeeze(x, 1)))(
        fluxion.ShapeDtypeStruct(export.symbolic_shape("b, 1"), np.float32))
    np.testing.assert_array_equal(exp.call(np.ones((3, 1), np.float32)), np.ones(3))


@pytest.mark.parametrize("name", ["slice", "update", "index"])
def test_negative_constant_start_on_a_symbolic_axis_as_in_jax(name):
    # A start of -1 on an axis of size b was wrapped to the int b - 1: "requires a constant".
    def f(lib):
        return lib.jit({
            "slice": lambda x: lib.lax.dynamic_slice(x, (-1, 1), (x.shape[0] - 1, 2)),
            "update": lambda x: lib.lax.dynamic_update_slice(x, x[:1, :2] * 0 + 9, (-1, -2)),
            "index": lambda x: lib.lax.dynamic_index_in_dim(x, -1, 0, keepdims=False)}[name])
    exp, want = _export_on_both(f, "b, 4")
    assert [str(a) for a in exp.out_avals] == [str(a) for a in want.out_avals]
    for n in (3, 5):
        x = np.arange(4 * n, dtype=np.float32).reshape(n, 4)
        np.testing.assert_array_equal(exp.call(x), want.call(x))


@pytest.mark.parametrize("name", ["tril", "triu", "tri", "eye"])
def test_symbolic_diagonal_offset_as_in_jax(name):
    # jnp.tril/triu took k through static_int: a symbolic k "requires a constant".
    def f(lib):
        jnp_ = lib.numpy
        return lib.jit({
            "tril": lambda x: jnp_.tril(jnp_.ones((x.shape[0], x.shape[0] + x.shape[1]),
                                                  dtype=np.float32), k=x.shape[1]),
            "triu": lambda x: jnp_.triu(x, k=x.shape[0] - x.shape[1]),
            "tri": lambda x: jnp_.tri(x.shape[0], x.shape[1], k=-x.shape[0] // 2,
                                      dtype=np.float32),
            "eye": lambda x: jnp_.eye(x.shape[0], x.shape[1], k=x.shape[1] - 2,
                                      dtype=np.float32)}[name])
    exp, want = _export_on_both(f, "m, n")
    assert [str(a) for a in exp.out_avals] == [str(a) for a in want.out_avals]
    for shape in ((3, 4), (5, 2)):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
        np.testing.assert_array_equal(exp.call(x), want.call(x))


@pytest.mark.parametrize("grad", [False, True])
def test_slice_by_a_symbolic_stride_as_in_jax(grad):
    # slice_in_dim took the stride through operator.index: "requires a constant".
    def f(lib):
        def sliced(y):
            return lib.lax.slice_in_dim(y, 0, y.shape[0], stride=1 + y.shape[0] // 4, axis=0)
        if grad:
            return lib.jit(lib.grad(lambda y: (sliced(y) ** 2).sum()))
        return lib.jit(sliced)
    exp, want = _export_on_both(f, "b, 4")
    assert [str(a) for a in exp.out_avals] == [str(a) for a in want.out_avals]
    for n in (13, 4, 2):
        x = np.arange(4 * n, dtype=np.float32).reshape(n, 4)
        np.testing.assert_array_equal(exp.call(x), want.call(x))


def test_powers_of_a_dimension_as_in_jax():
    # b ** -2 was an InconclusiveDimensionOperation, b ** 1.5 a TypeError, b ** b a
    # TracerIntegerConversionError; JAX: ValueError, ValueError and a value.
    for lib in (fluxion, jax):
        b, = lib.export.symbolic_shape("b")
        with pytest.raises(ValueError, match="cannot be raised to negative powers"):
            b ** -2
        with pytest.raises(ValueError, match="cannot be raised to non-integer powers"):
            b ** 1.5
    def f(lib):
        return lib.jit(lambda x: (x.shape[0] ** x.shape[0], 2 ** x.shape[0], x.shape[0] ** 0))
    exp, want = _export_on_both(f, "b")
    assert [str(a) for a in exp.out_avals] == [str(a) for a in want.out_avals]
    x = np.ones(3, np.float32)
    assert [int(v) for v in exp.call(x)] == [int(v) for v in want.call(x)] == [27, 8, 1]
