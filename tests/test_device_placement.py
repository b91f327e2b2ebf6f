"""Computation follows data (issue 12): committed and uncommitted arrays on 8 CPU devices,
`default_device`, `jit(device=/backend=)`, compared with JAX (8 host devices) in the same
process.

The cases need 8 CPU devices: tests/test_eight_devices.py runs this file, with the suite's
other 8-device files, in one fresh process that has them (for fluxion and JAX)."""

import numpy as np
import pytest

from _eight_devices import ON_8_DEVICES, run_on_8_devices

if not ON_8_DEVICES:
    def test_default_device_path_stays_unplaced():
        """Without commitment or a default device, dispatch never enters placement (the
        fast paths stay as they were) and every result is uncommitted on device 0."""
        code = (
            "import fluxion as fx, fluxion.numpy as jnp, numpy as np\n"
            "from fluxion._src import dispatch\n"
            "x = jnp.arange(6.).reshape(2, 3)\n"
            "outs = [x + 1, jnp.sin(x), fx.jit(lambda a: a @ a.T)(x), fx.device_put(np.ones(3)),\n"
            "        fx.grad(lambda a: (a * a).sum())(x), fx.vmap(jnp.sum)(x),\n"
            "        fx.random.normal(fx.random.key(0), (2,)), fx.device_put(x)]\n"
            "assert not dispatch.placing\n"
            "assert all(not o.committed and o.devices() == {fx.devices()[0]} for o in outs)\n"
            # Eager calls cached to run directly on the buffers (one and two Arrays) follow
            # placement once it is on.
            "for _ in range(2): jnp.sin(x), jnp.dot(x, x.T)\n"
            "y = fx.device_put(x, fx.devices()[0])\n"
            "assert dispatch.placing and y.committed and (y + 1).committed\n"
            "z = fx.device_put(x, fx.devices()[3])\n"
            "for out in (jnp.sin(z), jnp.dot(z, x.T), jnp.dot(x, z.T)):\n"
            "    assert out.committed and out.devices() == {fx.devices()[3]}\n"
            "print('OK')\n")
        proc = run_on_8_devices(["-c", code])
        assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr

