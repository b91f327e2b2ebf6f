"""lax control flow: cond, switch, while_loop, fori_loop, scan, map, associative_scan,
custom_linear_solve and custom_root.

Values are compared with Python branches and loops (NumPy) and jit with eager; result types,
weak types, error classes and messages with JAX; jaxprs print as JAX prints them; the StableHLO
of a scan is one while loop whose size does not grow with the trip count.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion import lax

F32 = np.float32


def _assert_tree_close(got, want, rtol=1e-5, atol=1e-6):
    got_leaves, got_tree = fluxion.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert len(got_leaves) == len(want_leaves), (got_tree, want_tree)
    for g, w in zip(got_leaves, want_leaves):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


def _eager_and_jit(fun, *args):
    """fun(*args) run eagerly and under jit (they must agree); returns the eager result."""
    eager = fun(*args)
    _assert_tree_close(fluxion.jit(fun)(*args), eager)
    return eager


# =============================================================================================
# cond and switch

def _branches(lib):
    def true_fun(x, pair):
        return {"a": lib.sin(x) * pair[0], "b": pair[1] + 1}

    def false_fun(x, pair):
        return {"a": x - pair[0], "b": pair[1] * 2}
    return true_fun, false_fun


X3 = np.array([0.5, -1.0, 2.0], F32)
PAIR = (np.array([1.0, 2.0, 3.0], F32), np.array(4, np.int32))


@pytest.mark.parametrize("pred", [True, False, np.bool_(True), 0, 3, -0.5, 0.0])
def test_cond_matches_python_branch(pred):
    true_np, false_np = _branches(np)
    expected = true_np(X3, PAIR) if pred else false_np(X3, PAIR)
    out = _eager_and_jit(lambda p, x, pair: lax.cond(p, *_branches(fnp), x, pair), pred, X3, PAIR)
    _assert_tree_close(out, expected)


def test_cond_operand_forms():
    assert float(lax.cond(True, lambda: 1.0, lambda: 2.0)) == 1.0
    assert float(lax.cond(False, lambda x: x, lambda x: -x, operand=F32(3))) == -3.0
    with pytest.raises(TypeError, match="no positional operands"):
        lax.cond(True, lambda x: x, lambda x: x, 1.0, operand=1.0)
    with pytest.raises(TypeError, match="should be callable"):
        lax.cond(True, 1.0, lambda: 1.0)


def jnp_sin_f(x):
    return fnp.sin(x)


@pytest.mark.parametrize("pred", [True, False])
def test_cond_per_branch_operands(pred):
    """The older five-argument form, which JAX still serves (NumPyro's NUTS calls it)."""
    def run(cond, p):
        return cond(p, F32(2), lambda x: x * 3, (F32(5), F32(1)), lambda t: t[0] - t[1])

    expected = run(jax.lax.cond, pred)
    for fn in (lambda p: run(lax.cond, p), fluxion.jit(lambda p: run(lax.cond, p))):
        assert float(fn(pred)) == float(expected)
    grads = fluxion.grad(lambda x: lax.cond(pred, x, jnp_sin_f, x, lambda y: y * y))(F32(0.5))
    assert float(grads) == pytest.approx(np.cos(0.5) if pred else 1.0)


def test_cond_passes_through_forwarded_operands():
    out = lax.cond(True, lambda x, y: (x, y * 2), lambda x, y: (x, y + 1), 1.5, F32(2))
    assert isinstance(out[0], fluxion.Array) and float(out[0]) == 1.5
    assert float(out[1]) == 4.0


@pytest.mark.parametrize("true_val,false_val", [(1.0, F32(2)), (F32(1), 2.0), (1.0, 2.0),
                                                (1, 2), (np.int32(1), 2)])
def test_cond_result_weak_type_matches_jax(true_val, false_val):
    got = lax.cond(True, lambda: true_val, lambda: false_val)
    want = jax.lax.cond(True, lambda: true_val, lambda: false_val)
    assert got.dtype == want.dtype and got.weak_type == want.weak_type


def test_cond_branch_type_mismatch_error():
    def run(lib):
        return lib.lax.cond(True, lambda x: x, lambda x: x.astype(lib.numpy.int32), F32(1))
    with pytest.raises(TypeError) as want:
        run(jax)
    with pytest.raises(TypeError) as got:
        run(fluxion)
    for text in ["cond branches must have equal output types but they differ",
                 "has type float32[] but the corresponding output of false_fun has type int32[], "
                 "so the dtypes do not match", "Revise true_fun and/or false_fun"]:
        assert text in str(want.value) and text in str(got.value)


def test_cond_branch_structure_mismatch_error():
    with pytest.raises(TypeError) as info:
        lax.cond(True, lambda x: x, lambda x: (x, x), 1.0)
    message = str(info.value)
    assert "cond branch outputs must have the same pytree structure" in message
    assert "true_fun output is a pytree leaf but false_fun output is a <class 'tuple'>, so " \
           "their Python types differ" in message
    with pytest.raises(TypeError, match="shapes do not match"):
        lax.cond(True, lambda: np.zeros(2, F32), lambda: np.zeros(3, F32))


@pytest.mark.parametrize("pred,pattern", [(np.array([True, False]), "Pred must be a scalar"),
                                          ([True], "Pred must be a scalar"),
                                          (None, "cond predicate is None"),
                                          (np.complex64(1), "Pred type must be either boolean")])
def test_cond_bad_predicate(pred, pattern):
    with pytest.raises(TypeError):
        jax.lax.cond(pred, lambda: 1.0, lambda: 2.0)
    with pytest.raises(TypeError, match=pattern):
        lax.cond(pred, lambda: 1.0, lambda: 2.0)


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 7])
def test_switch_clamps_index(index):
    branches = [lambda x: x + 1, lambda x: x * 10, lambda x: -x]
    expected = branches[min(max(index, 0), 2)](X3)
    out = fluxion.jit(lambda i, x: lax.switch(i, branches, x))(index, X3)
    np.testing.assert_allclose(out, expected)
    np.testing.assert_allclose(lax.switch(np.int8(index), branches, X3), expected)


