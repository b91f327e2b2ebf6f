"""Shape polymorphism, more: linear algebra over a symbolic batch, shape assertions in the
exported module, non-linear dimension specifications, and `jit(f).lower` with symbolic
shapes, each checked against `jax.export` (out_avals, values, error messages)."""
import re

import numpy as np
import pytest

import fluxion as fx
import fluxion.numpy as fnp
from fluxion import export, lax as flax
from fluxion._src.core import ShapedArray
from fluxion._src.export import exported as exported_mod

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax import export as jexport, lax as jlax  # noqa: E402


def _both(build):
    """(fluxion function, JAX function) from `build(numpy_module, lax_module)`."""
    return build(fnp, flax), build(jjnp, jlax)


def _aval_key(a):
    return tuple(str(d) for d in a.shape), np.dtype(a.dtype).name


def _spd(a, m):
    return a @ m.swapaxes(a, -1, -2) + 3 * m.eye(a.shape[-1], dtype=a.dtype)


# ---------------------------------------------------------------------------------------------
# 1. Linear algebra with a symbolic batch dimension

LINALG = {
    "inv": lambda m, l: m.linalg.inv,
    "solve": lambda m, l: lambda a: m.linalg.solve(a, a[..., ::-1]),
    "solve_vector_rhs": lambda m, l: lambda a: m.linalg.solve(a, a[..., :1])[..., 0],
    "det": lambda m, l: m.linalg.det,
    "slogdet": lambda m, l: lambda a: tuple(m.linalg.slogdet(a)),
    "qr": lambda m, l: lambda a: tuple(m.linalg.qr(a)),
    "qr_r": lambda m, l: lambda a: m.linalg.qr(a, mode="r"),
    "svd": lambda m, l: lambda a: tuple(m.linalg.svd(a)),
    "svdvals": lambda m, l: lambda a: m.linalg.svd(a, compute_uv=False),
    "eigh": lambda m, l: lambda a: tuple(m.linalg.eigh(_spd(a, m))),
    "eigvalsh": lambda m, l: lambda a: m.linalg.eigvalsh(_spd(a, m)),
    "eig": lambda m, l: lambda a: tuple(m.linalg.eig(a)),
    "eigvals": lambda m, l: m.linalg.eigvals,
    "cholesky": lambda m, l: lambda a: m.linalg.cholesky(_spd(a, m)),
    "lu": lambda m, l: lambda a: tuple(l.linalg.lu(a)),
    "lu_pivots_to_permutation": lambda m, l: lambda a: l.linalg.lu_pivots_to_permutation(
        l.linalg.lu(a)[1], 3),
    "pinv": lambda m, l: m.linalg.pinv,
    "norm_2": lambda m, l: lambda a: m.linalg.norm(a, ord=2, axis=(-2, -1)),
    "norm_nuc": lambda m, l: lambda a: m.linalg.norm(a, ord="nuc", axis=(-2, -1)),
    "norm_fro": lambda m, l: lambda a: m.linalg.norm(a, axis=(-2, -1)),
    "matrix_rank": lambda m, l: m.linalg.matrix_rank,
    "cond": lambda m, l: m.linalg.cond,
    "matrix_power": lambda m, l: lambda a: m.linalg.matrix_power(a, 3),
    "triangular_solve": lambda m, l: lambda a: l.linalg.triangular_solve(
        a, a[..., ::-1, :], left_side=True, lower=True),
    "schur": lambda m, l: lambda a: tuple(l.linalg.schur(a)),
    "hessenberg": lambda m, l: lambda a: tuple(l.linalg.hessenberg(a)),
    "tridiagonal": lambda m, l: lambda a: tuple(l.linalg.tridiagonal(_spd(a, m))),
    "householder_product": lambda m, l: lambda a: l.linalg.householder_product(a, a[..., 0] / 4),
    "tridiagonal_solve": lambda m, l: lambda a: l.linalg.tridiagonal_solve(
        a[..., 0] * 0.1, a[..., 1] + 2, a[..., 2] * 0.1, a),
    "qr_full": lambda m, l: lambda a: tuple(l.linalg.qr(a, full_matrices=True)),
    "svdvals_fn": lambda m, l: m.linalg.svdvals,
    "matrix_norm_nuc": lambda m, l: lambda a: m.linalg.matrix_norm(a, ord="nuc"),
    "vector_norm": lambda m, l: lambda a: m.linalg.vector_norm(a, axis=-1),
    "cross": lambda m, l: lambda a: m.linalg.cross(a, a[..., ::-1, :]),
    "tensordot": lambda m, l: lambda a: m.linalg.tensordot(a, a, axes=([1, 2], [1, 2])),
    "symmetric_product": lambda m, l: lambda a: l.linalg.symmetric_product(a, a),
    "cholesky_update": lambda m, l: lambda a: l.linalg.cholesky_update(
        m.linalg.cholesky(_spd(a, m))[0], a[0, 0]),
    "grad_inv": lambda m, l: (jax if m is jjnp else fx).grad(lambda a: m.linalg.inv(a).sum()),
    "grad_eigh": lambda m, l: (jax if m is jjnp else fx).grad(
        lambda a: m.linalg.eigh(_spd(a, m))[0].sum()),
    "grad_svdvals": lambda m, l: (jax if m is jjnp else fx).grad(
        lambda a: m.linalg.svd(a, compute_uv=False).sum()),
    "grad_slogdet": lambda m, l: (jax if m is jjnp else fx).grad(
        lambda a: m.linalg.slogdet(a)[1].sum()),
}
# Results whose sign or phase LAPACK leaves free are compared through invariants.
_INVARIANT = {"eig": lambda w, v: [np.sort_complex(w), np.abs(v).sum(-2)],
              "eigvals": lambda w: [np.sort_complex(w)]}


