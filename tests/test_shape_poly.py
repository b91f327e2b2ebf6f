"""Shape polymorphism: symbolic dimensions, tracing and export with them, calls at concrete
shapes (checked against the concrete-shape programs, NumPy and JAX's `jax.export`)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fluxion as fx
import fluxion.numpy as jnp
from fluxion import export, lax, nn
from fluxion.core import max_dim, min_dim

jax = pytest.importorskip("jax")
from jax import export as jexport  # noqa: E402

InconclusiveDimensionOperation = export.InconclusiveDimensionOperation
S = fx.ShapeDtypeStruct


# ---------------------------------------------------------------------------------------------
# Symbolic dimension expressions

def _values(names, n=4):
    rng = np.random.default_rng(len(names))
    return [dict(zip(names, rng.integers(1, 40, len(names)).tolist())) for _ in range(n)]


EXPRESSIONS = ["b + c", "b - c", "2*b*c + 3", "b // 3", "b % 3", "(2*b) // 2", "(2*b + 4) % 2",
               "b*c - c*b", "b // c", "(b*c) // c", "max(b, 4)", "min(b, c)", "3 - b", "b^2",
               "-b + 2*c", "mod(b*c, 5)", "floordiv(b + 7, 2)"]


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_expression_values_match_python_ints(text):
    b, c = export.symbolic_shape("b, c")
    ops = {"b": b, "c": c}
    e = _eval_text(text, ops)
    for env in _values(["b", "c"]):
        want = _eval_text(text, env)
        got = e.evaluate(env) if isinstance(e, export.DimExpr) else e
        assert got == want, (text, env)


def _eval_text(text, env):
    """Evaluate the little expression language with Python operators (no eval)."""
    from fluxion._src.export.shape_poly import _Parser, SymbolicScope
    if all(isinstance(v, int) for v in env.values()):
        scope = SymbolicScope()
        p = _Parser(text, scope, text)
        e = p.expr()
        return e.evaluate(env) if isinstance(e, export.DimExpr) else e
    scope = next(iter(env.values())).scope
    return export.symbolic_shape(text, scope=scope)[0]


def test_arithmetic_normalizes_to_ints_and_matches_jax_forms():
    b, c = export.symbolic_shape("b, c")
    jb, jc = jexport.symbolic_shape("b, c")
    assert b * c - c * b == 0 and isinstance(b * c - c * b, int)
    assert (2 * b) // 2 == b
    assert b * 0 == 0
    for ours, theirs in [(b // 2, jb // 2), (b % 3, jb % 3), (3 - b, 3 - jb), (b ** 2, jb ** 2),
                         (2 * b + c, 2 * jb + jc), (b // c, jb // jc)]:
        assert str(ours) == str(theirs)
    assert str(max_dim(b, 1)) == "b" and str(min_dim(b, 1)) == "1"


def test_zero_divided_by_a_dimension_as_jax():
    b, = export.symbolic_shape("b")
    jb, = jexport.symbolic_shape("b")
    # 0 % b lifted its 0 to the zero polynomial, which could not print (an IndexError)
    for ours, theirs in [(divmod(0, b), divmod(0, jb)), (divmod(b, b), divmod(jb, jb))]:
        assert ours == theirs == (0, 0) or ours == theirs == (1, 0)
        assert all(type(v) is int for v in ours)
    assert [str(v) for v in divmod(3, b)] == [str(v) for v in divmod(3, jb)]


COMPARISONS = ["b == 4", "b == c", "b >= 1", "b >= 2", "b < 1", "b + 1 > b", "b % 2 < 2",
               "b >= b // 2 + 1", "b >= b // 2 + 2", "3 * b // 3 <= b",
               "b // 2 >= 0", "b <= c", "2*b >= b", "b * c >= b", "b - 1 >= 0", "b > 1",
               "b != 3"]


@pytest.mark.parametrize("text", COMPARISONS)
def test_comparisons_decide_like_jax(text):
    def run(mod):
        b, c = mod.symbolic_shape("b, c")
        lhs, op, rhs = _split_cmp(text)
        left, right = _build(lhs, b, c), _build(rhs, b, c)
        try:
            return {"==": left == right, "!=": left != right, ">=": left >= right,
                    "<=": left <= right, "<": left < right, ">": left > right}[op]
        except Exception as e:  # noqa: BLE001
            return type(e).__name__
    assert run(export) == run(jexport)


def _split_cmp(text):
    for op in ("==", "!=", ">=", "<=", "<", ">"):
        if op in text:
            lhs, rhs = text.split(op)
            return lhs.strip(), op, rhs.strip()
    raise ValueError(text)


def _build(text, b, c):
    """b, c, ints, and the forms used above (x + k, x - k, k*x, x % k, x // k, x * y)."""
    text = text.replace(" ", "")
    env = {"b": b, "c": c}
    if text in env:
        return env[text]
    if text.lstrip("-").isdigit():
        return int(text)
    for sym, fn in (("+", lambda x, y: x + y), ("-", lambda x, y: x - y),
                    ("*", lambda x, y: x * y), ("//", lambda x, y: x // y),
                    ("%", lambda x, y: x % y)):
        if sym in text:
            lhs, rhs = text.split(sym, 1)
            return fn(_build(lhs, b, c), _build(rhs, b, c))
    raise ValueError(text)


def test_inconclusive_comparison_message():
    b, = export.symbolic_shape("b")
    with pytest.raises(InconclusiveDimensionOperation,
                       match=r"Symbolic dimension comparison 'b' >= '2' is inconclusive"):
        b >= 2
    with pytest.raises(InconclusiveDimensionOperation, match="requires a constant"):
        int(b)


def test_constraints_narrow_the_bounds():
    b, = export.symbolic_shape("b", constraints=["b >= 16"])
    assert b >= 16 and b >= 10 and not (b < 3)
    with pytest.raises(InconclusiveDimensionOperation, match="b >= 16"):
        b >= 17  # the message shows the scope's constraints
    b, c = export.symbolic_shape("b, c", constraints=["b <= 8", "c >= b + 2"])
    assert b <= 8 and c >= 3 and c > b
    with pytest.raises(ValueError, match="Unsatisfiable"):
        export.symbolic_shape("b", constraints=["3 >= 4"])
    with pytest.raises(ValueError, match="must contain one of"):
        export.symbolic_shape("b", constraints=["b > 4"])


def test_scopes():
    b1, = export.symbolic_shape("b")
    b2, = export.symbolic_shape("b")
    assert b1 != b2  # different scopes never compare equal
    with pytest.raises(ValueError, match="Invalid mixing of symbolic scopes"):
        b1 + b2
    scope = export.SymbolicScope(["a >= 2"])
    a1, = export.symbolic_shape("a", scope=scope)
    a2, = export.symbolic_shape("a + 1", scope=scope)
    assert a2 - a1 == 1 and a1 >= 2
    with pytest.raises(ValueError, match="both"):
        export.symbolic_shape("a", scope=scope, constraints=["a >= 3"])


def test_symbolic_shape_syntax():
    assert str(export.symbolic_shape("b, 4")) == "(b, 4)"
    assert str(export.symbolic_shape("(b, 2*b + 1, floordiv(b, 3))")) == \
        str(jexport.symbolic_shape("(b, 2*b + 1, floordiv(b, 3))"))
    assert str(export.symbolic_shape("b, ...", like=(None, 3, 4))) == "(b, 3, 4)"
    assert str(export.symbolic_shape("_, b", like=(5, None))) == "(5, b)"
    for bad in ("b,, 4", "b + ", "b $ 2", "..., b"):
        with pytest.raises(ValueError, match="syntax error"):
            export.symbolic_shape(bad)


def test_symbolic_args_specs_matches_jax():
    args = ({"w": np.zeros((4, 3), np.float32)}, np.zeros((5, 4), np.float32))
    ours = export.symbolic_args_specs(args, (None, "b, _"))
    theirs = jexport.symbolic_args_specs(args, (None, "b, _"))
    assert [str(s.shape) for s in fx.tree_util.tree_leaves(ours)] == \
        [str(s.shape) for s in jax.tree_util.tree_leaves(theirs)]
    with pytest.raises(ValueError, match="prefix"):
        export.symbolic_args_specs(args, ("b", "b", "b"))


# ---------------------------------------------------------------------------------------------
# Op families traced with a symbolic dimension, called at concrete sizes

def _conv(x):
    return lax.conv_general_dilated(x.reshape(x.shape[0], 1, 4), jnp.ones((2, 1, 3), np.float32),
                                    (1,), "SAME")


CASES = {
    "elementwise": lambda x: jnp.tanh(x) * 2 + jnp.where(x > .5, x, 0.),
    "mean_axis": lambda x: jnp.mean(x, axis=0),
    "mean_all": lambda x: jnp.mean(x),
    "var": lambda x: jnp.var(x, axis=0),
    "softmax": lambda x: nn.softmax(x, axis=0),
    "reductions": lambda x: (jnp.sum(x, 0), jnp.max(x, 0), jnp.argmax(x, 0), jnp.prod(x, 0)),
    "reshape_minus1": lambda x: x.reshape(-1),
    "reshape_sym": lambda x: x.reshape((x.shape[0], 2, 2)),
    "reshape_pairs": lambda x: x.reshape((-1, 2)),
    "arange": lambda x: x + jnp.arange(x.shape[0], dtype=np.float32)[:, None],
    "iota": lambda x: lax.broadcasted_iota(np.float32, x.shape, 0) * x,
    "slice": lambda x: x[1:, 1:3],
    "slice_step": lambda x: x[::2],
    "slice_neg": lambda x: x[::-1][:-1],
    "index_last": lambda x: x[-1],
    "index_symbolic": lambda x: x[x.shape[0] // 2],
    "gather": lambda x: x[jnp.array([0, 0])],
    "concatenate": lambda x: jnp.concatenate([x, 2 * x], axis=0),
    "stack_split": lambda x: jnp.split(jnp.stack([x, x]), 2, axis=2),
    "broadcast_to": lambda x: jnp.broadcast_to(x[:, :1], x.shape),
    "zeros_ones": lambda x: x + jnp.zeros(x.shape, np.float32) + jnp.ones_like(x),
    "pad": lambda x: jnp.pad(x, ((1, 2), (0, 1))),
    "tile": lambda x: jnp.tile(x, (2, 1)),
    "transpose_dot": lambda x: x.T @ x,
    "dot_general_batch": lambda x: jnp.einsum("bi,bj->bij", x, x),
    "conv": _conv,
    "sort": lambda x: jnp.sort(x, axis=0),
    "cumsum": lambda x: (jnp.cumsum(x, axis=0), lax.cumprod(x, axis=0, reverse=True)),
    "reduce_window_same": lambda x: lax.reduce_window(x, 0., lax.add, (2, 1), (1, 1), "SAME"),
    "max_pool_strided": lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 1),
                                                    "SAME"),
    "roll": lambda x: jnp.roll(x, 1, axis=0),
    "dynamic_slice_symbolic_size": lambda x: lax.dynamic_slice_in_dim(
        jnp.concatenate([x, x]), 1, x.shape[0], 0),
    "dynamic_update_slice": lambda x: lax.dynamic_update_slice(x, jnp.ones((1, 4), np.float32),
                                                               (1, 0)),
    "scatter": lambda x: x.at[jnp.array([0, 0])].add(1.),
    "argsort_take_along": lambda x: jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1),
    "cond_while": lambda x: lax.cond(x.sum() > 0, lambda y: y * 2, lambda y: y, x) + lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2), (0, x))[1],
    "eye": lambda x: jnp.eye(x.shape[0]) @ x,
    "random": lambda x: (fx.random.normal(fx.random.key(0), (3, x.shape[0], 2)),
                         fx.random.uniform(fx.random.key(1), x.shape) * x),
    "size_as_value": lambda x: x * x.shape[0] + x.size,
    "scan": lambda x: lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(4, np.float32), x),
    "fori_loop": lambda x: lax.fori_loop(0, x.shape[0], lambda i, c: c + x[i],
                                         jnp.zeros(4, np.float32)),
    "grad_inside": lambda x: fx.grad(lambda y: jnp.sum(jnp.tanh(y) ** 2))(x),
    "vmap_inside": lambda x: fx.vmap(lambda r: r @ r)(x),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_family_symbolic_against_concrete(name):
    f = CASES[name]
    b, = export.symbolic_shape("b")
    exp = export.export(fx.jit(f))(S((b, 4), np.float32))
    assert exp.uses_shape_polymorphism
    assert "tensor<?x4xf32>" in exp.mlir_module()
    rng = np.random.default_rng(0)
    for n in (1, 2, 7):
        x = rng.random((n, 4)).astype(np.float32)
        got = exp.call(x)
        want = fx.jit(f)(x)
        fx.tree_util.tree_map(
            lambda g, w: np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5,
                                                    atol=1e-5), got, want)