def test_switch_single_branch_and_errors():
    assert float(lax.switch(5, [lambda: F32(7)])) == 7.0
    with pytest.raises(TypeError, match="Index type must be an integer"):
        lax.switch(1.0, [lambda: 1.0, lambda: 2.0])
    with pytest.raises(TypeError, match="Branch index must be scalar"):
        lax.switch(np.array([1]), [lambda: 1.0, lambda: 2.0])
    with pytest.raises(ValueError, match="Empty branch sequence"):
        lax.switch(0, [])
    with pytest.raises(TypeError, match="switch branches must have equal output types"):
        lax.switch(0, [lambda: 1.0, lambda: np.int32(1)])


def test_cond_and_switch_jaxprs_print_like_jax():
    w = np.ones(3, F32)

    def cond_fun(lib):
        return lambda p, x: lib.lax.cond(p, lambda x: x * w, lambda x: x + 1.0, x)

    def switch_fun(lib):
        return lambda i, x: lib.lax.switch(i, [lambda x: x * w, lambda x: x + 1.0,
                                               lambda x: -x], x)
    for make, pred in [(cond_fun, True), (switch_fun, np.int32(1))]:
        got = str(fluxion.make_jaxpr(make(fluxion))(pred, X3))
        assert got == str(jax.make_jaxpr(make(jax))(pred, X3))
        assert "cond[" in got and "branches=(" in got


def test_cond_lowers_to_case():
    text = fluxion.jit(lambda i, x: lax.switch(i, [lambda x: x, lambda x: -x, lambda x: x * 2],
                                               x)).lower(1, X3).as_text()
    assert text.count("stablehlo.case") == 1
    assert text.count("stablehlo.return") == 3


# =============================================================================================
# while_loop and fori_loop

def _collatz_steps(n):
    count = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        count += 1
    return count


def test_while_loop_matches_python_loop():
    def steps(n):
        def body(c):
            n, count = c["n"], c["count"]
            n = lax.select(n % 2 == 0, n // 2, 3 * n + 1)
            return {"n": n, "count": count + 1}
        return lax.while_loop(lambda c: c["n"] != 1, body, {"n": n, "count": np.int32(0)})
    for n in [1, 6, 27]:
        out = _eager_and_jit(steps, np.int32(n))
        assert int(out["count"]) == _collatz_steps(n) and int(out["n"]) == 1


def test_while_loop_float_carry_and_no_iterations():
    fun = lambda x: lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))
    count, value = _eager_and_jit(fun, X3)
    np.testing.assert_allclose(value, X3 * 1.5 ** 4, rtol=1e-6)
    assert int(count) == 4
    none = lax.while_loop(lambda c: c > 10, lambda c: c + 1, np.int32(3))
    assert int(none) == 3 and none.dtype == np.int32


