"""Values of fluxion.numpy's reductions against NumPy, jit against eager, and errors."""
import ml_dtypes
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

# name: (fluxion call, NumPy reference); each takes the module and the array.
REDUCTIONS = {
    "sum": lambda m, x: m.sum(x),
    "sum_axis0_keep": lambda m, x: m.sum(x, axis=0, keepdims=True),
    "sum_axes": lambda m, x: m.sum(x, axis=(0, -1)),
    "prod_axis1": lambda m, x: m.prod(x, axis=1),
    "mean": lambda m, x: m.mean(x),
    "mean_axis1": lambda m, x: m.mean(x, axis=-1, keepdims=True),
    "var_ddof1": lambda m, x: m.var(x, axis=0, ddof=1),
    "std": lambda m, x: m.std(x, axis=1),
    "all": lambda m, x: m.all(x, axis=0),
    "any": lambda m, x: m.any(x),
    "cumsum": lambda m, x: m.cumsum(x, axis=0),
    "cumsum_flat": lambda m, x: m.cumsum(x),
    "cumprod": lambda m, x: m.cumprod(x, axis=-1),
    "count_nonzero": lambda m, x: m.count_nonzero(x, axis=1),
    "nansum": lambda m, x: m.nansum(x, axis=0),
    "average": lambda m, x: m.average(x, axis=1),
}
# Reductions without an identity, and arg-reductions: not defined on empty axes.
NONEMPTY = {
    "max": lambda m, x: m.max(x),
    "min_axis": lambda m, x: m.min(x, axis=-1),
    "amax_keep": lambda m, x: m.amax(x, axis=0, keepdims=True),
    "ptp": lambda m, x: m.ptp(x, axis=0),
    "argmax": lambda m, x: m.argmax(x, axis=1),
    "argmin": lambda m, x: m.argmin(x),
    "nanmax": lambda m, x: m.nanmax(x, axis=1),
}
NOT_COMPLEX = {"max", "min_axis", "amax_keep", "ptp", "argmax", "argmin", "nanmax"}
NOT_BOOL = {"ptp"}
TOLERANCE = {"float16": 4e-3, "bfloat16": 3e-2}


def _dtype(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _array(name, shape, rng):
    dt = _dtype(name)
    if dt == np.bool_:
        return rng.random(shape) > 0.4
    if dt.kind in "iu":
        low = 0 if dt.kind == "u" else -3
        return rng.integers(low, 4, shape).astype(dt)
    if dt.kind == "c":
        return (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)).astype(dt)
    return rng.uniform(-2, 2, shape).astype(dt)


def _numpy_input(x):
    """Wide NumPy arrays for the reference (so narrow types do not overflow or round)."""
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16:
        return x.astype(np.float64)
    if x.dtype.kind in "iu":
        return x.astype(np.int64)
    return x


def _compare(got, want, dtype_name, what):
    got = np.asarray(got)
    want = np.asarray(want).astype(got.dtype) if got.dtype.kind != "V" else want
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        tol = TOLERANCE.get(dtype_name, 1e-5)
        np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128),
                                   rtol=tol, atol=tol, err_msg=what)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's mean of empty slices
@pytest.mark.parametrize("dtype_name", ["bool", "int8", "uint8", "int32", "float16", "bfloat16",
                                        "float32", "complex64"])
@pytest.mark.parametrize("shape", [(3, 4), (2, 0)])
def test_values_match_numpy(dtype_name, shape):
    x = _array(dtype_name, shape, np.random.default_rng(0))
    cases = dict(REDUCTIONS)
    if 0 not in shape:
        cases.update({k: v for k, v in NONEMPTY.items()
                      if not (dtype_name == "complex64" and k in NOT_COMPLEX)
                      and not (dtype_name == "bool" and k in NOT_BOOL)})
    outs = fluxion.jit(lambda a: {k: f(fnp, a) for k, f in cases.items()})(x)
    for k, f in cases.items():
        with np.errstate(all="ignore"):
            want = f(np, _numpy_input(x))
        _compare(outs[k], want, dtype_name, k)


