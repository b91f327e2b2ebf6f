"""The shortcuts on the hot dispatch paths give exactly what the general paths give.

jit's fast path (positional Arrays), the eager operator shortcut (Array op Array of one aval)
and interned avals are checked against NumPy and against the general paths they skip.
"""
import pickle

import ml_dtypes
import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion._src.core import ShapedArray
from fluxion.errors import UnexpectedTracerError

OPERATORS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide}
DTYPES = [np.bool_, np.int32, np.uint8, np.float32, np.complex64, ml_dtypes.bfloat16]


def _apply(symbol, x, y):
    return {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
            "/": lambda: x / y}[symbol]()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("symbol", list(OPERATORS))
def test_eager_operator_repeated_calls_match_numpy(symbol, dtype):
    a = np.array([3, 1, 2], dtype=dtype)
    b = np.array([1, 2, 1], dtype=dtype)
    if dtype == np.bool_ and symbol == "-":
        with pytest.raises(TypeError):
            _apply(symbol, jnp.asarray(a), jnp.asarray(b))
        return
    expected = OPERATORS[symbol](a.astype(np.float32) if dtype == ml_dtypes.bfloat16 else a,
                                 b.astype(np.float32) if dtype == ml_dtypes.bfloat16 else b)
    x, y = jnp.asarray(a), jnp.asarray(b)
    # The first call compiles through the general path, the later ones take the shortcut.
    results = [_apply(symbol, x, y) for _ in range(3)]
    general = {"+": jnp.add, "-": jnp.subtract, "*": jnp.multiply,
               "/": jnp.true_divide}[symbol](x, y)
    for r in results:
        assert r.dtype == general.dtype and r.weak_type == general.weak_type
        np.testing.assert_allclose(np.asarray(r, np.float64 if r.dtype.kind != "c" else None),
                                   np.asarray(expected), rtol=1e-2)
        np.testing.assert_array_equal(np.asarray(r), np.asarray(general))


def test_integer_true_division_is_not_lax_division():
    x, y = jnp.array([7, -7], jnp.int32), jnp.array([2, 2], jnp.int32)
    jax.lax.div(x, y)  # compiles integer division for these avals
    for _ in range(2):
        r = x / y
        assert r.dtype == jnp.float32
        np.testing.assert_array_equal(np.asarray(r), [3.5, -3.5])


def test_weak_operands_keep_promotion():
    x = jnp.asarray(2.0)  # weakly typed float32
    assert x.weak_type
    for _ in range(2):
        r = x + x
        assert r.weak_type and r.dtype == jnp.float32
    f = jnp.float16(3) * jnp.asarray(2.0)
    assert f.dtype == jnp.float16


def test_operator_results_follow_x64():
    x = jnp.arange(3)
    first = x + x
    with jax.enable_x64(True):
        y = jnp.arange(3)
        assert (y + y).dtype == jnp.int64
        assert (x + x).dtype == jnp.int32
    assert first.dtype == (x + x).dtype == jnp.int32


def test_jit_fast_path_general_arguments_and_flags():
    f = jax.jit(lambda a, b: a * b + 1)
    x = jnp.arange(4.0)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(f(x, x)), np.arange(4.0) ** 2 + 1)
    np.testing.assert_array_equal(np.asarray(f(np.ones(4, np.float32), x)), np.arange(4.0) + 1)
    np.testing.assert_array_equal(np.asarray(f(x, 2.0)), 2 * np.arange(4.0) + 1)
    calls = []

    def g(a):
        calls.append(type(a))
        return a + 1
    jg = jax.jit(g)
    jg(x), jg(x)
    assert len(calls) == 1  # traced once, then cached
    with jax.disable_jit():
        np.testing.assert_array_equal(np.asarray(jg(x)), np.arange(4.0) + 1)
    assert len(calls) == 2 and calls[-1] is type(x)  # ran op by op, not from the cache
    with jax.enable_x64(True):
        assert jg(jnp.arange(4.0)).dtype == jnp.float64