def test_while_loop_weak_initial_carry_is_promoted_as_in_jax():
    body = lambda lib: (lambda c: (c + 1.5).astype(lib.numpy.float32))
    got = lax.while_loop(lambda c: c < 3, body(fluxion), 1)
    want = jax.lax.while_loop(lambda c: c < 3, body(jax), 1)
    assert got.dtype == want.dtype and float(got) == float(want) == 4.0
    with pytest.raises(TypeError) as info:
        lax.while_loop(lambda c: c < 3, body(fluxion), np.int32(1))
    assert ("while_loop body function carry input and carry output must have equal types"
            in str(info.value))
    assert "The input carry c has type int32[] but the corresponding output carry component " \
           "has type float32[], so the dtypes do not match." in str(info.value)


def test_while_loop_errors():
    with pytest.raises(TypeError, match="must have the same pytree structure"):
        lax.while_loop(lambda c: c < 3, lambda c: (c, c), 1)
    with pytest.raises(TypeError, match=r"cond_fun must return a boolean scalar, but got pytree"):
        lax.while_loop(lambda c: (c < 3,), lambda c: c, 1)
    with pytest.raises(TypeError, match=r"output type\(s\) \[ShapedArray\(bool\[1\]\)\]"):
        lax.while_loop(lambda c: fnp.array([True]), lambda c: c, 1)
    with pytest.raises(TypeError, match="should be callable"):
        lax.while_loop(True, lambda c: c, 1)


def test_while_loop_jaxpr_prints_like_jax_and_lowers_to_while():
    w = np.ones(3, F32)

    def make(lib):
        return lambda x: lib.lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * w),
                                            (0, x))
    assert str(fluxion.make_jaxpr(make(fluxion))(X3)) == str(jax.make_jaxpr(make(jax))(X3))
    text = fluxion.jit(make(fluxion)).lower(X3).as_text()
    assert text.count("stablehlo.while") == 1


@pytest.mark.parametrize("lower,upper", [(0, 5), (2, 6), (5, 2), (np.int32(1), np.int32(4))])
def test_fori_loop_matches_python_loop(lower, upper):
    def body(i, c):
        return c * 2 + i

    expected = np.float32(1)
    for i in range(int(lower), int(upper)):
        expected = body(i, expected)
    static = lax.fori_loop(lower, upper, body, F32(1))
    dynamic = fluxion.jit(lambda lo, hi: lax.fori_loop(lo, hi, body, F32(1)))(lower, upper)
    assert float(static) == float(dynamic) == float(expected)


def test_fori_loop_uses_scan_for_static_bounds_and_while_otherwise():
    body = lambda i, c: c + i
    static = str(fluxion.make_jaxpr(lambda x: lax.fori_loop(0, 4, body, x))(F32(0)))
    dynamic = str(fluxion.make_jaxpr(lambda x, n: lax.fori_loop(0, n, body, x))(F32(0), 4))
    assert "scan[" in static and "while[" not in static and "length=4" in static
    assert "while[" in dynamic and "scan[" not in dynamic
    unrolled = str(fluxion.make_jaxpr(lambda x: lax.fori_loop(0, 4, body, x, unroll=2))(F32(0)))
    assert "unroll=2" in unrolled


def test_fori_loop_errors():
    with pytest.raises(TypeError, match="must have equal types"):
        lax.fori_loop(np.int32(0), np.int16(3), lambda i, c: c, 0.0)
    with pytest.raises(ValueError, match="Can only use `unroll`"):
        fluxion.jit(lambda n: lax.fori_loop(0, n, lambda i, c: c, 0.0, unroll=2))(3)
    # A weak Python int bound takes the other bound's dtype.
    assert float(fluxion.jit(lambda n: lax.fori_loop(0, n, lambda i, c: c + 1.0, 0.0))(
        np.int32(3))) == 3.0


# =============================================================================================
# scan

def _scan_body(lib):
    def body(carry, x):
        total, count = carry
        new_total = total * 0.5 + x["a"] * x["b"]
        return (new_total, count + 1), {"sin": lib.sin(new_total), "count": count}
    return body


def _python_scan(body, init, xs, length, reverse=False):
    carry, ys = init, [None] * length
    for i in (reversed(range(length)) if reverse else range(length)):
        carry, ys[i] = body(carry, jax.tree_util.tree_map(lambda x: x[i], xs))
    return carry, jax.tree_util.tree_map(lambda *y: np.stack(y), *ys)


