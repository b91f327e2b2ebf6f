"""JVP and transpose rules of the structural, shape, reduction and dot_general primitives.

check_grads (forward and reverse, to order 2, in float64) for every differentiable
primitive; JVPs and VJPs against jax (float32) including JAX's conventions at ties and
boundaries; jit == eager; float0 tangents of integer values; preferred_element_type under
transposition; and the primitives the transposes emit.
"""
import jax
import jax.lax as jlax
import ml_dtypes
import numpy as np
import pytest

import fluxion
from fluxion import lax
from fluxion.test_util import check_grads

pytestmark = pytest.mark.filterwarnings("ignore:Casting complex values to real")

_r = np.random.default_rng(0)


def _randn(*shape):
    return _r.standard_normal(shape)


def _distinct(*shape):
    """Well-separated values (no ties, so max/min/clamp are smooth at them)."""
    n = int(np.prod(shape))
    return (_r.permutation(n) - n / 2.0).reshape(shape) / 4.0 + 0.05


I = np.int32
_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}
W = _randn(3, 4) > 0
# (name, fun(L, *args) for L = fluxion.lax or jax.lax, float64 args)
CASES = [
    ("squeeze", lambda L, x: L.squeeze(x, (1,)), [_randn(3, 1, 4)]),
    ("expand_dims", lambda L, x: L.expand_dims(x, (0, 2)), [_randn(3, 4)]),
    ("transpose", lambda L, x: L.transpose(x, (2, 0, 1)), [_randn(2, 3, 4)]),
    ("slice", lambda L, x: L.slice(x, (1, 0, 1), (3, 3, 4), (1, 2, 2)), [_randn(3, 3, 4)]),
    ("rev", lambda L, x: L.rev(x, (0, 2)), [_randn(2, 3, 4)]),
    ("concatenate", lambda L, x, y: L.concatenate([x, y, x], 1), [_randn(2, 3), _randn(2, 1)]),
    ("concatenate_constant", lambda L, x: L.concatenate([x, np.ones((2, 2))], 1), [_randn(2, 3)]),
    ("select_n_bool", lambda L, x, y: L.select_n(W, x, y), [_randn(3, 4), _randn(3, 4)]),
    ("select_n_int", lambda L, x, y, z: L.select_n(np.array([0, 2, 1], I), x, y, z),
     [_randn(3), _randn(3), _randn(3)]),
    ("pad", lambda L, x, v: L.pad(x, v, ((1, -2, 1), (-1, 2, 2), (0, 0, 0))),
     [_randn(3, 4, 2), np.float64(0.5)]),
    ("pad_constant_value", lambda L, x: L.pad(x, np.float64(2), ((2, 1, 0), (0, -3, 1))),
     [_randn(2, 3)]),
    ("dynamic_slice", lambda L, x: L.dynamic_slice(x, (I(1), I(-2)), (2, 2)), [_randn(4, 5)]),
    ("dynamic_slice_clamped", lambda L, x: L.dynamic_slice(x, (I(3),), (3,)), [_randn(4)]),
    ("dynamic_update_slice", lambda L, x, u: L.dynamic_update_slice(x, u, (I(1), I(3))),
     [_randn(4, 5), _randn(2, 3)]),
    ("clamp", lambda L, lo, x, hi: L.clamp(lo, x, hi),
     [_r.uniform(-0.7, -0.5, (3, 4)), _distinct(3, 4), _r.uniform(0.5, 0.7, (3, 4))]),
    ("clamp_scalar_bounds", lambda L, x: L.clamp(np.float64(-0.6), x, np.float64(0.62)),
     [_distinct(3, 4)]),
    ("convert_element_type", lambda L, x: L.convert_element_type(
        L.convert_element_type(x, _COMPLEX[np.dtype(x.dtype)]), x.dtype), [_randn(3)]),
    ("broadcast_in_dim", lambda L, x: L.broadcast_in_dim(x, (2, 3, 4), (0, 2)), [_randn(2, 1)]),
    ("reshape", lambda L, x: L.reshape(x, (4, 6)), [_randn(2, 3, 4)]),
    ("reshape_dimensions", lambda L, x: L.reshape(x, (4, 6), (2, 0, 1)), [_randn(2, 3, 4)]),
    ("reduce_sum", lambda L, x: L.reduce_sum(x, (0, 2)), [_randn(2, 3, 4)]),
    ("reduce_prod", lambda L, x: L.reduce_prod(x, (0, 2)),
     [np.array([[[1.5, 0.0], [2.0, 0.0], [-1.0, 0.5]],
                [[0.5, 3.0], [1.2, 0.0], [2.0, -0.7]],
                [[-1.1, 1.0], [0.9, 1.3], [0.8, 1.4]]])]),
    ("reduce_max", lambda L, x: L.reduce_max(x, (1,)), [_distinct(3, 4)]),
    ("reduce_min", lambda L, x: L.reduce_min(x, (0, 1)), [_distinct(3, 4)]),
    ("dot_general_matmul", lambda L, a, b: L.dot_general(a, b, (((1,), (0,)), ((), ()))),
     [_randn(2, 3), _randn(3, 4)]),
    ("dot_general_batch", lambda L, a, b: L.dot_general(a, b, (((0,), (2,)), ((2,), (0,)))),
     [_randn(4, 3, 2), _randn(2, 5, 4)]),
    ("dot_general_batch_two_contracting", lambda L, a, b: L.dot_general(
        a, b, (((3, 1), (1, 3)), ((0,), (2,)))), [_randn(2, 3, 5, 4), _randn(6, 4, 2, 3)]),
    ("dot_general_to_scalar", lambda L, a, b: L.dot_general(a, b, (((0,), (0,)), ((), ()))),
     [_randn(3), _randn(3)]),
    ("broadcast_scalar", lambda L, x: L.broadcast_in_dim(x, (2, 3), ()), [np.float64(1.5)]),
    ("slice_to_empty", lambda L, x: L.slice(x, (1, 0), (1, 3)), [_randn(2, 3)]),
    ("concatenate_empty", lambda L, x, y: L.concatenate([x, y], 0), [_randn(0, 2), _randn(1, 2)]),
]
CASE_IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("fun,args", [c[1:] for c in CASES], ids=CASE_IDS)
def test_check_grads(fun, args, x64):
    check_grads(lambda *xs: fun(lax, *xs), tuple(args), order=2, modes=("fwd", "rev"))