def test_multiple_outputs_and_pytrees_through_fast_path():
    f = jax.jit(lambda a, b: {"s": a + b, "d": (a - b, a * 0)})
    x, y = jnp.arange(3.0), jnp.ones(3)
    for _ in range(2):
        out = f(x, y)
        np.testing.assert_array_equal(np.asarray(out["s"]), np.arange(3.0) + 1)
        np.testing.assert_array_equal(np.asarray(out["d"][0]), np.arange(3.0) - 1)
        np.testing.assert_array_equal(np.asarray(out["d"][1]), np.zeros(3))


def test_pytree_arguments_through_fast_path():
    calls = []

    def g(params, x):
        calls.append(1)
        for w, b in params:
            x = x * w + b
        return x, [b for _, b in params]
    f = jax.jit(g)
    params = [(jnp.full(2, 2.0), jnp.ones(2)), (jnp.full(2, 3.0), jnp.zeros(2))]
    x = jnp.arange(2.0)
    for _ in range(3):
        out, bs = f(params, x)
        np.testing.assert_array_equal(np.asarray(out), (np.arange(2.0) * 2 + 1) * 3)
        assert len(bs) == 2
    assert len(calls) == 1
    assert any(not isinstance(k[0], ShapedArray) for k in f._fast_cache)  # a pytree entry
    out, _ = f(params[:1], x)  # another structure: traced again, right answer
    np.testing.assert_array_equal(np.asarray(out), np.arange(2.0) * 2 + 1)
    out, _ = f([(w.astype(jnp.int32), b.astype(jnp.int32)) for w, b in params],
               jnp.arange(2))  # other dtypes
    assert out.dtype == jnp.int32 and len(calls) == 3
    out, _ = f([(np.full(2, 2.0, np.float32), np.ones(2, np.float32))] + params[1:], x)
    np.testing.assert_array_equal(np.asarray(out), (np.arange(2.0) * 2 + 1) * 3)
    gone = jnp.ones(2)
    gone.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        f([(gone, jnp.ones(2))] + params[1:], x)
    leaked = []
    jax.make_jaxpr(lambda a: leaked.append(a) or a)(jnp.ones(2))
    with pytest.raises(UnexpectedTracerError):
        f([(leaked[0], jnp.ones(2))] + params[1:], x)


def test_leaked_tracer_on_fast_paths_raises():
    leaked = []

    def keep(a):
        leaked.append(a)
        return a
    jax.make_jaxpr(keep)(jnp.ones(3))
    f = jax.jit(lambda a: a * 2)
    ones = jnp.ones(3)
    f(ones), f(ones)
    with pytest.raises(UnexpectedTracerError, match="make_jaxpr"):
        f(leaked[0])
    with pytest.raises(UnexpectedTracerError):
        jax.lax.add(leaked[0], ones)


def test_avals_are_interned():
    a = ShapedArray((2, 3), np.float32)
    assert ShapedArray([2, 3], "float32") is a
    assert ShapedArray((np.int64(2), 3), np.dtype(np.float32), False) is a
    assert ShapedArray((2, 3), np.float32, weak_type=True) is not a
    assert a.update(weak_type=True) is ShapedArray((2, 3), np.float32, True)
    assert all(type(d) is int for d in ShapedArray((np.int32(2),), np.int8).shape)
    assert pickle.loads(pickle.dumps(a)) is a
    assert {a: 1}[ShapedArray((2, 3), jnp.float32)] == 1
    with pytest.raises(TypeError):
        ShapedArray((2.5,), np.float32)


def test_foreign_arrays_with_an_aval_are_rejected_clearly():
    import jax as real_jax
    foreign = real_jax.numpy.ones(3)
    for _ in range(2):
        with pytest.raises(TypeError, match="not a valid fluxion type"):
            jax.lax.add(foreign, foreign)
    with pytest.raises(TypeError):
        jax.jit(lambda a: a + 1)(foreign)


