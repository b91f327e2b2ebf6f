"""Edges of fluxion.numpy array creation and manipulation found by a sweep against JAX 0.10.2.

NumPy gives the values; JAX (the oracle) gives dtypes and error classes.
"""
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp


def test_log10_of_powers_of_ten_is_exact_in_float64(x64):
    # 1 / np.log(10) is one ulp below the correctly rounded 1/ln(10); JAX uses the latter.
    exponents = np.arange(-20, 20)
    got = np.asarray(fnp.log10(fnp.asarray(10.0 ** exponents)))
    assert (got != exponents).sum() <= 5  # JAX 0.10.2 misses 5 of these too


def test_geomspace_int_keeps_exact_powers(x64):
    """Integer geomspace floors the float powers: the ends exact, the interior within one of
    NumPy's (the last bit of a float power, and so its floor, differs between platforms and
    NumPy versions: NumPy 2.5 on the GPU machine gives 127 where 2.4 gives 128). Before the
    log2 fix the powers fell a whole step short (1, 1, 3, ..., 255)."""
    want = np.geomspace(1, 256, 9, dtype=np.int64)
    for got in (fnp.geomspace(1, 256, 9, dtype=int),
                fluxion.jit(lambda: fnp.geomspace(1, 256, 9, dtype=int))()):
        got = np.asarray(got)
        assert got[0] == 1 and got[-1] == 256
        assert np.abs(got - want).max() <= 1
        assert (np.diff(got) > 0).all()


def test_array_of_none_is_a_value_error():
    with pytest.raises(ValueError, match="None"):
        fnp.array(None)
    with pytest.raises(ValueError, match="None"):
        fnp.asarray(None)


@pytest.mark.parametrize("total", [None, 6, 4])
def test_repeat_counts_of_shape_one_broadcast(total):
    x = np.arange(3)
    want = np.repeat(x, np.array([2]))[:total]
    got = fnp.repeat(fnp.asarray(x), np.array([2]), total_repeat_length=total)
    np.testing.assert_array_equal(np.asarray(got), want)
    if total is not None:  # counts known only at run time
        traced = fluxion.jit(lambda r: fnp.repeat(fnp.asarray(x), r, total_repeat_length=total))
        np.testing.assert_array_equal(np.asarray(traced(fnp.asarray([2]))), want)


def test_repeat_refuses_a_list_of_counts_as_jax():
    with pytest.raises(TypeError, match="repeat"):
        fnp.repeat(fnp.arange(3), [1, 0, 2])


def test_take_of_float_indices_is_a_value_error_as_jax():
    x = fnp.arange(4.0)
    with pytest.raises(ValueError, match="integer"):
        fnp.take(x, fnp.array([1.0]))
    with pytest.raises(TypeError, match="integer"):  # JAX's class differs here
        fnp.take_along_axis(x, fnp.array([1.0]), axis=0)


@pytest.mark.parametrize("start,stop,num", [(-7, 3, 6), (-10, 10, 11), (0, 10, 4), (5, -5, 6)])
def test_linspace_integer_dtype_floors_exact_steps_as_numpy(start, stop, num):
    want = np.linspace(start, stop, num, dtype=np.int32)
    got = fnp.linspace(start, stop, num, dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(got), want)
    jitted = fluxion.jit(lambda: fnp.linspace(start, stop, num, dtype=np.int32))()
    np.testing.assert_array_equal(np.asarray(jitted), want)


@pytest.mark.parametrize("start,stop,base,axis", [
    (0.0, 2.0, [2.0, 10.0], 0),                 # JAX 0.10.2 fails to broadcast this
    ([0.0, 1.0], 2.0, [2.0, 10.0], 1),          # and this
    ([0.0, 5.0], [5.0, 0.0], [2.0, 3.0], 0),    # JAX's own docstring example
    ([[0.0], [1.0]], 3.0, [2.0, 4.0, 10.0], -1),
])
def test_logspace_array_base_applies_per_sequence_as_numpy(start, stop, base, axis):
    want = np.logspace(start, stop, 4, base=base, axis=axis)
    got = fnp.logspace(fnp.asarray(start), fnp.asarray(stop), 4, base=fnp.asarray(base), axis=axis)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    assert got.dtype == np.float32