SCAN_XS = {"a": np.linspace(-1, 1, 15).reshape(5, 3).astype(F32),
           "b": np.linspace(0.5, 2, 5).astype(F32)[:, None] * np.ones((1, 3), F32)}
SCAN_INIT = (np.array([1.0, 2.0, 3.0], F32), np.int32(0))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("unroll", [1, 2, 3, True])
def test_scan_matches_python_loop(reverse, unroll):
    expected = _python_scan(_scan_body(np), SCAN_INIT, SCAN_XS, 5, reverse)
    out = fluxion.jit(lambda init, xs: lax.scan(_scan_body(fnp), init, xs, reverse=reverse,
                                                unroll=unroll))(SCAN_INIT, SCAN_XS)
    _assert_tree_close(out, expected)


def test_scan_eager_equals_jit():
    _eager_and_jit(lambda init, xs: lax.scan(_scan_body(fnp), init, xs), SCAN_INIT, SCAN_XS)


def test_scan_without_xs_and_empty_scan():
    carry, ys = lax.scan(lambda c, _: (c * 2, c), F32(1), None, length=4)
    assert float(carry) == 16.0 and ys.tolist() == [1.0, 2.0, 4.0, 8.0]
    carry, ys = lax.scan(lambda c, x: (c + x, c), F32(1), np.zeros((0, 2), F32)[:, 0])
    assert float(carry) == 1.0 and ys.shape == (0,)
    carry, ys = lax.scan(lambda c, x: (c, None), F32(3), None, length=2)
    assert float(carry) == 3.0 and ys is None


@pytest.mark.parametrize("init,xs", [(0, np.arange(3, dtype=F32)), (0.0, np.arange(3, dtype=F32)),
                                     (np.int32(0), np.arange(3, dtype=np.int32))])
def test_scan_result_types_match_jax(init, xs):
    body = lambda c, x: (c + x, c)
    got, want = lax.scan(body, init, xs), jax.lax.scan(body, init, xs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.weak_type == w.weak_type
        np.testing.assert_array_equal(g, w)


def test_scan_errors():
    body = lambda c, x: (c, x)
    with pytest.raises(ValueError, match="no values to scan over and `length` not provided"):
        lax.scan(body, 1.0, None)
    with pytest.raises(ValueError, match="`length` argument of 4 which disagrees"):
        lax.scan(body, 1.0, np.zeros(3, F32), length=4)
    with pytest.raises(ValueError, match="different leading axis sizes: 3, 4"):
        lax.scan(body, 1.0, (np.zeros(3, F32), np.zeros(4, F32)))
    with pytest.raises(ValueError, match="no leading axis"):
        lax.scan(body, 1.0, F32(3))
    with pytest.raises(TypeError, match="scan body output must be a pair"):
        lax.scan(lambda c, x: c, 1.0, np.zeros(3, F32))
    with pytest.raises(ValueError, match="non-negative"):
        lax.scan(body, 1.0, np.zeros(3, F32), unroll=-1)
    with pytest.raises(TypeError) as info:
        lax.scan(lambda c, x: ((c, c), x), 1.0, np.zeros(3, F32))
    assert "scan body function carry input and carry output must have the same pytree " \
           "structure" in str(info.value)
    with pytest.raises(TypeError) as info:
        lax.fori_loop(0, 3, lambda i, c: c.astype(fnp.int32), F32(1))
    assert "The input carry component loop_carry[1] has type float32[] but the corresponding " \
           "output carry component has type int32[], so the dtypes do not match." \
           in str(info.value)


def test_scan_jaxpr_prints_like_jax():
    w = np.ones(3, F32)

    def make(lib):
        return lambda c, xs: lib.lax.scan(lambda c, x: (c * w + x, lib.numpy.sin(c)), c, xs)
    args = (X3, np.ones((5, 3), F32))
    assert str(fluxion.make_jaxpr(make(fluxion))(*args)) == str(jax.make_jaxpr(make(jax))(*args))


def _scan_hlo(length, unroll=1):
    fun = lambda c: lax.scan(lambda c, _: (fnp.sin(c) * 2.0, c), c, None, length=length,
                             unroll=unroll)
    return fluxion.jit(fun).lower(X3).as_text()


def test_scan_stablehlo_is_one_loop_not_unrolled():
    short, long = _scan_hlo(10), _scan_hlo(1000)
    assert abs(len(long) - len(short)) < 40
    for text in (short, long):
        assert text.count("stablehlo.while") == 1 and text.count("stablehlo.sine") == 1
        assert "stablehlo.dynamic_update_slice" in text


@pytest.mark.parametrize("length,unroll,loops,sines", [(10, 5, 1, 5), (10, 3, 1, 4),
                                                       (4, True, 0, 4), (4, 0, 0, 4), (3, 7, 0, 3)])
def test_scan_unroll_steps_per_iteration(length, unroll, loops, sines):
    text = _scan_hlo(length, unroll)
    assert text.count("stablehlo.while") == loops
    # unroll=3 over 10 steps: 3 steps per trip plus 1 leftover step after the loop.
    assert text.count("stablehlo.sine") == sines


def test_disable_jit_runs_python_control_flow():
    with fluxion.disable_jit():
        assert float(lax.cond(True, lambda: F32(1), lambda: F32(2))) == 1.0
        assert int(lax.while_loop(lambda c: c < 5, lambda c: c + 2, np.int32(0))) == 6
        carry, ys = lax.scan(lambda c, x: (c + x, c), F32(0), np.arange(3, dtype=F32))
        assert float(carry) == 3.0 and ys.tolist() == [0.0, 0.0, 1.0]


# =============================================================================================
# map and associative_scan

@pytest.mark.parametrize("batch_size", [None, 0, 2, 3, 7, 10])
def test_map_matches_python_loop(batch_size):
    xs = {"x": np.arange(14, dtype=F32).reshape(7, 2), "y": np.arange(7, dtype=F32)}
    fun = lambda d: (d["x"].sum() * d["y"], d["x"] * 2)
    expected = _python_scan(lambda c, d: (c, fun(d)), (), xs, 7)[1]
    out = fluxion.jit(lambda xs: lax.map(fun, xs, batch_size=batch_size))(xs)
    _assert_tree_close(out, expected)


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((8,), 0), ((1,), 0), ((2, 5, 3), 1),
                                        ((4, 6), -1)])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_matches_cumsum_and_cumprod(shape, axis, reverse):
    x = np.linspace(0.5, 1.5, int(np.prod(shape))).astype(F32).reshape(shape)
    flip = (lambda a: np.flip(a, axis)) if reverse else (lambda a: a)
    sums, prods = fluxion.jit(lambda x: lax.associative_scan(
        lambda a, b: (a[0] + b[0], a[1] * b[1]), (x, x), reverse=reverse, axis=axis))(x)
    np.testing.assert_allclose(sums, flip(np.cumsum(flip(x), axis)), rtol=1e-5)
    np.testing.assert_allclose(prods, flip(np.cumprod(flip(x), axis)), rtol=1e-5)


