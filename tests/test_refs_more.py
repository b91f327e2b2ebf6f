"""Refs and Pallas beyond the basics, each against JAX 0.10.2 (the oracle) or the pure
program: integer-array Ref indices, `pl.Element` padding and `pl.BoundedSlice` dims,
`run_state_p`, one Ref passed twice, and Refs inside shard_map / pmap / custom_linear_solve."""
import numpy as np
import pytest

import jax
import jax.numpy as jjnp
from jax.experimental import pallas as jpl

import fluxion
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.experimental import pallas as pl


def same(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


X3 = np.arange(120, dtype=np.float32).reshape(4, 5, 6)
I = np.array([2, 0, 3], np.int32)
J = np.array([1, 4, 0], np.int32)


def _both(fn_of_m):
    """Run `fn_of_m(m, pl_mod)(ref)` with fluxion (eager and under jit) and with JAX (eager):
    [[fluxion eager, fluxion jit], [JAX]], each (output, final value of the Ref)."""
    outs = []
    for m, plm, lib in ((jnp, pl, fluxion), (jjnp, jpl, jax)):
        per_mode = []
        for jit in ((False, True) if lib is fluxion else (False,)):
            ref = lib.new_ref(m.asarray(X3))
            f = fn_of_m(m, plm)
            g = lib.jit(f) if jit else f
            out = g(ref)
            per_mode.append((None if out is None else np.asarray(out), np.asarray(ref[...])))
        outs.append(per_mode)
    return outs


GET_CASES = {
    "array axis 0": lambda m, p: lambda r: r[m.asarray(I)],
    "array axis 1": lambda m, p: lambda r: r[:, m.asarray(J)],
    "two adjacent arrays": lambda m, p: lambda r: r[:, m.asarray(J), m.asarray(I)],
    "arrays apart": lambda m, p: lambda r: r[m.asarray(I), :, m.asarray(J)],
    "array and int apart": lambda m, p: lambda r: r[m.asarray(I), :, 1],
    "int and array apart": lambda m, p: lambda r: r[1, :, m.asarray(I)],
    "2-d array": lambda m, p: lambda r: r[m.asarray([[0, 1], [2, 3]])],
    "broadcast arrays": lambda m, p: lambda r: r[m.asarray([[0], [1]]), :, m.asarray(I)],
    "negative and past the end": lambda m, p: lambda r: r[m.asarray([-1, 7, 1])],
    "strided slice and array": lambda m, p: lambda r: r[::2, m.asarray(J)],
    "ds and array": lambda m, p: lambda r: r[p.ds(1, 2), :, m.asarray(I)],
    "uint8 array": lambda m, p: lambda r: r[m.asarray([3, 1], dtype=m.uint8)],
    "numpy array": lambda m, p: lambda r: r[np.array([1, 2])],
}


@pytest.mark.parametrize("case", sorted(GET_CASES))
def test_get_with_integer_arrays_matches_jax(case):
    (fe, fj), (je,) = _both(GET_CASES[case])
    for got in (fe, fj):
        same(got[0], je[0])


def _set_rows(m, p):
    def f(r):
        r[m.asarray(I), :, 1] = m.ones((3, 5), m.float32) * -1
    return f


def _add_repeated(m, p):
    def f(r):
        r[m.asarray([0, 0, 1]), 1] += m.ones((3, 6), m.float32)  # get, then set: last wins
    return f


def _addupdate_repeated(m, p):
    lib = fluxion if m is jnp else jax
    def f(r):
        lib.ref.addupdate(r, (m.asarray([0, 0, 3]),), m.ones((3, 5, 6), m.float32))
    return f


def _swap_dropped(m, p):
    lib = fluxion if m is jnp else jax
    def f(r):
        return lib.ref.swap(r, (m.asarray([7, -1, 0]),), m.zeros((3, 5, 6), m.float32))
    return f


@pytest.mark.parametrize("make", [_set_rows, _add_repeated, _addupdate_repeated, _swap_dropped],
                         ids=lambda f: f.__name__)
def test_writes_with_integer_arrays_match_jax(make):
    (fe, fj), (je,) = _both(make)
    for got in (fe, fj):
        same(got[1], je[1])
        if je[0] is not None:
            same(got[0], je[0])


def test_array_index_printing_matches_jax():
    idx_f, idx_j = jnp.array([1, 2]), jjnp.array([1, 2])
    f = str(fluxion.make_jaxpr(lambda r: r[idx_f])(fluxion.new_ref(jnp.zeros((3, 4)))))
    j = str(jax.make_jaxpr(lambda r: r[idx_j])(jax.new_ref(jjnp.zeros((3, 4)))))
    assert f == j


def test_array_index_under_vmap_and_grad():
    xs = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)

    def f(x):
        r = fluxion.new_ref(x)
        r[jnp.array([3, 0])] += r[jnp.array([1, 1])] * 2.0
        return r[jnp.array([0, 3, 2]), 1]
    out = fluxion.jit(fluxion.vmap(f))(xs)
    for k in range(3):
        y = xs[k].copy()
        y[[3, 0]] += y[[1, 1]] * 2.0
        close(out[k], y[[0, 3, 2], 1])

    def g(x):
        r = fluxion.new_ref(x)
        return (r[jnp.array([2, 2, 0])] ** 2).sum() + (r[...] * 3).sum()

    def gj(x):
        r = jax.new_ref(x)
        return (r[jjnp.array([2, 2, 0])] ** 2).sum() + (r[...] * 3).sum()
    close(fluxion.jit(fluxion.grad(g))(xs[0]), jax.grad(gj)(xs[0]))


