"""jnp functions made eager executables on 2026-11-27 (fifteenth session): manipulation, diag /
tri, number functions, vector products, pad, allclose. Each call runs twice (compiled, then the
cached executable) and is checked against JAX (values, dtype, weak type) and against fluxion's
op-by-op path (disable_jit); each function ends up with cached signatures."""
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

_V = np.arange(8, dtype=np.float32) - 2.5
_X = np.arange(12, dtype=np.float32).reshape(3, 4) / 3
_I = np.array([12, 18, -8, 0, 7], np.int32)

CALLS = {
    "roll": ("roll", lambda m: m.roll(_V, 3)),
    "roll_negative_axis": ("roll", lambda m: m.roll(_X, -1, axis=1)),
    "roll_tuple": ("roll", lambda m: m.roll(_X, (1, 2), (0, 1))),
    "roll_array_shift": ("roll", lambda m: m.roll(_V, m.asarray(2))),
    "sort": ("sort", lambda m: m.sort(_X[:, ::-1], axis=1)),
    "sort_descending": ("sort", lambda m: m.sort(_V, descending=True)),
    "argsort": ("argsort", lambda m: m.argsort(-_V)),
    "argsort_axis0": ("argsort", lambda m: m.argsort(_X, axis=0, stable=True)),
    "tile": ("tile", lambda m: m.tile(_X, (2, 1))),
    "split": ("split", lambda m: m.split(_V, 4)),
    "split_list": ("split", lambda m: m.split(_V, [1, 5])),
    "array_split": ("array_split", lambda m: m.array_split(_V, 3)),
    "hsplit": ("hsplit", lambda m: m.hsplit(_X, 2)),
    "vsplit": ("vsplit", lambda m: m.vsplit(_X, 3)),
    "flip": ("flip", lambda m: m.flip(_X, 1)),
    "fliplr": ("fliplr", lambda m: m.fliplr(_X)),
    "rot90": ("rot90", lambda m: m.rot90(_X, 3)),
    "repeat": ("repeat", lambda m: m.repeat(_X, 2, axis=0)),
    "repeat_total": ("repeat", lambda m: m.repeat(_V, m.asarray(np.full(8, 2)),
                                                  total_repeat_length=16)),
    "squeeze": ("squeeze", lambda m: m.squeeze(_X[None, :, None], (0, 2))),
    "expand_dims": ("expand_dims", lambda m: m.expand_dims(_X, (0, -1))),
    "moveaxis": ("moveaxis", lambda m: m.moveaxis(_X[None], 0, -1)),
    "swapaxes": ("swapaxes", lambda m: m.swapaxes(_X, 0, 1)),
    "transpose": ("transpose", lambda m: m.transpose(_X[None], (2, 0, 1))),
    "ravel": ("ravel", lambda m: m.ravel(_X, order="F")),
    "broadcast_to": ("broadcast_to", lambda m: m.broadcast_to(_V, (2, 8))),
    "append": ("append", lambda m: m.append(_V, 1)),
    "pad": ("pad", lambda m: m.pad(_X, ((1, 0), (2, 1)), constant_values=3.0)),
    "pad_stat": ("pad", lambda m: m.pad(_V, 2, mode="mean", stat_length=3)),
    "pad_reflect": ("pad", lambda m: m.pad(_V, 3, mode="reflect", reflect_type="odd")),
    "pad_list": ("pad", lambda m: m.pad(_X, [[1, 1], [0, 2]], mode="edge")),
    "diag": ("diag", lambda m: m.diag(_V, 1)),
    "diag_of_matrix": ("diag", lambda m: m.diag(_X, -1)),
    "tril": ("tril", lambda m: m.tril(_X, 1)),
    "triu": ("triu", lambda m: m.triu(_X)),
    "diagflat": ("diagflat", lambda m: m.diagflat(_X, -2)),
    "vander": ("vander", lambda m: m.vander(_V[:4], 3, increasing=True)),
    "unstack": ("unstack", lambda m: m.unstack(_X, axis=1)),
    "gcd": ("gcd", lambda m: m.gcd(_I, 6)),
    "lcm": ("lcm", lambda m: m.lcm(_I, np.int32(4))),
    "frexp": ("frexp", lambda m: m.frexp(_V)),
    "ldexp": ("ldexp", lambda m: m.ldexp(_V, 3)),
    "modf": ("modf", lambda m: m.modf(_V)),
    "nextafter": ("nextafter", lambda m: m.nextafter(_V, 0.0)),
    "spacing": ("spacing", lambda m: m.spacing(_V)),
    "fabs": ("fabs", lambda m: m.fabs(_V)),
    "bitwise_count": ("bitwise_count", lambda m: m.bitwise_count(_I)),
    "i0": ("i0", lambda m: m.i0(_V)),
    "vecdot": ("vecdot", lambda m: m.vecdot(_X, _X)),
    "matvec": ("matvec", lambda m: m.matvec(_X, _X[0])),
    "vecmat": ("vecmat", lambda m: m.vecmat(_X[:, 0], _X)),
    "cumulative_sum": ("cumulative_sum", lambda m: m.cumulative_sum(_X, axis=1,
                                                                    include_initial=True)),
    "cumulative_prod": ("cumulative_prod", lambda m: m.cumulative_prod(_V)),
    "broadcast_arrays": ("broadcast_arrays", lambda m: m.broadcast_arrays(_V, _X[:, :1], 2.0)),
    "atleast_1d": ("atleast_1d", lambda m: m.atleast_1d(1.0)),
    "atleast_2d": ("atleast_2d", lambda m: m.atleast_2d(_V, 3)),
    "atleast_3d": ("atleast_3d", lambda m: m.atleast_3d(_X)),
    "resize": ("resize", lambda m: m.resize(_V, (3, 5))),
    "gradient": ("gradient", lambda m: m.gradient(_X, 2.0, axis=1)),
    "gradient_coordinates": ("gradient", lambda m: m.gradient(_V, _V ** 2)),
    "gradient_2d": ("gradient", lambda m: m.gradient(_X)),
    "ediff1d": ("ediff1d", lambda m: m.ediff1d(_X, to_end=9.0, to_begin=_V[:2])),
    "polyfit": ("polyfit", lambda m: m.polyfit(_V, 2 * _V ** 2 - 1, 2)),
    "polyfit_weighted": ("polyfit", lambda m: m.polyfit(_V, _V ** 3, 3, w=np.abs(_V) + 1)),
    "unravel_index": ("unravel_index", lambda m: m.unravel_index(_I[_I >= 0] % 6, (2, 3))),
    "percentile": ("percentile", lambda m: m.percentile(_X, 30.0, axis=1)),
    "percentile_array_q": ("percentile", lambda m: m.percentile(_V, np.array([10.0, 90.0]),
                                                                method="nearest")),
    "nanpercentile": ("nanpercentile", lambda m: m.nanpercentile(
        np.where(_X > 2, np.nan, _X), 50, axis=0, keepdims=True)),
    "allclose": ("allclose", lambda m: m.allclose(_V, _V + 1e-9)),
    "allclose_nan": ("allclose", lambda m: m.allclose(_V * np.nan, np.nan, equal_nan=True)),
}


