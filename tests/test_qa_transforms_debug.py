"""Differential checks of transformation compositions, debugging tools and callbacks against
JAX (the oracle), each a regression test for a mismatch found by the QA sweep."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion import lax


def _weak(x):
    return x.aval.weak_type if hasattr(x, "aval") else x.weak_type


def test_jaxpr_literals_keep_weak_type_when_reevaluated():
    # `c + 1` in a loop body, re-evaluated by jvp or vmap, must stay weakly typed as in JAX.
    def loop(lib):
        return lambda x: lib.lax.while_loop(lambda c: c[0] < 5,
                                            lambda c: (c[0] + 1, c[1] * 1.1), (0, x))[1]
    for lib in (jax, fluxion):
        p, t = lib.jvp(loop(lib), (2.0,), (1.0,))
        assert _weak(p) and _weak(t), lib.__name__
    fori = lambda lib: lib.vmap(lambda n, x: lib.lax.fori_loop(0, n, lambda i, c: c * 2.0 + i, x),
                                (0, None))
    got, want = fori(fluxion)(fnp.array([0, 4]), 1.0), fori(jax)(jjnp.array([0, 4]), 1.0)
    np.testing.assert_allclose(got, want)
    assert _weak(got) and _weak(want)


def test_collectives_under_vmap_bool_and_axis_bounds():
    x = np.array([True, False, True])
    got = fluxion.vmap(lambda v: lax.psum(v, "i"), axis_name="i")(x)
    want = jax.vmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")(x)
    assert got.dtype == want.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    m = np.arange(18.0, dtype=np.float32).reshape(3, 6)
    for kw in (dict(axis=1, tiled=True), dict(axis=2), dict(axis=-3)):
        with pytest.raises(ValueError, match="out of bounds"):
            fluxion.vmap(lambda v: lax.all_gather(v, "i", **kw), axis_name="i")(m)
    with pytest.raises(ValueError, match="out of bounds"):
        fluxion.vmap(lambda v: lax.all_gather(v, "i", tiled=True), axis_name="i")(m[:, 0])
    got = fluxion.vmap(lambda v: lax.all_gather(v, "i", axis=-2), axis_name="i")(m)
    want = jax.vmap(lambda v: jax.lax.all_gather(v, "i", axis=-2), axis_name="i")(m)
    np.testing.assert_array_equal(got, want)


def test_make_jaxpr_effects_and_text_as_jax():
    printer = lambda lib: (lambda x: (lib.debug.print("x={}", x, ordered=True), x * 2)[1])
    jf, jj = fluxion.make_jaxpr(printer(fluxion))(1.0), jax.make_jaxpr(printer(jax))(1.0)
    assert [type(e).__name__ for e in jf.effects] == [type(e).__name__ for e in jj.effects] \
        == ["OrderedDebugEffect"]
    assert jf.jaxpr.effects == jf.effects
    assert not fluxion.make_jaxpr(lambda x: x * 2)(1.0).effects
    x = np.ones((2, 3), np.float32)

    def prog(lib):
        l = lib.lax
        return lambda x: (l.broadcast_in_dim(x, (4, 2, 3), (1, 2)), l.broadcast_in_dim(1.0, (2,), ()),
                          l.reduce_max(x, (0,)), l.reduce_or(x > 0, (1,)),
                          l.dot_general(x, x, (((1,), (1,)), ((0,), (0,)))),
                          l.fori_loop(0, 3, lambda i, c: c * 2.0, x))
    assert str(fluxion.make_jaxpr(prog(fluxion))(x)) == str(jax.make_jaxpr(prog(jax))(x))
    # a jaxpr whose one-line form is 81 columns only with its closing " }" breaks, as JAX's
    assert str(fluxion.make_jaxpr(lambda a: a.T)(x)) == str(jax.make_jaxpr(lambda a: a.T)(x))


def test_derivatives_keep_weak_type_as_jax():
    # jvp constants and zero tangents keep the primal's weak type; a passed-through Python
    # tangent comes back an array; grad's seed is the output's weak type
    fns = [("tanh", ()), ("sqrt", ()), ("arctan", ()), ("square", ()), ("floor", ()),
           ("logaddexp2", (1.5,)), ("hypot", (1.5,)), ("add", (1.5,)), ("where", None)]
    for name, extra in fns:
        outs = []
        for lib, np_ in ((jax, jjnp), (fluxion, fnp)):
            f = getattr(np_, name)
            g = (lambda x: f(x > 0, x, 0.0)) if extra is None else (lambda x: f(x, *extra))
            p, t = lib.jvp(g, (0.7,), (1.0,))
            outs.append((_weak(p), _weak(t), np.asarray(t).dtype, float(t)))
        assert outs[0][:3] == outs[1][:3], (name, outs)
        np.testing.assert_allclose(outs[1][3], outs[0][3], rtol=1e-6)
    for lib in (jax, fluxion):
        assert _weak(lib.jvp(lambda x: x ** 2, (3.0,), (1.0,))[1])
        assert _weak(lib.linearize(lambda x: x ** 2, 3.0)[1](1.0))


def test_allow_int_jacobians_and_linearize_errors():
    x = np.arange(3, dtype=np.int32)
    for lib in (jax, fluxion):
        jac = lib.jacrev(lambda a, b: a * b, argnums=(0, 1), allow_int=True)(x, 2.0)
        assert jac[0].dtype == np.int32 and jac[0].shape == (3, 3) and not np.any(jac[0])
        np.testing.assert_array_equal(jac[1], [0.0, 1.0, 2.0])
        g = lib.vmap(lib.grad(lambda a: (a * 2.0).sum(), allow_int=True))(x)
        assert g.dtype == lib.dtypes.float0 and g.shape == (3,)
    f_jvp = fluxion.linearize(lambda a: a * 2.0, 3.0)[1]
    for bad in (np.ones(2, np.float32), np.float16(1), 1):
        with pytest.raises(ValueError, match="inconsistent with the original primal values"):
            f_jvp(bad)


def test_shape_dtype_struct_update_and_as_jit_argument():
    s = fluxion.ShapeDtypeStruct((2,), np.float32)
    assert repr(s.update(shape=(3,), dtype=np.int32)) == repr(
        jax.ShapeDtypeStruct((2,), np.float32).update(shape=(3,), dtype=np.int32))
    with pytest.raises(TypeError, match="is not a valid JAX type"):
        fluxion.jit(lambda x: x)(s)
    assert "sine" in fluxion.jit(fnp.sin).lower(1.0).as_text(debug_info=True)


def test_tracer_misuse_errors():
    with pytest.raises(fluxion.errors.ConcretizationTypeError, match="tolist"):
        fluxion.jit(lambda x: x.tolist())(fnp.ones(2))
    for lib, lnp in ((fluxion, fnp), (jax, jax.numpy)):  # JAX's TypeError, not a NumPy error
        with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values"):
            lib.jit(lambda x, s: x.reshape(s))(lnp.ones(4), 4)
    assert fluxion.jit(lambda x: x.reshape([2, 2]))(fnp.ones(4)).shape == (2, 2)
    f = fluxion.custom_jvp(lambda x: x)
    f.defjvp(lambda p, t: (p[0], fnp.ones(3)))
    with pytest.raises(TypeError, match=r"Expected ~?float32\[\] \(tangent type of ~?float32\[\]\) "
                                        r"but got float32\[3\]"):
        fluxion.jvp(f, (1.0,), (1.0,))


def test_callbacks_receive_arrays_with_weak_types(capsys):
    seen = []
    fluxion.debug.callback(lambda v, w: seen.append((v, w)), fnp.ones(2), 3)
    fluxion.jit(lambda x: fluxion.debug.callback(lambda v: seen.append(v), x, partitioned=True)
                )(fnp.float32(2.0))
    got = fluxion.jit(lambda x: fluxion.pure_callback(
        lambda v: seen.append(v) or v * 2, fluxion.ShapeDtypeStruct((2,), np.float32), x))(
        fnp.ones(2))
    fluxion.effects_barrier()
    np.testing.assert_array_equal(got, [2.0, 2.0])
    assert all(isinstance(v, fluxion.Array) for v in (seen[0][0], seen[0][1], seen[1], seen[2]))
    assert seen[0][1].weak_type and not seen[0][0].weak_type
    fluxion.debug.print("{}", {"a": fnp.ones(2), "b": 1})
    jax.debug.print("{}", {"a": jjnp.ones(2), "b": 1})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == out[1], out


def test_checkify_of_vmap_reports_the_last_failing_element_as_jax():
    from jax.experimental import checkify as jck
    from fluxion.experimental import checkify as fck
    x = np.array([1.0, -1.0, -2.0, 3.0], np.float32)
    msgs = []
    for lib, np_, ck in ((jax, jjnp, jck), (fluxion, fnp, fck)):
        err, _ = ck.checkify(lib.vmap(lambda v: (ck.check(v > 0, "bad {}", v), v)[1]))(
            np_.asarray(x))
        msgs.append(err.get().split(" (")[0])
    assert msgs[0] == msgs[1] == "bad -2.0"
    msgs = []  # pytree payloads are formatted as Arrays
    for np_, ck in ((jjnp, jck), (fnp, fck)):
        err, _ = ck.checkify(lambda v: (ck.check(v.sum() > 9, "x={x}", x={"a": v}), v)[1])(
            np_.ones(2))
        msgs.append(err.get().split(" (")[0])
    assert msgs[0] == msgs[1]


def test_jacobian_dtype_checks_and_blocks_as_jax():
    cases = [(lambda z: z * (1 + 1j), 1.0), (lambda z: z.astype(int), 1.0),
             (lambda z: z * 2, 1.0 + 1j)]
    for f, a in cases:
        for api in ("jacrev", "jacfwd"):
            for holo in (False, True):
                outs = []
                for lib in (jax, fluxion):
                    try:
                        r = getattr(lib, api)(f, holomorphic=holo)(a)
                        outs.append(("ok", np.asarray(r).dtype, np.asarray(r).tolist()))
                    except TypeError as e:
                        outs.append(("TypeError", str(e).split(",")[0]))
                assert outs[0] == outs[1], (api, holo, outs)
    for api in ("jacfwd", "jacrev"):  # blocks take the output's (fwd) / input's (rev) type
        got = getattr(fluxion, api)(lambda x: x * 2)(1.0)
        want = getattr(jax, api)(lambda x: x * 2)(1.0)
        assert _weak(got) == _weak(want)
    assert fluxion.jacfwd(lambda x: x * 2)(fnp.ones(0)).shape == (0, 0)

    @fluxion.custom_jvp
    def f(x, y):
        return fnp.sin(x) * y
    f.defjvp(lambda p, t: (f(*p), fnp.cos(p[0]) * t[0] * p[1] + fnp.sin(p[0]) * t[1] * 2))
    np.testing.assert_allclose(fluxion.jacfwd(f)(1.0, 2.0), 2 * np.cos(1.0), rtol=1e-6)


def test_custom_vjp_none_cotangent_for_a_none_subtree():
    def run(lib):
        f = lib.custom_vjp(lambda d: {"s": d["a"] * d["b"][0]})
        f.defvjp(lambda d: (f(d), d),
                 lambda d, g: ({"a": g["s"] * d["b"][0], "b": (g["s"] * d["a"], None)},))
        return lib.grad(lambda d: f(d)["s"])({"a": 2.0, "b": (3.0, None)})
    got, want = run(fluxion), run(jax)
    assert got["b"][1] is None and want["b"][1] is None
    np.testing.assert_allclose([got["a"], got["b"][0]], [want["a"], want["b"][0]])
    f = fluxion.custom_vjp(lambda x: x)
    f.defvjp(lambda x: (x, None), lambda r, g: ((g, g),))
    with pytest.raises(TypeError, match="produced a cotangent with structure"):
        fluxion.grad(f)(1.0)


def test_jit_inline_and_lowered_out_info():
    inner = lambda lib: lib.jit(lambda y: y + 1, inline=True)
    got = str(fluxion.make_jaxpr(lambda x: inner(fluxion)(x))(1.0))
    assert got == str(jax.make_jaxpr(lambda x: inner(jax)(x))(1.0))
    assert fluxion.grad(lambda x: fluxion.jit(lambda y: y * y, inline=True)(x))(3.0) == 6.0
    lowered = fluxion.jit(lambda x: (x * 2, {"a": x})).lower(1.0)
    assert fluxion.jit(lambda x: x * 2).trace(1.0).out_info.weak_type  # traced keeps it
    for info in (lowered.out_info, lowered.compile().out_info):
        assert [l.weak_type for l in fluxion.tree_util.tree_leaves(info)] == [False, False]
        assert fluxion.tree_util.tree_structure(info) == lowered.out_tree
    with pytest.raises(NotImplementedError, match="static_argnums"):
        fluxion.checkpoint(lambda x: x, concrete=True)


def test_debug_print_static_arguments_and_unused_ones(capsys):
    for lib in (jax, fluxion):
        lib.jit(lambda x: lib.debug.print("{} {} {}", "hello", None, x))(1.0)
        lib.jit(lambda x: lib.debug.callback(lambda s, v, f: print(s, v, f(2)), "cb", x,
                                             lambda v: v + 1))(1.0)
        lib.effects_barrier()
        for args, kwargs in (((1.0, 2.0), {}), ((1.0,), {"y": 2.0})):
            with pytest.raises(ValueError, match="Unused (positional|keyword) arguments"):
                lib.debug.print("{}", *args, **kwargs)
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == out[2:] == ["hello None 1.0", "cb 1.0 3"]


def test_axis_index_over_several_names():
    def prog(lib):
        idx = lambda: (lib.lax.axis_index(("a", "c")), lib.lax.axis_index(("c", "b", "a")),
                       lib.lax.axis_index(("b",)))
        inner = lib.vmap(idx, axis_size=2, axis_name="c")
        return lib.vmap(lib.vmap(inner, axis_size=3, axis_name="b"), axis_size=4, axis_name="a")()
    for g, w in zip(prog(fluxion), prog(jax)):
        np.testing.assert_array_equal(g, w)
    x = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    nest = lambda f: fluxion.vmap(fluxion.vmap(f, axis_name="j"), axis_name="i")
    with pytest.raises(NotImplementedError, match="several axis names"):
        nest(lambda v: lax.all_gather(v, ("i", "j")))(x)


def test_api_argument_specs_checked_when_applied():
    for kw in (dict(in_axes=0.0), dict(in_axes=(0.0,)), dict(out_axes="a"),
               dict(in_axes={"a": 0})):
        with pytest.raises(TypeError, match="vmap (in|out)_axes must be an int, None"):
            fluxion.vmap(lambda x: x, **kw)
    fluxion.vmap(lambda x, d: x, in_axes=[0, {"a": None}])  # lists and nested dicts are fine
    with pytest.raises(TypeError, match="unhashable"):
        fluxion.vmap(lambda x: x, axis_name=["i"])
    for kw in (dict(static_argnames="zz"), dict(donate_argnames="zz")):
        with pytest.raises(ValueError, match="invalid argnames {'zz'}"):
            fluxion.jit(lambda x: x, **kw)
    fluxion.jit(lambda x, **kw: x, static_argnames="zz")


def test_vjp_cotangent_checks_and_linear_transpose_results():
    f_vjp = fluxion.vjp(lambda x: x * 2, fnp.float16(1))[1]
    for bad in (1.0, fnp.float32(1), fnp.bfloat16(1), np.ones(2, np.float16)):
        with pytest.raises(ValueError, match="unexpected JAX type"):
            f_vjp(bad)
    assert f_vjp(fnp.float16(1))[0].dtype == np.float16
    int_vjp = fluxion.vjp(lambda x: (x * 2).astype(int), 1.0)[1]
    assert [float(int_vjp(ct)[0]) for ct in (1.0, 1, fnp.int32(1))] == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="Tree structure of cotangent"):
        fluxion.vjp(lambda x: (x, x), fnp.ones(2))[1](fnp.ones(2))
    got = fluxion.linear_transpose(lambda d: d["a"] + d["b"], {"a": 1.0, "b": 1.0})(3.0)[0]
    want = jax.linear_transpose(lambda d: d["a"] + d["b"], {"a": 1.0, "b": 1.0})(3.0)[0]
    for k in "ab":
        assert got[k].dtype == want[k].dtype and _weak(got[k]) == _weak(want[k])
    with pytest.raises(TypeError, match="not a valid JAX type"):
        lax.stop_gradient("a")


def test_jnp_broadcast_errors_by_rank_as_jax():
    for a, b, cls in (((2,), (2, 3), ValueError), ((4,), (2, 1, 3), ValueError),
                      ((2, 2), (2, 3), TypeError), ((2,), (3,), TypeError)):
        for np_ in (jjnp, fnp):
            with pytest.raises(cls, match="ncompatible shapes for broadcasting"):
                np_.ones(a) * np_.ones(b)


def test_leaked_tracer_errors_name_the_users_function():
    import inspect
    line = inspect.currentframe().f_lineno
    runs = [lambda box: lax.scan(lambda c, x: (box.append(c), (c + x, None))[1], 0.0,
                                 fnp.ones(2)),
            lambda box: lax.fori_loop(0, 2, lambda i, c: (box.append(i), c)[1], 0.0),
            lambda box: fluxion.jit(lambda x: box.append(x) or x)(1.0)]
    for k, run in enumerate(runs):
        box = []
        run(box)
        with pytest.raises(fluxion.errors.UnexpectedTracerError,
                           match=f"<lambda> at {__file__}:{line + 1 + k + (k > 0)}"):
            fluxion.jit(lambda y: y + box[0])(1.0)


def test_eval_shape_of_a_jitted_function_with_static_arguments():
    for lib, np_ in ((jax, jjnp), (fluxion, fnp)):
        f = lib.jit(lambda x, k: x * k, static_argnums=1)
        out = lib.eval_shape(f, lib.ShapeDtypeStruct((3,), np_.float32), 2)
        assert out.shape == (3,) and out.dtype == np.float32


def test_static_clip_index_is_clamped_before_checkify_sees_it():
    from jax.experimental import checkify as jck
    from fluxion.experimental import checkify as fck
    for np_, ck in ((jjnp, jck), (fnp, fck)):
        x = np_.arange(6.0).reshape(2, 3)
        err, out = ck.checkify(lambda a: a.at[5, -9].get(mode="clip"),
                               errors=ck.index_checks)(x)
        assert err.get() is None and float(out) == 3.0
        err, _ = ck.checkify(lambda a: a.at[5, 0].get(), errors=ck.index_checks)(x)
        assert "out-of-bounds" in err.get()


def test_reduce_axes_refused_as_jax():
    with pytest.raises(NotImplementedError, match="reduce_axes argument to grad"):
        fluxion.grad(lambda x: x, reduce_axes=("i",))
    with pytest.raises(NotImplementedError, match="reduce_axes argument to vjp"):
        fluxion.vjp(lambda x: x, 1.0, reduce_axes=("i",))
    assert fluxion.grad(lambda x: x * 2, reduce_axes=())(1.0) == 2.0