def test_associative_scan_of_booleans_and_errors():
    x = np.array([False, False, True, False, False])
    out = fluxion.jit(lambda x: lax.associative_scan(fnp.logical_or, x))(x)
    assert out.dtype == np.bool_ and out.tolist() == np.logical_or.accumulate(x).tolist()
    with pytest.raises(ValueError, match="same first dimension"):
        lax.associative_scan(lambda a, b: a, (np.zeros(3), np.zeros(4)))


# =============================================================================================
# custom_linear_solve and custom_root (values; derivatives are in test_control_flow_ad.py)

A_SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], F32)
B_VEC = np.array([1.0, 2.0, 3.0], F32)


def richardson(matvec, b):
    """A fixed-iteration solver that only applies `matvec` (converges for A_SPD)."""
    x = b * 0
    for _ in range(25):
        x = x + 0.3 * (b - matvec(x))
    return x


def test_custom_linear_solve_value_matches_jax():
    def run(lib):
        return lib.lax.custom_linear_solve(lambda x: lib.numpy.dot(A_SPD, x), B_VEC, richardson,
                                           symmetric=True)
    out = _eager_and_jit(lambda: run(fluxion))
    np.testing.assert_allclose(out, run(jax), rtol=1e-5)
    np.testing.assert_allclose(out, np.linalg.solve(A_SPD, B_VEC), rtol=1e-4)
    assert "custom_linear_solve[" in str(fluxion.make_jaxpr(lambda: run(fluxion))())