# An Array where a static argument goes (`repeats`) cannot key a cache: these run op by op.
_OP_BY_OP = {"repeat_total"}


def _leaves(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _check(ours, theirs, atol=0.0):
    ours, theirs = _leaves(ours), _leaves(theirs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert (a.dtype, a.aval.weak_type) == (b.dtype, b.aval.weak_type)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=atol)


@pytest.mark.parametrize("case", sorted(CALLS))
def test_eager_call_matches_jax_and_op_by_op(case, x64_mode):
    name, call = CALLS[case]
    atol = 1e-5 if name == "polyfit" else 0.0  # a float32 least-squares solve
    theirs = call(jnp)
    ours = call(fnp)
    _check(ours, theirs, atol)
    _check(call(fnp), ours)  # the cached executable
    if case not in _OP_BY_OP:
        assert getattr(fnp, name).eager_cache  # it ran as one executable
    with fluxion.disable_jit():
        _check(call(fnp), theirs, atol)


@pytest.mark.parametrize("call", [
    lambda m: m.roll(_X, (1, 2, 3), axis=(0, 1)),
    lambda m: m.split(_V, 3),
    lambda m: m.squeeze(_X, 0),
    lambda m: m.swapaxes(_X, 0, 2),
    lambda m: m.tile(_V, 1.5),
    lambda m: m.diag(np.ones((2, 2, 2))),
    lambda m: m.gcd(_V, 2),
    lambda m: m.pad(_V, 1, mode="nope"),
    lambda m: m.vecdot(_X, _V),
])
def test_errors_are_jax_classes(call):
    with pytest.raises(Exception) as theirs:
        call(jnp)
    for _ in range(2):
        with pytest.raises(type(theirs.value)):
            call(fnp)


def test_the_methods_run_cached():
    x = fnp.asarray(_X)
    for method in (lambda: x.ravel(), lambda: x.squeeze(), lambda: x.swapaxes(0, 1),
                   lambda: x.transpose(), lambda: x.repeat(2), lambda: x.sort(), lambda: x.argsort()):
        np.testing.assert_array_equal(np.asarray(method()), np.asarray(method()))
    from fluxion._src.numpy import manipulation
    assert manipulation.ravel.eager_cache and manipulation.sort.eager_cache
