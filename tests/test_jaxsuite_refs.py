"""Mutable Refs where JAX 0.10.2's mutable_array_test found fluxion lacking: a Ref returned
from a traced function, and one Ref reaching scan / cond / vmap / custom_vjp twice (as two
operands, or as an operand and a closed-over value). Each case raises JAX's ValueError, with
the message JAX's own tests match; JAX (the oracle) is run on the same program."""
import functools
import re

import jax
import numpy as np
import jax.numpy as jjnp
import pytest

import fluxion
import fluxion.numpy as jnp


def _raises_like_jax(program, pattern):
    """`program(api, np_module)` raises ValueError matching `pattern` in JAX and in fluxion."""
    for api, numpy in ((jax, jjnp), (fluxion, jnp)):
        with pytest.raises(ValueError, match=pattern):
            program(api, numpy)


def test_jit_returning_a_new_ref_says_where_it_was_created():
    _raises_like_jax(lambda api, np_: api.jit(api.new_ref)(np_.arange(3)),
                     r"traced for jit returned a mutable array reference.*\n\n"
                     r".*was created on line")


def test_jit_returning_its_ref_argument_names_it():
    def program(api, np_):
        return api.jit(lambda x_ref: x_ref)(api.new_ref(np_.arange(3)))
    _raises_like_jax(program, r"traced for jit returned a mutable array reference.*\n\n"
                              r".*was passed in as the argument x_ref")


def test_jit_returning_a_ref_in_a_pytree_gives_its_path():
    def program(api, np_):
        return api.jit(lambda x: {"a": api.new_ref(x)})(np_.arange(3))
    _raises_like_jax(program, re.escape("at output tree path result['a']"))


def test_scan_and_cond_bodies_returning_a_ref():
    def scan(api, np_):
        return api.lax.scan(lambda c, _: (api.new_ref(0.), None), None, None, length=1)

    def cond(api, np_):
        return api.lax.cond(True, lambda: api.new_ref(0.), lambda: api.new_ref(0.))
    _raises_like_jax(scan, "traced for scan returned a mutable array reference of type")
    _raises_like_jax(cond, "traced for cond returned a mutable array reference of type")


def test_one_ref_as_two_operands():
    def scan(api, np_):
        x_ref = api.new_ref(0.)
        return api.lax.scan(lambda c, _: (None, None), (x_ref, x_ref), None, length=1)

    def cond(api, np_):
        x_ref = api.new_ref(0.)
        return api.lax.cond(True, lambda x1, x2: None, lambda x1, x2: None, x_ref, x_ref)

    def vmap(api, np_):
        x_ref = api.new_ref(np_.zeros((3, 3)))
        return api.vmap(lambda ref_1, ref_2: None)(x_ref, x_ref)
    _raises_like_jax(scan, r"appeared at both c\[0\] and c\[1\]")
    _raises_like_jax(cond, r"for cond.*at both x1 and x2")
    _raises_like_jax(vmap, "only one reference to a mutable array may be passed as an argument")


def test_one_ref_closed_over_and_passed():
    def scan(api, np_):
        x_ref = api.new_ref(0.)
        return api.lax.scan(lambda y_ref, _: (x_ref[...] + y_ref[...], None), x_ref, None,
                            length=1)

    def cond(api, np_):
        x_ref = api.new_ref(0.)
        return api.lax.cond(True, lambda y_ref: x_ref[...] + y_ref[...],
                            lambda y_ref: x_ref[...] + y_ref[...], x_ref)
    _raises_like_jax(scan, "closed over and passed as the argument y_ref")
    _raises_like_jax(cond, "closed over and passed as the argument y_ref")


def test_distinct_refs_still_run():
    x_ref, y_ref = fluxion.new_ref(1.), fluxion.new_ref(2.)
    out = fluxion.lax.cond(True, lambda a, b: a[...] + b[...], lambda a, b: a[...] - b[...],
                           x_ref, y_ref)
    assert float(out) == 3.0


@pytest.mark.parametrize("jit", [False, True])
def test_custom_vjp_primal_returning_a_ref(jit):
    def program(api, np_):
        @api.custom_vjp
        def f(ref):
            return ref
        f.defvjp(lambda ref: ..., lambda *_: ...)
        return (api.jit(f) if jit else f)(api.new_ref(0.))
    _raises_like_jax(program, "returned a mutable array")


def test_custom_vjp_primal_nondiff_argnum_returning_a_ref():
    def program(api, np_):
        @functools.partial(api.custom_vjp, nondiff_argnums=(0,))
        def f(_, ref):
            return ref
        f.defvjp(lambda _, ref: ..., lambda *_: ...)
        return f("hi", api.new_ref(0.))
    _raises_like_jax(program, "returned a mutable array")


