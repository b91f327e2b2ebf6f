"""fluxion.export: Exported attributes, serialization round trips across processes, calls
under jit / vmap / grad, multi-platform modules, errors."""
import hashlib
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import export
from fluxion._src.compiler import backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def f(x, y):
    return {"a": jnp.sin(x) @ y, "b": (x.sum(), y * 2)}


X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
Y = np.arange(8, dtype=np.float32).reshape(4, 2) / 4


def f_np(x, y):
    return {"a": np.sin(x) @ y, "b": (x.sum(), y * 2)}


def assert_tree_close(a, b, rtol=1e-5):
    la, ta = fluxion.tree_util.tree_flatten(a)
    lb, tb = fluxion.tree_util.tree_flatten(b)
    assert ta == tb
    for u, v in zip(la, lb):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=1e-6)


@pytest.fixture(scope="module")
def exp():
    return export.export(fluxion.jit(f))(X, fluxion.ShapeDtypeStruct((4, 2), np.float32))


@pytest.mark.cpu_only(reason="the artifact's platform is the default one")
def test_attributes(exp):
    assert exp.fun_name == "f"
    assert exp.platforms == ("cpu",)
    assert export.default_export_platform() == "cpu"
    assert exp.calling_convention_version == 9
    assert exp.in_tree == fluxion.tree_util.tree_structure(((X, Y), {}))
    assert exp.out_tree == fluxion.tree_util.tree_structure(f_np(X, Y))
    assert [a.str_short() for a in exp.in_avals] == ["f32[3,4]", "f32[4,2]"]
    assert [a.str_short() for a in exp.out_avals] == ["f32[3,2]", "f32[]", "f32[4,2]"]
    assert exp.in_shardings_hlo == (None, None) and exp.out_shardings_hlo == (None,) * 3
    text = exp.mlir_module()
    assert "func.func public @main" in text and "stablehlo.sine" in text
    assert exp.mlir_module_serialized[:4] == b"ML\xefR"  # MLIR bytecode (VHLO)


def test_call_matches_numpy(exp):
    assert_tree_close(exp.call(X, Y), f_np(X, Y))
    assert_tree_close(fluxion.jit(exp.call)(X, Y), f_np(X, Y))


def test_serialize_round_trip_and_format(exp):
    blob = exp.serialize()
    assert bytes(blob[:8]) == b"FLXEXPRT"
    assert struct.unpack_from("<II", blob, 8) == (2, 2)  # version 2, two sections
    assert bytes(blob[-32:]) == hashlib.sha256(bytes(blob[:-32])).digest()
    back = export.deserialize(blob)
    assert back.fun_name == exp.fun_name and back.in_tree == exp.in_tree
    assert back.out_tree == exp.out_tree and back.in_avals == exp.in_avals
    assert back.out_avals == exp.out_avals and back.platforms == exp.platforms
    assert_tree_close(back.call(X, Y), f_np(X, Y))
    assert not back.has_vjp()
    with pytest.raises(ValueError, match="vjp_order"):
        fluxion.grad(lambda x: back.call(x, Y)["a"].sum())(X)


