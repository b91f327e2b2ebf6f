"""fluxion.numpy I/O and interop: .npy/.npz files, from* constructors, DLPack, printing and the
scalar/complex predicates, against jax.numpy and NumPy."""
import io

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

from _jnp_oracle import assert_matches, check, check_error, check_fn


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.complex64,
                                   ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("shape", [(), (0,), (2, 3)])
def test_save_load_roundtrip(tmp_path, dtype, shape):
    x = fnp.asarray(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape).astype(dtype))
    path = tmp_path / "x.npy"
    fnp.save(path, x)
    y = fnp.load(path)
    assert isinstance(y, fluxion.Array) and y.dtype == np.dtype(dtype) and y.shape == shape
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    assert_matches(jnp.load(path), y)


def test_savez_load(tmp_path):
    path = tmp_path / "x.npz"
    fnp.savez(path, np.arange(3), b=fnp.ones((2, 2), fnp.float32))
    with fnp.load(path) as data:
        np.testing.assert_array_equal(data["arr_0"], np.arange(3))
        np.testing.assert_array_equal(data["b"], np.ones((2, 2), np.float32))
    buf = io.BytesIO()
    fnp.save(buf, fnp.arange(4))
    buf.seek(0)
    np.testing.assert_array_equal(fnp.load(buf), np.arange(4))


def test_never_pickles(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError):
        fnp.load(path)
    with pytest.raises(ValueError):
        fnp.load(path, allow_pickle=True)
    with pytest.raises(ValueError):
        fnp.save(tmp_path / "o.npy", np.array([None], dtype=object))
    with pytest.raises(ValueError):
        fnp.save(tmp_path / "o.npy", np.arange(2), allow_pickle=True)
    with pytest.raises(ValueError):
        fnp.savez(tmp_path / "o.npz", a=np.array([None], dtype=object))


def test_frombuffer_fromstring():
    data = np.arange(6, dtype=np.int16).tobytes()
    for kwargs in ({"dtype": np.int16}, {"dtype": np.int16, "count": 2, "offset": 4},
                   {"dtype": np.uint8}):
        check("frombuffer", data, jit=False, **kwargs)
    check("frombuffer", np.arange(2.0).tobytes(), jit=False)
    check("fromstring", "1 2 3.5", sep=" ", jit=False)
    check("fromstring", "1,2,3", dtype=np.int32, sep=",", jit=False)
    check_error("fromfile", "x")
    check_error("fromiter", iter([1, 2]), float)


@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 0, 2)])
def test_fromfunction(shape):
    check_fn(lambda m: m.fromfunction(lambda *idx: sum(i * (k + 1) for k, i in enumerate(idx)),
                                      shape), jit=False)
    check_fn(lambda m: m.fromfunction(lambda i, *rest: i + 0.5 * len(rest), shape,
                                      dtype=np.int32), jit=False)
    np.testing.assert_array_equal(
        fnp.fromfunction(lambda *idx: sum(idx), shape, dtype=int),
        np.fromfunction(lambda *idx: sum(idx), shape, dtype=int))


def test_from_dlpack():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = fnp.from_dlpack(x)
    assert isinstance(y, fluxion.Array)
    np.testing.assert_array_equal(y, x)
    z = fnp.from_dlpack(y)
    np.testing.assert_array_equal(z, x)
    w = fnp.from_dlpack(jnp.arange(4, dtype=jnp.int8))
    assert w.dtype == np.int8
    np.testing.assert_array_equal(w, np.arange(4))
    # Round trip through NumPy's DLPack import of a fluxion Array.
    np.testing.assert_array_equal(np.from_dlpack(y), x)
    with pytest.raises(TypeError):
        fnp.from_dlpack([1, 2])
    device = fluxion.devices()[0]
    np.testing.assert_array_equal(fnp.from_dlpack(x, device=device), x)


def test_printing():
    x = fnp.arange(3, dtype=fnp.float32)
    assert fnp.array_repr(x) == "ArrayImpl([0., 1., 2.], dtype=float32)"  # as JAX's
    assert fnp.array_str(x) == np.array_str(np.arange(3, dtype=np.float32))
    with fnp.printoptions(precision=2):
        assert fnp.get_printoptions()["precision"] == 2
        assert "0.33" in str(fnp.asarray([1 / 3]))
    old = fnp.get_printoptions()
    try:
        fnp.set_printoptions(precision=3)
        assert np.get_printoptions()["precision"] == 3
    finally:
        np.set_printoptions(**old)


def test_predicates():
    for value in (1, 1.0, 1j, np.float32(2), np.array(3), np.array([3]), fnp.asarray(2.0),
                  fnp.arange(2), "s", None, [1], (1,)):
        assert fnp.isscalar(value) == jnp.isscalar(
            jnp.asarray(value) if isinstance(value, fluxion.Array) else value), value
        if value is not None and not isinstance(value, str):
            assert fnp.iscomplexobj(value) == jnp.iscomplexobj(
                np.asarray(value)), value
            assert fnp.isrealobj(value) == jnp.isrealobj(np.asarray(value)), value
        assert fnp.iterable(value) == np.iterable(value)
    assert fluxion.jit(lambda x: fnp.isscalar(x) and x)(1.0) == 1.0
    for x in (np.array([1 + 0j, 1 + 1j, 0j]), np.arange(3.0), 2j, 3, np.zeros((0,), np.int8),
              np.array([True])):
        check("iscomplex", x)
        check("isreal", x)


def test_numpy_names():
    assert fnp.ComplexWarning is np.exceptions.ComplexWarning
    assert fnp.object_ is np.object_ and fnp.flexible is np.flexible
    assert fnp.character is np.character
def test_bool_alias():
    assert fnp.bool is fnp.bool_ and fnp.bool(1).dtype == np.bool_


def test_from_dlpack_copy_false_on_unaligned_input_says_it_needs_a_copy():
    # JAX refuses copy=False where the input needs a copy (here: misaligned data); fluxion
    # always copies (docs/differences.md), with the same words.
    import jax
    x = np.frombuffer(bytearray(9), np.uint8)[1:].view(np.float32)  # off by one byte
    for lib in (jax, fluxion):
        with pytest.raises(ValueError, match="Specified .* which requires a copy"):
            lib.numpy.from_dlpack(x, device=lib.devices()[0], copy=False)


def test_cuda_array_interface_is_absent_off_gpu():
    for x in (jnp.arange(5), fnp.arange(5)):
        assert not hasattr(x, "__cuda_array_interface__")
        with pytest.raises(AttributeError, match="__cuda_array_interface__ is only defined for "
                                                 ".*GPU buffers"):
            x.__cuda_array_interface__