def _matrices(n, dtype=np.float32):
    rng = np.random.default_rng(n)
    return (rng.standard_normal((n, 3, 3)) + 3 * np.eye(3)).astype(dtype)


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg_symbolic_batch_matches_jax(name):
    ours, theirs = _both(LINALG[name])
    b, = export.symbolic_shape("b")
    jb, = jexport.symbolic_shape("b")
    exp = export.export(fx.jit(ours))(fx.ShapeDtypeStruct((b, 3, 3), np.float32))
    jexp = jexport.export(jax.jit(theirs))(jax.ShapeDtypeStruct((jb, 3, 3), np.float32))
    assert [_aval_key(a) for a in exp.out_avals] == [_aval_key(a) for a in jexp.out_avals]
    assert "tensor<?x3x3xf32>" in exp.mlir_module()
    for n in (1, 5):
        x = _matrices(n)
        got = fx.tree_util.tree_leaves(exp.call(x))
        want = jax.tree_util.tree_leaves(jexp.call(x))
        if name in _INVARIANT:
            got = _INVARIANT[name](*map(np.asarray, got))
            want = _INVARIANT[name](*map(np.asarray, want))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.shape(g) == np.shape(w)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=2e-4)


def test_linalg_symbolic_artifact_round_trip_and_grad():
    b, = export.symbolic_shape("b")
    exp = export.export(fx.jit(lambda a: fnp.linalg.inv(a) @ fnp.linalg.cholesky(_spd(a, fnp))))(
        fx.ShapeDtypeStruct((b, 3, 3), np.float32))
    back = export.deserialize(exp.serialize(vjp_order=1))
    for n in (1, 5):
        x = _matrices(n, back.in_avals[0].dtype)
        want = np.linalg.inv(x) @ np.linalg.cholesky(x @ x.swapaxes(-1, -2) + 3 * np.eye(3))
        np.testing.assert_allclose(np.asarray(back.call(x)), want, rtol=1e-3, atol=1e-4)
    x = _matrices(2, back.in_avals[0].dtype)
    g = fx.grad(lambda a: back.call(a).sum())(x)
    want = fx.grad(lambda a: (fnp.linalg.inv(a) @ fnp.linalg.cholesky(_spd(a, fnp))).sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-3, atol=1e-4)


