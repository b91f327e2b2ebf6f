"""fluxion's device queries and jit arguments against JAX 0.10.2 (keywords, error classes)."""
import operator

import jax
import numpy as np
import pytest

import fluxion


@pytest.mark.parametrize("name", ["devices", "local_devices", "device_count",
                                  "local_device_count", "process_index", "process_count",
                                  "process_indices"])
def test_device_queries_take_jax_backend_keyword(name):
    # The keyword was named backend_name: jax code calling local_devices(backend="cpu") failed.
    got = getattr(fluxion, name)(backend="cpu")
    want = getattr(jax, name)(backend="cpu")
    assert (len(got) == len(want)) if isinstance(got, list) else got == want


def test_masked_array_arguments_to_jit_are_a_value_error():
    # The mask was dropped silently; JAX refuses masked arrays as jit arguments.
    masked = np.ma.array([1, 2], mask=[True, False])
    with pytest.raises(ValueError, match="numpy masked arrays are not supported"):
        fluxion.jit(lambda x: x * 2)(masked)
    with pytest.raises(ValueError, match="numpy masked arrays are not supported"):
        jax.jit(lambda x: x * 2)(masked)
    np.testing.assert_array_equal(fluxion.numpy.array(masked), [1, 2])  # as np.array, unmasked


@pytest.mark.parametrize("value", [np.ones((2, 3)), np.arange(3, dtype=np.int8), 1.0, 7, True,
                                   "shape_dtype_struct", "committed", "uncommitted"])
def test_shape_dtype_struct_like(value):
    # ShapeDtypeStruct.like was missing.
    def build(lib, numpy_lib):
        if not isinstance(value, str):
            return value
        if value == "shape_dtype_struct":
            return lib.ShapeDtypeStruct((4,), np.int16)
        if value == "committed":
            return lib.device_put(numpy_lib.ones(3), lib.devices()[0])
        return numpy_lib.ones(3)
    want = jax.ShapeDtypeStruct.like(build(jax, jax.numpy))
    got = fluxion.ShapeDtypeStruct.like(build(fluxion, fluxion.numpy))
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
    assert (got.sharding is None) == (want.sharding is None)
    traced = fluxion.jit(lambda x: fluxion.numpy.zeros(fluxion.ShapeDtypeStruct.like(x).shape))
    assert traced(np.ones((2, 3))).shape == (2, 3)
    assert fluxion.eval_shape(lambda x: x, got) == got


_MASKED_USES = {
    "device_put": lambda lib, v: lib.device_put(v),
    "device_put to a device": lambda lib, v: lib.device_put(v, lib.devices()[0]),
    "asarray": lambda lib, v: lib.numpy.asarray(v),
    "array without copy": lambda lib, v: lib.numpy.array(v, copy=False),
    "jnp function": lambda lib, v: lib.numpy.sin(v),
    "jnp operator": lambda lib, v: lib.numpy.add(v, 1),
}


@pytest.mark.parametrize("use", sorted(_MASKED_USES))
def test_masked_arrays_are_refused_beyond_jit(use):
    masked = np.ma.array([1., 2., 3.], mask=[True, False, True])
    run = _MASKED_USES[use]
    with pytest.raises(ValueError, match="numpy masked arrays are not supported"):
        run(jax, masked)
    with pytest.raises(ValueError, match="numpy masked arrays are not supported"):
        run(fluxion, masked)


@pytest.mark.parametrize("kw", [{}, {"dtype": np.int32}, {"ndmin": 2}])
def test_jnp_array_copies_the_data_of_masked_arrays(kw):
    masked = np.ma.array([1., 2., 3.], mask=[True, False, True])
    got, want = fluxion.numpy.array(masked, **kw), jax.numpy.array(masked, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(fluxion.numpy.asarray(masked, copy=True)),
                                  [1., 2., 3.])


def _sqrt_plus_one(np_mod):
    return lambda x: np_mod.sqrt(x ** 2) + 1.


_GOOD_OPTIONS = [{"xla_embed_ir_in_executable": True, "xla_dump_max_hlo_modules": 200},
                 {"exec_time_optimization_effort": 0.0}, {"optimization_level": 1},
                 {"memory_fitting_level": 0}]
_BAD_OPTIONS = [({"invalid_key": "invalid_value"}, "No such compile option: 'invalid_key'"),
                ({"exec_time_compilation_effort": 0.0}, "No such compile option"),
                ({"xla_embed_ir_in_executable": "invalid_value"}, "is not a valid bool value")]