def test_where_initial_and_nan_reductions():
    x = np.array([[1.0, np.nan, -2.0], [4.0, 0.5, np.nan]], np.float32)
    mask = np.array([[True, False, True], [False, True, True]])

    def run(a, w):
        return {
            "sum_where": fnp.sum(a, where=w), "max_where": fnp.max(a, axis=1, where=w, initial=-5.0),
            "mean_where": fnp.mean(a, axis=0, where=w), "prod_initial": fnp.prod(a, initial=2.0),
            "min_initial": fnp.min(a, initial=-10.0), "nanmean": fnp.nanmean(a, axis=1),
            "nanmin": fnp.nanmin(a), "nanprod": fnp.nanprod(a, axis=0),
            "nancumsum": fnp.nancumsum(a, axis=1), "argmax_nan": fnp.argmax(a, axis=1),
            "var_where": fnp.var(a, where=w), "count_where": fnp.sum(w, where=w),
        }
    outs = fluxion.jit(run)(x, mask)
    with np.errstate(all="ignore"):
        want = {
            "sum_where": np.sum(x, where=mask), "max_where": np.max(x, axis=1, where=mask, initial=-5.0),
            "mean_where": np.mean(x, axis=0, where=mask), "prod_initial": np.prod(x, initial=2.0),
            "min_initial": np.min(x, initial=-10.0), "nanmean": np.nanmean(x, axis=1),
            "nanmin": np.nanmin(x), "nanprod": np.nanprod(x, axis=0),
            "nancumsum": np.nancumsum(x, axis=1), "argmax_nan": np.argmax(x, axis=1),
            "var_where": np.var(x, where=mask), "count_where": np.sum(mask, where=mask),
        }
    for k in want:
        np.testing.assert_allclose(np.asarray(outs[k]), want[k], rtol=1e-6, err_msg=k)
    all_nan = np.full((2, 2), np.nan, np.float32)
    assert np.isnan(np.asarray(fnp.nanmax(all_nan, axis=0))).all()


def test_average_weights_and_returned():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    w = np.array([1.0, 2.0, 3.0], np.float32)
    avg, total = fnp.average(x, axis=0, weights=w, returned=True)
    want_avg, want_total = np.average(x, axis=0, weights=w, returned=True)
    np.testing.assert_allclose(np.asarray(avg), want_avg, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(total), want_total, rtol=1e-6)
    w2 = np.arange(1.0, 13.0, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(np.asarray(fnp.average(x, weights=w2)), np.average(x, weights=w2),
                               rtol=1e-6)


def test_dtype_arguments_and_promotion():
    x = np.array([200, 100, 50], np.uint8)
    assert fnp.sum(x).dtype == np.uint32 and int(fnp.sum(x)) == 350
    assert fnp.sum(x, promote_integers=False).dtype == np.uint8
    assert int(fnp.sum(x, promote_integers=False)) == 350 % 256
    assert fnp.sum(x, dtype=np.float32).dtype == np.float32
    assert fnp.cumsum(np.array([True, True]), dtype=bool).dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(fnp.cumsum(np.array([True, False, True]))), [1, 1, 2])
    half = np.full(4096, 0.1, np.float16)
    # float16 sums accumulate in float32 (a float16 accumulator stalls at 256).
    np.testing.assert_allclose(float(fnp.sum(half)), 409.6, rtol=1e-3)
    np.testing.assert_allclose(float(fnp.mean(np.array([1, 2], np.int32))), 1.5)


def test_eager_matches_jit():
    x = _array("float32", (3, 4), np.random.default_rng(3))
    cases = {**REDUCTIONS, **NONEMPTY}
    jitted = fluxion.jit(lambda a: {k: f(fnp, a) for k, f in cases.items()})(x)
    for k, f in cases.items():
        eager = f(fnp, x)
        assert eager.dtype == jitted[k].dtype and eager.shape == jitted[k].shape, k
        np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted[k]), rtol=1e-6, err_msg=k)