def test_custom_linear_solve_pytree_and_aux():
    def solve(matvec, b):
        tree_map = fluxion.tree_util.tree_map
        x = tree_map(lambda v: v * 0, b)
        for _ in range(25):
            x = tree_map(lambda x, b, ax: x + 0.3 * (b - ax), x, b, matvec(x))
        return x, {"iters": np.int32(25)}
    b = {"u": B_VEC, "v": B_VEC * 2}
    matvec = lambda x: {"u": fnp.dot(A_SPD, x["u"]), "v": x["v"] * 2.0}
    x, aux = lax.custom_linear_solve(matvec, b, solve, has_aux=True)
    np.testing.assert_allclose(x["u"], np.linalg.solve(A_SPD, B_VEC), rtol=1e-4)
    np.testing.assert_allclose(x["v"], B_VEC, rtol=1e-5)
    assert int(aux["iters"]) == 25
    with pytest.raises(TypeError, match="output pytree structure must match b"):
        lax.custom_linear_solve(lambda x: [x], B_VEC, richardson)
    with pytest.raises(ValueError, match="output shapes must match b"):
        lax.custom_linear_solve(lambda x: x[:2], B_VEC, richardson)


def _newton_sqrt(lib, a, has_aux=False):
    f = lambda x: x * x - a

    def solve(f, x0):
        x = x0
        for _ in range(25):
            x = x - f(x) / (2.0 * x)
        return (x, x * 0) if has_aux else x
    return lib.lax.custom_root(f, F32(1.0), solve, lambda g, y: y / g(1.0), has_aux=has_aux)


def test_custom_root_value_matches_jax():
    np.testing.assert_allclose(_newton_sqrt(fluxion, F32(2.0)), np.sqrt(2.0), rtol=1e-6)
    np.testing.assert_allclose(_newton_sqrt(fluxion, F32(3.0)), _newton_sqrt(jax, F32(3.0)))
    root, aux = _newton_sqrt(fluxion, F32(2.0), has_aux=True)
    assert float(aux) == 0.0
    with pytest.raises(TypeError, match="output pytree structure must match initial_guess"):
        lax.custom_root(lambda x: (x, x), F32(1.0), lambda f, x: x, lambda g, y: y)


def _while_with_in_place_body(mod):
    def body(carry):
        x, y = carry
        x += 1  # in place when x is a mutable NumPy array
        return x, y + x
    val = np.array(1.0)
    return mod.lax.while_loop(lambda c: c[0] < 10, body, (val, val))[1]


def test_eager_loops_match_jax_under_disable_jit():
    import jax
    with fluxion.disable_jit():
        # the carry's NumPy leaves are copied: the body's += changed the aliased y too (56)
        assert float(_while_with_in_place_body(fluxion)) == 55.0
        # a zero-trip fori_loop returns its init value (it raised, as a zero-length scan)
        assert fluxion.lax.fori_loop(0, 0, lambda i, x: x + i, 1.0) == 1.0
    with jax.disable_jit():
        assert float(_while_with_in_place_body(jax)) == 55.0
        assert jax.lax.fori_loop(0, 0, lambda i, x: x + i, 1.0) == 1.0
    assert float(fluxion.jit(lambda: _while_with_in_place_body(fluxion))()) == 55.0


def test_cond_of_a_string_predicate_raises_jax_message():
    import jax
    for mod in (fluxion, jax):
        with pytest.raises(TypeError, match="Pred must be a scalar, got foo of type <class 'str'>"):
            mod.lax.cond("foo", lambda: 1, lambda: 2)


def test_carry_structure_error_counts_children_and_names_keys_like_jax():
    import jax
    for mod in (fluxion, jax):
        with pytest.raises(TypeError, match=r"is a <class 'dict'> with 1 child but .* with 2 "
                                            r"children, .*symmetric difference of key sets: "
                                            r"\{'b'\}"):
            mod.lax.scan(lambda x, _: ({"a": x["a"], "b": x["a"]}, None),
                         {"a": np.int32(0)}, None, length=1)


def test_cond_of_a_function_predicate_raises_jax_message():
    import jax
    for mod in (fluxion, jax):
        with pytest.raises(TypeError, match="Pred type must be either boolean or number, got "
                                            "<function"):
            mod.lax.cond(lambda: True, lambda: 1, lambda: 2)


def _branch_trace_order(lib):
    order = []

    def branch(name):
        def f(x):
            order.append(name)
            return x * 2
        return f

    lib.lax.cond(True, branch("true"), branch("false"), np.float32(1))
    lib.jit(lambda x: lib.lax.cond(x > 0, branch("true"), branch("false"), x))(np.float32(1))
    return order


def test_cond_traces_true_fun_first_as_jax():
    import jax
    assert _branch_trace_order(fluxion) == _branch_trace_order(jax) == ["true", "false"] * 2