def test_logspace_scalar_base_keeps_dtype_and_gradient():
    got = fnp.logspace(0.0, 2.0, 3)
    assert got.dtype == np.float32 and not got.weak_type
    grad = fluxion.grad(lambda s: fnp.logspace(s, 2.0, 3).sum())(0.0)
    # d/ds of 10**s + 10**((s + 2) / 2) + 100 at s = 0
    np.testing.assert_allclose(float(grad), np.log(10.0) * (1 + 10 / 2), rtol=1e-5)


def test_split_takes_an_integral_float_section_count_as_numpy():
    x = np.arange(4.0)
    for got, want in zip(fnp.split(fnp.asarray(x), 2.0), np.split(x, 2.0)):
        np.testing.assert_array_equal(np.asarray(got), want)
    with pytest.raises(TypeError):
        fnp.array_split(fnp.asarray(x), 2.5)


@pytest.mark.parametrize("call", [
    lambda x: fnp.repeat(x, 2.0),                               # NumPy and JAX: TypeError
    lambda x: fnp.pad(x, 1, mode="mean", stat_length=1.5),      # JAX: TypeError
])
def test_non_integer_counts_raise_type_error(call):
    with pytest.raises(TypeError):
        call(fnp.arange(4.0))


@pytest.mark.parametrize("args,dtype", [
    ((0, 5, 1.5), np.int32), ((-2.5, 2), np.int32), ((1, 3.5, 0.5), np.int8),
    ((250, 256), np.uint8), ((0.5, 3), np.uint8), ((0, 5, 1.5), np.float16),
])
def test_arange_with_a_dtype_counts_as_numpy(args, dtype):
    got = fnp.arange(*args, dtype=dtype)
    want = np.arange(*args, dtype=dtype)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("args", [(0, 1, 0.3), (5, 0, -1.5), (0.0, 1.0, 0.1), (-3, 3, 0.7),
                                  (2.5, 9, 1.25), (10, 1, -2), (3, 1, 1), (1e-3, 1, 0.37)])
@pytest.mark.parametrize("dtype,jitted", [(None, False), (np.int32, True), ("bfloat16", False)])
def test_arange_with_a_step_counts_as_jax(args, dtype, jitted):
    """start + step * i in the dtype (float32 for narrower floats), as JAX counts: arange(0, 1,
    0.3)[3] is 0.90000004 in float32, and an integer dtype truncates the step first."""
    import jax.numpy as jnp
    want = jnp.arange(*args, dtype=dtype)
    got = (fluxion.jit(lambda: fnp.arange(*args, dtype=dtype)) if jitted
           else lambda: fnp.arange(*args, dtype=dtype))()
    assert (got.dtype, got.weak_type, got.shape) == (want.dtype, want.weak_type, want.shape)
    np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))


def test_arange_negative_start_into_unsigned_wraps_as_jax():
    np.testing.assert_array_equal(np.asarray(fnp.arange(-2, 3, dtype=np.uint8)),
                                  np.array([254, 255, 0, 1, 2], np.uint8))


def test_diagonal_offset_must_be_an_integer():
    with pytest.raises(ValueError, match="integer"):  # JAX's classes for each
        fnp.eye(3, k=1.0)
    with pytest.raises(TypeError):
        fnp.tri(3, k=1.0)
    np.testing.assert_array_equal(np.asarray(fnp.eye(3, k=fnp.asarray(1))), np.eye(3, k=1))


@pytest.mark.parametrize("start,stop,num,endpoint", [
    (1.0, 128.0, 8, True), (-1.0, 1000.0, 4, True), (3.0, 7.0, 1, True), (1.0, 16.0, 4, False),
    (2.0, 5.0, 0, True)])
