"""Errors for misusing traced values, with JAX's error classes (jax.errors is the oracle)."""
import inspect

import jax
import jax.errors
import numpy as np
import pytest

import fluxion
import fluxion.errors
import fluxion.lax as lax

X = np.ones(3, np.float32)

LIBRARIES = {"jax": (jax, jax.errors), "fluxion": (fluxion, fluxion.errors)}


def _total(lib, x):
    return lib.lax.reduce_sum(x, (0,))


def _index(lib, x):
    return lib.lax.convert_element_type(_total(lib, x), np.int32)


# Each misuse, written once for both libraries: (function of (lib, x), error class name).
MISUSES = {
    "if_on_tracer": (lambda lib, x: x if _total(lib, x) > 0 else -x, "TracerBoolConversionError"),
    "bool": (lambda lib, x: bool(_total(lib, x)), "TracerBoolConversionError"),
    "int": (lambda lib, x: int(_total(lib, x)), "ConcretizationTypeError"),
    "float": (lambda lib, x: float(_total(lib, x)), "ConcretizationTypeError"),
    "np_asarray": (lambda lib, x: np.asarray(x), "TracerArrayConversionError"),
    "np_function": (lambda lib, x: np.sin(x), "TracerArrayConversionError"),
    "list_index": (lambda lib, x: [x, x, x, x][_index(lib, x)], "TracerIntegerConversionError"),
    "range": (lambda lib, x: range(_index(lib, x)), "TracerIntegerConversionError"),
}


@pytest.mark.parametrize("library", sorted(LIBRARIES))
@pytest.mark.parametrize("misuse", sorted(MISUSES))
def test_misuse_raises_jax_error_class(library, misuse):
    lib, errors = LIBRARIES[library]
    fun, error_name = MISUSES[misuse]
    with pytest.raises(getattr(errors, error_name)) as info:
        lib.jit(lambda x: fun(lib, x))(X)
    assert type(info.value).__name__ == error_name


def test_bool_error_names_the_tracer_and_the_user_line():
    def f(x):
        if lax.gt(_total(fluxion, x), 0.0):
            return x
        return lax.neg(x)
    line = inspect.getsourcelines(f)[1] + 1
    with pytest.raises(fluxion.errors.TracerBoolConversionError) as info:
        fluxion.jit(f)(X)
    message = str(info.value)
    assert message.startswith("Attempted boolean conversion of traced array with shape bool[].")
    assert f"{__file__}:{line}" in message
    assert "`bool` function" in message
    assert isinstance(info.value, fluxion.errors.ConcretizationTypeError)
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("convert,error_name", [(int, "ConcretizationTypeError"),
                                                (np.asarray, "TracerArrayConversionError")])
def test_conversion_error_names_the_user_line(convert, error_name):
    def f(x):
        return convert(x)
    line = inspect.getsourcelines(f)[1] + 1
    with pytest.raises(getattr(fluxion.errors, error_name)) as info:
        fluxion.jit(f)(np.float32(1))
    assert f"{__file__}:{line}" in str(info.value)
    assert "traced array with shape float32[]" in str(info.value).splitlines()[0]  # JAX's words


def test_concrete_values_convert_fine_outside_jit():
    total = _total(fluxion, X)
    assert bool(total) and int(total) == 3 and float(total) == 3.0
    assert [10, 20, 30, 40][_index(fluxion, X)] == 40


@pytest.mark.parametrize("library", sorted(LIBRARIES))
@pytest.mark.parametrize("staged", [False, True])
def test_scalar_conversion_of_non_scalar_arrays(library, staged):
    # numpy's rules, checked before concreteness: an array of several (or no) elements has no
    # truth value, and only a 0-d array converts to a Python number.
    lib = LIBRARIES[library][0]
    run = (lambda f, x: lib.jit(f)(x)) if staged else (lambda f, x: f(lib.numpy.asarray(x)))
    with pytest.raises(ValueError, match="more than one element is ambiguous"):
        run(bool, X)
    with pytest.raises(ValueError, match="empty array is ambiguous"):
        run(bool, X[:0])
    for convert in (int, float, complex):
        with pytest.raises(TypeError, match=r"Only scalar arrays .* got arr.ndim=1"):
            run(convert, X[:1])
    if not staged:  # a one-element array of any rank has a truth value
        assert run(bool, X[:1]) is True


