"""vmap itself: axes specifications, errors, collectives, compositions and jaxpr quality.
Each result is compared with a Python loop over the batch."""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as jnp
from fluxion import lax


def loop(f, in_axes, *args, out_axis=0):
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = []
    for i in range(size):
        sliced = [a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)]
        outs.append(np.asarray(f(*sliced)))
    return np.stack(outs, axis=out_axis)


rng = np.random.default_rng(0)
X = rng.standard_normal((4, 3)).astype(np.float32)
Y = rng.standard_normal((3, 4)).astype(np.float32)


@pytest.mark.parametrize("in_axes, args", [
    ((0, None), (X, X[0])), ((0, 1), (X, Y)), ((1, 0), (Y, X)), ((-1, -2), (Y, X)), ((None, 0), (X[0], X)),
])
def test_in_axes_against_loop(in_axes, args):
    f = lambda a, b: jnp.sin(a) * b + a
    np.testing.assert_allclose(fluxion.vmap(f, in_axes=in_axes)(*args), loop(f, in_axes, *args),
                               rtol=1e-6)


def test_out_axes_and_pytrees():
    f = lambda d: {"s": d["a"] + d["b"], "p": d["a"] * 2.0}
    out = fluxion.vmap(f, in_axes=({"a": 0, "b": None},), out_axes={"s": 1, "p": 0})(
        {"a": X, "b": X[0]})
    np.testing.assert_allclose(out["s"], (X + X[0]).T, rtol=1e-6)
    np.testing.assert_allclose(out["p"], X * 2, rtol=1e-6)


def test_kwargs_are_mapped_over_axis_zero():
    out = fluxion.vmap(lambda a, *, b: a - b)(X, b=X)
    np.testing.assert_allclose(out, np.zeros_like(X))


def test_unmapped_output_and_axis_size():
    out = fluxion.vmap(lambda a: 1.0, axis_size=3, in_axes=None)(X)
    np.testing.assert_allclose(out, np.ones(3))
    out = fluxion.vmap(lambda a: jnp.sum(X), in_axes=0, out_axes=None)(X)
    np.testing.assert_allclose(out, X.sum(), rtol=1e-6)


def test_inconsistent_sizes_error_names_arguments():
    def f(x, y):
        return x + y
    with pytest.raises(ValueError, match=r"(?s)inconsistent sizes.*argument x.*argument y"):
        fluxion.vmap(f)(np.ones(4), np.ones(5))


def test_out_of_range_axis_and_missing_mapped_input():
    with pytest.raises(ValueError, match="axis 2"):
        fluxion.vmap(lambda a: a, in_axes=2)(X)
    with pytest.raises(ValueError, match="at least one non-None"):
        fluxion.vmap(lambda a: a, in_axes=None)(X)
    with pytest.raises(ValueError, match="out_axes is None"):
        fluxion.vmap(lambda a: a, out_axes=None)(X)


@pytest.mark.parametrize("lib", ["fluxion", "jax"])
def test_bad_out_axes_and_non_array_outputs_raise_like_jax(lib):
    mod = fluxion if lib == "fluxion" else pytest.importorskip("jax")
    for out_axes in (-4, 3):
        with pytest.raises(ValueError, match=f"axis {out_axes} is out of bounds for array of "
                                             "dimension 2"):
            mod.vmap(lambda a: a, out_axes=out_axes)(np.ones((3, 4)))
    with pytest.raises(TypeError, match="Output from batched function 'hello' with type "
                                        "<class 'str'> is not a valid JAX type"):
        mod.vmap(lambda a: "hello")(np.arange(5))
    out = mod.vmap(lambda a: (a, None, 1.0))(np.arange(3.0))
    assert out[1] is None and out[2].shape == (3,)


def test_elementwise_vmap_jaxpr_has_no_transposes_or_copies():
    f = lambda a, b: jnp.tanh(a * b + 1.0)
    jaxpr = fluxion.make_jaxpr(fluxion.vmap(f, in_axes=(1, 1), out_axes=1))(Y, Y)
    names = [e.primitive.name for e in jaxpr.eqns]
    assert names == ["mul", "add", "tanh"], names


def test_compositions():
    f = lambda w, x: jnp.sum(jnp.tanh(x @ w))
    w = rng.standard_normal((3, 2)).astype(np.float32)
    per_example = fluxion.vmap(fluxion.grad(f), in_axes=(None, 0))(w, X)
    expected = loop(lambda x: fluxion.grad(f)(w, x), (0,), X)
    np.testing.assert_allclose(per_example, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fluxion.jit(fluxion.vmap(jnp.sin))(X), np.sin(X), rtol=1e-6)
    np.testing.assert_allclose(fluxion.vmap(fluxion.jit(jnp.sin))(X), np.sin(X), rtol=1e-6)
    nested = fluxion.vmap(fluxion.vmap(lambda a, b: a * b, in_axes=(0, None)), in_axes=(None, 0))(X[0], X[:, 0])
    np.testing.assert_allclose(nested, np.outer(X[:, 0], X[0]), rtol=1e-6)
    g = fluxion.grad(lambda x: jnp.sum(fluxion.vmap(jnp.sin)(x) ** 2))(X)
    np.testing.assert_allclose(g, np.sin(2 * X), rtol=1e-5, atol=1e-6)


