"""fluxion.numpy array creation against NumPy (values) and JAX (dtypes, weak types)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp


def _same(got, want, weak=None):
    got_np = np.asarray(got)
    assert got_np.shape == np.shape(want)
    np.testing.assert_allclose(got_np.astype(np.float64), np.asarray(want, np.float64), rtol=1e-6)
    if weak is not None:
        assert got.weak_type == weak


def test_array_and_asarray():
    x = fnp.array([[1, 2], [3, 4.5]])
    assert x.dtype == np.float32 and not x.weak_type
    _same(x, [[1, 2], [3, 4.5]])
    assert fnp.array(1).weak_type and fnp.array(1).dtype == np.int32
    assert not fnp.array(1, dtype=np.int32).weak_type
    assert fnp.array(np.float64(1)).dtype == np.float32
    assert fnp.array([]).dtype == np.float32 and fnp.array([]).shape == (0,)
    assert fnp.array([1.0, np.float16(2)]).dtype == np.float16
    assert fnp.array([[1, 2]], ndmin=4).shape == (1, 1, 1, 2)
    a = fnp.arange(3)
    assert fnp.asarray(a) is a
    w = fnp.full((), 2.0)
    assert fnp.array(w).weak_type and not fnp.asarray(w, np.float32).weak_type
    mixed = fnp.array([a, np.arange(3), [7, 8, 9]])
    _same(mixed, [[0, 1, 2], [0, 1, 2], [7, 8, 9]])
    _same(fnp.asarray((1, 2), dtype=np.int8), [1, 2])
    with pytest.raises(OverflowError):
        fnp.array(2 ** 40)
    with pytest.raises(OverflowError):
        fnp.int8(300)
    with pytest.raises(TypeError):
        fnp.array(object())


def test_array_of_tracers_stacks():
    def build(x, y):
        return fnp.array([[x, y], [y, 1.0]]), fnp.asarray([x, 2])
    (m, v), jm = fluxion.jit(build)(np.float32(3), np.float32(4)), jnp.array([[3.0, 4.0], [4.0, 1.0]])
    _same(m, jm)
    assert m.dtype == jm.dtype
    _same(v, [3, 2])
    assert v.dtype == np.float32


@pytest.mark.parametrize("make, want", [
    (lambda m: m.zeros((2, 3)), np.zeros((2, 3))),
    (lambda m: m.ones(4, dtype=np.int8), np.ones(4)),
    (lambda m: m.empty((0, 2)), np.zeros((0, 2))),
    (lambda m: m.full((2, 2), 7), np.full((2, 2), 7)),
    (lambda m: m.full((2, 3), np.array([1.0, 2.0, 3.0])), np.full((2, 3), [1.0, 2.0, 3.0])),
    (lambda m: m.zeros_like(np.ones((2, 1), np.uint8)), np.zeros((2, 1))),
    (lambda m: m.ones_like(np.ones(3), shape=(2, 2)), np.ones((2, 2))),
    (lambda m: m.full_like(np.ones(3, np.int32), 5.7), np.full(3, 5)),
    (lambda m: m.full_like(np.ones(2), np.array([1.0, 2.0])), [1.0, 2.0]),
    (lambda m: m.empty_like(np.ones(2)), np.zeros(2)),
    (lambda m: m.arange(5), np.arange(5)),
    (lambda m: m.arange(2.5), np.arange(2.5)),
    (lambda m: m.arange(1, 7, 2), np.arange(1, 7, 2)),
    (lambda m: m.arange(0, 1, 0.25), np.arange(0, 1, 0.25)),
    (lambda m: m.arange(5, 1, -1), np.arange(5, 1, -1)),
    (lambda m: m.arange(-3), np.arange(-3)),
    (lambda m: m.linspace(0, 1, 5), np.linspace(0, 1, 5)),
    (lambda m: m.linspace(2, 3, 4, endpoint=False), np.linspace(2, 3, 4, endpoint=False)),
    (lambda m: m.linspace(0, 10, 4, dtype=int), np.linspace(0, 10, 4, dtype=int)),
    (lambda m: m.linspace(np.array([0.0, 1.0]), 5.0, 3, axis=-1),
     np.linspace(np.array([0.0, 1.0]), 5.0, 3, axis=-1)),
    (lambda m: m.linspace(0, 1, 1), np.linspace(0, 1, 1)),
    (lambda m: m.linspace(0, 1, 0), np.linspace(0, 1, 0)),
    (lambda m: m.logspace(0, 3, 4), np.logspace(0, 3, 4)),
    (lambda m: m.logspace(1, 2, 3, base=2.0), np.logspace(1, 2, 3, base=2.0)),
    (lambda m: m.eye(3), np.eye(3)),
    (lambda m: m.eye(2, 4, k=1), np.eye(2, 4, k=1)),
    (lambda m: m.eye(3, k=-2, dtype=bool), np.eye(3, k=-2)),
    (lambda m: m.identity(2, dtype=np.int32), np.identity(2)),
    (lambda m: m.tri(3, 4, k=1), np.tri(3, 4, k=1)),
    (lambda m: m.tril(np.arange(12.0).reshape(3, 4), -1), np.tril(np.arange(12.0).reshape(3, 4), -1)),
    (lambda m: m.triu(np.arange(24).reshape(2, 3, 4), 1), np.triu(np.arange(24).reshape(2, 3, 4), 1)),
    (lambda m: m.diag(np.arange(1, 4)), np.diag(np.arange(1, 4))),
    (lambda m: m.diag(np.arange(1, 3), k=2), np.diag(np.arange(1, 3), k=2)),
    (lambda m: m.diag(np.arange(1, 3), k=-1), np.diag(np.arange(1, 3), k=-1)),
    (lambda m: m.diag(np.arange(12).reshape(3, 4), 1), np.diag(np.arange(12).reshape(3, 4), 1)),
    (lambda m: m.diag(np.arange(12).reshape(3, 4), -2), np.diag(np.arange(12).reshape(3, 4), -2)),
], ids=lambda v: None if callable(v) else "")
def test_values_and_dtypes(make, want):
    got, expected = make(fnp), make(jnp)
    _same(got, want)
    assert got.dtype == expected.dtype and got.weak_type == expected.weak_type


def test_meshgrid():
    x, y, z = np.arange(3), np.arange(4.0), np.arange(2)
    for indexing in ("xy", "ij"):
        for sparse in (False, True):
            got = fnp.meshgrid(x, y, z, indexing=indexing, sparse=sparse)
            want = np.meshgrid(x, y, z, indexing=indexing, sparse=sparse)
            for g, w in zip(got, want):
                _same(g, w)
    assert [g.shape for g in fnp.meshgrid(x)] == [(3,)]


def test_creation_under_jit_and_traced_arguments():
    def build(k, fill):
        return (fnp.eye(3, k=k), fnp.full((2,), fill), fnp.zeros_like(fill), fnp.arange(4),
                fnp.linspace(fill, 2 * fill, 3))
    eye, full, zeros, rng, lin = fluxion.jit(build)(np.int32(1), np.float32(2.0))
    _same(eye, np.eye(3, k=1))
    _same(full, [2.0, 2.0])
    _same(zeros, 0.0)
    _same(rng, np.arange(4))
    _same(lin, [2.0, 3.0, 4.0])
    with pytest.raises(fluxion.errors.ConcretizationTypeError):
        fluxion.jit(lambda n: fnp.arange(n))(3)


@pytest.mark.parametrize("call, error", [
    (lambda: fnp.zeros((2, -1)), TypeError),
    (lambda: fnp.zeros(2.5), TypeError),
    (lambda: fnp.linspace(0, 1, -1), ValueError),
    (lambda: fnp.eye(-1), ValueError),
    (lambda: fnp.tril(np.ones(3)), ValueError),
    (lambda: fnp.diag(np.ones((2, 2, 2))), ValueError),
    (lambda: fnp.meshgrid(np.ones((2, 2))), ValueError),
    (lambda: fnp.meshgrid(np.ones(2), indexing="ji"), ValueError),
    (lambda: fnp.array([1, 2], order="F"), NotImplementedError),
    (lambda: fnp.full(2, [1, 2]), TypeError),
])
def test_errors(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.parametrize("value,dtype", [(4294967295, np.uint32), (2**40, np.float32),
                                         (-1, np.uint8), (300, np.int8), (2**40, None)])
def test_array_of_python_int_checks_the_requested_dtype(value, dtype):
    def outcome(module):
        try:
            r = module.array(value, dtype=dtype)
        except OverflowError:
            return "OverflowError"
        return str(r.dtype), r.weak_type, np.asarray(r).item()
    assert outcome(fnp) == outcome(jnp)


UINT32_MAX = 2**32 - 1


@pytest.mark.parametrize("make", [
    lambda m: m.array([UINT32_MAX, 1], m.uint32),
    lambda m: m.asarray([[UINT32_MAX], [1]], m.uint32),
    lambda m: m.array([UINT32_MAX, np.uint32(3)]),
    lambda m: m.array([UINT32_MAX, 1], m.uint8),        # OverflowError in both
    lambda m: m.array([2**33, 1.0]),                    # a float array: no int check
    lambda m: m.array([2**33], m.float32),
    lambda m: m.array([2**40, 1]),                      # OverflowError in both
    lambda m: m.full(3, UINT32_MAX, m.uint32),
    lambda m: m.full(3, 2**40, m.int8),                 # wraps, as lax.full does
    lambda m: m.full(3, 2**40),                         # wraps too (weak int32)
    lambda m: m.full_like(m.zeros(2, m.uint32), UINT32_MAX),
    lambda m: m.full_like(m.zeros(2, m.float32), 2**40),
    lambda m: m.zeros(3, m.uint32).at[0].set(UINT32_MAX),
    lambda m: m.zeros(3, m.uint32).at[1].add(2**31),
    lambda m: m.zeros(3, m.int8).at[0].set(2**40),      # OverflowError in both
])
def test_python_ints_are_checked_against_the_target_dtype(make):
    # A Python int listed for (or written into) a uint32 array was checked against int32.
    def outcome(module):
        try:
            r = make(module)
        except OverflowError:
            return "OverflowError"
        return str(r.dtype), r.weak_type, np.asarray(r).tolist()
    assert outcome(fnp) == outcome(jnp)
    if outcome(jnp) != "OverflowError":
        assert fluxion.jit(lambda: make(fnp))().tolist() == outcome(jnp)[2]


@pytest.mark.parametrize("make", [
    lambda m: m.eye(3, k=2**40), lambda m: m.eye(3, k=-2**40), lambda m: m.eye(3, 4, k=2**31),
    lambda m: m.tri(3, k=np.int64(-2**40)), lambda m: m.tri(3, 5, k=2**31 - 1),
])
def test_diagonal_offsets_past_int32_select_nothing_or_everything(make):
    # The offset wrapped to int32: eye(3, k=2**40) was the identity.
    np.testing.assert_array_equal(make(fnp), make(np))


@pytest.mark.parametrize("make", [lambda m: m.tri(3, k=2**40),
                                  lambda m: m.tril(m.ones((3, 3)), k=2**40),
                                  lambda m: m.triu(m.ones((3, 3)), k=-2**40)])
def test_python_int_offsets_past_int32_overflow_in_tri(make):
    for module in (jnp, fnp):
        with pytest.raises(OverflowError):
            make(module)


@pytest.mark.parametrize("name, args", [("zeros_like", ()), ("ones_like", ()), ("empty_like", ()),
                                        ("full_like", (2,)), ("full_like", (2.5,)),
                                        ("full_like", (np.arange(3),))])
def test_like_functions_take_duck_typed_shapes(name, args):
    # Objects with shape and dtype (ShapeDtypeStruct) raised TypeError; JAX accepts them.
    want = getattr(jnp, name)(jax.ShapeDtypeStruct((2, 3), np.dtype("int32")), *args)
    for fn in (getattr(fnp, name), fluxion.jit(getattr(fnp, name), static_argnums=0)):
        got = fn(fluxion.ShapeDtypeStruct((2, 3), np.dtype("int32")), *args)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert got.weak_type == want.weak_type
        if name != "empty_like":
            np.testing.assert_array_equal(got, want)


def test_array_of_a_list_holding_none_is_a_value_error():
    for module in (jnp, fnp):
        with pytest.raises(ValueError, match="None is not a valid value for jnp.array"):
            module.array([0.0, None])


@pytest.mark.parametrize("make", [lambda m: m.zeros(2, 3), lambda m: m.ones(2, 3),
                                  lambda m: m.empty(2, 3), lambda m: m.zeros(2, 3.0),
                                  lambda m: m.arange(3, dtype=2), lambda m: m.full(2, 3, 4),
                                  lambda m: m.ones(3).astype(1)])
def test_a_number_is_no_dtype(make):
    # zeros(2, 3) gave int32 zeros (3 was read as a value whose dtype to take).
    with pytest.raises(TypeError, match="Cannot interpret") as jax_error:
        make(jnp)
    with pytest.raises(TypeError, match="Cannot interpret") as fluxion_error:
        make(fnp)
    assert ("Did you accidentally write" in str(jax_error.value)) == (
        "Did you accidentally write" in str(fluxion_error.value))
    assert fnp.zeros(2, np.int32(3)).dtype == np.int32  # a NumPy scalar lends its dtype


def test_copy_order_ndmin_passed_positionally_warn():
    x = fnp.array([1, 2, 3])
    for module in (jnp, fnp):
        with pytest.warns(DeprecationWarning, match="positionally is deprecated"):
            out = module.array(np.arange(3), None, True, "K", 2)
        assert out.shape == (1, 3)
    with pytest.warns(DeprecationWarning):
        assert fnp.array(x, None, False).shape == (3,)
    for module in (jnp, fnp):
        with pytest.raises(TypeError, match="got multiple values for argument 'copy'"):
            module.array(x, None, True, copy=False)
        with pytest.raises(TypeError, match="takes at most 5 positional arguments"):
            module.array(x, None, True, "K", 0, "extra")


@pytest.mark.parametrize("make_copy", [lambda x: fnp.array(x), lambda x: fnp.array(x, copy=True),
                                       lambda x: x.copy(), lambda x: fnp.copy(x),
                                       lambda x: x.astype(x.dtype, copy=True)])
def test_copies_survive_donation_of_the_original(make_copy):
    # Copies were the original object: donating it deleted the "copy" too.
    x = fnp.arange(4.0)
    y = make_copy(x)
    assert y is not x
    fluxion.jit(lambda t: t * 2, donate_argnums=0)(x)
    np.testing.assert_array_equal(y, np.arange(4.0))
    assert fnp.asarray(y) is y and y.astype(y.dtype) is y  # no copy asked, none made


def test_array_copy_of_a_traced_value_is_a_copy_equation():
    # Under jvp/vmap the input object itself came back, so donating it deleted the "copy".
    x = fnp.ones(10)
    f = lambda v: fnp.array(v, copy=True)  # noqa: E731
    y, _ = fluxion.jvp(f, (x,), (fnp.ones(10),))
    assert y is not x and fluxion.vmap(f)(x) is not x
    assert [str(e.primitive) for e in fluxion.make_jaxpr(f)(x).eqns] == ["copy"]
    assert [str(e.primitive) for e in fluxion.make_jaxpr(fnp.asarray)(x).eqns] == []
    np.testing.assert_array_equal(fluxion.grad(lambda v: f(v).sum())(x), np.ones(10))


def test_shape_errors_show_a_tuple_and_the_jit_hint():
    # zeros(1.) showed 'got 1.0.'; a traced dimension gave no hint about static_argnums.
    with pytest.raises(TypeError, match=r"got \(1\.0,\)\."):
        fnp.zeros(1.0)
    with pytest.raises(TypeError, match="If using `jit`, try using `static_argnums`"):
        fluxion.jit(lambda n: fnp.zeros((n, 2)))(3)
    with pytest.raises(TypeError, match="If using `jit`, try using `static_argnums`"):
        jax.jit(lambda n: jnp.zeros((n, 2)))(3)


@pytest.mark.parametrize("make", [
    lambda np_, n: np_.eye(n), lambda np_, n: np_.eye(2, n), lambda np_, n: np_.identity(n),
    lambda np_, n: np_.tri(n)])
def test_matrix_of_traced_or_float_size_raises_jaxs_type_error(make):
    import jax
    messages = []
    for lib, np_ in ((fluxion, fnp), (jax, jax.numpy)):
        for call in (lambda: lib.jit(lambda n: make(np_, n))(3), lambda: make(np_, 2.5)):
            with pytest.raises(TypeError) as info:
                call()
            assert type(info.value) is TypeError
            messages.append(str(info.value).splitlines()[0])
    assert messages[:2] == messages[2:]


def _primitives_of_array_from_traced_list(lib, np_):
    closed = lib.make_jaxpr(lambda x, y: np_.array([[x, y], [y, x]]))(np.float32(1), np.float32(2))
    return sorted({e.primitive.name for e in closed.eqns})


def test_array_of_a_list_of_tracers_copies_no_element():
    # each element got a `copy` of its own before being stacked into the new array
    assert "copy" not in _primitives_of_array_from_traced_list(fluxion, fnp)
    assert (_primitives_of_array_from_traced_list(fluxion, fnp)
            == _primitives_of_array_from_traced_list(jax, jnp))