def test_corrupt_containers_are_rejected(exp):
    blob = bytes(exp.serialize())
    with pytest.raises(ValueError, match="bad magic"):
        export.deserialize(b"XXXXXXXX" + blob[8:])
    with pytest.raises(ValueError, match="truncated"):
        export.deserialize(blob[: len(blob) // 2])
    with pytest.raises(ValueError, match="format version"):
        export.deserialize(blob[:8] + struct.pack("<I", 99) + blob[12:])
    with pytest.raises(ValueError, match="checksum"):
        export.deserialize(blob[:-40] + bytes([blob[-40] ^ 1]) + blob[-39:])


def test_version_1_containers_are_still_read(exp):
    blob = bytes(exp.serialize())
    v1 = blob[:8] + struct.pack("<I", 1) + blob[12:-32]  # version 1 had no checksum
    assert_tree_close(export.deserialize(v1).call(X, Y), f_np(X, Y))


def test_grad_and_vmap_of_a_deserialized_call(exp):
    back = export.deserialize(exp.serialize(vjp_order=1))
    assert back.has_vjp()

    def loss_exp(x, y):
        out = back.call(x, y)
        return out["a"].sum() + out["b"][0] * 3.0 + (out["b"][1] ** 2).sum()

    def loss(x, y):
        out = f(x, y)
        return out["a"].sum() + out["b"][0] * 3.0 + (out["b"][1] ** 2).sum()

    for argnums in (0, 1, (0, 1)):
        assert_tree_close(fluxion.grad(loss_exp, argnums)(X, Y), fluxion.grad(loss, argnums)(X, Y))
    assert_tree_close(fluxion.jit(fluxion.grad(loss_exp))(X, Y), fluxion.grad(loss)(X, Y))
    fluxion.test_util.check_grads(lambda x: loss_exp(x, Y), (X,), order=1, modes=["rev"])
    # vmap: a loop over the batch, compared with a Python loop
    xs = np.stack([X, 2 * X, -X])
    got = fluxion.vmap(lambda x: back.call(x, Y)["a"])(xs)
    np.testing.assert_allclose(got, np.stack([f_np(x, Y)["a"] for x in xs]), rtol=1e-5)
    got = fluxion.vmap(lambda y: back.call(X, y)["b"][1], in_axes=1, out_axes=1)(
        np.stack([Y, Y + 1], axis=1))
    np.testing.assert_allclose(got, np.stack([Y * 2, (Y + 1) * 2], axis=1))
    # second order needs vjp_order=2
    with pytest.raises(ValueError, match="vjp_order"):
        fluxion.grad(fluxion.grad(lambda x: back.call(x, Y)["b"][0] ** 2))(X[0, 0:1].sum() + X)
    back2 = export.deserialize(exp.serialize(vjp_order=2))
    h = fluxion.grad(lambda s: fluxion.grad(lambda x: (back2.call(x, Y)["a"] ** 2).sum())(X * s).sum())(1.5)
    h_ref = fluxion.grad(lambda s: fluxion.grad(lambda x: (f(x, Y)["a"] ** 2).sum())(X * s).sum())(1.5)
    np.testing.assert_allclose(h, h_ref, rtol=1e-4)


def test_wrong_arguments_raise(exp):
    with pytest.raises(ValueError, match="shape"):
        exp.call(X[:2], Y)
    with pytest.raises(ValueError, match="type"):
        exp.call(X.astype(np.int32), Y)
    with pytest.raises(ValueError, match="pytree structure"):
        exp.call((X, Y))
    with pytest.raises(ValueError, match="result of `jit`"):
        export.export(f)


def test_integer_inputs_and_constants():
    table = np.arange(10, dtype=np.float32) ** 2

    def g(i, x):
        return jnp.asarray(table)[i] * x, i + 1
    e = export.deserialize(export.export(fluxion.jit(g))(np.int32(3), np.float32(2.0)).serialize(1))
    out = e.call(np.int32(4), np.float32(0.5))
    assert float(out[0]) == 8.0 and int(out[1]) == 5 and out[1].dtype == np.int32
    assert float(fluxion.grad(lambda x: e.call(np.int32(4), x)[0])(np.float32(1.0))) == 16.0


def test_host_callbacks_cannot_be_exported():
    def g(x):
        fluxion.debug.print("x {}", x)
        return x
    with pytest.raises(ValueError, match="host callback"):
        export.export(fluxion.jit(g))(X)


# -- several platforms in one module

def test_multi_platform_module_picks_its_branch():
    from fluxion._src import core
    from fluxion._src.compiler import lowering
    p = core.Primitive("export_test_platform_dependent")
    p.def_abstract_eval(lambda x: x)
    lowering.register_lowering(p, lambda ctx, x: [ctx.add(x, ctx.constant(np.float32(1)))],
                               platform="cpu")
    lowering.register_lowering(p, lambda ctx, x: [ctx.add(x, ctx.constant(np.float32(2)))],
                               platform="cuda")
    g = fluxion.jit(lambda x: p.bind(x) * 10.0)
    x = np.ones(3, np.float32)
    e = export.export(g, platforms=("cuda", "cpu"))(x)
    assert e.platforms == ("cuda", "cpu")
    text = e.mlir_module()
    assert "stablehlo.case" in text and "%arg0: tensor<i32>" in text
    np.testing.assert_allclose(export.deserialize(e.serialize()).call(x), 20.0)  # cpu branch
    # the same module, compiled as is: the platform index picks the branch at run time
    exe = backend.compile_module(text, [core.ShapedArray((3,), np.float32)], name="multi")
    for index, want in ((0, 30.0), (1, 20.0)):
        bufs = [backend.device_put_numpy(np.asarray(index, np.int32),
                                         core.ShapedArray((), np.int32)),
                backend.device_put_numpy(x, core.ShapedArray((3,), np.float32))]
        (out,) = exe.execute(bufs)
        np.testing.assert_allclose(backend.to_numpy(out, np.float32), want)
    only_cuda = export.export(g, platforms=("cuda",))(x)
    with pytest.raises(ValueError, match="exported for platforms"):
        only_cuda.call(x)


# -- a fresh process

_LOADER = textwrap.dedent("""
    import sys, numpy as np
    import fluxion, fluxion.numpy as jnp
    from fluxion import export
    e = export.deserialize(open(sys.argv[1], "rb").read())
    x = np.load(sys.argv[2])
    out = e.call(x)
    g = fluxion.grad(lambda x: e.call(x).sum())(x)
    np.save(sys.argv[3], np.asarray(out)); np.save(sys.argv[4], np.asarray(g))
""")


def test_artifact_runs_in_a_fresh_process(tmp_path):
    def h(x):
        # LAPACK too: a fresh process has lowered no linear algebra that would register it.
        return jnp.tanh(x @ x.T) + jnp.cumsum(x, axis=0)[:, :3].sum(axis=1, keepdims=True) \
            + jnp.linalg.solve(x @ x.T + 3 * jnp.eye(3), x[:, :3])
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    e = export.export(fluxion.jit(h))(x)
    (tmp_path / "h.bin").write_bytes(bytes(e.serialize(vjp_order=1)))
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", _LOADER, str(tmp_path / "h.bin"),
                        str(tmp_path / "x.npy"), str(tmp_path / "o.npy"), str(tmp_path / "g.npy")],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), h(x), rtol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "g.npy"),
                               fluxion.grad(lambda x: h(x).sum())(x), rtol=1e-5)


def test_shardings_jax_as_jax_gives_them_for_a_one_device_artifact():
    """`Exported.in_shardings_jax(mesh)` / `out_shardings_jax(mesh)` (JAX's export guide uses
    them to lay arguments out): None for each unspecified sharding, as JAX returns."""
    import jax
    from jax import export as jax_export
    from fluxion import export
    results = []
    for lib, exp_mod in ((jax, jax_export), (fluxion, export)):
        exp = exp_mod.export(lib.jit(lambda x, y: (x * 2, y)))(
            lib.ShapeDtypeStruct((4,), np.float32), lib.ShapeDtypeStruct((), np.int32))
        mesh = lib.sharding.Mesh(np.array(lib.devices()[:1]), ("a",))
        results.append((exp.in_shardings_jax(mesh), exp.out_shardings_jax(mesh)))
    assert results[0] == results[1] == ((None, None), (None, None))