def test_make_jaxpr_and_eval_shape_raise_the_same_errors():
    with pytest.raises(fluxion.errors.TracerBoolConversionError):
        fluxion.make_jaxpr(lambda x: bool(_total(fluxion, x)))(X)
    with pytest.raises(fluxion.errors.ConcretizationTypeError):
        fluxion.eval_shape(lambda x: int(_total(fluxion, x)), X)


# ---------------------------------------------------------------------------------------------
# Leaked tracers

@pytest.mark.parametrize("library", sorted(LIBRARIES))
@pytest.mark.parametrize("use", ["eager", "in_other_jit"])
def test_leaked_tracer_is_unexpected(library, use):
    lib, errors = LIBRARIES[library]
    leaked = []

    def leak(x):
        leaked.append(lib.lax.neg(x))
        return x

    lib.jit(leak)(X)
    with pytest.raises(errors.UnexpectedTracerError) as info:
        if use == "eager":
            lib.lax.sin(leaked[0])
        else:
            lib.jit(lambda y: lib.lax.add(y, leaked[0]))(X)
    if library == "fluxion":
        assert "Encountered an unexpected tracer" in str(info.value)
        assert "jit of leak" in str(info.value)


def test_leaked_tracer_as_jit_argument():
    leaked = []
    fluxion.jit(lambda x: leaked.append(x) or x)(X)
    with pytest.raises(fluxion.errors.UnexpectedTracerError):
        fluxion.jit(lambda y: lax.neg(y))(leaked[0])


# ---------------------------------------------------------------------------------------------
# Invalid inputs and outputs of jit

@pytest.mark.parametrize("library", sorted(LIBRARIES))
@pytest.mark.parametrize("result", ["text", object(), {"a": [1.0, "b"]}], ids=["str", "object", "nested_str"])
def test_non_array_return_is_a_type_error(library, result):
    lib, _ = LIBRARIES[library]
    with pytest.raises(TypeError) as info:
        lib.jit(lambda x: result)(X)
    assert type(info.value) is TypeError
    if library == "fluxion":
        assert "not a valid JAX type" in str(info.value)


@pytest.mark.parametrize("library", sorted(LIBRARIES))
@pytest.mark.parametrize("args,kwargs,path", [
    (("abc",), {}, "x"),
    ((X, "abc"), {}, "y"),
    ((X, X), {"z": object()}, "z"),
    ((X, [X, {"k": "v"}]), {}, "y[1]['k']"),
])
def test_invalid_argument_is_a_type_error_naming_it(library, args, kwargs, path):
    lib, _ = LIBRARIES[library]

    def f(x, y=None, z=None):
        return x

    with pytest.raises(TypeError) as info:
        lib.jit(f)(*args, **kwargs)
    assert type(info.value) is TypeError
    assert f"at path {path}" in str(info.value)


def test_invalid_argument_with_static_argnums_counts_positions():
    def f(n, x, y):
        return x
    with pytest.raises(TypeError, match="at path y"):
        fluxion.jit(f, static_argnums=0)(3, X, "bad")
    with pytest.raises(TypeError, match=r"at path rest\[1\]"):
        fluxion.jit(lambda x, *rest: x)(X, X, "bad")


def test_invalid_argument_to_make_jaxpr_and_eval_shape():
    with pytest.raises(TypeError, match="at path x"):
        fluxion.make_jaxpr(lambda x: x)("abc")
    with pytest.raises(TypeError, match="at path x"):
        fluxion.eval_shape(lambda x: x, object())


def test_jit_requires_a_callable():
    with pytest.raises(TypeError, match="Expected a callable value, got 3"):
        fluxion.jit(3)


# ---------------------------------------------------------------------------------------------
# The classes themselves

SHARED_NAMES = ["ConcretizationTypeError", "TracerBoolConversionError",
                "TracerIntegerConversionError", "TracerArrayConversionError",
                "UnexpectedTracerError", "KeyReuseError", "JaxprTypeError", "JAXTypeError",
                "JaxRuntimeError"]


