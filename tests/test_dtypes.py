"""dtype canonicalization, weak types and type promotion, against JAX as the oracle.

Everything here traces or inspects dtypes only; nothing is compiled.
"""
import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp
from fluxion import lax as flax
from jax._src.lax import lax as jax_internal_lax  # for _convert_element_type(weak_type=True)

ALL_DTYPES = [np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64, np.complex128)]
PY_TYPES = [bool, int, float, complex]
PY_VALUES = [True, 3, 2.5, 1 + 2j]

# JAX warns when a 64-bit dtype is requested without x64; both libraries truncate it.
pytestmark = pytest.mark.filterwarnings("ignore:Explicitly requested dtype")


def _outcome(fn, *args):
    """What fn(*args) gives, or the class of the error it raises, for comparing libraries."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args)
    except Exception as e:  # the class of error is part of what is compared
        return type(e).__name__


def _mismatches(ours, theirs, keys):
    return [(k, o, t) for k, o, t in zip(keys, ours, theirs) if o != t]


# ---------------------------------------------------------------------------------------------
# Canonicalization and the dtypes of Python scalars


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_canonicalize_dtype(x64_mode, dtype):
    assert fluxion.dtypes.canonicalize_dtype(dtype) == jax.dtypes.canonicalize_dtype(dtype)


def test_canonicalize_narrows_64_bit_types_without_x64():
    with fluxion.enable_x64(False):
        assert [fluxion.dtypes.canonicalize_dtype(t) for t in
                (np.int64, np.uint64, np.float64, np.complex128)] == [
            np.int32, np.uint32, np.float32, np.complex64]
    with fluxion.enable_x64(True):
        assert fluxion.dtypes.canonicalize_dtype(np.float64) == np.float64


def test_canonicalize_rejects_unsupported_dtype():
    with pytest.raises(TypeError, match="does not support dtype"):
        fluxion.dtypes.canonicalize_dtype(np.dtype("U3"))


@pytest.mark.parametrize("value", PY_VALUES, ids=repr)
def test_python_scalar_dtype_and_weak_type(x64_mode, value):
    ours = fluxion.eval_shape(lambda v: v, value)
    theirs = jax.eval_shape(lambda v: v, value)
    assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type)
    assert fluxion.dtypes.dtype(value) == theirs.dtype


@pytest.mark.parametrize("scalar_type", PY_TYPES, ids=lambda t: t.__name__)
def test_python_scalar_type_dtype(x64_mode, scalar_type):
    assert fluxion.dtypes.dtype(scalar_type) == jnp.result_type(scalar_type)


def test_numpy_values_are_canonicalized():
    with fluxion.enable_x64(False):
        assert fluxion.eval_shape(lambda v: v, np.arange(3)).dtype == np.int32
        assert fluxion.eval_shape(lambda v: v, np.float64(1)).dtype == np.float32


def test_float0(x64_mode):
    assert fluxion.dtypes.float0 == jax.dtypes.float0
    assert fluxion.dtypes.float0.itemsize == 0
    assert fluxion.dtypes.canonicalize_dtype(fluxion.dtypes.float0) == jax.dtypes.float0
    assert fluxion.eval_shape(lambda v: v, np.zeros(2, fluxion.dtypes.float0)).dtype == \
        jax.dtypes.float0


@pytest.mark.parametrize("value", [np.zeros(2, ml_dtypes.bfloat16), np.int8(1), 1.0, 1j, True],
                         ids=repr)
def test_scalar_type_of(value):
    assert fluxion.dtypes.scalar_type_of(value) is jax.dtypes.scalar_type_of(value)


@pytest.mark.parametrize("category", [np.floating, np.inexact, np.number, np.integer,
                                      np.signedinteger, np.unsignedinteger, np.complexfloating,
                                      np.bool_, ml_dtypes.bfloat16, np.float16])
def test_issubdtype(category):
    got = [fluxion.dtypes.issubdtype(d, category) for d in ALL_DTYPES]
    want = [jnp.issubdtype(d, category) for d in ALL_DTYPES]
    assert got == want


# ---------------------------------------------------------------------------------------------
# promote_types and result_type on dtypes and Python scalar types


def test_promote_types_all_pairs(x64_mode):
    specs = ALL_DTYPES + PY_TYPES
    pairs = [(a, b) for a in specs for b in specs]
    ours = [_outcome(fnp.promote_types, a, b) for a, b in pairs]
    theirs = [_outcome(jnp.promote_types, a, b) for a, b in pairs]
    assert _mismatches(ours, theirs, pairs) == []


def test_promote_types_does_not_canonicalize():
    with fluxion.enable_x64(False):
        assert fnp.promote_types(np.int64, np.int8) == np.int64
        assert fnp.promote_types(int, int) == np.int64
        assert fnp.promote_types(np.uint32, np.int32) == np.int32


def test_result_type_of_dtypes_all_pairs(x64_mode):
    specs = ALL_DTYPES + PY_TYPES
    pairs = [(a,) for a in specs] + [(a, b) for a in specs for b in specs]
    ours = [_outcome(fnp.result_type, *p) for p in pairs]
    theirs = [_outcome(jnp.result_type, *p) for p in pairs]
    assert _mismatches(ours, theirs, pairs) == []


def test_result_type_errors():
    with pytest.raises(ValueError, match="at least one"):
        fnp.result_type()
    with pytest.raises(TypeError):
        fnp.result_type(np.dtype("O"), np.int32)
    with pytest.raises(ValueError, match="not a valid dtype"):
        fnp.promote_types(np.dtype("O"), np.int32)


def test_result_type_none_is_default_float(x64_mode):
    assert fnp.result_type(None) == jnp.result_type(None)
    assert fnp.result_type(None, np.int8) == jnp.result_type(None, np.int8)


# ---------------------------------------------------------------------------------------------
# Promotion of values: strong arrays, weak-typed arrays and Python scalars, traced in each
# library (strong and weak arrays are tracers of every canonical dtype).


def _canonical_dtypes():
    return list(dict.fromkeys(fluxion.dtypes.canonicalize_dtype(d) for d in ALL_DTYPES))


def _trace_with_operands(lib_jit_tracer, lib_lax, probe):
    """Trace `probe(operands)` where operands maps labels to values of one library."""
    dts = _canonical_dtypes()
    results = {}

    def body(*arrays):
        operands = {}
        for dt, x in zip(dts, arrays):
            operands[f"{dt.name}"] = x
            operands[f"weak {dt.name}"] = lib_lax._convert_element_type(x, dt, weak_type=True)
        operands.update({repr(v): v for v in PY_VALUES})
        results.update(probe(operands))
        return arrays[0]

    lib_jit_tracer(body)(*[np.zeros((), dt) for dt in dts])
    return results


def _both(probe_ours, probe_theirs):
    ours = _trace_with_operands(fluxion.make_jaxpr, flax, probe_ours)
    theirs = _trace_with_operands(jax.make_jaxpr, jax_internal_lax, probe_theirs)
    assert ours.keys() == theirs.keys()
    keys = list(ours)
    return _mismatches([ours[k] for k in keys], [theirs[k] for k in keys], keys)


def _result_type_probe(result_type):
    def probe(operands):
        out = {}
        for a, x in operands.items():
            out[(a,)] = _outcome(lambda v: result_type(v, return_weak_type_flag=True), x)
            for b, y in operands.items():
                out[(a, b)] = _outcome(lambda u, v: result_type(u, v, return_weak_type_flag=True),
                                       x, y)
        return out
    return probe


def test_result_type_of_values_all_pairs(x64_mode):
    assert _both(_result_type_probe(fluxion.dtypes.result_type),
                 _result_type_probe(jax.dtypes.result_type)) == []


def _dtype_and_weak(x):
    return x.dtype, x.aval.weak_type


def _add_probe(add):
    def probe(operands):
        out = {}
        for a, x in operands.items():
            for b, y in operands.items():
                both_python = not hasattr(x, "dtype") and not hasattr(y, "dtype")
                fn = add if both_python else (lambda u, v: u + v)
                out[(a, b)] = _outcome(lambda u, v: _dtype_and_weak(fn(u, v)), x, y)
        return out
    return probe


def test_binary_op_dtype_and_weak_type_all_pairs(x64_mode):
    assert _both(_add_probe(fnp.add), _add_probe(jnp.add)) == []


def test_weak_types_of_same_width_keep_their_width(x64_mode):
    # Two weak bfloat16 values stay bfloat16 (JAX joins the dtypes, then re-weakens).
    def f(lax_mod, x):
        w = lax_mod._convert_element_type(x, x.dtype, weak_type=True)
        return w + w
    ours = fluxion.eval_shape(lambda x: f(flax, x), np.zeros(2, ml_dtypes.bfloat16))
    assert (ours.dtype, ours.weak_type) == (ml_dtypes.bfloat16, True)


def test_scalar_types_compare_both_ways():
    # `np.complex64 != jnp.bfloat16` reaches the scalar type's reflected __ne__ (it raised).
    for ours, theirs in ((fnp.bfloat16, jnp.bfloat16), (fnp.float32, jnp.float32),
                         (fnp.int8, jnp.int8)):
        for other in (np.complex64, np.float32, np.int8, ml_dtypes.bfloat16):
            assert (other != ours) == (other != theirs) == (not other == ours)
            assert (ours != other) == (theirs != other)