@pytest.mark.parametrize("name", ["mean_axis", "reshape_minus1", "arange", "slice", "concatenate",
                                  "transpose_dot", "scan", "pad", "softmax"])
def test_out_avals_match_jax(name):
    jf = {"mean_axis": lambda x: jax.numpy.mean(x, axis=0),
          "reshape_minus1": lambda x: x.reshape(-1),
          "arange": lambda x: x + jax.numpy.arange(x.shape[0], dtype=np.float32)[:, None],
          "slice": lambda x: x[1:, 1:3],
          "concatenate": lambda x: jax.numpy.concatenate([x, 2 * x], axis=0),
          "transpose_dot": lambda x: x.T @ x,
          "scan": lambda x: jax.lax.scan(lambda c, r: (c + r, c * r),
                                         jax.numpy.zeros(4, np.float32), x),
          "pad": lambda x: jax.numpy.pad(x, ((1, 2), (0, 1))),
          "softmax": lambda x: jax.nn.softmax(x, axis=0)}[name]
    b, = export.symbolic_shape("b")
    jb, = jexport.symbolic_shape("b")
    ours = export.export(fx.jit(CASES[name]))(S((b, 4), np.float32))
    theirs = jexport.export(jax.jit(jf))(jax.ShapeDtypeStruct((jb, 4), np.float32))
    for n in (1, 5):
        ours_shapes = [tuple(d.evaluate({"b": n}) if isinstance(d, export.DimExpr) else d
                             for d in a.shape) for a in ours.out_avals]
        theirs_shapes = [tuple(int(d) if isinstance(d, int) else
                               d._evaluate({"b": n}) for d in a.shape) for a in theirs.out_avals]
        assert ours_shapes == theirs_shapes


