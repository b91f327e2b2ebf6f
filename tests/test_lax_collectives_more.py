"""lax.pswapaxes, lax.psend / lax.precv and lax.ragged_all_to_all (issue 10).

Truths: NumPy computations of the documented semantics, JAX where it runs on CPU (pswapaxes
everywhere, psend/precv errors; JAX's ragged_all_to_all only lowers for GPU, so its CPU
results come from NumPy), finite differences for gradients. The tests named `test_multi_*`
need 4 CPU devices: `test_on_4_cpu_devices` runs them in a fresh process.
"""
import os
import pathlib
import re
import subprocess
import sys

import jax
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import lax
from fluxion.test_util import check_grads

N_DEV = 4
MULTI = fluxion.device_count() >= N_DEV
needs_devices = pytest.mark.skipif(not MULTI, reason="run by test_on_4_cpu_devices")


@pytest.mark.skipif(MULTI, reason="this process already has the devices")
def test_on_4_cpu_devices():
    root = pathlib.Path(__file__).resolve().parent.parent
    env = dict(os.environ, FLUXION_NUM_CPU_DEVICES=str(N_DEV), PYTHONPATH=str(root),
               XLA_FLAGS=f"--xla_force_host_platform_device_count={N_DEV}")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "--rootdir", str(root), "-k", "test_multi_",
                           __file__], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]


# ---------------------------------------------------------------------------------------------
# NumPy truth for ragged_all_to_all, and random consistent arguments

def ragged_reference(operand, output, input_offsets, send_sizes, output_offsets):
    """Each row of the arguments is one example's; chunk c of sender j goes to example
    c // (K / n), at rows output_offsets[j, c]:... of its result."""
    n, K = input_offsets.shape
    per_dest = K // n
    result = np.array(output, copy=True)
    for j in range(n):
        for c in range(K):
            i, lo, size, at = c // per_dest, input_offsets[j, c], send_sizes[j, c], output_offsets[j, c]
            result[i, at:at + size] = operand[j, lo:lo + size]
    return result


