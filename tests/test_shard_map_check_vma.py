"""shard_map's `check_vma` (and the older `check_rep`): an out_spec that leaves out a mesh
axis the output may vary over is JAX's ValueError, with JAX's message; bodies JAX accepts run
and agree with JAX; `check_vma=False` skips the check. On a 2x4 mesh of 8 CPU devices.

The cases need 8 CPU devices: tests/test_eight_devices.py runs this file, with the suite's
other 8-device files, in one fresh process that has them (for fluxion and JAX)."""

import numpy as np
import pytest

from _eight_devices import ON_8_DEVICES

if ON_8_DEVICES:
    import jax as jjax
    import jax.numpy as jjnp
    from jax.experimental.shard_map import shard_map as jold_shard_map
    from jax.sharding import PartitionSpec as JP

    import fluxion as jax
    import fluxion.numpy as jnp
    from fluxion import lax
    from fluxion.experimental.shard_map import shard_map as old_shard_map
    from fluxion.sharding import Mesh, PartitionSpec as P

    assert jax.device_count() == 8 and jjax.device_count() == 8

    MESH = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
    JMESH = jjax.sharding.Mesh(np.array(jjax.devices()).reshape(2, 4), ("x", "y"))
    RING_X = [(0, 1), (1, 0)]

    def _x(shape, seed=0):
        return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

    def _jspec(spec):
        if isinstance(spec, P):
            return JP(*spec)
        return tuple(_jspec(s) for s in spec)

    def _both(body, in_specs, out_specs, **kw):
        """The same shard_map in fluxion and in JAX; `body(jax, jnp, lax, *blocks)` builds
        the body from either library."""
        def ours(*a):
            return body(jax, jnp, lax, *a)

        def theirs(*a):
            return body(jjax, jjnp, jjax.lax, *a)
        return (jax.shard_map(ours, mesh=MESH, in_specs=in_specs, out_specs=out_specs, **kw),
                jjax.shard_map(theirs, mesh=JMESH, in_specs=_jspec(in_specs),
                               out_specs=_jspec(out_specs), **kw))

    def _error(run):
        try:
            run()
        except ValueError as e:
            return str(e)
        return None

    def _type_error(run):
        try:
            run()
        except TypeError as e:
            return str(e)
        return None

    def _normal(msg):
        return msg.replace("`jax.shard_map`", "`fluxion.shard_map`").replace(
            "'theirs'", "'ours'")

    def _double(j):
        """x * 2 as a custom_vjp function of library `j`."""
        f = j.custom_vjp(lambda v: v * 2)
        f.defvjp(lambda v: (v * 2, None), lambda _, g: (g * 2,))
        return f

    A = _x((4, 8))       # blocks (2, 2) under P("x", "y")
    C = _x((2,), 1)      # replicated

    # name: (body, in_specs, out_specs, args)
    CASES = {
        "elementwise_over_both_bad": (lambda j, n, l, a: n.sin(a) * 2, (P("x", "y"),), P("x"),
                                      (A,)),
        "elementwise_ok": (lambda j, n, l, a: n.sin(a) * 2, (P("x", "y"),), P("x", "y"), (A,)),
        "sum_to_scalar_bad": (lambda j, n, l, a: a.sum(), (P("x", "y"),), P(), (A,)),
        "psum_one_of_two": (lambda j, n, l, a: l.psum(a, "y"), (P("x", "y"),), P("x"), (A,)),
        "psum_one_of_two_bad": (lambda j, n, l, a: l.psum(a, "y"), (P("x", "y"),), P(), (A,)),
        "psum_both": (lambda j, n, l, a: l.psum(a, ("x", "y")), (P("x", "y"),), P(), (A,)),
        "pmean_pmax_pmin": (lambda j, n, l, a: l.pmax(a, "x") + l.pmin(a, "x")
                            + l.pmean(a, "x"), (P("x", "y"),), P(None, "y"), (A,)),
        "psum_of_replicated": (lambda j, n, l, c: l.psum(c, "x"), (P(),), P(), (C,)),
        "axis_index_bad": (lambda j, n, l, a: a + l.axis_index("y"), (P("x"),), P("x"), (A,)),
        "axis_index_ok": (lambda j, n, l, a: a + l.axis_index("y"), (P("x"),), P("x", "y"),
                          (A,)),
        "axis_index_replicated_input_bad": (lambda j, n, l, c: c * l.axis_index("x"), (P(),),
                                        P(), (C,)),
        "all_gather_bad": (lambda j, n, l, a: l.all_gather(a, "x", tiled=True), (P("x"),), P(),
                           (A,)),
        "all_gather_ok": (lambda j, n, l, a: l.all_gather(a, "x", tiled=True), (P("x"),),
                          P("x"), (A,)),
        "all_gather_replicated_input_bad": (lambda j, n, l, c: l.all_gather(c, "y"), (P(),),
                                        P(), (C,)),
        "ppermute_replicated_input_bad": (lambda j, n, l, c: l.ppermute(c, "x", RING_X), (P(),),
                                      P(), (C,)),
        "psum_scatter_bad": (lambda j, n, l, a: l.psum_scatter(a, "x", tiled=True),
                             (P(None, "y"),), P(None, "y"), (A,)),
        "psum_scatter_ok": (lambda j, n, l, a: l.psum_scatter(a, "x", tiled=True),
                            (P(None, "y"),), P("x", "y"), (A,)),
        "all_to_all_bad": (lambda j, n, l, a: l.all_to_all(a, "x", 0, 0, tiled=True),
                           (P(None, "y"),), P(None, "y"), (A,)),
        "pcast_varying_bad": (lambda j, n, l, c: l.pcast(c, "x", to="varying"), (P(),), P(), (C,)),
        "constant_output": (lambda j, n, l, a: n.zeros((3,)), (P("x", "y"),), P(), (A,)),
        "two_outputs_bad": (lambda j, n, l, a, c: (a * 2, c + l.axis_index("y")),
                            (P("x", "y"), P()), (P("x"), P()), (A, C)),
        "tuple_spec_prefix_bad": (lambda j, n, l, a: (a, l.psum(a, ("x", "y"))),
                                  (P("x", "y"),), P(), (A,)),
        "scan_carry_bad": (lambda j, n, l, c: l.scan(
            lambda s, _: (s + l.axis_index("x"), None),
            l.pcast(c, "x", to="varying"), None, length=3)[0], (P(),), P(), (C,)),
        "scan_carry_ok": (lambda j, n, l, c: l.scan(
            lambda s, _: (s + l.axis_index("x"), None),
            l.pcast(c, "x", to="varying"), None, length=3)[0], (P(),), P("x"), (C,)),
        "scan_xs_and_psum": (lambda j, n, l, a: l.psum(l.scan(
            lambda s, r: (s + r, s), l.pcast(n.zeros((2,)), ("x", "y"), to="varying"), a)[1],
            ("x", "y")), (P("x", "y"),), P(), (A,)),
        "cond_branch_bad": (lambda j, n, l, a, c: l.cond(c[0] > 0, lambda v: v,
                                                          lambda v: -v, a),
                            (P("x", "y"), P()), P("x"), (A, C)),
        "cond_varying_predicate": (lambda j, n, l, a, c: l.cond(
            a.sum() > 0, lambda: c, lambda: c + 1), (P("x", "y"), P()), P(), (A, C)),
        "while_carry_bad": (lambda j, n, l, a, c: l.fori_loop(
            0, 3, lambda k, s: s + a[0], l.pcast(c, ("x", "y"), to="varying")),
            (P("x", "y"), P()), P("y"), (A, C)),
        "while_varying_predicate": (lambda j, n, l, a, c: l.while_loop(
            lambda s: s[0] < a.sum(), lambda s: s + 1, c), (P("x", "y"), P()), P(), (A, C)),
        "nested_jit_ok": (lambda j, n, l, a: j.jit(lambda v: l.psum(v, "y"))(a),
                          (P("x", "y"),), P("x"), (A,)),
        "nested_jit_bad": (lambda j, n, l, c: j.jit(lambda v: v + l.axis_index("y"))(c),
                           (P(),), P(), (C,)),
        "custom_jvp_bad": (lambda j, n, l, a: j.nn.relu(a), (P("x", "y"),), P("y"), (A,)),
        "custom_jvp_ok": (lambda j, n, l, a: l.psum(j.nn.relu(a), "x"), (P("x", "y"),),
                          P(None, "y"), (A,)),
        # (JAX 0.10.2 fails an internal assertion on a psum over a vmap axis here.)
        "vmap_inside_ok": (lambda j, n, l, a: j.vmap(n.sin)(a), (P("x", "y"),), P("x", "y"),
                           (A,)),
        "vmap_inside_bad": (lambda j, n, l, a: j.vmap(n.sin)(a), (P("x", "y"),), P("x"), (A,)),
        "vmap_axis_index_replicated": (lambda j, n, l, c: j.vmap(
            lambda r: r + l.axis_index("b"), axis_name="b")(c), (P(),), P(), (C,)),
        "custom_vjp_bad": (lambda j, n, l, a: _double(j)(a), (P("x", "y"),), P("y"), (A,)),
        "custom_vjp_ok": (lambda j, n, l, a: _double(j)(l.psum(a, "x")), (P("x", "y"),),
                          P(None, "y"), (A,)),
        "checkpoint_bad": (lambda j, n, l, a: j.checkpoint(lambda v: n.sin(v))(a),
                           (P("x", "y"),), P("x"), (A,)),
    }

    @pytest.mark.parametrize("name", sorted(CASES))
    def test_error_or_value_as_in_jax(name):
        body, in_specs, out_specs, args = CASES[name]
        ours, theirs = _both(body, in_specs, out_specs)
        want = _error(lambda: jjax.jit(theirs).lower(*args))
        got = _error(lambda: jax.jit(ours).lower(*args))
        assert (want is not None) == name.endswith("_bad"), want  # the case means what it says
        if want is None:
            assert got is None, got
            for o, t in zip(jax.tree_util.tree_leaves(ours(*args)),
                            jjax.tree_util.tree_leaves(theirs(*args))):
                np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-5, atol=1e-5)
        else:
            assert "which require replication" in want
            assert got is not None, f"fluxion accepted what JAX rejects:\n{want}"
            assert got.split("\n(fluxion removed")[0] == _normal(want)
        # Eagerly too, not only under jit.
        if want is not None:
            with pytest.raises(ValueError, match="can't be statically inferred"):
                ours(*args)

    @pytest.mark.parametrize("name", ["elementwise_over_both_bad", "axis_index_bad",
                                      "all_gather_bad", "two_outputs_bad", "scan_carry_bad"])
    def test_check_vma_false_skips_the_check(name):
        body, in_specs, out_specs, args = CASES[name]
        ours, theirs = _both(body, in_specs, out_specs, check_vma=False)
        for o, t in zip(jax.tree_util.tree_leaves(ours(*args)),
                        jjax.tree_util.tree_leaves(theirs(*args))):
            np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-5, atol=1e-5)

    def test_check_rep_of_the_older_api():
        body = lambda v: v * 2  # noqa: E731
        for check_rep in (True, False):
            kw = dict(mesh=MESH, in_specs=P("x", "y"), out_specs=P("x"), check_rep=check_rep)
            jkw = dict(kw, mesh=JMESH, in_specs=JP("x", "y"), out_specs=JP("x"))
            want = _error(lambda: jold_shard_map(body, **jkw)(A))
            got = _error(lambda: old_shard_map(body, **kw)(A))
            assert (want is None) == (got is None) == (not check_rep), (want, got)
        np.testing.assert_allclose(np.asarray(old_shard_map(body, **kw)(A)),
                                   np.asarray(jold_shard_map(body, **jkw)(A)))

    def test_partial_manual_axes():
        # Manual over "x" only: "y" is left to the partitioner and never makes a value vary.
        for out_specs, bad in ((P(), True), (P("x"), False)):
            ours, theirs = _both(lambda j, n, l, a: n.sin(a), (P("x"),), out_specs,
                                 axis_names={"x"})
            want = _error(lambda: jjax.jit(theirs).lower(A))
            got = _error(lambda: jax.jit(ours).lower(A))
            assert (want is not None) == bad
            assert (got is None if want is None else
                    got.split("\n(fluxion removed")[0] == _normal(want)), (want, got)

    def test_carry_made_varying_by_the_body_is_jaxs_type_error():
        # As in JAX, a carry must leave the body with the varying axes it entered with: the
        # fix is pcast on the initial value, after which both agree.
        def body(lib, lax_, pcast):
            def f(c):
                c0 = lax_.pcast(c, ("x",), to="varying") if pcast else c
                return lax_.scan(lambda s, _: (s + lax_.axis_index("x"), None), c0, None,
                                 length=3)[0]
            return f
        theirs = _type_error(lambda: jjax.shard_map(body(jjnp, jjax.lax, False), mesh=JMESH,
                                               in_specs=JP(), out_specs=JP("x"))(C))
        ours = _type_error(lambda: jax.shard_map(body(jnp, lax, False), mesh=MESH, in_specs=P(),
                                            out_specs=P("x"))(C))
        assert theirs is not None and ours is not None
        assert ours.splitlines()[0] == theirs.splitlines()[0]
        assert "{V:x}" in ours and "pcast(..., ('x',), to='varying')" in ours
        out = jax.shard_map(body(jnp, lax, True), mesh=MESH, in_specs=P(), out_specs=P("x"))(C)
        want = jjax.shard_map(body(jjnp, jjax.lax, True), mesh=JMESH, in_specs=JP(),
                              out_specs=JP("x"))(C)
        np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-6)

    def test_loop_carries_and_branches_must_keep_their_varying_axes_as_jax():
        """scan/fori/while carries and cond/switch branches whose varying axes differ: JAX's
        TypeError (same first line); programs whose types agree run as in JAX."""
        x = np.arange(8.0, dtype=np.float32)
        bodies = {
            "scan more varying": lambda l, x: l.scan(
                lambda c, _: (c + x.sum(), None), 0.0, None, length=3)[0],
            "scan less varying": lambda l, x: l.scan(
                lambda c, _: (l.psum(c, "x"), None), x, None, length=3)[0],
            "fori": lambda l, x: l.fori_loop(0, 3, lambda i, c: c + x.sum(), 0.0),
            "while": lambda l, x: l.while_loop(lambda c: c < 10, lambda c: c + x.sum() + 1, 0.0),
            "cond": lambda l, x: l.cond(x.sum() > 0, lambda: x.sum(), lambda: 0.0),
            "cond less varying": lambda l, x: l.cond(True, lambda: l.psum(x, "x"), lambda: x),
            "switch": lambda l, x: l.switch(1, [lambda: x.sum(), lambda: 1.0, lambda: 2.0]),
            "cond both axes": lambda l, x: l.cond(True, lambda: x.sum() + l.axis_index("y"),
                                                  lambda: x.sum()),
            "scan ok": lambda l, x: l.scan(lambda c, _: (c + x, None), x, None, length=3)[0],
            "while ok": lambda l, x: l.while_loop(lambda c: c[1] < 3,
                                                  lambda c: (c[0] + x, c[1] + 1), (x, 0))[0],
            "cond ok": lambda l, x: l.cond(True, lambda: x * 2, lambda: x),
            "scan psum ok": lambda l, x: l.scan(lambda c, _: (c + l.psum(x.sum(), "x"), None),
                                                0.0, None, length=3)[0],
        }
        def both_errors(run):
            try:
                run()
            except (TypeError, ValueError) as e:
                return f"{type(e).__name__}: {e}"
            return None

        for name, body in bodies.items():
            theirs = both_errors(lambda: jjax.shard_map(lambda a: body(jjax.lax, a) * x[:1],
                                                        mesh=JMESH, in_specs=JP("x"),
                                                        out_specs=JP("x"))(x))
            ours = both_errors(lambda: jax.shard_map(lambda a: body(lax, a) * x[:1], mesh=MESH,
                                                     in_specs=P("x"), out_specs=P("x"))(x))
            assert (theirs is None) == (ours is None), (name, theirs, ours)
            if theirs is not None:
                assert ours.splitlines()[0] == theirs.splitlines()[0], (name, theirs, ours)
                assert "so the manual axis types do not match" in ours, (name, ours)

    def test_grad_through_pcast():
        # pcast(to='varying') is the identity on values and derivatives in fluxion's model.
        f = jax.shard_map(lambda c: lax.psum(lax.pcast(c, "x", to="varying") ** 2, "x"),
                          mesh=MESH, in_specs=P(), out_specs=P())
        g = jax.grad(lambda c: f(c).sum())(C)
        jf = jjax.shard_map(lambda c: jjax.lax.psum(jjax.lax.pcast(c, "x", to="varying") ** 2,
                                                    "x"), mesh=JMESH, in_specs=JP(),
                            out_specs=JP())
        jg = jjax.grad(lambda c: jf(c).sum())(C)
        np.testing.assert_allclose(np.asarray(g), np.asarray(jg), rtol=1e-6)

    @pytest.mark.parametrize("axis_name,to,exc", [("x", "invariant", ValueError),
                                                  ({"x"}, "varying", TypeError)])
    def test_pcast_bad_arguments_as_in_jax(axis_name, to, exc):
        with pytest.raises(exc) as want:
            jjax.lax.pcast(C, axis_name, to=to)
        with pytest.raises(exc) as got:
            lax.pcast(C, axis_name, to=to)
        # A set prints in hash order: compare its elements, not their order.
        def norm(e):
            head, _, rest = str(e).partition("{")
            return head, sorted(rest.replace("}", "").split(", "))
        assert norm(got.value) == norm(want.value)

    def test_vmap_axis_collectives_and_nested_shard_map():
        # A collective over a vmap axis inside the body leaves the mesh axes as they are (JAX
        # 0.10.2 itself fails an assertion here, so the reference is NumPy).
        body = lambda a: jax.vmap(lambda r: lax.psum(r, "b"), axis_name="b")(a)  # noqa: E731
        with pytest.raises(ValueError, match="'y', but could not infer"):
            jax.shard_map(body, mesh=MESH, in_specs=P("x", "y"), out_specs=P("x"))(A)
        out = jax.shard_map(body, mesh=MESH, in_specs=P("x", "y"), out_specs=P("x", "y"))(A)
        blocks = A.reshape(2, 2, 4, 2).sum(1, keepdims=True)
        np.testing.assert_allclose(np.asarray(out),
                                   np.broadcast_to(blocks, (2, 2, 4, 2)).reshape(4, 8),
                                   rtol=1e-6)
        # A nested shard_map over "y" whose psum makes its output the same along "y".
        inner = lambda v: jax.shard_map(lambda w: lax.psum(w, "y"), mesh=MESH,  # noqa: E731
                                        in_specs=P(None, "y"), out_specs=P(),
                                        axis_names={"y"})(v)
        for out_specs, bad in ((P(), True), (P("x"), False)):
            f = jax.shard_map(inner, mesh=MESH, in_specs=P("x"), out_specs=out_specs,
                              axis_names={"x"})
            if bad:
                with pytest.raises(ValueError, match="not {x}"):
                    f(A)
            else:
                np.testing.assert_allclose(np.asarray(f(A)),
                                           A.reshape(4, 4, 2).sum(1), rtol=1e-5)