@pytest.mark.parametrize("options", _GOOD_OPTIONS)
def test_jit_and_compile_take_compiler_options(options):
    f = _sqrt_plus_one(fluxion.numpy)
    assert float(fluxion.jit(f, compiler_options=options)(-2.)) == 3.
    assert float(fluxion.jit(f).lower(1.).compile(compiler_options=options)(-2.)) == 3.
    assert float(jax.jit(_sqrt_plus_one(jax.numpy), compiler_options=options)(-2.)) == 3.


@pytest.mark.parametrize("options,message", _BAD_OPTIONS)
def test_bad_compiler_options_are_xla_errors_as_in_jax(options, message):
    for lib in (jax, fluxion):
        f = _sqrt_plus_one(lib.numpy)
        with pytest.raises(lib.errors.JaxRuntimeError, match=message):
            lib.jit(f, compiler_options=options)(1.)
        with pytest.raises(lib.errors.JaxRuntimeError, match=message):
            lib.jit(f).lower(1.).compile(compiler_options=options)


def test_compiler_options_are_part_of_the_jit_cache():
    f = _sqrt_plus_one(fluxion.numpy)
    fluxion.jit(f, compiler_options={"xla_embed_ir_in_executable": True})(1.)
    fluxion.jit(f, compiler_options={"xla_embed_ir_in_executable": False})(1.)
    with pytest.raises(fluxion.errors.JaxRuntimeError, match="No such compile option"):
        fluxion.jit(f, compiler_options={"invalid_key": "invalid_value"})(1.)
    lowered = fluxion.jit(f).lower(1.)
    plain = lowered.compile()
    embedded = lowered.compile(compiler_options={"xla_embed_ir_in_executable": True})
    assert plain is not embedded and float(embedded(2.)) == 3.


def test_compiler_options_reach_a_partitioned_jit():
    mesh = fluxion.sharding.Mesh(np.array(fluxion.devices()[:1]), ("x",))
    sharding = fluxion.sharding.NamedSharding(mesh, fluxion.sharding.PartitionSpec("x"))
    f = fluxion.jit(lambda x: x * 2, in_shardings=sharding,
                    compiler_options={"invalid_key": "invalid_value"})
    with pytest.raises(fluxion.errors.JaxRuntimeError, match="No such compile option"):
        f(fluxion.numpy.arange(4.))


def _pair_fn(lib):
    return lambda x, y: (lib.tree.map(lambda i: i * 2, x), y * 2)


def _flat_args_info(info):
    from fluxion import tree_util
    leaves = tree_util.tree_leaves(info, is_leaf=lambda a: hasattr(a, "donated"))
    return [(a.shape, np.dtype(a.dtype), a._aval.weak_type, a.donated) for a in leaves]


@pytest.mark.parametrize("kw", [{"donate_argnums": 1}, {"donate_argnums": 0}, {}])
def test_args_info_and_donate_argnums_of_every_stage(kw):
    x, y = {"A": np.array(1.0), "B": np.array(2.0)}, np.array(3.0)
    ours, theirs = fluxion.jit(_pair_fn(fluxion), **kw), jax.jit(_pair_fn(jax), **kw)
    want_low = theirs.lower(x, y)
    want = _flat_args_info(want_low.args_info)
    low = ours.lower(x, y)
    for stage in (ours.trace(x, y), low, low.compile()):
        assert _flat_args_info(stage.args_info) == want
        assert stage.donate_argnums == want_low.donate_argnums
    compiled = low.compile()
    assert compiled.in_avals == low.in_avals
    assert str(compiled.in_avals) == str(want_low.compile().in_avals)


@pytest.mark.parametrize("kw", [{"donate_argnames": ("z", "y")}, {"donate_argnums": (0, 1)}])
def test_args_info_of_keyword_arguments(kw):
    f = lambda z, y, x: (z, y, x)
    z, y, x = {"c": 3.}, {"b": 2.}, {"a": 1.}
    _, ours = fluxion.jit(f, **kw).lower(z=z, y=y, x=x).args_info
    _, theirs = jax.jit(f, **kw).lower(z=z, y=y, x=x).args_info
    for name in "zyx":
        ((_, a),), ((_, b),) = ours[name].items(), theirs[name].items()
        assert a.donated == b.donated and a.shape == b.shape


def test_lowered_cost_analysis_matches_jax():
    ours = fluxion.jit(lambda x, y: x * y + 4.).lower(1., 1.).cost_analysis()
    theirs = jax.jit(lambda x, y: x * y + 4.).lower(1., 1.).cost_analysis()
    assert ours["flops"] == theirs["flops"] and ours["bytes accessed"] == theirs["bytes accessed"]


def _generator(x):
    yield x


class _NoSignature:
    @property
    def __signature__(self):
        raise TypeError("no signature")

    def __call__(self, *args, **kwargs):
        return None


