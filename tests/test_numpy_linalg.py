"""Products, diagonals and einsum of fluxion.numpy against NumPy; jit against eager."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

RNG = np.random.default_rng(0)


def _r(*shape, dtype=np.float32):
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-3, 4, shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return RNG.random(shape) > 0.5
    if np.dtype(dtype).kind == "c":
        return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


# name: (function of module and operands, operands)
PRODUCTS = {
    "dot_mm": (lambda m, a, b: m.dot(a, b), (_r(3, 4), _r(4, 5))),
    "dot_mv": (lambda m, a, b: m.dot(a, b), (_r(3, 4), _r(4))),
    "dot_vv": (lambda m, a, b: m.dot(a, b), (_r(4), _r(4))),
    "dot_nd": (lambda m, a, b: m.dot(a, b), (_r(2, 3, 4), _r(5, 4, 2))),
    "dot_scalar": (lambda m, a, b: m.dot(a, b), (np.float32(2.0), _r(3))),
    "vdot": (lambda m, a, b: m.vdot(a, b), (_r(2, 3, dtype=np.complex64), _r(6, dtype=np.complex64))),
    "matmul": (lambda m, a, b: m.matmul(a, b), (_r(3, 4), _r(4, 2))),
    "matmul_batch": (lambda m, a, b: m.matmul(a, b), (_r(2, 3, 4), _r(2, 4, 5))),
    "matmul_bcast": (lambda m, a, b: m.matmul(a, b), (_r(2, 1, 3, 4), _r(5, 4, 2))),
    "matmul_bcast_ones": (lambda m, a, b: m.matmul(a, b), (_r(1, 3, 3, 4), _r(2, 1, 4, 2))),
    "matmul_vec_mat": (lambda m, a, b: m.matmul(a, b), (_r(4), _r(2, 4, 3))),
    "matmul_mat_vec": (lambda m, a, b: m.matmul(a, b), (_r(2, 3, 4), _r(4))),
    "matmul_vec_vec": (lambda m, a, b: m.matmul(a, b), (_r(4), _r(4))),
    "matmul_empty": (lambda m, a, b: m.matmul(a, b), (_r(0, 3), _r(3, 2))),
    "operator_matmul": (lambda m, a, b: a.T @ b if m is fnp else a.T @ b, (_r(4, 3), _r(4, 2))),
    "tensordot_int": (lambda m, a, b: m.tensordot(a, b, 2), (_r(2, 3, 4), _r(3, 4, 5))),
    "tensordot_axes": (lambda m, a, b: m.tensordot(a, b, ((0, 2), (2, 0))), (_r(2, 3, 4), _r(4, 5, 2))),
    "tensordot_zero": (lambda m, a, b: m.tensordot(a, b, 0), (_r(2), _r(3))),
    "inner": (lambda m, a, b: m.inner(a, b), (_r(2, 3), _r(4, 3))),
    "outer": (lambda m, a, b: m.outer(a, b), (_r(2, 2), _r(3))),
    "kron": (lambda m, a, b: m.kron(a, b), (_r(2, 3), _r(3, 1, 2))),
    "dot_int8": (lambda m, a, b: m.dot(a, b), (_r(3, 4, dtype=np.int8), _r(4, dtype=np.int8))),
    "matmul_bool": (lambda m, a, b: m.matmul(a, b), (_r(3, 4, dtype=np.bool_), _r(4, 2, dtype=np.bool_))),
    "matmul_complex": (lambda m, a, b: m.matmul(a, b),
                       (_r(2, 3, dtype=np.complex64), _r(3, 2, dtype=np.complex64))),
    "matmul_mixed": (lambda m, a, b: m.matmul(a, b), (_r(2, 3, dtype=np.int8), _r(3, 2))),
}
DIAGONALS = {
    "trace": lambda m, x: m.trace(x),
    "trace_offset": lambda m, x: m.trace(x, offset=1, axis1=1, axis2=2),
    "diagonal": lambda m, x: m.diagonal(x, axis1=0, axis2=2),
    "diagonal_neg": lambda m, x: m.diagonal(x, offset=-1, axis1=-1, axis2=1),
    "diagonal_out_of_range": lambda m, x: m.diagonal(x, offset=7, axis1=1, axis2=2),
    "trace_int_dtype": lambda m, x: m.trace(x.astype(np.int8), dtype=np.int16),
}
EINSUMS = [
    ("ij,jk->ik", (3, 4), (4, 5)), ("ij,jk", (3, 4), (4, 5)), ("ii->i", (3, 3)), ("ii", (3, 3)),
    ("ij->ji", (2, 3)), ("ij->", (2, 3)), ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    ("i,j->ij", (3,), (4,)), ("i,i->", (5,), (5,)), ("iij,jk->ik", (3, 3, 4), (4, 2)),
    ("...ij,...jk->...ik", (2, 3, 4), (1, 4, 5)), ("ij...,jk...->ik...", (3, 4, 2), (4, 5, 2)),
    ("ijk,jil->kl", (2, 3, 4), (3, 2, 5)), ("ij,jk,kl->il", (2, 3), (3, 4), (4, 5)),
    ("a,ab,bc,c->", (3,), (3, 4), (4, 5), (5,)), ("ij,ij->ij", (2, 3), (2, 3)),
    ("i,->i", (3,), ()), ("ijij->ij", (2, 3, 2, 3)), ("ji", (2, 3)),
]


def _compare(got, want, what):
    got = np.asarray(got)
    assert got.shape == np.shape(want), what
    want = np.asarray(want)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=what)


def test_products_match_numpy():
    outs = fluxion.jit(lambda ops: {k: f(fnp, *ops[k]) for k, (f, _) in PRODUCTS.items()})(
        {k: v for k, (_, v) in PRODUCTS.items()})
    for name, (fn, operands) in PRODUCTS.items():
        _compare(outs[name], fn(np, *operands), name)


def test_product_dtypes():
    assert fnp.dot(_r(2, dtype=np.int8), _r(2, dtype=np.int8)).dtype == np.int8
    assert fnp.matmul(_r(2, 2, dtype=np.bool_), _r(2, 2, dtype=np.bool_)).dtype == np.bool_
    assert fnp.matmul(_r(2, 2, dtype=np.int8), _r(2, 2)).dtype == np.float32
    out = fnp.matmul(_r(2, 2, dtype=np.int8), _r(2, 2, dtype=np.int8),
                     preferred_element_type=np.int32)
    assert out.dtype == np.int32
    a = np.full((2, 2), 100, np.int8)
    np.testing.assert_array_equal(np.asarray(fnp.dot(a, a, preferred_element_type=np.int32)),
                                  np.full((2, 2), 20000))
    assert fnp.dot(1.0, 2.0).weak_type
    np.testing.assert_allclose(np.asarray(fnp.dot(_r(2, 2), _r(2, 2), precision="highest")).shape,
                               (2, 2))


def test_diagonals_match_numpy():
    x = _r(3, 4, 5)
    outs = fluxion.jit(lambda a: {k: f(fnp, a) for k, f in DIAGONALS.items()})(x)
    for name, fn in DIAGONALS.items():
        _compare(outs[name], fn(np, x), name)
        assert outs[name].dtype == fn(fnp, x).dtype


def test_einsum_matches_numpy():
    operands = [[_r(*shape) for shape in shapes] for _, *shapes in EINSUMS]
    outs = fluxion.jit(lambda ops: [fnp.einsum(spec, *o) for (spec, *_), o in zip(EINSUMS, ops)])(
        operands)
    for (spec, *_), ops, got in zip(EINSUMS, operands, outs):
        _compare(got, np.einsum(spec, *ops), spec)


def test_einsum_options_and_forms():
    a, b, c = _r(2, 3), _r(3, 4), _r(4, 5)
    want = np.einsum("ij,jk,kl->il", a, b, c)
    for optimize in (False, True, "greedy", "optimal"):
        _compare(fnp.einsum("ij,jk,kl->il", a, b, c, optimize=optimize), want, str(optimize))
    _compare(fnp.einsum(a, [0, 1], b, [1, 2], [0, 2]), a @ b, "interleaved")
    v = _r(3)
    _compare(fnp.einsum(a, [Ellipsis, 1], v, [1]), np.einsum(a, [Ellipsis, 1], v, [1]),
             "interleaved ellipsis")
    i8 = _r(3, 3, dtype=np.int8)
    out = fnp.einsum("ij,jk->ik", i8, i8, preferred_element_type=np.int32)
    assert out.dtype == np.int32
    _compare(out, i8.astype(np.int32) @ i8.astype(np.int32), "preferred")
    assert fnp.einsum("ij,jk", i8, _r(3, 3)).dtype == np.float32
    path, _ = fnp.einsum_path("ij,jk,kl->il", a, b, c)
    assert len(path) == 2


def test_einsum_path_contracting_three_operands_at_once_is_not_implemented():
    import jax.numpy as jnp
    arrays = [_r(2, 3), _r(2, 4), _r(2, 5)]
    for module in (jnp, fnp):
        with pytest.raises(NotImplementedError, match="3 or more operands"):
            module.einsum("ij,ik,il->jkl", *arrays, optimize=[(0, 1, 2)])


def test_einsum_swaps_operands_rather_than_transpose_the_product():
    x, y = _r(2, 3, 4), _r(4, 5)
    jaxpr = fluxion.make_jaxpr(lambda a, b: fnp.einsum("ijk,kl->ijl", a, b))(x, y)
    assert [str(e.primitive) for e in jaxpr.eqns] == ["dot_general"]
    for fn in (fnp.einsum, fluxion.jit(fnp.einsum, static_argnums=0)):
        _compare(fn("ijk,kl->ijl", x, y), np.einsum("ijk,kl->ijl", x, y), "no transpose")
        _compare(fn("kl,ijk->lij", y, x), np.einsum("kl,ijk->lij", y, x), "swapped")


def test_eager_matches_jit():
    names = ["matmul_bcast", "matmul_vec_mat", "tensordot_axes", "kron", "matmul_bool"]
    jitted = fluxion.jit(lambda ops: {k: PRODUCTS[k][0](fnp, *ops[k]) for k in names})(
        {k: PRODUCTS[k][1] for k in names})
    for k in names:
        eager = PRODUCTS[k][0](fnp, *PRODUCTS[k][1])
        assert eager.dtype == jitted[k].dtype
        np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted[k]), rtol=1e-6, err_msg=k)
    x = _r(2, 3, 3)
    for spec in ["bii->b", "bij,bjk->bik"]:
        ops = (x,) if spec.count(",") == 0 else (x, x)
        np.testing.assert_allclose(np.asarray(fnp.einsum(spec, *ops)),
                                   np.asarray(fluxion.jit(lambda *o: fnp.einsum(spec, *o))(*ops)),
                                   rtol=1e-6)


@pytest.mark.parametrize("call, error", [
    (lambda: fnp.dot(np.ones(3), np.ones(4)), TypeError),
    (lambda: fnp.matmul(np.ones((2, 3)), np.ones((4, 5))), TypeError),
    (lambda: fnp.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 5))), ValueError),
    (lambda: fnp.matmul(1.0, np.ones(3)), ValueError),
    (lambda: fnp.tensordot(np.ones((2, 3)), np.ones((3, 2)), [[0], [0, 1]]), TypeError),
    (lambda: fnp.tensordot(np.ones((2, 3)), np.ones((3, 2)), -1), ValueError),
    (lambda: fnp.einsum("ij,jk", np.ones((2, 3)), np.ones((4, 5))), ValueError),
    (lambda: fnp.diagonal(np.ones(3)), ValueError),
    (lambda: fnp.diagonal(np.ones((2, 2)), axis1=1, axis2=1), TypeError),  # JAX: TypeError
    (lambda: fnp.trace(np.ones((2, 2)), out=1), NotImplementedError),
    (lambda: fnp.dot([1, 2], [1, 2]), TypeError),
])
def test_errors(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m.broadcast_to(m.ones((3, 4, 5)), (4, 5)), ValueError,
     "Cannot broadcast to shape with fewer dimensions"),
    (lambda m: m.tensordot(m.ones((2, 2)), m.ones((2, 2)), axes=("a", "b")), TypeError,
     "tensordot requires both axes lists to be either ints, tuples or lists"),
])
def test_shape_errors_say_what_is_wrong(call, error, message):
    # Fewer target dimensions read as incompatible shapes; string axes failed in operator.index.
    import jax.numpy as jnp
    for module in (jnp, fnp):
        with pytest.raises(error, match=message):
            call(module)
