"""Windowed reductions, scans and approx_top_k with symbolic dimensions, exported and called at
concrete sizes, against JAX 0.10.2's `jax.export` (values, output shapes, error classes)."""
import jax
import numpy as np
import pytest

import fluxion
from fluxion import export

JAX_INCONCLUSIVE = jax.errors.InconclusiveDimensionOperation


def _data(shape):
    return ((np.arange(np.prod(shape)).reshape(shape) * 1.7) % 7 - 3).astype(np.float32)


def _export(lib, make, spec, constraints=()):
    return lib.export.export(lib.jit(make(lib)))(lib.ShapeDtypeStruct(
        lib.export.symbolic_shape(spec, constraints=constraints), np.float32))


def _check_against_jax(make, spec, sizes, constraints=()):
    ours, theirs = _export(fluxion, make, spec, constraints), _export(jax, make, spec, constraints)
    assert [str(a) for a in ours.out_avals] == [str(a) for a in theirs.out_avals]
    for i, shape in enumerate(sizes):
        x = _data(shape)
        want = jax.tree_util.tree_leaves(theirs.call(x))
        for call in (ours.call, fluxion.jit(ours.call))[:2 if i == 0 else 1]:
            got = fluxion.tree_util.tree_leaves(call(x))
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# reduce_window with a window as long as a symbolic axis

WINDOW_CASES = {
    "sum_valid": lambda lib: lambda x: lib.lax.reduce_window(
        x, 0., lib.lax.add, (x.shape[0], 1), (1, 1), "VALID"),
    "max_same": lambda lib: lambda x: lib.lax.reduce_window(
        x, -np.inf, lib.lax.max, (x.shape[0], 2), (1, 1), "SAME"),
    "generic_strided": lambda lib: lambda x: lib.lax.reduce_window(
        x, 1., lib.lax.mul, (x.shape[0], 2), (1, 2), "VALID"),
    "grad_of_sum": lambda lib: lambda x: lib.grad(lambda y: (lib.lax.reduce_window(
        y, 0., lib.lax.add, (y.shape[0], 2), (1, 1), "VALID") ** 2).sum())(x),
}


@pytest.mark.parametrize("name", sorted(WINDOW_CASES))
def test_reduce_window_with_a_symbolic_window_matches_jax(name):
    _check_against_jax(WINDOW_CASES[name], "b, 6", [(4, 6), (1, 6)])


# ---------------------------------------------------------------------------------------------
# The gradient of max pooling whose padding depends on a symbolic size

def test_max_pool_gradient_with_symbolic_padding_matches_jax():
    def make(lib):
        return lambda x: lib.grad(lambda y: lib.lax.reduce_window(
            y, -np.inf, lib.lax.max, (3, 2), (2, 2), "SAME").sum())(x)
    _check_against_jax(make, "b, 6", [(5, 6), (2, 6), (1, 6)])


# ---------------------------------------------------------------------------------------------
# The parallel (associative) scan needs a known length, in JAX and here

SCANS = {
    "grad_cumprod": lambda lib: lambda x: lib.grad(
        lambda y: lib.numpy.cumprod(y, axis=0).sum())(x),
    "grad_cummax": lambda lib: lambda x: lib.grad(
        lambda y: lib.lax.cummax(y, axis=0).sum())(x),
    "associative_scan": lambda lib: lambda x: lib.lax.associative_scan(lib.numpy.add, x),
}


@pytest.mark.parametrize("name", sorted(SCANS))
def test_parallel_scan_over_a_symbolic_axis_is_not_implemented_as_jax(name):
    for lib in (fluxion, jax):
        with pytest.raises(NotImplementedError, match="associative scan over axis of "
                                                      "non-constant size: b"):
            _export(lib, SCANS[name], "b, 3")


def test_parallel_scan_over_a_constant_axis_of_a_symbolic_array_matches_jax():
    _check_against_jax(lambda lib: lambda x: lib.grad(
        lambda y: lib.numpy.cumprod(y, axis=1).sum())(x), "b, 3", [(2, 3)])


# ---------------------------------------------------------------------------------------------
# approx_max_k / approx_min_k

def test_approx_top_k_with_a_symbolic_batch_matches_jax():
    _check_against_jax(lambda lib: lambda x: (lib.lax.approx_max_k(x, 2),
                                              lib.lax.approx_min_k(x, 3, recall_target=0.5)),
                       "b, 6", [(3, 6), (1, 6)])


def test_approx_top_k_over_a_symbolic_axis_matches_jax():
    make = lambda lib: lambda x: lib.lax.approx_min_k(x, 3, reduction_dimension=0)  # noqa: E731
    _check_against_jax(make, "b, 2", [(3, 2), (5, 2)], constraints=["b >= 3"])
    # without the constraint b may be smaller than k: the same comparison is inconclusive
    for lib, error in ((fluxion, export.InconclusiveDimensionOperation),
                       (jax, JAX_INCONCLUSIVE)):
        with pytest.raises(error, match="'b' < '3' is inconclusive"):
            _export(lib, make, "b, 2")


def test_approx_top_k_unaggregated_over_a_symbolic_axis_is_not_implemented_as_jax():
    for lib in (fluxion, jax):
        with pytest.raises(NotImplementedError, match="aggregate_to_topk=False not yet "
                                                      "implemented"):
            _export(lib, lambda lib: lambda x: lib.lax.approx_max_k(
                x, 2, aggregate_to_topk=False), "4, b", constraints=["b >= 2"])


def _export_k(lib, agg):
    b, k = lib.export.symbolic_shape("b, k", constraints=["k <= 8"])
    fun = lib.jit(lambda x, xk: lib.lax.approx_max_k(x, k=xk.shape[0], reduction_dimension=1,
                                                      aggregate_to_topk=agg))
    return lib.export.export(fun)(lib.ShapeDtypeStruct((b, 8, 5), np.float32),
                                  lib.ShapeDtypeStruct((k,), np.float32))


def test_approx_top_k_of_a_symbolic_k_matches_jax():
    ours, theirs = _export_k(fluxion, True), _export_k(jax, True)
    assert [str(a) for a in ours.out_avals] == [str(a) for a in theirs.out_avals] == [
        "float32[b,k,5]", "int32[b,k,5]"]
    for b, k in ((3, 4), (1, 8)):
        x, xk = _data((b, 8, 5)), np.zeros(k, np.float32)
        for g, w in zip(ours.call(x, xk), theirs.call(x, xk), strict=True):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    for lib in (fluxion, jax):
        with pytest.raises(NotImplementedError, match="aggregate_to_topk=False not yet "
                                                      "implemented"):
            _export_k(lib, False)