def test_dynamic_ops_in_module():
    b, = export.symbolic_shape("b")
    exp = export.export(fx.jit(lambda x: (x.reshape(-1), jnp.arange(x.shape[0]), x + 1.,
                                          x[1:])))(S((b, 4), np.float32))
    text = exp.mlir_module()
    for op in ("get_dimension_size", "dynamic_reshape", "dynamic_iota",
               "dynamic_broadcast_in_dim", "real_dynamic_slice"):
        assert op in text, op


def test_unsupported_op_raises_clearly():
    b, = export.symbolic_shape("b")
    with pytest.raises(InconclusiveDimensionOperation, match="inconclusive"):
        export.export(fx.jit(lambda x: jnp.linalg.qr(x)[1]))(S((4, b), np.float32))
    with pytest.raises(InconclusiveDimensionOperation,
                       match="lowering of 'scan' does not support symbolic dimensions"):
        export.export(fx.jit(lambda x: lax.scan(lambda c, r: (c + r, c), jnp.zeros(4), x,
                                                unroll=2)[0]))(S((b, 4), np.float32))


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_symbolic_spatial_same_padding(stride):
    h, = export.symbolic_shape("h")

    def f(x):
        return lax.conv_general_dilated(x, jnp.ones((2, 1, 3, 3), np.float32), (stride, stride),
                                        "SAME")
    exp = export.export(fx.jit(f))(S((2, 1, h, h), np.float32))
    jh, = jexport.symbolic_shape("h")
    jexp = jexport.export(jax.jit(lambda x: jax.lax.conv_general_dilated(
        x, jax.numpy.ones((2, 1, 3, 3), np.float32), (stride, stride), "SAME")))(
        jax.ShapeDtypeStruct((2, 1, jh, jh), np.float32))
    rng = np.random.default_rng(0)
    for n in (3, 8):
        x = rng.random((2, 1, n, n)).astype(np.float32)
        got = exp.call(x)
        np.testing.assert_allclose(got, fx.jit(f)(x), rtol=1e-5)
        np.testing.assert_allclose(got, jexp.call(x), rtol=1e-5)