def test_custom_vjp_fwd_returning_a_new_ref():
    def program(api, np_):
        @api.custom_vjp
        def g(x, ref):
            return x

        def g_fwd(x, _):
            return x, api.new_ref(0)
        g.defvjp(g_fwd, lambda ref, ct: ct)
        return api.vjp(g, 3., api.new_ref(0.))
    _raises_like_jax(program, "custom_vjp fwd function.*that was not an argument")


@pytest.mark.parametrize("jit", [False, True])
def test_custom_vjp_one_ref_twice(jit):
    def program(api, np_):
        @api.custom_vjp
        def f(x_ref, y_ref):
            return None
        f.defvjp(lambda x_ref, y_ref: (None, None), lambda _, g: (None, None))
        x_ref = api.new_ref(0.)
        return api.vjp(api.jit(f) if jit else f, x_ref, x_ref)
    _raises_like_jax(program, "x_ref and y_ref")


_WRITES = [  # (Ref dtype, value written to it)
    ("float32", 1.0), ("float32", 1), ("float32", True), ("float32", np.float32(1)),
    ("float32", "int32"), ("float32", "float16"), ("int32", 1), ("int32", 1.0),
    ("int32", np.int8(1)), ("int32", "int8"), ("int32", "uint8"), ("int32", "bool"),
    ("int32", "float32"), ("uint8", "int32"), ("bfloat16", 1.0), ("bfloat16", 1),
    ("bool", True), ("bool", 1),
]


@pytest.mark.parametrize("ref_dtype,value", _WRITES)
@pytest.mark.parametrize("jit", [False, True])
def test_write_of_another_dtype_is_cast_or_refused_as_in_jax(ref_dtype, value, jit):
    """A weak float into a float Ref and any integer into an integer Ref are cast; anything
    else raises ValueError (`v[...] += 1.0` on an int Ref, JAX issue 27683)."""
    def program(api, np_):
        def f():
            v = api.new_ref(np_.zeros((), ref_dtype))
            v[...] = np_.ones((), value) if isinstance(value, str) else value
            return v[...]
        return (api.jit(f) if jit else f)()

    try:
        expected = program(jax, jjnp)
    except ValueError:
        with pytest.raises(ValueError, match="Invalid dtype for `swap`"):
            program(fluxion, jnp)
        return
    got = program(fluxion, jnp)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_int_ref_plus_equals_float_raises():
    def program(api, np_):
        v = api.new_ref(np_.array([0, 0, 0]))
        v[...] += 1.0
    _raises_like_jax(program, "Invalid dtype for `swap`")


def _accumulate(api, np_, how):
    def f(r):
        r.addupdate(np_.float32(2.0))
        r.addupdate(np_.ones((), "float32"), ())

    r = api.new_ref(np_.zeros((4,)))
    if how == "vmap":
        api.vmap(f)(r)
    else:
        r2 = api.new_ref(np_.zeros(()))
        (api.jit(f) if how == "jit" else f)(r2)
        api.jit(lambda ref: ref.addupdate(np_.arange(4.0)))(r)
        r.addupdate(np_.ones(2), slice(1, 3))
        return np.asarray(r[...]), np.asarray(r2[...])
    return np.asarray(r[...])


@pytest.mark.parametrize("how", ["eager", "jit", "vmap"])
def test_ref_addupdate_method(how):
    """`ref.addupdate(x, idx=())` on an eager Ref and on traced ones (jit, vmap)."""
    np.testing.assert_equal(_accumulate(fluxion, jnp, how), _accumulate(jax, jjnp, how))


def test_arrays_have_no_addupdate():
    assert not hasattr(jnp.ones(3), "addupdate")
    fluxion.jit(lambda x: hasattr(x, "addupdate") and 1 / 0)(jnp.ones(3))


def _free_twice(api, np_):
    @api.jit
    def f():
        ref = api.empty_ref(api.ShapeDtypeStruct((), "float32"))
        api.free_ref(ref)
        api.free_ref(ref)
    return f()


def _read_after_free(api, np_):
    @api.jit
    def f(x):
        ref = api.new_ref(x)
        api.free_ref(ref)
        return ref[...]
    return f(1.)


@pytest.mark.parametrize("program", [_free_twice, _read_after_free])
def test_use_of_a_freed_ref_under_jit_raises(program):
    with pytest.raises(Exception):  # JAX: KeyError / ValueError, by accident of its checks
        program(jax, jjnp)
    with pytest.raises(ValueError, match="already frozen or freed"):
        program(fluxion, jnp)


def test_free_ref_after_last_use_still_differentiates():
    def f(api):
        @api.jit
        def g(x):
            ref = api.empty_ref(api.ShapeDtypeStruct((), "float32"))
            ref[...] = 2. * x
            out = ref[...]
            api.free_ref(ref)
            return out
        return api.jvp(g, (3.,), (1.,))
    np.testing.assert_allclose(np.asarray(f(fluxion)), np.asarray(f(jax)))
