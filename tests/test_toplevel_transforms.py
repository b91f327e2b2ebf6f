"""Top-level transformation APIs: linear_transpose, custom_gradient, closure_convert,
custom_derivatives, ensure_compile_time_eval, custom_batching, fwd_and_bwd, jax.ad's
cotangent destinations, make_user_context, smap, ds. JAX is the oracle; finite differences
and Python loops check gradients and vmap independently."""
import textwrap

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from _eight_devices import run_on_8_devices

RNG = np.random.default_rng(0)


def close(a, b, tol=1e-5):
    fa = fluxion.tree_util.tree_leaves(a)
    fb = jax.tree_util.tree_leaves(b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def fd_grad(f, x, eps=1e-3):
    """Central finite differences of scalar f at float64 point x."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
    return g


def both(name):
    return getattr(fluxion, name), getattr(jax, name)


# ---------------------------------------------------------------------------------------------
# linear_transpose

@pytest.mark.parametrize("jit", [False, True])
def test_linear_transpose_matches_jax_and_matrix_transpose(jit):
    A = RNG.standard_normal((3, 4)).astype(np.float32)
    ct = RNG.standard_normal(3).astype(np.float32)
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        t = mod.linear_transpose(lambda x: np_.asarray(A) @ x, np.zeros(4, np.float32))
        out = (mod.jit(lambda t, c: t(c)) if jit else (lambda t, c: t(c)))(t, ct)
        np.testing.assert_allclose(np.asarray(out[0]), A.T @ ct, rtol=1e-5)


def test_linear_transpose_pytrees_and_shape_dtype_structs():
    def f(x, y):
        return {"a": 2.0 * x - y[0], "b": jnp.sum(y[1]) * 3.0}
    def jf(x, y):
        return {"a": 2.0 * x - y[0], "b": jjnp.sum(y[1]) * 3.0}
    primals = (np.ones(2, np.float32), (np.ones(2, np.float32), np.ones(3, np.float32)))
    ct = {"a": np.array([1., 2.], np.float32), "b": np.float32(4.)}
    close(fluxion.linear_transpose(f, *primals)(ct), jax.linear_transpose(jf, *primals)(ct))
    s = fluxion.ShapeDtypeStruct((2,), np.float32)
    out = fluxion.linear_transpose(lambda x: x[::-1], s)(np.array([1., 2.], np.float32))
    np.testing.assert_array_equal(np.asarray(out[0]), [2., 1.])


def test_linear_transpose_keeps_primal_dtypes_and_zero_cotangents():
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        out = mod.linear_transpose(lambda x: np_.sum(x), np.ones(3, np.float16))(np.float16(2))
        assert out[0].dtype == np.float16
        out = mod.linear_transpose(lambda x: x.real, np.complex64(1j))(np.float32(1))
        assert out[0].dtype == np.complex64
        out = mod.linear_transpose(lambda x, y: 2 * x, 1.0, np.ones(2, np.float32))(1.0)
        np.testing.assert_array_equal(np.asarray(out[1]), [0., 0.])
    out = fluxion.linear_transpose(lambda x: 2 * x, 1)(3)
    assert out[0].dtype == np.int32 and int(out[0]) == 6


def test_linear_transpose_equals_vjp_under_vmap():
    A = RNG.standard_normal((3, 3)).astype(np.float32)
    t = fluxion.linear_transpose(lambda x: jnp.asarray(A) @ x, np.zeros(3, np.float32))
    cts = RNG.standard_normal((5, 3)).astype(np.float32)
    batched = fluxion.vmap(lambda c: t(c)[0])(cts)
    np.testing.assert_allclose(np.asarray(batched), np.stack([A.T @ c for c in cts]), rtol=1e-5)


def test_linear_transpose_errors():
    for mod in (fluxion, jax):
        with pytest.raises(TypeError, match="only supports"):
            mod.linear_transpose(lambda x: x.astype(np.int32), 1.0)
        t = mod.linear_transpose(lambda x, y: 2 * x + y, 1.0, 2.0)
        with pytest.raises(TypeError, match="cotangent tree does not match"):
            t((1.0,))
        with pytest.raises(TypeError, match="cotangent type does not match"):
            t(1)
        with pytest.raises(TypeError, match="cotangent type does not match"):
            t(np.ones(2, np.float32))
    # not linear: a product of two input-dependent values (JAX: an AssertionError inside)
    for mod in (fluxion, jax):
        with pytest.raises(AssertionError):
            mod.linear_transpose(lambda x: x * x, 1.0)(1.0)
    with pytest.raises(NotImplementedError, match="sin"):
        fluxion.linear_transpose(lambda x: jnp.sin(x), 1.0)(1.0)


# ---------------------------------------------------------------------------------------------
# custom_gradient

def _cg_square(mod):
    @mod.custom_gradient
    def f(x):
        return x ** 2, lambda g: (g * x,)  # deliberately half the true gradient
    return f


@pytest.mark.parametrize("jit", [False, True])
def test_custom_gradient_uses_the_rule(jit):
    outs = []
    for mod in (fluxion, jax):
        f = _cg_square(mod)
        g = mod.grad(f)
        g = mod.jit(g) if jit else g
        outs.append((f(3.), g(3.), mod.vmap(mod.grad(f))(np.arange(3.))))
    close(outs[0], outs[1])
    np.testing.assert_allclose(np.asarray(outs[0][2]), np.arange(3.))  # a loop would give x


def test_custom_gradient_two_args_and_single_value_rule():
    for mod in (fluxion, jax):
        @mod.custom_gradient
        def h(x, y):
            return x * y, lambda g: (g * y, g * x)
        close(mod.grad(h, argnums=(0, 1))(3., 4.), (4., 3.))

    @fluxion.custom_gradient
    def clip(x):
        return x, lambda g: jnp.clip(g, -1., 1.)
    assert float(fluxion.grad(lambda x: 5. * clip(x))(2.)) == 1.0


def test_custom_gradient_rule_closes_over_forward_values():
    def make(mod, np_):
        @mod.custom_gradient
        def f(x):
            s = np_.sin(x)
            return s, lambda g: (g * np_.cos(x),)
        return lambda x: np_.sum(f(x * 3.) ** 2)
    x = RNG.standard_normal(4).astype(np.float32)
    got = fluxion.grad(make(fluxion, jnp))(x)
    close(got, jax.grad(make(jax, jjnp))(x))
    np.testing.assert_allclose(np.asarray(got), fd_grad(lambda v: np.sum(np.sin(3 * v) ** 2), x),
                               rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------------------------
# closure_convert and custom_derivatives

def _with_closure(mod, np_):
    def outer(x, w):
        f = lambda y: np_.sin(y) * w  # noqa: E731
        cf, consts = mod.closure_convert(f, x)

        @mod.custom_vjp
        def g(y, *c):
            return cf(y, *c)

        def g_fwd(y, *c):
            return cf(y, *c), (y, c)

        def g_bwd(res, ct):
            y, c = res
            _, vjp = mod.vjp(cf, y, *c)
            return vjp(ct)
        g.defvjp(g_fwd, g_bwd)
        return g(x, *consts)
    return outer


@pytest.mark.parametrize("jit", [False, True])
def test_closure_convert_lets_custom_vjp_differentiate_closed_over_values(jit):
    outs = []
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        g = mod.grad(_with_closure(mod, np_), argnums=(0, 1))
        outs.append((mod.jit(g) if jit else g)(1.0, 2.0))
    close(outs[0], outs[1])
    close(outs[0], (2.0 * np.cos(1.0), np.sin(1.0)))


def test_closure_convert_hoists_only_perturbed_values():
    def count(mod, np_):
        seen = []

        def outer(x, w):
            cf, consts = mod.closure_convert(lambda y: y * w + np_.ones(()), x)
            seen.append(len(consts))
            return cf(x, *consts)
        return outer, seen
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        outer, seen = count(mod, np_)
        outer(1.0, 2.0)                       # nothing traced: nothing to hoist
        mod.grad(outer, argnums=1)(1.0, 2.0)  # w carries a tangent
        assert seen == [0, 1]
    cf, consts = fluxion.closure_convert(lambda y: y + 1, 1.0)
    with pytest.raises(TypeError, match="same Pytree structure"):
        cf((1.0,))


def test_custom_derivatives_module():
    cd = fluxion.custom_derivatives
    for name in ("custom_jvp", "custom_vjp", "closure_convert", "custom_gradient",
                 "SymbolicZero", "zero_from_primal", "custom_jvp_call_p", "custom_vjp_call_p"):
        assert hasattr(cd, name) and hasattr(jax.custom_derivatives, name), name
    z = cd.zero_from_primal((1.0, np.ones(2, np.float32), np.arange(3)))
    jz = jax.custom_derivatives.zero_from_primal((1.0, np.ones(2, np.float32), np.arange(3)))
    for a, b in zip(z, jz):
        assert a.dtype == b.dtype and a.shape == b.shape
    s = cd.zero_from_primal(np.ones(2, np.float32), symbolic_zeros=True)
    assert isinstance(s, cd.SymbolicZero) and s.shape == (2,) and s.dtype == np.float32


def test_symbolic_zero_reaches_custom_jvp_rule():
    seen = []

    @fluxion.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        seen.append(type(ty) is fluxion.custom_derivatives.SymbolicZero)
        return f(x, y), tx * y
    f.defjvp(f_jvp, symbolic_zeros=True)
    assert float(fluxion.grad(f)(2., 3.)) == 3.0
    assert seen == [True]


# ---------------------------------------------------------------------------------------------
# ensure_compile_time_eval

def test_ensure_compile_time_eval_folds_concrete_values_under_jit():
    kinds = {}
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        seen = []

        @mod.jit
        def f(x):
            with mod.ensure_compile_time_eval():
                y = np_.sin(2.0)
                z = x + 1
                b = np_.sum(np_.arange(3)) > 2
                seen.append((isinstance(y, mod.core.Tracer), isinstance(z, mod.core.Tracer),
                             bool(b) if not isinstance(b, mod.core.Tracer) else None,
                             isinstance(mod.grad(np_.sin)(1.0), mod.core.Tracer)))
            c = np_.cos(2.0)
            seen.append(isinstance(c, mod.core.Tracer))
            return z + y if b else z
        kinds[mod.__name__] = (float(f(1.0)), seen)
    assert kinds["fluxion"] == kinds["jax"]
    assert kinds["fluxion"][1] == [(False, True, True, False), True]


def test_ensure_compile_time_eval_under_grad_vmap_and_scan():
    def g(x):
        with fluxion.ensure_compile_time_eval():
            y = jnp.sin(2.0)
            assert not isinstance(y, fluxion.core.Tracer)
        return x * y
    np.testing.assert_allclose(float(fluxion.grad(g)(1.0)), np.sin(2.0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fluxion.vmap(g)(jnp.ones(2))), [np.sin(2.0)] * 2,
                               rtol=1e-6)

    def body(c, x):
        with fluxion.ensure_compile_time_eval():
            k = jnp.ones(2) * 3
            assert not isinstance(k, fluxion.core.Tracer)
        return c + k, x
    c, _ = fluxion.lax.scan(body, jnp.zeros(2), jnp.arange(3.))
    np.testing.assert_array_equal(np.asarray(c), [9., 9.])


# ---------------------------------------------------------------------------------------------
# custom_batching

def _custom_vmapped(mod, np_, log):
    @mod.custom_batching.custom_vmap
    def f(x, y):
        return np_.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, xs, ys):
        log.append((axis_size, list(in_batched)))
        return np_.cos(xs) * ys, in_batched[0] or in_batched[1]
    return f


def test_custom_vmap_rule_and_its_arguments():
    x, y = np.arange(3.).astype(np.float32), np.ones(3, np.float32)
    results = []
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        log = []
        f = _custom_vmapped(mod, np_, log)
        out = (f(1., 2.), mod.jit(f)(1., 2.), mod.vmap(f)(x, y),
               mod.vmap(f, in_axes=(0, None))(x, 2.), mod.jit(mod.vmap(f))(x, y),
               mod.vmap(mod.jit(f))(x, y), mod.vmap(mod.vmap(f))(np.ones((2, 3)), np.ones((2, 3))))
        results.append((out, log))
    close(results[0][0], results[1][0])
    assert results[0][1] == results[1][1]
    np.testing.assert_allclose(np.asarray(results[0][0][2]), np.cos(x) * y, rtol=1e-6)  # the rule
    np.testing.assert_allclose(float(results[0][0][0]), np.sin(1.) * 2., rtol=1e-6)  # unbatched


def test_custom_vmap_forward_mode():
    x, t = np.arange(3.).astype(np.float32), np.ones(3, np.float32)
    outs = []
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        f = _custom_vmapped(mod, np_, [])
        outs.append((mod.jvp(f, (1., 2.), (1., 0.)),
                     mod.jvp(mod.vmap(f), (x, t), (t, t)),
                     mod.vmap(lambda a, b: mod.jvp(f, (a, 2.), (b, 0.)))(x, t),
                     mod.vmap(lambda b: mod.jvp(f, (1., 2.), (b, 0.)))(x)))
    close(outs[0], outs[1])


def test_custom_vmap_errors():
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        f = _custom_vmapped(mod, np_, [])
        with pytest.raises(ValueError, match="Linearization failed"):
            mod.grad(f)(1., 2.)
        with pytest.raises(ValueError, match="inconsistent sizes"):
            mod.vmap(f)(np.arange(3.), np.ones(2))
        with pytest.raises(AttributeError, match="No batching rule"):
            mod.custom_batching.custom_vmap(lambda x: x)(1.)

        @mod.custom_batching.custom_vmap
        def h(x):
            return (x, x)
        h.def_vmap(lambda n, b, x: ((x, x), True))
        with pytest.raises(ValueError, match="do not match"):
            mod.vmap(h)(np.ones(2))
        h.def_vmap(lambda n, b, x: (x, True))
        with pytest.raises(ValueError, match="does not match that of original"):
            mod.vmap(h)(np.ones(2))


def test_custom_vjp_around_custom_vmap():
    outs = []
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        @mod.custom_vjp
        @mod.custom_batching.custom_vmap
        def f(x, y):
            return np_.sin(x) * y

        @f.def_vmap  # reaches the custom_vmap inside
        def f_vmap_rule(axis_size, in_batched, xs, ys):
            return np_.cos(xs) * ys, True

        def f_fwd(x, y):
            return f(x, y), (np_.cos(x), np_.sin(x), y)

        def f_bwd(res, g):
            cos_x, sin_x, y = res
            return (cos_x * g * y, sin_x * g)
        f.defvjp(f_fwd, f_bwd)
        outs.append((mod.vmap(f)(np.zeros(3), np.ones(3)), mod.grad(f)(0., 1.),
                     mod.vmap(mod.grad(f))(np.zeros(3), np.ones(3))))
    close(outs[0], outs[1])


@pytest.mark.parametrize("jit", [False, True])
def test_sequential_vmap_equals_a_python_loop(jit):
    calls = []

    def matvec(m, v):
        calls.append(1)
        return m @ v
    s = fluxion.custom_batching.sequential_vmap(matvec)
    ms = RNG.standard_normal((3, 2, 2)).astype(np.float32)
    vs = RNG.standard_normal((3, 2)).astype(np.float32)
    for axes, args in (((0, None), (ms, vs[0])), ((None, 0), (ms[0], vs)), ((0, 0), (ms, vs))):
        f = fluxion.vmap(s, in_axes=axes)
        got = (fluxion.jit(f) if jit else f)(*args)
        loop = [np.asarray(ms[i] if axes[0] == 0 else ms[0]) @ (vs[i] if axes[1] == 0 else vs[0])
                for i in range(3)]
        np.testing.assert_allclose(np.asarray(got), np.stack(loop), rtol=1e-5)
        js = jax.custom_batching.sequential_vmap(lambda m, v: m @ v)
        jgot = jax.vmap(js, in_axes=axes)(*args)
        close(got, jgot)


# ---------------------------------------------------------------------------------------------
# fwd_and_bwd, vjp as a pytree, jax.ad

def test_vjp_function_crosses_jit():
    outs = []
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        out, f_vjp = mod.jit(lambda x: mod.vjp(np_.sin, x))(1.)
        outs.append((out, f_vjp(1.0)))
        with pytest.raises(TypeError, match="must be called with a single argument"):
            f_vjp(1.0, 2.0)
    close(outs[0], outs[1])


@pytest.mark.parametrize("jitted", [False, True])
def test_fwd_and_bwd(jitted):
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    W = RNG.standard_normal((3, 2)).astype(np.float32)
    ct = RNG.standard_normal((2, 2)).astype(np.float32)
    res = []
    for mod in (fluxion, jax):
        fwd, bwd = mod.fwd_and_bwd(lambda x, W: x @ W, argnums=(0, 1), jitted=jitted)
        y, r = fwd(x, W)
        g = bwd(r, ct)
        fwd1, bwd1 = mod.fwd_and_bwd(lambda x, W: ((x @ W).sum(), x), argnums=1, has_aux=True,
                                      jitted=jitted)
        y1, r1, aux = fwd1(x, W)
        res.append((y, g, y1, aux, bwd1(r1, 1.0)))
    close(res[0], res[1])
    np.testing.assert_allclose(np.asarray(res[0][1][0]), ct @ W.T, rtol=1e-5)
    with pytest.raises(TypeError, match="callable"):
        fluxion.fwd_and_bwd(1, 0)


def test_fwd_and_bwd_backward_compiles_once():
    traces = []

    def f(x, W):
        traces.append(1)
        return x @ W
    fwd, bwd = fluxion.fwd_and_bwd(f, argnums=(0, 1))
    for i in range(3):
        y, r = fwd(jnp.ones((2, 2)) * i, jnp.ones((2, 2)))
        gx, gW = bwd(r, jnp.ones((2, 2)))
        np.testing.assert_allclose(np.asarray(gW), np.full((2, 2), 2. * i))
    assert len(traces) == 1 and bwd._cache_size() == 1


def test_vjp_with_refs():
    outs = []
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        x, w = np.ones(3, np.float32), np.arange(3.).astype(np.float32)
        _, f_vjp = mod.vjp(lambda x, w: np_.sum(x * w), x, w)
        a = f_vjp.with_refs(mod.ad.GradValue(), mod.ad.DontWant())(1.0)
        assert isinstance(a[1], mod.ad.DidntWant)
        r = mod.new_ref(np_.ones(3))
        b = f_vjp.with_refs(r, mod.ad.GradValue())(2.0)
        assert isinstance(b[0], mod.ad.GradRef)

        @mod.jit
        def step(x, w, r):
            _, f_vjp = mod.vjp(lambda x, w: np_.sum(x * w), x, w)
            return f_vjp.with_refs(r, mod.ad.DontWant())(1.0)
        c = step(x, w, r)
        assert isinstance(c[0], mod.ad.GradRef) and isinstance(c[1], mod.ad.DidntWant)
        outs.append((a[0], b[1], r[...]))
        with pytest.raises(Exception):
            f_vjp.with_refs(mod.ad.GradValue())(1.0)
    close(outs[0], outs[1])
    np.testing.assert_allclose(np.asarray(outs[0][2]), [1., 4., 7.])


# ---------------------------------------------------------------------------------------------
# make_user_context, softmax_custom_jvp, ds

def test_make_user_context_keys_jit_caches():
    counts = []
    for mod in (fluxion, jax):
        traces = []

        @mod.jit
        def f(x):
            traces.append(1)
            return x * 2
        ctx = mod.make_user_context(default_value=None)
        f(1.), f(1.)
        with ctx(1):
            f(1.), f(1.)
        with ctx(2):
            f(1.)
        with ctx(1):
            f(1.)
        f(1.)
        counts.append(len(traces))
    assert counts[0] == counts[1] == 3


def test_softmax_custom_jvp_flag():
    x = np.arange(3.).astype(np.float32)
    g = lambda mod: mod.grad(lambda v: mod.nn.softmax(v)[0])(x)  # noqa: E731
    with fluxion.softmax_custom_jvp(True):
        a = g(fluxion)
    with jax.softmax_custom_jvp(True):
        b = g(jax)
    close(a, b)
    close(g(fluxion), b)


def test_ds_is_a_slice():
    s, js = fluxion.ds(2, 3), jax.ds(2, 3)
    assert (s.start, s.size, s.stride) == (js.start, js.size, js.stride)
    r = fluxion.new_ref(jnp.arange(8.))
    np.testing.assert_array_equal(np.asarray(r[fluxion.ds(2, 3)]), [2., 3., 4.])


# ---------------------------------------------------------------------------------------------
# smap (on 4 CPU devices, in a subprocess, for both frameworks)

_SMAP_SCRIPT = textwrap.dedent("""
    import sys
    if sys.argv[1] == 'jax':
        import jax, jax.numpy as jnp
    else:
        import fluxion as jax, fluxion.numpy as jnp
    P = jax.sharding.PartitionSpec
    mesh = jax.make_mesh((4,), ('x',))
    with jax.set_mesh(mesh):
        x = jax.reshard(jnp.arange(8.), P('x'))
        f = jax.smap(lambda x: x * jax.lax.axis_index('x'), in_axes=0, out_axes=0, axis_name='x')
        print(f(x))
        print(jax.smap(lambda x: x * jax.lax.axis_index('x'), out_axes=0, axis_name='x')(x))
        print(jax.smap(lambda x: jax.lax.psum(x, 'x'), in_axes=0, out_axes=None, axis_name='x')(x))
        print(jax.jit(f)(x))
        print(jax.smap(lambda x, y: x + y, in_axes=(0, None), out_axes=0, axis_name='x')(x, 1.0))
        y = jax.reshard(jnp.ones((2, 8)), P(None, 'x'))
        print(jax.smap(lambda x: x * 2, in_axes=1, out_axes=1, axis_name='x')(y).shape)
        print(jax.grad(lambda v: jnp.sum(f(v) ** 2))(x))
        for bad in (dict(in_axes=[0], out_axes=0, axis_name='x'),
                    dict(in_axes=0, out_axes=0, axis_name=('x',))):
            try:
                jax.smap(lambda x: x, **bad)
            except TypeError as e:
                print('TypeError', str(e)[:40])
""")


def test_smap_matches_jax_on_four_devices(tmp_path):
    script = tmp_path / "smap_script.py"
    script.write_text(_SMAP_SCRIPT)
    outs = []
    for which in ("fluxion", "jax"):
        proc = run_on_8_devices([str(script), which])
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    assert "[ 0.  0.  2.  3.  8. 10. 18. 21.]" in outs[0]


# ---------------------------------------------------------------------------------------------
# linear_call

def _transpose_of(mod, f, x_example):
    return lambda y: mod.linear_transpose(f, x_example)(y)[0]


def test_linear_call_uses_the_custom_transpose():
    for mod in (fluxion, jax):
        lc = mod.custom_derivatives.linear_call

        def div_add(x, denom):
            return x + lc(lambda r, x: x / r, lambda r, t: t / r, denom, x)

        def custom_id(x):
            return lc(lambda _, x: x, lambda _, t: 7., (), x)
        assert float(div_add(9., 3.)) == 12.
        assert float(_transpose_of(mod, lambda x: div_add(x, 3.), 1.)(18.)) == 24.
        assert float(custom_id(1.)) == 1.
        t1 = _transpose_of(mod, custom_id, 1.)
        assert float(t1(1.)) == 7.
        assert float(_transpose_of(mod, t1, 1.)(1.)) == 1.  # the transpose's transpose is fun
        assert float(mod.grad(custom_id)(1.)) == 7.
        assert float(mod.jit(mod.grad(custom_id))(1.)) == 7.
        assert float(mod.jvp(custom_id, (1.,), (2.,))[1]) == 2.


def test_linear_call_under_vmap_equals_a_loop():
    A = RNG.standard_normal((2, 3)).astype(np.float32)
    lc = fluxion.custom_derivatives.linear_call
    mv = lambda r, x: r @ x  # noqa: E731
    mvt = lambda r, ct: 2 * (r.T @ ct)  # noqa: E731  (deliberately not A.T: the rule must be used)
    g = lambda a, x: jnp.sum(lc(mv, mvt, a, x))  # noqa: E731
    xs = RNG.standard_normal((4, 3)).astype(np.float32)
    As = np.stack([A, 2 * A, -A])
    np.testing.assert_allclose(np.asarray(fluxion.vmap(lambda x: lc(mv, mvt, A, x))(xs)),
                               xs @ A.T, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fluxion.vmap(fluxion.grad(g, 1), (None, 0))(A, xs)),
                               np.stack([2 * A.T @ np.ones(2)] * 4), rtol=1e-5)
    got = fluxion.vmap(fluxion.grad(g, 1), (0, None))(As, xs[0])
    np.testing.assert_allclose(np.asarray(got), np.stack([2 * a.T @ np.ones(2) for a in As]),
                               rtol=1e-5)
    # an unbatched linear argument's cotangent sums over the batch
    got = fluxion.grad(lambda x: jnp.sum(fluxion.vmap(lambda a: lc(mv, mvt, a, x))(As)))(xs[0])
    np.testing.assert_allclose(np.asarray(got), sum(2 * a.T @ np.ones(2) for a in As), rtol=1e-5)


def test_linear_call_transpose_structure_error():
    for mod in (fluxion, jax):
        lc = mod.custom_derivatives.linear_call
        A = np.ones((2, 3), np.float32)
        f = lambda x: lc(lambda r, x: r @ x, lambda r, ct: (ct, ct), A, x)  # noqa: E731
        with pytest.raises(TypeError, match="transpose output pytree structure"):
            mod.linear_transpose(f, np.ones(3, np.float32))(np.ones(2, np.float32))


# ---------------------------------------------------------------------------------------------
# custom_vjp with symbolic zeros

@pytest.mark.parametrize("jit", [False, True])
def test_custom_vjp_symbolic_zeros(jit):
    logs = []
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        log = []
        cd = mod.custom_derivatives

        @mod.custom_vjp
        def f(x, y):
            return x * y

        def fwd(x, y):
            log.append(("fwd", type(x).__name__, x.perturbed, y.perturbed))
            return f(x.value, y.value), cd.custom_vjp_primal_tree_values((x, y))

        def bwd(res, g):
            return g * res[1], None
        f.defvjp(fwd, bwd, symbolic_zeros=True)

        @mod.custom_vjp
        def h(x):
            return (x, 2 * x)

        def hbwd(r, g):
            log.append(("h", [isinstance(t, cd.SymbolicZero) for t in g]))
            return (np_.zeros(()) if isinstance(g[1], cd.SymbolicZero) else 2 * g[1],)
        h.defvjp(lambda x: (h(x.value), None), hbwd, symbolic_zeros=True)
        wrap = mod.jit if jit else (lambda f: f)
        out = (wrap(mod.grad(f))(2., 3.), mod.vmap(mod.grad(f))(np.ones(2), np.ones(2)),
               wrap(mod.grad(lambda x: h(x)[0]))(1.), wrap(mod.grad(lambda x: h(x)[1]))(1.))
        logs.append((out, log))
        with pytest.raises(TypeError, match="unexpected leaf type"):
            cd.custom_vjp_primal_tree_values((cd.CustomVJPPrimal(1., True), 2.))
    close(logs[0][0], logs[1][0])
    assert logs[0][1] == logs[1][1]
    assert ("h", [False, True]) in logs[0][1]


def test_compositions_of_transposes_and_custom_gradients():
    A = np.arange(6.).reshape(2, 3).astype(np.float32)
    outs = []
    for mod, np_ in ((fluxion, jnp), (jax, jjnp)):
        t = mod.linear_transpose(lambda x: np_.sin(A) @ x, np.ones(3, np.float32))

        @mod.jit
        def inside(a, c):
            return mod.linear_transpose(lambda x: a @ x, np.ones(3, np.float32))(c)[0]

        @mod.custom_gradient
        def f(x):
            return np_.sin(x), lambda g: (g * np_.cos(x) * 2,)
        outs.append((mod.grad(lambda c: np_.sum(t(c)[0] ** 2))(np.ones(2, np.float32)),
                     inside(A, np.ones(2, np.float32)),
                     mod.vmap(inside, in_axes=(0, None))(np.stack([A, 2 * A]), np.ones(2)),
                     mod.grad(lambda a: np_.sum(inside(a, np.ones(2, np.float32))))(A),
                     mod.grad(mod.grad(f))(1.0),
                     mod.jit(mod.vmap(mod.grad(mod.grad(f))))(np.arange(3.))))
        with pytest.raises(TypeError, match="forward-mode autodiff"):
            mod.jacfwd(f)(1.0)
    close(outs[0], outs[1])


def test_cache_miss_explanation_names_a_user_context(caplog):
    ctx = fluxion.make_user_context(0)

    @fluxion.jit
    def f(x):
        return x + 1
    f(1.)
    with caplog.at_level("WARNING", logger="fluxion"), fluxion.explain_cache_misses(), ctx(3):
        f(1.)
    assert "changed from 0 to 3" in caplog.text and "make_user_context" in caplog.text


def test_custom_vmap_closing_over_a_batched_value_is_a_clear_error():
    """JAX fails here with a bare AssertionError; fluxion names the problem."""
    def outer(c):
        @fluxion.custom_batching.custom_vmap
        def f(x):
            return x * c

        @f.def_vmap
        def rule(axis_size, in_batched, x):
            return x * c, in_batched[0]
        return f(2.0)
    with pytest.raises(NotImplementedError, match="closes over a value batched by vmap"):
        fluxion.vmap(outer)(np.arange(3.0, dtype=np.float32))