def ragged_args(n, per_dest, rng, tail=(), dtype=np.float32, gaps=True):
    """Operand, output and index arrays (one row per example) with consistent sizes: chunks
    packed in the sender's operand and receiver's output, with random gaps."""
    K = n * per_dest
    sizes = rng.integers(0, 4, size=(n, n, per_dest))  # [sender, receiver, k]
    io = np.zeros((n, K), np.int32)
    oo = np.zeros((n, K), np.int32)
    rs = np.zeros((n, K), np.int32)
    for j in range(n):
        pos = 0
        for c in range(K):
            pos += int(rng.integers(0, 2)) if gaps else 0
            io[j, c] = pos
            pos += sizes[j, c // per_dest, c % per_dest]
    for i in range(n):
        pos = 0
        for j in range(n):
            for k in range(per_dest):
                pos += int(rng.integers(0, 2)) if gaps else 0
                oo[j, i * per_dest + k] = pos
                rs[i, j * per_dest + k] = sizes[j, i, k]
                pos += sizes[j, i, k]
    ss = sizes.reshape(n, K).astype(np.int32)
    N = int(io[:, -1].max() + ss[:, -1].max() + 1)
    M = int(max(oo.max() + ss.max(), 1) + 2)
    operand = rng.standard_normal((n, N) + tail).astype(dtype)
    output = rng.standard_normal((n, M) + tail).astype(dtype)
    return operand, output, io, ss, oo, rs


def ragged_grad_reference(operand, w, input_offsets, send_sizes, output_offsets):
    """Gradients of sum(w * result) for operand and output: the loss is linear, so each
    sent row's gradient is w where it lands, and rows of output that are overwritten get 0."""
    g_op, g_out = np.zeros_like(operand), np.array(w, copy=True)
    n, K = input_offsets.shape
    for j in range(n):
        for c in range(K):
            i, lo, size, at = c // (K // n), input_offsets[j, c], send_sizes[j, c], output_offsets[j, c]
            g_op[j, lo:lo + size] += w[i, at:at + size]
            g_out[i, at:at + size] = 0
    return g_op, g_out


def _ragged(*args):
    return lax.ragged_all_to_all(*args, axis_name="i")


def test_ragged_docstring_example_under_vmap():
    # The example of JAX's docstring, axis of size 2.
    operand = np.array([[1, 2, 2], [3, 4, 0]], np.float32)
    output = np.zeros((2, 4), np.float32)
    io = np.array([[0, 1], [0, 1]], np.int32)
    ss = np.array([[1, 2], [1, 1]], np.int32)
    oo = np.array([[0, 0], [1, 2]], np.int32)
    rs = np.array([[1, 1], [2, 1]], np.int32)
    out = fluxion.jit(fluxion.vmap(_ragged, axis_name="i"))(operand, output, io, ss, oo, rs)
    np.testing.assert_array_equal(np.asarray(out), [[1, 3, 0, 0], [2, 2, 4, 0]])


@pytest.mark.parametrize("n,per_dest,tail,seed", [
    (2, 1, (), 0), (3, 1, (2,), 1), (4, 2, (), 2), (3, 3, (2, 1), 3)])
def test_ragged_vmap_against_numpy(n, per_dest, tail, seed):
    args = ragged_args(n, per_dest, np.random.default_rng(seed), tail)
    want = ragged_reference(*args[:5])
    f = fluxion.jit(fluxion.vmap(_ragged, axis_name="i"))
    np.testing.assert_array_equal(np.asarray(f(*args)), want)


def test_ragged_vmap_with_unbatched_arguments():
    # The same offsets everywhere (unbatched), only the data batched.
    n = 3
    operand = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    output = -np.ones((n, 5), np.float32)
    io = np.array([0, 1, 3], np.int32)
    ss = np.array([1, 2, 1], np.int32)
    oo = np.array([0, 1, 3], np.int32)
    f = fluxion.jit(fluxion.vmap(_ragged, in_axes=(0, 0, None, None, None, None), axis_name="i"))
    want = ragged_reference(operand, output, np.tile(io, (n, 1)), np.tile(ss, (n, 1)),
                            np.tile(oo, (n, 1)))
    np.testing.assert_array_equal(np.asarray(f(operand, output, io, ss, oo, ss)), want)


def test_ragged_inner_vmap_over_another_axis():
    # An unnamed vmap inside the named one folds its batch into the leading axis (JAX's rule).
    rng = np.random.default_rng(5)
    n, b = 3, 2
    per_b = [ragged_args(n, 1, rng, gaps=False) for _ in range(b)]
    # make every batch member the same shapes: pad operand/output to the largest
    N = max(a[0].shape[1] for a in per_b)
    M = max(a[1].shape[1] for a in per_b)
    per_b = [(np.pad(a[0], ((0, 0), (0, N - a[0].shape[1]))),
              np.pad(a[1], ((0, 0), (0, M - a[1].shape[1]))), *a[2:]) for a in per_b]
    stacked = [np.stack([a[k] for a in per_b], axis=1) for k in range(6)]  # (n, b, ...)
    f = fluxion.jit(fluxion.vmap(fluxion.vmap(_ragged), axis_name="i"))
    got = np.asarray(f(*stacked))
    for m in range(b):
        np.testing.assert_array_equal(got[:, m], ragged_reference(*per_b[m][:5]))


def test_ragged_gradients_under_vmap():
    operand, output, *idx = ragged_args(3, 2, np.random.default_rng(7), (2,))
    w = np.random.default_rng(8).standard_normal(output.shape).astype(np.float32)

    def loss(op, out):
        return jnp.sum(fluxion.vmap(_ragged, axis_name="i")(op, out, *idx) * w)

    g_op, g_out = fluxion.jit(fluxion.grad(loss, argnums=(0, 1)))(operand, output)
    want_op, want_out = ragged_grad_reference(operand, w, *idx[:3])
    np.testing.assert_allclose(np.asarray(g_op), want_op, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g_out), want_out, rtol=1e-6)
    check_grads(fluxion.jit(lambda a, b: fluxion.vmap(_ragged, axis_name="i")(a, b, *idx)),
                (operand, output),
                order=1, modes=("fwd", "rev"))