SQUARE = {
    "inv": lambda m, l: m.linalg.inv,
    "solve": lambda m, l: lambda a: m.linalg.solve(a, a.T),
    "det": lambda m, l: m.linalg.det,
    "slogdet": lambda m, l: lambda a: tuple(m.linalg.slogdet(a)),
    "cholesky": lambda m, l: lambda a: m.linalg.cholesky(_spd(a, m)),
    "eigvalsh": lambda m, l: lambda a: m.linalg.eigvalsh(_spd(a, m)),
    "lu": lambda m, l: lambda a: tuple(l.linalg.lu(a)),
    "triangular_solve": lambda m, l: lambda a: l.linalg.triangular_solve(a, a.T, lower=True),
    "pinv": lambda m, l: m.linalg.pinv,
    "cond": lambda m, l: m.linalg.cond,
    "matrix_power": lambda m, l: lambda a: m.linalg.matrix_power(a, 2),
    "trace": lambda m, l: m.trace,
    "diagonal": lambda m, l: m.diagonal,
    "scaled_by_size": lambda m, l: lambda a: a * (a.shape[0] * 0.5) + 1.5 * a.shape[0],
}


@pytest.mark.parametrize("name", sorted(SQUARE))
def test_linalg_symbolic_square_matrices_match_jax(name):
    ours, theirs = _both(SQUARE[name])
    b, = export.symbolic_shape("b")
    jb, = jexport.symbolic_shape("b")
    exp = export.export(fx.jit(ours))(fx.ShapeDtypeStruct((b, b), np.float32))
    jexp = jexport.export(jax.jit(theirs))(jax.ShapeDtypeStruct((jb, jb), np.float32))
    assert [_aval_key(a) for a in exp.out_avals] == [_aval_key(a) for a in jexp.out_avals]
    for n in (1, 4):
        x = _matrices(n)[0, :n, :n] if n <= 3 else \
            (np.random.default_rng(n).standard_normal((n, n)) + 3 * np.eye(n)).astype(np.float32)
        got, want = fx.tree_util.tree_leaves(exp.call(x)), jax.tree_util.tree_leaves(jexp.call(x))
        for g, w in zip(got, want):
            assert np.shape(g) == np.shape(w)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=2e-4)


NON_SQUARE = {
    "svd_b4": (lambda m, l: lambda a: tuple(m.linalg.svd(a, full_matrices=False)), "b, 4"),
    "svdvals_4b": (lambda m, l: lambda a: m.linalg.svd(a, compute_uv=False), "4, b"),
    "norm_2_b4": (lambda m, l: lambda a: m.linalg.norm(a, 2), "b, 4"),
    "grad_inv_bb": (lambda m, l: (jax if m is jjnp else fx).grad(lambda a: m.linalg.inv(a).sum()),
                    "b, b"),
    "grad_det_bb": (lambda m, l: (jax if m is jjnp else fx).grad(m.linalg.det), "b, b"),
}


@pytest.mark.parametrize("name", sorted(NON_SQUARE))
def test_linalg_symbolic_matrix_sizes_match_jax(name):
    build, spec = NON_SQUARE[name]
    ours, theirs = _both(build)
    shape = export.symbolic_shape(spec)
    jshape = jexport.symbolic_shape(spec)
    exp = export.export(fx.jit(ours))(fx.ShapeDtypeStruct(shape, np.float32))
    jexp = jexport.export(jax.jit(theirs))(jax.ShapeDtypeStruct(jshape, np.float32))
    # min/max print in another order ("min(4, b)" against JAX's "min(b, 4)"): compare values.
    for n in (2, 5):
        env = {"b": n}
        assert [tuple(d.evaluate(env) if export.is_symbolic_dim(d) else d for d in a.shape)
                for a in exp.out_avals] == \
            [tuple(d._evaluate(env) if not isinstance(d, int) else d for d in a.shape)
             for a in jexp.out_avals]
        x = (np.random.default_rng(n).standard_normal(
            tuple(n if export.is_symbolic_dim(d) else d for d in shape))
            + 3 * np.eye(*(n if export.is_symbolic_dim(d) else d for d in shape))
        ).astype(np.float32)
        got, want = fx.tree_util.tree_leaves(exp.call(x)), jax.tree_util.tree_leaves(jexp.call(x))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=2e-4)
        # and the same program for the concrete shape
        for g, w in zip(got, fx.tree_util.tree_leaves(fx.jit(ours)(x))):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)


