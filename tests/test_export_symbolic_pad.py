"""jnp.pad's modes other than 'constant' with symbolic dimensions (a symbolic axis, symbolic
widths or both), exported and called at concrete sizes, against JAX 0.10.2's `jax.export`."""
import jax
import numpy as np
import pytest

import fluxion
from fluxion import export

InconclusiveDimensionOperation = export.InconclusiveDimensionOperation


def _data(shape, dtype=np.float32):
    return ((np.arange(np.prod(shape)).reshape(shape) * 1.7) % 7 - 3).astype(dtype)


def _export_both(make, spec, constraints=(), dtype=np.float32):
    ours = export.export(fluxion.jit(make(fluxion.numpy)))(fluxion.ShapeDtypeStruct(
        export.symbolic_shape(spec, constraints=constraints), dtype))
    theirs = jax.export.export(jax.jit(make(jax.numpy)))(jax.ShapeDtypeStruct(
        jax.export.symbolic_shape(spec, constraints=constraints), dtype))
    return ours, theirs


def _check_against_jax(make, spec, sizes, constraints=(), dtype=np.float32):
    ours, theirs = _export_both(make, spec, constraints, dtype)
    assert [str(a) for a in ours.out_avals] == [str(a) for a in theirs.out_avals]
    for i, shape in enumerate(sizes):
        x = _data(shape, dtype)
        want = jax.tree_util.tree_leaves(theirs.call(x))
        # eager at every size; under jit (the same program inlined) at the first
        for call in (ours.call, fluxion.jit(ours.call))[:2 if i == 0 else 1]:
            got = fluxion.tree_util.tree_leaves(call(x))
            assert [g.dtype for g in got] == [w.dtype for w in want]
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)


# (make(jnp), specification, constraints): a constant width on a symbolic axis, a symbolic
# width on a constant axis, and a symbolic width on a symbolic axis
CASES = {
    "edge": (lambda jnp: lambda x: jnp.pad(x, ((1, x.shape[0]), (x.shape[0] // 2, 2)),
                                           mode="edge"), "b, 4", ()),
    "wrap": (lambda jnp: lambda x: jnp.pad(x, ((x.shape[0], 2 * x.shape[0]), (2, 5)),
                                           mode="wrap"), "b, 4", ()),
    "reflect": (lambda jnp: lambda x: jnp.pad(x, ((x.shape[0] - 1, 2), (3, 0)),
                                              mode="reflect"), "b, 4", ("b >= 3",)),
    "symmetric": (lambda jnp: lambda x: jnp.pad(x, ((2, x.shape[0]), (0, 4)),
                                                mode="symmetric"), "b, 4", ("b >= 2",)),
    "reflect_odd": (lambda jnp: lambda x: jnp.pad(x, ((x.shape[0] - 1, 1), (2, 1)),
                                                  mode="reflect", reflect_type="odd"),
                    "b, 4", ("b >= 2",)),
    "symmetric_odd": (lambda jnp: lambda x: jnp.pad(x, ((x.shape[0], 2), (1, 1)),
                                                    mode="symmetric", reflect_type="odd"),
                      "b, 4", ("b >= 2",)),
    "maximum": (lambda jnp: lambda x: jnp.pad(x, ((1, x.shape[0]), (x.shape[0] // 2, 1)),
                                              mode="maximum"), "b, 4", ()),
    "mean": (lambda jnp: lambda x: jnp.pad(x, ((2, x.shape[0]), (x.shape[0], 0)),
                                           mode="mean"), "b, 4", ()),
    "median": (lambda jnp: lambda x: jnp.pad(x, ((x.shape[0], 1), (1, 1)), mode="median"),
               "b, 4", ()),
    "minimum_stat_length": (lambda jnp: lambda x: jnp.pad(x, ((1, 2), (x.shape[0], 1)),
                                                          mode="minimum", stat_length=2),
                            "b, 4", ("b >= 2",)),
    "maximum_symbolic_stat_length": (lambda jnp: lambda x: jnp.pad(
        x, ((x.shape[0], 0), (x.shape[1], 1)), mode="maximum",
        stat_length=((x.shape[0] // 2, 2), (2, 2))), "b, 4", ("b >= 2",)),
    "mean_symbolic_stat_length": (lambda jnp: lambda x: jnp.pad(
        x, ((1, 2), (2, 1)), mode="mean", stat_length=((x.shape[0] - 1, x.shape[0]), (2, 3))),
        "b, 4", ("b >= 2",)),
    "linear_ramp": (lambda jnp: lambda x: jnp.pad(x, ((1, 2), (2, 1)), mode="linear_ramp",
                                                  end_values=((1, 2), (3, 4))), "b, 4", ()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pad_modes_with_symbolic_dimensions_match_jax(name):
    make, spec, constraints = CASES[name]
    _check_against_jax(make, spec, [(3, 4), (5, 4)], constraints)


def test_edge_and_mean_of_integers_at_size_one():
    make = lambda jnp: lambda x: (jnp.pad(x, ((x.shape[0], 1), (0, 0)), mode="edge"),  # noqa
                                  jnp.pad(x, ((2, x.shape[0]), (1, 0)), mode="mean"))
    _check_against_jax(make, "b, 3", [(1, 3), (4, 3)], dtype=np.int32)


def test_gradient_through_a_symbolic_reflection():
    def make(lib):
        return lambda x: lib.grad(lambda y: (lib.numpy.pad(
            y, ((y.shape[0] - 1, 1), (0, 0)), mode="reflect") ** 2).sum())(x)
    ours = export.export(fluxion.jit(make(fluxion)))(fluxion.ShapeDtypeStruct(
        export.symbolic_shape("b, 3", constraints=["b >= 2"]), np.float32))
    for n in (2, 5):
        x = _data((n, 3))
        np.testing.assert_allclose(ours.call(x), jax.jit(make(jax))(x), rtol=1e-6)


@pytest.mark.parametrize("mode", ["reflect", "symmetric"])
def test_reflection_the_dimensions_do_not_bound_is_jaxs_value_error(mode):
    # b may be 1: the axis cannot be shown to hold the width
    for lib in (fluxion, jax):
        with pytest.raises(ValueError, match="Shape polymorphism is supported for jnp.pad"):
            lib.export.export(lib.jit(lambda x: lib.numpy.pad(x, ((1, 2), (0, 0)), mode=mode)))(
                lib.ShapeDtypeStruct(lib.export.symbolic_shape("b, 4"), np.float32))


def test_wrap_by_a_width_the_axis_may_not_divide_is_inconclusive_as_jax():
    for lib, error in ((fluxion, InconclusiveDimensionOperation),
                       (jax, jax.errors.InconclusiveDimensionOperation)):
        with pytest.raises(error, match=r"'mod\(1, b\)' > '0' is inconclusive"):
            lib.export.export(lib.jit(lambda x: lib.numpy.pad(x, ((1, 0), (0, 0)), mode="wrap")))(
                lib.ShapeDtypeStruct(lib.export.symbolic_shape("b, 4"), np.float32))