def test_ragged_grad_inside_vmap_matches_grad_outside():
    operand, output, *idx = ragged_args(3, 1, np.random.default_rng(9))
    w = np.random.default_rng(10).standard_normal(output.shape).astype(np.float32)

    def local(op, out, io, ss, oo, rs, w):
        return jnp.sum(_ragged(op, out, io, ss, oo, rs) * w)

    inside = fluxion.jit(fluxion.vmap(fluxion.grad(local, argnums=(0, 1)), axis_name="i"))(
        operand, output, *idx, w)
    outside = fluxion.jit(fluxion.grad(lambda a, b: jnp.sum(
        fluxion.vmap(_ragged, axis_name="i")(a, b, *idx) * w), argnums=(0, 1)))(operand, output)
    for a, b in zip(inside, outside):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_ragged_jvp_is_the_map_of_the_tangents():
    operand, output, *idx = ragged_args(2, 2, np.random.default_rng(11))
    t_op, t_out = operand * 0 + 1.5, output * 0 - 2.0
    f = lambda a, b: fluxion.vmap(_ragged, axis_name="i")(a, b, *idx)
    _, tangent = fluxion.jit(lambda p, t: fluxion.jvp(f, p, t))((operand, output), (t_op, t_out))
    np.testing.assert_array_equal(np.asarray(tangent), ragged_reference(t_op, t_out, *idx[:3]))


def _abstract_errors(module):
    ok = [np.zeros(3, np.float32), np.zeros(4, np.float32)] + [np.zeros(2, np.int32)] * 4
    cases = {
        "float_offsets": ok[:2] + [np.zeros(2, np.float32)] + ok[3:],
        "rank2_sizes": ok[:3] + [np.zeros((2, 1), np.int32)] + ok[4:],
        "empty_recv": ok[:5] + [np.zeros(0, np.int32)],
    }
    out = {}
    for name, args in cases.items():
        with pytest.raises(ValueError) as info:
            run = lambda *a: module.lax.ragged_all_to_all(*a, axis_name="i")
            if module is jax:
                jax.make_jaxpr(run, axis_env=[("i", 2)])(*args)
            else:
                fluxion.vmap(run, axis_name="i")(*[np.stack([a, a]) for a in args])
        out[name] = str(info.value)
    return out


def test_ragged_abstract_eval_errors_match_jax():
    assert _abstract_errors(fluxion) == _abstract_errors(jax)


def test_ragged_unbound_axis_and_eager_use():
    args = [np.zeros(3, np.float32), np.zeros(4, np.float32)] + [np.zeros(2, np.int32)] * 4
    for module in (jax, fluxion):
        with pytest.raises(RuntimeError, match="mapped context"):
            module.lax.ragged_all_to_all(*args, axis_name="nope")
        with pytest.raises(NameError):
            module.jit(lambda *a: module.lax.ragged_all_to_all(*a, axis_name="nope"))(*args)
    with pytest.raises(ValueError, match="same dtype"):
        fluxion.vmap(_ragged, axis_name="i")(*[np.stack([a, a]) for a in
                                               [args[0].astype(np.int32)] + args[1:]])
    with pytest.raises(ValueError, match="same length"):
        fluxion.vmap(_ragged, axis_name="i")(*[np.stack([a, a]) for a in
                                               args[:5] + [np.zeros(4, np.int32)]])
    with pytest.raises(ValueError, match="not divisible"):
        fluxion.vmap(_ragged, axis_name="i")(*[np.stack([a] * 3) for a in args])


# ---------------------------------------------------------------------------------------------
# pswapaxes

@pytest.mark.parametrize("shape,axis", [((3, 3), 0), ((3, 2, 3), 1), ((3, 2, 3), -1),
                                        ((4, 4, 5), 0)])