def test_python_control_flow_on_symbolic_dim_is_inconclusive():
    b, = export.symbolic_shape("b")

    def f(x):
        return x * 2 if x.shape[0] > 3 else x
    with pytest.raises(InconclusiveDimensionOperation, match="'b' > '3' is inconclusive"):
        export.export(fx.jit(f))(S((b, 4), np.float32))
    b, = export.symbolic_shape("b", constraints=["b >= 4"])
    exp = export.export(fx.jit(f))(S((b, 4), np.float32))  # decided by the constraint
    np.testing.assert_allclose(exp.call(np.ones((5, 4), np.float32)), 2.)


# ---------------------------------------------------------------------------------------------
# The acceptance MLP: batch sizes 1, 7 and 1024

def _mlp_params():
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(16, 32)).astype(np.float32) / 4, np.zeros(32, np.float32)),
            (rng.normal(size=(32, 32)).astype(np.float32) / 6, np.full(32, .1, np.float32)),
            (rng.normal(size=(32, 10)).astype(np.float32) / 6, np.zeros(10, np.float32))]


def _mlp(params, x):
    for w, b in params[:-1]:
        x = jnp.maximum(x @ w + b, 0.)
    w, b = params[-1]
    logits = x @ w + b
    return nn.softmax(logits, axis=-1), jnp.mean(logits)