def _builtin_bases(cls) -> list:
    return [c for c in cls.__mro__ if c.__module__ == "builtins"]


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_error_class_kinds_match_jax(name):
    ours, theirs = getattr(fluxion.errors, name), getattr(jax.errors, name)
    assert _builtin_bases(ours) == _builtin_bases(theirs)


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_error_class_relations_match_jax(name):
    ours, theirs = getattr(fluxion.errors, name), getattr(jax.errors, name)
    for other in SHARED_NAMES:
        assert issubclass(ours, getattr(fluxion.errors, other)) == issubclass(
            theirs, getattr(jax.errors, other)), other


def test_runtime_error_is_jaxlibs():
    from jaxlib import _jax
    assert fluxion.errors.JaxRuntimeError is _jax.JaxRuntimeError
    with pytest.raises(AttributeError):
        fluxion.errors.NoSuchError  # noqa: B018


# ---------------------------------------------------------------------------------------------
# Traceback filtering: an error inside a transformed function shows the user's lines.

def _shape_bug(a):
    return a @ fluxion.numpy.ones((5, 2))  # contracting 3 against 5


ENTRY_POINTS = {
    "jit": lambda x: fluxion.jit(_shape_bug)(x),
    "jit_trace": lambda x: fluxion.jit(_shape_bug).trace(x),
    "jit_lower": lambda x: fluxion.jit(_shape_bug).lower(x),
    "grad": lambda x: fluxion.grad(lambda a: _shape_bug(a).sum())(x),
    "vmap": lambda x: fluxion.vmap(_shape_bug)(x[None]),
    "make_jaxpr": lambda x: fluxion.make_jaxpr(_shape_bug)(x),
    "eval_shape": lambda x: fluxion.eval_shape(_shape_bug, x),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_traceback_shows_user_frames_not_internals(entry):
    import traceback
    x = fluxion.numpy.ones((2, 3))
    with pytest.raises(TypeError, match="dot_general") as info:
        ENTRY_POINTS[entry](x)
    frames = traceback.extract_tb(info.value.__traceback__)
    internal = [f for f in frames if "/fluxion/_src/" in f.filename]
    assert any(f.name == "_shape_bug" for f in frames)
    # At most the public entry point's own frame remains (none for a jitted function's call).
    assert len(internal) <= (entry != "jit"), [f"{f.filename}:{f.lineno}" for f in internal]
    assert any("FLUXION_TRACEBACK_FILTERING" in note for note in info.value.__notes__)


def test_lower_shows_user_frames_once_global_arrays_exist(monkeypatch):
    """Once a global Array has been made, `jit(f).lower` first asks whether f is partitioned
    by its arguments, which traces f: an error there leaves with the user's frames too."""
    import traceback
    from fluxion._src import dispatch, sharded_jit
    monkeypatch.setattr(dispatch, "sharded_apply_primitive", sharded_jit.apply_primitive)
    with pytest.raises(TypeError, match="dot_general") as info:
        fluxion.jit(_shape_bug).lower(fluxion.numpy.ones((2, 3)))
    internal = [f for f in traceback.extract_tb(info.value.__traceback__)
                if "/fluxion/_src/" in f.filename]
    assert len(internal) <= 1, [f"{f.filename}:{f.lineno}" for f in internal]


def _nested_jit_failure(lib):
    @lib.jit
    def innermost(x):
        raise AssertionError("innermost")

    @lib.jit
    def between(x):
        return 1 + innermost(x)

    @lib.jit
    def outermost(x):
        return 2 + between(x)

    return outermost


@pytest.mark.parametrize("calls", [1, 2])  # a second call misses the fast path's cache too
def test_nested_jit_traceback_is_the_users_frames_only(calls):
    import traceback

    def user_frames(lib):
        outermost = _nested_jit_failure(lib)
        for _ in range(calls):
            with pytest.raises(AssertionError) as info:
                outermost(lib.numpy.ones(2))
        return [f.name for f in traceback.extract_tb(info.value.__traceback__)]

    # Another test module switches JAX's filtering off for its worker; this one needs JAX's
    # default.
    previous = jax.config.jax_traceback_filtering
    jax.config.update("jax_traceback_filtering", "auto")
    try:
        expected = user_frames(jax)
    finally:
        jax.config.update("jax_traceback_filtering", previous)
    assert expected[-3:] == ["outermost", "between", "innermost"]
    assert user_frames(fluxion) == expected


def test_traceback_filtering_off_keeps_everything():
    import traceback
    x = fluxion.numpy.ones((2, 3))
    with fluxion.config._override("traceback_filtering", "off"):
        with pytest.raises(TypeError) as info:
            fluxion.jit(_shape_bug)(x)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert sum("/fluxion/_src/" in f.filename for f in frames) > 3


def test_eager_jnp_errors_show_only_the_users_frames():
    import traceback
    import fluxion.numpy as fnp
    cases = [lambda: fnp.ones(3) + fnp.ones(4), lambda: fnp.sum(fnp.ones(3), axis=5),
             lambda: fnp.matmul(fnp.ones((2, 3)), fnp.ones((4, 2))), lambda: fnp.sin("a"),
             lambda: fnp.sum(fnp.ones(3), axis=[0, 4])]
    for case in cases:
        try:
            case()
        except (TypeError, ValueError) as e:
            frames = traceback.extract_tb(e.__traceback__)
            internal = [f for f in frames if "/fluxion/_src/" in f.filename]
            assert not internal, [f"{f.filename}:{f.lineno}" for f in internal]
        else:
            raise AssertionError("no error")


@pytest.mark.parametrize("library", sorted(LIBRARIES))
def test_python_int_argument_overflow_names_its_path(library):
    lib = LIBRARIES[library][0]
    with pytest.raises(OverflowError, match=r"argument path is x\['k'\]\[0\]. Got <class 'int'> "
                                            r"with value 2147483653"):
        lib.jit(lambda a, x: x["k"][0] + a)(1, {"k": [2**31 + 5]})


@pytest.mark.parametrize("library", sorted(LIBRARIES))
@pytest.mark.parametrize("args", [(1j,), (0, 2 + 0j), (0.0, 3.0, 1j), (np.complex64(3),)])
def test_arange_refuses_complex_arguments(library, args):
    lib = LIBRARIES[library][0]
    with pytest.raises(ValueError, match="complex start/stop/step"):
        lib.numpy.arange(*args)


@pytest.mark.parametrize("misuse", sorted(MISUSES))
@pytest.mark.parametrize("staged", [True, False], ids=["jit", "make_jaxpr"])
def test_misuse_message_ends_with_the_errors_documentation_page(misuse, staged):
    program, error_name = MISUSES[misuse]
    for lib in (jax, fluxion):  # JAX's message ends the same way
        transform = lib.jit if staged else lib.make_jaxpr
        with pytest.raises(getattr(lib.errors, error_name)) as info:
            transform(lambda x: program(lib, x))(X)
        assert str(info.value).endswith(
            f"\nSee https://docs.jax.dev/en/latest/errors.html#jax.errors.{error_name}")


@pytest.mark.parametrize("name", ["JAXTypeError", "JAXIndexError", "KeyReuseError",
                                  "UnexpectedTracerError"])
def test_errors_made_from_a_message_link_their_documentation(name):
    page = f"x\nSee https://docs.jax.dev/en/latest/errors.html#jax.errors.{name}"
    assert str(getattr(jax.errors, name)("x")) == page
    assert str(getattr(fluxion.errors, name)("x")) == page


def test_errors_module_names_are_jaxs():
    public = {lib: {n for n in dir(lib.errors) if not n.startswith("_")}
              for lib in (jax, fluxion)}
    assert public[fluxion] == public[jax]
    assert fluxion.errors.JAXTypeError.__name__ == "JAXTypeError"
    assert issubclass(fluxion.errors.ConcretizationTypeError, fluxion.errors.JAXTypeError)


@pytest.mark.parametrize("misuse", ["int", "float", "np_asarray", "list_index"])
def test_misuse_message_first_line_is_jaxs(misuse):
    fun, error_name = MISUSES[misuse]
    first_lines = []
    for lib, errors in LIBRARIES.values():
        with pytest.raises(getattr(errors, error_name)) as info:
            lib.jit(lambda x: fun(lib, x))(X)
        first_lines.append(str(info.value).splitlines()[0])
    assert first_lines[0] == first_lines[1]
