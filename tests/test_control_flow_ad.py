"""Differentiation of lax control flow.

check_grads (forward and reverse, to order 2, in float64) through scan, cond, switch and
fori_loop with static bounds; forward mode (and linearize) through while_loop and the JAX error
for reverse mode through it; gradients against jax.grad as an oracle (nested control flow,
custom_linear_solve, custom_root); and the shape of the linearized scan (loop-invariant
residuals computed once outside the loop, the transposed scan running in reverse).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion import lax
from fluxion.test_util import check_grads

F32 = np.float32
X3 = np.array([0.3, -0.7, 1.1])
W3 = np.array([0.9, 1.3, -0.4])
XS = np.linspace(-1.0, 1.0, 12).reshape(4, 3)


def _close(got, want, tol=1e-5):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


# =============================================================================================
# scan

def _scan_fun(reverse=False, unroll=1):
    def f(c, xs, w):
        def body(carry, x):
            h, s = carry
            h = fnp.sin(h * w) + x
            return (h, s + h * h), fnp.cos(h) * w
        return lax.scan(body, (c, c * 0.5), xs, reverse=reverse, unroll=unroll)
    return f


@pytest.mark.parametrize("reverse,unroll,order", [(False, 1, 2), (True, 2, 1)])
def test_scan_check_grads(x64, reverse, unroll, order):
    check_grads(fluxion.jit(_scan_fun(reverse, unroll)), (X3, XS, W3), order=order)


def test_scan_grad_matches_jax():
    def make(lib, np_):
        def f(c, xs, w):
            carry, ys = lib.lax.scan(lambda h, x: (np_.tanh(h * w + x), h * x), c, xs)
            return (carry ** 2).sum() + ys.sum()
        return f
    args = (X3.astype(F32), XS.astype(F32), W3.astype(F32))
    got = fluxion.grad(make(fluxion, fnp), argnums=(0, 1, 2))(*args)
    _close(got, jax.grad(make(jax, jnp), argnums=(0, 1, 2))(*args))
    _close(fluxion.jit(fluxion.grad(make(fluxion, fnp), argnums=(0, 1, 2)))(*args), got)


def test_linearized_scan_hoists_invariants_and_transposes_in_reverse():
    def f(c, xs, w):
        return lax.scan(lambda h, x: (fnp.sin(h * fnp.cos(w)) + x, h), c, xs)[0].sum()
    text = str(fluxion.make_jaxpr(fluxion.grad(f, argnums=2))(X3.astype(F32),
                                                              XS.astype(F32), W3.astype(F32)))
    before_scans = text.split("scan[")[0]
    assert "cos" in before_scans  # cos(w) is computed once, outside the loops
    assert text.count("scan[") == 2
    assert "reverse=True" in text.split("scan[")[2]


def test_scan_with_integer_carry_and_float0_tangent():
    def f(x, n):
        (total, count), _ = lax.scan(lambda c, x: ((c[0] + x * c[1], c[1] + 1), None),
                                     (x[0], n), x)
        return total, count
    primal_out, tangent_out = fluxion.jvp(lambda x: f(x, np.int32(2)), (X3.astype(F32),),
                                          (np.ones(3, F32),))
    assert tangent_out[1].dtype == fluxion.dtypes.float0
    np.testing.assert_allclose(tangent_out[0], 1.0 + 2.0 + 3.0 + 4.0)
    assert int(primal_out[1]) == 5


# =============================================================================================
# cond and switch

def _both_branches(x, y):
    """cond with each constant predicate, and with one computed from the operands."""
    def cond(pred):
        return lax.cond(pred, lambda x, y: (fnp.sin(x) * y, x),
                        lambda x, y: (x * x * y, fnp.cos(y)), x, y)
    return cond(True), cond(False), cond(x.sum() > y.sum())


def test_cond_check_grads(x64):
    check_grads(fluxion.jit(_both_branches), (X3, W3), order=2)


def test_switch_check_grads(x64):
    branches = [lambda x, w: x * w, lambda x, w: fnp.sin(x) + w, lambda x, w: x * x]

    def every_branch(x, w):
        return [lax.switch(i, branches, x, w) for i in (-1, 1, 2)]
    check_grads(fluxion.jit(every_branch), (X3, W3), order=2)


def test_cond_grad_with_traced_predicate_matches_jax():
    def make(lib, np_):
        def f(x):
            return lib.lax.cond(x.sum() > 0, lambda x: np_.sqrt(x * x + 1.0),
                                lambda x: np_.exp(x), x).sum()
        return f
    grad = fluxion.jit(fluxion.grad(make(fluxion, fnp)))
    for x in (X3.astype(F32), -X3.astype(F32) - 1):
        _close(grad(x), jax.grad(make(jax, jnp))(x))


def test_cond_untaken_branch_does_not_poison_gradient():
    f = lambda x: lax.cond(x > 0, lambda x: fnp.sqrt(x), lambda x: x * 0.0, x)
    assert float(fluxion.grad(f)(F32(-1.0))) == 0.0


def test_cond_jvp_of_integer_operand_is_float0():
    f = lambda x, n: lax.cond(n > 0, lambda x, n: (x * 2.0, n + 1), lambda x, n: (x, n), x, n)
    _, (tx, tn) = fluxion.jvp(lambda x: f(x, np.int32(3)), (F32(1.5),), (F32(1.0),))
    assert float(tx) == 2.0 and tn.dtype == fluxion.dtypes.float0


# =============================================================================================
# fori_loop and while_loop

def _fori(x, w):
    return lax.fori_loop(0, 3, lambda i, c: fnp.sin(c * w) + c * i, x)


def test_fori_loop_static_bounds_check_grads(x64):
    check_grads(fluxion.jit(_fori), (X3, W3), order=2)


def test_fori_loop_grad_matches_jax():
    fun = lambda lib, np_: lambda x: lib.lax.fori_loop(1, 4, lambda i, c: np_.sin(c) * i, x).sum()
    _close(fluxion.grad(fun(fluxion, fnp))(X3.astype(F32)), jax.grad(fun(jax, jnp))(X3.astype(F32)))


def _while(x, w):
    return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, fnp.sin(c[1] * w) + c[1]),
                          (0, x))[1]


def test_while_loop_forward_mode(x64):
    check_grads(fluxion.jit(_while), (X3, W3), order=2, modes=("fwd",))
    fun = lambda lib, np_: lambda x: lib.lax.while_loop(
        lambda c: c[1].sum() < 10.0, lambda c: (c[0] + 1, c[1] * 1.5 + np_.sin(c[1])), (0, x))[1]
    x = np.abs(X3).astype(F32)
    _close(fluxion.jvp(fun(fluxion, fnp), (x,), (np.ones(3, F32),)),
           jax.jvp(fun(jax, jnp), (x,), (np.ones(3, F32),)))


def test_while_loop_linearize():
    x, w = X3.astype(F32), W3.astype(F32)
    out, f_jvp = fluxion.linearize(lambda x: _while(x, w), x)
    _, expected = fluxion.jvp(lambda x: _while(x, w), (x,), (np.ones(3, F32),))
    _close(f_jvp(np.ones(3, F32)), expected)
    _close(out, _while(x, w))


def test_reverse_mode_through_while_loop_raises_jax_error():
    message = ("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop "
               "with dynamic start/stop values. Try using lax.scan, or using fori_loop with "
               "static start/stop.")
    with pytest.raises(ValueError) as want:
        jax.grad(lambda x: jax.lax.while_loop(lambda c: c < 3, lambda c: c * 2, x))(1.0)
    assert str(want.value) == message
    with pytest.raises(ValueError) as info:
        fluxion.grad(lambda x: lax.while_loop(lambda c: c < 3, lambda c: c * 2, x))(1.0)
    assert str(info.value) == message
    dynamic = fluxion.jit(fluxion.grad(lambda x, n: lax.fori_loop(0, n, lambda i, c: c * x, x)))
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        dynamic(1.0, 3)


# =============================================================================================
# Nested control flow, against JAX

def test_nested_control_flow_grad_matches_jax(x64):
    def make(lib, np_):
        def f(x, w):
            def body(c, xi):
                c2 = lib.lax.cond(xi > 0.3, lambda c: np_.sin(c * w), lambda c: c * xi, c)
                inner = lib.lax.fori_loop(0, 2, lambda i, a: a * 0.9 + c2, c2)
                return inner, c2.sum()
            carry, ys = lib.lax.scan(body, x, np_.linspace(0.0, 1.0, 5))
            return carry.sum() + ys.sum()
        return f
    got = fluxion.grad(make(fluxion, fnp), argnums=(0, 1))(X3, W3)
    _close(got, jax.grad(make(jax, jnp), argnums=(0, 1))(X3, W3), tol=1e-10)
    check_grads(fluxion.jit(make(fluxion, fnp)), (X3, W3), order=1)


# =============================================================================================
# custom_linear_solve and custom_root

A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], F32)
A_NONSYM = A + np.triu(np.full((3, 3), 0.3, F32), 1)
B = np.array([1.0, 2.0, 3.0], F32)


def _richardson(lib):
    """A solver that only applies `matvec` (converges for A and A_NONSYM)."""
    def solve(matvec, b):
        return lib.lax.fori_loop(0, 30, lambda i, x: x + 0.3 * (b - matvec(x)), b * 0)
    return solve


def _linear_solve(lib, np_, symmetric):
    def f(a, b):
        kwargs = dict(symmetric=True) if symmetric else dict(transpose_solve=_richardson(lib))
        x = lib.lax.custom_linear_solve(lambda x: np_.dot(a, x), b, _richardson(lib), **kwargs)
        return (x * np_.arange(1.0, 4.0)).sum()
    return f


@pytest.mark.parametrize("symmetric", [True, False])
def test_custom_linear_solve_grads_match_jax(symmetric):
    a = A if symmetric else A_NONSYM
    got = fluxion.jit(fluxion.grad(_linear_solve(fluxion, fnp, symmetric), argnums=(0, 1)))(a, B)
    _close(got, jax.grad(_linear_solve(jax, jnp, symmetric), argnums=(0, 1))(a, B), tol=1e-4)
    tangents = (np.ones_like(a), np.ones_like(B))
    _close(fluxion.jvp(_linear_solve(fluxion, fnp, symmetric), (a, B), tangents),
           jax.jvp(_linear_solve(jax, jnp, symmetric), (a, B), tangents), tol=1e-4)


def test_custom_linear_solve_reverse_mode_needs_transpose_solve():
    f = lambda b: lax.custom_linear_solve(lambda x: fnp.dot(A_NONSYM, x), b,
                                          _richardson(fluxion)).sum()
    with pytest.raises(TypeError, match="transpose_solve required"):
        fluxion.grad(f)(B)
    # Forward mode does not need it.
    fluxion.jvp(f, (B,), (np.ones(3, F32),))


def _sqrt_root(lib, a):
    f = lambda x: x * x - a

    def solve(f, x0):
        x = x0
        for _ in range(25):
            x = x - f(x) / (2.0 * x)
        return x
    return lib.lax.custom_root(f, F32(1.0), solve, lambda g, y: y / g(1.0))


def test_custom_root_grads_match_jax():
    for a in (F32(2.0), F32(5.0)):
        got = fluxion.grad(lambda a: _sqrt_root(fluxion, a))(a)
        assert np.isclose(float(got), 0.5 / np.sqrt(a), rtol=1e-5)
        _close(got, jax.grad(lambda a: _sqrt_root(jax, a))(a))
        _close(fluxion.jvp(lambda a: _sqrt_root(fluxion, a), (a,), (F32(1.0),)),
               jax.jvp(lambda a: _sqrt_root(jax, a), (a,), (F32(1.0),)))


def _checkpointed_loss(mod, kind, policy_name):
    """sum of a checkpointed scan, cond or fori_loop of x (with `mod` fluxion or jax)."""
    m_lax, m_np = mod.lax, mod.numpy
    policy = None if policy_name is None else getattr(mod.checkpoint_policies, policy_name)

    def body(c, t):
        return c * m_np.sin(c + t), m_np.cos(c) * t
    loops = {
        "scan": lambda c: sum(o.sum() for o in m_lax.scan(body, c, m_np.arange(1.0, 4.0))),
        "cond": lambda c: m_lax.cond(c[0] < 2, lambda c: m_np.sin(c) * c, m_np.cos, c).sum(),
        "fori_loop": lambda c: m_lax.fori_loop(0, 3, lambda i, c: m_np.sin(c) * 1.5, c).sum(),
    }
    return mod.checkpoint(loops[kind], policy=policy)


@pytest.mark.parametrize("kind", ["scan", "cond", "fori_loop"])
@pytest.mark.parametrize("policy_name", [None, "everything_saveable", "nothing_saveable"])
def test_grad_of_checkpointed_control_flow_matches_jax(kind, policy_name):
    # The JVP of a scan or while carries primals and tangents in one equation; checkpoint's
    # partial evaluation staged all of it, so reverse mode met sin/cos to transpose (and vjp of
    # a checkpointed cond returned a leaked tracer as its primal output).
    x = np.array([0.7, -1.3], np.float32)
    f, f_jax = _checkpointed_loss(fluxion, kind, policy_name), _checkpointed_loss(jax, kind,
                                                                                  policy_name)
    out, _ = fluxion.vjp(f, x)
    assert isinstance(out, fluxion.Array) and not isinstance(out, fluxion.core.Tracer)
    want = jax.grad(f_jax)(x)
    np.testing.assert_allclose(fluxion.grad(f)(x), want, rtol=1e-5)
    np.testing.assert_allclose(fluxion.jit(fluxion.grad(f))(x), want, rtol=1e-5)
    second = lambda mod, g: mod.grad(lambda x: mod.grad(g)(x).sum())(x)
    np.testing.assert_allclose(second(fluxion, f), second(jax, f_jax), rtol=1e-4)
