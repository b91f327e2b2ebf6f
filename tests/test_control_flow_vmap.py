"""Batching of lax control flow, against a Python loop over the batch.

cond/switch with a batched predicate become a select of both branches' results, and with an
unbatched one stay a cond with batched branches; while_loop with a batched predicate runs until
every member is done, each member's carry frozen once its own predicate fails; scan batches its
carry (whatever the body makes batched) and its scanned-over inputs; collectives inside the
bodies see the vmapped axis.
"""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion import lax
from fluxion._src.lax import parallel

B = 3
F32 = np.float32


def _example(args, in_axes, b):
    return [a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)]


def _check_vmap(fun, args, in_axes, out_axes=0):
    """jit(vmap(fun)) against jit(fun) applied to each example, stacked along out_axes."""
    per_example = fluxion.jit(fun)
    outs = [per_example(*_example(args, in_axes, b)) for b in range(B)]
    leaves = [fluxion.tree_util.tree_leaves(o) for o in outs]
    expected = [np.stack([np.asarray(l[i]) for l in leaves], axis=out_axes)
                for i in range(len(leaves[0]))]
    got = fluxion.tree_util.tree_leaves(
        fluxion.jit(fluxion.vmap(fun, in_axes=in_axes, out_axes=out_axes))(*args))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert np.asarray(g).dtype == e.dtype
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-6)


_r = np.random.default_rng(0)
XB = _r.standard_normal((B, 4)).astype(F32)
YB = _r.standard_normal((B, 4)).astype(F32)
PREDS = np.array([True, False, True])


# =============================================================================================
# cond and switch

def _cond(p, x, y):
    return lax.cond(p, lambda x, y: (fnp.sin(x) * y, x.sum()),
                    lambda x, y: (x - y, y.sum() * 2.0), x, y)


@pytest.mark.parametrize("in_axes", [(0, 0, 0), (0, None, 0), (None, 0, None), (None, 1, None),
                                     (0, -1, 1)])
def test_cond_matches_loop(in_axes):
    args = [PREDS, XB, YB]
    args = [a if ax is None else np.moveaxis(a, 0, ax) for a, ax in zip(args, in_axes)]
    args = [a[0] if ax is None else a for a, ax in zip(args, in_axes)]
    _check_vmap(_cond, args, in_axes)


def test_cond_out_axes():
    _check_vmap(_cond, [PREDS, XB, YB], (0, 0, 0), out_axes=-1)


def test_cond_batched_predicate_becomes_select():
    text = str(fluxion.make_jaxpr(fluxion.vmap(_cond))(PREDS, XB, YB))
    assert "cond[" not in text and "select_n" in text


def test_cond_unbatched_predicate_stays_cond():
    text = str(fluxion.make_jaxpr(fluxion.vmap(_cond, in_axes=(None, 0, None)))(True, XB, YB[0]))
    assert text.count("cond[") == 1 and "select_n" not in text


def test_switch_matches_loop_with_clamped_indices():
    branches = [lambda x: x * 2.0, lambda x: fnp.sin(x), lambda x: -x]
    fun = lambda i, x: lax.switch(i, branches, x)
    _check_vmap(fun, [np.array([-4, 1, 9], np.int32), XB], (0, 0))
    _check_vmap(fun, [np.array([2, 0, 1], np.int32), XB[0]], (0, None))
    _check_vmap(fun, [np.int32(1), XB], (None, 0))


# =============================================================================================
# while_loop and fori_loop

def _grow(limit, x):
    """Multiply x by 1.5 until its sum exceeds `limit`; count the steps."""
    return lax.while_loop(lambda c: c[1].sum() < limit, lambda c: (c[0] + 1, c[1] * 1.5),
                          (0, x))


def test_while_batched_predicate_runs_each_member_to_its_end():
    limits = np.array([1.0, 20.0, 200.0], F32)
    x = np.abs(XB) + 0.1
    _check_vmap(_grow, [limits, x], (0, 0))
    _check_vmap(_grow, [limits, x[0]], (0, None))
    _check_vmap(_grow, [F32(20.0), x], (None, 0))
    text = str(fluxion.make_jaxpr(fluxion.vmap(_grow))(limits, x))
    assert "reduce_or" in text and "select_n" in text


def test_while_unbatched_predicate_keeps_scalar_predicate():
    fun = lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, fnp.sin(c[1])), (0, x))
    _check_vmap(fun, [XB], (0,))
    text = str(fluxion.make_jaxpr(fluxion.vmap(fun))(XB))
    assert "reduce_or" not in text and "select_n" not in text


def test_fori_loop_with_batched_trip_count():
    fun = lambda n, x: lax.fori_loop(0, n, lambda i, c: c * 2.0 + i, x)
    _check_vmap(fun, [np.array([0, 2, 5], np.int32), XB], (0, 0))
    _check_vmap(fun, [np.array([3, 1, 4], np.int32), XB[0]], (0, None))


# =============================================================================================
# scan

def _scan(c, xs, w):
    def body(carry, x):
        h, k = carry
        h = fnp.tanh(h * w + x)
        return (h, k + 1), h * 2.0
    return lax.scan(body, (c, np.int32(0)), xs)


SCAN_C = _r.standard_normal((B, 2)).astype(F32)
SCAN_XS = _r.standard_normal((B, 5, 2)).astype(F32)
SCAN_W = _r.standard_normal((B, 2)).astype(F32)


