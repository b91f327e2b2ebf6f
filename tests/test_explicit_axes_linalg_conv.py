"""Explicit mesh axes for batched linear algebra, convolutions and batched indexing against
JAX 0.10's: result shardings and values on an explicitly sharded batch, ShardingTypeError
classes and messages, conv_general_dilated's `out_sharding`, and the programs where JAX
raises for reasons of its own (docs/differences.md) checked against NumPy.

The cases need 8 CPU devices: tests/test_eight_devices.py runs this file, with the suite's
other 8-device files, in one fresh process that has them (for fluxion and JAX)."""
import re

import numpy as np
import pytest

from _eight_devices import ON_8_DEVICES

if ON_8_DEVICES:
    import jax
    from jax._src.core import ShardingTypeError as JaxShardingTypeError

    import fluxion
    from fluxion.sharding import ShardingTypeError

    SPECS = {"m": ("x", None, None), "spd": ("x", None, None), "rhs": ("x", None, None),
             "vec": ("x", None), "img": ("x", None, None, None), "ker": (None,) * 4,
             "nhwc": ("x", None, None, None), "hwio": (None,) * 4, "sig": ("x",)}

    def _host():
        rng = np.random.default_rng(0)
        m = rng.standard_normal((8, 4, 4)).astype(np.float32)
        return {"m": m, "spd": m @ m.transpose(0, 2, 1) + 4 * np.eye(4, dtype=np.float32),
                "rhs": rng.standard_normal((8, 4, 2)).astype(np.float32),
                "vec": rng.standard_normal((8, 4)).astype(np.float32),
                "img": rng.standard_normal((8, 4, 6, 6)).astype(np.float32),
                "ker": rng.standard_normal((5, 4, 3, 3)).astype(np.float32),
                "nhwc": rng.standard_normal((8, 6, 6, 3)).astype(np.float32),
                "hwio": rng.standard_normal((3, 3, 3, 5)).astype(np.float32),
                "sig": rng.standard_normal(16).astype(np.float32)}

    HOST = _host()
    _SETUP = {}

    def setup(mod):
        """(mesh, arrays) of one framework: a (4, 2) mesh of Explicit axes x, y."""
        if mod.__name__ not in _SETUP:
            mesh = mod.make_mesh((4, 2), ("x", "y"))
            S, P = mod.sharding.NamedSharding, mod.sharding.PartitionSpec
            _SETUP[mod.__name__] = mesh, {k: mod.device_put(v, S(mesh, P(*SPECS[k])))
                                          for k, v in HOST.items()}
        return _SETUP[mod.__name__]

    def put(f, x, *spec):
        return f.sharding.reshard(x, f.sharding.PartitionSpec(*spec))

    def run(mod, prog, jit):
        mesh, arrays = setup(mod)
        fun = lambda *xs: prog(mod, dict(zip(arrays, xs)))  # noqa: E731
        with mod.set_mesh(mesh):
            return (mod.jit(fun) if jit else fun)(*arrays.values())

    def specs(out):
        return [tuple(o.sharding.spec) for o in jax.tree_util.tree_leaves(out)]

    def leaves(out):
        return [np.asarray(o) for o in jax.tree_util.tree_leaves(out)]

    la = lambda f: f.numpy.linalg  # noqa: E731

    # name -> program(framework module, arrays)
    PROGRAMS = {
        "solve": lambda f, a: la(f).solve(a["m"], a["rhs"]),
        "det": lambda f, a: la(f).det(a["m"]),
        "slogdet": lambda f, a: la(f).slogdet(a["m"]),
        "eigh": lambda f, a: la(f).eigh(a["spd"]),
        "svd": lambda f, a: la(f).svd(a["m"]),
        "svdvals": lambda f, a: la(f).svd(a["m"], compute_uv=False),
        "pinv": lambda f, a: la(f).pinv(a["m"]),
        "norm_2": lambda f, a: la(f).norm(a["m"], ord=2, axis=(1, 2)),
        "matrix_rank": lambda f, a: la(f).matrix_rank(a["m"]),
        "lu": lambda f, a: f.lax.linalg.lu(a["m"]),
        "lu_solve": lambda f, a: f.scipy.linalg.lu_solve(f.scipy.linalg.lu_factor(a["m"]),
                                                         a["rhs"]),
        "eigvals": lambda f, a: la(f).eigvals(a["m"]),
        "schur": lambda f, a: f.lax.linalg.schur(a["m"])[0],
        "hessenberg": lambda f, a: f.lax.linalg.hessenberg(a["m"])[0],
        "triangular_solve": lambda f, a: f.lax.linalg.triangular_solve(
            a["m"], a["rhs"].transpose(0, 2, 1)),
        "triangular_solve_left": lambda f, a: f.lax.linalg.triangular_solve(
            a["m"], a["rhs"], left_side=True, lower=True),
        "tridiagonal_solve": lambda f, a: f.lax.linalg.tridiagonal_solve(
            a["vec"].at[:, 0].set(0.0), a["vec"] + 5, a["vec"].at[:, -1].set(0.0), a["rhs"]),
        "symmetric_product": lambda f, a: f.lax.linalg.symmetric_product(a["m"], a["spd"]),
        "tridiagonal": lambda f, a: f.lax.linalg.tridiagonal(a["spd"])[1:3],
        "householder_product": lambda f, a: f.lax.linalg.householder_product(a["m"],
                                                                             a["vec"][:, :3]),
        "grad_solve": lambda f, a: f.grad(lambda m: la(f).solve(m, a["rhs"]).sum())(a["m"]),
        "vmap_solve": lambda f, a: f.vmap(la(f).solve)(a["m"], a["rhs"]),
        "take_along_axis": lambda f, a: f.numpy.take_along_axis(
            a["m"], f.numpy.argsort(a["m"], axis=2), axis=2),
        # vmap's index arrays and sort's iotas: unsharded in fluxion, sharded in JAX
        "vmap_dynamic_slice": lambda f, a: f.vmap(
            lambda r, j: f.lax.dynamic_slice_in_dim(r, j, 2, axis=1))(
                a["m"], f.numpy.argmax(a["vec"], -1)),
        "vmap_gather_column": lambda f, a: f.vmap(lambda r, j: r[:, j])(
            a["m"], f.numpy.argmax(a["vec"], -1)),
        "vmap_nonzero": lambda f, a: f.vmap(lambda r: f.numpy.nonzero(r > 0, size=3)[0])(
            a["vec"]),
        "conv_nchw": lambda f, a: f.lax.conv(a["img"], a["ker"], (1, 1), "SAME"),
        "conv_nhwc_to_nchw": lambda f, a: f.lax.conv_general_dilated(
            a["nhwc"], a["hwio"], (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NCHW")),
        "conv_transpose": lambda f, a: f.lax.conv_transpose(a["nhwc"], a["hwio"], (2, 2),
                                                            "SAME"),
        "conv_spatial_strided": lambda f, a: f.lax.conv(put(f, a["img"], None, None, "y"),
                                                        a["ker"], (3, 3), "VALID"),
        "conv_out_sharding": lambda f, a: f.lax.conv_general_dilated(
            put(f, a["img"], None, "y"), a["ker"], (1, 1), "SAME",
            out_sharding=f.sharding.PartitionSpec("x")),
        "conv_grads": lambda f, a: f.grad(
            lambda k, x: f.nn.relu(f.lax.conv(x, k, (1, 1), "SAME")).sum(), (0, 1))(
                a["ker"], a["img"]),
        "conv_vmap": lambda f, a: f.vmap(
            lambda x: f.lax.conv(x[None], a["ker"], (1, 1), "SAME")[0])(a["img"]),
        "correlate_same": lambda f, a: f.numpy.correlate(a["sig"], f.numpy.ones(3, np.float32),
                                                         "same"),
        "max_pool": lambda f, a: f.lax.reduce_window(a["img"], -np.inf, f.lax.max, (1, 1, 2, 2),
                                                     (1, 1, 2, 2), "VALID"),
        "avg_pool_nhwc": lambda f, a: f.lax.reduce_window(a["nhwc"], 0., f.lax.add,
                                                          (1, 3, 3, 1), (1, 1, 1, 1), "SAME"),
        "pool_spatial_sharded": lambda f, a: f.lax.reduce_window(
            put(f, a["img"], None, None, "y"), 0., f.lax.add, (1, 1, 3, 3), (1, 1, 3, 3),
            "VALID"),
        "max_pool_grad": lambda f, a: f.grad(lambda x: f.lax.reduce_window(
            x, -np.inf, f.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID").sum())(a["img"]),
        "avg_pool_grad": lambda f, a: f.grad(lambda x: f.lax.reduce_window(
            x, 0., f.lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID").sum())(a["img"]),
        "reduce_two_operands": lambda f, a: f.lax.reduce(
            (a["m"], a["m"] * 2), (0., 0.), lambda x, y: (x[0] + y[0], x[1] + y[1]), (2,)),
        "tile": lambda f, a: f.numpy.tile(a["m"], (1, 2, 1)),
        "grad_of_linear": lambda f, a: f.grad(lambda x: (2 * x).sum())(a["m"]),
    }

    _JAX_RESULTS = {}

    def jax_result(name):
        """JAX's result of a program under jit (its eager results are laid out alike)."""
        if name not in _JAX_RESULTS:
            _JAX_RESULTS[name] = run(jax, PROGRAMS[name], True)
        return _JAX_RESULTS[name]

    @pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
    @pytest.mark.parametrize("name", sorted(PROGRAMS))
    def test_result_sharding_matches_jax(name, jit):
        ours, theirs = run(fluxion, PROGRAMS[name], jit), jax_result(name)
        assert specs(ours) == specs(theirs)
        for o, t in zip(leaves(ours), leaves(theirs)):
            assert o.shape == t.shape and o.dtype == t.dtype
            if name in ("eigvals", "schur", "hessenberg", "svd", "eigh"):
                continue  # defined up to signs and order: checked through numpy below
            np.testing.assert_allclose(o, t, rtol=2e-4, atol=2e-4)
        # The data is laid out as the type says.
        for out in jax.tree_util.tree_leaves(ours):
            for shard in out.addressable_shards:
                np.testing.assert_array_equal(np.asarray(shard.data),
                                              np.asarray(out)[shard.index])

    def test_decomposition_values_against_numpy():
        m, spd = HOST["m"], HOST["spd"]
        w, v = run(fluxion, PROGRAMS["eigh"], True)
        np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(spd), rtol=1e-4)
        np.testing.assert_allclose(np.asarray(v) * np.asarray(w)[:, None] @
                                   np.asarray(v).transpose(0, 2, 1), spd, atol=1e-3)
        u, s, vt = run(fluxion, PROGRAMS["svd"], False)
        np.testing.assert_allclose(np.asarray(s), np.linalg.svd(m, compute_uv=False),
                                   rtol=1e-4)
        np.testing.assert_allclose((np.asarray(u) * np.asarray(s)[:, None]) @ np.asarray(vt),
                                   m, atol=1e-4)
        ev = np.sort_complex(np.asarray(run(fluxion, PROGRAMS["eigvals"], True)))
        np.testing.assert_allclose(ev, np.sort_complex(np.linalg.eigvals(m)), atol=1e-4)

    # Programs where JAX 0.10.2 raises for reasons of its own (docs/differences.md): a select
    # with an unsharded iota mask (cholesky, qr, einsum's trace, sort's JVP), a vmap inside
    # (inv, matrix_power, solve with unsharded right-hand sides), an ambiguous gather (solve
    # with one shared right-hand side). fluxion keeps the batch sharding; the values are
    # checked against NumPy.
    JAX_RAISES = {
        "cholesky": (lambda f, a: la(f).cholesky(a["spd"]), JaxShardingTypeError,
                     lambda h: np.linalg.cholesky(h["spd"])),
        "qr_r": (lambda f, a: f.numpy.abs(la(f).qr(a["m"])[1]), JaxShardingTypeError,
                 lambda h: np.abs(np.linalg.qr(h["m"])[1])),
        "inv": (lambda f, a: la(f).inv(a["m"]), ValueError, lambda h: np.linalg.inv(h["m"])),
        "einsum_trace": (lambda f, a: f.numpy.einsum("bii->b", a["m"]), JaxShardingTypeError,
                         lambda h: np.einsum("bii->b", h["m"])),
        "sort_gradient": (lambda f, a: f.grad(
            lambda x: (f.numpy.sort(x, axis=-1) * f.numpy.arange(4.0)).sum())(a["m"]),
            JaxShardingTypeError, lambda h: np.take_along_axis(
                np.broadcast_to(np.arange(4.0, dtype=np.float32), h["m"].shape),
                np.argsort(np.argsort(h["m"], -1), -1), -1)),
        "matrix_power_negative": (lambda f, a: la(f).matrix_power(a["m"], -2), ValueError,
                                  lambda h: np.linalg.matrix_power(h["m"], -2)),
        "solve_unsharded_rhs": (lambda f, a: la(f).solve(a["m"], put(f, a["rhs"], None)),
                                ValueError, lambda h: np.linalg.solve(h["m"], h["rhs"])),
        "solve_one_rhs": (lambda f, a: la(f).solve(a["m"], f.numpy.ones((4, 2), np.float32)),
                          JaxShardingTypeError,
                          lambda h: np.linalg.solve(h["m"], np.ones((4, 2), np.float32))),
    }

    @pytest.mark.parametrize("name", sorted(JAX_RAISES))
    def test_batch_sharding_kept_where_jax_raises(name):
        prog, jax_error, numpy_fun = JAX_RAISES[name]
        with pytest.raises(jax_error):
            run(jax, prog, True)
        for jit in (False, True):
            out = run(fluxion, prog, jit)
            assert out.sharding.spec[0] == "x" and not any(out.sharding.spec[1:])
            np.testing.assert_allclose(np.asarray(out), numpy_fun(HOST), rtol=2e-4, atol=2e-4)

    # ---- ShardingTypeError: the same class and message as JAX's
    ERRORS = {
        "lu_matrix_sharded": lambda f, a: f.lax.linalg.lu(put(f, a["m"], None, "x")),
        "svd_matrix_sharded": lambda f, a: la(f).svd(put(f, a["m"], None, None, "y")),
        "triangular_solve_batch": lambda f, a: f.lax.linalg.triangular_solve(
            a["m"], put(f, a["rhs"].transpose(0, 2, 1), None)),
        "triangular_solve_a_contracting": lambda f, a: f.lax.linalg.triangular_solve(
            put(f, a["m"], "x", None, "y"), a["rhs"], left_side=True),
        "triangular_solve_b_contracting": lambda f, a: f.lax.linalg.triangular_solve(
            a["m"], put(f, a["rhs"], "x", "y"), left_side=True),
        "tridiagonal_solve_batch": lambda f, a: f.lax.linalg.tridiagonal_solve(
            a["vec"], put(f, a["vec"], None), a["vec"], a["rhs"]),
        "tridiagonal_solve_matrix_sharded": lambda f, a: f.lax.linalg.tridiagonal_solve(
            a["vec"], a["vec"], a["vec"], put(f, a["rhs"], "x", None, "y")),
        "symmetrize_illegal": lambda f, a: la(f).cholesky(put(f, a["spd"], None, "x")),
        "conv_feature_sharded": lambda f, a: f.lax.conv(put(f, a["img"], None, "y"), a["ker"],
                                                        (1, 1), "SAME"),
        "conv_kernel_sharded": lambda f, a: f.lax.conv(a["img"], put(f, a["ker"], None, "y"),
                                                       (1, 1), "SAME"),
        "convolve_not_divisible": lambda f, a: f.numpy.convolve(a["sig"],
                                                                f.numpy.ones(3, np.float32)),
        "roll_sharded_batch": lambda f, a: f.numpy.roll(a["m"], 1, axis=0),
        "map_over_sharded_batch": lambda f, a: f.lax.map(lambda r: r.sum(), a["m"]),
    }

    def _message(e):
        text = re.sub(r" \(at [^()]*(\([^()]*\))?\)$", "", str(e))  # fluxion's location
        return re.sub(r"np\.int64\((\d+)\)", r"\1", text)  # JAX's shapes print numpy ints

    @pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
    @pytest.mark.parametrize("name", sorted(ERRORS))
    def test_sharding_type_errors_as_jax(name, jit):
        value_error = name == "map_over_sharded_batch"  # JAX's scan raises ValueError
        with pytest.raises(ValueError if value_error else JaxShardingTypeError) as theirs:
            run(jax, ERRORS[name], True)
        with pytest.raises(ValueError if value_error else ShardingTypeError) as ours:
            run(fluxion, ERRORS[name], jit)
        assert _message(ours.value) == _message(theirs.value)

    @pytest.mark.parametrize("prog", [
        lambda f, a: f.numpy.sort(a["m"], axis=0),
        lambda f, a: f.numpy.argsort(a["m"], axis=0),
        lambda f, a: f.lax.sort((a["m"], put(f, a["m"], "y")), dimension=2, num_keys=1)],
        ids=["sort_sharded_axis", "argsort_sharded_axis", "sort_mixed_operands"])
    def test_sort_errors_as_jax(prog):
        """JAX's messages up to the shardings, which JAX prints as whole NamedShardings."""
        with pytest.raises(JaxShardingTypeError) as theirs:
            run(jax, prog, True)
        with pytest.raises(ShardingTypeError) as ours:
            run(fluxion, prog, True)
        head = str(theirs.value).split("sharding")[0]
        assert head.startswith("Arguments to sort must") and str(ours.value).startswith(head)

    def test_conv_out_sharding_resolves_a_sharded_kernel():
        def prog(f, a):
            return f.lax.conv_general_dilated(a["img"], put(f, a["ker"], None, "y"), (1, 1),
                                              "SAME", out_sharding=f.sharding.PartitionSpec("x"))
        theirs = run(jax, prog, True)
        for jit in (False, True):
            ours = run(fluxion, prog, jit)
            assert specs(ours) == specs(theirs) == [("x", None, None, None)]
            np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-4,
                                       atol=2e-4)

    def test_conv_matches_dimensions_by_role_across_layouts():
        """NHWC in, NCHW out: JAX copies the input's spec position by position (H's sharding
        lands on the 5 output features: an error); fluxion keeps H's sharding on H
        (docs/differences.md)."""
        def prog(f, a):
            return f.lax.conv_general_dilated(put(f, a["nhwc"], None, "y"), a["hwio"], (1, 1),
                                              "SAME", dimension_numbers=("NHWC", "HWIO", "NCHW"))
        with pytest.raises(JaxShardingTypeError, match="out dim \\(5\\) is not divisible"):
            run(jax, prog, True)
        want = np.asarray(run(jax, lambda f, a: f.lax.conv_general_dilated(
            a["nhwc"], a["hwio"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NCHW")),
            True))
        for jit in (False, True):
            out = run(fluxion, prog, jit)
            assert specs(out) == [(None, None, "y", None)]
            np.testing.assert_allclose(np.asarray(out), want, rtol=2e-4, atol=2e-4)

    def test_depthwise_conv_kernel_gradient_values():
        """The kernel's gradient of a grouped convolution is a convolution with
        batch_group_count=4 whose contracted dimensions Shardy splits over "x" on both sides,
        where XLA's SPMD partitioner gives wrong values (JAX's sharded result here is off by a
        factor of 2); fluxion keeps the kernel's input features unsplit
        (convolution._unsplit_rhs_input_features). The truth: the same gradient unsharded."""
        def prog(f, a):
            return f.grad(lambda k, x: f.lax.conv_general_dilated(
                x, k, (1, 1), "SAME", feature_group_count=4).sum(), (0, 1))(a["ker"][:4, :1],
                                                                            a["img"])
        truth = jax.grad(lambda k, x: jax.lax.conv_general_dilated(
            x, k, (1, 1), "SAME", feature_group_count=4).sum(), (0, 1))(HOST["ker"][:4, :1],
                                                                        HOST["img"])
        theirs = run(jax, prog, True)
        for jit in (False, True):
            ours = run(fluxion, prog, jit)
            assert specs(ours) == specs(theirs)
            for o, w in zip(leaves(ours), leaves(truth)):
                np.testing.assert_allclose(o, w, rtol=1e-4, atol=1e-4)

    def _cnn_loss(f, params, x, y):
        k1, k2, w = params
        dn = ("NHWC", "HWIO", "NHWC")
        h = f.nn.relu(f.lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=dn))
        h = f.lax.conv_general_dilated(h, k2, (1, 1), "SAME", dimension_numbers=dn,
                                       feature_group_count=4)
        h = f.lax.reduce_window(h, -np.inf, f.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        logp = f.nn.log_softmax(h.reshape(h.shape[0], -1) @ w)
        return -f.numpy.take_along_axis(logp, y[:, None], axis=1).mean()

    def test_data_parallel_cnn_step():
        """A conv / depthwise conv / max-pool / dense classifier on a batch sharded over "x":
        the gradients' shardings are JAX's, their values the unsharded truth's. (Under jit;
        test_depthwise_conv_kernel_gradient_values runs the depthwise gradient eagerly.)"""
        rng = np.random.default_rng(2)
        host = [rng.standard_normal(s).astype(np.float32) * 0.3
                for s in ((3, 3, 3, 4), (3, 3, 1, 4), (64, 5))]
        x = rng.standard_normal((8, 8, 8, 3)).astype(np.float32)
        y = rng.integers(0, 5, 8).astype(np.int32)
        truth = jax.value_and_grad(lambda p: _cnn_loss(jax, p, x, y))(tuple(host))
        results = {}
        for mod in (fluxion, jax):
            mesh, _ = setup(mod)
            S, P = mod.sharding.NamedSharding, mod.sharding.PartitionSpec
            xs, ys = (mod.device_put(v, S(mesh, P("x"))) for v in (x, y))
            params = tuple(mod.device_put(p, S(mesh, P())) for p in host)
            step = mod.value_and_grad(lambda p, a, b: _cnn_loss(mod, p, a, b))
            with mod.set_mesh(mesh):
                results[mod.__name__] = mod.jit(step)(params, xs, ys)
        (loss, grads), (_, jax_grads) = results["fluxion"], results["jax"]
        np.testing.assert_allclose(float(loss), float(truth[0]), rtol=1e-5)
        assert specs(grads) == specs(jax_grads)
        for g, t in zip(grads, truth[1]):
            np.testing.assert_allclose(np.asarray(g), np.asarray(t), rtol=1e-4, atol=1e-5)

    def test_eager_gradients_of_linear_functions_and_integer_inputs():
        """A gradient computed without touching its primal (a linear function's) still takes
        the primal's sharding, as in JAX; an integer input's float0 gradient is left alone."""
        mesh, _ = setup(fluxion)
        S, P = fluxion.sharding.NamedSharding, fluxion.sharding.PartitionSpec
        xf = fluxion.device_put(np.ones(8, np.float32), S(mesh, P("x")))
        xi = fluxion.device_put(np.arange(8, dtype=np.int32), S(mesh, P("x")))
        with fluxion.set_mesh(mesh):
            g = fluxion.grad(lambda a: 3.0 * a.sum())(xf)
            gf, gi = fluxion.grad(lambda a, b: (a * b).sum(), (0, 1), allow_int=True)(xf, xi)
        assert tuple(g.sharding.spec) == ("x",)
        np.testing.assert_array_equal(np.asarray(g), np.full(8, 3.0, np.float32))
        assert tuple(gf.sharding.spec) == ("x",) and gi.dtype == jax.dtypes.float0
        np.testing.assert_array_equal(np.asarray(gf), np.arange(8, dtype=np.float32))