def test_pinv_lstsq_of_symbolic_tall_matrices_match_numpy():
    # JAX raises InconclusiveDimensionOperation for these ('b' < '4'); fluxion uses max_dim.
    b, = export.symbolic_shape("b")
    exp = export.export(fx.jit(lambda a: (fnp.linalg.pinv(a), fnp.linalg.lstsq(a, a[:, 0])[0])))(
        fx.ShapeDtypeStruct((b, 4), np.float64))
    for n in (1, 6):
        a = np.random.default_rng(n).standard_normal((n, 4))
        pinv, sol = exp.call(a)
        np.testing.assert_allclose(np.asarray(pinv), np.linalg.pinv(a), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.asarray(sol), np.linalg.lstsq(a, a[:, 0], rcond=None)[0],
                                   rtol=1e-4, atol=1e-5)


def test_diagonal_offsets_of_symbolic_matrices_match_numpy():
    # JAX raises InconclusiveDimensionOperation for these; fluxion takes min/max of the sizes.
    b, = export.symbolic_shape("b")
    f = lambda a: (fnp.diagonal(a, -1), fnp.diagonal(a, 2), fnp.diagonal(a[:, :3], 1))  # noqa: E731
    exp = export.export(fx.jit(f))(fx.ShapeDtypeStruct((b, b), np.float32))
    assert [str(a.shape) for a in exp.out_avals[:2]] == ["(b - 1,)", "(max(0, b - 2),)"]
    for n in (1, 2, 5):
        x = np.arange(n * n, dtype=np.float32).reshape(n, n)
        for g, w in zip(exp.call(x), (np.diagonal(x, -1), np.diagonal(x, 2),
                                      np.diagonal(x[:, :3], 1))):
            np.testing.assert_array_equal(np.asarray(g), w)


def test_symbolic_matrix_dimension_still_inconclusive_for_qr():
    b, = export.symbolic_shape("b")
    with pytest.raises(export.InconclusiveDimensionOperation, match="inconclusive"):
        export.export(fx.jit(lambda a: fnp.linalg.qr(a)[1]))(
            fx.ShapeDtypeStruct((b, 4), np.float32))


# ---------------------------------------------------------------------------------------------
# 2. Shape assertions in the module

def _export_both(fun_ours, fun_theirs, specs, constraints=()):
    shapes = export.symbolic_shape(", ".join(specs), constraints=constraints)
    jshapes = jexport.symbolic_shape(", ".join(specs), constraints=constraints)
    ours = export.export(fx.jit(fun_ours))(*[fx.ShapeDtypeStruct((d, 2), np.float32)
                                              for d in shapes])
    theirs = jexport.export(jax.jit(fun_theirs))(*[jax.ShapeDtypeStruct((d, 2), np.float32)
                                                   for d in jshapes])
    return ours, theirs


def _jax_error(fun, *args):
    with pytest.raises(ValueError) as info:
        fun(*args)
    return str(info.value)


ASSERTION_CASES = {
    "b, 2*b": (["b", "2*b"], (), [(3, 6), (1, 2)], [(3, 5), (3, 7), (0, 0)]),
    "b, b": (["b", "b"], (), [(4, 4)], [(4, 3)]),
    "b >= 16": (["b"], ("b >= 16",), [(16,), (20,)], [(3,), (15,)]),
    "b, c with c >= b + 2": (["b", "c"], ("c >= b + 2",), [(2, 4)], [(2, 3)]),
    "2*b + 1": (["2*b + 1"], (), [(5,), (3,)], [(4,), (1,)]),
}