def _mlp_numpy(params, x):
    for w, b in params[:-1]:
        x = np.maximum(x @ w + b, 0.)
    w, b = params[-1]
    logits = x @ w + b
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True), logits.mean()


def test_mlp_symbolic_batch_runs_on_1_7_1024():
    params = _mlp_params()
    specs = export.symbolic_args_specs((params, np.zeros((1, 16), np.float32)), (None, "b, 16"))
    exp = export.export(fx.jit(_mlp))(*specs)
    exp = export.deserialize(exp.serialize(vjp_order=1))
    assert str(exp.in_avals[-1].shape) == "(b, 16)"
    assert str(exp.out_avals[0].shape) == "(b, 10)"
    rng = np.random.default_rng(1)
    for n in (1, 7, 1024):
        x = rng.normal(size=(n, 16)).astype(np.float32)
        probs, m = exp.call(params, x)
        concrete = export.export(fx.jit(_mlp))(params, x)
        cp, cm = concrete.call(params, x)
        np.testing.assert_allclose(probs, cp, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(m, cm, rtol=1e-5, atol=1e-7)
        np_p, np_m = _mlp_numpy(params, x.astype(np.float64))
        np.testing.assert_allclose(probs, np_p, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(m, np_m, rtol=1e-4, atol=1e-6)
        # under jit and grad (through the serialized VJP)
        jp, _ = fx.jit(lambda x: exp.call(params, x))(x)
        np.testing.assert_allclose(jp, cp, rtol=1e-5, atol=1e-7)
        g = fx.grad(lambda x: exp.call(params, x)[1])(x)
        gw = fx.grad(lambda x: _mlp(params, x)[1])(x)
        np.testing.assert_allclose(g, gw, rtol=1e-4, atol=1e-7)


def test_serialized_symbolic_artifact_runs_in_a_fresh_process(tmp_path):
    b, = export.symbolic_shape("b", constraints=["b >= 2"])
    exp = export.export(fx.jit(lambda x: jnp.mean(x * x.shape[0], axis=0)))(
        S((b, 3), np.float32))
    path = tmp_path / "poly.bin"
    path.write_bytes(exp.serialize())
    code = (
        "import numpy as np, fluxion\n"
        "from fluxion import export\n"
        f"e = export.deserialize(open({str(path)!r}, 'rb').read())\n"
        "assert str(e.in_avals[0].shape) == '(b, 3)', e.in_avals\n"
        "x = np.arange(15, dtype=np.float32).reshape(5, 3)\n"
        "np.testing.assert_allclose(e.call(x), x.mean(0) * 5)\n"
        "try:\n"
        "    e.call(np.ones((1, 3), np.float32))\n"
        "    raise SystemExit('constraint not checked')\n"
        "except ValueError as err:\n"
        "    assert 'b >= 2' in str(err), err\n"
        "print('ok')\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


# ---------------------------------------------------------------------------------------------
# Calling conventions: shape checks, transformations, nesting

def test_call_shape_checks():
    b, = export.symbolic_shape("b")
    exp = export.export(fx.jit(lambda x, y: x + y))(S((b, 4), np.float32), S((b, 4), np.float32))
    with pytest.raises(ValueError, match="inconsistency"):
        exp.call(np.ones((3, 4), np.float32), np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"Shape mismatch for args\[0\]\.shape\[1\]"):
        exp.call(np.ones((3, 5), np.float32), np.ones((3, 5), np.float32))
    with pytest.raises(ValueError, match="Expected value >= 1"):
        exp.call(np.ones((0, 4), np.float32), np.ones((0, 4), np.float32))
    b, c = export.symbolic_shape("b, c")
    with pytest.raises(ValueError, match="Cannot solve"):
        export.export(fx.jit(lambda x: x))(S((b * c, 4), np.float32))


def test_linear_dimension_variables_are_solved():
    b, c = export.symbolic_shape("b, c")
    f = lambda x, y: (jnp.sum(x.reshape(2, -1), 0), y[:, :c] * c)  # noqa: E731
    exp = export.export(fx.jit(f))(S((2 * b + 2,), np.float32), S((3, c + b), np.float32))
    assert str(exp.out_avals[0].shape) == "(b + 1,)"
    x = np.arange(8, dtype=np.float32)
    y = np.ones((3, 7), np.float32)
    got = exp.call(x, y)  # b = 3, c = 4
    np.testing.assert_allclose(got[0], x.reshape(2, -1).sum(0))
    np.testing.assert_allclose(got[1], np.full((3, 4), 4.))
    with pytest.raises(ValueError, match="Division had remainder 1 when computing the value"):
        exp.call(np.ones(7, np.float32), y)  # 2*b + 2 = 7 has no integer solution


def test_two_variables_and_derived_dims():
    a, b = export.symbolic_shape("a, b")
    exp = export.export(fx.jit(lambda x, y: (x @ y, jnp.concatenate([x.reshape(-1), y.reshape(-1)]))))(
        S((a, b), np.float32), S((b, 3), np.float32))
    assert str(exp.out_avals[1].shape) == "(a*b + 3*b,)"
    x, y = np.ones((2, 5), np.float32), np.ones((5, 3), np.float32)
    p, c = exp.call(x, y)
    np.testing.assert_allclose(p, x @ y)
    assert c.shape == (25,)


def test_vmap_of_symbolic_call():
    b, = export.symbolic_shape("b")
    exp = export.export(fx.jit(lambda x: jnp.sum(x, axis=0)))(S((b, 3), np.float32))
    xs = np.random.default_rng(0).random((4, 6, 3)).astype(np.float32)
    np.testing.assert_allclose(fx.vmap(exp.call)(xs), xs.sum(1), rtol=1e-6)


def test_symbolic_call_inside_symbolic_export():
    b, = export.symbolic_shape("b")
    inner = export.export(fx.jit(lambda x: jnp.tanh(x) * x.shape[0]))(S((b, 3), np.float32))
    c, = export.symbolic_shape("c")
    outer = export.export(fx.jit(lambda y: inner.call(jnp.concatenate([y, y])) + 1))(
        S((c, 3), np.float32))
    assert str(outer.out_avals[0].shape) == "(2*c, 3)"
    y = np.random.default_rng(0).random((3, 3)).astype(np.float32)
    yy = np.concatenate([y, y])
    np.testing.assert_allclose(outer.call(y), np.tanh(yy) * 6 + 1, rtol=1e-6)


def test_multi_platform_symbolic():
    b, = export.symbolic_shape("b")
    exp = export.export(fx.jit(lambda x: jnp.sum(x * 2, axis=1)), platforms=("cpu", "cuda"))(
        S((b, 3), np.float32))
    x = np.ones((5, 3), np.float32)
    np.testing.assert_allclose(exp.call(x), np.full(5, 6.))


def test_jit_lowering_of_symbolic_arguments_does_not_compile():
    b, = export.symbolic_shape("b")
    lowered = fx.jit(lambda x, w: x @ w).lower(S((b, 3), np.float32), S((3, 2), np.float32))
    assert 'tensor<i32> {jax.global_constant = "b"}' in lowered.as_text()
    with pytest.raises(ValueError, match="symbolic shapes"):
        lowered.compile()


def test_public_names_where_jax_has_them():
    import fluxion.core
    import fluxion.errors
    assert fluxion.errors.InconclusiveDimensionOperation is InconclusiveDimensionOperation
    b, = export.symbolic_shape("b")
    assert export.is_symbolic_dim(b) and not export.is_symbolic_dim(3)
    assert fluxion.core.max_dim(b, 1) == b and fluxion.core.min_dim(3, 2) == 2