@pytest.mark.parametrize("call, error", [
    (lambda x: fnp.sum(x, axis=2), ValueError),
    (lambda x: fnp.sum(x, axis=(0, 0)), ValueError),
    (lambda x: fnp.max(x[:, :0], axis=1), ValueError),
    (lambda x: fnp.argmax(x[:0]), ValueError),
    (lambda x: fnp.sum(x, where=x), ValueError),
    (lambda x: fnp.max(x, where=x > 0), ValueError),
    (lambda x: fnp.sum(x, out=x), NotImplementedError),
    (lambda x: fnp.var(x, ddof=1, correction=1), ValueError),
    (lambda x: fnp.std(x, dtype=np.int32), ValueError),
    (lambda x: fnp.sum([1, 2]), TypeError),
    (lambda x: fnp.average(x, weights=np.ones(3)), ValueError),
    (lambda x: fnp.cumsum(x, axis=5), ValueError),
    (lambda x: fnp.sum(x, initial=np.ones(2)), ValueError),
])
def test_errors(call, error):
    with pytest.raises(error):
        call(np.ones((2, 3), np.float32))


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "int32", "uint32",
                                   "int64", "uint64"])
def test_inexact_results_of_integers_under_x64_follow_jax(dtype):
    # JAX's fixed map: bools and ints of up to 32 bits give float32 even with x64 on; 64-bit
    # ints give float64 (found by the differential fuzzer).
    jax = pytest.importorskip("jax")
    x = np.arange(6).reshape(2, 3).astype(dtype)
    calls = {
        "mean": lambda m: m.mean(x), "var": lambda m: m.var(x, axis=0),
        "std": lambda m: m.std(x), "nanmean": lambda m: m.nanmean(x),
        "nanvar": lambda m: m.nanvar(x), "average": lambda m: m.average(x),
        "linspace": lambda m: m.linspace(x[0, 0], x[1, 2], 4),
        "geomspace": lambda m: m.geomspace(x[0, 1], x[1, 2], 3),
    }
    with fluxion.enable_x64(True), jax.enable_x64(True):
        for name, call in calls.items():
            got, want = call(fnp), call(jax.numpy)
            assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6,
                                       err_msg=name)


@pytest.mark.parametrize("name", ["var", "std", "nanvar", "nanstd"])
def test_non_boolean_where_names_the_function(name):
    with pytest.raises(ValueError, match=f"jnp.{name}: where must be None or a boolean array"):
        getattr(fnp, name)(fnp.zeros(4), where=fnp.ones(4, int))


def test_complex_max_min_are_lexicographic_everywhere():
    # Reductions' bodies used XLA's complex maximum, which compares only real parts on CPU
    # (max of [3-1j, 3+1j] gave 3-1j) and failed to compile in some programs; the identity's
    # check leaked a ComplexWarning.
    import warnings
    import jax
    import jax.numpy as jnp
    x = np.array([[1+2j, 3-1j, 3+1j, -1+5j], [2+0j, 2-3j, 2+3j, 0j]], np.complex64)

    def programs(np_, lib):
        return [np_.max(x, axis=1), np_.min(x, axis=0),
                lib.jit(lambda a: np_.max(a, where=a.real > 1, initial=0, axis=1))(x),
                lib.lax.cummax(x, axis=1), lib.lax.cummin(x, axis=1),
                lib.lax.reduce_window(x, -np.inf + 0j, lib.lax.max, (1, 2), (1, 1), "VALID"),
                lib.vmap(lambda a: lib.lax.pmin(a, "i"), axis_name="i")(x)]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = programs(fnp, fluxion)
    for a, b in zip(ours, programs(jnp, jax)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(ours[0]), x.max(axis=1))