def test_unsupported_indices_raise_jax_classes():
    r = fluxion.new_ref(jnp.zeros((4, 6)))
    same(r[None], np.zeros((4, 6)))  # None alone is the whole Ref, as in JAX
    with pytest.raises(ValueError, match="None"):
        r[None, :]
    with pytest.raises(ValueError, match="None"):
        r[:, None] = jnp.zeros((4, 1, 6))
    with pytest.raises(IndexError, match="boolean"):
        r[jnp.array([True, False, True, False])]
    with pytest.raises(TypeError, match="Indexer must have integer"):
        r[jnp.array([1.0])]
    with pytest.raises(ValueError, match="list"):
        r[[0, 1]]


# ------------------------------------------------------------------------------ pallas


def _element_call(plm, lib, m, pad, dtype, n_rows=4, offset=lambda i: i * 3):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    return plm.pallas_call(
        kernel, lib.ShapeDtypeStruct((n_rows, 8), dtype), grid=(n_rows,),
        in_specs=[plm.BlockSpec((plm.Element(8, pad),), lambda i: (offset(i),))],
        out_specs=plm.BlockSpec((None, 8), lambda i: (i, 0)), interpret=True)


@pytest.mark.parametrize("pad", [(0, 0), (2, 0), (1, 3), (0, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_element_padding_reads_as_jax(pad, dtype):
    x = np.arange(12).astype(dtype)
    want = _element_call(jpl, jax, jjnp, pad, dtype)(jjnp.asarray(x))
    f = _element_call(pl, fluxion, jnp, pad, dtype)
    same(f(jnp.asarray(x)), want)
    same(fluxion.jit(f)(jnp.asarray(x)), want)


def test_element_negative_offset_wraps_as_jax():
    x = np.arange(12, dtype=np.float32)
    off = lambda i: i * 3 - 2  # noqa: E731
    want = _element_call(jpl, jax, jjnp, (1, 1), np.float32, offset=off)(jjnp.asarray(x))
    same(_element_call(pl, fluxion, jnp, (1, 1), np.float32, offset=off)(jnp.asarray(x)), want)


def _padded_output_call(plm, lib):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    return plm.pallas_call(
        kernel, lib.ShapeDtypeStruct((10,), np.float32), grid=(3,),
        in_specs=[plm.BlockSpec((4,), lambda i: (i,))],
        out_specs=plm.BlockSpec((plm.Element(4, (2, 1)),), lambda i: (i * 4,)),
        interpret=True)


def test_element_padded_output_and_unwritten_blocks_as_jax():
    x = np.arange(10, dtype=np.float32) + 1
    want = _padded_output_call(jpl, jax)(jjnp.asarray(x))  # the first two outputs are NaN
    same(_padded_output_call(pl, fluxion)(jnp.asarray(x)), want)
    same(fluxion.jit(_padded_output_call(pl, fluxion))(jnp.asarray(x)), want)


def test_element_padding_with_aliasing_raises():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    f = pl.pallas_call(kernel, fluxion.ShapeDtypeStruct((8,), np.float32), grid=(2,),
                       in_specs=[pl.BlockSpec((pl.Element(4, (1, 1)),), lambda i: (i * 4,))],
                       out_specs=pl.BlockSpec((4,), lambda i: (i,)),
                       input_output_aliases={0: 0}, interpret=True)
    with pytest.raises(NotImplementedError, match="Padding with aliasing"):
        f(jnp.zeros(8))


def _bounded_call(plm, lib, index_map):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    return plm.pallas_call(kernel, lib.ShapeDtypeStruct((16,), np.float32), grid=(2,),
                           in_specs=[plm.BlockSpec((plm.BoundedSlice(8),), index_map)],
                           out_specs=plm.BlockSpec((8,), lambda i: (i,)), interpret=True)


def test_bounded_slice_as_jax_interpret_mode():
    x = np.arange(40, dtype=np.float32)
    ok_map = lambda p: (lambda i: (p.ds(i * 5, 8),))  # noqa: E731
    # JAX's interpret mode traces it, then refuses to run it: ValueError.
    jax.make_jaxpr(_bounded_call(jpl, jax, ok_map(jpl)))(x)
    with pytest.raises(ValueError):
        _bounded_call(jpl, jax, ok_map(jpl))(x)
    f = _bounded_call(pl, fluxion, ok_map(pl))
    assert "pallas_call" in str(fluxion.make_jaxpr(f)(x))
    with pytest.raises(ValueError, match="BoundedSlice"):
        f(jnp.asarray(x))
    with pytest.raises(ValueError, match="BoundedSlice"):
        fluxion.jit(f)(jnp.asarray(x))
    # An index_map returning a block index for a BoundedSlice dimension: ValueError in both.
    with pytest.raises(ValueError):
        _bounded_call(jpl, jax, lambda i: (i,))(x)
    with pytest.raises(ValueError, match="pl.Slice"):
        _bounded_call(pl, fluxion, lambda i: (i,))(jnp.asarray(x))


def test_same_array_twice_to_pallas_call():
    def kernel(a_ref, b_ref, o_ref):
        o_ref[...] = a_ref[...] * 10 + b_ref[...]
    x = np.arange(8, dtype=np.float32)
    spec = pl.BlockSpec((4,), lambda i: (i,))
    f = pl.pallas_call(kernel, fluxion.ShapeDtypeStruct((8,), np.float32), grid=(2,),
                       in_specs=[spec, spec], out_specs=spec)
    same(f(x, x), x * 11)


# ------------------------------------------------------------------------------ run_state_p

def _rs_body(refs):
    a, b = refs
    b[...] = a[...] * 2 + b[...]
    a[...] += 1.0


def test_run_state_is_a_primitive_printed_as_jax():
    xf = (jnp.ones(3), jnp.arange(3.0))
    xj = (jjnp.ones(3), jjnp.arange(3.0))
    assert (str(fluxion.make_jaxpr(pl.run_state(_rs_body))(xf))
            == str(jax.make_jaxpr(jpl.run_state(_rs_body))(xj)))
    c = np.arange(3.0, dtype=np.float32)

    def closes(r):
        r[...] = r[...] + c
    # The closed-over constant is hoisted to a Ref input, as JAX does (JAX prints the unused
    # output as `_`, fluxion names it).
    fj = fluxion.make_jaxpr(pl.run_state(closes))(jnp.ones(3))
    jj = jax.make_jaxpr(jpl.run_state(closes))(jjnp.ones(3))
    for jx in (fj, jj):
        eqn, = jx.eqns
        body = eqn.params["jaxpr"]
        body = getattr(body, "jaxpr", body)  # JAX's param is an open jaxpr
        assert [type(v.aval).__name__ for v in body.invars] == ["AbstractRef"] * 2
        assert [v.aval.shape for v in body.invars] == [(3,)] * 2
        assert len(eqn.outvars) == 2 and eqn.params["is_initialized"] == (True, True)


def test_run_state_jit_grad_vmap():
    f = pl.run_state(_rs_body)
    x = np.arange(3.0, dtype=np.float32)
    pure = lambda a, b: (a + 1, a * 2 + b)  # noqa: E731
    for g in (f, fluxion.jit(f)):
        out = g((jnp.asarray(x), jnp.asarray(x * 3)))
        close(out[0], pure(x, x * 3)[0])
        close(out[1], pure(x, x * 3)[1])
    # JAX's run_state has no batching rule and fails under grad; fluxion's runs both.
    grad = fluxion.grad(lambda v: f((v, v * v))[1].sum())(jnp.asarray(x))
    close(grad, 2 + 2 * x)
    xs = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    a, b = fluxion.vmap(f)((jnp.asarray(xs), jnp.asarray(xs)))
    close(a, xs + 1)
    close(b, xs * 3)
    eqns = fluxion.make_jaxpr(fluxion.jit(f))((jnp.asarray(x), jnp.asarray(x))).eqns
    assert "run_state" in str(eqns[0].params["jaxpr"])


def test_run_state_closing_over_an_outer_ref():
    # JAX runs this under jit only; fluxion eagerly too.
    for jit in (False, True):
        r = fluxion.new_ref(jnp.ones(3))

        def body(s):
            s[...] = s[...] + r[...]
            r[...] += 1.0
        f = pl.run_state(body)
        out = (fluxion.jit(f) if jit else f)(jnp.zeros(3))
        same(out, np.ones(3))
        same(r[...], np.full(3, 2.0))


# ------------------------------------------------------------------------------ aliasing

def _twice(a, b):
    a[...] = a[...] + 1
    b[...] = b[...] * 10


def test_one_ref_twice_eager_is_one_buffer():
    r, j = fluxion.new_ref(jnp.ones(3)), jax.new_ref(jjnp.ones(3))
    _twice(r, r)
    _twice(j, j)
    same(r[...], j[...])


def test_one_ref_twice_to_jit_raises_as_jax():
    r, j = fluxion.new_ref(jnp.ones(3)), jax.new_ref(jjnp.ones(3))
    with pytest.raises(ValueError, match="appeared at both"):
        jax.jit(_twice)(j, j)
    with pytest.raises(ValueError, match="appeared at both a and b"):
        fluxion.jit(_twice)(r, r)
    with pytest.raises(ValueError, match=r"appeared at both"):
        fluxion.jit(lambda refs: _twice(*refs))((r, r))
    same(r[...], np.ones(3))  # nothing ran

    def closed(a):
        a[...] += 1
        r[...] *= 3
    with pytest.raises(ValueError, match="both closed over and passed as the argument a"):
        fluxion.jit(closed)(r)
    r2 = fluxion.new_ref(jnp.ones(3))
    fluxion.jit(closed)(r2)  # distinct Refs are fine
    same(r2[...], np.full(3, 2.0))
    same(r[...], np.full(3, 3.0))


def test_returning_a_new_ref_from_jit_raises_as_jax():
    with pytest.raises(ValueError, match="mutable array reference"):
        jax.jit(lambda x: jax.new_ref(x))(jjnp.ones(2))
    with pytest.raises(ValueError, match="cannot be returned"):
        fluxion.jit(lambda x: fluxion.new_ref(x))(jnp.ones(2))


# ------------------------------------------------------------------------------ shard_map, pmap,
#                                                                                custom_linear_solve

def _mesh():
    return fluxion.make_mesh((1,), ("x",))


def _ref_and_updaters():
    """A Ref of ones and two functions adding their input to it: closed over, and passed."""
    r = fluxion.new_ref(jnp.ones(4))

    def closed(x):
        r[...] += x
        return x * 2

    def passed(ref, x):
        ref[...] += x
        return x * 2
    return r, closed, passed


def test_ref_in_shard_map():
    from fluxion.sharding import PartitionSpec as P
    mesh = _mesh()
    r, closed, passed = _ref_and_updaters()
    sm_closed = fluxion.shard_map(closed, mesh=mesh, in_specs=P(), out_specs=P())
    sm_passed = fluxion.shard_map(passed, mesh=mesh, in_specs=(P(), P()), out_specs=P())
    expect = 1.0
    for call in (lambda: sm_closed(jnp.ones(4)), lambda: fluxion.jit(sm_closed)(jnp.ones(4)),
                 lambda: sm_passed(r, jnp.ones(4)),
                 lambda: fluxion.jit(sm_passed)(r, jnp.ones(4))):
        same(call(), np.full(4, 2.0))
        expect += 1
        same(r[...], np.full(4, expect))


def test_ref_in_pmap():
    r, closed, passed = _ref_and_updaters()
    same(fluxion.pmap(closed)(jnp.ones((1, 4))), np.full((1, 4), 2.0))
    same(r[...], np.full(4, 2.0))
    same(fluxion.pmap(passed, in_axes=(None, 0))(r, jnp.ones((1, 4))), np.full((1, 4), 2.0))
    same(r[...], np.full(4, 3.0))
    with pytest.raises(ValueError, match="unmapped"):  # JAX: ValueError too
        fluxion.pmap(passed, in_axes=(0, 0))(fluxion.new_ref(jnp.ones((1, 4))), jnp.ones((1, 4)))


def test_ref_closed_over_in_custom_linear_solve():
    a = np.array([2.0, 4.0, 5.0, 8.0], np.float32)
    r = fluxion.new_ref(jnp.zeros(4))
    j = jax.new_ref(jjnp.zeros(4))

    def run(lib, m, ref, b):
        def solve(mv, b):
            ref[...] += 1.0
            return b / a
        return lib.lax.custom_linear_solve(lambda x: x * a, b, solve)
    b = np.arange(4, dtype=np.float32)
    want = run(jax, jjnp, j, jjnp.asarray(b))  # JAX runs it eagerly (only)
    same(run(fluxion, jnp, r, jnp.asarray(b)), want)
    same(r[...], j[...])
    same(fluxion.jit(lambda b: run(fluxion, jnp, r, b))(jnp.asarray(b)), want)
    same(r[...], np.full(4, 2.0))
    g = fluxion.grad(lambda b: run(fluxion, jnp, r, b).sum())(jnp.asarray(b))
    close(g, 1 / a)
    with pytest.raises(AttributeError, match="b cannot be a Ref"):
        lax.custom_linear_solve(lambda x: x * a, fluxion.new_ref(jnp.ones(4)),
                                lambda mv, b: b / a)


def test_grad_through_array_indexed_writes():
    x = np.arange(1.0, 5.0, dtype=np.float32)

    def f(lib, m, rows):
        def g(v):
            r = lib.new_ref(v)
            r[m.asarray(rows)] = r[m.asarray([3, 3, 1])] * m.asarray([3.0, 4.0, 5.0])
            return (r[...] ** 2).sum()
        return g
    # Unique indices: JAX's gradient.
    want = jax.grad(f(jax, jjnp, [0, 2, 1]))(jjnp.asarray(x))
    close(fluxion.grad(f(fluxion, jnp, [0, 2, 1]))(jnp.asarray(x)), want)
    close(fluxion.jit(fluxion.grad(f(fluxion, jnp, [0, 2, 1])))(jnp.asarray(x)), want)
    # A repeated index (the last write wins, as in JAX): r = [5 x1, x1, 4 x3, x3], so the
    # gradient is [0, 52 x1, 0, 34 x3] (JAX's own gradient here is wrong: 196 for 136).
    g = f(fluxion, jnp, [0, 2, 0])
    close(g(jnp.asarray(x)), f(jax, jjnp, [0, 2, 0])(jjnp.asarray(x)))
    close(fluxion.grad(g)(jnp.asarray(x)), [0.0, 52 * x[1], 0.0, 34 * x[3]])


def test_equal_kernels_share_one_eager_executable():
    # Two pallas_calls built alike compare equal (their BlockMappings by structure).
    def make():
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
        return pl.pallas_call(kernel, fluxion.ShapeDtypeStruct((8,), np.float32), grid=(2,),
                              in_specs=[pl.BlockSpec((pl.Element(4, (1, 0)),),
                                                     lambda i: (i * 4,))],
                              out_specs=pl.BlockSpec((4,), lambda i: (i,)))
    x = jnp.arange(8.0)
    a, b = make()(x), make()(x)
    same(a, b)
    m1 = fluxion.make_jaxpr(make())(x).eqns[0].params["in_mappings"][0]
    m2 = fluxion.make_jaxpr(make())(x).eqns[0].params["in_mappings"][0]
    assert m1 == m2 and hash(m1) == hash(m2)