WHERE_CASES = [(True, 1, 2.5), (np.array([True, False]), 1, 2),
               (np.array([1, 0]), np.float16(1), 2.0), (True, 2**40, 1),
               (np.array([True, False]), np.arange(2), 1.5), (False, np.int8(3), 300),
               (np.array([[True], [False]]), np.arange(3.0), np.float32(-1))]


@pytest.mark.parametrize("case", range(len(WHERE_CASES)))
def test_eager_where_runs_compiled_and_matches_jax(case):
    # Eager three-argument where runs as one jitted executable; results, dtypes, weak types
    # and errors must be those of the traced path and of JAX.
    import jax as real_jax

    def outcome(np_module, args):
        try:
            r = np_module.where(*args)
        except Exception as e:  # noqa: BLE001 - the error class is what is compared
            return type(e).__name__
        return str(r.dtype), r.weak_type, np.asarray(r).tolist()

    args = WHERE_CASES[case]
    expected = outcome(real_jax.numpy, args)
    assert outcome(jnp, args) == expected
    assert outcome(jnp, args) == expected  # the cached executable
    if not isinstance(expected, str):
        traced = jax.jit(lambda *a: jnp.where(*a))(*args)
        assert (str(traced.dtype), traced.weak_type, np.asarray(traced).tolist()) == expected


SCALARS = [2.0, -0.0, 0.5, 1e10, float("inf"), float("nan")]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.complex64, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("symbol", list(OPERATORS))
def test_eager_operator_with_python_float_matches_jax(symbol, dtype):
    # Array op float (and float op Array) take a shortcut once compiled; it must give JAX's
    # values, dtype and weak type, including overflow to inf and the sign of zero.
    import jax as real_jax
    values = np.array([3, -1, 0.25], dtype=dtype)
    ours, theirs = jnp.asarray(values), real_jax.numpy.asarray(values)
    for scalar in SCALARS:
        for _ in range(2):  # compile, then the shortcut
            for swap in (False, True):
                got = _apply(symbol, scalar, ours) if swap else _apply(symbol, ours, scalar)
                want = _apply(symbol, scalar, theirs) if swap else _apply(symbol, theirs, scalar)
                assert got.dtype == want.dtype and got.weak_type == want.weak_type
                wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
                g, w = np.asarray(got).astype(wide), np.asarray(want).astype(wide)
                np.testing.assert_array_equal(g, w)
                np.testing.assert_array_equal(np.signbit(g.real), np.signbit(w.real))


def test_eager_operator_with_python_float_under_x64(x64):
    x = jnp.arange(3.0)
    assert x.dtype == jnp.float64
    for _ in range(2):
        r = x * 0.1
        assert r.dtype == jnp.float64
        np.testing.assert_array_equal(np.asarray(r), np.arange(3.0) * 0.1)


class _AttrDict(dict):
    """A dict read by attribute, as the training cookbook's `dot_dict`: a missing attribute
    raises KeyError, not AttributeError."""
    __getattr__ = dict.__getitem__


def test_jit_of_a_dict_whose_missing_attributes_raise_key_error():
    jax.tree_util.register_pytree_node(
        _AttrDict, lambda d: (tuple(d[k] for k in sorted(d)), tuple(sorted(d))),
        lambda keys, values: _AttrDict(zip(keys, values)))
    f = jax.jit(lambda p, x: p.w * x + p.b)
    params = _AttrDict(w=jnp.array([1.0, 2.0]), b=jnp.array([0.5, 0.5]))
    for scale in (1.0, 3.0):  # the first call compiles, the second takes the fast path
        out = f(params, jnp.array([scale, scale]))
        np.testing.assert_allclose(np.asarray(out), np.array([1.0, 2.0]) * scale + 0.5)