@pytest.mark.parametrize("case", sorted(ASSERTION_CASES))
def test_shape_assertions_match_jax(case):
    specs, constraints, good, bad = ASSERTION_CASES[case]

    def make(m):
        return lambda *xs: sum(x.sum() * x.shape[0] for x in xs)
    ours, theirs = _export_both(make(fnp), make(jjnp), specs, constraints)
    text, jtext = ours.mlir_module(), theirs.mlir_module()
    assert text.count("@shape_assertion") == jtext.count("@shape_assertion") > 0
    for sizes in good:
        args = [np.ones((s, 2), np.float32) for s in sizes]
        np.testing.assert_allclose(np.asarray(ours.call(*args)), np.asarray(theirs.call(*args)))
    for sizes in bad:
        args = [np.ones((s, 2), np.float32) for s in sizes]
        want = _jax_error(theirs.call, *args)
        assert _jax_error(ours.call, *args) == want
        assert _jax_error(fx.jit(ours.call), *args) == want
        # The module's own assertions, without the Python checks of `call`: StableHLO's shape
        # refinement evaluates them for the static shapes and fails with the same message.
        avals = tuple(ShapedArray(a.shape, a.dtype) for a in args)
        wrapper = exported_mod._static_wrapper(ours, avals, [ShapedArray((), np.float32)], None)
        assert _jax_error(exported_mod._refine, wrapper, "f", avals) == want


@pytest.mark.parametrize("constraints,specs,good,bad", [
    (["a == b + 1"], ["a", "b"], [(3, 2)], [(3, 3), (1, 0)]),
    (["b == 4"], ["b", "2*b"], [(4, 8)], []),
    (["a == 2*b", "b >= 2"], ["a", "b"], [(4, 2)], [(2, 1), (5, 2)]),
])
def test_equality_constraints_rewrite_like_jax(constraints, specs, good, bad):
    def make(m):
        return lambda *xs: sum(x.sum() * x.shape[0] for x in xs)
    ours, theirs = _export_both(make(fnp), make(jjnp), specs, constraints)
    assert [_aval_key(a) for a in ours.in_avals] == [_aval_key(a) for a in theirs.in_avals]
    assert ours.mlir_module().count("@shape_assertion") == \
        theirs.mlir_module().count("@shape_assertion")
    for sizes in good:
        args = [np.ones((s, 2), np.float32) for s in sizes]
        np.testing.assert_allclose(np.asarray(ours.call(*args)), np.asarray(theirs.call(*args)))
    for sizes in bad:
        args = [np.ones((s, 2), np.float32) for s in sizes]
        assert _jax_error(ours.call, *args) == _jax_error(theirs.call, *args)
    back = export.deserialize(ours.serialize())
    assert [_aval_key(a) for a in back.in_avals] == [_aval_key(a) for a in ours.in_avals]


def test_shape_assertion_survives_serialization():
    b, = export.symbolic_shape("b")
    exp = export.export(fx.jit(lambda x, y: x + y[:x.shape[0]]))(
        fx.ShapeDtypeStruct((b,), np.float32), fx.ShapeDtypeStruct((2 * b,), np.float32))
    back = export.deserialize(exp.serialize())
    assert back.mlir_module().count("@shape_assertion") == 2  # b >= 1, and 2*b consistent
    args = (np.ones(3, np.float32), np.ones(5, np.float32))
    avals = tuple(ShapedArray(a.shape, a.dtype) for a in args)
    wrapper = exported_mod._static_wrapper(back, avals, [ShapedArray((3,), np.float32)], None)
    with pytest.raises(ValueError, match=re.escape("args[1].shape[0] (= 5) and the "
                                                   "specification '2*b' (= 6)")):
        exported_mod._refine(wrapper, "f", avals)
    np.testing.assert_allclose(back.call(np.ones(3, np.float32), np.arange(6, dtype=np.float32)),
                               1 + np.arange(3))


def test_no_shape_assertion_for_static_or_lowered_functions():
    assert "shape_assertion" not in export.export(fx.jit(lambda x: x * 2))(
        np.ones(3, np.float32)).mlir_module()
    b, = export.symbolic_shape("b")
    lowered = fx.jit(lambda x: x * 2).lower(fx.ShapeDtypeStruct((b,), np.float32))
    assert "shape_assertion" not in lowered.as_text()


