"""shard_map manual over a subset of the mesh axes (`axis_names`), the others left to XLA's
partitioner, on a 2x4 mesh of 8 CPU devices, against NumPy and JAX.

The cases need 8 CPU devices: tests/test_eight_devices.py runs this file, with the suite's
other 8-device files, in one fresh process that has them (for fluxion and JAX)."""

import numpy as np
import pytest

from _eight_devices import ON_8_DEVICES

if ON_8_DEVICES:
    import jax as jjax
    import jax.numpy as jjnp
    from jax.sharding import NamedSharding as JNamedSharding, PartitionSpec as JP

    import fluxion as jax
    import fluxion.numpy as jnp
    from fluxion import lax
    from fluxion.sharding import Mesh, NamedSharding, PartitionSpec as P

    assert jax.device_count() == 8 and jjax.device_count() == 8

    MESH = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
    JMESH = jjax.sharding.Mesh(np.array(jjax.devices()).reshape(2, 4), ("x", "y"))

    def _x(shape, seed=0):
        return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

    def _both(body, in_specs, out_specs, axis_names, **kw):
        """The same shard_map in fluxion and in JAX; `body(lib, lax, ...)` builds the body
        from either library's numpy and lax."""
        ours = jax.shard_map(lambda *a: body(jnp, lax, *a), mesh=MESH, in_specs=in_specs,
                             out_specs=out_specs, axis_names=axis_names, **kw)
        theirs = jjax.shard_map(lambda *a: body(jjnp, jjax.lax, *a), mesh=JMESH,
                                in_specs=_jspec(in_specs), out_specs=_jspec(out_specs),
                                axis_names=axis_names, **kw)
        return ours, theirs

    def _jspec(spec):
        if isinstance(spec, P):
            return JP(*spec)
        return tuple(_jspec(s) for s in spec)

    def _spec(sharding, ndim):
        """A sharding's spec as a tuple of axis-name tuples, one per dimension."""
        spec = tuple(sharding.spec) + (None,) * (ndim - len(sharding.spec))
        return tuple(() if e is None else (e,) if isinstance(e, str) else tuple(e)
                     for e in spec)

    def _same(ours, theirs, rtol=1e-5, atol=1e-5):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=rtol, atol=atol)
        assert ours.shape == theirs.shape

    # ------------------------------------------------------------------------------------------
    # values

    def test_psum_over_the_manual_axis_against_numpy_and_jax():
        a = _x((8, 4))
        ours, theirs = _both(lambda np_, lax_, b: lax_.psum(b, "x") * 2, P("x", None), P(),
                             {"x"})
        want = 2 * (a[:4] + a[4:])
        for fn in (ours, jax.jit(ours)):
            np.testing.assert_allclose(np.asarray(fn(a)), want, rtol=1e-6)
        _same(jax.jit(ours)(a), jjax.jit(theirs)(a))

    def test_manual_inner_axis_groups():
        # manual over "y" only: psum spans the 4 devices of each "x" row
        a = _x((4, 8))
        ours, theirs = _both(lambda np_, lax_, b: lax_.psum(b, "y"), P(None, "y"), P(),
                             {"y"})
        want = a.reshape(4, 4, 2).sum(1)
        np.testing.assert_allclose(np.asarray(jax.jit(ours)(a)), want, rtol=1e-5, atol=1e-6)
        _same(jax.jit(ours)(a), jjax.jit(theirs)(a))

    def test_collectives_inside_against_numpy():
        a = _x((8, 4))

        def body(np_, lax_, b):
            idx = lax_.axis_index("x").astype(np_.float32)
            return (lax_.all_gather(b, "x", tiled=True), lax_.pmax(b, "x"), b + idx,
                    lax_.ppermute(b, "x", [(0, 1), (1, 0)]))

        ours, theirs = _both(body, P("x"), (P(), P(), P("x"), P("x")), {"x"}, check_vma=False)
        gathered, mx, shifted, perm = jax.jit(ours)(a)
        np.testing.assert_array_equal(np.asarray(gathered), a)
        np.testing.assert_array_equal(np.asarray(mx), np.maximum(a[:4], a[4:]))
        np.testing.assert_array_equal(np.asarray(shifted),
                                      a + np.repeat([0, 1], 4)[:, None].astype(np.float32))
        np.testing.assert_array_equal(np.asarray(perm), np.concatenate([a[4:], a[:4]]))
        for o, t in zip(jax.jit(ours)(a), jjax.jit(theirs)(a)):
            _same(o, t)

    def test_auto_axis_partitions_the_body_matmul():
        # rows over the manual "x"; the auto "y" may split the matmul inside the body
        a, w = _x((8, 16)), _x((16, 12), 1)
        ours, theirs = _both(lambda np_, lax_, b, v: np_.tanh(b @ v), (P("x"), P()), P("x"),
                             {"x"})
        ins = [NamedSharding(MESH, P("x", "y")), NamedSharding(MESH, P(None, "y"))]
        jins = [JNamedSharding(JMESH, JP("x", "y")), JNamedSharding(JMESH, JP(None, "y"))]
        got = jax.jit(ours, in_shardings=ins)(a, w)
        want = jjax.jit(theirs, in_shardings=jins)(a, w)
        np.testing.assert_allclose(np.asarray(got), np.tanh(a @ w), rtol=1e-5, atol=1e-5)
        _same(got, want)
        assert _spec(got.sharding, 2) == _spec(want.sharding, 2)

    def test_eager_equals_jit_and_unsharded():
        a, b = _x((8, 6)), _x((8, 6), 2)
        f = jax.shard_map(lambda u, v: lax.psum(u * v, "x") + jnp.sin(lax.psum(u, "x")).sum(0),
                          mesh=MESH, in_specs=(P("x"), P("x")), out_specs=P(), axis_names={"x"})
        want = (a * b)[:4] + (a * b)[4:] + np.sin(a[:4] + a[4:]).sum(0)
        eager, jitted = f(a, b), jax.jit(f)(a, b)
        np.testing.assert_allclose(np.asarray(eager), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(jitted), want, rtol=1e-5, atol=1e-5)

    def test_nested_shard_map_over_the_other_axis():
        a = _x((8, 4))
        inner = jax.shard_map(
            lambda b: (lax.psum(b, "y"), b + 10 * lax.axis_index("y") + 100 * lax.axis_index("x")),
            mesh=MESH, in_specs=P(None, "y"), out_specs=(P(), P(None, "y")), axis_names={"y"})
        outer = jax.shard_map(lambda b: (lax.psum(inner(b)[0], "x"), inner(b)[1]), mesh=MESH,
                              in_specs=P("x"), out_specs=(P(), P("x")), axis_names={"x"})
        total, tagged = jax.jit(outer)(a)
        np.testing.assert_allclose(np.asarray(total), (a[:4] + a[4:]).sum(1, keepdims=True),
                                   rtol=1e-5)
        tags = 100 * np.repeat([0, 1], 4)[:, None] + 10 * np.arange(4)[None, :]
        np.testing.assert_allclose(np.asarray(tagged), a + tags, rtol=1e-6)

    # ------------------------------------------------------------------------------------------
    # shardings

    @pytest.mark.parametrize("case", ["block", "psum", "gather", "two_outputs"])
    def test_output_shardings_match_jax(case):
        a = _x((8, 8))
        body, out = {
            "block": (lambda np_, lax_, b: b * 2, P("x")),
            "psum": (lambda np_, lax_, b: lax_.psum(b, "x"), P()),
            "gather": (lambda np_, lax_, b: lax_.all_gather(b, "x", tiled=True), P()),
            "two_outputs": (lambda np_, lax_, b: (b, lax_.psum(b, "x")), (P("x"), P(None))),
        }[case]
        # JAX cannot infer that a tiled all_gather is the same on every device
        ours, theirs = _both(body, P("x"), out, {"x"}, check_vma=case != "gather")
        for in_spec in (P("x"), P("x", "y"), P(None, "y")):
            got = jax.jit(ours, in_shardings=NamedSharding(MESH, in_spec))(a)
            want = jjax.jit(theirs, in_shardings=JNamedSharding(JMESH, JP(*in_spec)))(a)
            for g, w in zip(*(v if isinstance(v, tuple) else (v,) for v in (got, want))):
                _same(g, w)
                assert _spec(g.sharding, 2) == _spec(w.sharding, 2), (in_spec, g.sharding,
                                                                      w.sharding)

    def test_sharding_constraint_on_the_auto_axis_inside():
        a = _x((8, 8))
        ours = jax.shard_map(
            lambda b: lax.with_sharding_constraint(b * 2, NamedSharding(MESH, P(None, "y"))),
            mesh=MESH, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
        theirs = jjax.shard_map(
            lambda b: jjax.lax.with_sharding_constraint(
                b * 2, JNamedSharding(jjax.sharding.get_abstract_mesh(), JP(None, "y"))),
            mesh=JMESH, in_specs=JP("x"), out_specs=JP("x"), axis_names={"x"})
        got, want = jax.jit(ours)(a), jjax.jit(theirs)(a)
        _same(got, want)
        assert _spec(got.sharding, 2) == _spec(want.sharding, 2) == (("x",), ("y",))
        text = jax.jit(ours).lower(a).as_text()
        assert 'manual_axes={"x"}' in text
        assert '[{"x", ?}, {?}]' in text and '[{}, {"y"}]' in text

    def test_sharding_constraint_on_a_manual_axis_is_an_error():
        f = jax.shard_map(
            lambda b: lax.with_sharding_constraint(b, NamedSharding(MESH, P("x"))),
            mesh=MESH, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
        with pytest.raises(ValueError, match="manual"):
            jax.jit(f)(_x((8, 4)))

    # ------------------------------------------------------------------------------------------
    # transformations

    def _loss_pair():
        def body(np_, lax_, w, b):
            return lax_.psum(np_.tanh(b @ w), "x")

        ours, theirs = _both(body, (P(), P("x")), P(), {"x"})

        def loss(f, np_):
            return lambda w, b: np_.sum(f(w, b) ** 2) + np_.sum(f(w, b * 0.5))

        return loss(ours, jnp), loss(theirs, jjnp)

    def test_grad_matches_jax():
        w, b = _x((8, 4)), _x((8, 8), 3)
        ours, theirs = _loss_pair()
        want = jjax.grad(theirs, argnums=(0, 1))(w, b)
        sharded = jax.jit(jax.grad(ours, argnums=(0, 1)),
                          in_shardings=(NamedSharding(MESH, P(None, "y")),
                                        NamedSharding(MESH, P("x", "y"))))
        for fn in (jax.grad(ours, argnums=(0, 1)), jax.jit(jax.grad(ours, argnums=(0, 1))),
                   sharded):
            got = fn(w, b)
            for g, t in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), np.asarray(t), rtol=2e-4, atol=2e-5)

    def test_grad_of_replicated_output_and_unmentioned_input():
        # out_specs leaves "x" out (each x block holds the psum), w is unmentioned in in_specs
        w, b = _x((4,)), _x((8, 4), 5)
        ours, theirs = _both(lambda np_, lax_, v, u: lax_.psum(u * v, "x").sum(0), (P(), P("x")),
                             P(), {"x"})
        got = jax.grad(lambda v, u: jnp.sum(ours(v, u) ** 2), argnums=(0, 1))(w, b)
        want = jjax.grad(lambda v, u: jjnp.sum(theirs(v, u) ** 2), argnums=(0, 1))(w, b)
        for g, t in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(t), rtol=1e-4, atol=1e-5)
        s = (b[:4] + b[4:]) * w  # the per-row psum, summed over rows below
        tot = s.sum(0)
        np.testing.assert_allclose(np.asarray(got[0]), 2 * tot * (b[:4] + b[4:]).sum(0),
                                   rtol=1e-4, atol=1e-4)

    def test_vmap_of_grad_with_a_constraint_inside_matches_jax():
        ws, b = _x((3, 8, 4)), _x((8, 8), 7)

        def body(np_, lax_, ns, w, u):
            h = lax_.with_sharding_constraint(np_.tanh(u @ w), ns)
            return lax_.psum(h * h, "x").sum(0)

        ours = jax.shard_map(lambda w, u: body(jnp, lax, NamedSharding(MESH, P(None, "y")), w, u),
                             mesh=MESH, in_specs=(P(), P("x")), out_specs=P(), axis_names={"x"})
        theirs = jjax.shard_map(
            lambda w, u: body(jjnp, jjax.lax, JNamedSharding(jjax.sharding.get_abstract_mesh(),
                                                             JP(None, "y")), w, u),
            mesh=JMESH, in_specs=(JP(), JP("x")), out_specs=JP(), axis_names={"x"})
        got = jax.jit(jax.vmap(jax.grad(lambda w, u: ours(w, u).sum()), in_axes=(0, None)))(ws, b)
        want = jjax.jit(jjax.vmap(jjax.grad(lambda w, u: theirs(w, u).sum()),
                                  in_axes=(0, None)))(ws, b)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=2e-5)

    def test_vmap_against_a_loop_and_jax():
        xs = _x((3, 8, 4))
        ours, theirs = _both(lambda np_, lax_, b: lax_.psum(np_.cos(b), "x") * 3, P("x"), P(),
                             {"x"})
        got = jax.jit(jax.vmap(ours))(xs)
        loop = np.stack([np.asarray(ours(x)) for x in xs])
        np.testing.assert_allclose(np.asarray(got), loop, rtol=1e-6)
        _same(got, jjax.jit(jjax.vmap(theirs))(xs))
        got2 = jax.vmap(ours, in_axes=1, out_axes=1)(np.moveaxis(xs, 0, 1).copy())
        np.testing.assert_allclose(np.asarray(got2), np.moveaxis(loop, 0, 1), rtol=1e-6)

    # ------------------------------------------------------------------------------------------
    # grad of a shard_map nested in a partial-auto one (JAX 0.10.2 computes these under jit
    # with check_vma=False only: with check_vma=True it names the enclosing axis twice in a
    # residual spec, and eagerly it refuses the inner specs)

    MESH3 = Mesh(np.array(jax.devices()).reshape(2, 2, 2), ("x", "y", "z"))
    JMESH3 = jjax.sharding.Mesh(np.array(jjax.devices()).reshape(2, 2, 2), ("x", "y", "z"))

    def _nested_losses(lib, case, check_vma):
        """A loss of (v: f32[8,4], w: f32[4,4]) over a shard_map nested in a partial-auto one,
        built with fluxion or JAX; the inner shard_map takes the enclosing body's mesh."""
        shmap, lax_, np_, Pc, mesh3 = lib
        inner_mesh = mesh3 if shmap is jax.shard_map else None

        def smap(f, in_specs, out_specs, outer=False, **kw):
            return shmap(f, mesh=mesh3 if outer else inner_mesh, in_specs=in_specs,
                         out_specs=out_specs, check_vma=check_vma, **kw)

        if case == "psum_inside":  # the inner output replicated over its axis
            inner = smap(lambda b, w: (lax_.psum(np_.tanh(b * w), "y"), b * w),
                         (Pc(None, "y"), Pc(None, "y")), (Pc(), Pc(None, "y")), axis_names={"y"})
            outer = smap(lambda b, w: sum(o.sum() for o in inner(b, w)) * b, (Pc("x"), Pc()),
                         Pc("x"), outer=True, axis_names={"x"})
            return lambda v, w: (outer(v, w) ** 2).sum()
        if case == "default_axis_names":  # the inner one names no axes: all but the outer's
            inner = smap(lambda b: np_.sin(b) * lax_.pmean(b, ("x", "z")), Pc(None, "z"),
                         Pc(None, "z"))
            outer = smap(lambda b: inner(b) * np_.cos(b), Pc(("x", "y")), Pc(("x", "y")),
                         outer=True, axis_names={"x", "y"})
            return lambda v, w: (outer(v * w.sum()) ** 2).sum()
        if case == "all_axes_named":  # the inner one names the outer's axis too
            inner = smap(lambda b: np_.sin(b) * lax_.psum(b, ("x", "y")), Pc(None, "y"),
                         Pc(None, "y"), axis_names={"x", "y"})
            outer = smap(lambda b, w: inner(b @ w) * b, (Pc("x"), Pc()), Pc("x"), outer=True,
                         axis_names={"x"})
            return lambda v, w: (outer(v, w) ** 2).sum()
        if case == "inside_fully_manual":  # nothing left for the inner one to make manual
            inner = smap(lambda b: np_.sin(b) * lax_.psum(b, "y"), Pc(), Pc())
            outer = smap(lambda b, w: inner(b * w.sum()) * b, (Pc(("x", "z"), "y"), Pc()),
                         Pc(("x", "z"), "y"), outer=True)
            return lambda v, w: (outer(v, w) ** 2).sum()
        # three levels: x, then y, then z
        i3 = smap(lambda b: np_.exp(b / 4) * lax_.psum(b, "z"), Pc("z"), Pc("z"),
                  axis_names={"z"})
        i2 = smap(lambda b: i3(b) * b, Pc(None, "y"), Pc(None, "y"), axis_names={"y"})
        outer = smap(lambda b, w: i2(b) @ w, (Pc("x"), Pc()), Pc("x"), outer=True,
                     axis_names={"x"})
        return lambda v, w: np_.sin(outer(v, w)).sum()

    NESTINGS = ["psum_inside", "default_axis_names", "all_axes_named", "inside_fully_manual",
                "three_levels"]

    @pytest.mark.parametrize("case", NESTINGS)
    def test_grad_of_a_nested_shard_map_matches_jax(case):
        v, w = _x((8, 4), 11), _x((4, 4), 12) / 2
        theirs = _nested_losses((jjax.shard_map, jjax.lax, jjnp, JP, JMESH3), case, False)
        want = jjax.jit(jjax.grad(theirs, argnums=(0, 1)))(v, w)
        for check_vma in (False, True):
            ours = _nested_losses((jax.shard_map, lax, jnp, P, MESH3), case, check_vma)
            np.testing.assert_allclose(float(ours(v, w)), float(jjax.jit(theirs)(v, w)), rtol=1e-5)
            grad = jax.grad(ours, argnums=(0, 1))
            for got in (grad(v, w), jax.jit(grad)(v, w)):
                for g, t in zip(got, want):
                    np.testing.assert_allclose(np.asarray(g), np.asarray(t), rtol=2e-4,
                                               atol=2e-4)

    def test_grad_of_a_nested_shard_map_against_finite_differences():
        v, w = _x((8, 4), 13).astype(np.float64), _x((4, 4), 14).astype(np.float64) / 2
        loss = _nested_losses((jax.shard_map, lax, jnp, P, MESH3), "all_axes_named", True)
        with jax.enable_x64(True):
            gv, gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(v, w)
            rng = np.random.default_rng(15)
            for _ in range(3):
                dv, dw = rng.standard_normal(v.shape), rng.standard_normal(w.shape)
                eps = 1e-6
                fd = (float(loss(v + eps * dv, w + eps * dw))
                      - float(loss(v - eps * dv, w - eps * dw))) / (2 * eps)
                lin = float((np.asarray(gv) * dv).sum() + (np.asarray(gw) * dw).sum())
                np.testing.assert_allclose(lin, fd, rtol=1e-6)

    # ------------------------------------------------------------------------------------------
    # errors

    def test_spec_naming_an_auto_axis_is_an_error_as_in_jax():
        for lib, mesh, spec in ((jax, MESH, P("y")), (jjax, JMESH, JP("y"))):
            with pytest.raises(ValueError, match="manual"):
                lib.shard_map(lambda b: b, mesh=mesh, in_specs=spec, out_specs=spec,
                              axis_names={"x"})(_x((8, 4)))

    def test_axis_names_not_in_mesh_and_wrong_type():
        for lib, mesh in ((jax, MESH), (jjax, JMESH)):
            with pytest.raises(ValueError, match="subset"):
                lib.shard_map(lambda b: b, mesh=mesh, in_specs=P(), out_specs=P(),
                              axis_names={"z"})(_x((8, 4)))
            with pytest.raises(TypeError, match="frozenset"):
                lib.shard_map(lambda b: b, mesh=mesh, in_specs=P(), out_specs=P(),
                              axis_names=("x",))(_x((8, 4)))

    def test_collective_over_an_auto_axis_is_a_name_error():
        for lib, lax_, mesh, spec in ((jax, lax, MESH, P("x")), (jjax, jjax.lax, JMESH, JP("x"))):
            with pytest.raises(NameError):
                lib.jit(lib.shard_map(lambda b: lax_.psum(b, "y"), mesh=mesh, in_specs=spec,
                                      out_specs=spec, axis_names={"x"}))(_x((8, 4)))