@pytest.mark.parametrize("transform", ["jit", "grad", "vmap", "jacfwd"])
def test_generator_functions_and_staticmethods_are_refused(transform):
    for lib in (jax, fluxion):
        make = getattr(lib, transform)
        with pytest.raises(TypeError, match="Expected a function, got a generator function"):
            make(_generator)
        with pytest.raises(TypeError, match="staticmethod arguments are not supported"):
            make(staticmethod(lambda x: x))


def test_donate_argnames_need_a_signature():
    x = np.arange(4)
    for lib in (jax, fluxion):
        with pytest.raises(ValueError, match="Getting the signature of function .* failed. "
                                             "Pass donate_argnums instead of donate_argnames."):
            lib.jit(_NoSignature(), donate_argnames="a")(x, x)
        assert lib.jit(_NoSignature(), donate_argnums=0)(x, x) is None


def test_jnp_operations_on_float0_are_a_type_error():
    for lib in (jax, fluxion):
        zero = lib.grad(lambda x: x + 0., allow_int=True)(1)
        assert zero.dtype == jax.dtypes.float0
        for op in (lambda: zero + lib.numpy.zeros(()), lambda: lib.numpy.sin(zero),
                   lambda: lib.numpy.add(lib.numpy.zeros(()), zero)):
            with pytest.raises(TypeError, match="float0s do not support any operations by "
                                                "design"):
                op()


@pytest.mark.parametrize("bad_output", [lambda x: (1, 2, 3), lambda x: x, lambda x: (x,)])
def test_has_aux_without_a_pair_names_the_two_element_tuple(bad_output):
    for lib in (jax, fluxion):
        with pytest.raises(TypeError, match="two-element tuple"):
            lib.grad(bad_output, has_aux=True)(1.)


def test_grad_of_a_string_names_its_type_as_jax_does():
    pattern = ".* 'foo' of type <.*'str'> is not a valid JAX type"
    for lib in (jax, fluxion):
        with pytest.raises(TypeError, match=pattern):
            lib.grad(lambda x: x)("foo")


_NOT_AN_INDEX = {"int vector": lambda np_mod: np_mod.arange(10),
                 "empty": lambda np_mod: np_mod.arange(0, dtype="int32"),
                 "float scalar": lambda np_mod: np_mod.float32(0),
                 "bool scalar": lambda np_mod: np_mod.bool_(True)}


@pytest.mark.parametrize("name", sorted(_NOT_AN_INDEX))
@pytest.mark.parametrize("func", [operator.index, hex])
def test_only_integer_scalars_convert_to_an_index(name, func):
    message = "Only integer scalar arrays can be converted to a scalar index."
    for lib in (jax, fluxion):
        value = _NOT_AN_INDEX[name](lib.numpy)
        for f in (func, lib.jit(func)):
            with pytest.raises(TypeError, match=message):
                f(value)
        assert func(lib.numpy.int32(7)) == func(7)
        with pytest.raises(lib.errors.TracerIntegerConversionError):
            lib.jit(func)(lib.numpy.int32(7))


def _compiled_for_float32(lib):
    f = lambda x: lib.numpy.sqrt(x ** 2) + 1.
    return lib.jit(f).lower(lib.numpy.float32(1)).compile()


@pytest.mark.parametrize("call,message", [
    (lambda lib, exe: exe(lib.numpy.int32(1)),
     r"Argument types differ .*The mismatches are:\nArgument 'x' compiled with.*float32.*and "
     r"called with.*int32.*"),
    (lambda lib, exe: exe([1.]),
     "Function compiled with input pytree does not match the input pytree it was called with"),
    (lambda lib, exe: lib.vmap(lambda x: exe(x) + 2)(lib.numpy.ones(3)),
     "Cannot apply JAX transformations to a function lowered and compiled for a particular "
     "signature. Detected .*BatchTracer"),
])
def test_compiled_call_errors_as_jax_words_them(call, message):
    for lib in (jax, fluxion):
        exe = _compiled_for_float32(lib)
        with pytest.raises(TypeError, match=message):
            call(lib, exe)
        assert float(exe(lib.numpy.float32(-2))) == 3.


@pytest.mark.parametrize("name", ["grad", "jvp", "vmap"])
def test_numpy_conversion_of_a_tracer_is_an_error_not_a_zero_derivative(name):
    # The tracer's primal was handed to NumPy: grad(lambda x: np.exp(x).sum()) gave zeros.
    runs = {"grad": lambda lib: lib.grad(lambda x: np.exp(x).sum())(np.zeros(3)),
            "jvp": lambda lib: lib.jvp(lambda x: np.exp(x), (np.zeros(3),), (np.ones(3),)),
            "vmap": lambda lib: lib.vmap(lambda x: np.exp(x))(np.zeros(3))}
    for lib in (jax, fluxion):
        with pytest.raises(lib.errors.TracerArrayConversionError,
                           match="The numpy.ndarray conversion method __array__"):
            runs[name](lib)