def _cotangent(out):
    rng = np.random.default_rng(7)
    ct = rng.standard_normal(np.shape(out))
    if np.iscomplexobj(out):
        ct = ct + 1j * rng.standard_normal(np.shape(out))
    return ct.astype(np.asarray(out).dtype)


def _assert_tree_close(got, expected):
    got, expected = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert np.asarray(g).dtype == np.asarray(e).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-6)


def _compare_with_jax(fun, args, dtype=np.float32):
    """jvp (all-ones tangents), vjp (random cotangent) and jit of the vjp, against jax."""
    args = tuple(np.asarray(a, dtype) for a in args)
    tangents = tuple(np.ones_like(a) for a in args)
    f, jf = (lambda *xs: fun(lax, *xs)), (lambda *xs: fun(jlax, *xs))
    _assert_tree_close(fluxion.jvp(f, args, tangents), jax.jvp(jf, args, tangents))
    out, pullback = fluxion.vjp(f, *args)
    ct = _cotangent(out)
    expected = jax.vjp(jf, *args)[1](ct)
    _assert_tree_close(pullback(ct), expected)
    jitted = fluxion.jit(lambda c, *xs: fluxion.vjp(f, *xs)[1](c))(ct, *args)
    _assert_tree_close(jitted, expected)


@pytest.mark.parametrize("fun,args", [c[1:] for c in CASES], ids=CASE_IDS)
def test_jvp_and_vjp_match_jax(fun, args):
    _compare_with_jax(fun, args)


# Points where the derivative is not unique, checked against JAX's choice.
TIES = [
    ("reduce_max_ties_split", lambda L, x: L.reduce_max(x, (1,)),
     [np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [-1.0, 5.0, 0.0]])]),
    ("reduce_min_ties_split", lambda L, x: L.reduce_min(x, (0,)),
     [np.array([[1.0, 3.0, -3.0], [1.0, 3.0, 2.0]])]),
    ("reduce_max_all_axes", lambda L, x: L.reduce_max(x, (0, 1)), [np.ones((2, 3))]),
    ("reduce_prod_one_zero", lambda L, x: L.reduce_prod(x, (0,)), [np.array([2.0, 0.0, 3.0])]),
    ("reduce_prod_two_zeros", lambda L, x: L.reduce_prod(x, (1,)),
     [np.array([[0.0, 4.0, 0.0], [1.0, 2.0, 3.0]])]),
    ("reduce_prod_empty", lambda L, x: L.reduce_prod(x, (1,)), [np.ones((2, 0))]),
    ("clamp_at_bounds", lambda L, lo, x, hi: L.clamp(lo, x, hi),
     [np.array([0.0, 0.0, 1.0, 0.0, 2.0]), np.array([0.0, 1.0, 1.0, -1.0, 3.0]),
      np.array([1.0, 1.0, 1.0, 2.0, 2.0])]),
    ("clamp_min_equals_max", lambda L, lo, x, hi: L.clamp(lo, x, hi),
     [np.ones(3), np.array([0.0, 1.0, 2.0]), np.ones(3)]),
    ("select_n_same_case", lambda L, x: L.select_n(W, x, x), [_randn(3, 4)]),
]