@pytest.mark.parametrize("in_axes", [(0, 0, 0), (0, None, None), (None, 0, None),
                                     (None, None, 0), (None, 2, None), (1, -1, None)])
def test_scan_matches_loop(in_axes):
    args = [SCAN_C, SCAN_XS, SCAN_W]
    args = [np.moveaxis(a, 0, ax) if ax is not None else a[0] for a, ax in zip(args, in_axes)]
    _check_vmap(_scan, args, in_axes)


def test_scan_out_axes_and_vmap_of_jit():
    _check_vmap(_scan, [SCAN_C, SCAN_XS, SCAN_W], (0, 0, 0), out_axes=-1)
    eager = fluxion.vmap(fluxion.jit(_scan))(SCAN_C, SCAN_XS, SCAN_W)
    batched = fluxion.jit(fluxion.vmap(_scan))(SCAN_C, SCAN_XS, SCAN_W)
    for e, b in zip(fluxion.tree_util.tree_leaves(eager), fluxion.tree_util.tree_leaves(batched)):
        np.testing.assert_allclose(e, b, rtol=1e-6)


def test_scan_carry_batched_only_by_the_body():
    # The carry starts unbatched; adding a batched x makes it batched (a fixpoint).
    fun = lambda xs: lax.scan(lambda c, x: (c + x, c), F32(0), xs)
    _check_vmap(fun, [SCAN_XS[:, :, 0]], (0,))
    text = str(fluxion.make_jaxpr(fluxion.vmap(fun))(SCAN_XS[:, :, 0]))
    # The carry is broadcast to the batch before the loop; the body adds batched slices.
    assert "f32[3] = add" in text and "f32[3] e:f32[5,3] = scan[" in text


def test_map_inside_vmap():
    fun = lambda x: lax.map(lambda r: fnp.sin(r).sum(), x)
    _check_vmap(fun, [SCAN_XS], (0,))


# =============================================================================================
# Collectives inside bodies see the vmapped axis

def test_psum_inside_scan_and_cond():
    def fun(p, xs):
        total, _ = lax.scan(lambda c, x: (c + parallel.psum(x, "i"), c), F32(0), xs)
        return lax.cond(p, lambda t, x: parallel.psum(x, "i") + t, lambda t, x: t + x, total,
                        xs[0])
    xs = SCAN_XS[:, :, 0]
    total = xs.sum()
    unbatched = fluxion.vmap(fun, in_axes=(None, 0), axis_name="i")(True, xs)
    np.testing.assert_allclose(unbatched, np.full(B, total + xs[:, 0].sum()), rtol=1e-5)
    batched = fluxion.vmap(fun, axis_name="i")(PREDS, xs)
    np.testing.assert_allclose(batched, np.where(PREDS, total + xs[:, 0].sum(), total + xs[:, 0]),
                               rtol=1e-5)


def test_psum_inside_cond_whose_operands_are_all_unbatched():
    # psum's result is unbatched, so the cond sees no batched operand; its branches must still
    # be batched under the vmapped axis.
    def fun(x):
        total = parallel.psum(x, "i")
        return lax.cond(total > 0, lambda t: parallel.psum(t, "i"), lambda t: t, total)
    np.testing.assert_allclose(fluxion.vmap(fun, axis_name="i")(np.ones(B, F32)),
                               np.full(B, B * B, F32))


# =============================================================================================
# custom_linear_solve

def test_custom_linear_solve_batched_over_matrix_and_rhs():
    base = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], F32)
    mats = np.stack([base, base * 1.5, base + np.eye(3, dtype=F32)])
    rhs = _r.standard_normal((B, 3)).astype(F32)

    def solve(matvec, b):
        return lax.fori_loop(0, 40, lambda i, x: x + 0.2 * (b - matvec(x)), b * 0)

    fun = lambda a, b: lax.custom_linear_solve(lambda x: fnp.dot(a, x), b, solve, symmetric=True)
    for in_axes in [(0, 0), (None, 0), (0, None)]:
        args = [mats if in_axes[0] == 0 else base, rhs if in_axes[1] == 0 else rhs[0]]
        _check_vmap(fun, args, in_axes)


def _read_only_carry(mod, kind):
    """A cond whose branches return a loop carry that the loop body never changes."""
    m_lax = mod.lax

    def loop(y):
        if kind == "scan":
            return m_lax.scan(lambda c, _: (c, None), y, None, length=1)[0]
        if kind == "while_loop":
            return m_lax.while_loop(lambda c: False, lambda c: c, y)
        return m_lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0], c[1] + 1), (y, 0))[0]
    return lambda x, y: m_lax.cond(x < 0, lambda y: loop(y), lambda y: loop(y), y)


@pytest.mark.parametrize("kind", ["scan", "while_loop", "while_loop_with_counter"])
def test_read_only_loop_carries_stay_unbatched_like_jax(kind):
    # JAX returns a carry the body passes through unchanged as the initial value, so vmap with
    # out_axes=None accepts it (flax issue 4709); fluxion reported a mapped output.
    import jax
    xs = np.arange(3.0, dtype=np.float32)
    want = jax.vmap(_read_only_carry(jax, kind), (0, None), None)(xs, 3.0)
    f = fluxion.vmap(_read_only_carry(fluxion, kind), (0, None), None)
    np.testing.assert_array_equal(f(xs, 3.0), want)
    np.testing.assert_array_equal(fluxion.jit(f)(xs, 3.0), want)