else:
    import jax
    import jax.numpy as jjnp

    import fluxion as fx
    import fluxion.numpy as jnp
    from fluxion.sharding import SingleDeviceSharding

    D = fx.devices()
    JD = jax.devices()
    assert len(D) == 8 and len(JD) == 8

    def where(a):
        """(device ids, committed): what the tests compare with JAX."""
        return sorted(d.id for d in a.devices()), bool(a.committed)

    def check(ours, theirs, rtol=1e-6):
        """Same values, devices and commitment as JAX's result (pytrees of arrays)."""
        ours_l, theirs_l = fx.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
        assert len(ours_l) == len(theirs_l)
        for o, t in zip(ours_l, theirs_l):
            assert where(o) == where(t), (where(o), where(t))
            np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=rtol, atol=1e-6)

    @pytest.fixture(autouse=True)
    def _no_default_device():
        yield
        fx.config.update("jax_default_device", None)
        jax.config.update("jax_default_device", None)

    X = np.arange(6, dtype=np.float32).reshape(2, 3)

    def both(fn):
        """`fn(lib, numpy_module, devices)` run with fluxion and with JAX."""
        return fn(fx, jnp, D), fn(jax, jjnp, JD)

    # ---- committed and uncommitted

    def test_creation_is_uncommitted_and_device_put_commits():
        for build in (lambda m, np_, d: np_.ones(3),
                      lambda m, np_, d: np_.asarray(X),
                      lambda m, np_, d: m.device_put(X),
                      lambda m, np_, d: m.device_put(np_.arange(3.)),
                      lambda m, np_, d: m.device_put(X, d[3]),
                      lambda m, np_, d: m.device_put(np_.ones(3), d[5]),
                      lambda m, np_, d: m.device_put(m.device_put(X, d[1]), d[2]),
                      lambda m, np_, d: m.device_put(m.device_put(X, d[1])),
                      lambda m, np_, d: m.device_put(2.5, d[4]),
                      lambda m, np_, d: m.device_put(X, m.sharding.SingleDeviceSharding(d[6])),
                      lambda m, np_, d: np_.zeros((2,), device=d[7]),
                      lambda m, np_, d: np_.arange(4, device=d[2])):
            check(*both(build))

    def test_device_put_without_device_keeps_arrays_where_they_are():
        y = fx.device_put(X, D[1])
        assert fx.device_put(y) is y
        x = jnp.ones(2)
        with fx.default_device(D[3]):
            assert fx.device_put(x) is x
            assert where(fx.device_put(np.ones(2))) == ([3], False)

    def test_array_placement_attributes():
        y = fx.device_put(X, D[4])
        assert y.device == D[4] and y.devices() == {D[4]}
        assert y.sharding == SingleDeviceSharding(D[4])
        assert [s.device for s in y.addressable_shards] == [D[4]]
        assert y.addressable_shards[0].data.devices() == {D[4]}
        assert jnp.ones(2).committed is False

    # ---- eager operations

    @pytest.mark.parametrize("op", [
        lambda m, np_, a, b: a + b,
        lambda m, np_, a, b: b * 2.0 - a,
        lambda m, np_, a, b: np_.sin(a) @ b.T,
        lambda m, np_, a, b: np_.where(a > 2, a, b),
        lambda m, np_, a, b: np_.concatenate([a, b, np_.ones((1, 3))]),
        lambda m, np_, a, b: (a[1], b[:, 0].sum(), -a),
        lambda m, np_, a, b: m.lax.cond(True, lambda u: u + 1, lambda u: u, a),
        lambda m, np_, a, b: m.lax.fori_loop(0, 3, lambda i, u: u * 2 + b, a),
    ])
    @pytest.mark.parametrize("placing", ["committed_first", "committed_second", "neither",
                                         "both_same", "committed_to_default"])
    def test_eager_ops_follow_committed_arguments(op, placing):
        def run(m, np_, d):
            a, b = np_.asarray(X), np_.asarray(X[::-1] + 1)
            if placing in ("committed_first", "both_same"):
                a = m.device_put(a, d[2])
            if placing in ("committed_second", "both_same"):
                b = m.device_put(b, d[2])
            if placing == "committed_to_default":  # same device, but the results commit
                b = m.device_put(b, d[0])
            return op(m, np_, a, b)
        check(*both(run))

    def test_uncommitted_arguments_on_other_devices_go_to_the_default_device():
        def run(m, np_, d):
            with m.default_device(d[3]):
                a = np_.ones(3)
            with m.default_device(d[6]):
                b = np_.arange(3.)
            return a + b, a * 2, m.jit(lambda u, v: u - v)(a, b)
        check(*both(run))

    def _error(fn, lib):
        with pytest.raises(ValueError) as e:
            fn(lib)
        return str(e.value)

    def test_committed_arguments_on_two_devices_raise_as_jax(capfd):
        def two(m):
            d = m.devices()
            return m.device_put(X, d[1]), m.device_put(X, d[2])

        def mul(a, b):
            return a * b

        def pair(t):
            return t[0] + t[1]

        cases = [lambda m: m.lax.add(*two(m)),
                 lambda m: m.jit(mul)(*two(m)),
                 lambda m: m.jit(pair)(two(m)),
                 lambda m: m.jit(lambda a, *, b: a + b)(two(m)[0], b=two(m)[1])]
        for case in cases:
            ours, theirs = _error(case, fx), _error(case, jax)
            assert ours == theirs
        assert "device ids [1]" in ours and "device ids [2]" in ours
        # the eager operator: JAX names jnp's arguments, fluxion binds the primitive
        msg = _error(lambda m: two(m)[0] + two(m)[1], fx)
        assert msg.startswith("Received incompatible devices for jitted computation. Got "
                              "argument args[0] of add with shape float32[2,3] and with device "
                              "ids [1] on platform CPU and argument args[1]"), msg
        # checked before execution: XLA never saw a buffer on the wrong device
        assert "Buffer passed to Execute" not in capfd.readouterr().err

    # ---- jit

    def test_jit_runs_on_the_committed_device():
        def f(p, x):
            return {"y": np.float32(2) * p["w"] @ x + p["b"], "n": (x * x).sum()}

        def run(m, np_, d):
            p = {"w": np_.asarray(X.T), "b": np_.ones((3, 3))}
            x = np_.asarray(X)
            jf = m.jit(f)
            return [jf(p, x), jf(m.device_put(p, d[5]), x), jf(p, m.device_put(x, d[6])),
                    jf(m.device_put(p, d[7]), m.device_put(x, d[7])), jf(p, X)]
        check(*both(run))

    def test_jit_with_large_constant_on_other_devices():
        big = np.random.default_rng(0).standard_normal(40000).astype(np.float32)

        def run(m, np_, d):
            g = m.jit(lambda u: (u * big).sum())
            return [g(m.device_put(big, d[k])) for k in (0, 3, 4)]
        check(*both(run), rtol=1e-4)

    def test_jit_donation_on_committed_arrays():
        def run(m, np_, d):
            y = m.device_put(np_.asarray(X), d[3])
            out = m.jit(lambda u: u * 3, donate_argnums=0)(y)
            return out, y.is_deleted()
        (ours, ours_deleted), (theirs, theirs_deleted) = both(run)
        check(ours, theirs)
        assert ours_deleted == theirs_deleted

    def test_jit_device_and_backend_pin_the_program():
        def run(m, np_, d):
            x, y = np_.asarray(X), m.device_put(X, d[2])
            with pytest.warns(DeprecationWarning, match="backend and device argument on jit"):
                on5 = m.jit(lambda u: u * 2 + 1, device=d[5])
            with pytest.warns(DeprecationWarning):
                on_cpu = m.jit(lambda u: u.sum(), backend="cpu")
            with pytest.warns(DeprecationWarning):
                grad5 = m.grad(m.jit(lambda u: (u * u).sum(), device=d[5]))
            return [on5(x), on5(y), on_cpu(x), on_cpu(y), grad5(x)]
        check(*both(run))

    # ---- transformations

    def test_grad_vmap_jvp_on_committed_arrays():
        def loss(w, x):
            return ((x @ w) ** 2).mean()

        def run(m, np_, d):
            w, x = m.device_put(np_.asarray(X.T), d[1]), np_.asarray(X)
            return [m.grad(loss)(w, x), m.grad(loss, argnums=(0, 1))(w, x),
                    m.vmap(lambda r: r * 2 + 1)(w), m.vmap(loss, in_axes=(None, 0))(w, x[:, None]),
                    m.jvp(lambda u: np_.sin(u) * u, (w,), (np_.ones_like(w),)),
                    m.jit(m.grad(loss))(w, x), m.value_and_grad(loss)(w, m.device_put(x, d[1]))]
        check(*both(run))

    # ---- default device

    def test_creation_and_ops_under_default_device():
        def run(m, np_, d):
            x = np_.asarray(X)
            with m.default_device(d[3]):
                made = [np_.ones(3), np_.zeros((2, 2)), np_.arange(5), np_.eye(3), np_.full(2, 7.0),
                        np_.linspace(0, 1, 4), np_.asarray(X), m.device_put(np.ones(2)),
                        np_.zeros_like(x)]
                ran = [x + 1, m.jit(lambda u: u * 2)(x), m.jit(lambda u: u * 2)(X),
                       m.jit(lambda: np_.ones(2))(), m.device_put(X, d[1]) + 1]
            return made + ran
        check(*both(run))

    def test_default_device_config_flag_and_platform_string():
        def run(m, np_, d):
            m.config.update("jax_default_device", d[6])
            a = np_.ones(2), np_.asarray(X) * 2
            m.config.update("jax_default_device", "cpu")
            b = np_.ones(2)
            m.config.update("jax_default_device", None)
            return [*a, b, np_.ones(2)]
        check(*both(run))
        assert fx.config.jax_default_device is None

    def test_default_device_rejects_bad_values():
        for bad in (3, "cpu:1"):
            with pytest.raises(ValueError) as ours:
                fx.config.update("jax_default_device", bad)
            with pytest.raises(ValueError) as theirs:
                jax.config.update("jax_default_device", bad)
            assert str(ours.value) == str(theirs.value)
        with pytest.raises(ValueError, match="platform name"):
            with fx.default_device(5):
                pass

    def test_random_under_default_device_and_on_committed_keys():
        def run(m, np_, d):
            with m.default_device(d[4]):
                k = m.random.key(0)
                a = [m.random.normal(k, (3,)), m.random.uniform(m.random.PRNGKey(1), (2,))]
            k2 = m.device_put(m.random.key(7), d[2])
            ks = m.random.split(k2)
            b = [m.random.normal(k2, (3,)), m.random.bernoulli(ks[0], 0.5, (4,)),
                 m.random.key_data(ks), m.random.randint(ks[1], (3,), 0, 9)]
            return a + b, [k, k2]
        (ours, ours_keys), (theirs, theirs_keys) = both(run)
        check(ours, theirs)
        for o, t in zip(ours_keys, theirs_keys):
            assert where(o) == where(t)

    # ---- pytrees

    def test_device_put_pytrees_over_several_devices():
        def run(m, np_, d):
            tree = {"a": np_.asarray(X), "b": (np.ones(2, np.float32), 3.0), "c": [X[0]]}
            spread = m.device_put(tree, {"a": d[1], "b": d[2], "c": [d[3]]})
            together = m.device_put(tree, d[4])
            sums = m.jit(lambda t: t["a"].sum() + t["b"][0].sum())(together)
            on_a = spread["a"] * 2 + np_.ones(3)
            return [spread, together, sums, on_a]
        check(*both(run))
        with pytest.raises(ValueError, match="tree prefix"):
            fx.device_put({"a": X, "b": X}, [D[1], D[2]])
        with pytest.raises(ValueError):  # JAX too: arguments of one call on two devices
            spread = fx.device_put({"a": X, "b": X}, {"a": D[1], "b": D[2]})
            fx.jit(lambda t: t["a"] + t["b"])(spread)

    def test_results_keep_values_through_moves():
        y = fx.device_put(X, D[7])
        z = jnp.ones((2, 3)) + y  # the uncommitted operand is copied to device 7
        np.testing.assert_array_equal(np.asarray(z), X + 1)
        w = fx.device_put(z, D[0])
        assert where(w) == ([0], True)
        np.testing.assert_array_equal(np.asarray(w * 1), X + 1)

    def test_array_copies_and_sequences_follow_jax():
        def run(m, np_, d):
            x = np_.arange(3.)
            y = m.device_put(x, d[1])
            with m.default_device(d[3]):
                inside = [np_.array(x), np_.array(y), np_.asarray(x), np_.array([x, x]),
                          np_.array([y, x]), np_.stack([y, x])]
                z = np_.ones(2)
            return inside + [np_.array(z), np_.asarray(z), x.astype(np_.int32)]
        check(*both(run))

    def test_callbacks_on_committed_arrays():
        def f(m, a):
            b = m.pure_callback(lambda t: np.asarray(t) * 2,
                                m.ShapeDtypeStruct((3,), np.float32), a)
            return b + 1

        def run(m, np_, d):
            y = m.device_put(np_.arange(3.), d[6])
            return [f(m, y), m.jit(lambda a: f(m, a))(y), f(m, np_.arange(3.))]
        check(*both(run))

    def test_ahead_of_time_compiled_pinned_jit():
        def run(m, np_, d):
            x = np_.asarray(X)
            with pytest.warns(DeprecationWarning):
                g = m.jit(lambda u: u @ u.T, device=d[5])
            y = m.device_put(x, d[3])
            return [g.lower(x).compile()(x), g.lower(x).compile()(m.device_put(x, d[5])),
                    m.jit(lambda u: u * 2).lower(y).compile()(y)]
        check(*both(run))

        def wrong_device(m):
            x = m.device_put(X, m.devices()[2])
            return m.jit(lambda u: u + 1).lower(X).compile()(x)
        with pytest.raises(ValueError, match="compiled for input shardings that disagree"):
            wrong_device(jax)
        with pytest.raises(ValueError, match="compiled for input shardings that disagree"):
            wrong_device(fx)

    def test_jit_with_single_device_shardings_pins_the_program():
        def run(m, np_, d):
            S = m.sharding.SingleDeviceSharding
            x = np_.asarray(X)
            return [m.jit(lambda a: a + 1, in_shardings=S(d[3]))(x),
                    m.jit(lambda a: a.sum(), out_shardings=S(d[4]))(x),
                    m.jit(lambda a, b: (a @ b.T, a), in_shardings=(S(d[2]), None),
                          out_shardings=S(d[2]))(x, x),
                    m.grad(m.jit(lambda a: (a * a).sum(), in_shardings=S(d[6])))(x)]
        check(*both(run))

    # ---- `*_like` creations follow a committed example (found by JAX's multi_device_test)

    def test_like_creations_take_a_committed_examples_devices():
        def run(m, np_, d):
            Mesh, NamedSharding, P = m.sharding.Mesh, m.sharding.NamedSharding, m.sharding.PartitionSpec
            x = m.device_put(X, d[1])
            mesh = Mesh(d[:2], ("i",))
            split = m.device_put(X, NamedSharding(mesh, P("i")))
            replicated = m.device_put(X, NamedSharding(mesh, P()))
            weak = m.device_put(2.0, d[3])
            return [m.lax.full_like(x, 1), m.lax.full_like(x, 1.0, shape=()),
                    m.lax.full_like(np_.arange(10, device=d[2]), 1, shape=(5,)),
                    np_.zeros_like(x), np_.ones_like(x, shape=(4,)), np_.full_like(x, 3.0),
                    np_.empty_like(x, dtype=np.int32),
                    np_.zeros_like(split), np_.zeros_like(split, shape=(3,)),
                    np_.ones_like(replicated, shape=(3,)),
                    np_.zeros_like(weak), np_.zeros_like(weak, dtype=np.float32),
                    np_.zeros_like(np_.ones(3))]
        check(*both(run))

    def test_device_put_cotangent_returns_to_the_primals_device():
        def run(m, np_, d):
            x0, x2 = m.device_put(2.0, d[0]), m.device_put(np_.ones(3), d[2])
            uncommitted = np_.float32(3.0)
            moved = lambda x: m.device_put(x, d[1])
            return [m.value_and_grad(moved)(x0),
                    m.grad(lambda x: (moved(x) * 2).sum())(x2),
                    m.grad(moved)(uncommitted),
                    m.vjp(moved, x2)[1](m.device_put(np_.ones(3), d[1])),
                    m.jit(m.grad(lambda x: (moved(x) ** 2).sum()))(x2)]
        check(*both(run))