@pytest.mark.parametrize("fun,args", [c[1:] for c in TIES], ids=[c[0] for c in TIES])
def test_conventions_at_ties_match_jax(fun, args):
    _compare_with_jax(fun, args)


COMPLEX_CASES = ["dot_general_batch", "pad", "select_n_bool", "concatenate", "reduce_sum",
                 "dynamic_update_slice", "convert_element_type", "transpose"]


@pytest.mark.parametrize("name", COMPLEX_CASES)
def test_complex_jvp_and_vjp_match_jax(name):
    fun, args = dict((c[0], c[1:]) for c in CASES)[name]
    if name == "convert_element_type":  # complex -> real -> complex
        fun = lambda L, x: L.convert_element_type(L.convert_element_type(x, np.float32), x.dtype)
    _compare_with_jax(fun, [np.asarray(a) * (1 - 0.5j) for a in args], np.complex64)


def test_clamp_scalar_bound_gradient():
    """JAX cannot differentiate a scalar bound of an array clamp; here it sums the tangent
    over the elements the bound clamps."""
    x = np.array([-2.0, 0.0, 3.0, -1.5], np.float32)
    grads = fluxion.grad(lambda lo, hi: lax.reduce_sum(lax.clamp(lo, x, hi), (0,)),
                         argnums=(0, 1))(np.float32(-1), np.float32(1))
    assert [float(g) for g in grads] == [2.0, 1.0]


def test_reduce_precision_is_linear():
    x = np.array([1.0, 1.1, 1e-3, 3.3e5], np.float32)
    t = np.array([0.7, 1.3, -2.9, 1e-7], np.float32)
    f, jf = (lambda a: lax.reduce_precision(a, 5, 3)), (lambda a: jlax.reduce_precision(a, 5, 3))
    _assert_tree_close(fluxion.jvp(f, (x,), (t,)), jax.jvp(jf, (x,), (t,)))
    _assert_tree_close(fluxion.vjp(f, x)[1](t), jax.vjp(jf, x)[1](t))


def test_integer_values_have_float0_tangents():
    x = np.array([1.5, -2.5, 3.5, 0.5], np.float32)
    for fun in [lambda L, a: L.concatenate([a, L.rev(a, (0,))], 0),
                lambda L, a: L.pad(L.slice(a, (1,), (3,)), I(5), ((1, 1, 1),)),
                lambda L, a: L.reduce_max(L.reshape(a, (2, 2)), (0,)),
                lambda L, a: L.reduce_xor(a, (0,)),
                lambda L, a: L.select_n(a, a, a),
                lambda L, a: L.bitcast_convert_type(a, np.float32)]:
        def f(L, a):
            return fun(L, L.convert_element_type(a, np.int32))
        out, tangent = fluxion.jvp(lambda a: f(lax, a), (x,), (x,))
        j_out, j_tangent = jax.jvp(lambda a: f(jlax, a), (x,), (x,))
        np.testing.assert_array_equal(out, j_out)
        assert np.asarray(tangent).dtype == np.asarray(j_tangent).dtype
        assert np.shape(tangent) == np.shape(j_tangent)


def test_float_to_int_conversion_has_float0_tangent():
    x = np.array([1.5, -2.5], np.float32)
    _, t = fluxion.jvp(lambda a: lax.convert_element_type(a, np.int32), (x,), (np.ones(2, np.float32),))
    assert np.asarray(t).dtype == jax.dtypes.float0