def test_pswapaxes_vmap_against_numpy_and_jax(shape, axis):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ours = fluxion.vmap(lambda v: lax.pswapaxes(v, "i", axis), axis_name="i")(x)
    positive = axis % (x.ndim - 1)  # JAX 0.10.2's pswapaxes fails on a negative axis
    theirs = jax.vmap(lambda v: jax.lax.pswapaxes(v, "i", positive), axis_name="i")(x)
    want = np.swapaxes(x, 0, positive + 1)
    np.testing.assert_array_equal(np.asarray(ours), want)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_pswapaxes_pytree_grad_and_errors():
    x = np.random.default_rng(1).standard_normal((3, 3, 2)).astype(np.float32)
    w = np.random.default_rng(2).standard_normal((3, 3, 2)).astype(np.float32)
    tree = fluxion.vmap(lambda t: lax.pswapaxes(t, "i", 0), axis_name="i")({"a": x, "b": x[..., 0]})
    np.testing.assert_array_equal(np.asarray(tree["a"]), np.swapaxes(x, 0, 1))
    np.testing.assert_array_equal(np.asarray(tree["b"]), x[..., 0].T)

    def loss(m, v):
        return m.numpy.sum(m.vmap(lambda u: m.lax.pswapaxes(u, "i", 0), axis_name="i")(v) * w)

    np.testing.assert_allclose(np.asarray(fluxion.grad(lambda v: loss(fluxion, v))(x)),
                               np.asarray(jax.grad(lambda v: loss(jax, v))(x)), rtol=1e-6)
    check_grads(lambda v: fluxion.vmap(lambda u: lax.pswapaxes(u, "i", 1), axis_name="i")(v),
                (np.random.default_rng(3).standard_normal((2, 3, 2)).astype(np.float32),),
                order=1, eps=0.5)  # linear: exact for any step, which keeps f32 rounding out
    for module in (fluxion, jax):
        with pytest.raises(ValueError):  # the swapped axis must have the mapped axis's size
            module.vmap(lambda v: module.lax.pswapaxes(v, "i", 0), axis_name="i")(np.zeros((2, 3)))
        with pytest.raises(IndexError):
            module.vmap(lambda v: module.lax.pswapaxes(v, "i", 3), axis_name="i")(np.zeros((2, 2)))


# ---------------------------------------------------------------------------------------------
# psend / precv

PERM = [(0, 1), (1, 2), (2, 0)]