@pytest.mark.parametrize("convert", [float, complex])
def test_float_of_a_differentiated_value_is_a_concretization_error(convert):
    for lib in (jax, fluxion):
        with pytest.raises(lib.errors.ConcretizationTypeError):
            lib.grad(lambda x: convert(x))(1.)
    # bool and int of a known value still work under grad, as in JAX
    assert float(fluxion.grad(lambda x: x if x > 0 else -x)(-1.)) == -1.
    assert float(fluxion.grad(lambda x: x * int(x))(3.)) == 3.


def test_vmap_size_mismatch_names_keyword_arguments_as_jax_does():
    message = ("vmap got inconsistent sizes for array axes to be mapped:\n"
               r"  \* one axis had size 1: axis 0 of argument x of type int32\[1\];" "\n"
               r"  \* one axis had size 2: axis 0 of kwargs\['y'\] of type int32\[2\]")
    for lib in (jax, fluxion):
        f = lib.vmap(lambda x, y: x + y)
        with pytest.raises(ValueError, match=message):
            f(lib.numpy.array([1], "int32"), y=lib.numpy.array([1, 2], "int32"))


def test_pmap_static_argument_passed_by_keyword_message():
    message = (r"pmapped function has static_broadcasted_argnums=\(1,\) but was called with "
               r"only 1 positional argument. All static broadcasted arguments must be passed "
               r"positionally.")
    for lib in (jax, fluxion):
        with pytest.raises(ValueError, match=message):
            lib.pmap(lambda a, b: a + b, static_broadcasted_argnums=(1,))(
                lib.numpy.ones((1, 1)), b=1)


def test_sharding_of_a_tracer_points_to_typeof():
    for lib in (jax, fluxion):
        seen = []

        def f(x):
            with pytest.raises(AttributeError, match="typeof") as info:
                x.sharding
            seen.append(str(info.value))
            assert not hasattr(x, "sharding")
            return x
        lib.jit(f)(lib.numpy.arange(2.))
        assert seen


def test_device_put_of_a_string_says_received_invalid_value():
    for lib in (jax, fluxion):
        with pytest.raises(ValueError, match=r".*Received invalid value.*"):
            lib.device_put(lib.numpy.arange(8), "cpu")


@pytest.mark.parametrize("cast", [float, complex, int])
def test_casting_a_traced_value_suggests_astype(cast):
    for lib in (jax, fluxion):
        with pytest.raises(TypeError, match=rf"[Tt]ry using `x.astype\({cast.__name__}\)`"):
            lib.jit(lambda x: cast(x))(1.0)


def test_jit_eval_shape_reports_out_shardings():
    for lib in (jax, fluxion):
        single = lib.sharding.SingleDeviceSharding(lib.devices()[0])
        out = lib.jit(lambda x: x * 2, out_shardings=single).eval_shape(np.arange(8))
        assert out.sharding == single and out.shape == (8,)
        mesh = lib.sharding.Mesh(np.array(lib.devices()[:1]), ("x",))
        named = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x"))
        pair = lib.jit(lambda x: (x * 2, x), out_shardings=(named, None)).eval_shape(
            np.arange(8.))
        assert pair[0].sharding == named and pair[1].sharding is None
        assert lib.jit(lambda x: x).eval_shape(1.).sharding is None


def test_bool_of_a_traced_value_names_its_type_without_double_dots():
    for lib in (jax, fluxion):
        with pytest.raises(lib.errors.TracerBoolConversionError,
                           match=r"with shape bool\[\]\.[^\.]"):
            lib.jit(lambda x: 1 if x > 0 else 0)(0)


@pytest.mark.parametrize("kw", [{"in_axes": False}, {"in_axes": True}, {"out_axes": False},
                                {"in_axes": (False,)}])
def test_pmap_axes_must_be_ints(kw):
    for lib in (jax, fluxion):
        with pytest.raises(TypeError, match="must be an int, None, or \\(nested\\) container"):
            lib.pmap(lambda x: x, **kw)(lib.numpy.zeros(1))
    np.testing.assert_array_equal(
        np.asarray(fluxion.pmap(lambda x: x, in_axes=(0,), out_axes=0)(fluxion.numpy.zeros(1))),
        [0.])


def test_jit_trace_cache_depends_on_named_axis_sizes():
    # The second vmap reused the first one's trace of the jit: axis_size gave 2 for 3.
    for lib in (jax, fluxion):
        g = lib.jit(lambda: lib.lax.axis_size("i"))
        for size in (2, 3, 2):
            assert int(lib.vmap(g, axis_name="i", axis_size=size, out_axes=None)()) == size