def test_bitcast_tangent_is_zero():
    x = np.array([1.5, -2.5], np.float32)
    f = lambda L, a: L.bitcast_convert_type(L.bitcast_convert_type(a, np.int32), np.float32)
    t = np.ones(2, np.float32)
    _assert_tree_close(fluxion.jvp(lambda a: f(lax, a), (x,), (t,)),
                       jax.jvp(lambda a: f(jlax, a), (x,), (t,)))


def test_start_indices_are_not_differentiable():
    x = np.arange(5.0, dtype=np.float32)
    f = lambda L, a, i: L.reduce_sum(L.dynamic_slice(a, (i,), (2,)), (0,))
    grads = fluxion.grad(lambda a, i: f(lax, a, i), argnums=(0, 1), allow_int=True)(x, I(3))
    expected = jax.grad(lambda a, i: f(jlax, a, i), argnums=(0, 1), allow_int=True)(x, I(3))
    np.testing.assert_array_equal(grads[0], expected[0])
    assert np.asarray(grads[1]).dtype == jax.dtypes.float0
    g = lambda L, a, u, i: L.reduce_sum(L.dynamic_update_slice(a, u, (i,)), (0,))
    u = np.ones(2, np.float32)
    args = (x, u, I(-1))
    _assert_tree_close(fluxion.grad(lambda *a: g(lax, *a), argnums=(0, 1))(*args),
                       jax.grad(lambda *a: g(jlax, *a), argnums=(0, 1))(*args))


def test_select_n_which_is_not_differentiable():
    a, b, c = (np.arange(2.0, dtype=np.float32) + k for k in range(3))
    f = lambda L, w, *cases: L.reduce_sum(L.select_n(w, *cases), (0,))
    args = (np.array([2, 0], np.int32), a, b, c)
    grads = fluxion.grad(lambda *xs: f(lax, *xs), argnums=(0, 1, 2, 3), allow_int=True)(*args)
    expected = jax.grad(lambda *xs: f(jlax, *xs), argnums=(0, 1, 2, 3), allow_int=True)(*args)
    assert np.asarray(grads[0]).dtype == jax.dtypes.float0
    _assert_tree_close(grads[1:], expected[1:])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_dot_general_preferred_element_type_survives_transposition(dtype):
    a = _randn(2, 3).astype(dtype)
    b = _randn(3, 4).astype(dtype)
    f = lambda L, x, y: L.reduce_sum(L.dot_general(
        x, y, (((1,), (0,)), ((), ())), preferred_element_type=np.float32), (0, 1))
    grads = fluxion.grad(lambda x, y: f(lax, x, y), argnums=(0, 1))(a, b)
    expected = jax.grad(lambda x, y: f(jlax, x, y), argnums=(0, 1))(a, b)
    for g, e in zip(grads, expected):
        assert g.dtype == e.dtype == np.dtype(dtype)
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(e, np.float32), rtol=1e-2)
    jaxpr = fluxion.make_jaxpr(fluxion.grad(lambda x, y: f(lax, x, y), argnums=(0, 1)))(a, b)
    dots = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert len(dots) == 2
    assert all(e.params["preferred_element_type"] == np.float32 for e in dots)


def _primitive_names(jaxpr) -> list:
    return [e.primitive.name for e in jaxpr.jaxpr.eqns]


@pytest.mark.parametrize("fun,arg,expected", [
    (lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)), np.ones((3, 1), np.float32),
     ["broadcast_in_dim", "reduce_sum", "broadcast_in_dim"]),
    (lambda x: lax.slice(x, (1, 0), (3, 1)), np.ones((3, 1), np.float32),
     ["broadcast_in_dim", "pad"]),
    (lambda x: lax.dynamic_slice(x, (I(1), I(0)), (2, 1)), np.ones((3, 1), np.float32),
     ["broadcast_in_dim", "broadcast_in_dim", "dynamic_update_slice"]),
    (lambda x: lax.squeeze(x, (1,)), np.ones((3, 1), np.float32),
     ["broadcast_in_dim", "broadcast_in_dim"]),
    (lambda x: lax.transpose(x, (1, 0)), np.ones((3, 2), np.float32),
     ["broadcast_in_dim", "transpose"]),
])
def test_transposes_emit_jax_primitives(fun, arg, expected):
    """The backward pass of sum(fun(x)) uses the primitives JAX's uses."""
    axes = tuple(range(len(fluxion.eval_shape(fun, arg).shape)))
    grad = fluxion.grad(lambda x: lax.reduce_sum(fun(x), axes))
    assert _primitive_names(fluxion.make_jaxpr(grad)(arg)) == expected