def test_geomspace_starts_and_ends_exactly_as_numpy(start, stop, num, endpoint):
    got = np.asarray(fnp.geomspace(start, stop, num, endpoint=endpoint))
    with np.errstate(invalid="ignore"):  # mixed signs: NaN between the ends
        want = np.geomspace(start, stop, num, endpoint=endpoint)
    assert got.shape == want.shape
    if num:
        assert got[0] == start
        if endpoint and num > 1:
            assert got[-1] == stop
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_geomspace_exact_ends_keep_array_bounds_axis_and_gradient():
    start, stop = np.array([1.0, 2.0]), np.array([8.0, 32.0])
    got = fnp.geomspace(fnp.asarray(start), fnp.asarray(stop), 3, axis=1)
    np.testing.assert_allclose(np.asarray(got), np.geomspace(start, stop, 3, axis=1), rtol=1e-6)
    grad = fluxion.grad(lambda a: fnp.geomspace(a, 8.0, 4).sum())(1.0)
    np.testing.assert_allclose(float(grad), 11 / 3, rtol=1e-5)  # JAX gives the same


def test_pad_linear_ramp_traced_end_values_carry_their_derivative():
    # Taking the concrete value of a JVP tracer dropped d(end)/dv: row 0 of the Jacobian was 0.
    x = fnp.arange(1.0, 6.0)
    ramp = lambda v: fnp.pad(v, (2, 2), mode="linear_ramp", end_values=(v[0] * 3, 1.0))
    want = np.zeros((9, 5))
    want[0, 0], want[1, 0] = 3.0, 2.0            # 3 v0, then the midpoint of 3 v0 and v0
    want[2:7] = np.eye(5)
    want[7, 4] = 0.5                              # the midpoint of v4 and 1
    for jac in (fluxion.jacfwd(ramp), fluxion.jit(fluxion.jacrev(ramp))):
        np.testing.assert_allclose(np.asarray(jac(x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fluxion.jit(ramp)(x)),
                               np.pad(np.arange(1.0, 6.0), 2, "linear_ramp", end_values=(3, 1)))


def test_pad_linear_ramp_end_values_traced_under_jit_as_numpy():
    ramp = fluxion.jit(lambda e: fnp.pad(fnp.arange(1, 6), 2, mode="linear_ramp", end_values=e))
    want = np.pad(np.arange(1, 6), 2, mode="linear_ramp", end_values=[[7.5, -3]])
    np.testing.assert_array_equal(np.asarray(ramp(fnp.asarray([[7.5, -3.0]]))), want)
    with pytest.raises(ValueError, match="end_values"):
        ramp(fnp.ones((3, 2)))


@pytest.mark.parametrize("obj", [range(2, 5), memoryview(np.arange(3, dtype=np.int16))])
def test_array_takes_ranges_and_buffers_as_jax(obj):
    got = fnp.array(obj)
    want = np.asarray(obj)
    np.testing.assert_array_equal(np.asarray(got), want)
    assert got.dtype == (np.int32 if isinstance(obj, range) else np.int16) and not got.weak_type


@pytest.mark.parametrize("obj", [b"ab", "abc", {1: 2}, (i for i in range(3))])
def test_array_refuses_non_numeric_objects_with_type_error(obj):
    with pytest.raises(TypeError):
        fnp.array(obj)


def test_pad_linear_ramp_into_integers_matches_numpy():
    x = np.arange(1, 4)
    want = np.pad(x, (3, 4), mode="linear_ramp", end_values=10)  # JAX x32: 10, 6, 3, ...
    np.testing.assert_array_equal(
        np.asarray(fnp.pad(fnp.asarray(x), (3, 4), mode="linear_ramp", end_values=10)), want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float16])
def test_geomspace_eager_runs_one_program_like_jit(dtype):
    # Op by op, float16 intermediates were rounded between ops: eager 31 where jit gave 32.
    eager = fnp.geomspace(1, 128, 8, dtype=dtype)
    jitted = fluxion.jit(lambda a, b: fnp.geomspace(a, b, 8, dtype=dtype))(1, 128)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))
    assert eager.dtype == dtype


@pytest.mark.parametrize("fn", ["linspace", "logspace"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32])
def test_spaces_eager_match_jit_with_traced_bounds(fn, dtype):
    space = getattr(fnp, fn)
    eager = space(1, 3, 11, dtype=dtype)
    jitted = fluxion.jit(lambda a, b: space(a, b, 11, dtype=dtype))(1, 3)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))