def test_collectives():
    xs = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(fluxion.vmap(lambda x: lax.psum(x, "i"), axis_name="i")(xs), np.full(4, 6.0))
    np.testing.assert_allclose(fluxion.vmap(lambda x: x / lax.psum(x, "i"), axis_name="i")(xs), xs / 6)
    np.testing.assert_allclose(fluxion.vmap(lambda x: lax.pmean(x, "i"), axis_name="i")(xs), np.full(4, 1.5))
    np.testing.assert_allclose(fluxion.vmap(lambda x: lax.pmax(x, "i"), axis_name="i")(xs), np.full(4, 3.0))
    np.testing.assert_allclose(fluxion.vmap(lambda x: lax.pmin(x, "i"), axis_name="i")(xs), np.zeros(4))
    np.testing.assert_array_equal(fluxion.vmap(lambda x: lax.axis_index("i"), axis_name="i")(xs), np.arange(4))
    assert fluxion.vmap(lambda x: lax.psum(1, "i"), axis_name="i")(xs).tolist() == [4] * 4
    gathered = fluxion.vmap(lambda x: lax.all_gather(x, "i"), axis_name="i")(xs)
    np.testing.assert_allclose(gathered, np.tile(xs, (4, 1)))
    shifted = fluxion.vmap(lambda x: lax.ppermute(x, "i", [(j, (j + 1) % 4) for j in range(4)]),
                           axis_name="i")(xs)
    np.testing.assert_allclose(shifted, np.roll(xs, 1))
    m = np.arange(16, dtype=np.float32).reshape(4, 4)
    a2a = fluxion.vmap(lambda x: lax.all_to_all(x, "i", 0, 0), axis_name="i")(m)
    np.testing.assert_allclose(a2a, m.T)
    scattered = fluxion.vmap(lambda x: lax.psum_scatter(x, "i"), axis_name="i")(m)
    np.testing.assert_allclose(scattered, m.sum(0))


def test_nested_named_axes_and_jit_inside():
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = fluxion.vmap(fluxion.vmap(lambda x: lax.psum(x, "inner"), axis_name="inner"), axis_name="outer")
    np.testing.assert_allclose(f(m), np.repeat(m.sum(1, keepdims=True), 3, axis=1))
    g = fluxion.vmap(fluxion.vmap(lambda x: lax.psum(x, "outer"), axis_name="inner"), axis_name="outer")
    np.testing.assert_allclose(g(m), np.repeat(m.sum(0, keepdims=True), 2, axis=0))
    h = fluxion.vmap(fluxion.jit(lambda x: x - lax.pmean(x, "i")), axis_name="i")
    np.testing.assert_allclose(h(m[0]), m[0] - m[0].mean(), rtol=1e-6)


def test_unbound_axis_name_is_a_name_error():
    with pytest.raises(NameError, match="unbound axis name"):
        fluxion.vmap(lambda x: lax.psum(x, "j"), axis_name="i")(np.ones(3))


def test_vectorize_with_signature():
    def inner(a, b):
        return jnp.sum(a * b)
    vec = jnp.vectorize(inner, signature="(n),(n)->()")
    a = rng.standard_normal((2, 5, 3)).astype(np.float32)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(vec(a, b), np.einsum("ijk,jk->ij", a, b), rtol=1e-5)
    scalar = jnp.vectorize(lambda x, p: x ** p, excluded={1})
    np.testing.assert_allclose(scalar(X, 2), X ** 2, rtol=1e-6)


def test_vmap_of_custom_rules():
    @fluxion.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), t[0] * 2.0))
    np.testing.assert_allclose(fluxion.vmap(f)(X), np.sin(X), rtol=1e-6)
    np.testing.assert_allclose(fluxion.vmap(fluxion.grad(lambda x: jnp.sum(f(x))))(X), 2 * np.ones_like(X))


def test_grad_through_collectives_inside_vmap():
    xs = np.arange(1.0, 5.0, dtype=np.float32)
    # As in JAX, psum's transpose is a psum: each example's cotangent reaches every input.
    per_example = fluxion.vmap(fluxion.grad(lambda x: x * lax.psum(x, "i")), axis_name="i")(xs)
    np.testing.assert_allclose(per_example, np.full(4, 2 * xs.sum()))
    gathered = fluxion.vmap(fluxion.grad(lambda x: jnp.sum(lax.all_gather(x, "i") ** 2)), axis_name="i")(xs)
    np.testing.assert_allclose(gathered, 2 * xs * 4)


@pytest.mark.parametrize("tiled", [False, True])
@pytest.mark.parametrize("split_axis, concat_axis, in_axis", [(0, 0, 0), (0, 1, 2), (1, 0, 1)])
@pytest.mark.parametrize("names", [("i", "j"), ("j", "i")])
def test_all_to_all_over_two_nested_vmap_axes_matches_jax(tiled, split_axis, concat_axis,
                                                          in_axis, names):
    jax = pytest.importorskip("jax")
    shape = [4, 8, 8] if tiled else [4, 4, 4]
    shape[in_axis:in_axis + 1] = (2, 2)
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)

    def nested(mod):
        f = lambda y: mod.lax.all_to_all(y, names, split_axis, concat_axis, tiled=tiled)
        return mod.vmap(mod.vmap(f, in_axes=in_axis, axis_name="j"), in_axes=in_axis,
                        axis_name="i")
    want = np.asarray(nested(jax)(x))
    np.testing.assert_array_equal(nested(fluxion)(x), want)
    np.testing.assert_array_equal(fluxion.jit(nested(fluxion))(x), want)


def test_grad_of_all_to_all_over_two_axes_matches_jax():
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(0).standard_normal((2, 2, 8, 3)).astype(np.float32)
    w = np.arange(2 * 2 * 2 * 12, dtype=np.float32).reshape(2, 2, 2, 12)

    def grad(mod):
        f = lambda y: mod.lax.all_to_all(y, ("i", "j"), 0, 1, tiled=True)
        f = mod.vmap(mod.vmap(f, axis_name="j"), axis_name="i")
        return mod.grad(lambda y: (f(y) * w).sum())(x)
    np.testing.assert_allclose(grad(fluxion), grad(jax))