# ---------------------------------------------------------------------------------------------
# 3. Non-linear dimension specifications

NONLINEAR = {
    "b, b*b": ([(3,), (9,)], [(3,), (8,)]),
    "b, floordiv(b, 2)": ([(7,), (3,)], [(7,), (4,)]),
    "b, mod(b, 3)": ([(7,), (1,)], [(7,), (2,)]),
    "b, b*b + 1, 2*b": ([(2,), (5,), (4,)], [(2,), (5,), (5,)]),
    "b*b, b": ([(16,), (4,)], [(15,), (4,)]),
    "b, c, b*c": ([(2,), (3,), (6,)], [(2,), (3,), (5,)]),
}


@pytest.mark.parametrize("spec", sorted(NONLINEAR))
def test_nonlinear_specs_match_jax(spec):
    good, bad = NONLINEAR[spec]
    shapes = export.symbolic_shape(spec)
    jshapes = jexport.symbolic_shape(spec)

    def make(m):
        return lambda *xs: [m.concatenate([x, x]) * x.shape[0] for x in xs]
    ours = export.export(fx.jit(make(fnp)))(*[fx.ShapeDtypeStruct((d,), np.float32)
                                              for d in shapes])
    theirs = jexport.export(jax.jit(make(jjnp)))(*[jax.ShapeDtypeStruct((d,), np.float32)
                                                   for d in jshapes])
    assert [_aval_key(a) for a in ours.in_avals] == [_aval_key(a) for a in theirs.in_avals]
    assert [_aval_key(a) for a in ours.out_avals] == [_aval_key(a) for a in theirs.out_avals]
    args = [np.arange(s[0], dtype=np.float32) for s in good]
    for g, w in zip(ours.call(*args), theirs.call(*args)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w))
    args = [np.arange(s[0], dtype=np.float32) for s in bad]
    assert _jax_error(ours.call, *args) == _jax_error(theirs.call, *args)


@pytest.mark.parametrize("spec", ["b*b", "floordiv(b, 2)", "2*b*b", "b + c"])
def test_unsolvable_variable_error_matches_jax(spec):
    ours = _jax_error(lambda: export.export(fx.jit(lambda x: x))(
        fx.ShapeDtypeStruct(export.symbolic_shape(spec), np.float32)))
    theirs = _jax_error(lambda: jexport.export(jax.jit(lambda x: x))(
        jax.ShapeDtypeStruct(jexport.symbolic_shape(spec), np.float32)))
    assert ours.startswith("Cannot solve for values of dimension variables")
    # The variables are listed as a Python set, whose order can differ between the two.
    set_re = re.compile(r"\{[^}]*\}")
    assert set_re.sub("{}", ours, count=1) == set_re.sub("{}", theirs, count=1)
    assert sorted(re.findall(r"'(\w+)'", set_re.search(ours).group())) == \
        sorted(re.findall(r"'(\w+)'", set_re.search(theirs).group()))


# ---------------------------------------------------------------------------------------------
# 4. jit(f).trace / lower with symbolic shapes

def test_trace_with_symbolic_shapes_matches_jax():
    b, = export.symbolic_shape("b")
    jb, = jexport.symbolic_shape("b")
    traced = fx.jit(lambda x: fnp.tanh(x.T @ x).reshape(-1)).trace(
        fx.ShapeDtypeStruct((b, 3), np.float32))
    jtraced = jax.jit(lambda x: jjnp.tanh(x.T @ x).reshape(-1)).trace(
        jax.ShapeDtypeStruct((jb, 3), np.float32))
    assert _aval_key(traced.out_info) == _aval_key(jtraced.out_info)
    traced = fx.jit(lambda x: jnp_concat(x)).trace(fx.ShapeDtypeStruct((b, 3), np.float32))
    jtraced = jax.jit(lambda x: jjnp.concatenate([x, x[1:]])).trace(
        jax.ShapeDtypeStruct((jb, 3), np.float32))
    assert _aval_key(traced.out_info) == _aval_key(jtraced.out_info) == (("2*b - 1", "3"),
                                                                         "float32")


