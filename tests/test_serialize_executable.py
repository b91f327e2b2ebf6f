"""fluxion.experimental.serialize_executable: Compiled -> bytes -> Compiled, here and in a
fresh process."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion.experimental import serialize_executable as se

RNG = np.random.RandomState(0)
X = RNG.randn(3, 4).astype(np.float32)
Y = RNG.randn(5, 4).astype(np.float32)
BIG = RNG.randn(64, 64).astype(np.float32)  # large enough to be a constant argument


def fn(x, y, *, scale):
    return {"a": jnp.tanh(x) @ y.T * scale, "b": (x.sum(), jnp.linalg.cholesky(BIG @ BIG.T))}


def _want():
    return {"a": np.tanh(X) @ Y.T * 2.0,
            "b": (X.sum(), np.linalg.cholesky(BIG.astype(np.float64) @ BIG.T))}


def _compiled():
    return fluxion.jit(fn).lower(X, Y, scale=np.float32(2.0)).compile()


def _check(out):
    want = _want()
    np.testing.assert_allclose(np.asarray(out["a"]), want["a"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["b"][0]), want["b"][0], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(out["b"][1]), want["b"][1], rtol=1e-3, atol=1e-3)


@pytest.mark.cpu_only(reason="the executable is deserialized onto the CPU client")
def test_round_trip_in_process():
    compiled = _compiled()
    assert compiled._compiled.const_bufs  # the program has a constant argument
    blob, in_tree, out_tree = se.serialize(compiled)
    assert isinstance(blob, bytes)
    assert in_tree == compiled._traced.in_tree and out_tree == compiled._traced.out_tree
    loaded = se.deserialize_and_load(blob, in_tree, out_tree)
    out = loaded(X, Y, scale=np.float32(2.0))
    _check(out)
    ref = compiled(X, Y, scale=np.float32(2.0))
    np.testing.assert_array_equal(np.asarray(out["a"]), np.asarray(ref["a"]))
    explicit = se.deserialize_and_load(blob, in_tree, out_tree, backend="cpu",
                                       execution_devices=fluxion.devices()[:1])
    _check(explicit(X, Y, scale=np.float32(2.0)))
    # A loaded executable serializes again.
    again = se.deserialize_and_load(se.serialize(loaded)[0], in_tree, out_tree)
    _check(again(X, Y, scale=np.float32(2.0)))


def test_loaded_checks_its_signature():
    blob, in_tree, out_tree = se.serialize(_compiled())
    loaded = se.deserialize_and_load(blob, in_tree, out_tree)
    with pytest.raises(TypeError, match="types for which this computation was compiled"):
        loaded(X[:2], Y, scale=np.float32(2.0))
    with pytest.raises(TypeError, match="does not match the input pytree"):
        loaded(X, Y)


def test_round_trip_in_a_fresh_process(tmp_path):
    blob, in_tree, out_tree = se.serialize(_compiled())
    path = tmp_path / "exe.bin"
    path.write_bytes(pickle.dumps((blob, in_tree, out_tree)))
    np.savez(tmp_path / "args.npz", x=X, y=Y)
    script = f"""
import pickle, numpy as np
from fluxion.experimental import serialize_executable as se
blob, in_tree, out_tree = pickle.loads(open({str(path)!r}, "rb").read())
args = np.load({str(tmp_path / 'args.npz')!r})
out = se.deserialize_and_load(blob, in_tree, out_tree)(args["x"], args["y"], scale=np.float32(2.0))
np.savez({str(tmp_path / 'out.npz')!r}, a=np.asarray(out["a"]), s=np.asarray(out["b"][0]),
         l=np.asarray(out["b"][1]))
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-c", script], check=True, env=env, cwd=root, timeout=120)
    got = np.load(tmp_path / "out.npz")
    _check({"a": got["a"], "b": (got["s"], got["l"])})


def test_donation_survives():
    f = fluxion.jit(lambda x: x * 2, donate_argnums=0)
    x = jnp.asarray(X)
    blob, in_tree, out_tree = se.serialize(f.lower(x).compile())
    loaded = se.deserialize_and_load(blob, in_tree, out_tree)
    out = loaded(x)
    np.testing.assert_allclose(np.asarray(out), X * 2)
    assert x.is_deleted()


def test_unsupported_and_corrupt():
    def with_callback(x):
        return fluxion.pure_callback(np.sin, fluxion.ShapeDtypeStruct(x.shape, x.dtype), x)
    with pytest.raises(ValueError, match="does not support serialization"):
        se.serialize(fluxion.jit(with_callback).lower(X).compile())
    with pytest.raises(TypeError, match="Compiled"):
        se.serialize(fluxion.jit(fn))
    blob, in_tree, out_tree = se.serialize(fluxion.jit(jnp.sin).lower(X).compile())
    with pytest.raises(ValueError, match="corrupt"):
        se.deserialize_and_load(blob[:-1] + bytes([blob[-1] ^ 1]), in_tree, out_tree)
    with pytest.raises(ValueError, match="not an executable"):
        se.deserialize_and_load(b"junk" * 10, in_tree, out_tree)
