"""The narrow ml_dtypes types (float8, float4, int2/int4, ...) in fluxion.numpy: creation,
conversion, round trips to NumPy, promotion and the operations XLA CPU runs on them."""
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

from _jnp_oracle import assert_matches, check_fn

FLOAT8 = ["float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
          "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
          "float4_e2m1fn"]
INTN = ["int2", "int4", "uint2", "uint4"]
UNUSABLE = ["float6_e2m3fn", "float6_e3m2fn", "int1", "uint1"]
VALUES = np.array([1.0, 2.0, 0.5, 4.0, 0.0, 1.5], np.float32)


def _dt(name):
    return np.dtype(getattr(ml_dtypes, name))


@pytest.mark.parametrize("name", FLOAT8 + INTN)
def test_create_convert_roundtrip(name):
    dt = _dt(name)
    values = VALUES if name in FLOAT8 else np.array([1, 0, 1, 1, 0, 1], np.float32)
    if name == "float8_e8m0fnu":
        values = np.abs(values) + 1  # powers of two only, no zero
    host = values.astype(dt)
    x = fnp.asarray(host)
    assert x.dtype == dt and x.shape == host.shape
    np.testing.assert_array_equal(np.asarray(x).astype(np.float32), host.astype(np.float32))
    assert np.asarray(x).dtype == dt
    assert_matches(jnp.asarray(host).astype(np.float32), x.astype(np.float32))
    assert_matches(jnp.asarray(values).astype(dt).astype(np.float32),
                   fnp.asarray(values).astype(dt).astype(np.float32))
    jitted = fluxion.jit(lambda v: (v.astype(dt), v.astype(dt).astype(np.float32)))(values)
    assert jitted[0].dtype == dt
    np.testing.assert_array_equal(jitted[1], host.astype(np.float32))
    scalar_type = getattr(fnp, name)
    assert scalar_type.dtype == dt and scalar_type(1).dtype == dt
    assert fnp.zeros((2, 0), dt).shape == (2, 0)
    assert fnp.asarray(host[0]).shape == ()
    # Structural operations (not concatenation of 2-bit integers: see below).
    np.testing.assert_array_equal(np.asarray(x.reshape(2, 3).T), host.reshape(2, 3).T)
    np.testing.assert_array_equal(np.asarray(x[1:4]), host[1:4])
    np.testing.assert_array_equal(np.asarray(fnp.broadcast_to(x, (2, 6))),
                                  np.broadcast_to(host, (2, 6)))


@pytest.mark.parametrize("name", FLOAT8)
def test_float8_arithmetic_matches_jax(name):
    dt = _dt(name)
    host = (np.abs(VALUES) + 1 if name == "float8_e8m0fnu" else VALUES).astype(dt)
    for fn in (lambda a: a + a, lambda a: a * a, lambda a: a == a, lambda a: a + 1.0,
               lambda a: a > 1):
        check_fn(lambda m, a: fn(m.asarray(a)), host, jit=False)
    # JAX's max of float8_e8m0fnu is NaN (its -inf identity has no e8m0 value); ours is right.
    np.testing.assert_array_equal(np.asarray(fnp.asarray(host).max()), host.max())
    np.testing.assert_array_equal(np.asarray(fnp.asarray(host).min()), host.min())
    check_fn(lambda m, a: m.where(m.asarray(a) > 1, a, a), host)
    check_fn(lambda m, a: m.concatenate([a, a]), host)


def test_promotion():
    f8 = _dt("float8_e4m3fn")
    for x64 in (False, True):
        with jax.enable_x64(x64), fluxion.enable_x64(x64):
            assert fnp.result_type(f8, 1.0) == jnp.result_type(f8, 1.0) == f8
            assert fnp.result_type(_dt("int4"), 1) == jnp.result_type(_dt("int4"), 1)
            assert fnp.promote_types(f8, np.int32) == jnp.promote_types(f8, np.int32) == f8
            for a, b in ((f8, np.float32), (f8, _dt("float8_e5m2")), (_dt("int4"), np.int8)):
                for m in (jnp, fnp):  # both raise their TypePromotionError (a ValueError)
                    with pytest.raises(ValueError, match="promotion"):
                        m.promote_types(a, b)
    assert fnp.issubdtype(f8, fnp.floating) and fnp.issubdtype(f8, fnp.inexact)
    assert not fnp.issubdtype(f8, fnp.integer) and not fnp.issubdtype(f8, np.float16)
    assert fnp.issubdtype(f8, f8) and fnp.issubdtype(fnp.float8_e4m3fn, fnp.floating)
    assert fnp.issubdtype(_dt("int4"), fnp.signedinteger)
    assert fnp.issubdtype(_dt("uint4"), fnp.unsignedinteger)
    assert not fnp.issubdtype(_dt("int4"), fnp.floating)
    for name in FLOAT8 + INTN:
        assert fnp.issubdtype(_dt(name), np.number) == jnp.issubdtype(_dt(name), np.number)
        assert fnp.issubdtype(_dt(name), np.floating) == jnp.issubdtype(_dt(name), np.floating)
        assert fnp.issubdtype(_dt(name), np.integer) == jnp.issubdtype(_dt(name), np.integer)
    assert float(fnp.finfo(f8).max) == float(ml_dtypes.finfo(f8).max)


@pytest.mark.parametrize("name", UNUSABLE)
def test_unusable_types_raise(name):
    assert getattr(fnp, name).dtype == _dt(name)
    with pytest.raises(TypeError, match="cannot hold"):
        fnp.asarray(np.zeros(2, _dt(name)))
    with pytest.raises(TypeError):
        fnp.ones(3).astype(_dt(name))


@pytest.mark.parametrize("name", ["int2", "uint2"])
def test_two_bit_concatenate_and_sort_are_errors(name):
    # XLA CPU aborts the process compiling the concatenation, and sorts them wrongly.
    with pytest.raises(TypeError, match="concatenate"):
        fnp.concatenate([fnp.zeros(2, _dt(name))] * 2)
    with pytest.raises(TypeError, match="sort"):
        fnp.sort(fnp.zeros(2, _dt(name)))


@pytest.mark.parametrize("name", INTN)
def test_intn_arithmetic_matches_jax(name):
    host = np.array([1, 0, 1, 1, 0, 1], np.int8).astype(_dt(name))
    for fn in (lambda a: a + a, lambda a: a * a, lambda a: a == a, lambda a: a < a,
               lambda a: a.max(), lambda a: a.min(), lambda a: a & a, lambda a: a + 1,
               lambda a: a // (a + 1)):
        check_fn(lambda m, a: fn(m.asarray(a)), host, jit=False)
    check_fn(lambda m, a: m.where(m.asarray(a) > 0, a, a), host)
    if name in ("int4", "uint4"):
        check_fn(lambda m, a: m.sort(a), host)
        check_fn(lambda m, a: m.dot(a, a), host)
        check_fn(lambda m, a: m.concatenate([a, a]), host)
        check_fn(lambda m, a: m.asarray(a).argmax(), host)


def test_narrow_dtypes_do_not_import_jax():
    code = ("import sys, numpy as np, ml_dtypes, fluxion.numpy as jnp\n"
            "x = jnp.asarray(np.ones(3, ml_dtypes.float8_e4m3fn))\n"
            "y = jnp.asarray(np.ones(3, ml_dtypes.int4))\n"
            "np.asarray(x); np.asarray(y)\n"
            "assert 'jax' not in sys.modules, 'jax imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=".")