def jnp_concat(x):
    return fnp.concatenate([x, x[1:]])


def _signature(text):
    """The argument and result types of @main, and its dimension-variable arguments."""
    line = next(l for l in text.splitlines() if "func.func public @main" in l)
    return (re.findall(r"tensor<[^>]*>", line),
            re.findall(r'jax\.global_constant = "(\w+)"', line))


def test_lower_with_symbolic_shapes_matches_jax_signature():
    b, c = export.symbolic_shape("b, c")
    jb, jc = jexport.symbolic_shape("b, c")

    def make(m):
        return lambda x, y, w: (m.tanh(x @ w).sum(0) * x.shape[0], y + 1)
    lowered = fx.jit(make(fnp)).lower(fx.ShapeDtypeStruct((c, 3), np.float32),
                                      fx.ShapeDtypeStruct((b, c), np.float32),
                                      fx.ShapeDtypeStruct((3, 2), np.float32))
    jlowered = jax.jit(make(jjnp)).lower(jax.ShapeDtypeStruct((jc, 3), np.float32),
                                         jax.ShapeDtypeStruct((jb, jc), np.float32),
                                         jax.ShapeDtypeStruct((3, 2), np.float32))
    ours, theirs = _signature(lowered.as_text()), _signature(jlowered.as_text())
    assert ours == theirs
    assert ours[1] == ["b", "c"] and ours[0][:4] == ["tensor<i32>", "tensor<i32>",
                                                     "tensor<?x3xf32>", "tensor<?x?xf32>"]
    assert [_aval_key(a) for a in fx.tree_util.tree_leaves(lowered.out_info)] == \
        [_aval_key(a) for a in jax.tree_util.tree_leaves(jlowered.out_info)]
    assert [_aval_key(a) for a in fx.tree_util.tree_leaves(lowered.in_avals)] == \
        [_aval_key(a) for a in jax.tree_util.tree_leaves(jlowered.in_avals)]


def test_compiling_a_symbolic_lowering_raises_like_jax():
    b, = export.symbolic_shape("b")
    jb, = jexport.symbolic_shape("b")
    with pytest.raises(ValueError):
        jax.jit(lambda x: x.sum()).lower(jax.ShapeDtypeStruct((jb, 3), np.float32)).compile()
    lowered = fx.jit(lambda x: x.sum()).lower(fx.ShapeDtypeStruct((b, 3), np.float32))
    with pytest.raises(ValueError, match=re.escape("lowered for symbolic shapes (f32[b,3])")):
        lowered.compile()
    # Concrete shapes still lower and compile as before.
    compiled = fx.jit(lambda x: x.sum()).lower(np.ones((2, 3), np.float32)).compile()
    assert float(compiled(np.ones((2, 3), np.float32))) == 6.0


def test_shape_as_value_of_symbolic_shapes_matches_jax():
    for mod in (fx, jax):
        f = mod.jit(lambda x: mod.lax.shape_as_value(x.shape))
        exp = mod.export.export(f)(
            mod.ShapeDtypeStruct(mod.export.symbolic_shape("a, 5"), np.float32))
        out = exp.call(np.ones((3, 5), np.float32))
        assert out.dtype == np.int32
        np.testing.assert_array_equal(out, [3, 5])


def test_shape_as_value_dtypes_match_jax():
    big = (2 ** 31 + 5,)
    ours, theirs = flax.shape_as_value(big), jax.lax.shape_as_value(big)
    assert ours.dtype == theirs.dtype == np.int64 and ours.tolist() == theirs.tolist()
    with fx.enable_x64(), jax.enable_x64():
        for mod in (fx, jax):
            f = mod.jit(lambda x: mod.lax.shape_as_value(x.shape))
            exp = mod.export.export(f)(
                mod.ShapeDtypeStruct(mod.export.symbolic_shape("a"), np.float32))
            assert exp.call(np.ones(3, np.float32)).dtype == np.int64