def test_psend_under_vmap_is_batched_like_jax():
    # JAX batches psend with ppermute's rule: the permuted value comes back.
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    ours = fluxion.vmap(lambda v: lax.psend(v, "i", PERM), axis_name="i")(x)
    theirs = jax.vmap(lambda v: jax.lax.psend(v, "i", PERM), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    np.testing.assert_array_equal(np.asarray(ours), x[[2, 0, 1]])
    for module in (fluxion, jax):  # ... and asserts the permutation covers the axis
        with pytest.raises(AssertionError):
            module.vmap(lambda v: module.lax.psend(v, "i", [(0, 1)]), axis_name="i")(x)


def test_precv_and_eager_errors_match_jax():
    x = np.zeros((3, 2), np.float32)
    for module in (fluxion, jax):
        spec = module.ShapeDtypeStruct((2,), np.float32)
        with pytest.raises(TypeError):  # no batching rule for precv
            module.vmap(lambda v: module.lax.precv(module.lax.create_token(), spec, "i", PERM),
                        axis_name="i")(x)
        with pytest.raises(NameError):
            module.lax.psend(x, "i", PERM)
        with pytest.raises(NotImplementedError):
            module.lax.precv(module.lax.create_token(), spec, "i", PERM)


# ---------------------------------------------------------------------------------------------
# On 4 CPU devices: pmap and shard_map

def _jax_mesh():
    # Auto axes: JAX then reshards unsharded inputs itself, as fluxion's shard_map does.
    return jax.make_mesh((N_DEV,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))


@needs_devices
def test_multi_pswapaxes_pmap_and_shard_map_against_jax():
    from fluxion.sharding import PartitionSpec as P
    x = np.random.default_rng(0).standard_normal((N_DEV, N_DEV, 3)).astype(np.float32)
    ours = fluxion.pmap(lambda v: lax.pswapaxes(v, "i", 0), "i")(x)
    theirs = jax.pmap(lambda v: jax.lax.pswapaxes(v, "i", 0), "i")(x)
    np.testing.assert_array_equal(np.asarray(ours), np.swapaxes(x, 0, 1))
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    # shard_map: each block (1, N_DEV, 3) swaps its axis 1 with the mesh axis
    body = lambda m: (lambda b: m.lax.pswapaxes(b, "i", 1))
    ours = fluxion.jit(fluxion.shard_map(body(fluxion), mesh=fluxion.make_mesh((N_DEV,), ("i",)),
                                         in_specs=P("i"), out_specs=P("i")))(x)
    theirs = jax.jit(jax.shard_map(body(jax), mesh=_jax_mesh(),
                                   in_specs=jax.P("i"), out_specs=jax.P("i")))(x)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    w = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    smap = lambda m, mesh, spec: m.shard_map(body(m), mesh=mesh, in_specs=spec, out_specs=spec)
    ours = fluxion.jit(fluxion.grad(lambda v: jnp.sum(smap(
        fluxion, fluxion.make_mesh((N_DEV,), ("i",)), P("i"))(v) * w)))(x)
    theirs = jax.jit(jax.grad(lambda v: jax.numpy.sum(smap(jax, _jax_mesh(), jax.P("i"))(v) * w)))(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)
    # grad inside pmap = grad inside the named vmap = JAX's
    w = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    local = lambda m: (lambda v, u: m.numpy.sum(m.lax.pswapaxes(v, "i", 0) * u))
    g = fluxion.pmap(fluxion.grad(local(fluxion)), "i")(x, w)
    np.testing.assert_allclose(np.asarray(g), np.asarray(
        jax.pmap(jax.grad(local(jax)), "i")(x, w)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g), np.asarray(
        fluxion.jit(fluxion.vmap(fluxion.grad(local(fluxion)), axis_name="i"))(x, w)), rtol=1e-6)


@needs_devices
@pytest.mark.parametrize("per_dest,tail,seed", [(1, (), 0), (3, (2,), 1)])
def test_multi_ragged_pmap_against_numpy_and_vmap(per_dest, tail, seed):
    args = ragged_args(N_DEV, per_dest, np.random.default_rng(seed), tail)
    want = ragged_reference(*args[:5])
    np.testing.assert_array_equal(np.asarray(fluxion.pmap(_ragged, "i")(*args)), want)
    np.testing.assert_array_equal(
        np.asarray(fluxion.jit(fluxion.vmap(_ragged, axis_name="i"))(*args)), want)


@needs_devices
def test_multi_ragged_shard_map_over_one_of_two_mesh_axes():
    from fluxion.sharding import PartitionSpec as P
    rng = np.random.default_rng(3)
    mesh = fluxion.make_mesh((2, 2), ("x", "i"))
    # Two independent exchanges over "i" (one per index of "x"), each against NumPy.
    per_x = [ragged_args(2, 2, rng, (2,), gaps=False) for _ in range(2)]
    N = max(a[0].shape[1] for a in per_x)
    M = max(a[1].shape[1] for a in per_x)
    per_x = [(np.pad(a[0], ((0, 0), (0, N - a[0].shape[1]), (0, 0))),
              np.pad(a[1], ((0, 0), (0, M - a[1].shape[1]), (0, 0))), *a[2:]) for a in per_x]
    stacked = [np.stack([a[k] for a in per_x]) for k in range(6)]  # (x, i, ...)

    def block(*bs):  # blocks (1, 1, ...)
        return _ragged(*[b[0, 0] for b in bs])[None, None]

    f = fluxion.jit(fluxion.shard_map(block, mesh=mesh, in_specs=P("x", "i"),
                                      out_specs=P("x", "i")))
    got = np.asarray(f(*stacked))
    for m in range(2):
        np.testing.assert_array_equal(got[m], ragged_reference(*per_x[m][:5]))
    # grad through shard_map (the transpose sends cotangents back over "i")
    w = rng.standard_normal(stacked[1].shape).astype(np.float32)
    g_op, g_out = fluxion.jit(fluxion.grad(lambda a, b: jnp.sum(f(a, b, *stacked[2:]) * w),
                                           argnums=(0, 1)))(*stacked[:2])
    for m in range(2):
        want_op, want_out = ragged_grad_reference(per_x[m][0], w[m], *per_x[m][2:5])
        np.testing.assert_allclose(np.asarray(g_op)[m], want_op, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(g_out)[m], want_out, rtol=1e-6)


def test_make_jaxpr_axis_env_binds_axis_names_as_jax():
    def f(x):
        return lax.psum(x, "i") * lax.axis_index("i") + lax.axis_size("j")

    x = np.ones(3, np.float32)
    ours = fluxion.make_jaxpr(f, axis_env=[("i", 4), ("j", 2)])(x)
    theirs = jax.make_jaxpr(lambda x: jax.lax.psum(x, "i") * jax.lax.axis_index("i")
                            + jax.lax.axis_size("j"), axis_env=[("i", 4), ("j", 2)])(x)
    assert [e.primitive.name for e in ours.jaxpr.eqns][:2] == ["psum", "axis_index"]
    assert ours.out_avals[0].shape == theirs.out_avals[0].shape == (3,)
    assert "2.0:f32[]" in str(ours)  # axis_size("j") is a constant
    with pytest.raises(NameError, match="unbound axis name"):
        fluxion.make_jaxpr(f, axis_env=[("i", 4)])(x)


@needs_devices
def test_multi_ragged_grad_under_pmap_matches_vmap():
    operand, output, *idx = ragged_args(N_DEV, 2, np.random.default_rng(4))
    w = np.random.default_rng(5).standard_normal(output.shape).astype(np.float32)

    def local(op, out, io, ss, oo, rs, w):
        return jnp.sum(_ragged(op, out, io, ss, oo, rs) * w)

    g = fluxion.grad(local, argnums=(0, 1))
    on_devices = fluxion.pmap(g, "i")(operand, output, *idx, w)
    vmapped = fluxion.jit(fluxion.vmap(g, axis_name="i"))(operand, output, *idx, w)
    for a, b in zip(on_devices, vmapped):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


@needs_devices
def test_multi_ragged_custom_call_matches_jax_lowering():
    # Off CPU, fluxion emits JAX's custom call; compare its attributes with JAX's module.
    from fluxion._src.compiler import lowering
    from fluxion._src.lax import parallel_lowering
    from fluxion._src.batching import bind_axes
    args = [np.zeros(3, np.float32), np.zeros(4, np.float32)] + [np.zeros(2, np.int32)] * 4
    axes = [("i", N_DEV)]
    closed = fluxion.make_jaxpr(_ragged, axis_env=axes)(*args)
    with parallel_lowering.replica_axes(axes, partitions=True), bind_axes(axes):
        ours = lowering.lower_jaxpr_to_module(closed.jaxpr, "cuda", "main")
    mesh = _jax_mesh()
    theirs = jax.jit(jax.shard_map(lambda *a: jax.lax.ragged_all_to_all(*a, axis_name="i"),
                                   mesh=mesh, in_specs=jax.P("i"), out_specs=jax.P("i"))
                     ).lower(*[np.concatenate([a] * N_DEV) for a in args]).as_text()

    def attrs(text):
        line = next(l for l in text.splitlines() if "ragged_all_to_all" in l and "custom_call" in l)
        config = re.search(r"backend_config = \{([^}]*)\}", line).group(1)
        return (sorted(p.strip() for p in re.split(r",\s*(?=\w+ =)", config)),
                re.search(r"api_version = (\d+)", line).group(1))

    assert attrs(ours) == attrs(theirs)


@needs_devices
def test_multi_psend_precv_raise_on_cpu_like_jax():
    x = np.zeros((N_DEV, 2), np.float32)
    perm = [(i, (i + 1) % N_DEV) for i in range(N_DEV)]
    for module in (fluxion, jax):
        spec = module.ShapeDtypeStruct((2,), np.float32)
        with pytest.raises(NotImplementedError, match="only implemented on GPU"):
            # the unused token still sends: it is not dropped as dead code
            module.pmap(lambda v: (module.lax.psend(v, "i", perm), v)[1], "i")(x)
        with pytest.raises(NotImplementedError, match="only implemented on GPU"):
            module.pmap(lambda v: module.lax.precv(module.lax.create_token(), spec, "i", perm),
                        "i")(x)
